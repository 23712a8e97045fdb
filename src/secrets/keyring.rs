//! The `keyring` provider: the desktop's Secret Service (GNOME Keyring,
//! KWallet, KeePassXC) over D-Bus, through the keyring crate family.
//!
//! Each secret is an item with the attributes `service = rlp` and
//! `username = <secret id>`, so `secret-tool store --label=… service rlp
//! username runloop/mail/key` adds one by hand. Where no Secret Service
//! runs (a server, a container, CI), the provider says so and the next
//! provider is asked. The crate's errors that carry the stored bytes are
//! never printed.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use keyring_core::api::CredentialStore;
use keyring_core::{Entry, Error};

use crate::bundle::capability::SecretId;
use crate::secrets::{Lookup, Provider, ProviderError, SecretValue};

/// The `service` attribute of rlp's items.
const SERVICE: &str = "rlp";

/// The Secret Service, connected on first use.
#[derive(Default)]
pub(crate) struct Keyring {
    store: OnceLock<Result<Arc<CredentialStore>, String>>,
}

/// A failure of the Secret Service, without the bytes some errors carry.
fn failure(what: &str, id: Option<&SecretId>, e: &Error) -> ProviderError {
    let detail = match e {
        Error::PlatformFailure(inner) | Error::NoStorageAccess(inner) => inner.to_string(),
        Error::BadEncoding(_) => "the stored value is not UTF-8 text".to_string(),
        Error::BadDataFormat(_, _) => "the stored value is not in the expected format".to_string(),
        Error::Ambiguous(entries) => format!("{} items match", entries.len()),
        Error::TooLong(field, limit) => format!("{field} is longer than {limit}"),
        Error::Invalid(field, why) => format!("{field}: {why}"),
        _ => "the Secret Service refused".to_string(),
    };
    let on = id.map(|id| format!(" `{id}`")).unwrap_or_default();
    ProviderError::new(
        format!("cannot {what}{on} in the keyring: {detail}"),
        "unlock the keyring (log in to the desktop session), or fix the item with `secret-tool`",
    )
}

impl Keyring {
    /// A keyring, connected when first used.
    pub(crate) fn new() -> Self {
        Keyring::default()
    }

    /// The connection, or why there is none.
    fn store(&self) -> Result<&Arc<CredentialStore>, &str> {
        self.store
            .get_or_init(|| {
                zbus_secret_service_keyring_store::Store::new().map(|store| store as Arc<CredentialStore>).map_err(
                    |e| match e {
                        Error::PlatformFailure(inner) | Error::NoStorageAccess(inner) => {
                            format!("no Secret Service is running ({inner})")
                        }
                        _ => "no Secret Service is running".to_string(),
                    },
                )
            })
            .as_ref()
            .map_err(String::as_str)
    }

    /// The connection, for writing: its absence is an error.
    fn writable(&self) -> Result<&Arc<CredentialStore>, ProviderError> {
        self.store().map_err(|why| {
            ProviderError::new(
                format!("cannot reach the keyring: {why}"),
                "run inside a desktop session with a Secret Service (GNOME Keyring, KWallet, KeePassXC), or use the file store",
            )
        })
    }

    fn entry(store: &Arc<CredentialStore>, id: &SecretId) -> Result<Entry, ProviderError> {
        Entry::new_in_store(store, SERVICE, id.as_str()).map_err(|e| failure("name", Some(id), &e))
    }

    /// Stores `value` under `id`, replacing an earlier one.
    pub(crate) fn set(&self, id: &SecretId, value: &SecretValue) -> Result<(), ProviderError> {
        Self::entry(self.writable()?, id)?.set_password(value.expose()).map_err(|e| failure("store", Some(id), &e))
    }

    /// Removes `id`; false when it was not there.
    pub(crate) fn remove(&self, id: &SecretId) -> Result<bool, ProviderError> {
        match Self::entry(self.writable()?, id)?.delete_credential() {
            Ok(()) => Ok(true),
            Err(Error::NoEntry) => Ok(false),
            Err(e) => Err(failure("remove", Some(id), &e)),
        }
    }

    /// The ids of rlp's items.
    pub(crate) fn ids(&self) -> Result<Vec<SecretId>, ProviderError> {
        let store = self.writable()?;
        let spec = HashMap::from([("service", SERVICE)]);
        let entries = store.search(&spec).map_err(|e| failure("list the items", None, &e))?;
        let mut ids: Vec<SecretId> =
            entries.iter().filter_map(|entry| entry.get_attributes().ok()?.get("username")?.parse().ok()).collect();
        ids.sort();
        ids.dedup();
        Ok(ids)
    }
}

/// Answers from the keyring.
pub(crate) struct KeyringProvider {
    keyring: Keyring,
}

impl KeyringProvider {
    /// A provider asking the Secret Service.
    pub(crate) fn new() -> Self {
        KeyringProvider { keyring: Keyring::new() }
    }
}

impl Provider for KeyringProvider {
    fn name(&self) -> &'static str {
        "keyring"
    }

    fn lookup(&self, id: &SecretId) -> Result<Lookup, ProviderError> {
        let how = format!("run `rlp secrets set --provider keyring {id}`");
        let store = match self.keyring.store() {
            Ok(store) => store,
            Err(why) => return Ok(Lookup::Missing { why: format!("skipped: {why}"), how }),
        };
        match Keyring::entry(store, id)?.get_password() {
            Ok(value) => Ok(Lookup::Found(SecretValue::new(value))),
            Err(Error::NoEntry) => Ok(Lookup::Missing { why: "not in the keyring".to_string(), how }),
            Err(e) => Err(failure("read", Some(id), &e)),
        }
    }
}
