//! The files of a bundle folder, and their digests.
//!
//! Only regular files and directories are accepted: symlinks, hard links,
//! devices, FIFOs and sockets are reported and never followed.

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use crate::bundle::manifest::{Digest, MANIFEST_FILE, SIGNATURES_DIR, is_valid_artifact_path};

/// Files at least this large are hashed memory-mapped on several threads.
const MMAP_THRESHOLD: u64 = 8 << 20;
/// Deepest folder nesting scanned.
const MAX_DEPTH: usize = 64;

/// One regular file of a bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileEntry {
    /// Path inside the bundle, `/`-separated.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
}

/// An entry that cannot be part of a bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// Path inside the bundle (lossy for non-UTF-8 names).
    pub path: String,
    /// Why it is refused.
    pub why: String,
}

/// The files of a bundle (manifest.toml and SIGNATURES/ excluded), sorted by path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inventory {
    /// Regular files.
    pub files: Vec<FileEntry>,
    /// Entries refused (links, devices, bad names, too deep).
    pub refused: Vec<Refused>,
}

impl Inventory {
    /// The entry for `path`.
    pub fn get(&self, path: &str) -> Option<&FileEntry> {
        self.files.binary_search_by(|f| f.path.as_str().cmp(path)).ok().map(|i| &self.files[i])
    }

    /// Scans a bundle folder.
    pub fn scan(dir: &Path) -> io::Result<Inventory> {
        let mut inventory = Inventory::default();
        scan_dir(dir, "", 0, &mut inventory)?;
        inventory.files.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(inventory)
    }
}

fn scan_dir(dir: &Path, prefix: &str, depth: usize, out: &mut Inventory) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let path = match name.to_str() {
            Some(name) => format!("{prefix}{name}"),
            None => {
                out.refused.push(Refused {
                    path: format!("{prefix}{}", name.to_string_lossy()),
                    why: "its name is not UTF-8".into(),
                });
                continue;
            }
        };
        let meta = entry.metadata()?; // does not follow symlinks
        // The manifest and SIGNATURES/ are checked on their own, when they
        // are what they must be; otherwise they are refused here.
        if depth == 0
            && ((path == MANIFEST_FILE && file_refusal(&meta).is_none())
                || (path == SIGNATURES_DIR && meta.file_type().is_dir()))
        {
            continue;
        }
        let refuse = |why: &str| Refused { path: path.clone(), why: why.to_string() };
        if meta.file_type().is_dir() {
            if depth >= MAX_DEPTH {
                out.refused.push(refuse("it is nested too deeply"));
            } else {
                scan_dir(&entry.path(), &format!("{path}/"), depth + 1, out)?;
            }
        } else if let Some(why) = file_refusal(&meta) {
            out.refused.push(refuse(&why));
        } else if !is_valid_artifact_path(&path) {
            out.refused.push(refuse("its name has characters outside [A-Za-z0-9._-]"));
        } else {
            out.files.push(FileEntry { path, size: meta.len() });
        }
    }
    Ok(())
}

/// Why a regular file with more than one name cannot be a bundle file.
pub const HARD_LINK_REFUSAL: &str = "it is a hard link (it has other names outside the bundle's control)";

/// Why an entry (its metadata, links not followed) cannot be a bundle
/// file, if it cannot: anything but a regular file with a single name.
pub fn file_refusal(meta: &fs::Metadata) -> Option<String> {
    let kind = meta.file_type();
    if kind.is_file() {
        return (meta.nlink() > 1).then(|| HARD_LINK_REFUSAL.to_string());
    }
    Some(format!("it is {}", kind_name(kind)))
}

/// What an entry that is not a regular file is, as messages name it: `a
/// folder`, `a symbolic link`, `a FIFO`, `a socket`, `a device file`.
pub fn kind_name(kind: fs::FileType) -> &'static str {
    if kind.is_dir() {
        "a folder"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "a device file"
    } else {
        "an unknown kind of file"
    }
}

/// BLAKE3 of a byte slice.
pub fn hash_bytes(bytes: &[u8]) -> Digest {
    Digest(*blake3::hash(bytes).as_bytes())
}

/// Size and BLAKE3 of a regular file, refusing anything else.
///
/// Large files are memory-mapped and hashed on every core.
pub fn hash_file(path: &Path) -> io::Result<(u64, Digest)> {
    let meta = fs::symlink_metadata(path)?;
    if !meta.file_type().is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
    }
    let mut hasher = blake3::Hasher::new();
    if meta.len() >= MMAP_THRESHOLD {
        hasher.update_mmap_rayon(path)?;
        return Ok((meta.len(), Digest(*hasher.finalize().as_bytes())));
    }
    let capacity = (meta.len() as usize).clamp(1, 1 << 16);
    let size = io::copy(&mut io::BufReader::with_capacity(capacity, fs::File::open(path)?), &mut hasher)?;
    Ok((size, Digest(*hasher.finalize().as_bytes())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_refuses_links_and_skips_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join(MANIFEST_FILE), "x").unwrap();
        fs::create_dir_all(root.join("SIGNATURES")).unwrap();
        fs::write(root.join("SIGNATURES/manifest.sig"), "x").unwrap();
        fs::create_dir_all(root.join("schemas")).unwrap();
        fs::write(root.join("schemas/a.json"), "{}").unwrap();
        fs::write(root.join("tools.json"), "{}").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("link")).unwrap();
        fs::hard_link(root.join("tools.json"), root.join("hard")).unwrap();
        let inv = Inventory::scan(root).unwrap();
        assert_eq!(inv.files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(), ["schemas/a.json"]);
        let mut refused: Vec<_> = inv.refused.iter().map(|r| r.path.as_str()).collect();
        refused.sort();
        assert_eq!(refused, ["hard", "link", "tools.json"]);
        assert_eq!(hash_file(&root.join("schemas/a.json")).unwrap(), (2, hash_bytes(b"{}")));
    }
}
