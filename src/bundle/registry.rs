//! Shared schema registries: folders of `<id>.json` files searched for a
//! `schema:<id>` that the bundle does not hold itself.
//!
//! The order is fixed: the bundle's own `schemas/` (never here: the bundle
//! resolves its own files first), then the folders of `[schemas] registries`
//! in config.toml (the home's file, then the system files), then
//! `$RUNLOOP_HOME/schemas/`. The first folder holding `<id>.json` wins; the
//! others are *shadowed*. A file found here is used only when manifest.toml
//! pins its size and BLAKE3 (`[shared_schemas."<id>"]`, written by
//! `rlp digest`), so a signature covers it like a file of the bundle.
//!
//! Registry folders are not the bundle author's: their files are read as
//! hostile input — the id must be a schema id (no `/`, no `..`), the file a
//! regular file (a symbolic link is refused, never followed) of at most
//! [`MAX_TEXT_FILE_BYTES`], in UTF-8.

use std::path::{Path, PathBuf};

use crate::bundle::MAX_TEXT_FILE_BYTES;
use crate::bundle::inventory::hash_bytes;
use crate::bundle::manifest::Digest;
use crate::bundle::schema::is_valid_schema_id;

/// Where a registry folder comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `[schemas] registries` in this config file.
    Config(PathBuf),
    /// The home's `schemas/` folder.
    Home,
}

/// One registry folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registry {
    /// The folder.
    pub dir: PathBuf,
    /// Who named it.
    pub origin: Origin,
}

/// The registry folders, in the order they are searched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Registries {
    list: Vec<Registry>,
}

/// A registry file read for a `schema:<id>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedFile {
    /// Its size in bytes.
    pub size: u64,
    /// The BLAKE3 of its bytes.
    pub digest: Digest,
    /// Its text.
    pub text: String,
}

/// What the registries hold for one id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lookup {
    /// The file that wins (the first registry holding `<id>.json`), and
    /// its content or why it cannot be used.
    pub found: Option<(PathBuf, Result<SharedFile, String>)>,
    /// The same id in later registries, which the first one shadows.
    pub shadowed: Vec<PathBuf>,
}

impl Registries {
    /// Exactly these folders, in this order.
    pub fn new(list: Vec<Registry>) -> Registries {
        Registries { list }
    }

    /// Whether there is no folder to search.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The folders, in search order.
    pub fn folders(&self) -> impl Iterator<Item = &Registry> {
        self.list.iter()
    }

    /// Where `<id>.json` is looked for, in order.
    pub fn candidates(&self, id: &str) -> Vec<PathBuf> {
        self.list.iter().map(|r| r.dir.join(format!("{id}.json"))).collect()
    }

    /// The files searched for `id`, in order, as one line (`no registry`
    /// when there is none).
    pub fn searched(&self, id: &str) -> String {
        let files: Vec<String> = self.candidates(id).iter().map(|p| p.display().to_string()).collect();
        if files.is_empty() { "no registry".to_string() } else { files.join(", ") }
    }

    /// Looks `id` up. An id that is not a schema id (`/`, `..`, odd
    /// characters) is never looked for. The first registry where
    /// `<id>.json` exists wins, readable or not: a broken file is an error,
    /// never a reason to take the next registry's.
    pub fn lookup(&self, id: &str) -> Lookup {
        let mut lookup = Lookup { found: None, shadowed: Vec::new() };
        if !is_valid_schema_id(id) {
            return lookup;
        }
        for path in self.candidates(id) {
            let meta = match std::fs::symlink_metadata(&path) {
                Ok(meta) => Ok(meta),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => {
                    continue;
                }
                Err(e) => Err(e.to_string()),
            };
            if lookup.found.is_some() {
                lookup.shadowed.push(path);
                continue;
            }
            let read = meta.and_then(|meta| read_shared(&path, &meta));
            lookup.found = Some((path, read));
        }
        lookup
    }
}

/// Reads one registry file, refusing anything but a bounded regular UTF-8 file.
fn read_shared(path: &Path, meta: &std::fs::Metadata) -> Result<SharedFile, String> {
    let kind = meta.file_type();
    if kind.is_symlink() {
        return Err("it is a symbolic link; registry schemas must be regular files".to_string());
    }
    if !kind.is_file() {
        return Err("it is not a regular file".to_string());
    }
    if meta.len() > MAX_TEXT_FILE_BYTES {
        return Err(format!("it is {} bytes; schema files are limited to {MAX_TEXT_FILE_BYTES}", meta.len()));
    }
    let bytes = crate::fsutil::read_limited(path, MAX_TEXT_FILE_BYTES).map_err(|e| e.to_string())?;
    let digest = hash_bytes(&bytes);
    let size = bytes.len() as u64;
    let text = String::from_utf8(bytes)
        .map_err(|e| format!("it is not UTF-8 (invalid byte at offset {})", e.utf8_error().valid_up_to()))?;
    Ok(SharedFile { size, digest, text })
}

impl Origin {
    /// Who named the folder, in words.
    pub fn shown(&self) -> String {
        match self {
            Origin::Config(file) => format!("[schemas] registries in {}", file.display()),
            Origin::Home => "the home's schemas folder".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn registry(dir: &Path) -> Registry {
        Registry { dir: dir.to_path_buf(), origin: Origin::Home }
    }

    #[test]
    fn the_first_folder_wins_and_shadows_the_rest() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        fs::write(a.path().join("x.json"), "{}").unwrap();
        fs::write(b.path().join("x.json"), "{\"type\": \"string\"}").unwrap();
        fs::write(b.path().join("y.json"), "{}").unwrap();
        let registries = Registries::new(vec![registry(a.path()), registry(b.path())]);
        let x = registries.lookup("x");
        let (path, file) = x.found.unwrap();
        assert_eq!(path, a.path().join("x.json"));
        assert_eq!(file.unwrap().digest, hash_bytes(b"{}"));
        assert_eq!(x.shadowed, [b.path().join("x.json")]);
        assert_eq!(registries.lookup("y").found.unwrap().0, b.path().join("y.json"));
        assert_eq!(registries.lookup("z"), Lookup { found: None, shadowed: Vec::new() });
    }

    #[test]
    fn hostile_ids_and_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("reg");
        fs::create_dir(&inner).unwrap();
        fs::write(dir.path().join("secret.json"), "{}").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret.json"), inner.join("link.json")).unwrap();
        fs::create_dir(inner.join("folder.json")).unwrap();
        fs::write(inner.join("latin1.json"), b"\"\xe9\"").unwrap();
        let registries = Registries::new(vec![registry(&inner)]);
        for id in ["../secret", "a/b", "", ".."] {
            assert_eq!(registries.lookup(id).found, None, "{id}");
        }
        let why = |id: &str| registries.lookup(id).found.unwrap().1.unwrap_err();
        assert_eq!(why("link"), "it is a symbolic link; registry schemas must be regular files");
        assert_eq!(why("folder"), "it is not a regular file");
        assert_eq!(why("latin1"), "it is not UTF-8 (invalid byte at offset 1)");
    }
}
