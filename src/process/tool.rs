//! A tool binary run under the exec protocol (docs/runtime.md), for any
//! action: `run` (the exec transport) and `schema` (`rlp tools import`,
//! `rlp lint --check-tools`).
//!
//! argv is `[command, <blob path>, ...args]`, no shell; the blob (mode
//! 0600) sits in a private folder (mode 0700) that is the working directory
//! and `TMPDIR`, and is removed afterwards, with whatever the tool left in
//! it (also when a signal ends rlp, and by a later rlp when rlp was
//! SIGKILLed). stdin is /dev/null; the environment holds only `PATH`,
//! `LANG`, `TMPDIR`, `RLP_INVOCATION_ID` and what the caller adds (a tool's
//! secrets).

use std::ffi::OsStr;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::time::Instant;

use rustix::fs::{AtFlags, Mode, OFlags};
use serde_json::Value;

use crate::process::capture::Keep;
use crate::process::run::{Finished, RunError, Watch, run};
use crate::process::spawn::Program;
use crate::sandbox::SandboxPlan;
use crate::sandbox::fs::TOOL_PATH;
use crate::sandbox::world::calls_dir;

/// The `LANG` a tool sees.
pub(crate) const TOOL_LANG: &str = "C.UTF-8";
/// The environment variable holding the invocation id (also how the orphan
/// sweep recognises a call's processes).
pub(crate) const INVOCATION_ENV: &str = "RLP_INVOCATION_ID";
/// Prefix of a call's private folder: `rlp-call-<pid>-<random>`, so that a
/// later rlp can tell the folders of rlp processes that died.
const CALL_DIR_PREFIX: &str = "rlp-call-";

/// One run of a tool binary.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Invocation<'a> {
    /// The executable (absolute).
    pub command: &'a Path,
    /// Arguments after the blob path.
    pub args: &'a [String],
    /// The blob.
    pub blob: &'a Value,
    /// The invocation id, as `RLP_INVOCATION_ID`.
    pub invocation_id: &'a str,
    /// More environment variables (name, value), e.g. the tool's secrets.
    pub env: &'a [(String, &'a str)],
    /// When the tool is killed for taking too long.
    pub deadline: Instant,
    /// Most stdout bytes accepted.
    pub max_stdout: u64,
    /// How stderr is kept (a tail).
    pub stderr: Keep,
    /// The kernel sandbox, made around the call's private folder; `None`
    /// runs the tool unconfined.
    pub sandbox: Option<&'a SandboxPlan>,
    /// Ends the run early once cancelled.
    pub cancel: Option<&'a crate::process::cancel::Cancel>,
}

/// Why an invocation gave no [`Finished`].
#[derive(Debug)]
pub(crate) enum InvokeError {
    /// The private folder could not be made.
    Folder(io::Error),
    /// The blob could not be written.
    Blob(io::Error),
    /// The sandbox could not be prepared.
    Sandbox(io::Error),
    /// The tool could not be started.
    Start(io::Error),
    /// Waiting for it failed (it was killed).
    Wait(io::Error),
}

impl InvokeError {
    /// What went wrong, in words, for a run of `command`.
    pub(crate) fn describe(&self, command: &Path) -> String {
        match self {
            InvokeError::Folder(e) => format!("cannot create the private folder for the call: {e}"),
            InvokeError::Blob(e) => format!("cannot write the call blob: {e}"),
            InvokeError::Sandbox(e) => format!("cannot prepare the sandbox: {e}"),
            InvokeError::Start(e) => format!("cannot start `{}`: {e}", command.display()),
            InvokeError::Wait(e) => format!("cannot wait for the tool: {e}"),
        }
    }
}

/// Runs the tool to its end (see the module docs and [`crate::process::run`]).
pub(crate) fn invoke(invocation: &Invocation<'_>) -> Result<Finished, InvokeError> {
    let dir = private_dir().map_err(InvokeError::Folder)?;
    // The handler removes the folder with the blob and whatever the tool leaves in it.
    let _tracked_dir = crate::interrupt::track_dir(dir.path());
    let blob = write_blob(dir.path(), invocation.blob).map_err(InvokeError::Blob)?;
    let args = std::iter::once(blob.as_os_str()).chain(invocation.args.iter().map(OsStr::new));
    let base = [
        ("PATH", TOOL_PATH.as_ref()),
        ("LANG", TOOL_LANG.as_ref()),
        ("TMPDIR", dir.path().as_os_str()),
        (INVOCATION_ENV, invocation.invocation_id.as_ref()),
    ];
    let env = base
        .into_iter()
        .map(|(name, value)| (OsStr::new(name), value))
        .chain(invocation.env.iter().map(|(name, value)| (OsStr::new(name), OsStr::new(value))));
    let program = Program::new(invocation.command, args, env, dir.path()).map_err(InvokeError::Start)?;
    let marker = format!("{INVOCATION_ENV}={}", invocation.invocation_id);
    let watch = Watch {
        deadline: invocation.deadline,
        max_stdout: invocation.max_stdout,
        stderr: invocation.stderr,
        marker: &marker,
        cancel: invocation.cancel,
    };
    let mut confinement = match invocation.sandbox {
        Some(plan) => plan.confine(dir.path()).map_err(InvokeError::Sandbox)?,
        None => None,
    };
    let finished = run(&program, confinement.as_mut(), &watch).map_err(|e| match e {
        RunError::Start(e) => InvokeError::Start(e),
        RunError::Wait(e) => InvokeError::Wait(e),
    })?;
    remove_private_dir(dir);
    Ok(finished)
}

/// Removes the call's private folder with anything the tool left in it.
///
/// Its name is gone when this returns; the folder itself is let go (its last
/// descriptor closed) off the call's path ([`crate::process::release`]): on
/// a file system mounted with `discard`, freeing a new folder's block waits
/// for the disk to discard it, which can take milliseconds that are no part
/// of the call.
pub(crate) fn remove_private_dir(dir: tempfile::TempDir) {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let held = rustix::fs::open(dir.path(), flags, Mode::empty()).ok();
    let path = dir.keep();
    // Most tools leave nothing behind: the blob and the folder go in two
    // calls, and a folder with more in it is emptied first.
    if let Some(folder) = &held {
        let _ = rustix::fs::unlinkat(folder, BLOB_NAME, AtFlags::empty());
    }
    if fs::remove_dir(&path).is_err() {
        let _ = fs::remove_dir_all(&path);
    }
    if let Some(folder) = held {
        crate::process::release::later(folder);
    }
}

/// A new private folder (mode 0700) for one tool run or one server.
pub(crate) fn private_dir() -> io::Result<tempfile::TempDir> {
    static SWEPT: Once = Once::new();
    let temp = calls_dir();
    SWEPT.call_once(|| crate::leftovers::sweep(&temp, &[CALL_DIR_PREFIX], crate::leftovers::Kind::Any));
    let dir =
        tempfile::Builder::new().prefix(&format!("{CALL_DIR_PREFIX}{}-", std::process::id())).tempdir_in(&temp)?;
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700))?;
    Ok(dir)
}

/// The blob's name in the private folder.
const BLOB_NAME: &str = "call.json";

fn write_blob(dir: &Path, blob: &Value) -> io::Result<PathBuf> {
    let path = dir.join(BLOB_NAME);
    let mut file = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?;
    let bytes = serde_json::to_vec(blob).map_err(io::Error::other)?;
    file.write_all(&bytes)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn script(dir: &Path, body: &str) -> PathBuf {
        let path = dir.join("tool.sh");
        fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn run_script(body: &str, timeout: Duration, max_stdout: u64) -> Result<Finished, InvokeError> {
        let dir = tempfile::tempdir().unwrap();
        let tool = script(dir.path(), body);
        let blob = json!({"v": 1, "action": "schema"});
        invoke(&Invocation {
            command: &tool,
            args: &["an arg".to_string()],
            blob: &blob,
            invocation_id: "0192-test",
            env: &[("EXTRA".to_string(), "yes")],
            deadline: Instant::now() + timeout,
            max_stdout,
            stderr: Keep::Tail { keep: 1024, margin: 0 },
            sandbox: None,
            cancel: None,
        })
    }

    #[test]
    fn sees_the_blob_argv_and_a_clean_environment() {
        let body = "cat \"$1\"; echo; echo \"$2\"; env | sort; pwd; ls -ld \"$TMPDIR\" | cut -c1-10";
        let finished = run_script(body, Duration::from_secs(10), 1 << 20).unwrap();
        assert!(finished.status.unwrap().success());
        let text = String::from_utf8(finished.stdout.bytes).unwrap();
        assert!(text.starts_with("{\"v\":1,\"action\":\"schema\"}\nan arg\nEXTRA=yes\nLANG=C.UTF-8\n"), "{text}");
        assert!(text.contains("PATH=/usr/local/bin:/usr/bin:/bin\nPWD="), "{text}");
        assert!(text.contains("RLP_INVOCATION_ID=0192-test\nTMPDIR="), "{text}");
        assert!(!text.contains("HOME="), "{text}");
        assert!(text.trim_end().ends_with("drwx------"), "{text}");
        let folder = text.lines().find_map(|l| l.strip_prefix("TMPDIR=")).unwrap();
        assert!(folder.contains("/rlp-call-") && !Path::new(folder).exists(), "{folder} is left");
    }

    #[test]
    fn the_tool_starts_with_no_signal_blocked_sigpipe_at_its_default_and_ignored_signals_ignored() {
        // SAFETY: SIG_IGN for SIGUSR2, which nothing in the tests sends.
        unsafe { libc::signal(libc::SIGUSR2, libc::SIG_IGN) };
        let finished =
            run_script("exec grep -E '^Sig(Blk|Ign)' /proc/self/status", Duration::from_secs(10), 1 << 20).unwrap();
        let text = String::from_utf8(finished.stdout.bytes).unwrap();
        let mask = |name: &str| {
            let line = text.lines().find(|l| l.starts_with(name)).unwrap();
            u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
        };
        assert_eq!(mask("SigBlk:"), 0, "{text}");
        let ignored = mask("SigIgn:");
        assert_eq!(ignored & (1 << (libc::SIGPIPE - 1)), 0, "{text}");
        assert_ne!(ignored & (1 << (libc::SIGUSR2 - 1)), 0, "{text}");
    }

    #[test]
    fn kills_the_group_at_the_timeout() {
        let start = Instant::now();
        let finished = run_script("sleep 30 & sleep 30", Duration::from_millis(300), 1024).unwrap();
        assert!(finished.timed_out && !finished.unkillable);
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn bounds_stdout_and_drains_stderr() {
        let finished = run_script("yes err >&2 & yes", Duration::from_secs(5), 100_000).unwrap();
        assert!(finished.overflow && !finished.timed_out);
        assert_eq!(finished.stdout.bytes.len(), 100_000);
        assert!(finished.stderr.bytes.len() <= 2 * 8 * 1024);
    }

    #[test]
    fn a_tool_that_cannot_start_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let blob = json!({});
        let invocation = |command: &Path| {
            let invocation = Invocation {
                command,
                args: &[],
                blob: &blob,
                invocation_id: "x",
                env: &[],
                deadline: Instant::now() + Duration::from_secs(5),
                max_stdout: 10,
                stderr: Keep::Tail { keep: 10, margin: 0 },
                sandbox: None,
                cancel: None,
            };
            match invoke(&invocation) {
                Err(InvokeError::Start(e)) => e.to_string(),
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(invocation(&dir.path().join("missing")), "No such file or directory (os error 2)");
        let plain = dir.path().join("plain");
        fs::write(&plain, "x").unwrap();
        assert_eq!(invocation(&plain), "Permission denied (os error 13)");
        assert_eq!(invocation(Path::new("/bin/t\0rue")), "nul byte found in provided data");
    }
}
