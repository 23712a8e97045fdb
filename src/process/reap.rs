//! Reaping: the tool, the members of its group, and the orphans a call
//! leaves.
//!
//! Orphans — processes whose parent exited before the call ended — are
//! reparented to rlp when it is the subreaper ([`become_subreaper`]); rlp's
//! children that are not a running tool are such orphans, and a call sweeps
//! those that carry its marker (the invocation id) in their environment, or
//! all of them when no other call is running.

use std::io;
use std::process::ExitStatus;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::io::Errno;
use rustix::process::{Pid, WaitOptions, WaitStatus, getpid, set_child_subreaper, waitpgid, waitpid};

use crate::kill::{kill_tree, task_children};

/// How long [`reap_group`] waits for killed group members to exit.
const REAP_GRACE: Duration = Duration::from_millis(500);

/// Makes this process the reaper of its orphaned descendants
/// (`PR_SET_CHILD_SUBREAPER`), so the members of a tool's process group that
/// outlive the tool are reparented here and reaped by [`reap_group`] instead
/// of lingering as zombies under a PID 1 that does not reap.
///
/// Process-wide; `rlp` sets it at start-up. A library user that embeds
/// [`crate::runtime::Runtime`] may call it once at start-up.
///
/// It also makes this process the owner of every orphan it inherits: the
/// orphan sweep ([`sweep_orphans`]) kills them, so a process whose other
/// children are not its own to kill must not call it.
pub fn become_subreaper() -> io::Result<()> {
    set_child_subreaper(Some(getpid()))?;
    SUBREAPER.store(true, Ordering::SeqCst);
    Ok(())
}

/// Set once this process is the subreaper of its descendants.
static SUBREAPER: AtomicBool = AtomicBool::new(false);

/// The tools running now (their pids), so the orphan sweep never takes one
/// of them for an orphan.
static RUNNING: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Registers a running tool until the guard is dropped.
#[derive(Debug)]
pub(crate) struct Running {
    pid: i32,
}

impl Running {
    /// Registers `pid`.
    pub(crate) fn new(pid: i32) -> Running {
        RUNNING.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(pid);
        Running { pid }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut running = RUNNING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(i) = running.iter().position(|p| *p == self.pid) {
            running.swap_remove(i);
        }
    }
}

/// Whether process `pid`'s environment holds `entry` (`NAME=value`).
fn environment_has(pid: i32, entry: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|environ| environ.split(|b| *b == 0).any(|e| e == entry.as_bytes()))
}

/// Kills and reaps the orphans the call of tool `pid` left (see the module
/// docs): rlp's children that are not a running tool and either carry
/// `marker` in their environment or, when no other tool runs, any orphan at
/// all. Does nothing unless this process is the subreaper
/// ([`become_subreaper`]): otherwise orphans are not reparented here, and its
/// children are not rlp's to kill.
pub(crate) fn sweep_orphans(pid: i32, marker: &str) {
    if !SUBREAPER.load(Ordering::SeqCst) {
        return;
    }
    let running = RUNNING.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    let alone = running.iter().all(|p| *p == pid);
    let me = getpid().as_raw_nonzero().get();
    // The kernel hands an orphan to the subreaper's first live thread: the
    // main thread, which lives as long as the process.
    let orphans: Vec<i32> = task_children(me, me)
        .into_iter()
        .filter(|pid| !running.contains(pid))
        .filter(|pid| alone || environment_has(*pid, marker))
        .collect();
    for &orphan in &orphans {
        kill_tree(orphan);
    }
    let deadline = Instant::now() + REAP_GRACE;
    for orphan in orphans {
        if let Some(orphan) = Pid::from_raw(orphan) {
            reap(|options| waitpid(Some(orphan), options), deadline);
        }
    }
}

/// Reaps the members of group `pgid` that are (or become) children of this
/// process, waiting at most a short grace period for killed ones to exit.
/// Without [`become_subreaper`], orphans are not our children and this
/// returns at once.
pub(crate) fn reap_group(pgid: i32) {
    if pgid > 1
        && let Some(pgid) = Pid::from_raw(pgid)
    {
        reap(|options| waitpgid(pgid, options), Instant::now() + REAP_GRACE);
    }
}

/// Reaps those of `pids` that are children of this process (orphans of a
/// call, reparented here) once they exit, waiting at most a short grace
/// for ones just killed.
pub(crate) fn reap_pids(pids: &[i32]) {
    let deadline = Instant::now() + REAP_GRACE;
    for pid in pids.iter().filter_map(|&pid| Pid::from_raw(pid)) {
        reap(|options| waitpid(Some(pid), options), deadline);
    }
}

/// Reaps what `wait` names (a child, or a process group), until none is left
/// or `deadline` passes.
fn reap(wait: impl Fn(WaitOptions) -> rustix::io::Result<Option<(Pid, WaitStatus)>>, deadline: Instant) {
    loop {
        match wait(WaitOptions::NOHANG) {
            Ok(Some(_)) => continue,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
            Err(Errno::INTR) => continue,
            Ok(None) | Err(_) => return,
        }
    }
}

/// Reaps the child `pid` and returns how it ended: waiting for it when
/// `block`, otherwise only if it has already exited.
pub(crate) fn reap_child(pid: i32, block: bool) -> Option<ExitStatus> {
    use std::os::unix::process::ExitStatusExt;
    let pid = Pid::from_raw(pid)?;
    let options = if block { WaitOptions::empty() } else { WaitOptions::NOHANG };
    loop {
        match waitpid(Some(pid), options) {
            Ok(found) => return found.map(|(_, status)| ExitStatus::from_raw(status.as_raw())),
            Err(Errno::INTR) => continue,
            Err(_) => return None,
        }
    }
}
