//! `rlp trace diff`, end to end: traces recorded by real tool calls into a
//! real ledger, and hand-written JSON Lines files, compared by real `rlp`
//! processes.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::replay::{data, data_caps, exec_tool};
use crate::support::TestDir;
use crate::support::output::{stderr, stdout};
use crate::support::{rlp_snapshot, text_snapshot};

/// One call of a hand-written trace: tool, arguments, and the payload
/// members of each attempt's result (`{"result": …}` or `{"error": …}`).
struct Call(&'static str, Value, Vec<Value>);

/// Writes a trace of `calls` (call frame, then one result frame per attempt)
/// to `name` in the test folder; `side` tells the ids of the two runs apart.
fn write_trace(td: &TestDir, name: &str, side: u8, calls: &[Call]) -> PathBuf {
    write_trace_with(td, name, side, calls, &[])
}

/// [`write_trace`], then the frames `(kind, payload)` of `exchanges`.
fn write_trace_with(td: &TestDir, name: &str, side: u8, calls: &[Call], exchanges: &[(&str, Value)]) -> PathBuf {
    let trace = format!("0197a000-0000-7000-8000-0000000000{side:02x}");
    let mut lines = String::new();
    let mut position = 0u64;
    let mut frame = |kind: &str, actor: &str, payload: Value| {
        position += 1;
        let frame = json!({
            "id": position,
            "ts_ms": 1_764_000_000_000u64 + position * 7 + u64::from(side),
            "actor": actor,
            "kind": kind,
            "scope": "desk",
            "payload": payload,
            "provenance": {"agent": "desk", "msg_id": format!("0197a001-0000-7000-8000-{side:02x}{position:010}"), "trace_id": trace},
        });
        lines.push_str(&format!("{frame}\n"));
    };
    for (n, Call(tool, args, attempts)) in calls.iter().enumerate() {
        let invocation = format!("0197a002-0000-7000-8000-{side:02x}{n:010}");
        frame(
            "tool.call",
            "runtime",
            json!({"v": 1, "tool": tool, "args": args, "invocation_id": invocation, "input_schema": "inline", "input_schema_blake3": "0".repeat(64), "tags": []}),
        );
        for (attempt, outcome) in attempts.iter().enumerate() {
            let mut payload = json!({"v": 1, "invocation_id": invocation, "attempt": attempt + 1, "duration_ms": n + usize::from(side)});
            payload.as_object_mut().unwrap().extend(outcome.as_object().unwrap().clone());
            frame("tool.result", &format!("tool:{tool}"), payload);
        }
    }
    for (kind, payload) in exchanges {
        frame(kind, "runtime", payload.clone());
    }
    let path = td.join(name);
    std::fs::write(&path, lines).unwrap();
    path
}

fn ok(value: Value) -> Vec<Value> {
    vec![json!({ "result": value })]
}

fn failed(kind: &str) -> Vec<Value> {
    vec![json!({"error": {"message": format!("{kind} happened"), "kind": kind}})]
}

/// `rlp trace diff` run in the test folder (so file names print as given).
fn diff(td: &TestDir, args: &[&str], code: i32) -> String {
    let output = td.rlp_in("home").current_dir(td.path()).args(["trace", "diff"]).args(args).output().unwrap();
    assert_eq!(output.status.code(), Some(code), "stdout:\n{}\nstderr:\n{}", stdout(&output), stderr(&output));
    stdout(&output)
}

fn kinds(json: &str) -> Vec<String> {
    let doc: Value = serde_json::from_str(json).unwrap();
    doc["divergences"].as_array().unwrap().iter().map(|d| d["kind"].as_str().unwrap().to_string()).collect()
}

fn baseline_calls() -> Vec<Call> {
    vec![
        Call("notes.read", json!({}), ok(json!({"note": "hello"}))),
        Call("weather.get", json!({"city": "Oslo"}), ok(json!({"temp": 21, "wind": {"speed": 3, "dir": "N"}}))),
        Call("mail.send", json!({"to": "ann"}), ok(json!({"sent": true}))),
    ]
}

/// A candidate that adds a call, drops one and changes one result: exactly
/// those three divergences, in both formats; the same bytes every time.
#[test]
fn an_added_a_dropped_and_a_changed_call_are_reported() {
    let td = TestDir::new();
    write_trace(&td, "baseline.jsonl", 0xa, &baseline_calls());
    write_trace(
        &td,
        "candidate.jsonl",
        0xb,
        &[
            Call("notes.read", json!({}), ok(json!({"note": "hello"}))),
            Call("weather.get", json!({"city": "Oslo"}), ok(json!({"temp": 22, "wind": {"speed": 3, "dir": "W"}}))),
            Call("calendar.add", json!({"day": 1}), ok(json!({"added": true}))),
        ],
    );
    let human = diff(&td, &["baseline.jsonl", "candidate.jsonl"], 1);
    insta::assert_snapshot!("diff_human", human);
    assert_eq!(diff(&td, &["baseline.jsonl", "candidate.jsonl"], 1), human);
    let json = diff(&td, &["baseline.jsonl", "candidate.jsonl", "--format", "json"], 1);
    insta::assert_snapshot!("diff_json", json);
    assert_eq!(kinds(&json), ["result_changed", "unused_recording", "extra_call"]);
}

/// Identical runs (different ids, times and durations; a retried attempt on
/// one side only) are no divergence.
#[test]
fn identical_runs_are_no_divergence() {
    let td = TestDir::new();
    write_trace(&td, "baseline.jsonl", 0xa, &baseline_calls());
    let mut retried = baseline_calls();
    retried[1].2.insert(0, json!({"error": {"message": "busy", "kind": "tool", "will_retry": true}}));
    write_trace(&td, "candidate.jsonl", 0xb, &retried);
    assert_eq!(
        diff(&td, &["baseline.jsonl", "candidate.jsonl"], 0),
        "Baseline:  baseline.jsonl (trace 0197a000-0000-7000-8000-00000000000a, agent `desk`): 6 frames, 3 calls\n\
         Candidate: candidate.jsonl (trace 0197a000-0000-7000-8000-00000000000b, agent `desk`): 7 frames, 3 calls\n\
         \n\
         Divergences: none\n\
         \n\
         Result: no divergence between 3 baseline calls and 3 candidate calls\n"
    );
    let json: Value =
        serde_json::from_str(&diff(&td, &["baseline.jsonl", "candidate.jsonl", "--format", "json"], 0)).unwrap();
    assert_eq!((json["clean"].clone(), json["calls"].clone()), (json!(true), json!({"baseline": 3, "candidate": 3})));
}

/// Same tool with other arguments, a call that now fails, and two calls
/// swapped: `args_mismatch` (with paths), `outcome_changed` and
/// `order_divergence`.
#[test]
fn arguments_outcomes_and_order_are_compared() {
    let td = TestDir::new();
    write_trace(
        &td,
        "baseline.jsonl",
        0xa,
        &[
            Call("weather.get", json!({"city": "Oslo", "days": 2}), ok(json!({"temp": 21}))),
            Call("mail.send", json!({"to": "ann"}), ok(json!({"sent": true}))),
            Call("notes.read", json!({}), ok(json!({"note": "a"}))),
            Call("notes.list", json!({}), ok(json!([]))),
            Call("files.get", json!({"path": "x"}), failed("timeout")),
        ],
    );
    write_trace(
        &td,
        "candidate.jsonl",
        0xb,
        &[
            Call("weather.get", json!({"days": 2.0, "city": "Bergen"}), ok(json!({"temp": 21}))),
            Call("mail.send", json!({"to": "ann"}), failed("refused")),
            Call("notes.list", json!({}), ok(json!([]))),
            Call("notes.read", json!({}), ok(json!({"note": "a"}))),
            Call("files.get", json!({"path": "x"}), failed("http_status")),
        ],
    );
    let json = diff(&td, &["baseline.jsonl", "candidate.jsonl", "--format", "json"], 1);
    assert_eq!(kinds(&json), ["args_mismatch", "outcome_changed", "order_divergence", "outcome_changed"]);
    let doc: Value = serde_json::from_str(&json).unwrap();
    let d = &doc["divergences"];
    assert_eq!(d[0]["changes"], json!([{"op": "changed", "path": "/city", "baseline": "Oslo", "candidate": "Bergen"}]));
    assert_eq!(d[1]["message"], "baseline call 2 succeeded, candidate call 2 failed (`refused`)");
    assert_eq!(d[2]["message"], "baseline call 3 is made as candidate call 4, in another order");
    assert_eq!((d[2]["baseline"]["position"].clone(), d[2]["candidate"]["position"].clone()), (json!(5), json!(7)));
    assert_eq!(d[3]["message"], "baseline call 5 failed (`timeout`), candidate call 5 failed (`http_status`)");
}

/// An exchange with a bridged server of `server`: `answer` holds the
/// payload's `response` or `error`.
fn exchange(kind: &'static str, server: &str, method: &str, request: Value, answer: Value) -> (&'static str, Value) {
    let mut payload = json!({"v": 1, "server": server, "method": method, "request": request, "duration_ms": 5});
    payload.as_object_mut().unwrap().extend(answer.as_object().unwrap().clone());
    (kind, payload)
}

/// Content blocks beside a result that changed, a resource read answered
/// otherwise, a prompt got on one side only and a completion on the other:
/// each reported, with the paths that differ, in both formats.
#[test]
fn content_blocks_and_exchanges_with_bridged_servers_are_compared() {
    let td = TestDir::new();
    let shot = |text: &str| {
        let content =
            json!([{"type": "text", "text": text}, {"type": "image", "mimeType": "image/png", "data": "iVBO"}]);
        Call("screen.shot", json!({}), vec![json!({"result": {"ok": true}, "content": content})])
    };
    let read = |text: &str| {
        let answer = json!({"response": {"contents": [{"uri": "file:///a.md", "text": text}]}});
        exchange("resource.read", "files", "resources/read", json!({"uri": "file:///a.md"}), answer)
    };
    let listed =
        || exchange("resource.list", "files", "resources/list", json!({}), json!({"response": {"resources": []}}));
    let prompt =
        exchange("prompt.get", "files", "prompts/get", json!({"name": "sum"}), json!({"response": {"messages": []}}));
    let completion = exchange(
        "completion.complete",
        "files",
        "completion/complete",
        json!({"argument": {"name": "a"}}),
        json!({"error": "no"}),
    );
    let mut slower = prompt.clone();
    slower.1["duration_ms"] = json!(700);
    write_trace_with(&td, "baseline.jsonl", 0xa, &[shot("one")], &[read("# A"), prompt, listed()]);
    write_trace_with(&td, "candidate.jsonl", 0xb, &[shot("two")], &[read("# B"), completion, listed()]);
    let human = diff(&td, &["baseline.jsonl", "candidate.jsonl"], 1);
    insta::assert_snapshot!("exchanges_human", human);
    let json = diff(&td, &["baseline.jsonl", "candidate.jsonl", "--format", "json"], 1);
    insta::assert_snapshot!("exchanges_json", json);
    assert_eq!(kinds(&json), ["result_changed", "response_changed", "missing_exchange", "extra_exchange"]);
    let doc: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["divergences"][0]["changes"][0]["path"], "/content/0/text");
    assert_eq!(doc["divergences"][1]["changes"][0]["path"], "/response/contents/0/text");
    // The same exchanges, timed otherwise, are no divergence.
    write_trace_with(&td, "again.jsonl", 0xc, &[shot("one")], &[read("# A"), slower, listed()]);
    assert_eq!(kinds(&diff(&td, &["baseline.jsonl", "again.jsonl", "--format", "json"], 0)), Vec::<String>::new());
}

/// A malformed line stops the diff with exit 2, naming the file and line.
#[test]
fn a_malformed_line_is_unreadable_input() {
    let td = TestDir::new();
    let baseline = write_trace(&td, "baseline.jsonl", 0xa, &baseline_calls());
    let mut text = std::fs::read_to_string(&baseline).unwrap();
    text = text.replacen("\"tool.result\"", "\"tool.reslut\"", 1);
    std::fs::write(td.join("broken.jsonl"), text).unwrap();
    let output = td
        .rlp_in("home")
        .current_dir(td.path())
        .args(["trace", "diff", "broken.jsonl", "baseline.jsonl"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stdout(&output), "");
    rlp_snapshot!(&td, &output);
    // A trace id the ledger does not hold is named too.
    let missing = "0197a000-0000-7000-8000-0000000000ff";
    let output =
        td.rlp_in("home").current_dir(td.path()).args(["trace", "diff", "baseline.jsonl", missing]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
}

/// `rlp tools call` twice into two traces of a real ledger, the tool's
/// answer changed in between: the trace ids and an export of either can be
/// compared, in any mix.
#[test]
fn recorded_traces_compare_by_id_and_by_export() {
    let td = TestDir::new();
    let forecast = data(&td, "forecast.json", json!({"city": "Oslo", "days": [{"high": 7}, {"high": 9}]}));
    let bundle = td.bundle(
        "desk",
        json!([exec_tool("weather.get", &forecast, json!({"type": "object"}), json!({"type": "object"}))]),
        &data_caps(&td, "exec = true\n"),
    );
    let (first, second) = ("0197a000-0000-7000-8000-000000000001", "0197a000-0000-7000-8000-000000000002");
    let record = |trace: &str| {
        let output = td
            .rlp_in("home")
            .args(["tools", "call"])
            .arg(&bundle)
            .args(["weather.get", "--args", r#"{"city":"Oslo"}"#, "--trace-id", trace, "--yes"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    };
    record(first);
    std::fs::write(&forecast, json!({"city": "Oslo", "days": [{"high": 7}, {"high": 11}]}).to_string()).unwrap();
    record(second);
    let export = |trace: &str, name: &str| -> PathBuf {
        let file = td.join(name);
        let output = td.rlp_in("home").args(["trace", "export", trace, "-o"]).arg(&file).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        file
    };
    export(first, "baseline.jsonl");

    assert_eq!(kinds(&diff(&td, &[first, first, "--format", "json"], 0)), Vec::<String>::new());
    assert_eq!(kinds(&diff(&td, &["baseline.jsonl", first, "--format", "json"], 0)), Vec::<String>::new());
    let json = diff(&td, &["baseline.jsonl", second, "--format", "json"], 1);
    let doc: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["baseline"]["input"], "baseline.jsonl");
    assert_eq!(doc["candidate"]["input"], format!("trace {second}"));
    assert_eq!(kinds(&json), ["result_changed"]);
    assert_eq!(
        doc["divergences"][0]["changes"],
        json!([{"op": "changed", "path": "/days/1/high", "baseline": 9, "candidate": 11}])
    );
    let human = diff(&td, &[first, second], 1);
    text_snapshot!(td.filters().literal(first, "[FIRST]").literal(second, "[SECOND]"), human);
}
