//! The system call filter of a sandboxed tool, in classic BPF.
//!
//! Hand-assembled ([`program`]) because neither library fits: seccompiler
//! cannot express `SECCOMP_RET_USER_NOTIF`, and libseccomp is a C library.
//! Every tool is refused calls that escape or weaken the sandbox (io_uring,
//! ptrace, namespaces, by `unshare` or `clone`, kernel modules, SysV IPC and
//! POSIX message queues, terminal injection, …); `clone3`, whose flags the
//! filter cannot read, is unavailable (ENOSYS) so that glibc uses `clone`.
//! Its sockets are Unix stream and seqpacket ones (no datagrams, which
//! reach any bound path without `connect`) and routing netlink ones. A
//! [`NetFilter::Supervised`] tool may also open TCP sockets, and each of
//! its `connect` calls goes to rlp through the filter's user-notification
//! listener (see [`crate::sandbox::net`]); the child hands that listener
//! to rlp with [`send_fd`] / [`recv_fd`].

mod fd_pass;
mod program;
#[cfg(test)]
pub(crate) mod sandboxed;
#[cfg(test)]
mod tests;

use std::ffi::c_int;
use std::sync::OnceLock;

use rustix::io::Errno;

pub use fd_pass::{recv_fd, send_fd};

/// What the filter lets a tool do with the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetFilter {
    /// No Internet sockets at all.
    Denied,
    /// TCP sockets, with every `connect` decided by a supervisor.
    Supervised,
}

/// A filter program, assembled ahead of the child that installs it.
#[derive(Debug)]
pub struct Filter {
    /// The BPF instructions.
    program: Vec<libc::sock_filter>,
    /// Whether `connect` goes to a supervisor.
    supervised: bool,
}

impl Filter {
    /// The filter for `net`; `None` on an architecture rlp has no syscall
    /// table for (it knows x86_64 and aarch64).
    pub fn build(net: NetFilter) -> Option<Filter> {
        let program = program::assemble(net)?;
        u16::try_from(program.len()).ok()?;
        Some(Filter { program, supervised: net == NetFilter::Supervised })
    }

    /// Whether the filter needs a supervisor ([`NetFilter::Supervised`]).
    pub fn supervised(&self) -> bool {
        self.supervised
    }

    /// Installs the filter on the calling thread, which has already set
    /// `no_new_privs`; returns the user-notification listener when
    /// supervised. Async-signal-safe (made for a child between `clone` and
    /// `execve`): no allocation, no lock, only system calls on memory
    /// prepared beforehand.
    pub fn install(&self) -> Result<Option<c_int>, Errno> {
        let prog = libc::sock_fprog {
            // Checked to fit in `build`.
            len: self.program.len() as u16,
            filter: self.program.as_ptr().cast_mut(),
        };
        let mut flags = if self.supervised {
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
        } else {
            0
        };
        loop {
            // SAFETY: `prog` points at `self.program`, which outlives the
            // call; the kernel copies the program and only reads it.
            let result =
                unsafe { libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, flags, &raw const prog) };
            if result >= 0 {
                // The listener is a file descriptor, which fits in a c_int.
                return Ok(self.supervised.then_some(result as c_int));
            }
            let errno = Errno::from_raw_os_error(last_errno());
            // Kernels before 5.19 know no WAIT_KILLABLE_RECV.
            if errno == Errno::INVAL && flags & libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV != 0 {
                flags &= !libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
                continue;
            }
            return Err(errno);
        }
    }
}

/// The calling thread's `errno`.
fn last_errno() -> c_int {
    // SAFETY: `__errno_location` returns the calling thread's errno slot,
    // valid for the thread's life.
    unsafe { *libc::__errno_location() }
}

/// What this kernel's seccomp can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Availability {
    /// Filters can be loaded.
    pub filter: bool,
    /// Filters can hand calls to a supervisor, and the supervisor can take
    /// the caller's file descriptors (`pidfd_getfd`).
    pub user_notif: bool,
}

/// What this kernel's seccomp can do, probed once.
pub fn available() -> Availability {
    static PROBED: OnceLock<Availability> = OnceLock::new();
    *PROBED.get_or_init(|| {
        let filter = action_available(libc::SECCOMP_RET_ERRNO);
        // pidfd_getfd on no descriptor fails EBADF where it exists, ENOSYS where not.
        // SAFETY: no pointers; the call only checks its arguments.
        let getfd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, -1, -1, 0) } == -1 && last_errno() != libc::ENOSYS;
        Availability { filter, user_notif: filter && getfd && action_available(libc::SECCOMP_RET_USER_NOTIF) }
    })
}

/// Whether the kernel can return `action` from a filter.
fn action_available(action: u32) -> bool {
    // SAFETY: the kernel reads one u32 from `action`, a live local.
    unsafe { libc::syscall(libc::SYS_seccomp, libc::SECCOMP_GET_ACTION_AVAIL, 0, &raw const action) == 0 }
}
