//! A program that stays up across calls: an MCP server on stdio.
//!
//! It is started as a tool is ([`crate::process::spawn`]: its own process
//! group, killed by the kernel when rlp dies and by the signal handler when
//! rlp is interrupted; confined by the kernel sandbox when given), with a
//! private folder of its own as its working directory and `TMPDIR` for its
//! life. Its stdin and stdout are pipes to rlp (the protocol), and the tail
//! of its stderr is kept for error messages. Stopping it closes nothing
//! first: the caller drops the protocol's pipes, [`ServerProcess::stop`]
//! waits a grace for it to exit, then kills it with everything it started.

use std::ffi::OsStr;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::fs::{OFlags, fcntl_setfl};

use crate::interrupt::Tracked;
use crate::kill::kill_tree;
use crate::process::capture::{Capture, Keep};
use crate::process::reap::{Running, reap_child, reap_group, reap_pids, sweep_orphans};
use crate::process::spawn::{Child, Program};
use crate::process::tool::{TOOL_LANG, private_dir, remove_private_dir};
use crate::sandbox::fs::TOOL_PATH;
use crate::sandbox::net::Supervisor;
use crate::sandbox::{Confinement, SandboxPlan};

/// The environment variable naming the server's session: how the orphan
/// sweep recognises the processes a server left.
pub(crate) const SESSION_ENV: &str = "RLP_SERVER_SESSION";
/// How much of stderr is kept (the tail).
const STDERR_TAIL: usize = 64 * 1024;
/// How much of stderr an error message quotes.
const STDERR_QUOTE: usize = 2 * 1024;

/// What to start.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ServerSpec<'a> {
    /// The executable (absolute).
    pub command: &'a Path,
    /// Its arguments.
    pub args: &'a [String],
    /// Its environment besides `PATH`, `LANG`, `TMPDIR` and the session
    /// marker (a later entry for a name replaces an earlier one).
    pub env: &'a [(String, &'a str)],
    /// The kernel sandbox; `None` runs it unconfined.
    pub sandbox: Option<&'a SandboxPlan>,
    /// The session id (the marker of its processes).
    pub session: &'a str,
}

/// The protocol's ends of a started server: rlp writes its stdin and reads
/// its stdout (both non-blocking).
#[derive(Debug)]
pub(crate) struct ServerPipes {
    /// The write end of its stdin.
    pub stdin: OwnedFd,
    /// The read end of its stdout.
    pub stdout: OwnedFd,
}

/// A running server, ended with everything it started when stopped or
/// dropped.
#[derive(Debug)]
pub(crate) struct ServerProcess {
    pid: i32,
    exit: Option<OwnedFd>,
    namespace: Option<OwnedFd>,
    confinement: Option<Confinement>,
    supervisor: Option<Supervisor>,
    stderr: Arc<Mutex<Capture>>,
    stderr_reader: Option<JoinHandle<()>>,
    marker: String,
    dir: Option<tempfile::TempDir>,
    _tracked_dir: Tracked,
    /// The child's registrations, held until it is reaped.
    guards: Option<(Running, Tracked)>,
    /// It was reaped (on a kernel without pidfds, by [`ServerProcess::has_exited`]).
    ended: bool,
}

impl ServerProcess {
    /// Starts the server of `spec`.
    pub(crate) fn start(spec: &ServerSpec<'_>) -> io::Result<(ServerProcess, ServerPipes)> {
        let dir = private_dir()?;
        let tracked_dir = crate::interrupt::track_dir(dir.path());
        let marker = format!("{SESSION_ENV}={}", spec.session);
        let sandbox_env = spec.sandbox.map(SandboxPlan::environment).unwrap_or_default();
        let base = [
            ("PATH", OsStr::new(TOOL_PATH)),
            ("LANG", OsStr::new(TOOL_LANG)),
            ("TMPDIR", dir.path().as_os_str()),
            (SESSION_ENV, OsStr::new(spec.session)),
        ];
        let env = base
            .into_iter()
            .map(|(name, value)| (OsStr::new(name), value))
            .chain(spec.env.iter().map(|(name, value)| (OsStr::new(name.as_str()), OsStr::new(*value))))
            .chain(sandbox_env.iter().map(|(name, value)| (OsStr::new(name.as_str()), OsStr::new(value.as_str()))));
        let program = Program::new(spec.command, spec.args.iter().map(OsStr::new), env, dir.path())?;
        let confinement = match spec.sandbox {
            Some(plan) => plan.confine(dir.path())?,
            None => None,
        };
        let (started, mut confinement) = start_on_spawner(program, confinement)?;
        let (child, stdin) = started?;
        let supervisor = match confinement.as_mut().map(Confinement::supervise).transpose() {
            Ok(supervisor) => supervisor.flatten(),
            Err(e) => {
                kill_tree(child.pid);
                if let Some(confinement) = &confinement {
                    reap_pids(&confinement.end_processes());
                }
                reap_child(child.pid, false);
                return Err(e);
            }
        };
        let Child { pid, exit, stdout, stderr, namespace, guards } = child;
        let tail = Arc::new(Mutex::new(Capture::new(Keep::Tail { keep: STDERR_TAIL, margin: 0 })));
        let stderr_reader = read_stderr(stderr, Arc::clone(&tail))?;
        let server = ServerProcess {
            pid,
            exit,
            namespace,
            confinement,
            supervisor,
            stderr: tail,
            stderr_reader: Some(stderr_reader),
            marker,
            dir: Some(dir),
            _tracked_dir: tracked_dir,
            guards: Some(guards),
            ended: false,
        };
        Ok((server, ServerPipes { stdin, stdout }))
    }

    /// The last part of what it wrote on stderr, as text (empty when it
    /// wrote nothing).
    pub(crate) fn stderr_tail(&self) -> String {
        let capture = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        let bytes = capture.bytes();
        let start = bytes.len().saturating_sub(STDERR_QUOTE);
        String::from_utf8_lossy(&bytes[start..]).trim().to_string()
    }

    /// Whether it has exited (on a kernel without pidfds: whether it can
    /// be reaped, which reaps it).
    pub(crate) fn has_exited(&mut self) -> bool {
        match &self.exit {
            Some(exit) => {
                let mut fds = [PollFd::new(exit, PollFlags::IN)];
                poll(&mut fds, Some(&Timespec { tv_sec: 0, tv_nsec: 0 })).is_ok_and(|n| n > 0)
            }
            None => {
                if !self.ended && reap_child(self.pid, false).is_some() {
                    self.ended = true;
                }
                self.ended
            }
        }
    }

    /// Stops it: waits up to `grace` for it to exit on its own (its stdin
    /// closed by the caller), then kills it with everything it started, and
    /// reaps them.
    pub(crate) fn stop(mut self, grace: Duration) {
        let deadline = Instant::now() + grace;
        while !self.has_exited() && Instant::now() < deadline {
            let left = deadline.saturating_duration_since(Instant::now()).min(Duration::from_millis(10));
            match &self.exit {
                Some(exit) => {
                    let mut fds = [PollFd::new(exit, PollFlags::IN)];
                    let wait = Timespec { tv_sec: 0, tv_nsec: i64::from(left.subsec_nanos()) };
                    let _ = poll(&mut fds, Some(&wait));
                }
                None => std::thread::sleep(left),
            }
        }
        self.end();
    }

    /// Kills it and everything it started, reaps them, and removes its
    /// private folder.
    fn end(&mut self) {
        if self.guards.is_none() {
            return;
        }
        kill_tree(self.pid);
        if let Some(confinement) = &self.confinement {
            let mut rest = confinement.end_processes();
            rest.retain(|&member| member != self.pid);
            reap_pids(&rest);
        }
        sweep_orphans(self.pid, &self.marker);
        if !self.ended {
            reap_child(self.pid, true);
        }
        reap_group(self.pid);
        self.guards = None;
        if let Some(supervisor) = self.supervisor.take() {
            supervisor.finish();
        }
        if let Some(namespace) = self.namespace.take() {
            crate::process::release::later(namespace);
        }
        if let Some(reader) = self.stderr_reader.take() {
            // Everything that held the pipe is dead: it ends at once.
            let _ = reader.join();
        }
        if let Some(dir) = self.dir.take() {
            remove_private_dir(dir);
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.end();
    }
}

/// What the spawner hands back: the started child and its stdin, and the
/// confinement it was started in.
type Started = (io::Result<(Child, OwnedFd)>, Option<Confinement>);

/// A program to start on the spawner, the confinement to start it in, and
/// where the result goes.
type Job = (Program, Option<Confinement>, mpsc::Sender<Started>);

/// Starts `program` on the one thread that starts servers. The kernel sends
/// a child its parent-death signal when the *thread* that started it ends,
/// not the process: a server outlives the call (and the thread) that needed
/// it first, so it is started by a thread that lives as long as rlp, and
/// still dies with rlp, even of SIGKILL.
fn start_on_spawner(program: Program, confinement: Option<Confinement>) -> io::Result<Started> {
    static SPAWNER: OnceLock<Result<mpsc::Sender<Job>, String>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (jobs, received) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("rlp-spawner".into())
            .spawn(move || {
                for (program, confinement, reply) in received {
                    let started = program.start_piped(confinement.as_ref().map(Confinement::steps));
                    let _ = reply.send((started, confinement));
                }
            })
            .map(|_| jobs)
            .map_err(|e| format!("cannot start the thread that starts servers: {e}"))
    });
    let jobs = spawner.as_ref().map_err(|why| io::Error::other(why.clone()))?;
    let (reply, answer) = mpsc::channel();
    jobs.send((program, confinement, reply)).map_err(|_| io::Error::other("the thread that starts servers stopped"))?;
    answer.recv().map_err(|_| io::Error::other("the thread that starts servers stopped"))
}

/// Reads `stderr` to its end on a thread of its own, keeping its tail.
fn read_stderr(stderr: OwnedFd, tail: Arc<Mutex<Capture>>) -> io::Result<JoinHandle<()>> {
    fcntl_setfl(stderr.as_fd(), OFlags::empty())?;
    let mut pipe = std::fs::File::from(stderr);
    std::thread::Builder::new().name("rlp-server-stderr".into()).spawn(move || {
        let mut chunk = [0u8; 8 * 1024];
        loop {
            match pipe.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    tail.lock().unwrap_or_else(PoisonError::into_inner).push(&chunk[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        tail.lock().unwrap_or_else(PoisonError::into_inner).close();
    })
}
