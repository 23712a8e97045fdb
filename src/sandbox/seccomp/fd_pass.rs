//! Passing one file descriptor over a Unix socket (`SCM_RIGHTS`): how the
//! child hands its filter's listener to rlp, over a
//! `socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC)`.

use std::ffi::c_int;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use rustix::io::Errno;

/// Room for a control message carrying one descriptor.
const SPACE: usize = {
    // SAFETY: CMSG_SPACE only computes a size.
    unsafe { libc::CMSG_SPACE(size_of::<c_int>() as u32) as usize }
};

/// The length of a control message carrying one descriptor.
const ONE_FD_LEN: usize = {
    // SAFETY: CMSG_LEN only computes a size.
    unsafe { libc::CMSG_LEN(size_of::<c_int>() as u32) as usize }
};

/// A control-message buffer, aligned for `cmsghdr`.
#[repr(C)]
union ControlBuffer {
    /// Forces the alignment.
    _header: libc::cmsghdr,
    /// The bytes.
    bytes: [u8; SPACE],
}

/// A zeroed control buffer, and a message header that names it and the one
/// data byte `data` (a SEQPACKET message cannot be empty).
fn message(control: &mut ControlBuffer, data: &mut libc::iovec) -> libc::msghdr {
    // SAFETY: msghdr is plain data; all zeroes is a valid (empty) header.
    let mut header: libc::msghdr = unsafe { zeroed() };
    header.msg_iov = data;
    header.msg_iovlen = 1;
    // SAFETY: writing the union's byte field is always valid.
    header.msg_control = unsafe { control.bytes.as_mut_ptr() }.cast();
    header.msg_controllen = SPACE;
    header
}

/// Sends `fd` over `socket`. Async-signal-safe: the buffers are on the stack.
pub fn send_fd(socket: BorrowedFd<'_>, fd: c_int) -> Result<(), Errno> {
    let mut control = ControlBuffer { bytes: [0; SPACE] };
    let mut byte = 0u8;
    let mut data = libc::iovec { iov_base: (&raw mut byte).cast(), iov_len: 1 };
    let header = message(&mut control, &mut data);
    // SAFETY: `header` names `control`, which has room for one cmsghdr and
    // one c_int (SPACE), so the first header and its data are in bounds.
    let sent = unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&header);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = ONE_FD_LEN;
        libc::CMSG_DATA(cmsg).cast::<c_int>().write_unaligned(fd);
        libc::sendmsg(socket.as_raw_fd(), &header, libc::MSG_NOSIGNAL)
    };
    if sent == 1 { Ok(()) } else { Err(Errno::from_raw_os_error(super::last_errno())) }
}

/// Receives one descriptor sent with [`send_fd`], close-on-exec. Fails if
/// the peer closed its end without sending one.
pub fn recv_fd(socket: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let mut control = ControlBuffer { bytes: [0; SPACE] };
    let mut byte = 0u8;
    let mut data = libc::iovec { iov_base: (&raw mut byte).cast(), iov_len: 1 };
    let mut header = message(&mut control, &mut data);
    // SAFETY: `header` names live buffers of the sizes it states.
    let received = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut header, libc::MSG_CMSG_CLOEXEC) };
    if received < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel filled `header.msg_controllen` bytes of `control`;
    // CMSG_FIRSTHDR returns null when no header fits in them.
    let cmsg = unsafe { libc::CMSG_FIRSTHDR(&header) };
    let one_fd = (libc::SOL_SOCKET, libc::SCM_RIGHTS, ONE_FD_LEN);
    // SAFETY: a non-null `cmsg` points at a complete header inside `control`.
    if cmsg.is_null() || unsafe { ((*cmsg).cmsg_level, (*cmsg).cmsg_type, (*cmsg).cmsg_len) } != one_fd {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "no file descriptor was passed"));
    }
    // SAFETY: an SCM_RIGHTS message of at most SPACE bytes carries one
    // descriptor, now ours (MSG_CTRUNC cannot drop it: the buffer fits one).
    Ok(unsafe { OwnedFd::from_raw_fd(libc::CMSG_DATA(cmsg).cast::<c_int>().read_unaligned()) })
}
