//! The `file` provider: an age-encrypted store of secrets in the runtime
//! home, `secrets/store.age`, managed with `rlp secrets set|list|rm`.
//!
//! - The store is one age file holding a JSON document ([`contents`]),
//!   encrypted to the X25519 identity `secrets/identity.txt` or with a
//!   passphrase ([`key`]). It is decrypted whole or not at all: a damaged
//!   file or a wrong key is an error, never a partial read.
//! - Changes are made under a lock (`secrets/.lock`) and written atomically
//!   (a new file renamed over the old one, mode 0600): an interrupted `set`
//!   leaves the old store intact, and two at once do not lose either change.
//! - A process decrypts the store once and keeps it while the file on disk
//!   stays the same (same inode, size and times): a call costs a `stat`,
//!   and a long-running `rlp serve` sees `rlp secrets set` and `rm` at once.

pub mod contents;
pub(crate) mod key;

use std::fs::{self, File, Metadata};
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use rustix::fs::{FlockOperation, flock};

use crate::bundle::capability::SecretId;
use crate::config::secrets::StoreKey;
use crate::fsutil::write_atomic;
use crate::home::Home;
use crate::secrets::{Lookup, Provider, ProviderError};

pub use contents::{Contents, Entry};
pub(crate) use key::AskPassphrase;
use key::Key;

/// Largest store file read.
const MAX_STORE_BYTES: u64 = 64 * 1024 * 1024;

/// The store of a runtime home.
pub(crate) struct Store {
    dir: PathBuf,
    /// `secrets/store.age` ([`Home::secret_store_file`]).
    file: PathBuf,
    key: Key,
}

/// What identifies one version of the store file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Stamp {
    fn of(meta: &Metadata) -> Stamp {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
        }
    }
}

impl Store {
    /// The store of `home`, with the key `kind` describes; `ask` asks for
    /// a passphrase when one is needed and no command gives it.
    pub(crate) fn of_home(home: &Home, kind: StoreKey, ask: AskPassphrase) -> Store {
        let dir = home.secrets_dir();
        let key = Key::new(kind, dir.join("identity.txt"), ask);
        Store { dir, file: home.secret_store_file(), key }
    }

    /// `secrets/store.age`.
    pub(crate) fn path(&self) -> PathBuf {
        self.file.clone()
    }

    /// `secrets/identity.txt`.
    pub(crate) fn identity_file(&self) -> &Path {
        self.key.identity_file()
    }

    /// The open store file, or `None` when there is no store yet.
    fn open(&self) -> Result<Option<(File, Metadata)>, ProviderError> {
        let path = self.path();
        let unreadable = |e: std::io::Error| {
            ProviderError::new(format!("cannot read {}: {e}", path.display()), "check the file's permissions")
        };
        let file = match fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(unreadable(e)),
        };
        let meta = file.metadata().map_err(unreadable)?;
        if !meta.is_file() {
            return Err(ProviderError::new(
                format!("{} is not a regular file", path.display()),
                "move it aside; `rlp secrets set` makes a new store",
            ));
        }
        Ok(Some((file, meta)))
    }

    /// Decrypts the store from `file`.
    fn read(&self, file: File) -> Result<Contents, ProviderError> {
        let path = self.path();
        let mut ciphertext = Vec::new();
        file.take(MAX_STORE_BYTES + 1).read_to_end(&mut ciphertext).map_err(|e| {
            ProviderError::new(format!("cannot read {}: {e}", path.display()), "check the file's permissions")
        })?;
        if ciphertext.len() as u64 > MAX_STORE_BYTES {
            return Err(ProviderError::new(
                format!("{} is larger than {} MiB", path.display(), MAX_STORE_BYTES >> 20),
                "a store this large is not one rlp wrote; move it aside",
            ));
        }
        let plain = self.key.decrypt(&ciphertext, &path)?;
        Contents::parse(&plain).map_err(|why| {
            ProviderError::new(
                format!("{} cannot be read: {why}", path.display()),
                "restore the file from a backup, or move it aside and set the secrets again",
            )
        })
    }

    /// Every entry, or `None` when there is no store yet.
    pub(crate) fn load(&self) -> Result<Option<Contents>, ProviderError> {
        self.open()?.map(|(file, _)| self.read(file)).transpose()
    }

    /// Applies `change` to the store under its lock and writes the result
    /// atomically; a new store (and identity) is made on first use.
    pub(crate) fn update<T>(&self, change: impl FnOnce(&mut Contents) -> T) -> Result<T, ProviderError> {
        let cannot = |what: &str, e: std::io::Error| {
            ProviderError::new(format!("cannot {what}: {e}"), "check that the runtime home is writable")
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| cannot(&format!("create {}", self.dir.display()), e))?;
        let lock_path = self.dir.join(".lock");
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .map_err(|e| cannot(&format!("open {}", lock_path.display()), e))?;
        flock(&lock, FlockOperation::LockExclusive).map_err(|e| cannot("lock the store", e.into()))?;
        let existing = self.load()?;
        let creating = existing.is_none();
        let mut contents = existing.unwrap_or_default();
        let answer = change(&mut contents);
        let ciphertext = self.key.encrypt(&contents.to_bytes(), creating)?;
        // A store rlp would refuse to read is never written.
        if ciphertext.len() as u64 > MAX_STORE_BYTES {
            return Err(ProviderError::new(
                format!("the store would be larger than {} MiB; nothing was changed", MAX_STORE_BYTES >> 20),
                "remove secrets you no longer use with `rlp secrets rm`",
            ));
        }
        write_atomic(&self.path(), &ciphertext, Some(0o600))
            .map_err(|e| cannot(&format!("write {}", self.path().display()), e))?;
        Ok(answer)
    }
}

/// Answers from the store, decrypting it once per version of the file.
pub(crate) struct FileProvider {
    store: Store,
    cache: Mutex<Option<(Stamp, Arc<Contents>)>>,
}

impl FileProvider {
    /// A provider reading `store`.
    pub(crate) fn new(store: Store) -> Self {
        FileProvider { store, cache: Mutex::new(None) }
    }

    /// The store's entries as the file on disk now holds them.
    fn contents(&self) -> Result<Option<Arc<Contents>>, ProviderError> {
        let Some((file, meta)) = self.store.open()? else {
            return Ok(None);
        };
        let stamp = Stamp::of(&meta);
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((cached, contents)) = cache.as_ref()
            && *cached == stamp
        {
            return Ok(Some(contents.clone()));
        }
        let contents = Arc::new(self.store.read(file)?);
        *cache = Some((stamp, contents.clone()));
        Ok(Some(contents))
    }
}

impl Provider for FileProvider {
    fn name(&self) -> &'static str {
        "file"
    }

    fn lookup(&self, id: &SecretId) -> Result<Lookup, ProviderError> {
        let path = self.store.path();
        let how = format!("run `rlp secrets set {id}`");
        match self.contents()? {
            None => Ok(Lookup::Missing { why: format!("there is no store yet ({})", path.display()), how }),
            Some(contents) => match contents.entries.get(id) {
                Some(entry) => Ok(Lookup::Found(entry.value.clone())),
                None => Ok(Lookup::Missing { why: format!("not in {}", path.display()), how }),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_too_large_to_read_back_is_never_written() {
        let home = tempfile::tempdir().unwrap();
        let ask: AskPassphrase = Arc::new(|_: &str, _: bool| Err("no terminal".to_string()));
        let store = Store::of_home(&Home::new(home.path()), StoreKey::Identity, ask);
        let entry = |value: &str| Entry { value: crate::secrets::SecretValue::new(value), changed_ms: 1 };
        store.update(|c| c.entries.insert("runloop/a/small".parse().unwrap(), entry("v"))).unwrap();
        let before = fs::read(store.path()).unwrap();
        // Each value is 64 KiB of a control character, six bytes each once escaped.
        let big = "\u{1}".repeat(64 * 1024);
        let error = store
            .update(|c| {
                for i in 0..180 {
                    c.entries.insert(format!("runloop/big/s{i}").parse().unwrap(), entry(&big));
                }
            })
            .unwrap_err();
        assert_eq!(error.message, "the store would be larger than 64 MiB; nothing was changed");
        assert_eq!(fs::read(store.path()).unwrap(), before);
        assert_eq!(store.load().unwrap().unwrap().entries.len(), 1);
    }
}
