//! Children that share rlp's memory (`clone(CLONE_VM | CLONE_VFORK)`): the
//! one a tool is executed from ([`crate::process::spawn`]) and the probes of
//! what the kernel lets rlp do ([`crate::sandbox::world`],
//! [`crate::sandbox::cgroup`]). Such a child may only make async-signal-safe
//! system calls on data prepared beforehand: no allocation, no lock.

use std::ffi::{c_int, c_void};
use std::io;

use rustix::io::Errno;

/// Stack of the child between the clone and the exec. It makes a handful
/// of system calls from shallow frames; this leaves ample room.
const CHILD_STACK: usize = 64 * 1024;

/// Clones a child that runs `main(arg)` on a stack of its own, sharing this
/// process's memory (`CLONE_VM | CLONE_VFORK`), in the new namespaces
/// `namespaces` asks for (`CLONE_NEW*` flags); returns its pid once it has
/// executed a program or exited. `main` must only make async-signal-safe
/// system calls on what `arg` points to, which must outlive the call, and
/// must end in `execve` or `_exit`.
pub(crate) fn clone_vfork(
    namespaces: c_int,
    main: extern "C" fn(*mut c_void) -> c_int,
    arg: *mut c_void,
) -> io::Result<i32> {
    let mut stack = Vec::<u8>::with_capacity(CHILD_STACK);
    // Stacks grow down on the targets rlp runs on; the top is 16-byte aligned.
    let top = stack.as_mut_ptr().wrapping_add(stack.capacity());
    let top = top.wrapping_sub(top as usize % 16);
    let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD | namespaces;
    // SAFETY: `top` is the aligned end of the CHILD_STACK bytes `stack`
    // owns, which outlive the child's use of them: CLONE_VFORK suspends this
    // thread (and keeps `stack` alive) until the child has executed a
    // program or exited. The caller vouches for `main` and `arg`.
    let pid = unsafe { libc::clone(main, top.cast::<c_void>(), flags, arg) };
    if pid < 0 { Err(io::Error::last_os_error()) } else { Ok(pid) }
}

/// Runs `main(arg)` in a child made by [`clone_vfork`] with `namespaces`,
/// and says how it went: `main` ends in [`exit_with`]. For probes of what
/// the kernel lets rlp do, once per process.
pub(crate) fn try_in_child(
    namespaces: c_int,
    main: extern "C" fn(*mut c_void) -> c_int,
    arg: *mut c_void,
) -> Result<(), ProbeError> {
    let pid = clone_vfork(namespaces, main, arg).map_err(ProbeError::Clone)?;
    let mut status = 0;
    // SAFETY: waits for the child just made, writing the status on this frame.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(ProbeError::Wait(error));
        }
    }
    match (libc::WIFEXITED(status), libc::WEXITSTATUS(status)) {
        (true, 0) => Ok(()),
        (true, errno) => Err(ProbeError::Refused(io::Error::from_raw_os_error(errno))),
        _ => Err(ProbeError::Killed),
    }
}

/// Why a probe of [`try_in_child`] failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProbeError {
    /// The child could not be made (the namespaces asked for are refused).
    #[error("clone: {0}")]
    Clone(#[source] io::Error),
    /// The child's end could not be waited for.
    #[error("waitpid: {0}")]
    Wait(#[source] io::Error),
    /// A step of the child failed with this error.
    #[error("{0}")]
    Refused(#[source] io::Error),
    /// A signal ended the child.
    #[error("the probe was killed")]
    Killed,
}

/// Ends a child of [`try_in_child`]: exit status 0, or the errno.
pub(crate) fn exit_with(result: Result<(), Errno>) -> ! {
    let code = match result {
        Ok(()) => 0,
        Err(e) => e.raw_os_error(),
    };
    // SAFETY: _exit ends the child at once, running nothing of rlp's.
    unsafe { libc::_exit(code) }
}
