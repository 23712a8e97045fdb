//! File-system helpers shared by every command that writes.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

/// Writes `bytes` to `path` atomically: a temporary file in the same folder
/// is written, flushed to disk and renamed over the target, then the folder
/// is synced. An interrupted write leaves the old file intact, and no
/// temporary file once [`crate::interrupt`]'s handler is installed.
///
/// `mode` sets the new file's permission bits (e.g. `0o600` for secret keys);
/// `None` keeps the old file's mode, or uses 0644 for a new file.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: Option<u32>) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    fs::create_dir_all(dir)?;
    let mode = match mode {
        Some(mode) => mode,
        None => fs::metadata(path).map(|m| m.permissions().mode() & 0o7777).unwrap_or(0o644),
    };
    let mut temp = tempfile::Builder::new().prefix(".rlp-").suffix(".tmp").tempfile_in(dir)?;
    let _tracked = crate::interrupt::track_file(temp.path());
    temp.as_file().set_permissions(fs::Permissions::from_mode(mode))?;
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|e| e.error)?;
    sync_dir(dir)
}

/// `text` with the line endings of `original`: CRLF throughout when every
/// line of `original` ends with CRLF, `text` unchanged otherwise. Editors
/// of TOML files use it to keep a Windows checkout's layout.
pub fn with_line_endings_of(original: &str, text: String) -> String {
    let lines = original.matches('\n').count();
    if lines == 0 || original.matches("\r\n").count() != lines {
        return text;
    }
    text.replace("\r\n", "\n").replace('\n', "\r\n")
}

/// Flushes a folder's entries (after a rename into it) to disk.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn crlf_files_stay_crlf() {
        assert_eq!(with_line_endings_of("a\r\nb\r\n", "a\nb\nc\n".into()), "a\r\nb\r\nc\r\n");
        assert_eq!(with_line_endings_of("a\r\nb\n", "a\nb\n".into()), "a\nb\n");
        assert_eq!(with_line_endings_of("a\nb\n", "a\nb\r\n".into()), "a\nb\r\n");
        assert_eq!(with_line_endings_of("", "a\n".into()), "a\n");
    }

    #[test]
    fn replaces_content_and_sets_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/key");
        write_atomic(&path, b"one", Some(0o600)).unwrap();
        write_atomic(&path, b"two", None).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::read_dir(dir.path().join("sub")).unwrap().count(), 1, "no temporary file left");
    }
}
