//! The `env` provider: secrets from rlp's own environment.

use crate::bundle::capability::SecretId;
use crate::secrets::{Lookup, Provider, ProviderError, SecretValue};

/// Reads each secret from the environment variable [`SecretId::env_var`]
/// names (`runloop/mail/smtp_api_key` → `RUNLOOP_MAIL__SMTP_API_KEY`), then,
/// for an id whose earlier name no other id shares
/// ([`SecretId::legacy_env_var_is_unique`]), from that name
/// (`runloop/github/token` → `RUNLOOP_GITHUB_TOKEN`). An empty variable
/// counts as unset.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct EnvProvider;

/// rlp's own settings: never read as a secret, whatever id names them
/// (`runloop/system/config` once read `RUNLOOP_SYSTEM_CONFIG`).
const SETTINGS: [&str; 3] = [crate::home::HOME_ENV, crate::config::SYSTEM_CONFIG_ENV, crate::config::CONFIRM_ENV];

/// Whether `id`'s earlier, shared variable name is still read for it.
fn reads_legacy_name(id: &SecretId) -> bool {
    id.legacy_env_var_is_unique() && id.legacy_env_var().is_some_and(|name| !SETTINGS.contains(&name.as_str()))
}

/// The value of environment variable `name` holding secret `id`.
fn read_env(name: &str, id: &SecretId) -> Result<Option<SecretValue>, ProviderError> {
    match std::env::var_os(name) {
        None => Ok(None),
        Some(raw) if raw.is_empty() => Ok(None),
        Some(raw) => match raw.into_string() {
            Ok(value) => Ok(Some(SecretValue::new(value))),
            Err(_) => Err(ProviderError::new(
                format!("the environment variable {name} holding secret `{id}` is not UTF-8"),
                format!("set {name} to a UTF-8 value"),
            )),
        },
    }
}

impl Provider for EnvProvider {
    fn name(&self) -> &'static str {
        "env"
    }

    fn lookup(&self, id: &SecretId) -> Result<Lookup, ProviderError> {
        let name = id.env_var();
        let found = match read_env(&name, id)? {
            None => match id.legacy_env_var() {
                Some(legacy) if reads_legacy_name(id) => read_env(&legacy, id)?,
                _ => None,
            },
            found => found,
        };
        if let Some(value) = found {
            return Ok(Lookup::Found(value));
        }
        // When the id's earlier, shared name is set, say that it is no
        // longer read (without its value).
        let stale = id
            .legacy_env_var()
            .filter(|legacy| !reads_legacy_name(id) && std::env::var_os(legacy).is_some_and(|v| !v.is_empty()));
        Ok(Lookup::Missing {
            why: match stale {
                Some(legacy) => format!("{name} is not set ({legacy} is, but that name is shared by several ids)"),
                None => format!("{name} is not set"),
            },
            how: format!("set the environment variable {name}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_variable() {
        let id: SecretId = "runloop/test/unset_secret_for_unit_test".parse().unwrap();
        let Ok(Lookup::Missing { why, how }) = EnvProvider.lookup(&id) else { panic!("found") };
        assert_eq!(why, "RUNLOOP_TEST__UNSET_SECRET_FOR_UNIT_TEST is not set");
        assert_eq!(how, "set the environment variable RUNLOOP_TEST__UNSET_SECRET_FOR_UNIT_TEST");
    }

    #[test]
    fn rlp_settings_are_never_read_as_secrets() {
        let id: SecretId = "runloop/system/config".parse().unwrap();
        assert!(id.legacy_env_var_is_unique());
        assert_eq!(id.legacy_env_var().unwrap(), crate::config::SYSTEM_CONFIG_ENV);
        assert!(!reads_legacy_name(&id));
        assert!(reads_legacy_name(&"runloop/github/token".parse().unwrap()));
    }
}
