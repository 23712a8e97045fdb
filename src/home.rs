//! The runtime home (`$RUNLOOP_HOME`, default `~/.runloop`) and its layout.

use std::path::{Path, PathBuf};

/// The environment variable naming the runtime home.
pub const HOME_ENV: &str = "RUNLOOP_HOME";

/// Largest operator override file read (`caps/overrides/<agent>.toml`): 1 MiB,
/// like a bundle's policy file.
pub const MAX_OVERRIDE_BYTES: u64 = 1 << 20;

/// Paths inside one runtime home. Nothing outside it is written by commands
/// that take `--home`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    /// The home at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// `--home`, else `$RUNLOOP_HOME`, else `~/.runloop`.
    pub fn resolve(flag: Option<&Path>) -> Self {
        if let Some(dir) = flag {
            return Self::new(dir);
        }
        if let Some(dir) = std::env::var_os(HOME_ENV).filter(|v| !v.is_empty()) {
            return Self::new(PathBuf::from(dir));
        }
        let user_home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
        Self::new(user_home.join(".runloop"))
    }

    /// The home folder itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `config.toml`.
    pub fn config_file(&self) -> PathBuf {
        self.root.join("config.toml")
    }

    /// `trust-policy.toml`.
    pub fn trust_policy_file(&self) -> PathBuf {
        self.root.join("trust-policy.toml")
    }

    /// `caps/overrides/<agent>.toml`.
    pub fn override_file(&self, agent: &str) -> PathBuf {
        self.root.join("caps").join("overrides").join(format!("{agent}.toml"))
    }

    /// `agents/`: installed bundles.
    pub fn agents_dir(&self) -> PathBuf {
        self.root.join("agents")
    }

    /// `schemas/`: the home's shared schema registry, searched after the
    /// folders of `[schemas] registries`.
    pub fn schemas_dir(&self) -> PathBuf {
        self.root.join("schemas")
    }

    /// `secrets/`.
    pub fn secrets_dir(&self) -> PathBuf {
        self.root.join("secrets")
    }

    /// `secrets/store.age`: the encrypted secret store (`rlp secrets set`).
    pub fn secret_store_file(&self) -> PathBuf {
        self.secrets_dir().join("store.age")
    }

    /// `pog/events.sqlite`: the knowledge base.
    pub fn ledger_file(&self) -> PathBuf {
        self.root.join("pog").join("events.sqlite")
    }

    /// The home's key folder (`keys/`).
    pub fn keys_dir(&self) -> PathBuf {
        self.root.join("keys")
    }

    /// The secret key that signs this home's ledger checkpoints (`keys/ledger.key`).
    pub fn ledger_key_file(&self) -> PathBuf {
        self.keys_dir().join("ledger.key")
    }

    /// Its public half (`keys/ledger.pub`): checkpoints it signed are trusted here.
    pub fn ledger_public_key_file(&self) -> PathBuf {
        self.keys_dir().join("ledger.pub")
    }
}
