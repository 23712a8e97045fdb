//! The seccomp user-notification calls the supervisor makes: receive a
//! notification, check it is still live, reach into the calling task, reply.

use std::ffi::c_void;
use std::io;
use std::mem::zeroed;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, pidfd_open};

/// `PIDFD_THREAD` (Linux 6.9): a pidfd for a thread that is not a leader.
const PIDFD_THREAD: u32 = libc::O_EXCL as u32;

/// The next notification; ENOENT when its task died before it was read.
pub(super) fn recv(listener: BorrowedFd<'_>) -> io::Result<libc::seccomp_notif> {
    // SAFETY: seccomp_notif is plain data; the kernel wants it zeroed.
    let mut notif: libc::seccomp_notif = unsafe { zeroed() };
    // SAFETY: the ioctl writes one seccomp_notif into `notif`.
    let result = unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_RECV, &raw mut notif) };
    if result == 0 { Ok(notif) } else { Err(io::Error::last_os_error()) }
}

/// Whether notification `id` is still pending: its task has not died (and
/// its pid been reused) since the notification was read.
pub(super) fn is_live(listener: BorrowedFd<'_>, id: u64) -> bool {
    // SAFETY: the ioctl reads one u64 from `id`, a live local.
    unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &raw const id) == 0 }
}

/// Completes the call of notification `id` with `result` (0, or the error).
/// A task that died meanwhile (ENOENT) needs no reply, so errors are dropped.
pub(super) fn reply(listener: BorrowedFd<'_>, id: u64, result: Result<(), Errno>) {
    let response =
        libc::seccomp_notif_resp { id, val: 0, error: result.err().map_or(0, |errno| -errno.raw_os_error()), flags: 0 };
    // SAFETY: the ioctl reads one seccomp_notif_resp from `response`.
    unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND, &raw const response) };
}

/// A pidfd for the task `tid` (in rlp's pid namespace): its process's when
/// it leads one; else a thread pidfd (Linux 6.9), else its process's,
/// found by the `Tgid` of /proc/<tid>/status.
pub(super) fn task_pidfd(tid: u32) -> io::Result<OwnedFd> {
    let pid = Pid::from_raw(i32::try_from(tid).map_err(|_| Errno::SRCH)?).ok_or(Errno::SRCH)?;
    match pidfd_open(pid, PidfdFlags::empty()) {
        // Not a leader: EINVAL, or ENOENT on newer kernels (6.18 at least).
        Err(Errno::INVAL | Errno::NOENT) => {}
        other => return Ok(other?),
    }
    if let Ok(fd) = pidfd_open(pid, PidfdFlags::from_bits_retain(PIDFD_THREAD)) {
        return Ok(fd);
    }
    let status = std::fs::read_to_string(format!("/proc/{tid}/status"))?;
    let tgid = status
        .lines()
        .find_map(|line| line.strip_prefix("Tgid:"))
        .and_then(|tgid| tgid.trim().parse().ok())
        .and_then(Pid::from_raw)
        .ok_or(Errno::SRCH)?;
    Ok(pidfd_open(tgid, PidfdFlags::empty())?)
}

/// Copies `len` bytes at `address` in task `tid`'s memory.
pub(super) fn read_memory(tid: u32, address: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut copy = vec![0u8; len];
    let local = libc::iovec { iov_base: copy.as_mut_ptr().cast(), iov_len: len };
    let remote = libc::iovec { iov_base: address as usize as *mut c_void, iov_len: len };
    // SAFETY: `local` covers `copy`, which the kernel writes at most `len`
    // bytes into; `remote` is only read, in the other process, by the kernel.
    let read = unsafe { libc::process_vm_readv(tid as libc::pid_t, &local, 1, &remote, 1, 0) };
    match usize::try_from(read) {
        Ok(n) if n == len => Ok(copy),
        Ok(_) => Err(Errno::FAULT.into()),
        Err(_) => Err(io::Error::last_os_error()),
    }
}
