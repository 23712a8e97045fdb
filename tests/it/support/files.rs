//! Files of the repository and of the tests' folders.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// `relative` in the repository.
pub fn repo(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// `relative` in `tests/fixtures/`, as a string for tools.json.
pub fn fixture(relative: &str) -> String {
    repo("tests/fixtures").join(relative).display().to_string()
}

/// The text of a file.
pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A JSON file's document.
pub fn read_json(path: &Path) -> Value {
    serde_json::from_str(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every file and folder below `dir` (symbolic links not followed), in the
/// order the walk meets them.
pub fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                pending.push(path.clone());
            }
            found.push(path);
        }
    }
    found
}

/// Every file below `dir` and its bytes, by path relative to `dir`.
pub fn contents(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    entries(dir)
        .into_iter()
        .filter(|path| !is_folder(path))
        .map(|path| (path.strip_prefix(dir).unwrap().to_path_buf(), std::fs::read(&path).unwrap()))
        .collect()
}

/// The paths of the files below `dir`, relative to it, sorted as text.
pub fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = contents(dir).into_keys().map(|path| path.display().to_string()).collect();
    names.sort();
    names
}

/// Copies the tree `from` to `to`.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for path in entries(from) {
        let target = to.join(path.strip_prefix(from).unwrap());
        if is_folder(&path) {
            std::fs::create_dir_all(&target).unwrap();
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

/// Whether `path` is a folder itself (not a link to one).
fn is_folder(path: &Path) -> bool {
    std::fs::symlink_metadata(path).unwrap().is_dir()
}

/// `len` pseudo-random bytes (xorshift64 from `seed`): incompressible,
/// rarely valid UTF-8, and the same on every run.
pub fn noise(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}
