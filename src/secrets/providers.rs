//! The configured providers, asked in order.

use std::fmt;

use crate::bundle::capability::SecretId;
use crate::config::ConfigError;
use crate::config::secrets::{ProviderKind, SecretsConfig};
use crate::home::Home;
use crate::secrets::command::CommandProvider;
use crate::secrets::env::EnvProvider;
use crate::secrets::store::{AskPassphrase, FileProvider, Store};
use crate::secrets::{Lookup, Provider, Resolution, SecretError, SecretResolver};

/// The providers `[secrets] providers` names, in its order.
pub struct Providers {
    list: Vec<Box<dyn Provider>>,
}

impl fmt::Debug for Providers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.list.iter().map(|p| p.name())).finish()
    }
}

impl Default for Providers {
    /// The environment alone (the default of `[secrets] providers`).
    fn default() -> Self {
        Providers { list: vec![Box::new(EnvProvider)] }
    }
}

impl Providers {
    /// The providers `config` names, for the runtime home `home`; `ask`
    /// asks for the file store's passphrase when it needs one. A provider
    /// named but not set up (`cmd` without `[secrets.cmd]`, `keyring` in a
    /// build without it) is an error.
    pub(crate) fn configured(
        home: &Home,
        config: &SecretsConfig,
        ask: AskPassphrase,
    ) -> Result<Providers, ConfigError> {
        let named_in = config.providers.source.shown("secrets");
        let mut list: Vec<Box<dyn Provider>> = Vec::new();
        for kind in &config.providers.value {
            list.push(match kind {
                ProviderKind::Env => Box::new(EnvProvider),
                ProviderKind::File => {
                    Box::new(FileProvider::new(Store::of_home(home, config.file.clone(), ask.clone())))
                }
                ProviderKind::Cmd => match &config.cmd {
                    Some(command) => Box::new(CommandProvider::new(command.clone())),
                    None => {
                        return Err(ConfigError {
                            message: format!("the `cmd` secret provider is named in {named_in} but has no command"),
                            help: "add `[secrets.cmd]` with `command = [\"pass\", \"show\", \"{id}\"]` to config.toml"
                                .to_string(),
                        });
                    }
                },
                ProviderKind::Keyring => keyring_provider(&named_in)?,
            });
        }
        Ok(Providers { list })
    }
}

#[cfg(feature = "keyring")]
fn keyring_provider(_named_in: &str) -> Result<Box<dyn Provider>, ConfigError> {
    Ok(Box::new(crate::secrets::keyring::KeyringProvider::new()))
}

#[cfg(not(feature = "keyring"))]
fn keyring_provider(named_in: &str) -> Result<Box<dyn Provider>, ConfigError> {
    Err(ConfigError {
        message: format!("the `keyring` secret provider is named in {named_in}, but this rlp was built without it"),
        help: "build rlp with `--features keyring`, or use the `file` or `cmd` provider".to_string(),
    })
}

impl SecretResolver for Providers {
    fn resolve(&self, id: &SecretId) -> Result<Resolution, SecretError> {
        let mut why = Vec::new();
        let mut how = Vec::new();
        for provider in &self.list {
            let name = provider.name();
            match provider.lookup(id) {
                Ok(Lookup::Found(value)) => return Ok(Resolution::Found { value, provider: name }),
                Ok(Lookup::Missing { why: w, how: h }) => {
                    why.push(format!("{name}: {w}"));
                    how.push(h);
                }
                Err(e) => {
                    return Err(SecretError {
                        provider: name,
                        message: format!("the `{name}` secret provider failed for `{id}`: {}", e.message),
                        help: e.help,
                    });
                }
            }
        }
        Ok(Resolution::Missing { why: why.join("; "), how: how.join(", or ") })
    }
}
