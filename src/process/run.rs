//! One tool process from its start to its end, under limits.
//!
//! The calling thread waits on both pipes and on the tool's exit at once
//! (`poll` on the pipes and a pidfd), reading each pipe as it fills, so a
//! tool never blocks on a full pipe and no helper thread is needed. At the
//! deadline, or when stdout passes its bound, the tool and everything below
//! it are killed ([`kill_tree`]); after a normal exit its group is killed,
//! so forked children never outlive the run, and the orphans it left are
//! swept ([`sweep_orphans`]). Then the tool is reaped, and the pipes get a
//! short grace to deliver what the tool printed (a process that escaped
//! may hold them open).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::io::Errno;
use rustix::process::{Pid, WaitId, WaitIdOptions, waitid};

use crate::kill::{kill_group, kill_tree};
use crate::process::cancel::Cancel;
use crate::process::capture::{Capture, Captured, Keep};
use crate::process::reap::{reap_child, reap_group, reap_pids, sweep_orphans};
use crate::process::spawn::Program;
use crate::sandbox::Confinement;
use crate::sandbox::net::NetReport;

/// How long a killed tool may take to exit before rlp gives up waiting.
pub(crate) const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long the pipes may stay open after the tool exited and everything it
/// started was killed (a process that escaped may hold them); then the run
/// ends with what they carried so far.
const PIPE_GRACE: Duration = Duration::from_millis(500);
/// How often rlp looks whether the tool exited on a kernel without pidfds.
const EXIT_TICK: Duration = Duration::from_millis(10);
/// Longest single wait (a far deadline is waited for in steps).
const LONGEST_WAIT: Duration = Duration::from_secs(3600);
/// Size of one read.
const CHUNK: usize = 8 * 1024;
/// Most reads from one pipe before the deadline is looked at again.
const READS_PER_WAKE: usize = 16;

/// How a run is watched.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Watch<'a> {
    /// When the tool is killed for taking too long.
    pub deadline: Instant,
    /// Most stdout bytes accepted; one more and the tool is killed.
    pub max_stdout: u64,
    /// How stderr is kept (a tail).
    pub stderr: Keep,
    /// The `NAME=value` entry of the tool's environment by which the orphan
    /// sweep recognises the processes this run left.
    pub marker: &'a str,
    /// Ends the run early (the tool is killed) once cancelled.
    pub cancel: Option<&'a Cancel>,
}

/// How a run ended.
#[derive(Debug)]
pub(crate) struct Finished {
    /// The exit status; none if the tool could not be reaped.
    pub status: Option<ExitStatus>,
    /// stdout, up to its bound.
    pub stdout: Captured,
    /// The tail of stderr.
    pub stderr: Captured,
    /// It was killed at the deadline.
    pub timed_out: bool,
    /// It was killed because the call was cancelled.
    pub cancelled: bool,
    /// stdout passed its bound (the tool was killed unless it had exited).
    pub overflow: bool,
    /// It did not exit even after SIGKILL, within [`KILL_GRACE`].
    pub unkillable: bool,
    /// What the sandbox's network supervisor allowed and refused, when the
    /// tool had one.
    pub net: Option<NetReport>,
}

/// Why a run gave no [`Finished`].
#[derive(Debug)]
pub(crate) enum RunError {
    /// The tool could not be started.
    Start(io::Error),
    /// Waiting for it failed (it was killed).
    Wait(io::Error),
}

/// Starts `program`, confined by `sandbox` when given, and watches it to
/// its end (see the module docs).
pub(crate) fn run(
    program: &Program,
    sandbox: Option<&mut Confinement>,
    watch: &Watch<'_>,
) -> Result<Finished, RunError> {
    let mut sandbox = sandbox;
    let (child, supervisor) = match sandbox.as_deref_mut() {
        Some(sandbox) => {
            let child = program.start(Some(sandbox.steps())).map_err(RunError::Start)?;
            // A supervisor that cannot start leaves every connect of the
            // tool blocked: the tool is ended at once.
            match sandbox.supervise() {
                Ok(supervisor) => (child, supervisor),
                Err(e) => {
                    kill_tree(child.pid);
                    reap_pids(&sandbox.end_processes());
                    reap_child(child.pid, false);
                    return Err(RunError::Start(e));
                }
            }
        }
        None => (program.start(None).map_err(RunError::Start)?, None),
    };
    let pid = child.pid;
    // What the call lets go of when it ends (the tool's mount namespace,
    // its private folder) is dropped on a background thread: started now,
    // while the tool runs, rather than once it has exited.
    crate::process::release::start();
    let mut streams =
        [Stream::new(child.stdout, Keep::Head { limit: watch.max_stdout }), Stream::new(child.stderr, watch.stderr)];
    let exit = child.exit.as_ref().map(AsFd::as_fd);
    let namespace = child.namespace;
    let mut finished = Finished {
        status: None,
        stdout: Captured::default(),
        stderr: Captured::default(),
        timed_out: false,
        cancelled: false,
        overflow: false,
        unkillable: false,
        net: None,
    };
    // Until the deadline, then (once everything was killed) a short grace:
    // rlp never waits without a bound.
    let mut deadline = watch.deadline;
    let mut killed = false;
    let mut wait_error = None;
    let exited = loop {
        let until = if exit.is_some() { deadline } else { deadline.min(Instant::now() + EXIT_TICK) };
        // Once the tool was killed the cancel descriptor stays readable:
        // waiting on it then would return at once, again and again.
        let cancel = if killed { None } else { watch.cancel.map(Cancel::fd) };
        let woke = step(&mut streams, exit, cancel, until).and_then(|exit_ready| match exit {
            Some(_) => Ok(exit_ready),
            None => has_exited(pid),
        });
        match woke {
            Ok(true) => break true,
            Ok(false) => {}
            Err(e) => {
                wait_error = Some(e);
                break false;
            }
        }
        if watch.cancel.is_some_and(Cancel::is_cancelled) && !killed {
            finished.cancelled = true;
            killed = true;
            kill_tree(pid);
            deadline = Instant::now() + KILL_GRACE;
        } else if streams[0].overflow && !killed {
            finished.overflow = true;
            killed = true;
            kill_tree(pid);
            deadline = Instant::now() + KILL_GRACE;
        } else if Instant::now() >= deadline {
            if killed {
                finished.unkillable = true;
                break false;
            }
            finished.timed_out = true;
            killed = true;
            kill_tree(pid);
            deadline = Instant::now() + KILL_GRACE;
        }
    };
    // The tool has exited but is not reaped yet, so its group id is still its
    // own: end its group, and the processes it left, whichever group or
    // session they joined (orphaned at its exit, they are now rlp's
    // children), then reap it and them. A tool that did not exit still has
    // its descendants below it.
    if exited {
        kill_group(pid);
    } else {
        kill_tree(pid);
    }
    // A call cgroup ends the rest at once, whatever they did to escape;
    // the tool itself is reaped below, for its status.
    if let Some(sandbox) = sandbox.as_deref() {
        let mut rest = sandbox.end_processes();
        rest.retain(|&member| member != pid);
        reap_pids(&rest);
    }
    sweep_orphans(pid, watch.marker);
    finished.status = reap_child(pid, exited);
    reap_group(pid);
    // What the tool printed before it exited counts, even if a process that
    // escaped holds a pipe open: wait a short grace for the end, then take
    // what is there.
    let grace = Instant::now() + PIPE_GRACE;
    while streams.iter().any(|s| s.fd.is_some()) && Instant::now() < grace {
        if step(&mut streams, None, None, grace).is_err() {
            break;
        }
    }
    finished.net = supervisor.map(|s| s.finish());
    if let Some(namespace) = namespace {
        crate::process::release::later(namespace);
    }
    let [stdout, stderr] = streams;
    finished.overflow |= stdout.overflow;
    finished.stdout = stdout.capture.into_captured();
    finished.stderr = stderr.capture.into_captured();
    match wait_error {
        Some(e) => Err(RunError::Wait(e)),
        None => Ok(finished),
    }
}

/// A pipe being read, until its end or its overflow.
struct Stream {
    fd: Option<OwnedFd>,
    capture: Capture,
    overflow: bool,
}

impl Stream {
    fn new(fd: OwnedFd, keep: Keep) -> Stream {
        Stream { fd: Some(fd), capture: Capture::new(keep), overflow: false }
    }

    /// Reads what the pipe holds now (a bounded amount, so the deadline is
    /// looked at again soon); stops reading at its end or on an overflow.
    fn read_available(&mut self) {
        let Some(fd) = &self.fd else { return };
        let mut chunk = [0u8; CHUNK];
        for _ in 0..READS_PER_WAKE {
            match rustix::io::read(fd, &mut chunk) {
                Ok(n) if n > 0 => {
                    if self.capture.push(&chunk[..n]) {
                        self.overflow = true;
                        self.fd = None;
                        return;
                    }
                }
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => return,
                // The pipe's end; one that cannot be read is at its end too.
                Ok(_) | Err(_) => {
                    self.capture.close();
                    self.fd = None;
                    return;
                }
            }
        }
    }
}

/// Waits until a pipe has data or reached its end, `exit` is readable (the
/// tool exited), `cancel` is readable (the call was cancelled), or `until`
/// passes; reads what the pipes carry. Returns whether `exit` is readable.
fn step(
    streams: &mut [Stream; 2],
    exit: Option<BorrowedFd<'_>>,
    cancel: Option<BorrowedFd<'_>>,
    until: Instant,
) -> io::Result<bool> {
    let timeout = until.saturating_duration_since(Instant::now()).min(LONGEST_WAIT);
    // Within LONGEST_WAIT, the conversion cannot fail; were it to, wait a second.
    let timeout = Timespec::try_from(timeout).unwrap_or(Timespec { tv_sec: 1, tv_nsec: 0 });
    let mut fds = Vec::with_capacity(4);
    for stream in streams.iter() {
        if let Some(fd) = &stream.fd {
            fds.push(PollFd::new(fd, PollFlags::IN));
        }
    }
    if let Some(exit) = &exit {
        fds.push(PollFd::new(exit, PollFlags::IN));
    }
    // Last, so the readiness of the others is read in their order.
    if let Some(cancel) = &cancel {
        fds.push(PollFd::new(cancel, PollFlags::IN));
    }
    match poll(&mut fds, Some(&timeout)) {
        Ok(_) => {}
        Err(Errno::INTR) => return Ok(false),
        Err(e) => return Err(e.into()),
    }
    let ready: Vec<bool> = fds.iter().map(|fd| !fd.revents().is_empty()).collect();
    drop(fds);
    let mut ready = ready.into_iter();
    for stream in streams.iter_mut() {
        if stream.fd.is_some() && ready.next() == Some(true) {
            stream.read_available();
        }
    }
    Ok(exit.is_some() && ready.next() == Some(true))
}

/// Whether the tool `pid` has exited (it is left to be reaped).
fn has_exited(pid: i32) -> io::Result<bool> {
    let Some(pid) = Pid::from_raw(pid) else { return Ok(true) };
    match waitid(WaitId::Pid(pid), WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT) {
        Ok(found) => Ok(found.is_some()),
        Err(Errno::INTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}
