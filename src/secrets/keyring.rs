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
use std::sync::{Arc, OnceLock, mpsc};
use std::time::Duration;

use keyring_core::api::CredentialStore;
use keyring_core::{Entry, Error};

use crate::bundle::capability::SecretId;
use crate::secrets::{Lookup, Provider, ProviderError, SecretValue};

/// The `service` attribute of rlp's items.
const SERVICE: &str = "rlp";

/// How long one exchange with the Secret Service (connecting included) may
/// take. D-Bus has no deadline of its own: a service that never answers
/// would hold the call forever.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// Why there is no connection.
#[derive(Clone, Debug)]
enum Unreachable {
    /// No Secret Service runs (no session bus, or nothing on it): the
    /// provider is skipped.
    Absent(String),
    /// The bus or the service did not answer in time: the provider fails.
    Silent,
}

/// The Secret Service, connected on first use.
#[derive(Default)]
pub(crate) struct Keyring {
    store: OnceLock<Result<Arc<CredentialStore>, Unreachable>>,
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

/// The error of a Secret Service that did not answer within [`ANSWER_WITHIN`].
fn silent() -> ProviderError {
    ProviderError::new(
        format!("the keyring did not answer within {} s", ANSWER_WITHIN.as_secs()),
        "check the Secret Service (it may wait for an unlock prompt no one sees), or use another provider",
    )
}

/// Runs `exchange` on a thread of its own and waits at most
/// [`ANSWER_WITHIN`] for it; `None` when it did not finish (the thread is
/// left to the service, which holds it).
fn within_deadline<T: Send + 'static>(exchange: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (answer, answered) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("rlp-keyring".into())
        .spawn(move || {
            let _ = answer.send(exchange());
        })
        .ok()?;
    answered.recv_timeout(ANSWER_WITHIN).ok()
}

impl Keyring {
    /// A keyring, connected when first used.
    pub(crate) fn new() -> Self {
        Keyring::default()
    }

    /// The connection, or why there is none.
    fn store(&self) -> Result<&Arc<CredentialStore>, &Unreachable> {
        self.store
            .get_or_init(|| {
                let connected = within_deadline(|| {
                    zbus_secret_service_keyring_store::Store::new().map(|store| store as Arc<CredentialStore>)
                });
                match connected {
                    None => Err(Unreachable::Silent),
                    Some(Ok(store)) => Ok(store),
                    Some(Err(Error::PlatformFailure(inner) | Error::NoStorageAccess(inner))) => {
                        Err(Unreachable::Absent(format!("no Secret Service is running ({inner})")))
                    }
                    Some(Err(_)) => Err(Unreachable::Absent("no Secret Service is running".to_string())),
                }
            })
            .as_ref()
    }

    /// The connection, for writing: its absence is an error.
    fn writable(&self) -> Result<Arc<CredentialStore>, ProviderError> {
        match self.store() {
            Ok(store) => Ok(store.clone()),
            Err(Unreachable::Silent) => Err(silent()),
            Err(Unreachable::Absent(why)) => Err(ProviderError::new(
                format!("cannot reach the keyring: {why}"),
                "run inside a desktop session with a Secret Service (GNOME Keyring, KWallet, KeePassXC), or use the file store",
            )),
        }
    }

    /// Runs `exchange` with the entry of `id`, within the deadline.
    fn with_entry<T: Send + 'static>(
        store: Arc<CredentialStore>,
        id: &SecretId,
        exchange: impl FnOnce(Entry) -> Result<T, Error> + Send + 'static,
    ) -> Result<Result<T, Error>, ProviderError> {
        let user = id.as_str().to_string();
        within_deadline(move || Entry::new_in_store(&store, SERVICE, &user).and_then(exchange)).ok_or_else(silent)
    }

    /// Stores `value` under `id`, replacing an earlier one.
    pub(crate) fn set(&self, id: &SecretId, value: &SecretValue) -> Result<(), ProviderError> {
        let value = value.clone();
        Self::with_entry(self.writable()?, id, move |entry| entry.set_password(value.expose()))?
            .map_err(|e| failure("store", Some(id), &e))
    }

    /// Removes `id`; false when it was not there.
    pub(crate) fn remove(&self, id: &SecretId) -> Result<bool, ProviderError> {
        match Self::with_entry(self.writable()?, id, |entry| entry.delete_credential())? {
            Ok(()) => Ok(true),
            Err(Error::NoEntry) => Ok(false),
            Err(e) => Err(failure("remove", Some(id), &e)),
        }
    }

    /// The ids of rlp's items.
    pub(crate) fn ids(&self) -> Result<Vec<SecretId>, ProviderError> {
        let store = self.writable()?;
        let found = within_deadline(move || {
            let spec = HashMap::from([("service", SERVICE)]);
            store.search(&spec).map(|entries| {
                entries
                    .iter()
                    .filter_map(|entry| entry.get_attributes().ok()?.get("username")?.parse::<SecretId>().ok())
                    .collect::<Vec<_>>()
            })
        });
        let mut ids = found.ok_or_else(silent)?.map_err(|e| failure("list the items", None, &e))?;
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    /// The value of `id`, or why the keyring does not give it.
    fn get(&self, id: &SecretId) -> Result<Lookup, ProviderError> {
        let how = format!("run `rlp secrets set --provider keyring {id}`");
        let store = match self.store() {
            Ok(store) => store.clone(),
            Err(Unreachable::Silent) => return Err(silent()),
            Err(Unreachable::Absent(why)) => return Ok(Lookup::Missing { why: format!("skipped: {why}"), how }),
        };
        match Self::with_entry(store, id, |entry| entry.get_password())? {
            Ok(value) => Ok(Lookup::Found(SecretValue::new(value))),
            Err(Error::NoEntry) => Ok(Lookup::Missing { why: "not in the keyring".to_string(), how }),
            Err(e) => Err(failure("read", Some(id), &e)),
        }
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
        self.keyring.get(id)
    }
}
