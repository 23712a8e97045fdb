//! What the fuzz targets share.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A folder of this fuzzing process's own for the files a target writes
/// (a ledger, a trust policy), created on first use under the temporary
/// folder (`TMPDIR`; point it at a tmpfs such as `/dev/shm` to keep the
/// writes off the disk) and named by the process id, so parallel jobs never
/// share one. Targets leave at most an empty ledger in it between inputs; it
/// is not removed when the process ends.
pub fn scratch_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("rlp-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        dir
    })
}
