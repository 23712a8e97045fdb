//! Test support: runs a Python script under a filter, the way a tool runs.

use std::ffi::c_int;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use crate::sandbox::seccomp::{Filter, recv_fd, send_fd};

/// A script started under a filter, and the listener it passed back.
pub(crate) struct Sandboxed {
    /// The running Python.
    pub(crate) child: std::process::Child,
    /// The filter's listener, when supervised.
    pub(crate) listener: Option<OwnedFd>,
}

impl Sandboxed {
    /// Waits for the script and returns its stdout, checking it succeeded.
    pub(crate) fn stdout(self) -> String {
        let Output { status, stdout, stderr } = self.child.wait_with_output().unwrap();
        assert!(status.success(), "the script failed: {}", String::from_utf8_lossy(&stderr));
        String::from_utf8(stdout).unwrap()
    }
}

/// A `socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC)`.
fn seqpacket_pair() -> (OwnedFd, OwnedFd) {
    let mut fds: [c_int; 2] = [-1; 2];
    // SAFETY: socketpair writes two descriptors into `fds`.
    let result =
        unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) };
    assert_eq!(result, 0, "socketpair: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors are new and owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// Starts `python3 -c script` in `dir` under `filter`: the child sets
/// `no_new_privs`, installs the filter and sends its listener back.
pub(crate) fn python(filter: Filter, script: &str, dir: &Path) -> Sandboxed {
    let (ours, theirs) = seqpacket_pair();
    let filter = Arc::new(filter);
    let supervised = filter.supervised();
    let mut command = Command::new("/usr/bin/python3");
    command.arg("-c").arg(script).current_dir(dir).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let child_end = theirs.try_clone().unwrap();
    // SAFETY: the closure runs in the forked child and makes only
    // async-signal-safe calls: prctl, the filter's install, send_fd, close.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(listener) = filter.install()? {
                send_fd(child_end.as_fd(), listener)?;
                libc::close(listener);
            }
            Ok(())
        });
    }
    let child = command.spawn().unwrap();
    drop(command);
    drop(theirs);
    let listener = supervised.then(|| recv_fd(ours.as_fd()).unwrap());
    Sandboxed { child, listener }
}
