//! The confinement steps the child takes between the clone and the exec.
//!
//! They run in a `clone(CLONE_VM | CLONE_VFORK)` child that shares rlp's
//! memory ([`crate::process::spawn`]): only system calls on data prepared
//! beforehand, no allocation, no lock. In order:
//!
//! 1. the call's pids cgroup joined (`max_processes`), resource limits
//!    (core dumps off, `max_memory_bytes`, `max_processes` without a cgroup);
//! 2. capabilities: a tool run as root keeps root's files and loses the
//!    power to administer the machine (mount, load modules, trace, raise
//!    its limits, reconfigure the network). The few file-ownership
//!    capabilities it keeps are made ambient, and the locked securebit
//!    `SECBIT_NOROOT` stops the exec from granting uid 0 the rest (a
//!    handful of credential changes, where dropping each capability from
//!    the bounding set would take one per capability);
//! 3. `no_new_privs`: no set-user-id program or file capability can give
//!    the tool more rights;
//! 4. the Landlock ruleset;
//! 5. the seccomp filter, whose listener (for a supervised network) goes
//!    to rlp over a socket.

use std::ffi::{CStr, c_int};
use std::os::fd::{AsRawFd, BorrowedFd};

use rustix::io::Errno;

use crate::sandbox::seccomp::{Filter, send_fd};

/// Capabilities a sandboxed tool keeps (when it has them at all, i.e. runs
/// as root): acting on files as their owner would, and changing its own
/// user and group (`no_new_privs` keeps that from gaining anything).
/// CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER,
/// CAP_FSETID, CAP_KILL, CAP_SETGID, CAP_SETUID (linux/capability.h).
const KEPT_CAPABILITIES: &[c_int] = &[0, 1, 2, 3, 4, 5, 6, 7];

/// `SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
/// SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED` (linux/securebits.h): an exec gives
/// uid 0 no capability, and the tool can make no more ambient.
const SECURE_BITS: libc::c_ulong = (1 << 0) | (1 << 1) | (1 << 6) | (1 << 7);
/// `PR_SET_SECUREBITS`.
const PR_SET_SECUREBITS: c_int = 28;

/// One resource limit: the resource and its value (soft and hard).
pub(crate) type Limit = (libc::__rlimit_resource_t, u64);

/// What the child applies, borrowed from the parent's prepared
/// [`crate::sandbox::Confinement`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChildSteps<'a> {
    /// The `cgroup.procs` file of the call's pids cgroup, joined first.
    pub cgroup: Option<&'a CStr>,
    /// Resource limits.
    pub limits: &'a [Limit],
    /// The Landlock ruleset, if the kernel has Landlock.
    pub landlock: Option<BorrowedFd<'a>>,
    /// The seccomp filter, if the kernel can load one.
    pub filter: Option<&'a Filter>,
    /// Where the listener of a supervised filter is sent.
    pub listener_to: Option<BorrowedFd<'a>>,
}

/// `struct __user_cap_header_struct` for capget/capset.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: c_int,
}

/// `struct __user_cap_data_struct` (two of them for version 3).
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;
/// `landlock_restrict_self` (the same number on every architecture).
const SYS_LANDLOCK_RESTRICT_SELF: libc::c_long = 446;

/// The errno of the last failed call.
fn last_errno() -> Errno {
    Errno::from_raw_os_error(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EPERM))
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is
/// `procs` (writing `0` names the writer).
fn join_cgroup(procs: &CStr) -> Result<(), Errno> {
    // SAFETY: open, write and close on a C string and a byte string that
    // outlive the calls; the descriptor is closed before returning.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(last_errno());
        }
        let written = libc::write(fd, b"0".as_ptr().cast(), 1);
        let errno = last_errno();
        libc::close(fd);
        if written != 1 {
            return Err(errno);
        }
    }
    Ok(())
}

impl ChildSteps<'_> {
    /// Applies every step (see the module docs); the first failure ends
    /// the child before it executes anything.
    pub(crate) fn apply(&self) -> Result<(), Errno> {
        if let Some(procs) = self.cgroup {
            join_cgroup(procs)?;
        }
        for &(resource, value) in self.limits {
            let limit = libc::rlimit { rlim_cur: value, rlim_max: value };
            // SAFETY: setrlimit reads the struct on this frame.
            if unsafe { libc::setrlimit(resource, &limit) } != 0 {
                return Err(last_errno());
            }
        }
        self.drop_capabilities()?;
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(last_errno());
        }
        if let Some(ruleset) = self.landlock {
            // SAFETY: a raw system call on a descriptor the parent keeps open
            // until the child has executed the tool.
            if unsafe { libc::syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset.as_raw_fd(), 0) } != 0 {
                return Err(last_errno());
            }
        }
        if let Some(filter) = self.filter
            && let Some(listener) = filter.install()?
        {
            let sent = match self.listener_to {
                Some(socket) => send_fd(socket, listener),
                None => Err(Errno::INVAL),
            };
            // SAFETY: the listener was just made in this child and is closed
            // once; rlp holds its own copy (in flight on the socket).
            unsafe { libc::close(listener) };
            sent?;
        }
        Ok(())
    }

    /// Leaves the tool [`KEPT_CAPABILITIES`] at most, through the exec (see
    /// the module docs). Without capabilities (not root), there is nothing
    /// to lose and nothing changes.
    fn drop_capabilities(&self) -> Result<(), Errno> {
        let mut header = CapHeader { version: CAPABILITY_VERSION_3, pid: 0 };
        let mut data = [CapData { effective: 0, permitted: 0, inheritable: 0 }; 2];
        let kept_mask = KEPT_CAPABILITIES.iter().fold(0u32, |mask, &cap| mask | (1 << cap));
        // SAFETY: capget, capset and prctl read and write the structs on this
        // frame (laid out as the kernel's version-3 structs) or take integers.
        unsafe {
            if libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) != 0 {
                return Err(last_errno());
            }
            if data.iter().all(|d| d.permitted == 0) {
                return Ok(());
            }
            let kept = data[0].permitted & kept_mask;
            data[0].inheritable = kept;
            data[1].inheritable = 0;
            if libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) != 0 {
                return Err(last_errno());
            }
            if libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 {
                return Err(last_errno());
            }
            for &cap in KEPT_CAPABILITIES.iter().filter(|&&cap| kept & (1 << cap) != 0) {
                if libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_RAISE, cap, 0, 0) != 0 {
                    return Err(last_errno());
                }
            }
            if libc::prctl(PR_SET_SECUREBITS, SECURE_BITS, 0, 0, 0) != 0 {
                return Err(last_errno());
            }
        }
        Ok(())
    }
}
