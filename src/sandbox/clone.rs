//! Children that share rlp's memory (`clone(CLONE_VM | CLONE_VFORK)`): the
//! one a tool is executed from ([`crate::process::spawn`]) and the probes of
//! what the kernel lets rlp do ([`crate::sandbox::world`],
//! [`crate::sandbox::cgroup`]). Such a child may only make async-signal-safe
//! system calls on data prepared beforehand: no allocation, no lock.
//!
//! A child may be made straight in a cgroup v2 (`clone3` with
//! `CLONE_INTO_CGROUP`, Linux 5.7): the kernel places it there as it makes
//! it, where moving it in afterwards (writing `cgroup.procs`) is a cgroup
//! migration, whose first one in a process waits for an RCU grace period
//! (milliseconds). Only x86-64 makes such children here; elsewhere the
//! clone fails with `ENOSYS` and the child joins its cgroup instead.

use std::ffi::{c_int, c_void};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use rustix::io::Errno;

/// Stack of the child between the clone and the exec. It makes a handful
/// of system calls from shallow frames; this leaves ample room.
const CHILD_STACK: usize = 64 * 1024;

/// Clones a child that runs `main(arg)` on a stack of its own, sharing this
/// process's memory (`CLONE_VM | CLONE_VFORK`), in the new namespaces
/// `namespaces` asks for (`CLONE_NEW*` flags) and, when `cgroup` is given,
/// in the cgroup v2 that descriptor names; returns its pid once it has
/// executed a program or exited. `main` must only make async-signal-safe
/// system calls on what `arg` points to, which must outlive the call, and
/// must end in `execve` or `_exit`.
pub(crate) fn clone_vfork(
    namespaces: c_int,
    cgroup: Option<BorrowedFd<'_>>,
    main: extern "C" fn(*mut c_void) -> c_int,
    arg: *mut c_void,
) -> io::Result<i32> {
    let mut stack = Vec::<u8>::with_capacity(CHILD_STACK);
    // Stacks grow down on the targets rlp runs on; the top is 16-byte aligned.
    let base = stack.as_mut_ptr();
    let top = base.wrapping_add(stack.capacity());
    let top = top.wrapping_sub(top as usize % 16);
    match cgroup {
        None => {
            let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD | namespaces;
            // SAFETY: `top` is the aligned end of the CHILD_STACK bytes
            // `stack` owns, which outlive the child's use of them:
            // CLONE_VFORK suspends this thread (and keeps `stack` alive)
            // until the child has executed a program or exited. The caller
            // vouches for `main` and `arg`.
            let pid = unsafe { libc::clone(main, top.cast::<c_void>(), flags, arg) };
            if pid < 0 { Err(io::Error::last_os_error()) } else { Ok(pid) }
        }
        Some(cgroup) => {
            let args = CloneArgs {
                // The flags are non-negative: CLONE_NEW* bits and the ones above.
                flags: (libc::CLONE_VM | libc::CLONE_VFORK | namespaces) as u64 | CLONE_INTO_CGROUP,
                exit_signal: libc::SIGCHLD as u64,
                stack: base as u64,
                stack_size: top as u64 - base as u64,
                cgroup: cgroup.as_raw_fd() as u64,
                ..CloneArgs::default()
            };
            // SAFETY: as for `clone` above: the stack `args` names is
            // `stack`'s, alive until the child has executed a program or
            // exited; the caller vouches for `main` and `arg`.
            unsafe { clone3(&args, main, arg) }
        }
    }
}

/// `CLONE_INTO_CGROUP` (linux/sched.h), which only `clone3` takes.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` up to `cgroup` (linux/sched.h, `CLONE_ARGS_SIZE_VER2`).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// `clone3(args)`, the child running `main(arg)` on the stack `args` names
/// and exiting with what it returns; the child's pid.
///
/// # Safety
///
/// `args` must name a stack that outlives the child's use of it, and
/// `main` and `arg` must be fit for a child that shares this process's
/// memory (see [`clone_vfork`]).
#[cfg(target_arch = "x86_64")]
unsafe fn clone3(args: &CloneArgs, main: extern "C" fn(*mut c_void) -> c_int, arg: *mut c_void) -> io::Result<i32> {
    let ret: i64;
    // SAFETY: the caller vouches for `args`, `main` and `arg`. The parent
    // only gets the result in rax (the kernel clobbers rcx and r11); the
    // child starts on its own stack, 16-byte aligned, with every register
    // as the parent had it, calls `main(arg)` from r12 and r13 and exits
    // with its result, never returning into this frame.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r13",
            "call r12",
            "mov edi, eax",
            "mov eax, {exit}",
            "syscall",
            "ud2",
            "2:",
            exit = const libc::SYS_exit,
            inlateout("rax") libc::SYS_clone3 => ret,
            in("rdi") std::ptr::from_ref(args),
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") main,
            in("r13") arg,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    // A failed system call returns minus its error number.
    i32::try_from(ret)
        .ok()
        .filter(|pid| *pid >= 0)
        .ok_or_else(|| io::Error::from_raw_os_error(i32::try_from(-ret).unwrap_or(libc::EINVAL)))
}

/// Elsewhere no child is made straight in a cgroup: `ENOSYS`, and the child
/// joins its cgroup instead.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn clone3(_: &CloneArgs, _: extern "C" fn(*mut c_void) -> c_int, _: *mut c_void) -> io::Result<i32> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

/// Runs `main(arg)` in a child made by [`clone_vfork`] with `namespaces`
/// (and in `cgroup`, when given), and says how it went: `main` ends in
/// [`exit_with`]. For probes of what the kernel lets rlp do, once per
/// process.
pub(crate) fn try_in_child(
    namespaces: c_int,
    cgroup: Option<BorrowedFd<'_>>,
    main: extern "C" fn(*mut c_void) -> c_int,
    arg: *mut c_void,
) -> Result<(), ProbeError> {
    let pid = clone_vfork(namespaces, cgroup, main, arg).map_err(ProbeError::Clone)?;
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
    /// The child could not be made (the namespaces or the cgroup asked for
    /// are refused).
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
