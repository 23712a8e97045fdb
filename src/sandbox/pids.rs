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

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Prefix of the cgroups rlp makes: `rlp-<pid>-<n>`.
const PREFIX: &str = "rlp-";
/// How long removing a cgroup waits for its last processes to be gone.
const REMOVE_WAIT: Duration = Duration::from_millis(500);

/// A call's cgroup, removed when dropped.
#[derive(Debug)]
pub(crate) struct PidsCgroup {
    dir: PathBuf,
    procs: CString,
}

/// The folder rlp makes its cgroups in, found (and tried) once per process.
fn parent() -> Option<&'static Path> {
    static PARENT: OnceLock<Option<PathBuf>> = OnceLock::new();
    PARENT
        .get_or_init(|| {
            let found = find_parent()?;
            // The cgroups of rlp processes that were killed before they
            // could remove theirs.
            crate::leftovers::sweep(&found, &[PREFIX]);
            let probe = found.join(format!("{PREFIX}{}-probe", std::process::id()));
            std::fs::create_dir(&probe).ok()?;
            let usable = probe.join("pids.max").is_file();
            let _ = std::fs::remove_dir(&probe);
            usable.then_some(found)
        })
        .as_deref()
}

/// Whether calls can have a pids cgroup here.
pub(crate) fn available() -> bool {
    parent().is_some()
}

/// rlp's cgroup in the pids hierarchy, from /proc/self/cgroup and
/// /proc/self/mountinfo.
fn find_parent() -> Option<PathBuf> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // A mountinfo line: ... <mount point> <options> - <fs type> <source> <super options>
    let mount_of = |wanted: &dyn Fn(&str, &str) -> bool| {
        mounts.lines().find_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let point = before.split(' ').nth(4)?;
            let mut after = after.split(' ');
            let (kind, options) = (after.next()?, after.nth(1)?);
            wanted(kind, options).then(|| PathBuf::from(point))
        })
    };
    let v1 = cgroups.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        controllers.split(',').any(|c| c == "pids").then_some(path)
    });
    if let Some(path) = v1 {
        let point = mount_of(&|kind, options| kind == "cgroup" && options.split(',').any(|o| o == "pids"))?;
        return Some(point.join(path.trim_start_matches('/')));
    }
    // cgroup v2: only its root can both hold rlp and delegate to children.
    let path = cgroups.lines().find_map(|line| line.strip_prefix("0::"))?;
    let point = mount_of(&|kind, _| kind == "cgroup2")?;
    let delegated = std::fs::read_to_string(point.join("cgroup.subtree_control")).ok()?;
    (path == "/" && delegated.split_whitespace().any(|c| c == "pids")).then_some(point)
}

impl PidsCgroup {
    /// A new cgroup allowing at most `max` processes (and threads), or
    /// `None` where calls can have none.
    pub(crate) fn create(max: u64) -> io::Result<Option<PidsCgroup>> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let Some(parent) = parent() else { return Ok(None) };
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = parent.join(format!("{PREFIX}{}-{n}", std::process::id()));
        std::fs::create_dir(&dir)?;
        let cgroup = PidsCgroup {
            procs: CString::new(dir.join("cgroup.procs").as_os_str().as_bytes()).map_err(io::Error::other)?,
            dir,
        };
        std::fs::write(cgroup.dir.join("pids.max"), max.to_string())?;
        Ok(Some(cgroup))
    }

    /// The `cgroup.procs` file the child writes `0` to, to join.
    pub(crate) fn procs(&self) -> &std::ffi::CStr {
        &self.procs
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        // The call's processes are killed and reaped by now; the kernel may
        // take a moment to let go of the last ones.
        let until = Instant::now() + REMOVE_WAIT;
        while std::fs::remove_dir(&self.dir).is_err() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
