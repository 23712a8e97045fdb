//! Reproducible bundle archives: the writer, the safe reader and extractor,
//! installation into the runtime home, and the MCP Bundle export.

pub mod canonical;
pub(crate) mod extract;
pub(crate) mod format;
pub(crate) mod inflate;
pub(crate) mod install;
pub(crate) mod mcpb;
pub mod reader;
pub(crate) mod writer;

use std::path::Path;

use crate::integrity::failure::{Failure, Reason};
use crate::integrity::verify::{self, Options, Verified};

/// Reports progress of long work (hashing, packing). The library calls it;
/// the command line decides whether and how to draw it.
pub trait Progress {
    /// Work of `total` bytes starts.
    fn start(&self, total: u64);
    /// `bytes` more are done.
    fn advance(&self, bytes: u64);
    /// The work is over.
    fn finish(&self);
}

/// Progress that shows nothing.
#[derive(Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&self, _: u64) {}
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}

/// Verifies a bundle folder or a `.bundle.tar.gz` archive (streamed, nothing
/// written), and says the archive's format (`None` for a folder).
/// `encoding` says whether an archive's compressed bytes must also be the
/// canonical encoding `rlp bundle pack` writes.
pub fn verify_path(
    path: &Path,
    options: &Options<'_>,
    encoding: reader::Encoding,
) -> Result<(Verified, Option<reader::Format>), Failure> {
    let meta = std::fs::metadata(path).map_err(|e| Failure::io(path, &e))?;
    if meta.is_dir() {
        return verify::verify_dir(path, options).map(|verified| (verified, None));
    }
    if !meta.is_file() {
        return Err(Failure::new(Reason::Unreadable, format!("{} is neither a folder nor a file", path.display())));
    }
    let file = std::fs::File::open(path).map_err(|e| Failure::io(path, &e))?;
    let (evidence, format) = reader::verify_archive_with_format(file, &reader::Limits::default(), encoding)?;
    Ok((verify::check(&evidence, options)?, Some(format)))
}
