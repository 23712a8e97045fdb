//! How a call's processes end with it: every sandboxed tool runs in a
//! cgroup v2 of its own, and when the call ends rlp writes `1` to its
//! `cgroup.kill` — the kernel kills every process in it at once, forks in
//! flight included, however they detached, changed session or re-forked.
//! The cgroup is made below rlp's own v2 cgroup (as root, or where rlp's
//! cgroup is delegated to it), and the tool is made in it where the kernel
//! can (or else moves itself in); where it cannot be, the tool is PID 1 of a
//! PID namespace of its own instead ([`super::world`]), and where neither
//! works, rlp's sweep finds and kills what is left ([`crate::kill`]).

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::OnceLock;

use rustix::fs::{Mode, OFlags};

use crate::interrupt::{self, Tracked};
use crate::kill::kill_cgroup;
use crate::sandbox::cgroup::{self, CallCgroup, Entry};

/// How the processes of a call end with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lifetime {
    /// Its cgroup's `cgroup.kill`.
    Cgroup,
    /// The kernel ends the PID namespace the tool is PID 1 of.
    PidNamespace,
    /// rlp's sweep of the tool's group and descendants.
    Sweep,
}

impl Lifetime {
    /// As the call frame records it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Lifetime::Cgroup => "cgroup",
            Lifetime::PidNamespace => "pid-namespace",
            Lifetime::Sweep => "sweep",
        }
    }
}

/// The v2 cgroup rlp makes call cgroups in, and how a tool gets into
/// one: found (and tried, or adopted from a kept verdict) once.
static PARENT: OnceLock<Option<(PathBuf, Entry)>> = OnceLock::new();

fn parent() -> Option<&'static (PathBuf, Entry)> {
    PARENT
        .get_or_init(|| {
            let found = parent_path()?;
            let entry = cgroup::usable(&found, "cgroup.kill", true)?;
            Some((found, entry))
        })
        .as_ref()
}

/// rlp's own v2 cgroup, below which call cgroups are made.
fn parent_path() -> Option<PathBuf> {
    Some(cgroup::v2_mount()?.join(cgroup::v2_path()?.trim_start_matches('/')))
}

/// Takes `entry` as how a tool gets into a call cgroup below rlp's own,
/// without trying it (a verdict an earlier process reached in the same
/// context, [`crate::sandbox::kernel_cache`]); what killed rlp processes
/// left there is swept as the probe would. False where rlp has no v2
/// cgroup, or this process already decided.
pub(super) fn adopt(entry: Entry) -> bool {
    let Some(found) = parent_path() else { return false };
    cgroup::sweep_dead(&found);
    PARENT.set(Some((found, entry))).is_ok()
}

/// How a tool gets into a call cgroup, where calls can have one.
pub(super) fn entry() -> Option<Entry> {
    parent().map(|(_, entry)| *entry)
}

/// Whether calls can have a cgroup to kill here.
pub(crate) fn cgroup_available() -> bool {
    parent().is_some()
}

/// A call's cgroup: killed by [`KillCgroup::kill`] (or by the signal
/// handler if a signal ends rlp first), removed when dropped.
#[derive(Debug)]
pub(crate) struct KillCgroup {
    cgroup: CallCgroup,
    /// Its folder, open, where the tool is made in it.
    at_birth: Option<OwnedFd>,
    /// Its `cgroup.kill`, open from the start: the call is ended even when
    /// rlp can open no more files by then.
    kill_file: OwnedFd,
    /// The path of `cgroup.kill`, for the signal handler.
    kill: CString,
    _tracked: Tracked,
}

impl KillCgroup {
    /// A new call cgroup, or `None` where calls can have none.
    pub(crate) fn create() -> io::Result<Option<KillCgroup>> {
        let Some((parent, entry)) = parent() else { return Ok(None) };
        let cgroup = CallCgroup::create(parent)?;
        let at_birth = match entry {
            Entry::AtBirth => Some(cgroup::open_dir(cgroup.dir())?),
            Entry::Join => None,
        };
        let path = cgroup.dir().join("cgroup.kill");
        let kill_file = rustix::fs::open(&path, OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())?;
        let kill = CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
        let tracked = interrupt::track_kill(&kill);
        Ok(Some(KillCgroup { cgroup, at_birth, kill_file, kill, _tracked: tracked }))
    }

    /// The cgroup's folder, where the tool is to be made in it
    /// ([`crate::sandbox::clone::clone_vfork`]); `None` where it joins it.
    pub(crate) fn at_birth(&self) -> Option<BorrowedFd<'_>> {
        self.at_birth.as_ref().map(AsFd::as_fd)
    }

    /// The `cgroup.procs` file the child writes `0` to, to join.
    pub(crate) fn procs(&self) -> &CStr {
        self.cgroup.procs()
    }

    /// Kills every process in the cgroup; returns the pids it held (rlp's
    /// own children among them are to be reaped).
    pub(crate) fn kill(&self) -> Vec<i32> {
        let members = std::fs::read_to_string(self.cgroup.dir().join("cgroup.procs"))
            .map(|text| text.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default();
        if rustix::io::write(&self.kill_file, b"1").is_err() {
            kill_cgroup(&self.kill);
        }
        members
    }
}
