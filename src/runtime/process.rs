//! Process-group plumbing for the exec transport: wait without reaping,
//! kill a whole group, reap what is left of it, and make sure a tool does
//! not outlive rlp when rlp is killed (see also [`crate::interrupt`]).

use std::io;
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
pub fn become_subreaper() -> io::Result<()> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes plain integer arguments
    // and touches no memory of ours.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

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

/// Reaps the members of group `pgid` that are (or become) children of this
/// process, waiting at most a short grace period for killed ones to exit.
/// Without [`become_subreaper`], orphans are not our children and this
/// returns at once.
pub fn reap_group(pgid: i32) {
    if pgid <= 1 {
        return;
    }
    let deadline = Instant::now() + REAP_GRACE;
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes the status into a local integer.
        let rc = unsafe { libc::waitpid(-pgid, &mut status, libc::WNOHANG) };
        if rc > 0 {
            continue;
        }
        if rc == 0 {
            if Instant::now() >= deadline {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
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
