//! One parallel pass over a bundle folder: every entry is classified (only
//! regular files and folders are accepted, as in
//! [`crate::bundle::inventory`]) and every small file is hashed right away.
//!
//! Each file costs four system calls (open without following links, fstat,
//! one read, close); folders are walked on every core. Files of
//! [`LARGE_FILE`] bytes or more are only measured here: they are hashed
//! later, memory-mapped on every core, once their size has been checked.

use std::cell::RefCell;
use std::fs::{self, DirEntry, File};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::bundle::inventory::{HARD_LINK_REFUSAL, Refused, hash_file, kind_name};
use crate::bundle::manifest::{Digest, MANIFEST_FILE, SIGNATURES_DIR, is_valid_artifact_path};
use crate::integrity::verify::FileFacts;

/// Files at least this large are hashed separately (memory-mapped, multi-threaded).
pub(crate) const LARGE_FILE: u64 = 8 << 20;
/// Deepest folder nesting walked.
const MAX_DEPTH: usize = 64;

/// A file or folder the walk could not read.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct WalkError {
    /// The file or folder.
    pub path: PathBuf,
    /// The error.
    pub source: io::Error,
}

fn at(path: &Path) -> impl FnOnce(io::Error) -> WalkError + '_ {
    move |source| WalkError { path: path.to_path_buf(), source }
}

/// What a walk found, sorted by path.
#[derive(Debug, Default)]
pub struct Walk {
    /// Regular files: size, and digest unless the file is large.
    pub files: Vec<(String, FileFacts)>,
    /// Entries that cannot be part of a bundle.
    pub refused: Vec<Refused>,
}

impl Walk {
    /// The facts for `path`.
    pub fn get(&self, path: &str) -> Option<&FileFacts> {
        self.files.binary_search_by(|(p, _)| p.as_str().cmp(path)).ok().map(|i| &self.files[i].1)
    }

    fn merge(&mut self, other: Walk) {
        self.files.extend(other.files);
        self.refused.extend(other.refused);
    }

    /// Hashes the large files (those walked without a digest) whose path `want` accepts.
    pub fn hash_large(&mut self, dir: &Path, want: impl Fn(&str) -> bool) -> Result<(), WalkError> {
        for (path, facts) in &mut self.files {
            if facts.digest.is_none() && want(path) {
                let full = dir.join(path.as_str());
                let (size, digest) = hash_file(&full).map_err(at(&full))?;
                *facts = FileFacts { size, digest: Some(digest) };
            }
        }
        Ok(())
    }
}

/// Walks a bundle folder (manifest.toml and SIGNATURES/ excluded), hashing
/// every file smaller than [`LARGE_FILE`].
pub(crate) fn walk(dir: &Path) -> Result<Walk, WalkError> {
    let mut found = walk_dir(dir, "", 0)?;
    found.files.sort_by(|a, b| a.0.cmp(&b.0));
    found.refused.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(found)
}

fn walk_dir(dir: &Path, prefix: &str, depth: usize) -> Result<Walk, WalkError> {
    let entries: Vec<DirEntry> =
        fs::read_dir(dir).and_then(|entries| entries.collect::<io::Result<_>>()).map_err(at(dir))?;
    entries
        .par_iter()
        .try_fold(Walk::default, |mut found, entry| visit(entry, prefix, depth, &mut found).map(|()| found))
        .try_reduce(Walk::default, |mut a, b| {
            a.merge(b);
            Ok(a)
        })
}

/// Classifies one entry into `out` (recursing into folders).
fn visit(entry: &DirEntry, prefix: &str, depth: usize, out: &mut Walk) -> Result<(), WalkError> {
    let name = entry.file_name();
    let Some(name) = name.to_str() else {
        let path = format!("{prefix}{}", name.to_string_lossy());
        out.refused.push(Refused { path, why: "its name is not UTF-8".into() });
        return Ok(());
    };
    let path = format!("{prefix}{name}");
    if depth == 0 && (path == MANIFEST_FILE || path == SIGNATURES_DIR) {
        return Ok(());
    }
    let kind = entry.file_type().map_err(at(&entry.path()))?; // from the directory entry; never follows a link
    let why = if kind.is_dir() {
        if depth >= MAX_DEPTH {
            "it is nested too deeply".to_string()
        } else {
            let sub = walk_dir(&entry.path(), &format!("{path}/"), depth + 1)?;
            out.merge(sub);
            return Ok(());
        }
    } else if kind.is_file() {
        let full = entry.path();
        match measure(&full).map_err(at(&full))? {
            Opened::File(_) if !is_valid_artifact_path(&path) => {
                "its name has characters outside [A-Za-z0-9._-]".to_string()
            }
            Opened::File(facts) => {
                out.files.push((path, facts));
                return Ok(());
            }
            Opened::Refused(why) => why.to_string(),
        }
    } else {
        format!("it is {}", kind_name(kind))
    };
    out.refused.push(Refused { path, why });
    Ok(())
}

enum Opened {
    File(FileFacts),
    Refused(&'static str),
}

thread_local! {
    static BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Opens a file without following a link (and without blocking on a FIFO
/// swapped in), checks it is a singly linked regular file, and hashes it
/// unless it is large.
fn measure(full: &Path) -> io::Result<Opened> {
    let file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(full)
    {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Ok(Opened::Refused("it is a symbolic link")),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Ok(Opened::Refused("it is not a regular file"));
    }
    if meta.nlink() > 1 {
        return Ok(Opened::Refused(HARD_LINK_REFUSAL));
    }
    if meta.len() >= LARGE_FILE {
        return Ok(Opened::File(FileFacts { size: meta.len(), digest: None }));
    }
    BUFFER.with(|buffer| {
        let mut buffer = buffer.borrow_mut();
        let (size, digest) = read_and_hash(file, meta.len(), &mut buffer)?;
        Ok(Opened::File(FileFacts { size, digest: Some(digest) }))
    })
}

/// Reads a whole file into `buffer` and hashes it. A read that stops short
/// exactly at the size fstat reported is the end of the file (no second
/// read is spent on it); a file that grew is read to its end.
fn read_and_hash(mut file: File, expected: u64, buffer: &mut Vec<u8>) -> io::Result<(u64, Digest)> {
    let expected = usize::try_from(expected).map_err(io::Error::other)?;
    buffer.clear();
    buffer.resize(expected + 1, 0);
    let mut filled = 0;
    loop {
        if filled == buffer.len() {
            buffer.resize(buffer.len() * 2, 0);
        }
        let n = match file.read(&mut buffer[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            break;
        }
        filled += n;
        if filled == expected && filled < buffer.len() {
            break;
        }
    }
    Ok((filled as u64, Digest(*blake3::hash(&buffer[..filled]).as_bytes())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::inventory::{Inventory, hash_bytes};

    #[test]
    fn agrees_with_the_inventory() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join(MANIFEST_FILE), "x").unwrap();
        fs::create_dir_all(root.join("SIGNATURES")).unwrap();
        fs::write(root.join("SIGNATURES/manifest.sig"), "x").unwrap();
        fs::create_dir_all(root.join("schemas/deep")).unwrap();
        fs::write(root.join("schemas/deep/a.json"), "{}").unwrap();
        fs::write(root.join("tools.json"), "{}").unwrap();
        fs::write(root.join("empty"), "").unwrap();
        fs::write(root.join("bad name"), "").unwrap();
        fs::write(root.join("big.bin"), vec![7u8; LARGE_FILE as usize]).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("link")).unwrap();
        fs::hard_link(root.join("tools.json"), root.join("hard")).unwrap();
        let inventory = Inventory::scan(root).unwrap();
        let mut found = walk(root).unwrap();
        let paths: Vec<&str> = found.files.iter().map(|(p, _)| p.as_str()).collect();
        let expected: Vec<&str> = inventory.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, expected);
        let mut refused = inventory.refused.clone();
        refused.sort_by(|a, b| a.path.cmp(&b.path));
        assert_eq!(found.refused, refused);
        assert_eq!(found.get("schemas/deep/a.json"), Some(&FileFacts { size: 2, digest: Some(hash_bytes(b"{}")) }));
        assert_eq!(found.get("empty"), Some(&FileFacts { size: 0, digest: Some(hash_bytes(b"")) }));
        assert_eq!(found.get("big.bin").unwrap().digest, None);
        found.hash_large(root, |_| true).unwrap();
        let big = vec![7u8; LARGE_FILE as usize];
        assert_eq!(found.get("big.bin").unwrap().digest, Some(hash_bytes(&big)));
    }
}
