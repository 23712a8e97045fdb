//! Starting a tool process: quickly, and so that it cannot outlive rlp.
//!
//! The child is made with `clone(CLONE_VM | CLONE_VFORK)`, the way
//! `posix_spawn` makes one: it borrows rlp's memory until it executes the
//! tool, so nothing of rlp's (page tables, locks) is copied, and rlp's
//! calling thread waits meanwhile. Between the clone and the exec the child
//! only makes async-signal-safe system calls on data prepared beforehand —
//! no allocation, no lock:
//!
//! 1. every signal rlp handles gets its default action back (the child has
//!    its own copy of the handler table), and SIGPIPE too;
//! 2. `PR_SET_PDEATHSIG(SIGKILL)`, then a check that rlp is still alive
//!    (its parent, or, in a PID namespace of the tool's own, rlp's pidfd):
//!    the kernel kills the tool when rlp dies, even of SIGKILL;
//! 3. `setpgid(0, 0)`: the tool leads its own process group — or, when it
//!    is sandboxed, `setsid()`: its own session too, with no controlling
//!    terminal to read or inject keystrokes into;
//! 4. stdin, stdout and stderr onto /dev/null and the two pipes;
//! 5. every descriptor above the standard streams marked close-on-exec:
//!    the tool inherits none that rlp's own parent left open (a file
//!    outside the tool's grants, a socket), whatever the sandbox says;
//! 6. for a sandboxed tool, the confinement steps
//!    ([`crate::sandbox::child`]: its world — namespaces and filesystem
//!    view —, limits, capabilities, `no_new_privs`, Landlock, seccomp);
//! 7. `chdir` into the tool's folder;
//! 8. the signal mask emptied, `execve`.
//!
//! rlp blocks every signal on the spawning thread around the clone, so
//! none of its handlers runs in the child. The child registers its group
//! with the interrupt handler itself, in a slot reserved before the clone
//! ([`crate::interrupt::reserve_group`]), right after it becomes the
//! group's leader: a signal that ends rlp always finds the tool, whichever
//! thread of rlp handles it, even before the clone has returned. A tool in
//! a PID namespace of its own cannot name itself (it is PID 1 there): rlp
//! registers it once the clone returns, and until then the death signal
//! covers it — nothing can have been started below it before its exec, and
//! what it starts later dies with it, PID 1 of its namespace.

use std::collections::BTreeMap;
use std::ffi::{CStr, CString, OsStr, c_char, c_int, c_void};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI32, Ordering};

use rustix::fs::{Mode, OFlags, fcntl_setfl};
use rustix::io::{Errno, fcntl_dupfd_cloexec};
use rustix::pipe::{PipeFlags, pipe_with};
use rustix::process::{
    Pid, PidfdFlags, Signal, chdir, getpid, getppid, pidfd_open, set_parent_process_death_signal, setpgid, setsid,
};
use rustix::stdio::{dup2_stderr, dup2_stdin, dup2_stdout};

use crate::interrupt::{self, Tracked};
use crate::process::reap::{Running, reap_child};
use crate::sandbox::child::ChildSteps;
use crate::sandbox::clone::clone_vfork;

/// One above the highest signal number on Linux.
const SIGNAL_END: c_int = 65;
/// The exit status of a child that could not execute the tool (its reason
/// reaches rlp through memory, not through the status).
const EXEC_FAILED: c_int = 127;

/// A program to start: checked and converted to C strings up front, so the
/// child has nothing left to prepare.
#[derive(Debug)]
pub(crate) struct Program {
    path: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    dir: CString,
}

/// The error of a string holding a NUL byte (as `std::process::Command` says it).
fn nul_error() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "nul byte found in provided data")
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| nul_error())
}

impl Program {
    /// `command` run as `command args…` in `dir`, with exactly the
    /// environment `env` (a later entry for a name replaces an earlier one).
    pub(crate) fn new<'a>(
        command: &Path,
        args: impl IntoIterator<Item = &'a OsStr>,
        env: impl IntoIterator<Item = (&'a OsStr, &'a OsStr)>,
        dir: &Path,
    ) -> io::Result<Program> {
        let path = c_string(command.as_os_str().as_bytes())?;
        let mut argv = vec![path.clone()];
        for arg in args {
            argv.push(c_string(arg.as_bytes())?);
        }
        let env: BTreeMap<&OsStr, &OsStr> = env.into_iter().collect();
        let envp = env
            .into_iter()
            .map(|(name, value)| c_string(&[name.as_bytes(), b"=", value.as_bytes()].concat()))
            .collect::<io::Result<_>>()?;
        Ok(Program { path, argv, envp, dir: c_string(dir.as_os_str().as_bytes())? })
    }

    /// Starts the program: its stdin is /dev/null, its stdout and stderr are
    /// pipes to rlp, and it is confined by `sandbox` when given (see the
    /// module docs for the rest).
    pub(crate) fn start(&self, sandbox: Option<ChildSteps<'_>>) -> io::Result<Child> {
        let null = rustix::fs::open(c"/dev/null", OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
        self.start_reading(null, sandbox)
    }

    /// Starts the program as [`Program::start`] does, with a pipe from rlp
    /// as its stdin (a server that reads requests there); returns the pipe's
    /// write end (non-blocking) with the child.
    pub(crate) fn start_piped(&self, sandbox: Option<ChildSteps<'_>>) -> io::Result<(Child, OwnedFd)> {
        let (stdin, stdin_writer) = pipe_with(PipeFlags::CLOEXEC)?;
        fcntl_setfl(&stdin_writer, OFlags::NONBLOCK)?;
        Ok((self.start_reading(stdin, sandbox)?, stdin_writer))
    }

    /// Starts the program with `stdin` as its standard input.
    fn start_reading(&self, stdin: OwnedFd, sandbox: Option<ChildSteps<'_>>) -> io::Result<Child> {
        let (stdout, stdout_writer) = pipe_with(PipeFlags::CLOEXEC)?;
        let (stderr, stderr_writer) = pipe_with(PipeFlags::CLOEXEC)?;
        fcntl_setfl(&stdout, OFlags::NONBLOCK)?;
        fcntl_setfl(&stderr, OFlags::NONBLOCK)?;
        let (stdin, stdout_writer, stderr_writer) =
            (above_stdio(stdin)?, above_stdio(stdout_writer)?, above_stdio(stderr_writer)?);
        let argv = null_terminated(&self.argv);
        let envp = null_terminated(&self.envp);
        let tracked = interrupt::reserve_group();
        let plan = ChildPlan {
            path: &self.path,
            argv: &argv,
            envp: &envp,
            dir: &self.dir,
            stdin: stdin.as_fd(),
            stdout: stdout_writer.as_fd(),
            stderr: stderr_writer.as_fd(),
            parent: getpid(),
            parent_exit: own_pidfd(),
            sandbox,
            group: tracked.group_slot(),
            error: AtomicI32::new(0),
        };
        let self_contained = sandbox.is_some_and(|steps| steps.clone_flags() & libc::CLONE_NEWNS != 0);
        let blocked = BlockedSignals::all()?;
        let pid = clone_child(&plan).inspect_err(|_| forget_kernel_verdict(sandbox.is_some()))?;
        let error = plan.error.load(Ordering::SeqCst);
        if error != 0 {
            reap_child(pid, true);
            forget_kernel_verdict(sandbox.is_some());
            return Err(io::Error::from_raw_os_error(error));
        }
        // A child in a PID namespace of its own cannot name its group (it
        // is PID 1 there): rlp registers it, as the one that knows its pid.
        if let Some(slot) = tracked.group_slot() {
            slot.store(pid, Ordering::SeqCst);
        }
        let guards = (Running::new(pid), tracked);
        drop(blocked);
        let exit = Pid::from_raw(pid).and_then(|p| pidfd_open(p, PidfdFlags::empty()).ok());
        let namespace = self_contained.then(|| hold_mount_namespace(pid)).flatten();
        Ok(Child { pid, exit, stdout, stderr, namespace, guards })
    }
}

/// A sandboxed child that could not be made or start its program: the
/// kept verdict of the kernel's support may be what it did not honour, so
/// the next process probes afresh ([`crate::sandbox::kernel_cache`]).
fn forget_kernel_verdict(sandboxed: bool) {
    if sandboxed {
        crate::sandbox::kernel_cache::forget();
    }
}

/// A started tool, registered with the interrupt handler and the orphan
/// sweep until this is dropped. Reaping it is the caller's job.
#[derive(Debug)]
pub(crate) struct Child {
    /// Its pid, which is also its process group id.
    pub pid: i32,
    /// A pidfd that becomes readable when it exits (none on kernels before
    /// Linux 5.3).
    pub exit: Option<OwnedFd>,
    /// The read end of its stdout (non-blocking).
    pub stdout: OwnedFd,
    /// The read end of its stderr (non-blocking).
    pub stderr: OwnedFd,
    /// Its mount namespace, held so that the tool's exit does not wait for
    /// its teardown; let go off the call's path ([`crate::process::release`]).
    pub namespace: Option<OwnedFd>,
    /// Its registrations with the orphan sweep and the interrupt handler,
    /// held until it is reaped.
    pub guards: (Running, Tracked),
}

/// A descriptor of the mount namespace of process `pid` (none if it has
/// already exited: its namespace is gone with it).
fn hold_mount_namespace(pid: i32) -> Option<OwnedFd> {
    let path = format!("/proc/{pid}/ns/mnt");
    rustix::fs::open(path.as_str(), OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()
}

/// `fd`, moved above the standard streams if it is one of them, so the
/// child's `dup2` onto 0, 1 and 2 never overwrites a descriptor it has yet
/// to copy.
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 { Ok(fd) } else { Ok(fcntl_dupfd_cloexec(&fd, 3)?) }
}

/// Pointers to `strings`, then a null pointer: an `argv` or `envp`.
fn null_terminated(strings: &[CString]) -> Vec<*const c_char> {
    strings.iter().map(|s| s.as_ptr()).chain(std::iter::once(std::ptr::null())).collect()
}

/// What the child reads (and, on failure, writes) in rlp's memory.
struct ChildPlan<'a> {
    path: &'a CStr,
    argv: &'a [*const c_char],
    envp: &'a [*const c_char],
    dir: &'a CStr,
    stdin: BorrowedFd<'a>,
    stdout: BorrowedFd<'a>,
    stderr: BorrowedFd<'a>,
    parent: Pid,
    /// A pidfd of rlp, readable once rlp has exited.
    parent_exit: Option<BorrowedFd<'a>>,
    /// The confinement steps of a sandboxed tool.
    sandbox: Option<ChildSteps<'a>>,
    /// The interrupt handler's slot for the child's process group.
    group: Option<&'static AtomicI32>,
    /// The errno of the step that failed; 0 when the tool was executed.
    error: AtomicI32,
}

/// Clones the child that runs [`child_main`]; returns once it has executed
/// the tool or exited.
fn clone_child(plan: &ChildPlan<'_>) -> io::Result<i32> {
    let namespaces = plan.sandbox.map_or(0, |steps| steps.clone_flags());
    let cgroup = plan.sandbox.and_then(|steps| steps.made_in);
    let arg = std::ptr::from_ref(plan).cast_mut().cast::<c_void>();
    clone_vfork(namespaces, cgroup, child_main, arg)
}

/// The child between the clone and the exec (see the module docs).
extern "C" fn child_main(plan: *mut c_void) -> c_int {
    // SAFETY: `plan` is the ChildPlan that `clone_child` passed to clone; it
    // lives in the suspended parent thread's frame until this child has
    // executed the tool or exited, and only the atomic `error` is written.
    let plan = unsafe { &*plan.cast::<ChildPlan<'_>>() };
    let errno = execute(plan);
    plan.error.store(errno.raw_os_error(), Ordering::SeqCst);
    // SAFETY: _exit ends the child at once, running nothing of rlp's
    // (no atexit handlers, no flushing of buffers it shares with rlp).
    unsafe { libc::_exit(EXEC_FAILED) }
}

/// Prepares the child and executes the tool; returns only on failure, with
/// the reason.
fn execute(plan: &ChildPlan<'_>) -> Errno {
    default_signal_actions();
    if let Err(e) = set_parent_process_death_signal(Some(Signal::KILL)) {
        return e;
    }
    // rlp may have died before the death signal was armed. In a PID
    // namespace of its own the child sees no parent (getppid is 0), so it
    // asks rlp's pidfd instead.
    let own_pids = plan.sandbox.is_some_and(|steps| steps.clone_flags() & libc::CLONE_NEWPID != 0);
    let orphaned = if own_pids { has_exited(plan.parent_exit) } else { getppid() != Some(plan.parent) };
    if orphaned {
        return Errno::SRCH;
    }
    let lead = match plan.sandbox {
        Some(_) => setsid().map(drop),
        None => setpgid(None, None),
    };
    if lead.is_ok()
        && !own_pids
        && let Some(slot) = plan.group
    {
        slot.store(getpid().as_raw_nonzero().get(), Ordering::SeqCst);
    }
    // The folder is entered last: a sandboxed tool's is the same path in
    // the view the sandbox builds.
    let ready = lead
        .and_then(|()| dup2_stdin(plan.stdin))
        .and_then(|()| dup2_stdout(plan.stdout))
        .and_then(|()| dup2_stderr(plan.stderr))
        .and_then(|()| close_inherited())
        .and_then(|()| plan.sandbox.map_or(Ok(()), |steps| steps.apply()))
        .and_then(|()| chdir(plan.dir));
    if let Err(e) = ready {
        return e;
    }
    // SAFETY: an empty set on this frame; sigprocmask is async-signal-safe.
    // Every handler is the default one by now, so a signal may arrive.
    unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    }
    // SAFETY: `path` is a C string, `argv` and `envp` null-terminated arrays
    // of C strings, all owned by the suspended parent thread's frame.
    unsafe { libc::execve(plan.path.as_ptr(), plan.argv.as_ptr(), plan.envp.as_ptr()) };
    Errno::from_raw_os_error(io::Error::last_os_error().raw_os_error().unwrap_or(libc::ENOEXEC))
}

/// A pidfd of this process, opened once (none on kernels before Linux 5.3).
fn own_pidfd() -> Option<BorrowedFd<'static>> {
    static OWN: OnceLock<Option<OwnedFd>> = OnceLock::new();
    OWN.get_or_init(|| pidfd_open(getpid(), PidfdFlags::empty()).ok()).as_ref().map(AsFd::as_fd)
}

/// In the child: whether the process of `pidfd` has exited (a pidfd is
/// readable then). Without one, rlp is taken to be alive.
fn has_exited(pidfd: Option<BorrowedFd<'_>>) -> bool {
    let Some(pidfd) = pidfd else { return false };
    let mut fds = [libc::pollfd { fd: pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
    // SAFETY: poll with a zero timeout on the array on this frame.
    unsafe { libc::poll(fds.as_mut_ptr(), 1, 0) == 1 && fds[0].revents & libc::POLLIN != 0 }
}

/// Most descriptors marked one by one where `close_range` is missing
/// (before Linux 5.11).
const MAX_MARKED_DESCRIPTORS: c_int = 65_536;

/// In the child: marks every descriptor above the standard streams
/// close-on-exec (they stay usable until the exec: the sandbox's ruleset
/// and socket are among them). One `close_range` call, or one `fcntl` per
/// descriptor number on older kernels.
fn close_inherited() -> Result<(), Errno> {
    // SAFETY: close_range with the CLOEXEC flag only changes flags in this
    // child's own descriptor table (it was copied at the clone).
    let marked = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) };
    if marked == 0 {
        return Ok(());
    }
    let mut limit: libc::rlimit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct on this frame.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    let last = c_int::try_from(limit.rlim_cur).unwrap_or(MAX_MARKED_DESCRIPTORS).min(MAX_MARKED_DESCRIPTORS);
    for fd in 3..last {
        // SAFETY: fcntl on a descriptor number; one that is not open fails
        // with EBADF and changes nothing.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    Ok(())
}

/// In the child: every signal with a handler gets its default action back,
/// and SIGPIPE too (Rust programs ignore it; the tool must not inherit that).
/// An ignored signal stays ignored, as across any exec. One system call per
/// signal: each is set to its default, and the rare ignored one set back.
fn default_signal_actions() {
    for signal in 1..SIGNAL_END {
        // SAFETY: sigaction only reads and writes the structs on this frame
        // and is async-signal-safe; without CLONE_SIGHAND the child changes
        // its own copy of the handler table, never rlp's. Every signal is
        // blocked meanwhile, so none is handled between the two calls.
        unsafe {
            let default: libc::sigaction = std::mem::zeroed();
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, &default, &mut old) == 0
                && old.sa_sigaction == libc::SIG_IGN
                && signal != libc::SIGPIPE
            {
                libc::sigaction(signal, &old, std::ptr::null_mut());
            }
        }
    }
}

/// Every signal blocked in the calling thread until dropped.
struct BlockedSignals(libc::sigset_t);

impl BlockedSignals {
    fn all() -> io::Result<BlockedSignals> {
        // SAFETY: sigfillset and pthread_sigmask only write the two sets on
        // this frame.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            match libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old) {
                0 => Ok(BlockedSignals(old)),
                rc => Err(io::Error::from_raw_os_error(rc)),
            }
        }
    }
}

impl Drop for BlockedSignals {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved by `all`; only reads `self.0`.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut());
        }
    }
}
