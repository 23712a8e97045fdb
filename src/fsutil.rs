//! File-system helpers shared by every command: atomic writes, and the one
//! bounded reader through which rlp reads every file or stream a user, a
//! bundle or the runtime home hands it.

use std::fs;
use std::io::{self, BufRead, Read, Write};
use std::path::Path;

/// A bounded read that delivered nothing.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The source could not be opened or read (the operating system's error).
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The source holds more than the limit.
    #[error("{name} is larger than {}", human_size(*limit))]
    TooLarge {
        /// The file's path, or `standard input`.
        name: String,
        /// The most rlp reads from it, in bytes.
        limit: u64,
    },
}

impl ReadError {
    /// Whether the file does not exist (callers that treat a missing file
    /// as empty or absent ask this).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::Io(e) if e.kind() == io::ErrorKind::NotFound)
    }

    /// What to do about a source that is too large (`None` for an I/O error,
    /// whose fix depends on the caller).
    pub fn help(&self) -> Option<String> {
        match self {
            ReadError::Io(_) => None,
            ReadError::TooLarge { limit, .. } => Some(format!(
                "rlp reads at most {} of it: pass a smaller file, or check that the path names the file you meant",
                human_size(*limit)
            )),
        }
    }
}

/// Reads the file at `path`, refusing one larger than `limit` bytes. The
/// size is found by reading (at most `limit + 1` bytes), never from the
/// file's metadata, so devices, FIFOs and process substitutions (which all
/// report a size of 0) are bounded too.
pub(crate) fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let file = fs::File::open(path)?;
    read_stream_limited(file, limit, &path.display().to_string())
}

/// [`read_limited`] for UTF-8 text; other bytes are an
/// [`io::ErrorKind::InvalidData`] error, as with [`fs::read_to_string`].
pub(crate) fn read_text_limited(path: &Path, limit: u64) -> Result<String, ReadError> {
    let bytes = read_limited(path, limit)?;
    String::from_utf8(bytes)
        .map_err(|_| ReadError::Io(io::Error::new(io::ErrorKind::InvalidData, "stream did not contain valid UTF-8")))
}

/// Reads `reader` to its end, refusing more than `limit` bytes; `name` (a
/// path, or `standard input`) names it in the error.
pub(crate) fn read_stream_limited(reader: impl Read, limit: u64, name: &str) -> Result<Vec<u8>, ReadError> {
    let mut bytes = Vec::new();
    reader.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge { name: name.to_string(), limit });
    }
    Ok(bytes)
}

/// Reads one line (up to and including its `\n`) of at most `limit` bytes
/// from `reader` into `line` (cleared first), streaming: a file of many
/// lines is never held whole. Returns the number of bytes read, 0 at the
/// end; a line that goes on past `limit` is `TooLarge` (named `a line`:
/// the caller knows its number).
pub(crate) fn read_line_limited(reader: &mut impl BufRead, limit: u64, line: &mut Vec<u8>) -> Result<usize, ReadError> {
    line.clear();
    let read = reader.take(limit.saturating_add(1)).read_until(b'\n', line)?;
    if line.last() != Some(&b'\n') && line.len() as u64 > limit {
        return Err(ReadError::TooLarge { name: "a line".to_string(), limit });
    }
    Ok(read)
}

/// A size limit in the unit people write it in: `16 MiB`, `4 KiB`, `100 bytes`.
pub(crate) fn human_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    match UNITS.iter().find(|(unit, _)| bytes >= *unit && bytes.is_multiple_of(*unit)) {
        Some((unit, name)) => format!("{} {name}", bytes / unit),
        None => crate::text::plural(bytes, "byte"),
    }
}

/// A file that [`open_private`] would not hand out.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PrivateFileError {
    /// It could not be opened or read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// It is not a regular file (a folder, a FIFO, a device).
    #[error("not a regular file")]
    NotAFile,
    /// Group or others may read it: its permission bits.
    #[error("readable by other users (mode {0:04o})")]
    Shared(u32),
}

/// Reads a file meant for its owner alone (a secret key, a bearer token),
/// at most `limit` bytes: a regular file (a symbolic link, e.g. a mounted
/// secret, is followed) that neither group nor others may read. The checks
/// are of the open file, so what is checked is what is read; a FIFO is
/// refused without blocking on it.
pub(crate) fn read_private(path: &Path, limit: u64) -> Result<Vec<u8>, PrivateFileError> {
    let (file, meta) = open_regular(path)?.ok_or(PrivateFileError::NotAFile)?;
    if let Some(mode) = shared_mode(&meta) {
        return Err(PrivateFileError::Shared(mode));
    }
    Ok(read_stream_limited(file, limit, &path.display().to_string())?)
}

/// Reads the regular file at `path` (a symbolic link is followed), at most
/// `limit` bytes, for a path an environment variable or a configuration
/// names: a FIFO, a device or a folder is refused without blocking on it
/// ("not a regular file"), as the check is of the open file.
pub(crate) fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    match open_regular(path)? {
        Some((file, _)) => read_stream_limited(file, limit, &path.display().to_string()),
        None => Err(ReadError::Io(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"))),
    }
}

/// Opens `path` for reading without blocking on a FIFO; `None` when the
/// open file is not a regular file.
fn open_regular(path: &Path) -> Result<Option<(fs::File, fs::Metadata)>, ReadError> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let meta = file.metadata()?;
    Ok(meta.file_type().is_file().then_some((file, meta)))
}

/// The permission bits of a file meant for its owner alone, when group or
/// others may use it (`None` for a private file).
fn shared_mode(meta: &fs::Metadata) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let mode = meta.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then_some(mode)
}

/// Prefix of the temporary files of [`write_atomic`]:
/// `.rlp-~<pid>-<random>.tmp`. The `~`, which no bundle path may hold, keeps
/// one that a killed process left out of a bundle's files (digest and lint
/// refuse it, naming it, rather than list it); the pid lets a later write
/// into the same folder, and the authoring commands, remove it
/// ([`crate::leftovers`]).
pub(crate) const TEMP_PREFIX: &str = ".rlp-~";

/// Whether the last part of `path` names a temporary file of
/// [`write_atomic`], which a killed rlp leaves behind.
pub(crate) fn is_leftover_temp(path: &str) -> bool {
    path.rsplit('/').next().is_some_and(|name| name.starts_with(TEMP_PREFIX))
}

/// What to do with a temporary file [`is_leftover_temp`] found in a bundle.
pub(crate) const LEFTOVER_TEMP_HELP: &str =
    "it is a temporary file of an rlp command that was killed: remove it (the next `rlp tools add` removes it)";

/// Writes `bytes` to `path` atomically: a temporary file in the same folder
/// is written, flushed to disk and renamed over the target, then the folder
/// is synced. An interrupted write leaves the old file intact, and no
/// temporary file once [`crate::interrupt`]'s handler is installed; one left
/// by a process killed outright is removed by the next write into the folder.
///
/// `mode` sets the new file's permission bits (e.g. `0o600` for secret keys);
/// `None` keeps the old file's mode, or uses 0644 for a new file.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], mode: Option<u32>) -> io::Result<()> {
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
    crate::leftovers::sweep(dir, &[TEMP_PREFIX], crate::leftovers::Kind::File);
    let (mut temp, _tracked) = crate::interrupt::temp_file_in(dir, &format!("{TEMP_PREFIX}{}-", std::process::id()))?;
    temp.as_file().set_permissions(fs::Permissions::from_mode(mode))?;
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|e| e.error)?;
    sync_dir(dir)
}

/// `text` with the line endings of `original`: CRLF throughout when every
/// line of `original` ends with CRLF, `text` unchanged otherwise. Editors
/// of TOML files use it to keep a Windows checkout's layout.
pub(crate) fn with_line_endings_of(original: &str, text: String) -> String {
    let lines = original.matches('\n').count();
    if lines == 0 || original.matches("\r\n").count() != lines {
        return text;
    }
    text.replace("\r\n", "\n").replace('\n', "\r\n")
}

/// Whether `path` is a regular file with an execute bit (symbolic links followed).
pub(crate) fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The first executable file `name` in the absolute folders of `search` (a
/// `PATH` value); relative entries are skipped, so the current folder never
/// supplies a program.
pub(crate) fn find_on_path(name: &str, search: Option<&std::ffi::OsStr>) -> Option<std::path::PathBuf> {
    std::env::split_paths(search?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable_file(candidate))
}

/// Creates the folder `dir` and every missing folder above it, each private
/// (mode 0700, whatever the umask): the runtime home and its folders.
pub(crate) fn create_private_dir_all(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Swaps the entries at `a` and `b` (both must exist) in one step
/// (`renameat2` with `RENAME_EXCHANGE`): a process stopped at any moment
/// leaves each path holding one of the two, never neither. A file system
/// that cannot swap gives an [`io::ErrorKind::Unsupported`] error, and
/// the caller falls back to two renames.
pub(crate) fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    use rustix::io::Errno;
    let cwd = rustix::fs::CWD;
    match rustix::fs::renameat_with(cwd, a, cwd, b, rustix::fs::RenameFlags::EXCHANGE) {
        Ok(()) => Ok(()),
        Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => {
            Err(io::Error::new(io::ErrorKind::Unsupported, "this file system cannot swap two entries in one step"))
        }
        Err(e) => Err(e.into()),
    }
}

/// Flushes a folder's entries (after a rename into it) to disk.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn exchange_swaps_two_folders_and_needs_both() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        for (folder, mark) in [(&a, "old"), (&b, "new")] {
            fs::create_dir(folder).unwrap();
            fs::write(folder.join("mark"), mark).unwrap();
        }
        exchange(&b, &a).unwrap();
        assert_eq!(fs::read_to_string(a.join("mark")).unwrap(), "new");
        assert_eq!(fs::read_to_string(b.join("mark")).unwrap(), "old");
        let missing = exchange(&dir.path().join("missing"), &a).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        assert_eq!(fs::read_to_string(a.join("mark")).unwrap(), "new");
    }

    #[test]
    fn private_reads_take_only_a_regular_file_its_owner_alone_may_read() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        fs::write(&secret, "s3cret\n").unwrap();
        fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_private(&secret, 64).unwrap(), b"s3cret\n");
        fs::set_permissions(&secret, fs::Permissions::from_mode(0o640)).unwrap();
        assert!(matches!(read_private(&secret, 64), Err(PrivateFileError::Shared(0o640))));
        fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(read_private(&secret, 3), Err(PrivateFileError::Read(ReadError::TooLarge { .. }))));
        // A link to it is followed; a folder and a FIFO are refused, the FIFO without blocking.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        assert_eq!(read_private(&link, 64).unwrap(), b"s3cret\n");
        assert!(matches!(read_private(dir.path(), 64), Err(PrivateFileError::NotAFile)));
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        fs::set_permissions(&fifo, fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(read_private(&fifo, 64), Err(PrivateFileError::NotAFile)));
        assert!(
            matches!(read_private(&dir.path().join("none"), 64), Err(PrivateFileError::Read(e)) if e.is_not_found())
        );
    }

    #[test]
    fn bounded_reads_refuse_what_is_past_the_limit_whatever_the_metadata_says() {
        let err = read_limited(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert_eq!(err.to_string(), "/dev/zero is larger than 1 MiB");
        assert!(err.help().unwrap().starts_with("rlp reads at most 1 MiB of it"));
        assert_eq!(read_stream_limited(&b"abcd"[..], 4, "standard input").unwrap(), b"abcd");
        let err = read_stream_limited(&b"abcde"[..], 4, "standard input").unwrap_err();
        assert_eq!(err.to_string(), "standard input is larger than 4 bytes");
        assert!(read_limited(Path::new("/nonexistent/file"), 1).unwrap_err().is_not_found());
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("bad"), b"\xff").unwrap();
        let err = read_text_limited(&dir.path().join("bad"), 10).unwrap_err();
        assert!(matches!(err, ReadError::Io(ref e) if e.kind() == io::ErrorKind::InvalidData), "{err}");
    }

    #[test]
    fn lines_are_bounded_one_at_a_time() {
        let mut reader = &b"one\ntwo words\nlast"[..];
        let mut line = Vec::new();
        assert_eq!(read_line_limited(&mut reader, 4, &mut line).unwrap(), 4);
        assert_eq!(line, b"one\n");
        let err = read_line_limited(&mut reader, 4, &mut line).unwrap_err();
        assert_eq!(err.to_string(), "a line is larger than 4 bytes");
        let mut reader = &b"last"[..];
        assert_eq!(read_line_limited(&mut reader, 4, &mut line).unwrap(), 4);
        assert_eq!(read_line_limited(&mut reader, 4, &mut line).unwrap(), 0);
    }

    #[test]
    fn sizes_are_shown_in_their_unit() {
        assert_eq!(human_size(16 << 20), "16 MiB");
        assert_eq!(human_size(4096), "4 KiB");
        assert_eq!(human_size(1 << 30), "1 GiB");
        assert_eq!(human_size(1000), "1000 bytes");
        assert_eq!(human_size(1), "1 byte");
    }

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

    #[test]
    fn the_next_write_into_a_folder_removes_a_temporary_file_a_killed_write_left() {
        let left = format!("{TEMP_PREFIX}999999999-AbCdEf.tmp");
        let dir = tempfile::tempdir().unwrap();
        let running = format!("{TEMP_PREFIX}{}-GhIjKl.tmp", std::process::id());
        for name in [&left, &running] {
            fs::write(dir.path().join(name), "half").unwrap();
        }
        write_atomic(&dir.path().join("tools.json"), b"{}", None).unwrap();
        let mut names: Vec<String> =
            fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        assert_eq!(names, [running, "tools.json".to_string()]);
    }
}
