//! Record once, test offline: a session recorded through `rlp serve` with the
//! MCP Python SDK, exported, then served again with `--replay` to the same
//! client from a network namespace with no route out; and `rlp tools call
//! --replay`. Results are the recorded ones, a changed argument is named with
//! its path, an answer that is not the recorded one fails, what was never
//! asked for or matched no recording fails the run when the server stops,
//! `--fallback live` runs and marks the call, and the replayed trace diffs
//! clean against the recording.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::bundle::{exec, runtime_tool, tool, with};
use crate::support::mcp::{self, call, scenario, stdio, stdio_trace};
use crate::support::output::{assert_contains, code, stderr, stdout};

/// Bundle `desk`: `desk.greet` (greets `name`), `mail.draft` (asks which
/// tone, then returns its answers) and `desk.count` (3).
fn desk(td: &TestDir) -> PathBuf {
    let greet = td.script("greet.sh", r#"exec jq -c '{greeting: ("hello " + .tool.arguments.name)}' "$1""#);
    let count = td.script("count.sh", "echo 3");
    let tools = json!([
        with(
            tool("desk.greet", exec(greet.to_str().unwrap(), &[])),
            json!({"input_schema": {"type": "object", "properties": {"name": {"type": "string"}},
                                    "required": ["name"]},
                   "result_schema": {"type": "object", "required": ["greeting"]}})
        ),
        runtime_tool("mail.draft", "ask.py", &["tone"]),
        with(tool("desk.count", exec(count.to_str().unwrap(), &[])), json!({"result_schema": {"type": "integer"}})),
    ]);
    td.bundle("desk", tools, "[capabilities]\nexec = true\n")
}

/// The client's answer to `mail.draft`'s question.
fn tone(answer: &str) -> Value {
    json!([{"action": "accept", "content": {"tone": answer}}])
}

/// The session: a greeting, a draft (one question), a count.
fn session(name: &str) -> Value {
    json!([call("desk.greet", json!({"name": name})), call("mail.draft", json!({})), call("desk.count", json!({}))])
}

/// A test folder with bundle `desk` whose session was recorded through
/// `rlp serve` and exported.
struct Recorded {
    td: TestDir,
    desk: PathBuf,
    /// The export, `golden.jsonl`.
    golden: PathBuf,
    /// The recorded trace.
    trace: String,
    /// What the client saw of the session.
    report: Value,
}

/// Records the session through `rlp serve` and exports it to `golden.jsonl`.
fn recorded() -> Recorded {
    let td = TestDir::new();
    let desk = desk(&td);
    let report = mcp::drive(&scenario(stdio(&td, &desk, &[]), "legacy", Some(tone("formal")), session("Ada")));
    for (i, record) in report["steps"].as_array().unwrap().iter().enumerate() {
        assert_ne!(record["result"]["isError"], true, "step {i} of the recording failed: {record}");
    }
    let trace = stdio_trace(&td);
    let golden = td.join("golden.jsonl");
    td.expect(0, &["trace", "export", &trace, "-o", golden.to_str().unwrap()]);
    Recorded { td, desk, golden, trace, report }
}

/// The stdio transport of `rlp serve <desk> <args…>` started in a network
/// namespace of its own, with no route out (`unshare -rn`).
fn offline(td: &TestDir, desk: &Path, args: &[&str]) -> Value {
    let mut transport = stdio(td, desk, args);
    let mut wrapped = vec![json!("-rn"), transport["command"].clone()];
    wrapped.extend(transport["args"].as_array().unwrap().iter().cloned());
    transport["command"] = json!("unshare");
    transport["args"] = Value::Array(wrapped);
    transport
}

/// What a client compares of a call's result: everything but the ids of
/// the call in `_meta`.
fn shown(record: &Value) -> Value {
    let mut result = record["result"].clone();
    if let Some(meta) = result.get_mut("_meta").and_then(Value::as_object_mut) {
        meta.remove("dev.runloop/call");
    }
    result
}

/// The text of a call record's one content block.
fn text_of(record: &Value) -> &str {
    record["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text: {record}"))
}

/// The kinds and payloads of the frames of `trace`, in order.
fn frames_of(td: &TestDir, trace: &str) -> Vec<(String, Value)> {
    td.events()
        .into_iter()
        .filter(|e| serde_json::from_str::<Value>(&e.provenance_json).unwrap()["trace_id"] == trace)
        .map(|e| (e.kind.clone(), serde_json::from_str(&e.payload_json).unwrap()))
        .collect()
}

/// The payloads of the call frames of `trace`, in order.
fn calls_of(td: &TestDir, trace: &str) -> Vec<Value> {
    frames_of(td, trace).into_iter().filter(|(kind, _)| kind == "tool.call").map(|(_, payload)| payload).collect()
}

/// The replay marks of the call frames of `trace`, in order.
fn marks(td: &TestDir, trace: &str) -> Vec<Value> {
    calls_of(td, trace).into_iter().map(|call| call["replay"].clone()).collect()
}

/// How a raw session ends.
#[derive(Clone, Copy)]
enum End {
    /// The client closes the server's standard input.
    CloseInput,
    /// The server gets this signal, its input still open.
    Signal(i32),
}

/// A raw stdio session with `rlp serve <desk> <args…>`: the handshake, then
/// each call in turn (its response read), then standard input closed;
/// returns the responses and how the server ended.
fn raw_session(td: &TestDir, desk: &Path, args: &[&str], calls: &[(&str, Value)]) -> (Vec<Value>, Output) {
    raw_session_ending(td, desk, args, calls, End::CloseInput)
}

/// [`raw_session`], ended as `end` says.
fn raw_session_ending(
    td: &TestDir,
    desk: &Path,
    args: &[&str],
    calls: &[(&str, Value)],
    end: End,
) -> (Vec<Value>, Output) {
    let mut server = td
        .command()
        .arg("serve")
        .arg(desk)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = server.stdin.take().unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let mut send = |message: Value| writeln!(stdin, "{message}").unwrap();
    send(mcp::initialize(0));
    let _ = lines.next().unwrap().unwrap();
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let mut responses = Vec::new();
    for (i, (name, arguments)) in calls.iter().enumerate() {
        send(json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                    "params": {"name": name, "arguments": arguments}}));
        let line = lines.next().unwrap().unwrap();
        responses.push(serde_json::from_str(&line).unwrap());
    }
    // Under a signal, the input stays open until the server is gone.
    let held = match end {
        End::CloseInput => {
            drop(stdin);
            None
        }
        End::Signal(signal) => {
            crate::support::process::signal(server.id() as i32, signal);
            Some(stdin)
        }
    };
    drop(lines);
    let out = server.wait_with_output().unwrap();
    drop(held);
    (responses, out)
}

#[test]
fn a_recorded_session_is_served_again_offline_with_the_same_results_and_diffs_clean() {
    let Recorded { td, desk, golden, trace: recorded_trace, report: recorded } = recorded();

    let golden_arg = golden.to_str().unwrap();
    let replayed = mcp::drive(&scenario(
        offline(&td, &desk, &["--replay", golden_arg]),
        "legacy",
        Some(tone("formal")),
        session("Ada"),
    ));
    for i in 0..3 {
        assert_eq!(shown(&replayed["steps"][i]), shown(&recorded["steps"][i]), "step {i}");
    }
    // The question was asked again, as recorded.
    assert_eq!(replayed["elicitations"].as_array().unwrap().len(), 1, "{replayed}");
    let served = std::fs::read_to_string(td.join("serve.stderr")).unwrap();
    assert_contains(&served, "rlp serve: answering every call from the recording of trace");
    assert_contains(&served, &format!("rlp: replay of trace {recorded_trace}: 3 calls answered from the recording\n"));

    // Each call frame names the recorded call that answered it.
    let replay_trace = stdio_trace(&td);
    let recorded_calls: Vec<Value> =
        calls_of(&td, &recorded_trace).into_iter().map(|call| call["invocation_id"].clone()).collect();
    let marks = marks(&td, &replay_trace);
    assert_eq!(marks.len(), 3);
    for (mark, invocation) in marks.iter().zip(&recorded_calls) {
        assert_eq!(mark["answered"], "recording", "{mark}");
        assert_eq!(mark["trace_id"], recorded_trace.as_str());
        assert_eq!(&mark["invocation_id"], invocation);
    }
    // The regression report: nothing changed.
    let (out, _) = td.expect(0, &["trace", "diff", golden_arg, &replay_trace]);
    assert_contains(&out, "Result: no divergence between 3 baseline calls and 3 candidate calls");
}

#[test]
fn a_redacted_export_is_served_with_its_placeholders_and_diffs_clean() {
    let Recorded { td, desk, trace, report: recorded, .. } = recorded();
    let redacted = td.join("redacted.jsonl");
    let redacted_arg = redacted.to_str().unwrap();
    td.expect(
        0,
        &["trace", "export", &trace, "--redact", "/args/name", "--redact", "desk.count:/result", "-o", redacted_arg],
    );
    let text = std::fs::read_to_string(&redacted).unwrap();
    assert!(!text.contains("\"Ada\""), "{text}");

    // Any name matches the placeholder; the answers are the recorded ones,
    // the redacted count its placeholder (today's result_schema is not
    // held against it).
    let replayed = mcp::drive(&scenario(
        offline(&td, &desk, &["--replay", redacted_arg]),
        "legacy",
        Some(tone("formal")),
        session("Grace"),
    ));
    assert_eq!(shown(&replayed["steps"][0]), shown(&recorded["steps"][0]));
    assert_eq!(shown(&replayed["steps"][1]), shown(&recorded["steps"][1]));
    assert_eq!(replayed["steps"][2]["result"]["structuredContent"], json!({"result": "<redacted:2>"}), "{replayed}");
    let served = std::fs::read_to_string(td.join("serve.stderr")).unwrap();
    assert_contains(&served, "3 calls answered from the recording\n");

    // The regression report: a placeholder stands for any value.
    let (out, _) = td.expect(0, &["trace", "diff", redacted_arg, &stdio_trace(&td)]);
    assert_contains(&out, "Result: no divergence between 3 baseline calls and 3 candidate calls");
}

#[test]
fn a_changed_argument_or_answer_is_an_error_naming_what_differs_and_the_server_exits_1() {
    let Recorded { td, desk, golden, .. } = recorded();
    let golden_arg = golden.to_str().unwrap();

    // Bob instead of Ada; casual instead of formal.
    let report = mcp::drive(&scenario(
        offline(&td, &desk, &["--replay", golden_arg]),
        "legacy",
        Some(tone("casual")),
        session("Bob"),
    ));
    let greet = &report["steps"][0];
    assert_eq!(greet["result"]["isError"], true, "{greet}");
    let text = text_of(greet);
    assert!(
        text.starts_with("call 1 (`desk.greet`) matches no recording: the closest is the call of `desk.greet` at #"),
        "{text}"
    );
    assert_contains(text, "whose arguments differ at /name (recorded `\"Ada\"`, given `\"Bob\"`)");
    assert_contains(text, "help: a replay answers only the recorded calls");
    let draft = &report["steps"][1];
    assert_eq!(draft["result"]["isError"], true, "{draft}");
    assert_contains(
        text_of(draft),
        "the answer to question `tone` is not the recorded one: recorded `\"formal\"`, given `\"casual\"`",
    );

    // Over raw stdio, the exit status says so when the client goes away.
    let (responses, out) =
        raw_session(&td, &desk, &["--replay", golden_arg], &[("desk.greet", json!({"name": "Bob"}))]);
    assert_eq!(responses[0]["result"]["isError"], true, "{}", responses[0]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let said = stderr(&out);
    assert_contains(
        &said,
        "0 calls answered from the recording, 1 call matched no recording, 2 recorded calls never asked for",
    );
    assert_contains(&said, "  extra_call: call 1 (`desk.greet`) matches no recording");
    assert_contains(&said, "  unused_recording: the recorded call of `desk.count` at #");
}

#[test]
fn in_order_replay_refuses_a_call_out_of_turn_and_any_order_answers_it() {
    let Recorded { td, desk, golden, .. } = recorded();
    let golden_arg = golden.to_str().unwrap();
    let count_first = [("desk.count", json!({})), ("desk.greet", json!({"name": "Ada"}))];

    let (responses, out) = raw_session(&td, &desk, &["--replay", golden_arg], &count_first);
    assert_eq!(responses[0]["result"]["isError"], true, "{}", responses[0]);
    assert_contains(
        responses[0]["result"]["content"][0]["text"].as_str().unwrap(),
        "but the next recording is `desk.greet` at #",
    );
    assert_eq!(responses[1]["result"]["structuredContent"], json!({"greeting": "hello Ada"}));
    assert_eq!(code(&out), 1, "{}", stderr(&out));

    let (responses, out) = raw_session(&td, &desk, &["--replay", golden_arg, "--match", "any-order"], &count_first);
    assert_eq!(responses[0]["result"]["structuredContent"], json!({"result": 3}), "{}", responses[0]);
    assert_eq!(responses[1]["result"]["structuredContent"], json!({"greeting": "hello Ada"}));
    // mail.draft was never asked for.
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert_contains(&stderr(&out), "2 calls answered from the recording, 1 recorded call never asked for");
}

#[test]
fn fallback_live_runs_an_unmatched_call_and_records_it_as_live() {
    let Recorded { td, desk, golden, trace: recorded_trace, .. } = recorded();
    let golden_arg = golden.to_str().unwrap();
    let (responses, out) = raw_session(
        &td,
        &desk,
        &["--replay", golden_arg, "--fallback", "live"],
        &[("desk.greet", json!({"name": "Bob"}))],
    );
    assert_eq!(responses[0]["result"]["structuredContent"], json!({"greeting": "hello Bob"}), "{}", responses[0]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert_contains(&stderr(&out), "1 call matched no recording and ran live");
    let trace = stderr(&out).lines().find_map(|l| l.strip_prefix("rlp serve: trace ")).unwrap().to_string();
    let marks = marks(&td, &trace);
    assert_eq!(marks.len(), 1);
    assert_eq!(marks[0]["answered"], "live");
    assert_eq!(marks[0]["trace_id"], recorded_trace.as_str());
    // The closest recorded call is named.
    assert!(marks[0]["invocation_id"].is_string(), "{}", marks[0]);
}

#[test]
fn tools_call_replay_answers_one_call_a_process_in_one_trace() {
    let Recorded { td, desk, golden, .. } = recorded();
    let golden_arg = golden.to_str().unwrap();
    let trace = "01a20000-0000-7000-8000-00000000beef";
    let call = |tool: &str, args: &str, extra: &[&str]| {
        let mut command = vec!["tools", "call", desk.to_str().unwrap(), tool, "--args", args];
        command.extend(["--replay", golden_arg, "--trace-id", trace]);
        command.extend(extra);
        td.run(&command)
    };
    let greeted = call("desk.greet", r#"{"name": "Ada"}"#, &[]);
    assert_eq!((code(&greeted), stdout(&greeted)), (0, "{\n  \"greeting\": \"hello Ada\"\n}\n".to_string()));
    // The same call again: its recording was used by the process before.
    let again = call("desk.greet", r#"{"name": "Ada"}"#, &[]);
    assert_eq!(code(&again), 1);
    // Numbered after the call of the process before, in the same replay.
    assert_contains(
        &stderr(&again),
        "call 2 (`desk.greet`) matches no recording: no unused recording calls `desk.greet`",
    );
    let drafted = call("mail.draft", "{}", &["--answer", "tone=formal"]);
    assert_eq!(code(&drafted), 0, "{}", stderr(&drafted));
    let counted = call("desk.count", "{}", &[]);
    assert_eq!((code(&counted), stdout(&counted)), (0, "3\n".to_string()));
    let frames: Vec<String> = frames_of(&td, trace).into_iter().map(|(kind, _)| kind).collect();
    assert_eq!(frames.iter().filter(|k| *k == "trace.replay").count(), 1, "{frames:?}");
    // The extra call is the one difference.
    let (out, _) = td.expect(1, &["trace", "diff", golden_arg, trace]);
    assert_contains(&out, "extra_call");
    assert!(!out.contains("args_mismatch") && !out.contains("result_changed"), "{out}");
}

#[test]
fn a_replay_server_stopped_by_a_signal_exits_with_the_verdict_so_far() {
    let td = TestDir::new();
    let desk = desk(&td);
    let steps = json!([call("desk.greet", json!({"name": "Ada"})), call("desk.count", json!({}))]);
    mcp::drive(&scenario(stdio(&td, &desk, &[]), "legacy", None, steps));
    let golden = td.join("two.jsonl");
    td.expect(0, &["trace", "export", &stdio_trace(&td), "-o", golden.to_str().unwrap()]);
    let args = ["--replay", golden.to_str().unwrap()];
    let both = [("desk.greet", json!({"name": "Ada"})), ("desk.count", json!({}))];

    let (responses, out) = raw_session_ending(&td, &desk, &args, &both, End::Signal(libc::SIGTERM));
    assert_eq!(responses[1]["result"]["structuredContent"], json!({"result": 3}), "{}", responses[1]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_contains(&stderr(&out), "rlp: stopped; every call was answered from the recording, which was used up\n");

    let (_, out) = raw_session_ending(&td, &desk, &args, &both[..1], End::Signal(libc::SIGINT));
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert_contains(&stderr(&out), "rlp: stopped; the replay was not clean");
}
