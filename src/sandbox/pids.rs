//! `max_processes` enforced by the kernel's pids controller: each call that
//! sets it runs in a cgroup of its own whose `pids.max` is the limit, for
//! root too (`RLIMIT_NPROC` exempts uid 0 and counts every process of the
//! user, not the tool's).
//!
//! The cgroup is made below rlp's own cgroup in the pids hierarchy (cgroup
//! v1), or in the root of a cgroup v2 hierarchy that delegates `pids` to
//! its children, when rlp may make one there (as root, or in a delegated
//! cgroup). Elsewhere there is none, and the plan falls back to
//! `RLIMIT_NPROC`.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::sandbox::cgroup::{self, CallCgroup};

/// A call's cgroup with a `pids.max`, removed when dropped.
#[derive(Debug)]
pub(crate) struct PidsCgroup(CallCgroup);

/// The folder rlp makes its cgroups in, found (and tried) once per process.
fn parent() -> Option<&'static Path> {
    static PARENT: OnceLock<Option<PathBuf>> = OnceLock::new();
    // The tool joins it: it may also join a call cgroup to kill after this
    // one, and only the last can be the one it is made in.
    PARENT.get_or_init(|| find_parent().filter(|found| cgroup::usable(found, "pids.max", false).is_some())).as_deref()
}

/// Whether calls can have a pids cgroup here.
pub(crate) fn available() -> bool {
    parent().is_some()
}

/// rlp's cgroup in the pids hierarchy ([`cgroup`]).
fn find_parent() -> Option<PathBuf> {
    if let Some(path) = cgroup::v1_path("pids") {
        let point = cgroup::mount_point(|kind, options| kind == "cgroup" && options.split(',').any(|o| o == "pids"))?;
        return Some(point.join(path.trim_start_matches('/')));
    }
    // cgroup v2: only its root can both hold rlp and delegate to children.
    let (path, point) = (cgroup::v2_path()?, cgroup::v2_mount()?);
    let delegated = std::fs::read_to_string(point.join("cgroup.subtree_control")).ok()?;
    (path == "/" && delegated.split_whitespace().any(|c| c == "pids")).then_some(point)
}

impl PidsCgroup {
    /// A new cgroup allowing at most `max` processes (and threads), or
    /// `None` where calls can have none.
    pub(crate) fn create(max: u64) -> io::Result<Option<PidsCgroup>> {
        let Some(parent) = parent() else { return Ok(None) };
        let cgroup = CallCgroup::create(parent)?;
        #[expect(clippy::disallowed_methods, reason = "a cgroupfs control file, written in place")]
        std::fs::write(cgroup.dir().join("pids.max"), max.to_string())?;
        Ok(Some(PidsCgroup(cgroup)))
    }

    /// The `cgroup.procs` file the child writes `0` to, to join.
    pub(crate) fn procs(&self) -> &std::ffi::CStr {
        self.0.procs()
    }
}
