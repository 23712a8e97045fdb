//! The exec transport: run a local binary with a JSON blob, no shell.
//!
//! argv is `[command, <blob path>, ...args]`; the blob (mode 0600) sits in a
//! private folder (mode 0700) that is the working directory and `TMPDIR`, and
//! is removed afterwards. stdin is /dev/null; the environment holds only
//! `PATH`, `LANG`, `TMPDIR`, `RLP_INVOCATION_ID` and the tool's secrets. The
//! tool leads its own process group, which is killed when the call ends (at
//! the timeout, on too much output, and after a normal exit so that forked
//! children never outlive the call).

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Once, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::runtime::capture::{Capture, Captured, Keep};
use crate::runtime::envelope::{self, Outcome, Stdout};
use crate::runtime::process;
use crate::runtime::secrets::tool_environment;
use crate::runtime::transport::{Attempt, AttemptError};

/// The `PATH` a tool sees.
pub(crate) const TOOL_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// The `LANG` a tool sees.
pub(crate) const TOOL_LANG: &str = "C.UTF-8";
/// How much of stderr is kept for error messages (the tail).
pub(crate) const STDERR_TAIL_BYTES: usize = 64 * 1024;
/// How much of stderr an error message quotes.
const STDERR_QUOTE_BYTES: usize = 4 * 1024;
/// How much of a non-JSON stdout an error message quotes.
const STDOUT_QUOTE_BYTES: usize = 512;
/// How long the pipes may stay open after the tool exited and everything it
/// started was killed (a process that escaped may hold them); then the call
/// ends with what they carried so far.
const PIPE_GRACE: Duration = Duration::from_millis(500);
/// How long a killed tool may take to exit before rlp gives up waiting.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// The environment variable holding the invocation id (also how the orphan
/// sweep recognises a call's processes).
pub(crate) const INVOCATION_ENV: &str = "RLP_INVOCATION_ID";
/// Stack size of the helper threads (they only copy bytes).
const HELPER_STACK: usize = 64 * 1024;

/// A checked exec transport.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ExecPlan {
    /// The executable (absolute).
    pub command: PathBuf,
    /// Arguments after the blob path.
    pub args: Vec<String>,
    /// Most stdout bytes accepted.
    pub max_output_bytes: u64,
}

impl ExecPlan {
    /// Checks that `command` is an absolute path to an executable regular file.
    pub(crate) fn new(command: &str, args: &[String], max_output_bytes: u64) -> Result<ExecPlan, String> {
        let path = Path::new(command);
        if !path.is_absolute() {
            return Err(format!("command `{command}` is not an absolute path; rlp never searches PATH"));
        }
        let meta = fs::metadata(path).map_err(|e| format!("command `{command}` cannot be used: {e}"))?;
        if !meta.is_file() {
            return Err(format!("command `{command}` is not a regular file"));
        }
        if meta.permissions().mode() & 0o111 == 0 {
            return Err(format!("command `{command}` is not executable (no execute permission bit)"));
        }
        Ok(ExecPlan { command: path.to_path_buf(), args: args.to_vec(), max_output_bytes })
    }

    /// How the call is shown for confirmation: the command and its arguments.
    pub(crate) fn target(&self) -> String {
        let mut shown = self.command.display().to_string();
        shown.push_str(" <blob>");
        for arg in &self.args {
            shown.push(' ');
            shown.push_str(arg);
        }
        shown
    }
}

/// The JSON blob handed to the tool for the `run` action.
pub(crate) fn run_blob(attempt: &Attempt<'_>) -> Value {
    json!({
        "v": 1,
        "action": "run",
        "invocation_id": attempt.invocation_id.to_string(),
        "trace_id": attempt.trace_id.to_string(),
        "tool": {
            "id": attempt.tool,
            "arguments": attempt.arguments,
            "answers": {},
            "options": {},
        },
        "context": {
            "root": attempt.root.display().to_string(),
            "attempt": attempt.number,
            "deadline_ms": attempt.deadline_ms,
        },
    })
}

/// What the watcher threads report.
enum Event {
    /// The tool exited (not reaped yet).
    Exited,
    /// Waiting for it failed.
    WaitFailed(io::Error),
    /// stdout reached its end.
    StdoutClosed,
    /// stdout went past `max_output_bytes`.
    StdoutOverflow,
    /// stderr reached its end.
    StderrClosed,
}

/// How the process ended.
struct Ended {
    status: Option<ExitStatus>,
    stdout: Captured,
    stderr: Captured,
    timed_out: bool,
    overflow: bool,
    /// It did not exit even after SIGKILL, within [`KILL_GRACE`].
    unkillable: bool,
}

/// Prefix of a call's private folder: `rlp-call-<pid>-<random>`, so that a
/// later rlp can tell the folders of rlp processes that died.
const CALL_DIR_PREFIX: &str = "rlp-call-";

fn private_dir() -> io::Result<tempfile::TempDir> {
    static SWEPT: Once = Once::new();
    let temp = std::env::temp_dir();
    SWEPT.call_once(|| crate::leftovers::sweep(&temp, &[CALL_DIR_PREFIX]));
    let dir =
        tempfile::Builder::new().prefix(&format!("{CALL_DIR_PREFIX}{}-", std::process::id())).tempdir_in(&temp)?;
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700))?;
    Ok(dir)
}

fn write_blob(dir: &Path, blob: &Value) -> io::Result<PathBuf> {
    let path = dir.join("call.json");
    let mut file = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?;
    let bytes = serde_json::to_vec(blob).map_err(io::Error::other)?;
    file.write_all(&bytes)?;
    Ok(path)
}

/// Runs one attempt.
pub(crate) fn run(plan: &ExecPlan, attempt: &Attempt<'_>) -> Result<Value, AttemptError> {
    let transport = |what: &str, e: io::Error| {
        AttemptError::new("transport", attempt.scrubber.scrub_string(&format!("{what}: {e}")))
    };
    let dir = private_dir().map_err(|e| transport("cannot create the private folder for the call", e))?;
    // The handler removes the folder with the blob and whatever the tool leaves in it.
    let _tracked_dir = crate::interrupt::track_dir(dir.path());
    let blob = write_blob(dir.path(), &run_blob(attempt)).map_err(|e| transport("cannot write the call blob", e))?;
    let ended = spawn_and_wait(plan, attempt, dir.path(), &blob)?;
    // Removing the folder also removes anything the tool left in it.
    let _ = dir.close();
    interpret(plan, attempt, ended)
}

fn spawn_and_wait(plan: &ExecPlan, attempt: &Attempt<'_>, dir: &Path, blob: &Path) -> Result<Ended, AttemptError> {
    let mut command = Command::new(&plan.command);
    command
        .arg(blob)
        .args(&plan.args)
        .env_clear()
        .env("PATH", TOOL_PATH)
        .env("LANG", TOOL_LANG)
        .env("TMPDIR", dir)
        .env(INVOCATION_ENV, attempt.invocation_id.to_string())
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: getpid has no preconditions.
    let rlp = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the forked child and only makes
    // async-signal-safe calls (prctl, getppid).
    unsafe { command.pre_exec(move || process::die_with_parent(rlp)) };
    for (name, value) in tool_environment(attempt.secrets) {
        command.env(name, value.expose());
    }
    let mut child = command.spawn().map_err(|e| {
        AttemptError::new(
            "transport",
            attempt.scrubber.scrub_string(&format!("cannot start `{}`: {e}", plan.command.display())),
        )
    })?;
    let pid = i32::try_from(child.id()).unwrap_or(0);
    let _registered = process::Running::new(pid);
    let _running = crate::interrupt::track_group(pid);
    let (tx, rx) = mpsc::channel::<Event>();

    let stdout = Capture::default();
    let stderr = Capture::default();
    let spawn_helper = |name: &str| std::thread::Builder::new().name(name.to_string()).stack_size(HELPER_STACK);
    let stdout_thread = {
        let (pipe, capture, tx) = (child.stdout.take(), stdout.clone(), tx.clone());
        let keep = Keep::Head { limit: plan.max_output_bytes };
        spawn_helper("rlp-exec-stdout").spawn(move || {
            let overflow = pipe.is_some_and(|pipe| capture.read_from(pipe, keep));
            let _ = tx.send(if overflow { Event::StdoutOverflow } else { Event::StdoutClosed });
        })
    };
    let stderr_thread = {
        let (pipe, capture, tx) = (child.stderr.take(), stderr.clone(), tx.clone());
        let keep = Keep::Tail { keep: STDERR_TAIL_BYTES, margin: attempt.scrubber.max_spelled_len() };
        spawn_helper("rlp-exec-stderr").spawn(move || {
            if let Some(pipe) = pipe {
                capture.read_from(pipe, keep);
            }
            let _ = tx.send(Event::StderrClosed);
        })
    };
    let waiter = {
        let tx = tx.clone();
        spawn_helper("rlp-exec-wait").spawn(move || {
            let event = match process::wait_exited_keep_zombie(pid) {
                Ok(()) => Event::Exited,
                Err(e) => Event::WaitFailed(e),
            };
            let _ = tx.send(event);
        })
    };
    drop(tx);
    if stdout_thread.is_err() || stderr_thread.is_err() || waiter.is_err() {
        process::kill_tree(pid);
        let _ = child.wait();
        process::reap_group(pid);
        return Err(AttemptError::new("transport", "cannot start the threads that watch the tool"));
    }

    let mut ended = Ended {
        status: None,
        stdout: Captured::default(),
        stderr: Captured::default(),
        timed_out: false,
        overflow: false,
        unkillable: false,
    };
    // Until the timeout, then (once everything was killed) a short grace:
    // rlp never waits without a bound.
    let mut deadline = attempt.deadline;
    let mut killed = false;
    let (mut stdout_closed, mut stderr_closed) = (false, false);
    let mut exited = false;
    let mut wait_error = None;
    while !exited {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Event::Exited) | Err(mpsc::RecvTimeoutError::Disconnected) => exited = true,
            Ok(Event::WaitFailed(e)) => {
                wait_error = Some(e);
                exited = true;
            }
            Ok(Event::StdoutClosed) => stdout_closed = true,
            Ok(Event::StderrClosed) => stderr_closed = true,
            Ok(Event::StdoutOverflow) if !killed => {
                ended.overflow = true;
                killed = true;
                process::kill_tree(pid);
                deadline = Instant::now() + KILL_GRACE;
            }
            Ok(Event::StdoutOverflow) => {}
            Err(mpsc::RecvTimeoutError::Timeout) if !killed => {
                ended.timed_out = true;
                killed = true;
                process::kill_tree(pid);
                deadline = Instant::now() + KILL_GRACE;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                ended.unkillable = true;
                break;
            }
        }
    }
    // The tool has exited but is not reaped yet, so its group id is still its
    // own: end its group, and the processes it left, whichever group or
    // session they joined (orphaned at its exit, they are now rlp's
    // children), then reap it and them. A tool that could not be killed
    // still has its descendants below it.
    if exited {
        process::kill_group(pid);
    } else {
        process::kill_tree(pid);
    }
    process::sweep_orphans(pid, &format!("{INVOCATION_ENV}={}", attempt.invocation_id));
    ended.status = if exited { child.wait().ok() } else { child.try_wait().ok().flatten() };
    process::reap_group(pid);
    // What the tool printed before it exited counts, even if a process that
    // escaped holds the pipe open: wait a short grace for the end, then take
    // what is there.
    let grace = Instant::now() + PIPE_GRACE;
    while !(stdout_closed && stderr_closed) {
        match rx.recv_timeout(grace.saturating_duration_since(Instant::now())) {
            Ok(Event::StdoutClosed) => stdout_closed = true,
            Ok(Event::StderrClosed) => stderr_closed = true,
            Ok(Event::StdoutOverflow) => ended.overflow = true,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    ended.stdout = stdout.snapshot();
    ended.stderr = stderr.snapshot();
    if let Some(e) = wait_error {
        return Err(AttemptError::new("transport", format!("cannot wait for the tool: {e}")));
    }
    Ok(ended)
}

fn stderr_excerpt(attempt: &Attempt<'_>, ended: &Ended) -> String {
    let stderr = &ended.stderr;
    if stderr.bytes.is_empty() {
        return if stderr.closed { "; stderr was empty".to_string() } else { String::new() };
    }
    // A pipe that never closed may stop inside a value: its end is dropped
    // as its cut front is.
    let end = if stderr.closed { 0 } else { attempt.scrubber.max_spelled_len().saturating_sub(1) };
    let bytes = &stderr.bytes[..stderr.bytes.len().saturating_sub(end)];
    let tail = attempt.scrubber.scrub_tail(bytes, STDERR_QUOTE_BYTES, stderr.cut);
    format!("; stderr: {}", tail.trim_end())
}

/// Said of a tool whose stdout did not close once it had exited.
const STDOUT_HELD: &str = "its standard output never closed (a process it started held it open, and was killed), so only what it printed before it exited was read";

fn describe_status(status: Option<ExitStatus>) -> String {
    match status {
        Some(s) => match (s.code(), s.signal()) {
            (Some(code), _) => format!("exited with status {code}"),
            (None, Some(signal)) => format!("was killed by signal {signal}"),
            _ => "ended".to_string(),
        },
        None => "ended (status unknown)".to_string(),
    }
}

fn interpret(plan: &ExecPlan, attempt: &Attempt<'_>, ended: Ended) -> Result<Value, AttemptError> {
    let scrub = |text: String| attempt.scrubber.scrub_string(&text);
    if ended.timed_out {
        let fate = if ended.unkillable {
            format!("it was sent SIGKILL but had not exited {} s later", KILL_GRACE.as_secs())
        } else {
            "it and every process it started were killed".to_string()
        };
        return Err(AttemptError::new(
            "timeout",
            format!(
                "tool `{}` timed out after {} ms (timeout_ms); {fate}{}",
                attempt.tool,
                attempt.timeout_ms,
                stderr_excerpt(attempt, &ended)
            ),
        ));
    }
    if ended.overflow {
        return Err(AttemptError::new(
            "output_too_large",
            format!(
                "tool `{}` output too large: more than {} bytes on stdout (max_output_bytes); it was killed",
                attempt.tool, plan.max_output_bytes
            ),
        ));
    }
    let stdout = ended.stdout.bytes.as_slice();
    let held = if ended.stdout.closed { String::new() } else { format!("; {STDOUT_HELD}") };
    let success = ended.status.is_some_and(|s| s.success());
    match envelope::parse(stdout) {
        Stdout::Envelope(Outcome::Success(result)) => Ok(result),
        Stdout::Envelope(Outcome::Error { message, transient, retry_after_ms }) => {
            let error = AttemptError::new("tool", scrub(format!("tool `{}` failed: {message}", attempt.tool)));
            Err(if transient { error.transient(retry_after_ms) } else { error })
        }
        Stdout::Envelope(Outcome::NeedsInput { question }) => {
            let text = question.get("text").and_then(Value::as_str).unwrap_or("(no text)");
            Err(AttemptError::new(
                "needs_input",
                scrub(format!(
                    "tool `{}` asked a question (\"{text}\"), and this rlp cannot answer tool questions yet",
                    attempt.tool
                )),
            ))
        }
        Stdout::Plain(result) if success => Ok(result),
        Stdout::NotJson(why) | Stdout::Malformed(why) if success => {
            let quoted = if stdout.is_empty() {
                String::new()
            } else {
                format!("; stdout: {}", attempt.scrubber.scrub_head(stdout, STDOUT_QUOTE_BYTES))
            };
            Err(AttemptError::new(
                "tool",
                format!("tool `{}` exited with status 0 but {}{held}{quoted}", attempt.tool, scrub(why)),
            ))
        }
        _ => Err(AttemptError::new(
            "tool",
            format!(
                "tool `{}` {}{held}{}",
                attempt.tool,
                describe_status(ended.status),
                stderr_excerpt(attempt, &ended)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_the_command() {
        assert!(ExecPlan::new("sh", &[], 1).unwrap_err().contains("absolute"));
        assert!(ExecPlan::new("/", &[], 1).unwrap_err().contains("regular file"));
        assert!(ExecPlan::new("/nonexistent/x", &[], 1).unwrap_err().contains("cannot be used"));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, "x").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(ExecPlan::new(file.to_str().unwrap(), &[], 1).unwrap_err().contains("not executable"));
        let plan = ExecPlan::new("/bin/sh", &["-x".into()], 1).unwrap();
        assert_eq!(plan.target(), "/bin/sh <blob> -x");
    }
}
