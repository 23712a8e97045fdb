//! Process plumbing for the exec transport: wait without reaping, end a
//! call's every process — the tool, its process group, every descendant
//! (even one that left the group or the session) and the orphans it left
//! behind — reap them, and make sure a tool does not outlive rlp when rlp
//! is killed (see also [`crate::interrupt`]).
//!
//! Descendants are found through `/proc/<pid>/task/<tid>/children` and
//! frozen top-down (SIGSTOP) before they are killed, so none can fork a new
//! one in between. Orphans — processes whose parent exited before the call
//! ended — are reparented to rlp when it is the subreaper
//! ([`become_subreaper`]); rlp's children that are not a running tool are
//! such orphans, and a call sweeps those that carry its invocation id in
//! their environment, or all of them when no other call is running.

use std::collections::BTreeSet;
use std::io;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long [`reap_group`] waits for killed group members to exit.
const REAP_GRACE: Duration = Duration::from_millis(500);

/// Makes this process the reaper of its orphaned descendants
/// (`PR_SET_CHILD_SUBREAPER`), so the members of a tool's process group that
/// outlive the tool are reparented here and reaped by [`reap_group`] instead
/// of lingering as zombies under a PID 1 that does not reap.
///
/// Process-wide; `rlp tools call` sets it. A library user that embeds
/// [`crate::runtime::Runtime`] may call it once at start-up.
///
/// It also makes this process the owner of every orphan it inherits: the
/// orphan sweep ([`sweep_orphans`]) kills them, so a process whose other
/// children are not its own to kill must not call it.
pub fn become_subreaper() -> io::Result<()> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes plain integer arguments
    // and touches no memory of ours.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    SUBREAPER.store(true, Ordering::SeqCst);
    Ok(())
}

/// Set once this process is the subreaper of its descendants.
static SUBREAPER: AtomicBool = AtomicBool::new(false);

/// Blocks until the child `pid` has exited, without reaping it (so its pid,
/// and the process group id it leads, cannot be reused before the group is
/// killed and the child reaped).
pub fn wait_exited_keep_zombie(pid: i32) -> io::Result<()> {
    let Ok(id) = libc::id_t::try_from(pid) else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "negative pid"));
    };
    loop {
        // SAFETY: `info` is a zeroed siginfo_t owned by this frame; waitid
        // writes into it and keeps no pointer after returning.
        let rc = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(libc::P_PID, id, &mut info, libc::WEXITED | libc::WNOWAIT)
        };
        if rc == 0 {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// Sends SIGKILL to every process of the group `pgid`. A group that no
/// longer exists is not an error.
pub fn kill_group(pgid: i32) {
    if pgid <= 1 {
        return;
    }
    // SAFETY: kill takes plain integers; a negative pid names a process group.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

/// Sends `signal` to one process; one that is gone is not an error.
fn signal_process(pid: i32, signal: libc::c_int) {
    if pid > 1 {
        // SAFETY: kill takes plain integers.
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

/// The direct children of `pid` (of every one of its threads).
fn children_of(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    let tids = tasks.filter_map(Result::ok).filter_map(|t| t.file_name().to_str().and_then(|n| n.parse::<i32>().ok()));
    tids.flat_map(|tid| task_children(pid, tid)).collect()
}

/// The direct children of thread `tid` of process `pid`.
fn task_children(pid: i32, tid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/children"))
        .map(|text| text.split_ascii_whitespace().filter_map(|p| p.parse::<i32>().ok()).collect())
        .unwrap_or_default()
}

/// Stops `root` and every process below it, top-down, so that none can
/// start another; returns them all, `root` first.
fn freeze_tree(root: i32) -> Vec<i32> {
    let mut seen = BTreeSet::new();
    let mut order = Vec::new();
    let mut queue = vec![root];
    while let Some(pid) = queue.pop() {
        if pid <= 1 || !seen.insert(pid) {
            continue;
        }
        signal_process(pid, libc::SIGSTOP);
        order.push(pid);
        queue.extend(children_of(pid));
    }
    order
}

/// Kills `pid`, every process below it and its process group `pid` (the
/// group a tool leads): whether or not they left the group or the session.
pub fn kill_tree(pid: i32) {
    let tree = freeze_tree(pid);
    kill_group(pid);
    for member in tree {
        signal_process(member, libc::SIGKILL);
        // A stopped process dies of SIGKILL as it is, but wake it for certain.
        signal_process(member, libc::SIGCONT);
    }
}

/// The tools running now (their pids), so the orphan sweep never takes one
/// of them for an orphan.
static RUNNING: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Registers a running tool until the guard is dropped.
#[derive(Debug)]
pub struct Running {
    pid: i32,
}

impl Running {
    /// Registers `pid`.
    pub fn new(pid: i32) -> Running {
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
pub fn sweep_orphans(pid: i32, marker: &str) {
    if !SUBREAPER.load(Ordering::SeqCst) {
        return;
    }
    let running = RUNNING.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    let alone = running.iter().all(|p| *p == pid);
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
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
        reap(orphan, deadline);
    }
}

/// Reaps the members of group `pgid` that are (or become) children of this
/// process, waiting at most a short grace period for killed ones to exit.
/// Without [`become_subreaper`], orphans are not our children and this
/// returns at once.
pub fn reap_group(pgid: i32) {
    if pgid > 1 {
        reap(-pgid, Instant::now() + REAP_GRACE);
    }
}

/// Reaps what `waitpid(target)` names (a child, or with a negative target a
/// process group), until none is left or `deadline` passes.
fn reap(target: i32, deadline: Instant) {
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes the status into a local integer.
        let rc = unsafe { libc::waitpid(target, &mut status, libc::WNOHANG) };
        if rc > 0 && target < 0 {
            continue;
        }
        if rc == 0 {
            if Instant::now() >= deadline {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        if rc < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return;
    }
}

/// For a tool process between fork and exec: have the kernel send it SIGKILL
/// if rlp dies (even by SIGKILL, where no handler runs). Fails when rlp (pid
/// `parent`) is already gone, so the tool never starts orphaned.
///
/// Only async-signal-safe calls: it runs in the forked child.
pub fn die_with_parent(parent: libc::pid_t) -> io::Result<()> {
    // SAFETY: prctl and getppid take and return plain integers.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::getppid() != parent {
            return Err(io::Error::other("rlp exited before the tool started"));
        }
    }
    Ok(())
}
