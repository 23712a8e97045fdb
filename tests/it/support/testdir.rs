//! The temporary folder every test runs `rlp` in, and the commands that run
//! it there with a clean environment.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::{bundle, ledger, output};

/// The `rlp` binary under test.
const RLP: &str = env!("CARGO_BIN_EXE_rlp");

/// Guards against a hang; not a timing assertion.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// The runtime home of a test folder, unless a test names another one.
const HOME: &str = "home";

/// The subfolder that tools are granted (`fs:`) for the files they
/// leave for a test: markers, pids, counters, data they read.
const STATE: &str = "state";

/// A temporary folder holding runtime homes (`home/` unless a test names
/// others), bundles (`agents/`), keys and tool scripts. `rlp` runs in it with
/// no `RUNLOOP_*`, `OTEL_*` or `RLP_*` variable of the caller's environment
/// (no span goes to the caller's collector, no registry token is sent), and
/// `RUNLOOP_SYSTEM_CONFIG` and `DOCKER_CONFIG` name a file and a folder the
/// test folder does not hold: the caller's settings and registry credentials
/// never leak into a test.
///
/// (Named `TestDir`, not after the kernel sandbox that rlp puts tools in and
/// that `tests/it/sandbox.rs` tests.)
pub struct TestDir {
    dir: tempfile::TempDir,
}

impl TestDir {
    /// A new, empty test folder (its home is made by the first command that needs it).
    pub fn new() -> Self {
        TestDir { dir: tempfile::tempdir().unwrap() }
    }

    /// The test folder, the working directory of every command.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `relative` inside the test folder.
    pub fn join(&self, relative: impl AsRef<Path>) -> PathBuf {
        self.path().join(relative)
    }

    /// The default runtime home.
    pub fn home(&self) -> PathBuf {
        self.join(HOME)
    }

    /// `<testdir>/state`, made if missing: the one folder a test grants its
    /// tools (see [`bundle::with_fs`] and [`bundle::caps`]) for the files they
    /// write or read, as an exec tool reaches nothing else of the test folder.
    pub fn state_dir(&self) -> PathBuf {
        let dir = self.join(STATE);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// `<testdir>/tmp`, made if missing: a `TMPDIR` for rlp, below which each
    /// call gets its private folder (see [`super::process::wait_for_private_file`]).
    pub fn tmp_dir(&self) -> PathBuf {
        let dir = self.join("tmp");
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// The ledger of the default runtime home.
    pub fn ledger_path(&self) -> PathBuf {
        self.ledger_path_in(HOME)
    }

    /// The ledger of runtime home `home` (a subfolder).
    pub fn ledger_path_in(&self, home: &str) -> PathBuf {
        ledger::path(&self.join(home))
    }

    /// `program` in the test folder with the clean environment.
    pub fn program(&self, program: impl AsRef<OsStr>) -> Command {
        let mut command = Command::new(program);
        command.current_dir(self.path());
        for (name, _) in std::env::vars_os() {
            if ["RUNLOOP_", "OTEL_", "RLP_"].iter().any(|prefix| name.to_string_lossy().starts_with(prefix)) {
                command.env_remove(name);
            }
        }
        command.env("RUNLOOP_SYSTEM_CONFIG", self.join("no-system-config.toml"));
        command.env("DOCKER_CONFIG", self.join("no-docker-config"));
        command
    }

    /// `rlp` with no `--home`, for a test that gives the home another way.
    pub fn command_without_home(&self) -> Command {
        self.program(RLP)
    }

    /// `rlp --home <home>` as a process to spawn, to run on a terminal or to
    /// give other standard streams (its stdio is left as the caller sets it).
    pub fn command(&self) -> Command {
        self.command_in(HOME)
    }

    /// `rlp --home <testdir>/<home>` as [`TestDir::command`].
    pub fn command_in(&self, home: &str) -> Command {
        let mut command = self.command_without_home();
        command.arg("--home").arg(self.join(home));
        command
    }

    /// `<wrapper…> rlp --home <home>`: rlp started by another program (a
    /// shell, `unshare`) with the clean environment.
    pub fn wrapped(&self, wrapper: &[&str]) -> Command {
        let (program, args) = wrapper.split_first().expect("a wrapper program");
        let mut command = self.program(program);
        command.args(args).arg(RLP).arg("--home").arg(self.home());
        command
    }

    /// `rlp --home <home>` run by `sh` once `setup` (a limit, a umask) succeeded.
    pub fn shell(&self, setup: &str) -> Command {
        self.wrapped(&["sh", "-c", &format!("{setup} && exec \"$@\""), "sh"])
    }

    /// A command line as a user types it, run by `sh -c` in the test folder:
    /// `rlp` first on `PATH`, the default home as `RUNLOOP_HOME`, `HOME` the
    /// test folder `user/`, standard input empty; stopped by the hang guard.
    pub fn typed(&self, line: &str) -> assert_cmd::Command {
        let rlp_dir = Path::new(RLP).parent().expect("the folder of rlp");
        let path = std::env::join_paths(
            std::iter::once(rlp_dir.to_path_buf())
                .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
        )
        .unwrap();
        let user = self.join("user");
        std::fs::create_dir_all(&user).unwrap();
        let mut command = self.program("sh");
        command.args(["-c", line]).env("PATH", path).env("RUNLOOP_HOME", self.home()).env("HOME", user);
        let mut command = assert_cmd::Command::from_std(command);
        command.write_stdin("").timeout(HANG_GUARD);
        command
    }

    /// `rlp --home <home>` with assertions, stopped by the hang guard.
    pub fn rlp(&self) -> assert_cmd::Command {
        self.rlp_in(HOME)
    }

    /// `rlp --home <testdir>/<home>` as [`TestDir::rlp`].
    pub fn rlp_in(&self, home: &str) -> assert_cmd::Command {
        let mut command = assert_cmd::Command::from_std(self.command_in(home));
        command.timeout(HANG_GUARD);
        command
    }

    /// Runs `rlp --home <home> <args>` with an empty stdin.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command().args(args).stdin(Stdio::null()).output().unwrap()
    }

    /// Runs `rlp --home <home> <args>`, asserting its exit code.
    pub fn expect_output(&self, code: i32, args: &[&str]) -> Output {
        let out = self.run(args);
        assert_eq!(out.status.code(), Some(code), "rlp {args:?}\n{}", output::text(&out));
        out
    }

    /// [`TestDir::expect_output`], returning stdout and stderr as text.
    pub fn expect(&self, code: i32, args: &[&str]) -> (String, String) {
        let out = self.expect_output(code, args);
        (output::stdout(&out), output::stderr(&out))
    }

    /// `relative` inside the test folder as an executable shell script running
    /// `body`; returns its absolute path.
    pub fn script(&self, relative: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.join(relative);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// Where bundle `name` lives: `agents/<name>`.
    pub fn bundle_path(&self, name: &str) -> PathBuf {
        self.join("agents").join(name)
    }

    /// Writes (or rewrites) bundle `agents/<name>` as [`bundle::write`] does.
    pub fn bundle(&self, name: &str, tools: Value, caps: &str) -> PathBuf {
        bundle::write(&self.join("agents"), name, tools, caps)
    }

    /// Writes (or rewrites) bundle `agents/<name>` with the whole tools.json
    /// `document`, as [`bundle::write_document`] does.
    pub fn bundle_document(&self, name: &str, document: &Value, caps: &str) -> PathBuf {
        bundle::write_document(&self.join("agents"), name, document, caps)
    }

    /// `rlp tools call <bundle> <tool> --args <args>`.
    pub fn call(&self, bundle: &Path, tool: &str, args: Value) -> assert_cmd::Command {
        let mut command = self.rlp();
        command.args(["tools", "call"]).arg(bundle).arg(tool).arg("--args").arg(args.to_string());
        command
    }

    /// Writes the operator override of agent `agent` in the default home;
    /// returns its path.
    pub fn write_override(&self, agent: &str, text: &str) -> PathBuf {
        let path = self.home().join("caps/overrides").join(format!("{agent}.toml"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Writes the default home's config.toml; returns its path.
    pub fn write_config(&self, text: &str) -> PathBuf {
        std::fs::create_dir_all(self.home()).unwrap();
        let path = self.home().join("config.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Every event of the default home's ledger, in order.
    pub fn events(&self) -> Vec<rlp::event::Event> {
        ledger::events(&self.ledger_path())
    }

    /// Every frame of the default home's ledger, in order, with its time,
    /// kind and payload.
    pub fn frames(&self) -> Vec<ledger::Frame> {
        self.events().iter().map(ledger::Frame::of).collect()
    }

    /// The payloads of the frames of `kind` in the default home's ledger.
    pub fn payloads(&self, kind: &str) -> Vec<Value> {
        self.frames().into_iter().filter(|f| f.kind == kind).map(|f| f.payload).collect()
    }

    /// `rlp lint <args…> --format json` (the bundles among `args`): its exit
    /// code and findings.
    pub fn lint_json<S: AsRef<OsStr>>(&self, args: impl IntoIterator<Item = S>) -> (i32, Vec<Value>) {
        let out = self.rlp().arg("lint").args(args).args(["--format", "json"]).output().unwrap();
        let findings = serde_json::from_value(output::stdout_json(&out)).unwrap();
        (output::code(&out), findings)
    }
}
