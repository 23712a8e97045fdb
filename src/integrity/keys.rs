//! Ed25519 keys: generation, the `.pub` / `.key` file formats and key ids.
//!
//! - `<name>.pub`: one line `ed25519:<base64 of the 32-byte public key>`
//!   (the upstream trust-anchor form).
//! - `<name>.key`: one line `ed25519-secret:<base64 of the 32-byte seed>`,
//!   mode 0600. Loading refuses a key file that group or others can read.
//! - Key id: the first 8 bytes of BLAKE3(public key bytes), as 16 lower-case
//!   hex digits.
//!
//! Base64 is the standard alphabet with padding; decoding is canonical (a
//! string that does not re-encode to itself is refused).

use std::fmt;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{SigningKey, VerifyingKey};

use crate::fsutil::{PrivateFileError, read_private};
use crate::integrity::failure::{Failure, Reason};

/// Prefix of a public key line.
pub const PUBLIC_PREFIX: &str = "ed25519:";
/// Prefix of a secret key line.
pub const SECRET_PREFIX: &str = "ed25519-secret:";
/// Largest key file read.
const MAX_KEY_FILE: u64 = 4096;

/// Encodes bytes as standard, padded base64.
pub fn b64_encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// Decodes standard, padded base64 of exactly `N` bytes, refusing any
/// non-canonical spelling.
pub fn b64_decode_exact<const N: usize>(text: &str) -> Result<[u8; N], String> {
    let bytes = STANDARD.decode(text).map_err(|e| format!("invalid base64 ({e})"))?;
    let array: [u8; N] =
        bytes.as_slice().try_into().map_err(|_| format!("expected {N} bytes of base64, found {}", bytes.len()))?;
    if STANDARD.encode(array) != text {
        return Err("base64 is not in canonical form".into());
    }
    Ok(array)
}

/// A key id: the first 8 bytes of BLAKE3(public key).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(pub [u8; 8]);

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyId({self})")
    }
}

impl FromStr for KeyId {
    type Err = String;

    /// Parses exactly 16 lower-case hex digits, the only spelling rlp
    /// writes: a key id has one spelling, so a signature file or a trust
    /// policy that spells it otherwise has been tampered with or hand-made.
    fn from_str(text: &str) -> Result<Self, String> {
        if text.len() != 16 || !text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(format!("`{text}` is not a key id (16 lower-case hex digits)"));
        }
        let mut bytes = [0u8; 8];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|e| e.to_string())?;
        }
        Ok(KeyId(bytes))
    }
}

/// An Ed25519 public key (never a weak, small-order key).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PublicKey(VerifyingKey);

impl PublicKey {
    /// Parses `ed25519:<base64>`.
    pub fn parse(text: &str) -> Result<PublicKey, String> {
        let Some(b64) = text.strip_prefix(PUBLIC_PREFIX) else {
            return Err(format!("a public key starts with `{PUBLIC_PREFIX}`"));
        };
        let bytes = b64_decode_exact::<32>(b64)?;
        let key = VerifyingKey::from_bytes(&bytes).map_err(|_| "not a valid Ed25519 public key".to_string())?;
        if key.is_weak() {
            return Err("a weak (small-order) Ed25519 public key".into());
        }
        Ok(PublicKey(key))
    }

    /// Reads a `.pub` file: one line, optionally newline-terminated.
    pub fn load(path: &Path) -> Result<PublicKey, Failure> {
        let text = read_small(path)?;
        let line = text.strip_suffix('\n').unwrap_or(&text);
        PublicKey::parse(line).map_err(|why| {
            Failure::new(Reason::Key, format!("{}: {why}", path.display()))
                .with_help("a public key file holds one line `ed25519:<base64>`, as `rlp keygen` writes it")
        })
    }

    /// The key id.
    pub fn key_id(&self) -> KeyId {
        let hash = blake3::hash(self.0.as_bytes());
        let mut id = [0u8; 8];
        id.copy_from_slice(&hash.as_bytes()[..8]);
        KeyId(id)
    }

    /// The dalek key.
    pub fn verifying_key(&self) -> &VerifyingKey {
        &self.0
    }
}

impl fmt::Display for PublicKey {
    /// `ed25519:<base64>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PUBLIC_PREFIX}{}", b64_encode(self.0.as_bytes()))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

/// An Ed25519 signing key. Its `Debug` form shows only the key id.
pub struct SecretKey(SigningKey);

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretKey(key id {})", self.public().key_id())
    }
}

impl SecretKey {
    /// A fresh key from the operating system's random source.
    pub fn generate() -> Result<SecretKey, Failure> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed)
            .map_err(|e| Failure::new(Reason::Unreadable, format!("cannot get random bytes for a key: {e}")))?;
        let key = SecretKey(SigningKey::from_bytes(&seed));
        seed.fill(0);
        Ok(key)
    }

    /// The key from a 32-byte seed.
    pub fn from_seed(seed: &[u8; 32]) -> SecretKey {
        SecretKey(SigningKey::from_bytes(seed))
    }

    /// Parses `ed25519-secret:<base64 seed>`.
    pub fn parse(text: &str) -> Result<SecretKey, String> {
        let Some(b64) = text.strip_prefix(SECRET_PREFIX) else {
            return Err(format!("a secret key starts with `{SECRET_PREFIX}`"));
        };
        let mut seed = b64_decode_exact::<32>(b64)?;
        let key = SecretKey::from_seed(&seed);
        seed.fill(0);
        Ok(key)
    }

    /// Reads a `.key` file, refusing one that group or others may read. A
    /// symbolic link (a mounted secret) is followed: the file it points to
    /// is what is checked and read.
    pub fn load(path: &Path) -> Result<SecretKey, Failure> {
        let public_key = || {
            Failure::new(Reason::Key, format!("{} holds a public key, not a secret key", path.display()))
                .with_help("pass the `.key` file written by `rlp keygen` next to this `.pub` file")
        };
        let bytes = match read_private(path, MAX_KEY_FILE) {
            Ok(bytes) => bytes,
            Err(PrivateFileError::Read(e)) => return Err(Failure::read(path, e, Reason::Key)),
            Err(PrivateFileError::NotAFile) => {
                return Err(Failure::new(Reason::Key, format!("{} is not a regular file", path.display()))
                    .with_help("pass the `.key` file written by `rlp keygen`"));
            }
            // A `.pub` file passed by mistake is named as such.
            Err(PrivateFileError::Shared(_)) if read_small(path).is_ok_and(|t| t.starts_with(PUBLIC_PREFIX)) => {
                return Err(public_key());
            }
            Err(PrivateFileError::Shared(mode)) => {
                return Err(Failure::new(
                    Reason::Key,
                    format!("{} is readable by other users (mode {mode:04o}); refusing to use it", path.display()),
                )
                .with_help(format!(
                    "run `chmod 600 {}`, and replace the key if others may have read it",
                    path.display()
                )));
            }
        };
        let text = utf8(path, bytes)?;
        let line = text.strip_suffix('\n').unwrap_or(&text);
        if line.starts_with(PUBLIC_PREFIX) {
            return Err(public_key());
        }
        SecretKey::parse(line).map_err(|why| {
            Failure::new(Reason::Key, format!("{}: {why}", path.display()))
                .with_help("pass the `.key` file written by `rlp keygen`")
        })
    }

    /// The public half.
    pub fn public(&self) -> PublicKey {
        PublicKey(self.0.verifying_key())
    }

    /// Signs a message.
    pub fn sign(&self, message: &[u8]) -> ed25519_dalek::Signature {
        use ed25519_dalek::Signer;
        self.0.sign(message)
    }

    fn to_line(&self) -> String {
        format!("{SECRET_PREFIX}{}\n", b64_encode(self.0.as_bytes()))
    }
}

fn read_small(path: &Path) -> Result<String, Failure> {
    let bytes = crate::fsutil::read_limited(path, MAX_KEY_FILE).map_err(|e| Failure::read(path, e, Reason::Key))?;
    utf8(path, bytes)
}

/// A key file's bytes as text.
fn utf8(path: &Path, bytes: Vec<u8>) -> Result<String, Failure> {
    String::from_utf8(bytes).map_err(|_| Failure::new(Reason::Key, format!("{} is not UTF-8 text", path.display())))
}

/// The two files `rlp keygen` wrote.
#[derive(Debug)]
pub struct KeyPairFiles {
    /// `<name>.pub`.
    pub public_file: PathBuf,
    /// `<name>.key`.
    pub secret_file: PathBuf,
    /// The public key.
    pub public: PublicKey,
}

/// Whether `name` is a usable key file name: `[A-Za-z0-9._-]+`, not starting with `.`.
pub fn is_valid_key_name(name: &str) -> bool {
    !name.is_empty() && !name.starts_with('.') && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// Generates a key pair and writes `<dir>/<name>.pub` and `<dir>/<name>.key`
/// (mode 0600), refusing to overwrite either file. Each file is written to a
/// temporary file, synced and linked into place without replacing anything.
pub fn write_key_pair(dir: &Path, name: &str) -> Result<KeyPairFiles, Failure> {
    if !is_valid_key_name(name) {
        return Err(Failure::new(Reason::Usage, format!("`{name}` is not a usable key name"))
            .with_help("use letters, digits, `.`, `_` and `-`, not starting with `.`"));
    }
    let public_file = dir.join(format!("{name}.pub"));
    let secret_file = dir.join(format!("{name}.key"));
    for file in [&public_file, &secret_file] {
        if fs::symlink_metadata(file).is_ok() {
            return Err(Failure::new(
                Reason::Usage,
                format!("{} already exists; refusing to overwrite it", file.display()),
            )
            .with_help("choose another --name or --out folder"));
        }
    }
    if !dir.exists() {
        fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|e| Failure::io(dir, &e))?;
    }
    let key = SecretKey::generate()?;
    let public = key.public();
    write_new(&secret_file, key.to_line().as_bytes(), 0o600)?;
    if let Err(e) = write_new(&public_file, format!("{public}\n").as_bytes(), 0o644) {
        let _ = fs::remove_file(&secret_file);
        return Err(e);
    }
    crate::fsutil::sync_dir(dir).map_err(|e| Failure::io(dir, &e))?;
    Ok(KeyPairFiles { public_file, secret_file, public })
}

/// Writes a new file atomically, failing if it exists.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), Failure> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let io = |e: std::io::Error| Failure::io(path, &e);
    let (mut temp, _tracked) = crate::interrupt::temp_file_in(dir, ".rlp-").map_err(io)?;
    temp.as_file().set_permissions(fs::Permissions::from_mode(mode)).map_err(io)?;
    temp.write_all(bytes).map_err(io)?;
    temp.as_file().sync_all().map_err(io)?;
    temp.persist_noclobber(path).map_err(|e| {
        if e.error.kind() == std::io::ErrorKind::AlreadyExists {
            Failure::new(Reason::Usage, format!("{} already exists; refusing to overwrite it", path.display()))
        } else {
            io(e.error)
        }
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_files_round_trip_and_refuse_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let files = write_key_pair(dir.path(), "release").unwrap();
        let public = PublicKey::load(&files.public_file).unwrap();
        let secret = SecretKey::load(&files.secret_file).unwrap();
        assert_eq!(public, secret.public());
        assert_eq!(public, files.public);
        let mode = fs::metadata(&files.secret_file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let err = write_key_pair(dir.path(), "release").unwrap_err();
        assert_eq!(err.reason, Reason::Usage);
        fs::set_permissions(&files.secret_file, fs::Permissions::from_mode(0o640)).unwrap();
        assert_eq!(SecretKey::load(&files.secret_file).unwrap_err().reason, Reason::Key);
        assert!(!format!("{secret:?}").contains(&b64_encode(secret.0.as_bytes())));
    }

    #[test]
    fn key_ids_and_strict_parsing() {
        let key = SecretKey::from_seed(&[7; 32]).public();
        let id = key.key_id();
        assert_eq!(id.to_string().len(), 16);
        assert_eq!(id.to_string().parse::<KeyId>().unwrap(), id);
        assert_eq!(PublicKey::parse(&key.to_string()).unwrap(), key);
        assert!(PublicKey::parse(&key.to_string().replace("ed25519:", "ed448:")).is_err());
        assert!(PublicKey::parse(&format!("{key}=")).is_err());
        assert!(PublicKey::parse(&format!("ed25519:{}", b64_encode(&[0; 32]))).is_err(), "weak key");
        assert!("0123".parse::<KeyId>().is_err());
        let upper = id.to_string().to_ascii_uppercase();
        assert_ne!(upper, id.to_string(), "the test id has hex letters");
        assert_eq!(
            upper.parse::<KeyId>().unwrap_err(),
            format!("`{upper}` is not a key id (16 lower-case hex digits)")
        );
    }
}
