//! Standard output and input at their limits: every command that prints
//! stops quietly when its reader has gone away and says so when the disk is
//! full, never with a panic; every file or stream rlp reads is bounded,
//! whatever size its metadata reports.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::support::files::entries;
use crate::support::output::{stderr, stdout_json};
use crate::support::process::closed_pipe;
use crate::support::registry::Registry;
use crate::support::{TestDir, bundle};

const FULL_DISK: &str = "error: cannot write to standard output: No space left on device\n  help: free some disk space, or redirect standard output elsewhere\n";

/// A runtime home with a signed, trusted and installed bundle, a few
/// recorded traces and one of them exported, in a temporary folder that is
/// also the working directory of every command.
struct Fixture {
    td: TestDir,
    trace_id: String,
    /// The registry `bundle push` and `bundle pull` use.
    registry: Option<Registry>,
}

impl Fixture {
    /// The test folder alone: an empty home.
    fn empty() -> Fixture {
        Fixture { td: TestDir::new(), trace_id: String::new(), registry: None }
    }

    fn new() -> Fixture {
        let fx = Fixture::empty();
        let tool = "id=demo.echo;desc=Echoes its blob;exec=/bin/cat";
        fx.ok(&["agent", "scaffold", "demo", "--non-interactive", "--tool", tool]);
        fx.ok(&["agent", "scaffold", "scratch", "--non-interactive", "--tool", tool]);
        fx.ok(&["keygen", "--out", "keys", "--name", "release"]);
        fx.ok(&["sign", "agents/demo", "--key", "keys/release.key"]);
        fx.ok(&["trust", "add", "keys/release.pub", "--name", "release", "--allow-exec"]);
        fx.ok(&["bundle", "pack", "agents/demo", "-o", "demo.bundle.tar.gz"]);
        for n in 0..5 {
            fx.ok(&["tools", "call", "agents/demo", "demo.echo", "--args", &format!("{{\"n\": {n}}}")]);
        }
        // A bundle with a warning (an unknown key), so every lint format prints something.
        let tool = serde_json::json!([{"id": "w.get", "description": "Gets", "transport": {"kind": "exec",
            "command": "/bin/cat"}, "input_schema": {"type": "object"}, "result_schema": {"type": "object"},
            "requires_confirmation": false, "colour": "blue"}]);
        bundle::write(&fx.td.join("warned"), "w", tool, "[capabilities]\nexec = true\n");
        let list = fx.ok(&["trace", "list", "--format", "json"]);
        let traces: serde_json::Value = stdout_json(&list);
        let trace_id = traces[0]["trace_id"].as_str().unwrap().to_string();
        fx.ok(&["trace", "export", &trace_id, "-o", "golden.jsonl"]);
        // The home's checkpoint key made, and the traces covered (for `trace prove`).
        fx.ok(&["trace", "checkpoint"]);
        std::fs::write(fx.td.join("calls.jsonl"), "{\"tool\": \"demo.echo\"}\n".repeat(3)).unwrap();
        std::fs::write(fx.td.join("value.txt"), "io-value\n").unwrap();
        std::fs::write(fx.td.home().join("config.toml"), "[secrets]\nproviders = [\"env\", \"file\"]\n").unwrap();
        let answer = r#"{"tools": [{"id": "scratch.listed", "description": "Lists", "transport": {"kind": "exec", "command": "/bin/cat"}, "input_schema": {"type": "object"}, "result_schema": {"type": "object"}, "requires_confirmation": false}]}"#;
        fx.td.script("schema_tool", &format!("cat <<'EOF'\n{answer}\nEOF"));
        Fixture { trace_id, registry: Some(Registry::start()), ..fx }
    }

    /// `rlp` in the fixture's folder, its home given by the environment (an
    /// invocation may name another with `--home`).
    fn rlp(&self) -> Command {
        let mut command = self.td.command_without_home();
        command.env("RUNLOOP_HOME", self.td.home());
        command
    }

    /// Runs `args`, which must succeed.
    fn ok(&self, args: &[&str]) -> Output {
        let output = self.rlp().args(args).stdin(Stdio::null()).output().unwrap();
        assert!(output.status.success(), "rlp {args:?}: {}", stderr(&output));
        output
    }

    /// A valid invocation of every command that prints to stdout, keyed by
    /// its command path; `run` makes names unique, so each set can run once
    /// more in the same home (a key, an anchor, a tool, a bundle of its own).
    fn invocations(&self, run: &str) -> Vec<(&'static str, Vec<String>)> {
        let list = [
            ("rlp", "--help"),
            ("rlp", "--version"),
            ("rlp", "trace show --help"),
            ("rlp", "help bundle"),
            ("agent scaffold", "agent scaffold new_RUN --non-interactive"),
            ("agent install", "agent install demo.bundle.tar.gz --force"),
            ("agent list", "agent list"),
            ("agent list", "agent list --format json"),
            ("tools add", "tools add agents/scratch --id scratch.RUN --description Added --exec /bin/cat --grant"),
            ("tools list", "tools list agents/demo"),
            ("tools list", "tools list agents/demo --format json"),
            ("tools list", "tools list agents/demo --format mcp --expose core"),
            ("tools search", "tools search agents/demo echo"),
            ("tools search", "tools search agents/demo echo --format json"),
            ("tools import", "tools import agents/scratch --exec SCHEMA_TOOL --grant"),
            ("tools call", "tools call agents/demo demo.echo --args {\"n\":9}"),
            ("tools call", "tools call agents/demo demo.echo --format json"),
            ("tools call", "tools call agents/demo --batch calls.jsonl --jobs 2"),
            ("lint", "lint agents warned"),
            ("lint", "lint agents warned --format json"),
            ("lint", "lint agents warned --format sarif"),
            ("lint", "lint agents warned --format github"),
            ("digest", "digest agents/demo"),
            ("digest", "digest agents/demo --check --format json"),
            ("keygen", "keygen --out keys --name RUN"),
            ("sign", "sign agents/demo --key keys/release.key"),
            ("bundle pack", "bundle pack agents/demo -o -"),
            ("bundle pack", "bundle pack agents/demo -o RUN.bundle.tar.gz"),
            ("bundle pack", "bundle pack agents/demo --check -o RUN.bundle.tar.gz"),
            ("bundle verify", "bundle verify demo.bundle.tar.gz"),
            ("bundle verify", "bundle verify demo.bundle.tar.gz --canonical"),
            ("bundle verify", "bundle verify agents/demo --format json"),
            ("bundle push", "bundle push demo.bundle.tar.gz oci://REGISTRY/io/demo:RUN --plain-http"),
            ("bundle pull", "bundle pull oci://REGISTRY/io/demo:RUN --plain-http -o RUN-pulled.tar.gz"),
            ("bundle export-mcpb", "bundle export-mcpb agents/demo -o RUN.mcpb --format json"),
            ("trust add", "trust add keys/RUN.pub --name RUN"),
            ("trust allow", "trust allow RUN --exec"),
            ("trust revoke", "trust revoke RUN"),
            ("trust list", "trust list"),
            ("trust list", "trust list --format json"),
            ("secrets set", "secrets set runloop/io/RUN --from-file value.txt"),
            ("secrets list", "secrets list"),
            ("secrets list", "secrets list --format json"),
            ("secrets rm", "secrets rm runloop/io/RUN"),
            ("trace list", "trace list"),
            ("trace list", "trace list --format json"),
            ("trace show", "trace show TRACE"),
            ("trace show", "trace show golden.jsonl --format json"),
            ("trace export", "trace export TRACE"),
            ("trace export", "trace export TRACE --redact /args/n"),
            ("trace import", "trace import golden.jsonl --home home-RUN"),
            ("trace verify", "trace verify"),
            ("trace checkpoint", "trace checkpoint"),
            ("trace prove", "trace prove TRACE --frame 1"),
            ("trace diff", "trace diff golden.jsonl TRACE"),
            ("trace diff", "trace diff TRACE golden.jsonl --format json"),
            ("replay", "replay golden.jsonl --bundle agents/demo"),
            ("replay", "replay TRACE --bundle agents/demo --format json"),
            ("serve", "serve agents/demo --help"),
            ("man", "man tools call"),
            ("completions", "completions bash"),
            ("completions", "completions zsh"),
        ];
        let schema_tool = self.td.join("schema_tool").display().to_string();
        let registry = self.registry.as_ref().map_or("127.0.0.1:9", |r| r.host.as_str());
        let fill = |word: &str| {
            word.replace("RUN", run)
                .replace("TRACE", &self.trace_id)
                .replace("SCHEMA_TOOL", &schema_tool)
                .replace("REGISTRY", registry)
        };
        list.into_iter().map(|(command, line)| (command, line.split_whitespace().map(fill).collect())).collect()
    }

    /// Runs `args` with `stdout`; stdin is empty.
    fn run_with(&self, args: &[String], stdout: Stdio) -> Output {
        let child = self.rlp().args(args).stdin(Stdio::null()).stdout(stdout).stderr(Stdio::piped()).spawn();
        child.unwrap().wait_with_output().unwrap()
    }

    /// No temporary file of rlp's is left anywhere in the fixture.
    fn assert_no_temporary_files(&self) {
        let found: Vec<_> = entries(self.td.path())
            .into_iter()
            .filter(|path| path.file_name().is_some_and(|n| n.to_string_lossy().starts_with(".rlp-")))
            .collect();
        assert!(found.is_empty(), "temporary files left: {found:?}");
    }
}

fn dev_full() -> Stdio {
    Stdio::from(File::options().write(true).open("/dev/full").unwrap())
}

#[test]
fn every_command_is_covered() {
    let fx = Fixture::empty();
    let covered: Vec<&str> = fx.invocations("x").iter().map(|(command, _)| *command).collect();
    for leaf in crate::support::cli::leaves() {
        assert!(covered.contains(&leaf.as_str()), "`rlp {leaf}` has no invocation in tests/it/io.rs");
    }
}

/// Runs every invocation (names made unique by `run`) with its stdout from
/// `stdout`, expecting exit code `code` and exactly `message` on stderr;
/// no temporary file may be left behind.
fn every_command_with(run: &str, stdout: fn() -> Stdio, code: i32, message: &str) {
    let fx = Fixture::new();
    for (_, args) in fx.invocations(run) {
        let output = fx.run_with(&args, stdout());
        let stderr = stderr(&output);
        assert_eq!(output.status.code(), Some(code), "rlp {args:?} exited {:?}: {stderr}", output.status);
        assert_eq!(stderr, message, "rlp {args:?}");
    }
    fx.assert_no_temporary_files();
}

#[test]
fn a_closed_stdout_stops_every_command_quietly() {
    every_command_with("closed", closed_pipe, 0, "");
}

#[test]
fn a_full_stdout_is_an_error_of_every_command() {
    every_command_with("full", dev_full, 2, FULL_DISK);
}

#[test]
fn a_closed_stdout_keeps_the_exit_code_of_what_was_found() {
    let fx = Fixture::new();
    std::fs::write(fx.td.join("agents/scratch/tools.json"), "{\"version\": 1, \"tools\": [").unwrap();
    let output = fx.run_with(&["lint".into(), "agents".into()], closed_pipe());
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(stderr(&output), "");
}

#[test]
fn a_closed_stderr_is_no_panic_either() {
    let fx = Fixture::empty();
    // An empty home: `trace list` says so on stderr.
    let output =
        fx.rlp().args(["trace", "list"]).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(closed_pipe()).output();
    let output = output.unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(output.stdout, b"");
}

// ------------------------------------------------------------ bounded reads

/// Runs `args` with at most 1 GiB of address space (an unbounded read of
/// an endless source fails instead of filling the machine), with `stdin`.
fn bounded(fx: &Fixture, args: &[&str], stdin: Stdio) -> Output {
    fx.td.shell("ulimit -v 1048576").args(args).stdin(stdin).output().unwrap()
}

const READS_AT_MOST: &str =
    "  help: rlp reads at most {} of it: pass a smaller file, or check that the path names the file you meant\n";

fn assert_refused(output: &Output, message: &str) {
    let stderr = stderr(output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr, message);
}

fn too_large(what: &str, limit: &str) -> String {
    format!("error: {what} is larger than {limit}\n{}", READS_AT_MOST.replace("{}", limit))
}

#[test]
fn endless_inputs_are_refused_at_their_limit() {
    let fx = Fixture::new();
    let call = ["tools", "call", "agents/demo", "demo.echo", "--args"];
    let output = bounded(&fx, &[&call[..], &["@/dev/zero"]].concat(), Stdio::null());
    assert_refused(&output, &too_large("--args: /dev/zero", "16 MiB"));
    let zero = File::open("/dev/zero").unwrap();
    let output = bounded(&fx, &[&call[..], &["@-"]].concat(), Stdio::from(zero));
    assert_refused(&output, &too_large("--args: standard input", "16 MiB"));
    let batch = ["tools", "call", "agents/demo", "--batch"];
    let output = bounded(&fx, &[&batch[..], &["/dev/zero"]].concat(), Stdio::null());
    assert_refused(&output, &too_large("--batch: /dev/zero", "64 MiB"));
    let zero = File::open("/dev/zero").unwrap();
    let output = bounded(&fx, &[&batch[..], &["-"]].concat(), Stdio::from(zero));
    assert_refused(&output, &too_large("--batch: standard input", "64 MiB"));
    let add = ["tools", "add", "agents/scratch", "--id", "scratch.big", "--description", "Big", "--exec", "/bin/cat"];
    let output = bounded(&fx, &[&add[..], &["--input-schema", "@/dev/zero"]].concat(), Stdio::null());
    assert_refused(&output, "error: --input-schema: /dev/zero is larger than 16 MiB: pass a smaller schema file\n");
    let output = bounded(&fx, &["trust", "add", "/dev/zero", "--name", "zero"], Stdio::null());
    assert_refused(&output, &too_large("/dev/zero", "4 KiB"));
    let output = bounded(&fx, &["bundle", "verify", "agents/demo", "--key", "/dev/zero"], Stdio::null());
    assert_refused(&output, &too_large("/dev/zero", "4 KiB"));
    let output = bounded(&fx, &["trace", "import", "/dev/zero"], Stdio::null());
    assert_refused(
        &output,
        "error: /dev/zero: 1 problem; nothing was imported:\n  line 1: the line is larger than 64 MiB; this is not a \
         trace export\n  help: fix the file or export the trace again; the ledger is unchanged\n",
    );
}

/// A FIFO at `path`, and a thread writing `bytes` into it (endlessly when
/// `endless`) until its reader goes away.
fn fifo_with_writer(path: &Path, bytes: &'static [u8], endless: bool) -> std::thread::JoinHandle<()> {
    let made = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success());
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let Ok(mut fifo) = File::options().write(true).open(&path) else { return };
        while fifo.write_all(bytes).is_ok() && endless {}
    })
}

#[test]
fn a_fifo_is_read_to_its_limit_and_no_further() {
    let fx = Fixture::new();
    let fifo = fx.td.join("endless");
    let writer = fifo_with_writer(&fifo, &[b' '; 1 << 16], true);
    let spec = format!("@{}", fifo.display());
    let output = bounded(&fx, &["tools", "call", "agents/demo", "demo.echo", "--args", &spec], Stdio::null());
    assert_refused(&output, &too_large(&format!("--args: {}", fifo.display()), "16 MiB"));
    writer.join().unwrap();
}

#[test]
fn a_fifo_with_a_small_document_works_like_process_substitution() {
    let fx = Fixture::new();
    let fifo = fx.td.join("args");
    let writer = fifo_with_writer(&fifo, b"{\"n\": 42}", false);
    let spec = format!("@{}", fifo.display());
    let output = bounded(&fx, &["tools", "call", "agents/demo", "demo.echo", "--args", &spec], Stdio::null());
    assert!(output.status.success(), "{}", stderr(&output));
    let blob: serde_json::Value = stdout_json(&output);
    assert_eq!(blob["tool"]["arguments"], serde_json::json!({"n": 42}));
    writer.join().unwrap();
}

#[test]
fn json_reports_name_paths_that_are_not_utf8() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let td = TestDir::new();
    // A runtime home and a bundle root whose names are not UTF-8.
    let odd = td.join(OsStr::from_bytes(b"odd-\xff"));
    let home = odd.join("home");
    let run = |args: &[&OsStr]| {
        let out = td.command_without_home().arg("--home").arg(&home).args(args).stdin(Stdio::null()).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        let report: serde_json::Value = stdout_json(&out);
        report
    };
    let os = |s: &'static str| OsStr::new(s);
    let keys = odd.join("keys");
    let report = run(&[os("keygen"), os("--out"), keys.as_os_str(), os("--name"), os("k"), os("--format"), os("json")]);
    assert_eq!(report["public_file"], format!("{}/odd-\u{fffd}/keys/k.pub", td.path().display()));
    let public = keys.join("k.pub");
    let report = run(&[os("trust"), os("add"), public.as_os_str(), os("--name"), os("k"), os("--format"), os("json")]);
    assert_eq!(report["policy"], format!("{}/odd-\u{fffd}/home/trust-policy.toml", td.path().display()));
    let report = run(&[os("trust"), os("revoke"), os("k"), os("--format"), os("json")]);
    assert_eq!(report["newly_revoked"], true);
    let report = run(&[os("trust"), os("list"), os("--format"), os("json")]);
    assert_eq!(report["file"], format!("{}/odd-\u{fffd}/home/trust-policy.toml", td.path().display()));
    let agents = odd.join("agents");
    let report = run(&[
        os("agent"),
        os("scaffold"),
        os("demo"),
        os("--non-interactive"),
        os("--root"),
        agents.as_os_str(),
        os("--format"),
        os("json"),
    ]);
    let bundle = format!("{}/odd-\u{fffd}/agents/demo", td.path().display());
    assert_eq!(report["bundle"], bundle);
    let demo = agents.join("demo");
    let report = run(&[
        os("tools"),
        os("add"),
        demo.as_os_str(),
        os("--id"),
        os("demo.run"),
        os("--description"),
        os("Runs"),
        os("--exec"),
        os("/bin/true"),
        os("--grant"),
        os("--format"),
        os("json"),
    ]);
    assert_eq!(report["tools_file"], format!("{bundle}/tools.json"));
    assert_eq!(report["grants"]["policy"], format!("{bundle}/policy.caps"));
    // A call (whatever its outcome) starts the ledger that `trace verify` reports on.
    let mut call = td.command_without_home();
    call.arg("--home").arg(&home).args([os("tools"), os("call"), demo.as_os_str(), os("demo.run")]);
    call.stdin(Stdio::null()).output().unwrap();
    let report = run(&[os("trace"), os("verify"), os("--format"), os("json")]);
    assert_eq!(report["ledger"], format!("{}/odd-\u{fffd}/home/pog/events.sqlite", td.path().display()));
}
