//! The exec transport: run a local binary with a JSON blob, no shell, under
//! the exec protocol ([`crate::process::tool`]: argv, private folder, blob,
//! environment) and the process runner's guarantees ([`crate::process`]:
//! its own process group killed when the call ends, at the timeout, on too
//! much output, and after a normal exit so that forked children never
//! outlive the call); then read its stdout as a result or an outcome
//! envelope.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use serde_json::{Value, json};

use crate::process::capture::Keep;
use crate::process::run::{Finished, KILL_GRACE};
use crate::process::tool::{Invocation, InvokeError, invoke};
use crate::runtime::envelope::{self, Outcome, Stdout};
use crate::runtime::scrub::tool_environment;
use crate::runtime::transport::{Attempt, AttemptError, FailureKind, Reply};
use crate::sandbox::SandboxPlan;

/// How much of stderr is kept for error messages (the tail).
pub(crate) const STDERR_TAIL_BYTES: usize = 64 * 1024;
/// How much of stderr an error message quotes.
const STDERR_QUOTE_BYTES: usize = 4 * 1024;
/// How much of a non-JSON stdout an error message quotes.
const STDOUT_QUOTE_BYTES: usize = 512;

/// A checked exec transport.
#[derive(Debug)]
pub(crate) struct ExecPlan {
    /// The executable (absolute).
    pub command: PathBuf,
    /// Arguments after the blob path.
    pub args: Vec<String>,
    /// Most stdout bytes accepted.
    pub max_output_bytes: u64,
    /// The kernel sandbox the tool runs in.
    pub sandbox: SandboxPlan,
}

/// Checks that `command` is an absolute path to an executable regular file.
pub(crate) fn check_command(command: &str) -> Result<PathBuf, String> {
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
    Ok(path.to_path_buf())
}

impl ExecPlan {
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
            "answers": attempt.answers,
            "options": attempt.options,
        },
        "context": {
            "root": attempt.root.display().to_string(),
            "attempt": attempt.number,
            "deadline_ms": attempt.deadline_ms,
        },
    })
}

/// Runs one attempt.
pub(crate) fn run(plan: &ExecPlan, attempt: &Attempt<'_>) -> Result<Reply, AttemptError> {
    let transport = |what: &str, e: io::Error| {
        AttemptError::new(FailureKind::Transport, attempt.scrubber.scrub_string(&format!("{what}: {e}")))
    };
    let blob = run_blob(attempt);
    let invocation_id = attempt.invocation_id.to_string();
    let sandbox_env = plan.sandbox.environment();
    let env: Vec<(String, &str)> = tool_environment(attempt.secrets)
        .into_iter()
        .map(|(name, value)| (name, value.expose()))
        .chain(sandbox_env.iter().map(|(name, value)| (name.clone(), value.as_str())))
        .collect();
    plan.sandbox.warn_once();
    let invocation = Invocation {
        command: &plan.command,
        args: &plan.args,
        blob: &blob,
        invocation_id: &invocation_id,
        env: &env,
        deadline: attempt.deadline,
        max_stdout: plan.max_output_bytes,
        stderr: Keep::Tail { keep: STDERR_TAIL_BYTES, margin: attempt.scrubber.max_spelled_len() },
        sandbox: Some(&plan.sandbox),
        cancel: attempt.cancel,
    };
    let finished = invoke(&invocation).map_err(|e| match e {
        InvokeError::Folder(e) => transport("cannot create the private folder for the call", e),
        InvokeError::Blob(e) => transport("cannot write the call blob", e),
        InvokeError::Sandbox(e) => transport("cannot prepare the sandbox", e),
        InvokeError::Start(e) => transport(&format!("cannot start `{}`", plan.command.display()), e),
        InvokeError::Wait(e) => transport("cannot wait for the tool", e),
    })?;
    interpret(plan, attempt, finished)
}

fn stderr_excerpt(attempt: &Attempt<'_>, ended: &Finished) -> String {
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

/// What an error message says of the sandbox when the tool failed the way
/// a denial makes a program fail (EACCES or EPERM in `said`, its message
/// and stderr), or when the supervisor refused a connect: the rules that
/// applied, and the connects refused.
fn sandbox_note(plan: &ExecPlan, ended: &Finished, said: &str) -> String {
    let refused = ended.net.as_ref().map(|net| net.refused.as_slice()).unwrap_or_default();
    let lower = said.to_ascii_lowercase();
    let denied = DENIAL_WORDS.iter().any(|word| lower.contains(word));
    if !plan.sandbox.record().confined || (!denied && refused.is_empty()) {
        return String::new();
    }
    let mut note = format!("; {}", plan.sandbox.summary());
    if !refused.is_empty() {
        note.push_str(&format!("; it tried to connect to {}, which no net grant covers", refused.join(", ")));
    }
    note
}

/// How EACCES and EPERM read in the messages of programs (C library
/// strings, errno names, Python's exception names).
const DENIAL_WORDS: &[&str] = &["permission denied", "operation not permitted", "eacces", "eperm", "permissionerror"];

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

fn interpret(plan: &ExecPlan, attempt: &Attempt<'_>, ended: Finished) -> Result<Reply, AttemptError> {
    let scrub = |text: String| attempt.scrubber.scrub_string(&text);
    if ended.cancelled {
        return Err(AttemptError::new(
            FailureKind::Cancelled,
            format!("the call of `{}` was cancelled; it and every process it started were killed", attempt.tool),
        ));
    }
    if ended.timed_out {
        let fate = if ended.unkillable {
            format!("it was sent SIGKILL but had not exited {} s later", KILL_GRACE.as_secs())
        } else {
            "it and every process it started were killed".to_string()
        };
        return Err(AttemptError::new(
            FailureKind::Timeout,
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
            FailureKind::OutputTooLarge,
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
        Stdout::Envelope(Outcome::Success { result, usage }) => Ok(Reply::Result { value: result, usage }),
        Stdout::Envelope(Outcome::Error { message, transient, retry_after_ms }) => {
            let note = sandbox_note(plan, &ended, &message);
            let error =
                AttemptError::new(FailureKind::Tool, scrub(format!("tool `{}` failed: {message}{note}", attempt.tool)));
            Err(if transient { error.transient(retry_after_ms) } else { error })
        }
        Stdout::Envelope(Outcome::NeedsInput { questions }) => Ok(Reply::Questions(questions)),
        Stdout::Plain(result) if success => Ok(Reply::bare(result)),
        Stdout::NotJson(why) | Stdout::Malformed(why) if success => {
            let quoted = if stdout.is_empty() {
                String::new()
            } else {
                format!("; stdout: {}", attempt.scrubber.scrub_head(stdout, STDOUT_QUOTE_BYTES))
            };
            Err(AttemptError::new(
                FailureKind::Tool,
                format!("tool `{}` exited with status 0 but {}{held}{quoted}", attempt.tool, scrub(why)),
            ))
        }
        _ => {
            let stderr = stderr_excerpt(attempt, &ended);
            let note = sandbox_note(plan, &ended, &stderr);
            Err(AttemptError::new(
                FailureKind::Tool,
                format!("tool `{}` {}{held}{stderr}{note}", attempt.tool, describe_status(ended.status)),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::{Grants, SandboxMode};

    #[test]
    fn checks_the_command() {
        assert!(check_command("sh").unwrap_err().contains("absolute"));
        assert!(check_command("/").unwrap_err().contains("regular file"));
        assert!(check_command("/nonexistent/x").unwrap_err().contains("cannot be used"));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, "x").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(check_command(file.to_str().unwrap()).unwrap_err().contains("not executable"));
        let command = check_command("/bin/sh").unwrap();
        let grants = Grants {
            command: &command,
            bundle: dir.path(),
            fs: vec![],
            net: vec![],
            max_memory_bytes: None,
            max_processes: None,
        };
        let sandbox = SandboxPlan::new(SandboxMode::Off, &grants);
        let plan = ExecPlan { command, args: vec!["-x".into()], max_output_bytes: 1, sandbox };
        assert_eq!(plan.target(), "/bin/sh <blob> -x");
    }
}
