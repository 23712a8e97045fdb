//! `rlp tools call --batch` (docs/runtime.md, "Batches"): many calls in one
//! process, at most `--jobs` at once, in one trace, their results as JSON
//! Lines in input order; the whole file checked before any call runs.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::bundle::{self, with};
use crate::support::ledger::payload;
use crate::support::output::{assert_contains, stderr, stdout};
use crate::support::process::{closed_pipe, is_running};
use crate::support::pty::Terminal;

/// The tools of the bundles here: `ok` succeeds, `fail` exits 1, `post`
/// needs a network grant it does not have, `strict` wants `{"n": integer}`,
/// `touch` creates `state/ran` and asks for confirmation.
fn mixed_bundle(td: &TestDir) -> PathBuf {
    let state = td.state_dir();
    let strict = with(
        bundle::runtime_tool("strict", "ok.sh", &[]),
        json!({"input_schema": {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}}),
    );
    let touch = with(
        bundle::with_fs(bundle::runtime_tool("touch", "marker.sh", &[state.join("ran").to_str().unwrap()]), &state),
        json!({"requires_confirmation": true}),
    );
    let tools = json!([
        bundle::runtime_tool("ok", "ok.sh", &[]),
        bundle::tool("fail", bundle::exec("/bin/false", &[])),
        bundle::tool("post", bundle::http("POST", "https://api.example.com/items")),
        strict,
        touch,
    ]);
    td.bundle("mixed", tools, &bundle::caps("exec = true\n", &state))
}

/// `rlp tools call <bundle> --batch <file> <flags>` (`file` relative to the
/// test folder) with an empty stdin.
fn batch(td: &TestDir, bundle: &Path, file: &str, flags: &[&str]) -> Output {
    td.rlp().args(["tools", "call"]).arg(bundle).arg("--batch").arg(file).args(flags).output().unwrap()
}

/// Writes `lines` (each a line of the batch) to `<testdir>/<name>`; returns `name`.
fn batch_file<'a>(td: &TestDir, name: &'a str, lines: &[&str]) -> &'a str {
    std::fs::write(td.join(name), lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    name
}

/// The JSON lines of stdout.
fn results(output: &Output) -> Vec<Value> {
    stdout(output).lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

/// The `error:` and `help:` lines of stderr.
fn errors(output: &Output) -> Vec<String> {
    stderr(output).lines().filter(|l| l.starts_with("error") || l.starts_with("  help")).map(String::from).collect()
}

/// The most calls running at once in a log of `start <pid>` / `end <pid>`
/// lines (see the fixture `overlap.sh`), checking that each of `calls`
/// processes started and ended once.
fn most_at_once(log: &Path, calls: usize) -> usize {
    let text = std::fs::read_to_string(log).unwrap();
    let (mut running, mut most) = (0usize, 0usize);
    let (mut started, mut ended) = (HashSet::new(), HashSet::new());
    for line in text.lines() {
        match line.split_once(' ') {
            Some(("start", pid)) => {
                assert!(started.insert(pid.to_string()), "{pid} started twice:\n{text}");
                running += 1;
                most = most.max(running);
            }
            Some(("end", pid)) => {
                assert!(started.contains(pid) && ended.insert(pid.to_string()), "{pid} ended unstarted:\n{text}");
                running -= 1;
            }
            _ => panic!("unexpected line {line:?} in:\n{text}"),
        }
    }
    assert_eq!((started.len(), ended.len()), (calls, calls), "{text}");
    most
}

#[test]
fn results_come_in_input_order_each_with_its_invocation_all_in_one_trace() {
    let td = TestDir::new();
    let bundle = mixed_bundle(&td);
    let file = batch_file(
        &td,
        "calls.jsonl",
        &[r#"{"tool": "ok"}"#, "", r#"{"tool": "strict", "args": {"n": 1}}"#, "  ", r#"{"args": {}, "tool": "ok"}"#],
    );
    let output = batch(&td, &bundle, file, &["--jobs", "2"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(errors(&output).is_empty(), "{}", stderr(&output));
    let lines = results(&output);
    let numbers: Vec<&Value> = lines.iter().map(|l| &l["line"]).collect();
    assert_eq!(numbers, [1, 3, 5]);
    let tools: Vec<&Value> = lines.iter().map(|l| &l["tool"]).collect();
    assert_eq!(tools, ["ok", "strict", "ok"]);
    let trace = lines[0]["trace_id"].as_str().unwrap().to_string();
    let invocations: HashSet<&str> = lines.iter().map(|l| l["invocation_id"].as_str().unwrap()).collect();
    assert_eq!(invocations.len(), 3);
    for line in &lines {
        assert_eq!(line["trace_id"], trace.as_str());
        assert_eq!(line["result"], json!({"ok": true}));
        assert_eq!(line["attempts"], 1);
        let keys: Vec<&str> = line.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["line", "tool", "invocation_id", "trace_id", "attempts", "duration_ms", "usage", "result"]);
    }

    // Standard input, added to that trace.
    let output = td
        .rlp()
        .args(["tools", "call"])
        .arg(&bundle)
        .args(["--batch", "-", "--trace-id", &trace])
        .write_stdin("{\"tool\": \"ok\"}\n{\"tool\": \"ok\"}")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let lines = results(&output);
    assert_eq!(lines.iter().map(|l| &l["line"]).collect::<Vec<_>>(), [1, 2]);
    assert!(lines.iter().all(|l| l["trace_id"] == trace.as_str()));

    let shown = td.rlp().args(["trace", "show", &trace]).output().unwrap();
    assert_eq!(shown.status.code(), Some(0), "{}", stderr(&shown));
    assert_contains(&stdout(&shown), "15 frames: 5 calls (5 ok, 0 error, 0 without result)");
    let verified = td.rlp().args(["trace", "verify"]).output().unwrap();
    assert_eq!(verified.status.code(), Some(0), "{}", stdout(&verified));
    assert_contains(&stdout(&verified), "every hash, chain, head and checkpoint checks out");
}

#[test]
fn at_most_jobs_calls_run_at_once() {
    let td = TestDir::new();
    let state = td.state_dir();
    let overlap = |id: &str, log: &str, seconds: &str| {
        bundle::with_fs(bundle::runtime_tool(id, "overlap.sh", &[state.join(log).to_str().unwrap(), seconds]), &state)
    };
    let bundle = td.bundle(
        "overlapping",
        json!([overlap("slow", "slow.log", "1"), overlap("quick", "quick.log", "0.1")]),
        &bundle::caps("exec = true\n", &state),
    );
    let slow = batch_file(&td, "slow.jsonl", &[r#"{"tool": "slow"}"#; 20]);
    let output = batch(&td, &bundle, slow, &["--jobs", "8"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        results(&output).iter().map(|l| l["line"].as_u64().unwrap()).collect::<Vec<_>>(),
        (1..=20).collect::<Vec<_>>()
    );
    assert_eq!(most_at_once(&state.join("slow.log"), 20), 8);

    let quick = batch_file(&td, "quick.jsonl", &[r#"{"tool": "quick"}"#; 20]);
    let output = batch(&td, &bundle, quick, &["--jobs", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(most_at_once(&state.join("quick.log"), 20), 1);
}

#[test]
fn the_exit_code_is_the_worst_outcome_refused_then_bad_input_then_failed() {
    let td = TestDir::new();
    let bundle = mixed_bundle(&td);
    let ok = r#"{"tool": "ok"}"#;
    let failed = r#"{"tool": "fail"}"#;
    let unknown = r#"{"tool": "nope"}"#;
    let invalid = r#"{"tool": "strict", "args": {"n": "one"}}"#;
    let refused = r#"{"tool": "post"}"#;
    for (lines, code) in [
        (vec![ok, ok], 0),
        (vec![ok, failed], 1),
        (vec![failed, invalid, ok], 2),
        (vec![unknown, ok], 2),
        (vec![failed, unknown, refused, ok], 3),
    ] {
        let output = batch(&td, &bundle, batch_file(&td, "mixed.jsonl", &lines), &[]);
        assert_eq!(output.status.code(), Some(code), "{lines:?}: {}", stderr(&output));
        assert_eq!(results(&output).len(), lines.len());
    }

    let output = batch(&td, &bundle, "mixed.jsonl", &[]);
    let lines = results(&output);
    let exits: Vec<&Value> = lines.iter().map(|l| &l["error"]["exit"]).collect();
    assert_eq!(exits, [&json!(1), &json!(2), &json!(3), &Value::Null]);
    assert_eq!(
        lines[1],
        json!({
            "line": 2,
            "tool": "nope",
            "invocation_id": null,
            "trace_id": null,
            "error": {"exit": 2, "message": "bundle `mixed` has no tool `nope`", "help": "the tools are: ok, fail, post, strict, touch"},
        })
    );
    assert_eq!(lines[2]["trace_id"], lines[0]["trace_id"]);
    assert_eq!(
        lines[2]["error"]["message"],
        "tool `post` is not exposed: it needs `net:api.example.com:443` (policy.caps does not grant it)"
    );
    assert_eq!(
        errors(&output),
        [
            "error: 3 of 4 calls did not succeed (lines 1, 2, 3)",
            "  help: each call's error is in the \"error\" of its output line",
        ]
    );

    // Without a terminal, a call that needs confirmation is refused unless --yes.
    let file = batch_file(&td, "touch.jsonl", &[r#"{"tool": "touch"}"#, r#"{"tool": "ok"}"#]);
    let output = batch(&td, &bundle, file, &[]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert_eq!(
        results(&output)[0]["error"]["message"],
        "tool `touch` requires confirmation and the call was not approved: no terminal to ask on, and no --yes"
    );
    assert!(!td.state_dir().join("ran").exists());
    let output = batch(&td, &bundle, file, &["--yes"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(td.state_dir().join("ran").exists());
}

#[test]
fn a_bad_line_stops_the_batch_before_any_call() {
    let td = TestDir::new();
    let bundle = mixed_bundle(&td);
    let touch = r#"{"tool": "touch"}"#;
    let help = "  help: write one call a line, {\"tool\": \"<id>\", \"args\": {…}} (\"args\" may be left out); no call was made";
    for (bad, error) in [
        ("{\"tool\": \"ok\"", "bad.jsonl:3:13: EOF while parsing an object"),
        ("[\"ok\", {}]", "bad.jsonl:3:1: expected an object {\"tool\": \"<id>\", \"args\": {…}}, found an array"),
        ("{\"args\": {}}", "bad.jsonl:3:12: missing field `tool`"),
        ("{\"tool\": \"ok\", \"args\": [1]}", "bad.jsonl:3:23: invalid type: sequence, expected a map"),
        ("{\"tool\": \"ok\", \"args\": null}", "bad.jsonl:3:27: invalid type: null, expected a map"),
        ("{\"tool\": \"ok\", \"yes\": true}", "bad.jsonl:3:20: unknown field `yes`, expected `tool` or `args`"),
    ] {
        let output = batch(&td, &bundle, batch_file(&td, "bad.jsonl", &[touch, "", bad]), &["--yes"]);
        assert_eq!(output.status.code(), Some(2), "{bad}: {}", stderr(&output));
        assert_eq!(errors(&output), [format!("error: {error}"), help.to_string()], "{bad}");
        assert_eq!(stdout(&output), "");
    }
    assert!(!td.state_dir().join("ran").exists(), "no call ran");
    assert!(!td.ledger_path().exists(), "nothing was recorded");

    let many = batch_file(&td, "many.jsonl", &[r#"{"tool": "ok"}"#; 10_001]);
    let output = batch(&td, &bundle, many, &[]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        errors(&output),
        [
            "error: many.jsonl:10001: a batch makes at most 10000 calls",
            "  help: split the calls into files of at most 10000 lines; no call was made",
        ]
    );

    let output = batch(&td, &bundle, "missing.jsonl", &[]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        errors(&output)[0],
        "error: cannot read the batch missing.jsonl: No such file or directory (os error 2)"
    );
}

#[test]
fn flags_that_belong_to_one_call_are_refused_with_a_batch() {
    let td = TestDir::new();
    let bundle = mixed_bundle(&td);
    let bundle = bundle.to_str().unwrap();
    for (args, error) in [
        (
            vec!["ok", "--batch", "b.jsonl"],
            "error: the argument '[TOOL_ID]' cannot be used with '--batch <FILE.jsonl>'",
        ),
        (
            vec!["--batch", "b.jsonl", "--args", "{}"],
            "error: the argument '--batch <FILE.jsonl>' cannot be used with '--args <JSON|@FILE>'",
        ),
        (
            vec!["--batch", "b.jsonl", "--answer", "a=b"],
            "error: the argument '--batch <FILE.jsonl>' cannot be used with '--answer <ID=VALUE>'",
        ),
        (
            vec!["--batch", "b.jsonl", "--format", "json"],
            "error: the argument '--batch <FILE.jsonl>' cannot be used with '--format <FORMAT>'",
        ),
        (vec!["ok", "--jobs", "2"], "error: the argument '[TOOL_ID]' cannot be used with '--jobs <N>'"),
        (vec!["--batch", "b.jsonl", "--jobs", "0"], "error: invalid value '0' for '--jobs <N>': 0 is not in 1..=256"),
        (vec![], "error: the following required arguments were not provided:"),
    ] {
        let mut all = vec!["tools", "call", bundle];
        all.extend(&args);
        let (_, err) = td.expect(2, &all);
        assert_eq!(err.lines().next(), Some(error), "{args:?}");
    }
}

#[test]
fn prompts_of_concurrent_calls_come_one_at_a_time_on_the_terminal() {
    let td = TestDir::new();
    let bundle = mixed_bundle(&td);
    let file = batch_file(&td, "touch.jsonl", &[r#"{"tool": "touch"}"#, r#"{"tool": "touch"}"#]);
    let mut command = td.command();
    command.args(["tools", "call"]).arg(&bundle).arg("--batch").arg(file).args(["--jobs", "2"]);
    let mut terminal = Terminal::spawn(command, Duration::from_secs(20));
    for _ in 0..2 {
        terminal.expect("Tool `touch` wants to run: test tool touch");
        terminal.expect("Allow this call?");
        terminal.press("y");
        terminal.expect("yes");
    }
    terminal.expect(r#""line":2"#);
    terminal.expect_end();
    let confirms: Vec<Value> = td.events().iter().filter(|e| e.kind == "tool.confirm").map(payload).collect();
    assert_eq!(confirms.len(), 2);
    assert!(confirms.iter().all(|c| c["approved"] == true && c["how"] == "terminal prompt"), "{confirms:?}");
}

#[test]
fn a_closed_stdout_cancels_the_calls_still_running() {
    // Line 1 succeeds once line 2's tool runs; its output line finds stdout
    // closed, and line 2's tool, which would sleep 30 s, is killed (line 3
    // may have been taken meanwhile: it is cancelled too).
    let td = TestDir::new();
    let state = td.state_dir();
    let pid_file = state.join("slow.pid");
    let pid_path = pid_file.to_str().unwrap();
    let tools = json!([
        bundle::with_fs(bundle::runtime_tool("wait", "wait_file.sh", &[pid_path]), &state),
        bundle::with_fs(bundle::runtime_tool("slow", "slow.sh", &[pid_path]), &state),
        bundle::runtime_tool("ok", "ok.sh", &[]),
    ]);
    let bundle = td.bundle("cancelling", tools, &bundle::caps("exec = true\n", &state));
    let file = batch_file(&td, "b.jsonl", &[r#"{"tool": "wait"}"#, r#"{"tool": "slow"}"#, r#"{"tool": "ok"}"#]);
    let started = Instant::now();
    let mut command = td.command();
    command.args(["tools", "call"]).arg(&bundle).arg("--batch").arg(file).args(["--jobs", "2"]);
    let child = command.stdin(Stdio::null()).stdout(closed_pipe()).stderr(Stdio::piped()).spawn().unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(!stderr(&output).contains("error"), "{}", stderr(&output));
    assert!(started.elapsed() < Duration::from_secs(20), "the batch waited for its slow call");
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert!(!is_running(pid.trim()), "the slow tool outlived the batch");
    let results: Vec<Value> = td.events().iter().filter(|e| e.kind == "tool.result").map(payload).collect();
    let slow = results.iter().find(|r| r["tool"] == "slow").unwrap();
    assert_eq!(slow["error"]["kind"], "cancelled", "{slow}");
}

#[test]
fn tags_no_call_could_take_stop_the_batch_before_any_call() {
    let td = TestDir::new();
    let bundle = mixed_bundle(&td);
    let file = batch_file(&td, "b.jsonl", &[r#"{"tool": "ok"}"#, r#"{"tool": "touch"}"#]);
    let output = batch(&td, &bundle, file, &["--yes", "--tag", "team=mail", "--tag", ""]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert_eq!(
        errors(&output),
        [
            "error: the tag `` is not a tag (1 to 128 bytes, no control characters)",
            "  help: give tags as KEY=VALUE or a plain word, e.g. --tag team=mail"
        ]
    );
    assert_eq!(stdout(&output), "");
    assert!(!td.state_dir().join("ran").exists(), "no call ran");
    assert!(!td.ledger_path().exists(), "nothing was recorded");
}
