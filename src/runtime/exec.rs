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
use crate::runtime::secrets::tool_environment;
use crate::runtime::transport::{Attempt, AttemptError, FailureKind};

/// How much of stderr is kept for error messages (the tail).
pub(crate) const STDERR_TAIL_BYTES: usize = 64 * 1024;
/// How much of stderr an error message quotes.
const STDERR_QUOTE_BYTES: usize = 4 * 1024;
/// How much of a non-JSON stdout an error message quotes.
const STDOUT_QUOTE_BYTES: usize = 512;

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

/// Runs one attempt.
pub(crate) fn run(plan: &ExecPlan, attempt: &Attempt<'_>) -> Result<Value, AttemptError> {
    let transport = |what: &str, e: io::Error| {
        AttemptError::new(FailureKind::Transport, attempt.scrubber.scrub_string(&format!("{what}: {e}")))
    };
    let blob = run_blob(attempt);
    let invocation_id = attempt.invocation_id.to_string();
    let env: Vec<(String, &str)> =
        tool_environment(attempt.secrets).into_iter().map(|(name, value)| (name, value.expose())).collect();
    let invocation = Invocation {
        command: &plan.command,
        args: &plan.args,
        blob: &blob,
        invocation_id: &invocation_id,
        env: &env,
        deadline: attempt.deadline,
        max_stdout: plan.max_output_bytes,
        stderr: Keep::Tail { keep: STDERR_TAIL_BYTES, margin: attempt.scrubber.max_spelled_len() },
    };
    let finished = invoke(&invocation).map_err(|e| match e {
        InvokeError::Folder(e) => transport("cannot create the private folder for the call", e),
        InvokeError::Blob(e) => transport("cannot write the call blob", e),
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

fn interpret(plan: &ExecPlan, attempt: &Attempt<'_>, ended: Finished) -> Result<Value, AttemptError> {
    let scrub = |text: String| attempt.scrubber.scrub_string(&text);
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
        Stdout::Envelope(Outcome::Success(result)) => Ok(result),
        Stdout::Envelope(Outcome::Error { message, transient, retry_after_ms }) => {
            let error =
                AttemptError::new(FailureKind::Tool, scrub(format!("tool `{}` failed: {message}", attempt.tool)));
            Err(if transient { error.transient(retry_after_ms) } else { error })
        }
        Stdout::Envelope(Outcome::NeedsInput { question }) => {
            let text = question.get("text").and_then(Value::as_str).unwrap_or("(no text)");
            Err(AttemptError::new(
                FailureKind::NeedsInput,
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
                FailureKind::Tool,
                format!("tool `{}` exited with status 0 but {}{held}{quoted}", attempt.tool, scrub(why)),
            ))
        }
        _ => Err(AttemptError::new(
            FailureKind::Tool,
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
