//! Asks a tool binary for its own definitions: the `schema` action of the
//! exec protocol (docs/runtime.md), run the way the runtime runs tools.
//!
//! - argv `[command, <blob path>, ...args]`, no shell;
//! - the blob (mode 0600) in a private 0700 temporary folder, which is also
//!   the working directory and `TMPDIR`, removed afterwards;
//! - environment cleared but for `PATH`, `LANG`, `TMPDIR`, `RLP_INVOCATION_ID`;
//! - stdin empty, its own process group, the whole group killed at the
//!   timeout; stdout bounded (beyond the bound the group is killed), stderr
//!   kept up to a bounded tail for messages.

use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;

/// Default time a binary gets to answer.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default bound on stdout.
pub(crate) const DEFAULT_MAX_OUTPUT: usize = 4 << 20;
/// How much of stderr is kept.
const STDERR_TAIL: usize = 64 << 10;
/// How long to wait for pipes to close after the process is gone.
const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// Limits of one run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Killed after this long.
    pub timeout: Duration,
    /// Killed when stdout grows beyond this many bytes.
    pub max_output: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { timeout: DEFAULT_TIMEOUT, max_output: DEFAULT_MAX_OUTPUT }
    }
}

/// What a finished run produced.
#[derive(Debug)]
pub(crate) struct Output {
    /// The exit status.
    pub status: ExitStatus,
    /// stdout, complete (within the bound).
    pub stdout: Vec<u8>,
    /// The end of stderr, lossily decoded.
    pub stderr: String,
}

/// Why a run produced no output to read.
#[derive(Debug)]
pub(crate) enum RunError {
    /// The binary could not be started (or the blob written).
    Start(String),
    /// It did not finish in time; its process group was killed.
    Timeout(Duration),
    /// stdout went past the bound; its process group was killed.
    TooLarge(usize),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Start(why) => write!(f, "it could not be started: {why}"),
            RunError::Timeout(t) => write!(f, "it did not answer within {} ms and was killed", t.as_millis()),
            RunError::TooLarge(n) => write!(f, "it printed more than {n} bytes and was killed"),
        }
    }
}

enum Event {
    Exited(std::io::Result<ExitStatus>),
    Stdout(Vec<u8>, bool),
    Stderr(Vec<u8>),
}

/// The blob of a `schema` request.
pub(crate) fn schema_blob(bundle_root: &Path, timeout: Duration) -> serde_json::Value {
    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    json!({
        "v": 1,
        "action": "schema",
        "invocation_id": uuid::Uuid::now_v7().to_string(),
        "trace_id": uuid::Uuid::now_v7().to_string(),
        "tool": {"id": null, "arguments": {}, "answers": {}, "options": {}},
        "context": {
            "root": bundle_root.display().to_string(),
            "attempt": 1,
            "deadline_ms": now_ms + timeout.as_millis() as u64,
        }
    })
}

/// Runs `command` with a `schema` blob and returns what it printed.
pub(crate) fn ask_schema(
    command: &Path,
    args: &[String],
    bundle_root: &Path,
    limits: Limits,
) -> Result<Output, RunError> {
    let blob = schema_blob(bundle_root, limits.timeout);
    run(command, args, &blob, limits)
}

/// Runs `command` with `blob` under the exec protocol's rules.
pub(crate) fn run(
    command: &Path,
    args: &[String],
    blob: &serde_json::Value,
    limits: Limits,
) -> Result<Output, RunError> {
    let dir = tempfile::Builder::new()
        .prefix("rlp-tool-")
        .tempdir()
        .map_err(|e| RunError::Start(format!("cannot create a private folder: {e}")))?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
        .map_err(|e| RunError::Start(format!("cannot restrict the private folder: {e}")))?;
    let blob_path = dir.path().join("blob.json");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&blob_path)
        .map_err(|e| RunError::Start(format!("cannot write the blob: {e}")))?;
    serde_json::to_writer(&mut file, blob).map_err(|e| RunError::Start(format!("cannot write the blob: {e}")))?;
    drop(file);
    let invocation = blob.get("invocation_id").and_then(|v| v.as_str()).unwrap_or_default();

    let mut child = Command::new(command)
        .arg(&blob_path)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .env("TMPDIR", dir.path())
        .env("RLP_INVOCATION_ID", invocation)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| RunError::Start(e.to_string()))?;
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = mpsc::channel();
    if let Some(mut stdout) = child.stdout.take() {
        let tx = tx.clone();
        let max = limits.max_output;
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 16 << 10];
            let too_large = loop {
                match stdout.read(&mut chunk) {
                    Ok(0) | Err(_) => break false,
                    Ok(n) => {
                        buf.extend_from_slice(&chunk[..n]);
                        if buf.len() > max {
                            break true;
                        }
                    }
                }
            };
            let _ = tx.send(Event::Stdout(buf, too_large));
        });
    }
    if let Some(mut stderr) = child.stderr.take() {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 16 << 10];
            while let Ok(n) = stderr.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() > 2 * STDERR_TAIL {
                    buf.drain(..buf.len() - STDERR_TAIL);
                }
            }
            let _ = tx.send(Event::Stderr(buf));
        });
    }
    std::thread::spawn(move || {
        let _ = tx.send(Event::Exited(child.wait()));
    });

    let deadline = Instant::now() + limits.timeout;
    let (mut status, mut stdout, mut stderr) = (None, None, None);
    while status.is_none() || stdout.is_none() || stderr.is_none() {
        let now = Instant::now();
        let wait = match status {
            // Exited: leftover children may hold the pipes open; they were
            // killed with the group, so the pipes close shortly.
            Some(_) => DRAIN_GRACE,
            None if now >= deadline => {
                kill_group(pid);
                return Err(RunError::Timeout(limits.timeout));
            }
            None => deadline - now,
        };
        match rx.recv_timeout(wait) {
            Ok(Event::Exited(result)) => {
                kill_group(pid);
                status = Some(result.map_err(|e| RunError::Start(format!("waiting for it failed: {e}")))?);
            }
            Ok(Event::Stdout(_, true)) => {
                kill_group(pid);
                return Err(RunError::TooLarge(limits.max_output));
            }
            Ok(Event::Stdout(bytes, false)) => stdout = Some(bytes),
            Ok(Event::Stderr(bytes)) => stderr = Some(bytes),
            Err(mpsc::RecvTimeoutError::Timeout) if status.is_some() => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let status = status.ok_or_else(|| RunError::Start("lost track of the process".into()))?;
    let stderr = stderr.unwrap_or_default();
    let tail = &stderr[stderr.len().saturating_sub(STDERR_TAIL)..];
    Ok(Output { status, stdout: stdout.unwrap_or_default(), stderr: String::from_utf8_lossy(tail).into_owned() })
}

/// Kills every process of the group `pgid` (the tool and its children).
fn kill_group(pgid: libc::pid_t) {
    if pgid > 0 {
        // SAFETY: kill(2) with a negative pid signals a process group; it has
        // no memory effects and fails harmlessly (ESRCH) if the group is gone.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(dir: &Path, body: &str) -> std::path::PathBuf {
        let path = dir.join("tool.sh");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn sees_the_blob_and_a_clean_environment() {
        let dir = tempfile::tempdir().unwrap();
        let tool = script(dir.path(), "cat \"$1\"; echo; env | sort; pwd; ls -ld \"$TMPDIR\" | cut -c1-10");
        let out = run(&tool, &[], &schema_blob(dir.path(), DEFAULT_TIMEOUT), Limits::default()).unwrap();
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.starts_with("{\"v\":1,\"action\":\"schema\""), "{text}");
        assert!(!text.contains("HOME="), "{text}");
        assert!(text.contains("PATH=/usr/local/bin:/usr/bin:/bin\n"), "{text}");
        assert!(text.trim_end().ends_with("drwx------"), "{text}");
    }

    #[test]
    fn kills_the_group_at_the_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let tool = script(dir.path(), "sleep 30 & sleep 30");
        let start = Instant::now();
        let limits = Limits { timeout: Duration::from_millis(300), max_output: 1024 };
        let err = run(&tool, &[], &json!({}), limits).unwrap_err();
        assert!(matches!(err, RunError::Timeout(_)), "{err}");
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn bounds_stdout() {
        let dir = tempfile::tempdir().unwrap();
        let tool = script(dir.path(), "yes");
        let limits = Limits { timeout: Duration::from_secs(5), max_output: 100_000 };
        assert!(matches!(run(&tool, &[], &json!({}), limits), Err(RunError::TooLarge(100_000))));
    }
}
