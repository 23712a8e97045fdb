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

use crate::bundle::capability::SecretId;
use crate::bundle::command::{self as bundle_command, BUNDLE_DIR};
use crate::bundle::tools::Transport;
use crate::event::{CommandRecord, Decision, SandboxRecord};
use crate::process::capture::Keep;
use crate::process::run::{Finished, KILL_GRACE};
use crate::process::tool::{Invocation, invoke};
use crate::runtime::call::Call;
use crate::runtime::envelope::{self, Outcome, Stdout};
use crate::runtime::error::{CallError, CallErrorKind};
use crate::runtime::transport::{Attempt, AttemptError, Audit, FailureKind, Plan, Reply};
use crate::sandbox::{Grants, SandboxPlan};
use crate::secrets::SecretValue;

/// How much of stderr is kept for error messages (the tail).
pub(crate) const STDERR_TAIL_BYTES: usize = 64 * 1024;
/// How much of stderr an error message quotes.
const STDERR_QUOTE_BYTES: usize = 4 * 1024;
/// How much of a non-JSON stdout an error message quotes.
const STDOUT_QUOTE_BYTES: usize = 512;
/// The `capability` of the audit frame that records a call refused because
/// the sandbox is required and the kernel cannot confine the tool.
pub(crate) const SANDBOX_CAPABILITY: &str = "sandbox";

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
    /// The command as tools.json writes it, where it names the program with
    /// `${bundle}`.
    pub written: Option<String>,
}

/// Why a tool's `transport.command` cannot be run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CommandError {
    /// Not an absolute path.
    #[error("command `{0}` is not an absolute path; rlp never searches PATH")]
    NotAbsolute(String),
    /// It cannot be looked at.
    #[error("command `{command}` cannot be used: {source}")]
    Unusable {
        /// The command.
        command: String,
        /// Why.
        source: io::Error,
    },
    /// Not a regular file.
    #[error("command `{0}` is not a regular file")]
    NotRegularFile(String),
    /// No execute permission bit.
    #[error("command `{0}` is not executable (no execute permission bit)")]
    NotExecutable(String),
}

/// Checks that `command` is an absolute path to an executable regular file.
pub(crate) fn check_command(command: &str) -> Result<PathBuf, CommandError> {
    let path = Path::new(command);
    if !path.is_absolute() {
        return Err(CommandError::NotAbsolute(command.to_string()));
    }
    let meta = fs::metadata(path).map_err(|source| CommandError::Unusable { command: command.to_string(), source })?;
    if !meta.is_file() {
        return Err(CommandError::NotRegularFile(command.to_string()));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(CommandError::NotExecutable(command.to_string()));
    }
    Ok(path.to_path_buf())
}

impl Call<'_> {
    /// The exec transport's plan of the call: its command (an executable
    /// at an absolute path) and the sandbox it runs in.
    pub(crate) fn plan_exec(&mut self, transport: &Transport, args: &[String]) -> Result<ExecPlan, CallError> {
        let tool = self.tool();
        let here = bundle_command::this_platform();
        let carried = transport.programs().map(|p| p.carried()).unwrap_or_default();
        let Some(command) = transport.programs().and_then(|p| p.for_platform(&here)) else {
            return Err(self.journal.refuse(
                CallError::new(
                    CallErrorKind::Tool,
                    format!(
                        "tool `{}` carries no program for this platform ({here}); it carries one for {}",
                        tool.id,
                        carried.join(", ")
                    ),
                )
                .help(format!(
                    "add `\"{here}\"` to the tool's `transport.platforms`, or a `command` for every other platform"
                )),
            ));
        };
        // `${bundle}` is the folder this bundle was loaded from.
        let root = self.runtime.root();
        let written = command.contains(BUNDLE_DIR).then(|| command.to_string());
        let resolved = bundle_command::resolve(command, root);
        let command = check_command(&resolved).map_err(|why| {
            let help = if written.is_some() {
                "the bundle lacks the program its tools.json names: restore the file, or fix `transport.command`"
            } else {
                "install the tool's binary at that path, or fix `transport.command` in tools.json"
            };
            self.journal
                .refuse(CallError::new(CallErrorKind::Tool, format!("tool `{}` cannot run: {why}", tool.id)).help(help))
        })?;
        let sandbox = self.sandbox(&command)?;
        let args = args.iter().map(|arg| bundle_command::resolve(arg, root)).collect();
        Ok(ExecPlan { command, args, max_output_bytes: tool.max_output_bytes, sandbox, written })
    }

    /// The kernel sandbox of an exec tool: what it declares of `fs` and
    /// `net` (every declared capability is granted by now), under
    /// `runtime.sandbox`. Under `required`, a kernel that cannot confine the
    /// tool refuses the call, and the refusal is recorded.
    fn sandbox(&mut self, command: &Path) -> Result<SandboxPlan, CallError> {
        let grants = Grants::of(self.tool(), command, self.runtime.root());
        self.confine(&grants)
    }

    /// The kernel sandbox of a program with `grants` (an exec tool, or the
    /// stdio server of an mcp tool), under `runtime.sandbox`; a refusal is
    /// recorded.
    pub(crate) fn confine(&mut self, grants: &Grants<'_>) -> Result<SandboxPlan, CallError> {
        let tool = self.tool();
        let setting = &self.runtime.options().config.sandbox;
        let plan = SandboxPlan::new(setting.value, grants);
        if let Some(why) = plan.linked_grant() {
            self.journal.audit_named(SANDBOX_CAPABILITY, Decision::Deny, why);
            return Err(self.journal.refuse(
                CallError::new(CallErrorKind::Refused, format!("tool `{}` cannot run: {why}", tool.id)).help(
                    "grant and declare the folder the link leads to (fs:<real path>) in policy.caps and tools.json, or remove the link",
                ),
            ));
        }
        let Some(why) = plan.refusal() else { return Ok(plan) };
        self.journal.audit_named(SANDBOX_CAPABILITY, Decision::Deny, &why);
        Err(self.journal.refuse(
            CallError::new(
                CallErrorKind::Refused,
                format!(
                    "tool `{}` cannot run: the sandbox is required ({}) and this kernel cannot confine it: {why}",
                    tool.id,
                    setting.source.shown("runtime")
                ),
            )
            .help("run on a kernel with Landlock and seccomp (Linux 5.13 or later), or set [runtime] sandbox = \"best-effort\" in config.toml (docs/sandbox.md)"),
        ))
    }
}

impl Plan for ExecPlan {
    /// The command and its arguments.
    fn target(&self) -> String {
        let mut shown = self.command.display().to_string();
        shown.push_str(" <blob>");
        for arg in &self.args {
            shown.push(' ');
            shown.push_str(arg);
        }
        shown
    }

    fn sandbox(&self) -> Option<&SandboxRecord> {
        Some(self.sandbox.record())
    }

    fn command_record(&self) -> Option<CommandRecord> {
        let written = self.written.clone()?;
        Some(CommandRecord { written, resolved: self.command.display().to_string() })
    }

    fn run(&self, attempt: &Attempt<'_>, _audits: &mut Vec<Audit>) -> Result<Reply, AttemptError> {
        run(self, attempt)
    }
}

/// The environment variables an exec tool receives its secrets in: each
/// under [`SecretId::env_var`], and also under its
/// [`SecretId::legacy_env_var`] where no other secret of the same tool has
/// that name (old or new), so tools written against the earlier names keep
/// working. These are the tool's own granted values, so nothing leaks.
pub(crate) fn tool_environment(secrets: &[(SecretId, SecretValue)]) -> Vec<(String, &SecretValue)> {
    let names: Vec<String> = secrets.iter().map(|(id, _)| id.env_var()).collect();
    let legacy: Vec<Option<String>> = secrets.iter().map(|(id, _)| id.legacy_env_var()).collect();
    let mut out: Vec<(String, &SecretValue)> = names.iter().cloned().zip(secrets.iter().map(|(_, v)| v)).collect();
    for (old, (_, value)) in legacy.iter().zip(secrets) {
        if let Some(old) = old
            && legacy.iter().flatten().filter(|other| *other == old).count() == 1
            && !names.contains(old)
        {
            out.push((old.clone(), value));
        }
    }
    out
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
            "name": attempt.tool,
            "arguments": attempt.arguments,
            "answers": attempt.answers,
            "options": attempt.options,
        },
        "context": {
            "action": "run",
            "root": attempt.runtime.root().display().to_string(),
            "attempt": attempt.number,
            "deadline_ms": attempt.deadline_ms,
        },
    })
}

/// Runs one attempt.
pub(crate) fn run(plan: &ExecPlan, attempt: &Attempt<'_>) -> Result<Reply, AttemptError> {
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
    let finished = invoke(&invocation).map_err(|e| {
        AttemptError::new(FailureKind::Transport, attempt.scrubber.scrub_string(&e.describe(&plan.command)))
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
        assert!(check_command("sh").unwrap_err().to_string().contains("absolute"));
        assert!(check_command("/").unwrap_err().to_string().contains("regular file"));
        assert!(check_command("/nonexistent/x").unwrap_err().to_string().contains("cannot be used"));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, "x").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(check_command(file.to_str().unwrap()).unwrap_err().to_string().contains("not executable"));
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
        let plan = ExecPlan { command, args: vec!["-x".into()], max_output_bytes: 1, sandbox, written: None };
        assert_eq!(plan.target(), "/bin/sh <blob> -x");
    }

    #[test]
    fn tools_get_new_names_and_unshared_old_ones() {
        let secrets: Vec<(SecretId, SecretValue)> =
            ["runloop/mail/api_key", "runloop/mail/api-key", "runloop/github/token", "runloop/a_/b", "runloop/a/b"]
                .iter()
                .enumerate()
                .map(|(i, id)| (id.parse().unwrap(), SecretValue::new(format!("v{i}"))))
                .collect();
        let env: Vec<(String, &str)> =
            tool_environment(&secrets).into_iter().map(|(name, v)| (name, v.expose())).collect();
        let expected = [
            ("RUNLOOP_MAIL__API_KEY", "v0"),
            ("RUNLOOP__MAIL_SAPI_HKEY", "v1"),
            ("RUNLOOP_GITHUB__TOKEN", "v2"),
            ("RUNLOOP__A_U_SB", "v3"),
            ("RUNLOOP_A__B", "v4"),
            // RUNLOOP_MAIL_API_KEY is shared by two of them; RUNLOOP_A__B
            // (the old name of runloop/a_/b) is the new name of runloop/a/b.
            ("RUNLOOP_GITHUB_TOKEN", "v2"),
            ("RUNLOOP_A_B", "v4"),
        ];
        let expected: Vec<(String, &str)> = expected.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        assert_eq!(env, expected);
    }
}
