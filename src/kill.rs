//! The one place that sends a tool a signal: the group kill, the tree kill
//! that also reaches the descendants that left the group or the session,
//! and the kill of a call cgroup (which reaches every process in it).
//!
//! Descendants are found through `/proc/<pid>/task/<tid>/children` and
//! frozen top-down (SIGSTOP) before they are killed, so none can fork a new
//! one in between.

use std::collections::BTreeSet;

use rustix::process::{Pid, Signal, kill_process, kill_process_group};

/// Sends SIGKILL to every process of the group `pgid`. A group that no
/// longer exists is not an error.
///
/// Async-signal-safe (one system call, no allocation): the interrupt handler
/// ([`crate::interrupt`]) ends the tools' groups with it.
#[expect(clippy::disallowed_methods, reason = "the one place rlp signals a process group")]
pub(crate) fn kill_group(pgid: i32) {
    if pgid > 1
        && let Some(pgid) = Pid::from_raw(pgid)
    {
        let _ = kill_process_group(pgid, Signal::KILL);
    }
}

/// Kills every process of the cgroup whose `cgroup.kill` file is at `path`
/// (writing `1` to it). Async-signal-safe (open, write, close on a string
/// prepared beforehand): the interrupt handler ([`crate::interrupt`]) ends
/// the calls' cgroups with it.
pub(crate) fn kill_cgroup(path: &std::ffi::CStr) {
    // SAFETY: a C string prepared beforehand; the descriptor is closed
    // before returning.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC);
        if fd >= 0 {
            libc::write(fd, b"1".as_ptr().cast(), 1);
            libc::close(fd);
        }
    }
}

/// Sends `signal` to one process; one that is gone is not an error.
#[expect(clippy::disallowed_methods, reason = "the one place rlp signals a process")]
fn signal_process(pid: i32, signal: Signal) {
    if pid > 1
        && let Some(pid) = Pid::from_raw(pid)
    {
        let _ = kill_process(pid, signal);
    }
}

/// Kills `pid`, every process below it and its process group `pid` (the
/// group a tool leads): whether or not they left the group or the session.
pub(crate) fn kill_tree(pid: i32) {
    let tree = freeze_tree(pid);
    kill_group(pid);
    for member in tree {
        signal_process(member, Signal::KILL);
        // A stopped process dies of SIGKILL as it is, but wake it for certain.
        signal_process(member, Signal::CONT);
    }
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
        signal_process(pid, Signal::STOP);
        order.push(pid);
        queue.extend(children_of(pid));
    }
    order
}

/// The direct children of `pid` (of every one of its threads).
fn children_of(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    let tids = tasks.filter_map(Result::ok).filter_map(|t| t.file_name().to_str().and_then(|n| n.parse::<i32>().ok()));
    tids.flat_map(|tid| task_children(pid, tid)).collect()
}

/// The direct children of thread `tid` of process `pid`.
pub(crate) fn task_children(pid: i32, tid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/children"))
        .map(|text| text.split_ascii_whitespace().filter_map(|p| p.parse::<i32>().ok()).collect())
        .unwrap_or_default()
}
