//! The thread that answers a supervised tool's `connect` calls.
//!
//! Race-free by construction: a decision never lets the tool's own call
//! continue (`SECCOMP_USER_NOTIF_FLAG_CONTINUE` would let the tool change
//! the address or the descriptor after the check). For each notification
//! the supervisor takes a pidfd for the caller, copies the address out of
//! its memory, checks the notification is still live (so the pid was not
//! reused), takes a duplicate of the socket (`pidfd_getfd`), and decides on
//! its copy. Allowed, rlp connects the duplicate itself with that same copy
//! and replies with the result; refused, it replies EACCES. A blocking
//! connect runs on a short-lived worker thread so one slow peer does not
//! hold up the tool's other threads; at most [`MAX_CONNECT_WORKERS`] run at
//! once, and while they all do, further notifications wait in the kernel.

use std::collections::HashMap;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};

use rustix::event::{EventfdFlags, PollFd, PollFlags, eventfd, poll};
use rustix::fs::{OFlags, fcntl_getfl};
use rustix::io::Errno;
use rustix::pipe::{PipeFlags, pipe_with};
use rustix::process::{PidfdGetfdFlags, pidfd_getfd};

use crate::sandbox::net::allowlist::Allowlist;
use crate::sandbox::net::notif;
use crate::sandbox::net::sockaddr::{Destination, classify};

/// How many refused addresses a report keeps.
const REFUSED_KEPT: usize = 8;

/// Most blocking connects rlp makes for one tool at once, each on a worker
/// thread of its own. A tool seldom waits on more than a few connects at a
/// time (an HTTP client opens a handful per host), so 16 holds up no
/// ordinary tool, while 16 threads per call stay cheap for rlp even when
/// `rlp serve` runs many calls. A tool past it cannot make rlp start more:
/// the supervisor reads no further notification until a worker ends, so the
/// tool's next `connect` waits, as on a slow network, instead of failing
/// with EAGAIN, which few programs retry.
pub(super) const MAX_CONNECT_WORKERS: usize = 16;

/// What a supervised tool did with the network.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NetReport {
    /// Internet connects let through.
    pub allowed: u32,
    /// The first refused `ip:port`s (`[v6]:port`), each once, at most 8.
    pub refused: Vec<String>,
}

/// Connects in progress on worker threads, by notification id: `finish`
/// shuts their sockets down to end them.
type InFlight = Arc<Mutex<HashMap<u64, Arc<OwnedFd>>>>;

/// A running supervisor, one per call.
#[derive(Debug)]
pub struct Supervisor {
    /// Closed by `finish` to wake the thread and stop it.
    stop: OwnedFd,
    /// The thread, which returns the report.
    thread: JoinHandle<NetReport>,
}

impl Supervisor {
    /// Starts answering the `connect` calls of the filter whose listener is
    /// `listener`, allowing those `allow` allows.
    pub fn start(listener: OwnedFd, allow: Allowlist) -> io::Result<Supervisor> {
        let (wake, stop) = pipe_with(PipeFlags::CLOEXEC)?;
        let session = Session {
            listener: Arc::new(listener),
            freed: Arc::new(eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?),
            allow,
            report: NetReport::default(),
            in_flight: InFlight::default(),
            workers: Vec::new(),
        };
        let thread = thread::Builder::new().name("rlp-net".into()).spawn(move || session.run(&wake))?;
        Ok(Supervisor { stop, thread })
    }

    /// Stops the thread (the tool has ended), aborts connects still in
    /// flight (shutting their sockets down), and reports.
    pub fn finish(self) -> NetReport {
        drop(self.stop);
        self.thread.join().unwrap_or_default()
    }
}

/// The supervisor thread's state.
struct Session {
    /// The filter's listener, shared with the workers that reply.
    listener: Arc<OwnedFd>,
    /// An eventfd each worker signals once its connect is done: the thread
    /// may read the next notification.
    freed: Arc<OwnedFd>,
    /// What may be reached.
    allow: Allowlist,
    /// The report so far.
    report: NetReport,
    /// Blocking connects under way.
    in_flight: InFlight,
    /// Worker threads, joined before the report is returned.
    workers: Vec<JoinHandle<()>>,
}

impl Session {
    /// Answers notifications until no task uses the filter any more or the
    /// stop pipe closes; then ends the connects in flight and reports.
    fn run(mut self, wake: &OwnedFd) -> NetReport {
        block_signals();
        loop {
            // With every worker busy, only a hang-up of the listener is watched for.
            let wanted = if self.worker_free() { PollFlags::IN } else { PollFlags::empty() };
            let mut fds = [
                PollFd::new(&*self.listener, wanted),
                PollFd::new(wake, PollFlags::IN),
                PollFd::new(&*self.freed, PollFlags::IN),
            ];
            match poll(&mut fds, None) {
                Ok(_) => {}
                Err(Errno::INTR) => continue,
                Err(_) => break,
            }
            let (listener, stop, freed) = (fds[0].revents(), fds[1].revents(), fds[2].revents());
            if !stop.is_empty() {
                break;
            }
            if !freed.is_empty() {
                // Reading resets the count; the eventfd never blocks.
                let _ = rustix::io::read(&*self.freed, &mut [0u8; 8]);
            }
            if listener.contains(PollFlags::IN) {
                self.answer_next();
            } else if !listener.is_empty() {
                // POLLHUP: every task that used the filter has exited.
                break;
            }
            self.workers.retain(|worker| !worker.is_finished());
        }
        for socket in self.in_flight.lock().unwrap_or_else(PoisonError::into_inner).values() {
            // SAFETY: shutdown only takes a descriptor, live in `socket`.
            unsafe { libc::shutdown(socket.as_raw_fd(), libc::SHUT_RDWR) };
        }
        for worker in self.workers.drain(..) {
            // A worker that panicked has nothing more to report.
            let _ = worker.join();
        }
        self.report
    }

    /// Whether fewer than [`MAX_CONNECT_WORKERS`] connects are under way.
    fn worker_free(&self) -> bool {
        self.in_flight.lock().unwrap_or_else(PoisonError::into_inner).len() < MAX_CONNECT_WORKERS
    }

    /// Reads one notification and answers it.
    fn answer_next(&mut self) {
        // ENOENT: the task died before its call was read; nothing to answer.
        let Ok(call) = notif::recv(self.listener.as_fd()) else { return };
        let listener = self.listener.as_fd();
        let [fd, address, len, ..] = call.data.args;
        let Ok(pidfd) = notif::task_pidfd(call.pid) else {
            return notif::reply(listener, call.id, Err(Errno::SRCH));
        };
        // addrlen is a C int; the kernel refuses more than a sockaddr_storage.
        let len = len as u32 as usize;
        if len > size_of::<libc::sockaddr_storage>() {
            return notif::reply(listener, call.id, Err(Errno::INVAL));
        }
        let copy = match notif::read_memory(call.pid, address, len) {
            Ok(copy) => copy,
            Err(_) => return notif::reply(listener, call.id, Err(Errno::FAULT)),
        };
        if !notif::is_live(listener, call.id) {
            return;
        }
        let socket = match pidfd_getfd(&pidfd, fd as i32, PidfdGetfdFlags::empty()) {
            Ok(socket) => socket,
            Err(errno) => return notif::reply(listener, call.id, Err(errno)),
        };
        match classify(&copy) {
            Destination::Inet(addr) if self.allow.allows(addr) => {
                self.report.allowed = self.report.allowed.saturating_add(1);
                self.connect(call.id, socket, copy);
            }
            Destination::Inet(addr) => {
                let shown = addr.to_string();
                if self.report.refused.len() < REFUSED_KEPT && !self.report.refused.contains(&shown) {
                    self.report.refused.push(shown);
                }
                notif::reply(listener, call.id, Err(Errno::ACCESS));
            }
            Destination::Pass => self.connect(call.id, socket, copy),
            Destination::Refused(errno) => notif::reply(listener, call.id, Err(errno)),
        }
    }

    /// Connects `socket` to `address` for notification `id` and replies
    /// with the result: at once when the socket is non-blocking (the tool
    /// gets EINPROGRESS), else on a worker thread.
    fn connect(&mut self, id: u64, socket: OwnedFd, address: Vec<u8>) {
        let blocking = fcntl_getfl(&socket).is_ok_and(|flags| !flags.contains(OFlags::NONBLOCK));
        if !blocking {
            return notif::reply(self.listener.as_fd(), id, connect(socket.as_fd(), &address));
        }
        let socket = Arc::new(socket);
        let in_flight = Arc::clone(&self.in_flight);
        in_flight.lock().unwrap_or_else(PoisonError::into_inner).insert(id, Arc::clone(&socket));
        let (listener, freed) = (Arc::clone(&self.listener), Arc::clone(&self.freed));
        let work = move || {
            block_signals();
            let result = connect(socket.as_fd(), &address);
            in_flight.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
            notif::reply(listener.as_fd(), id, result);
            // Adding 1 cannot overflow the count, which the thread resets.
            let _ = rustix::io::write(&*freed, &1u64.to_ne_bytes());
        };
        match thread::Builder::new().name("rlp-net-connect".into()).spawn(work) {
            Ok(worker) => self.workers.push(worker),
            // No thread to spare: refuse the call (EAGAIN, as connect
            // does when the system is short of resources) rather than
            // hold up every other call meanwhile.
            Err(_) => {
                self.in_flight.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
                notif::reply(self.listener.as_fd(), id, Err(Errno::AGAIN));
            }
        }
    }
}

/// `connect(2)` of `socket` to the raw `address`.
fn connect(socket: BorrowedFd<'_>, address: &[u8]) -> Result<(), Errno> {
    // A sockaddr is at most a sockaddr_storage; the caller checked.
    let len = address.len() as libc::socklen_t;
    // SAFETY: the kernel reads `len` bytes of `address`, which has them.
    let result = unsafe { libc::connect(socket.as_raw_fd(), address.as_ptr().cast(), len) };
    if result == 0 { Ok(()) } else { Err(Errno::from_io_error(&io::Error::last_os_error()).unwrap_or(Errno::IO)) }
}

/// Blocks every signal on the calling thread: rlp's signals go to its
/// other threads, and a connect rlp makes for a tool is not cut short by one.
fn block_signals() {
    // SAFETY: `all` is initialised by sigfillset before use; the old mask
    // is not wanted.
    unsafe {
        let mut all = std::mem::zeroed::<libc::sigset_t>();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, std::ptr::null_mut());
    }
}
