//! Processes rlp and its tools start: whether they still run, signals, and
//! what they report of themselves.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// How long a test waits for a process to end or a file to appear.
const PATIENCE: Duration = Duration::from_secs(20);

/// Whether process `pid` exists and has not exited: a zombie waiting to be
/// reaped (by init, once its parent is gone) counts as gone.
pub fn is_running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, state)| !state.starts_with('Z')))
}

/// When process `pid` started (clock ticks since boot), if it exists: tells
/// a process from a later one that reused its pid.
fn start_time(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(") ")?;
    // Field 22 of stat; `rest` starts at field 3.
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

/// Waits (bounded, as a hang guard) until process `pid` has exited.
pub fn wait_until_gone(pid: i32) {
    let pid = pid.to_string();
    let started = start_time(&pid);
    let deadline = Instant::now() + PATIENCE;
    // Gone, a zombie, or its pid already taken by a later process.
    while is_running(&pid) && start_time(&pid) == started {
        assert!(Instant::now() < deadline, "process {pid} is still running");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits (bounded) until the file at `path` can be read; returns its text.
pub fn wait_for_file(path: &Path) -> String {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        if let Ok(text) = std::fs::read_to_string(path) {
            return text;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{} never appeared", path.display());
}

/// Waits (bounded) until a call's private folder below `tmp` (the `TMPDIR`
/// rlp was given) holds the file `name`; returns its text. A tool with no
/// grant can leave a file nowhere else, and rlp removes the folder when the
/// call ends: a test reads it while the call runs.
pub fn wait_for_private_file(tmp: &Path, name: &str) -> String {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        for entry in std::fs::read_dir(tmp).unwrap().flatten() {
            if let Ok(text) = std::fs::read_to_string(entry.path().join(name)) {
                return text;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("no call folder in {} ever held {name}", tmp.display());
}

/// Sends `signal` to process `pid` (to process group `-pid` if negative).
pub fn signal(pid: i32, signal: i32) {
    // SAFETY: kill(2) takes two integers and touches no memory of this
    // process; its result is not needed (the target may be gone already).
    unsafe {
        libc::kill(pid, signal);
    }
}

/// A pipe whose reading end is already closed: the first write gets EPIPE.
pub fn closed_pipe() -> Stdio {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    Stdio::from(writer)
}

/// The NUL-separated environment a tool reported as hex, by name.
pub fn decode_environ(hex: &str) -> BTreeMap<String, String> {
    let bytes: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
    bytes
        .split(|b| *b == 0)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let entry = String::from_utf8(entry.to_vec()).unwrap();
            let (name, value) = entry.split_once('=').unwrap();
            (name.to_string(), value.to_string())
        })
        .collect()
}

/// Runs the set-up script `setup` (e.g. `tests/mcpb/setup.sh`) with the
/// folder `<target>/<folder>` and returns the path it prints; a script that
/// fails fails the test, naming it with `failure` (what it could not do)
/// and with `needed_by`, the tests that need it (they are never skipped).
pub fn set_up(setup: &str, folder: &str, failure: &str, needed_by: &str) -> std::path::PathBuf {
    let target = std::path::Path::new(env!("CARGO_BIN_EXE_rlp"))
        .parent()
        .and_then(std::path::Path::parent)
        .expect("the target folder");
    let out = std::process::Command::new("sh")
        .arg(super::files::repo(setup))
        .arg(target.join(folder))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {setup}: {e}"));
    assert!(out.status.success(), "{setup} {failure}; {needed_by} need it\n{}", super::output::text(&out));
    std::path::PathBuf::from(super::output::stdout(&out).trim())
}

/// The python of the virtualenv the script `setup` (e.g.
/// `tests/mcp/setup.sh`, see tests/venv.sh) makes under `<target>/<folder>`,
/// made on first use; a failure names the script and what needs it.
pub fn venv_python(setup: &str, folder: &str, needed_by: &str) -> std::path::PathBuf {
    set_up(setup, folder, "could not make its virtualenv (python3 -m venv, pip install from PyPI)", needed_by)
}
