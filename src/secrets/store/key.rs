//! The store's key: an X25519 identity file, or a passphrase.
//!
//! The identity file is age's own format (`AGE-SECRET-KEY-1…` after `#`
//! comments), so `age -d -i identity.txt store.age` reads the store too. It
//! is created, mode 0600, when the first secret is set, and refused when
//! group or others may read it. A passphrase comes from `passphrase_command`
//! or a hidden prompt, once per process.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};

use age::secrecy::{ExposeSecret, SecretString};
use age::{DecryptError, Decryptor, Encryptor};
use zeroize::Zeroizing;

use crate::config::secrets::{DEFAULT_COMMAND_TIMEOUT, StoreKey};
use crate::fsutil::{PrivateFileError, read_private, write_atomic};
use crate::secrets::command::{Ran, run_for_value};
use crate::secrets::{ProviderError, SecretValue};

/// Largest identity file read.
const MAX_IDENTITY_BYTES: u64 = 64 * 1024;

/// Asks a person for a passphrase (`prompt`; twice when `confirm`), or
/// says why it cannot.
pub(crate) type AskPassphrase = Arc<dyn Fn(&str, bool) -> Result<SecretValue, String> + Send + Sync>;

/// How the store is encrypted and decrypted.
pub(crate) struct Key {
    kind: StoreKey,
    identity_file: PathBuf,
    ask: AskPassphrase,
    /// The passphrase once obtained (asked once per process).
    passphrase: Mutex<Option<SecretValue>>,
}

fn damaged(store: &Path, why: impl std::fmt::Display) -> ProviderError {
    ProviderError::new(
        format!("{} cannot be read: {why}", store.display()),
        "restore the file from a backup, or move it aside and set the secrets again with `rlp secrets set`",
    )
}

impl Key {
    /// The key `kind` describes; the identity is `identity_file`.
    pub(crate) fn new(kind: StoreKey, identity_file: PathBuf, ask: AskPassphrase) -> Key {
        Key { kind, identity_file, ask, passphrase: Mutex::new(None) }
    }

    /// The identity file's path.
    pub(crate) fn identity_file(&self) -> &Path {
        &self.identity_file
    }

    /// Whether the key is a passphrase.
    fn is_passphrase(&self) -> bool {
        matches!(self.kind, StoreKey::Passphrase { .. })
    }

    /// Decrypts `ciphertext`, read from `store`: all of it or an error,
    /// never a part.
    pub(crate) fn decrypt(&self, ciphertext: &[u8], store: &Path) -> Result<Zeroizing<Vec<u8>>, ProviderError> {
        let decryptor = Decryptor::new_buffered(ciphertext).map_err(|e| damaged(store, describe(&e)))?;
        if decryptor.is_scrypt() != self.is_passphrase() {
            let (is, configured) =
                if decryptor.is_scrypt() { ("a passphrase", "identity") } else { ("an identity", "passphrase") };
            return Err(ProviderError::new(
                format!("{} is encrypted with {is}, but [secrets.file] key is \"{configured}\"", store.display()),
                format!(
                    "set `key = \"{}\"` under [secrets.file] in config.toml",
                    if self.is_passphrase() { "identity" } else { "passphrase" }
                ),
            ));
        }
        let mut reader = match &self.kind {
            StoreKey::Identity => {
                let identities = self.identities()?;
                decryptor.decrypt(identities.iter().map(|i| i as &dyn age::Identity))
            }
            StoreKey::Passphrase { .. } => {
                let identity = age::scrypt::Identity::new(self.passphrase(false)?);
                decryptor.decrypt(std::iter::once(&identity as &dyn age::Identity))
            }
        }
        .map_err(|e| match e {
            DecryptError::NoMatchingKeys | DecryptError::DecryptionFailed if !self.is_passphrase() => {
                ProviderError::new(
                    format!("{} was not encrypted for the identity {}", store.display(), self.identity_file.display()),
                    "use the identity file the store was made with (restore it from a backup)",
                )
            }
            DecryptError::NoMatchingKeys | DecryptError::DecryptionFailed => {
                *self.passphrase.lock().unwrap_or_else(PoisonError::into_inner) = None;
                ProviderError::new(
                    format!("the passphrase does not open {}", store.display()),
                    "give the passphrase the store was made with",
                )
            }
            e => damaged(store, describe(&e)),
        })?;
        // The plaintext is never longer than the ciphertext: the buffer never grows.
        let mut plain = Zeroizing::new(Vec::with_capacity(ciphertext.len()));
        reader.read_to_end(&mut plain).map_err(|e| damaged(store, format!("it is damaged or cut short ({e})")))?;
        Ok(plain)
    }

    /// Encrypts `plain` for the key; `creating` when there is no store yet
    /// (an identity is made, a new passphrase is asked twice).
    pub(crate) fn encrypt(&self, plain: &[u8], creating: bool) -> Result<Vec<u8>, ProviderError> {
        let encryptor = match &self.kind {
            StoreKey::Identity => {
                if creating && !self.identity_file.exists() {
                    self.create_identity()?;
                }
                let recipients: Vec<age::x25519::Recipient> =
                    self.identities()?.iter().map(|i| i.to_public()).collect();
                Encryptor::with_recipients(recipients.iter().map(|r| r as &dyn age::Recipient)).map_err(|e| {
                    ProviderError::new(format!("cannot encrypt the store: {e}"), "check the identity file")
                })?
            }
            StoreKey::Passphrase { .. } => Encryptor::with_user_passphrase(self.passphrase(creating)?),
        };
        let mut out = Vec::with_capacity(plain.len() + 1024);
        let mut writer = encryptor.wrap_output(&mut out).map_err(encrypt_error)?;
        writer.write_all(plain).map_err(encrypt_error)?;
        writer.finish().map_err(encrypt_error)?;
        Ok(out)
    }

    /// The identities of the identity file.
    fn identities(&self) -> Result<Vec<age::x25519::Identity>, ProviderError> {
        let shown = self.identity_file.display();
        let bytes = Zeroizing::new(read_private(&self.identity_file, MAX_IDENTITY_BYTES).map_err(|e| match e {
            PrivateFileError::Shared(mode) => ProviderError::new(
                format!("{shown} may be read by other users (mode {mode:04o})"),
                format!("run `chmod 600 {shown}`"),
            ),
            e if matches!(&e, PrivateFileError::Read(r) if r.is_not_found()) => ProviderError::new(
                format!("the store's identity {shown} is missing"),
                "restore it from a backup: without it the store cannot be decrypted",
            ),
            e => ProviderError::new(format!("cannot read {shown}: {e}"), "check the file"),
        })?);
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| ProviderError::new(format!("{shown} is not text"), "restore it from a backup"))?;
        let identities = text
            .lines()
            .map(str::trim)
            .enumerate()
            .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
            .map(|(n, line)| {
                age::x25519::Identity::from_str(line).map_err(|_| {
                    ProviderError::new(
                        format!("{shown}:{}: not an age identity (AGE-SECRET-KEY-1…)", n + 1),
                        "restore the file from a backup",
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if identities.is_empty() {
            return Err(ProviderError::new(format!("{shown} holds no identity"), "restore the file from a backup"));
        }
        Ok(identities)
    }

    /// Writes a new identity file, mode 0600.
    fn create_identity(&self) -> Result<(), ProviderError> {
        let identity = age::x25519::Identity::generate();
        let text = Zeroizing::new(format!(
            "# created: {}\n# public key: {}\n{}\n",
            crate::text::format_ts(crate::event::now_ms()),
            identity.to_public(),
            identity.to_string().expose_secret()
        ));
        write_atomic(&self.identity_file, text.as_bytes(), Some(0o600)).map_err(|e| {
            ProviderError::new(
                format!("cannot write {}: {e}", self.identity_file.display()),
                "check that the runtime home is writable",
            )
        })
    }

    /// The passphrase: remembered, else from the command, else asked.
    fn passphrase(&self, confirm: bool) -> Result<SecretString, ProviderError> {
        let mut kept = self.passphrase.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = kept.as_ref() {
            return Ok(SecretString::from(known.expose().to_string()));
        }
        let value = match &self.kind {
            StoreKey::Passphrase { command: Some(argv) } => {
                let shown = argv.join(" ");
                match run_for_value(argv, &[], DEFAULT_COMMAND_TIMEOUT, &shown)? {
                    Ran::Printed(value) => value,
                    Ran::NoValue(why) => {
                        return Err(ProviderError::new(
                            format!("the store's passphrase command gave no passphrase: {why}"),
                            "fix `passphrase_command` under [secrets.file] in config.toml",
                        ));
                    }
                }
            }
            _ => (self.ask)("Passphrase of the secret store", confirm).map_err(|why| {
                ProviderError::new(
                    format!("the secret store is protected by a passphrase, and it cannot be asked for: {why}"),
                    "run on a terminal, or set `passphrase_command` under [secrets.file] in config.toml",
                )
            })?,
        };
        let secret = SecretString::from(value.expose().to_string());
        *kept = Some(value);
        Ok(secret)
    }
}

fn encrypt_error(e: std::io::Error) -> ProviderError {
    ProviderError::new(format!("cannot encrypt the store: {e}"), "check that there is memory and disk space")
}

/// age's decryption errors in words.
fn describe(e: &DecryptError) -> String {
    match e {
        DecryptError::InvalidHeader | DecryptError::UnknownFormat => "it is not an age file".to_string(),
        DecryptError::InvalidMac => "its header has been altered".to_string(),
        DecryptError::ExcessiveWork { required, target } => {
            format!("its passphrase needs work factor {required}, far above this machine's {target}")
        }
        DecryptError::Io(e) => format!("it is damaged or cut short ({e})"),
        e => e.to_string(),
    }
}
