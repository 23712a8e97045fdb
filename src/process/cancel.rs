//! Cancelling a running call from another thread: a [`Cancel`] token whose
//! descriptor the process runner waits on beside the tool's pipes, so a
//! cancelled tool is killed at once, not at its next timeout.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec, eventfd, poll};

/// A cancellation signal shared by the caller and the call. Cloning shares
/// it; cancelling is final.
#[derive(Clone, Debug)]
pub struct Cancel {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Becomes readable (and stays so) once cancelled.
    fd: OwnedFd,
    cancelled: AtomicBool,
}

impl Cancel {
    /// A token not cancelled yet.
    pub fn new() -> io::Result<Cancel> {
        let fd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(Cancel { inner: Arc::new(Inner { fd, cancelled: AtomicBool::new(false) }) })
    }

    /// Cancels the call: a tool running for it is killed with everything it
    /// started, and no further attempt starts.
    pub fn cancel(&self) {
        if !self.inner.cancelled.swap(true, Ordering::SeqCst) {
            // The counter is never read, so the descriptor stays readable;
            // a write can fail only when the counter would overflow.
            let _ = rustix::io::write(&self.inner.fd, &1u64.to_ne_bytes());
        }
    }

    /// Whether [`Cancel::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// Waits up to `timeout`, or less if the token is cancelled meanwhile;
    /// returns whether it is cancelled.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        while !self.is_cancelled() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            // Any wait fits a Timespec; were it not to, wait a second and look again.
            let left = Timespec::try_from(left).unwrap_or(Timespec { tv_sec: 1, tv_nsec: 0 });
            let mut fds = [PollFd::new(&self.inner.fd, PollFlags::IN)];
            // Interrupted or failed, the loop looks at the flag and the clock again.
            let _ = poll(&mut fds, Some(&left));
        }
        true
    }

    /// The descriptor to wait on: readable once cancelled.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.inner.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancelling_is_seen_by_every_clone_and_wakes_a_poll() {
        let cancel = Cancel::new().unwrap();
        let seen = cancel.clone();
        assert!(!seen.is_cancelled());
        cancel.cancel();
        cancel.cancel();
        assert!(seen.is_cancelled());
        let mut fds = [PollFd::new(&seen.inner.fd, PollFlags::IN)];
        let zero = Timespec { tv_sec: 0, tv_nsec: 0 };
        assert_eq!(poll(&mut fds, Some(&zero)).unwrap(), 1);
    }

    #[test]
    fn a_wait_ends_with_its_timeout_or_with_a_cancel_from_another_thread() {
        let cancel = Cancel::new().unwrap();
        assert!(!cancel.wait_timeout(Duration::from_millis(1)));
        let other = cancel.clone();
        let canceller = std::thread::spawn(move || other.cancel());
        // Were the cancel not seen, this would wait an hour.
        assert!(cancel.wait_timeout(Duration::from_secs(3600)));
        canceller.join().unwrap();
        assert!(cancel.wait_timeout(Duration::from_secs(3600)));
    }
}
