//! The first hour of a new user, who has the README and `--help`: every
//! `rlp …` line of README.md and of the "Examples:" section of every help
//! text runs as printed, in that order, in one fresh folder with a fresh
//! `RUNLOOP_HOME`; the example tool of `rlp agent scaffold --example` goes
//! from scaffold to a replayed trace; arguments that fail a tool's input
//! schema get an error that shows how to fix them.
//!
//! The README's commands are its `sh` code blocks. An example exits 0 unless its own text says otherwise with a comment
//! `# exit N…`. The example hosts (`api.<name>.example`) are a loopback HTTP
//! server here. A line is an `rlp` line when a command of it (first, or after
//! `|`, `&&` or `;`, after any `NAME=value` assignments) is `rlp`: examples
//! added later are picked up, and run, on their own.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::support::TestDir;
use crate::support::files::repo;
use crate::support::http::{Server, reply};
use crate::support::output::{code, stderr, stdout, text};
use crate::support::pty::Terminal;
use crate::support::rlp_snapshot;

/// README.md, as a new user reads it.
const README: &str = include_str!("../../README.md");

/// The one list of examples that are not run, each with its reason; each
/// entry is the start of the example's line.
const SKIPPED: &[(&str, &str)] = &[
    ("rlp bundle push mailer-0.1.0.bundle.tar.gz oci://", "needs a registry (tests/it/oci.rs starts one and pushes)"),
    ("rlp bundle pull oci://", "needs a registry (tests/it/oci.rs starts one and pulls)"),
    ("rlp agent install oci://", "needs a registry (tests/it/oci.rs starts one and installs from it)"),
    ("rlp bundle pack agents/mailer -o - | ssh host", "`ssh host` stands for the user's own remote"),
    ("rlp serve agents/demo --http", "an HTTP server runs until it is stopped (tests/it/serve.rs drives it)"),
    ("pass show mail/smtp | rlp secrets set", "`pass` stands for the user's password manager"),
    (
        "rlp tools import agents/demo --mcp time",
        "the time server stands for one the user installed (tests/it/bridge.rs imports installed ones)",
    ),
    ("rlp tools import agents/demo --mcp tracker --url https://", "an HTTPS MCP service of the user's own"),
    (
        "rlp lint agents/mailer --against ../last-release",
        "the last release stands for one the user checked out (tests/it/lint.rs compares with one)",
    ),
    (
        "rlp tools import agents/demo --mcp-config ~/.config/Claude",
        "the configuration of the user's desktop host (tests/it/bridge.rs imports one)",
    ),
    (
        "rlp secrets set runloop/mail/smtp_api_key   # on a terminal",
        "it asks on a terminal (tests/it/secret_providers.rs types the value on one)",
    ),
];

/// One example: where it was printed, and the command line.
struct Example {
    /// `README.md`, or `rlp <command> --help`.
    source: String,
    /// The command line, continuation lines joined.
    line: String,
}

/// The `rlp` lines of README.md's `sh` code blocks (the commands; `text`
/// blocks show their output), in order.
fn readme_examples() -> Vec<Example> {
    let mut fenced = String::new();
    let mut inside = false;
    for line in README.lines() {
        if line.trim_start().starts_with("```") {
            inside = !inside && line.trim() == "```sh";
        } else if inside {
            fenced.push_str(line);
            fenced.push('\n');
        }
    }
    rlp_lines(&fenced).into_iter().map(|line| Example { source: "README.md".into(), line }).collect()
}

/// The `rlp` lines of the "Examples:" section of every help text, as the
/// built binary prints them, command by command in the order of the tree.
fn help_examples(td: &TestDir) -> Vec<Example> {
    let mut examples = Vec::new();
    for (path, _) in crate::support::cli::commands() {
        let out = td.rlp().args(&path).arg("--help").output().unwrap();
        assert_eq!(code(&out), 0, "rlp {path:?} --help: {}", text(&out));
        let name = if path.is_empty() { "help".to_string() } else { format!("help_{}", path.join("_")) };
        rlp_snapshot!(name, td, &out);
        let help = stdout(&out);
        let section: String = help
            .lines()
            .skip_while(|line| *line != "Examples:")
            .skip(1)
            .take_while(|line| !line.trim().is_empty())
            .map(|line| format!("{line}\n"))
            .collect();
        let source = format!("rlp {} --help", path.join(" "));
        examples.extend(rlp_lines(&section).into_iter().map(|line| Example { source: source.clone(), line }));
    }
    examples
}

/// The lines of `text` that run `rlp`, with `\` continuations joined.
fn rlp_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let line = line.trim();
        match line.strip_suffix('\\') {
            Some(start) => current.push_str(start),
            None => {
                current.push_str(line);
                lines.push(std::mem::take(&mut current));
            }
        }
    }
    lines.into_iter().filter(|line| runs_rlp(line)).collect()
}

/// Whether a command of `line` is `rlp`.
fn runs_rlp(line: &str) -> bool {
    line.split(['|', ';'])
        .flat_map(|part| part.split("&&"))
        .any(|command| command.split_whitespace().find(|word| !is_assignment(word)) == Some("rlp"))
}

/// `NAME=value`, a variable set for one command.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    })
}

/// The exit code an example's comment says to expect (`# exit N…`), else 0.
fn expected_exit(line: &str) -> i32 {
    line.split_once("# exit ")
        .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|digits| digits.parse().ok())
        .unwrap_or(0)
}

/// `line` with every example host `api.<name>.example` served by the
/// loopback server on `port` (plain HTTP).
fn with_loopback(line: &str, port: u16) -> String {
    let mut out = String::new();
    for (i, word) in line.split("api.").enumerate() {
        if i == 0 {
            out.push_str(word);
            continue;
        }
        let name_end = word.find(|c: char| !c.is_ascii_lowercase()).unwrap_or(word.len());
        match word[name_end..].strip_prefix(".example") {
            Some(rest) if name_end > 0 => {
                if out.ends_with("https://") {
                    out.truncate(out.len() - "https://".len());
                    out.push_str("http://");
                }
                out.push_str(&format!("127.0.0.1:{port}{rest}"));
            }
            _ => {
                out.push_str("api.");
                out.push_str(word);
            }
        }
    }
    out
}

#[test]
fn every_readme_and_help_example_runs_as_printed() {
    let td = TestDir::new();
    let server = Server::start(|_| reply(200, r#"{"queued": true}"#));
    let mut examples = readme_examples();
    let from_readme = examples.len();
    examples.extend(help_examples(&td));
    assert!(from_readme >= 10 && examples.len() >= from_readme + 40, "{} examples found", examples.len());
    let mut skipped = Vec::new();
    for example in &examples {
        if let Some((start, _why)) = SKIPPED.iter().find(|(start, _)| example.line.starts_with(start)) {
            skipped.push(*start);
            continue;
        }
        let line = with_loopback(&example.line, server.port);
        let out = td.typed(&line).output().unwrap();
        assert_eq!(
            code(&out),
            expected_exit(&example.line),
            "{}: `{}` (run as `{line}`)\n{}",
            example.source,
            example.line,
            text(&out)
        );
    }
    for (start, _) in SKIPPED {
        assert!(skipped.contains(start), "the skip list names `{start}`, which no example starts with");
    }
}

#[test]
fn the_example_tool_goes_from_scaffold_to_a_replayed_trace() {
    let td = TestDir::new();
    td.expect(0, &["agent", "scaffold", "demo", "--example", "--non-interactive"]);
    let script = std::fs::read_to_string(td.join("agents/demo/bin/greet")).unwrap();
    assert!(script.starts_with("#!/bin/sh\n"), "{script}");
    let (out, _) = td.expect(0, &["lint", "agents/demo", "--deny-warnings"]);
    assert_eq!(out, "1 bundle checked: no problems\n");
    let (out, _) = td.expect(0, &["tools", "call", "agents/demo", "demo.greet", "--args", r#"{"name": "Ada"}"#]);
    assert_eq!(out, "{\n  \"greeting\": \"Hello, Ada!\"\n}\n");
    rlp_snapshot!(&td, td.expect_output(0, &["trace", "show", "last"]));
    rlp_snapshot!(&td, td.expect_output(0, &["replay", "last", "--bundle", "agents/demo"]));
}

/// `rlp agent scaffold demo --example` typed where there is no terminal (a
/// script, CI) takes the defaults instead of refusing, and says so.
#[test]
fn the_example_needs_no_terminal() {
    let td = TestDir::new();
    let (out, err) = td.expect(0, &["agent", "scaffold", "demo", "--example"]);
    assert_eq!(err, "note: no terminal to ask on: the example bundle takes the defaults (--non-interactive)\n");
    assert!(out.starts_with("Created agents/demo/"), "{out}");
    let (out, _) = td.expect(0, &["tools", "call", "agents/demo", "demo.greet", "--args", r#"{"name": "Ada"}"#]);
    assert_eq!(out, "{\n  \"greeting\": \"Hello, Ada!\"\n}\n");
    // Without --example there are answers no default stands for: still refused.
    rlp_snapshot!(&td, td.expect_output(2, &["agent", "scaffold", "other"]));
}

/// The wizard on a pseudo-terminal takes `--example` too: the example tool
/// is there before it asks, so it offers no other tool by default.
#[test]
fn the_wizard_writes_the_example_tool_too() {
    let td = TestDir::new();
    let mut command = td.command();
    command.args(["agent", "scaffold", "demo", "--example", "--color", "never"]).env("TERM", "dumb");
    let mut p = Terminal::spawn(command, Duration::from_secs(30));
    for prompt in ["Description", "Model id", "Directories it may read", "Hosts it may reach"] {
        p.answer(prompt, "");
    }
    p.answer("Knowledge-base domains it may read", "");
    p.answer("Knowledge-base domains it may write", "");
    p.answer("May it run exec tools", "");
    p.answer("Add a tool?", "");
    p.answer("Create agents/demo?", "");
    p.expect("Created agents/demo/ (1 tool)");
    p.expect("Lint: no problems");
    p.expect_end();
    let (out, _) = td.expect(0, &["tools", "call", "agents/demo", "demo.greet", "--args", r#"{"name": "Grace"}"#]);
    assert_eq!(out, "{\n  \"greeting\": \"Hello, Grace!\"\n}\n");
}

#[test]
fn invalid_arguments_show_the_schema_and_a_corrected_args() {
    let td = TestDir::new();
    td.expect(0, &["agent", "scaffold", "demo", "--example", "--non-interactive"]);
    let long = "x".repeat(300);
    for (name, args) in [
        ("invalid_args_missing_required", json!({})),
        ("invalid_args_wrong_type", json!({"name": 7})),
        ("invalid_args_long_value", json!({"name": long})),
    ] {
        let out = td.rlp().args(["tools", "call", "agents/demo", "demo.greet", "--args", &args.to_string()]).output();
        let out = out.unwrap();
        assert_eq!(code(&out), 2, "{}", text(&out));
        let shown = stderr(&out).replace(&td.path().display().to_string(), "<sandbox>");
        insta::assert_snapshot!(name, shown);
    }
}

#[test]
fn the_skeleton_keeps_valid_values_and_fixes_the_rest() {
    let td = TestDir::new();
    let tool = json!({
        "id": "mail.send", "description": "Sends a draft",
        "transport": {"kind": "exec", "command": "/bin/true"},
        "input_schema": {
            "type": "object",
            "required": ["to", "priority", "draft"],
            "properties": {
                "to": {"type": "string"},
                "priority": {"enum": ["low", "high"]},
                "draft": {"type": "object", "required": ["subject", "lines"],
                          "properties": {"subject": {"type": "string"}, "lines": {"type": "integer", "minimum": 1}}}
            }
        },
        "result_schema": {}
    });
    let bundle = td.bundle("mailer", json!([tool]), "[capabilities]\nexec = true\n");
    let args = json!({"to": "a@b.c", "priority": "urgent", "draft": {"subject": "Hi"}});
    let out = td.call(&bundle, "mail.send", args).output().unwrap();
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(
        stderr(&out).ends_with(
            "        fix --args, e.g. --args '{\"to\":\"a@b.c\",\"priority\":\"low\",\"draft\":{\"subject\":\"Hi\",\"lines\":1}}'\n"
        ),
        "{}",
        stderr(&out)
    );
}

/// The example tool quickstart.sh imports, built by `cargo test` with the
/// other examples (and here when only this test binary was built).
fn greet_tool() -> PathBuf {
    let deps = std::env::current_exe().unwrap().parent().unwrap().to_path_buf();
    let tool = deps.parent().unwrap().join("examples/greet_tool");
    if !tool.is_file() {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let built = Command::new(cargo)
            .args(["build", "--locked", "--example", "greet_tool"])
            .current_dir(repo("."))
            .status()
            .unwrap();
        assert!(built.success(), "cargo build --example greet_tool failed");
    }
    tool
}

/// The README's first command runs every step end to end (scaffold, import,
/// lint, sign, pack, verify, trust, install, call, trace, replay), and what
/// it prints into a log holds no escape code, NO_COLOR or not.
#[test]
fn the_quickstart_runs_end_to_end_and_logs_plain_text() {
    let td = TestDir::new();
    let out = td
        .program(repo("quickstart.sh"))
        .env("RLP_QUICKSTART_RLP", env!("CARGO_BIN_EXE_rlp"))
        .env("RLP_QUICKSTART_TOOL", greet_tool())
        .env("TMPDIR", td.path())
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    let log = stdout(&out);
    assert!(log.ends_with("\nquickstart: every step passed\n"), "{log}");
    for step in ["$ rlp agent scaffold demo", "$ rlp bundle verify demo.bundle.tar.gz", "$ rlp replay "] {
        assert!(log.contains(step), "{step:?} missing from:\n{log}");
    }
    assert!(!log.contains('\u{1b}') && !stderr(&out).contains('\u{1b}'), "escape codes in the log:\n{}", text(&out));
}

/// The `Next:` steps `rlp agent scaffold --example` prints run as printed,
/// one after another, in the folder it was typed in.
#[test]
fn the_next_steps_of_a_scaffold_run_as_printed() {
    let td = TestDir::new();
    let out = td.typed("rlp agent scaffold demo --example --non-interactive").output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    let printed = stdout(&out);
    let steps: Vec<&str> = printed
        .lines()
        .skip_while(|line| *line != "Next:")
        .skip(1)
        .map(|line| line.split("   # ").next().unwrap().trim())
        .filter(|line| !line.is_empty())
        .collect();
    assert!(steps.len() >= 6 && steps.iter().all(|s| s.starts_with("rlp ")), "{printed}");
    for step in steps {
        let out = td.typed(step).output().unwrap();
        assert_eq!(code(&out), 0, "`{step}`:\n{}", text(&out));
    }
}

/// The examples of `rlp --help` alone run one after another in an empty
/// folder: each makes what the next needs.
#[test]
fn the_examples_of_rlp_help_run_in_an_empty_folder() {
    let td = TestDir::new();
    let help = stdout(&td.rlp().arg("--help").output().unwrap());
    let section: String = help
        .lines()
        .skip_while(|l| *l != "Examples:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    let lines = rlp_lines(&section);
    assert!(lines.len() >= 7, "{help}");
    for line in lines {
        let out = td.typed(&line).output().unwrap();
        assert_eq!(code(&out), expected_exit(&line), "`{line}`:\n{}", text(&out));
    }
}
