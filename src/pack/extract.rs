//! Writing checked archive entries into a private folder (the staging
//! folder of `rlp agent install`).

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::bundle::manifest::is_valid_artifact_path;
use crate::pack::reader::Sink;

/// A sink that creates each entry below `root`: folders 0755, files 0644 or
/// 0755, never replacing anything. Nothing is flushed while entries arrive
/// (a refused archive costs no disk syncs); call [`DirSink::sync`] once the
/// content is verified to make every file and folder durable.
#[derive(Debug)]
pub(crate) struct DirSink {
    root: PathBuf,
    current: Option<BufWriter<File>>,
    files: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
}

impl DirSink {
    /// A sink writing below `root` (an existing, empty, private folder).
    pub(crate) fn new(root: &Path) -> DirSink {
        DirSink { root: root.to_path_buf(), current: None, files: Vec::new(), dirs: vec![root.to_path_buf()] }
    }

    fn target(&self, path: &str) -> io::Result<PathBuf> {
        if !is_valid_artifact_path(path) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("`{path}` is not a bundle path")));
        }
        Ok(self.root.join(path))
    }

    /// Makes every file and folder written durable: one `syncfs` of the
    /// file system holding the root when there are many entries, otherwise
    /// (or if `syncfs` fails) an `fsync` of each file, then of each folder.
    pub(crate) fn sync(&self) -> io::Result<()> {
        if self.files.len() + self.dirs.len() > SYNCFS_THRESHOLD && syncfs(&self.root).is_ok() {
            return Ok(());
        }
        for file in &self.files {
            File::open(file)?.sync_all()?;
        }
        for dir in self.dirs.iter().rev() {
            crate::fsutil::sync_dir(dir)?;
        }
        Ok(())
    }
}

/// Above this many entries, [`DirSink::sync`] flushes the whole file system at once.
const SYNCFS_THRESHOLD: usize = 64;

/// `syncfs(2)` on the file system holding `dir`.
fn syncfs(dir: &Path) -> io::Result<()> {
    Ok(rustix::fs::syncfs(File::open(dir)?)?)
}

impl Sink for DirSink {
    fn directory(&mut self, path: &str) -> io::Result<()> {
        let target = self.target(path)?;
        fs::DirBuilder::new().mode(0o755).create(&target)?;
        fs::set_permissions(&target, fs::Permissions::from_mode(0o755))?;
        self.dirs.push(target);
        Ok(())
    }

    fn begin_file(&mut self, path: &str, executable: bool) -> io::Result<()> {
        let target = self.target(path)?;
        if let Some(parent) = target.parent()
            && !parent.is_dir()
        {
            fs::DirBuilder::new().mode(0o755).recursive(true).create(parent)?;
            self.dirs.push(parent.to_path_buf());
        }
        let mode = if executable { 0o755 } else { 0o644 };
        let file = fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(&target)?;
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        self.files.push(target);
        self.current = Some(BufWriter::with_capacity(1 << 16, file));
        Ok(())
    }

    fn write(&mut self, chunk: &[u8]) -> io::Result<()> {
        match &mut self.current {
            Some(out) => out.write_all(chunk),
            None => Err(io::Error::other("no file is open")),
        }
    }

    fn end_file(&mut self) -> io::Result<()> {
        let Some(out) = self.current.take() else { return Err(io::Error::other("no file is open")) };
        out.into_inner().map_err(|e| e.into_error())?;
        Ok(())
    }
}
