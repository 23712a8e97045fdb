//! The cgroups of calls: where rlp's own cgroups are (read once from
//! `/proc/self/cgroup` and `/proc/self/mountinfo`), and a call's cgroup
//! made below one and removed after the call, for [`super::pids`]
//! (`max_processes`) and [`super::lifetime`] (`cgroup.kill`).

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags};

/// Prefix of the cgroups rlp makes: `rlp-<pid>-<n>`.
pub(super) const PREFIX: &str = "rlp-";
/// How long removing a cgroup waits for its last processes to be gone.
const REMOVE_WAIT: Duration = Duration::from_millis(500);

/// A call's cgroup, removed when dropped.
#[derive(Debug)]
pub(crate) struct CallCgroup {
    dir: PathBuf,
    procs: CString,
}

impl CallCgroup {
    /// A new cgroup below `parent`.
    pub(super) fn create(parent: &Path) -> io::Result<CallCgroup> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = parent.join(format!("{PREFIX}{}-{n}", std::process::id()));
        std::fs::create_dir(&dir)?;
        let procs = CString::new(dir.join("cgroup.procs").as_os_str().as_bytes()).map_err(io::Error::other);
        match procs {
            Ok(procs) => Ok(CallCgroup { dir, procs }),
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                Err(e)
            }
        }
    }

    /// Its folder.
    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The `cgroup.procs` file the child writes `0` to, to join.
    pub(crate) fn procs(&self) -> &CStr {
        &self.procs
    }
}

impl Drop for CallCgroup {
    fn drop(&mut self) {
        // The call's processes are killed by now; the kernel may take a
        // moment to let go of the last ones.
        let until = Instant::now() + REMOVE_WAIT;
        while std::fs::remove_dir(&self.dir).is_err() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// How a child of rlp gets into a call cgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    /// It is made in it ([`crate::sandbox::clone`]: `CLONE_INTO_CGROUP`),
    /// which no migration delays.
    AtBirth,
    /// It moves itself in, writing `0` to its `cgroup.procs`.
    Join,
}

/// Whether `parent` takes call cgroups with `file` in them that a child of
/// rlp can get into, and how: a probe cgroup made, a child made in it
/// (where `at_birth` allows) or else joining it, and the cgroup removed,
/// once; the cgroups of rlp processes killed before they could remove
/// theirs are killed and swept first.
pub(super) fn usable(parent: &Path, file: &str, at_birth: bool) -> Option<Entry> {
    sweep_dead(parent);
    let probe = parent.join(format!("{PREFIX}{}-probe", std::process::id()));
    std::fs::create_dir(&probe).ok()?;
    let entry = match probe.join(file).is_file() {
        false => None,
        true if at_birth && a_child_starts_in(&probe) => Some(Entry::AtBirth),
        true => a_child_joins(&probe).then_some(Entry::Join),
    };
    let until = Instant::now() + REMOVE_WAIT;
    while std::fs::remove_dir(&probe).is_err() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    entry
}

/// Kills what the call cgroups of killed rlp processes below `parent`
/// still hold (where the cgroup can be), and removes them.
pub(super) fn sweep_dead(parent: &Path) {
    for dead in crate::leftovers::dead_entries(parent, &[PREFIX]) {
        if let Ok(kill) = CString::new(dead.join("cgroup.kill").as_os_str().as_bytes()) {
            crate::kill::kill_cgroup(&kill);
        }
    }
    crate::leftovers::sweep(parent, &[PREFIX], crate::leftovers::Kind::Any);
}

/// Whether a child of rlp can be made in the cgroup at `dir` (a kernel
/// before Linux 5.7, a cgroup v1 hierarchy, a delegation boundary or a
/// hierarchy mounted read-only says no).
fn a_child_starts_in(dir: &Path) -> bool {
    let Ok(cgroup) = open_dir(dir) else { return false };
    crate::sandbox::clone::try_in_child(0, Some(cgroup.as_fd()), exit_child, std::ptr::null_mut()).is_ok()
}

/// The child of [`a_child_starts_in`]: made in the cgroup, it has nothing
/// left to do.
extern "C" fn exit_child(_: *mut std::ffi::c_void) -> std::ffi::c_int {
    crate::sandbox::clone::exit_with(Ok(()))
}

/// The folder of the cgroup at `dir`, open: what a child is made in.
pub(super) fn open_dir(dir: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(dir, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?)
}

/// Whether a child of rlp can move itself into the cgroup at `dir` (a
/// delegation boundary, or a hierarchy mounted read-only, says no).
fn a_child_joins(dir: &Path) -> bool {
    let Ok(procs) = CString::new(dir.join("cgroup.procs").as_os_str().as_bytes()) else { return false };
    let arg = std::ptr::from_ref(&procs).cast_mut().cast::<std::ffi::c_void>();
    crate::sandbox::clone::try_in_child(0, None, join_child, arg).is_ok()
}

/// The child of [`a_child_joins`].
extern "C" fn join_child(arg: *mut std::ffi::c_void) -> std::ffi::c_int {
    // SAFETY: `arg` is the CString `a_child_joins` passed, alive in the
    // suspended parent thread's frame until this child exits.
    let procs = unsafe { &*arg.cast_const().cast::<CString>() };
    crate::sandbox::clone::exit_with(crate::sandbox::child::join_cgroup(procs))
}

/// `/proc/self/cgroup` and `/proc/self/mountinfo`, read once.
pub(super) fn sources() -> Option<&'static (String, String)> {
    static SOURCES: OnceLock<Option<(String, String)>> = OnceLock::new();
    SOURCES
        .get_or_init(|| {
            let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
            let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
            Some((cgroups, mounts))
        })
        .as_ref()
}

/// The mount point of the first mount whose file system type and super
/// options satisfy `wanted`.
pub(super) fn mount_point(wanted: impl Fn(&str, &str) -> bool) -> Option<PathBuf> {
    let (_, mounts) = sources()?;
    // A mountinfo line: ... <mount point> <options> - <fs type> <source> <super options>
    mounts.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let point = before.split(' ').nth(4)?;
        let mut after = after.split(' ');
        let (kind, options) = (after.next()?, after.nth(1)?);
        wanted(kind, options).then(|| PathBuf::from(point))
    })
}

/// rlp's cgroup path in the v1 hierarchy holding `controller`.
pub(super) fn v1_path(controller: &str) -> Option<&'static str> {
    let (cgroups, _) = sources()?;
    cgroups.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        controllers.split(',').any(|c| c == controller).then_some(path)
    })
}

/// rlp's cgroup path in the v2 hierarchy.
pub(super) fn v2_path() -> Option<&'static str> {
    let (cgroups, _) = sources()?;
    cgroups.lines().find_map(|line| line.strip_prefix("0::"))
}

/// The cgroup v2 mount point.
pub(super) fn v2_mount() -> Option<PathBuf> {
    mount_point(|kind, _| kind == "cgroup2")
}
