//! The runtime home (`$RUNLOOP_HOME`, default `~/.runloop`) and its layout.
//!
//! What is in the home decides what rlp runs and trusts (its config, trust
//! policy, installed agents, trust verdicts), so rlp makes every folder of
//! it private (0700, whatever the umask) and uses no home whose folders
//! another user can change.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::{Exit, Reportable};

/// The environment variable naming the runtime home.
pub const HOME_ENV: &str = "RUNLOOP_HOME";

/// Largest operator override file read (`caps/overrides/<agent>.toml`): 1 MiB,
/// like a bundle's policy file.
pub const MAX_OVERRIDE_BYTES: u64 = 1 << 20;

/// How deep below the home [`Home::resolve`] checks folders: the home's
/// own folders and the ones in them (installed agents, trust verdicts,
/// operator overrides).
const CHECKED_DEPTH: usize = 2;

/// A runtime home that rlp does not use (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum HomeError {
    /// Neither `--home` nor `$RUNLOOP_HOME` names the home, and `HOME` is
    /// unset, empty or relative: `~/.runloop` would be a folder of the
    /// current folder, which a checkout could supply.
    #[error(
        "{}: the default runtime home ~/.runloop needs it (rlp never takes its home from the current folder)",
        describe_user_home(value.as_deref())
    )]
    NoUserHome {
        /// `HOME`, if set.
        value: Option<PathBuf>,
    },
    /// A folder of the home that group or others may write.
    #[error(
        "{} is writable by group or others (mode {mode:04o}): they could change what rlp runs and trusts from this \
         runtime home",
        path.display()
    )]
    Shared {
        /// The folder.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A folder of the home that belongs to another user.
    #[error(
        "{} belongs to another user (uid {uid}): they could change what rlp runs and trusts from this runtime home",
        path.display()
    )]
    Owned {
        /// The folder.
        path: PathBuf,
        /// Its owner.
        uid: u32,
    },
}

impl Reportable for HomeError {
    fn class(&self) -> Exit {
        Exit::Usage
    }

    fn help(&self) -> Option<String> {
        Some(match self {
            HomeError::NoUserHome { .. } => {
                format!("set HOME to your home folder, or name the runtime home: --home DIR or {HOME_ENV}=DIR")
            }
            HomeError::Shared { path, .. } => format!(
                "take the write access of others away (`chmod go-w {}`; rlp makes the folders of its home 0700), \
                 or use another home (--home DIR or {HOME_ENV})",
                path.display()
            ),
            HomeError::Owned { .. } => format!("use a home of your own (--home DIR or {HOME_ENV})"),
        })
    }
}

/// What is wrong with `HOME` (its value, if set) as the place of the default home.
fn describe_user_home(value: Option<&Path>) -> String {
    match value {
        None => "HOME is not set".to_string(),
        Some(path) if path.as_os_str().is_empty() => "HOME is empty".to_string(),
        Some(path) => format!("HOME (`{}`) is not an absolute path", path.display()),
    }
}

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

    /// `--home`, else `$RUNLOOP_HOME`, else `~/.runloop` (`HOME` must then be
    /// an absolute path: a home is never taken from the current folder);
    /// refused when other users can change it ([`HomeError`]).
    pub fn resolve(flag: Option<&Path>) -> Result<Self, HomeError> {
        let home = if let Some(dir) = flag {
            Self::new(dir)
        } else if let Some(dir) = std::env::var_os(HOME_ENV).filter(|v| !v.is_empty()) {
            Self::new(PathBuf::from(dir))
        } else {
            match std::env::var_os("HOME").map(PathBuf::from) {
                Some(user_home) if user_home.is_absolute() => Self::new(user_home.join(".runloop")),
                value => return Err(HomeError::NoUserHome { value }),
            }
        };
        home.check_private()?;
        Ok(home)
    }

    /// Refuses a home that another user can change: the home, a folder in
    /// it, or a folder in one of those (`agents/<name>`, `cache/trust`,
    /// `caps/overrides`) that group or others may write, or that belongs to
    /// a user other than this one or root. Links are followed, as rlp
    /// follows them to use the folders. A home that does not exist yet is
    /// no problem: rlp creates it private.
    fn check_private(&self) -> Result<(), HomeError> {
        let me = rustix::process::geteuid().as_raw();
        let mut level = vec![self.root.clone()];
        for depth in 0..=CHECKED_DEPTH {
            let mut below = Vec::new();
            for dir in level {
                let Ok(meta) = fs::metadata(&dir) else { continue };
                if !meta.is_dir() {
                    continue;
                }
                if meta.mode() & 0o022 != 0 {
                    return Err(HomeError::Shared { path: dir, mode: meta.mode() & 0o7777 });
                }
                if meta.uid() != me && meta.uid() != 0 {
                    return Err(HomeError::Owned { path: dir, uid: meta.uid() });
                }
                if depth < CHECKED_DEPTH {
                    let entries = fs::read_dir(&dir).into_iter().flatten().filter_map(Result::ok);
                    below.extend(entries.map(|entry| entry.path()));
                }
            }
            level = below;
        }
        Ok(())
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
