//! `rlp serve` end to end (docs/mcp.md): a bundle's tools over the Model
//! Context Protocol, driven by the official MCP Python SDK as a real client
//! (`tests/mcp/drive.py`) in both protocol revisions it speaks: the
//! 2025-11-25 handshake and the stateless 2026-07-28 revision.

use std::io::{BufRead, BufReader, Lines, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout, Stdio};

use rlp::event::Event;
use serde_json::{Value, json};

use crate::support::bundle::{self, exec, http, runtime_tool, tool, with, with_fs};
use crate::support::files;
use crate::support::ledger::{kinds, payload};
use crate::support::mcp::{self, HttpServe, call, scenario, stdio};
use crate::support::output::{stderr, stdout};
use crate::support::rlp_snapshot;
use crate::support::{HANG_GUARD, TestDir};

/// The SDK's connect modes and the revision each speaks.
const MODES: [(&str, &str); 2] = [("legacy", "2025-11-25"), ("2026-07-28", "2026-07-28")];

/// The input schema of `desk.greet`.
fn name_schema() -> Value {
    json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
           "additionalProperties": false})
}

/// The result schema of `desk.greet`.
fn greeting_schema() -> Value {
    json!({"type": "object", "properties": {"greeting": {"type": "string"}}, "required": ["greeting"]})
}

/// Bundle `desk`: `desk.greet` (an object result), `desk.count` (an integer
/// result), `desk.bad` (a result its schema refuses), `desk.send`
/// (confirmation; leaves `state/sent`), `desk.lookup` (http, its host
/// granted) and `desk.fetch` (http, its host not granted: not exposed).
fn desk(td: &TestDir) -> PathBuf {
    let state = td.state_dir();
    let greet = td.script("greet.sh", r#"exec jq -c '{greeting: ("hello " + .tool.arguments.name)}' "$1""#);
    let count = td.script("count.sh", "echo 3");
    let sent = state.join("sent");
    let tools = json!([
        with(
            tool("desk.greet", exec(greet.to_str().unwrap(), &[])),
            json!({"input_schema": name_schema(), "result_schema": greeting_schema()})
        ),
        with(tool("desk.count", exec(count.to_str().unwrap(), &[])), json!({"result_schema": {"type": "integer"}})),
        with(
            runtime_tool("desk.bad", "bad_result.sh", &[]),
            json!({"result_schema": {"type": "object", "properties": {"n": {"type": "integer"}}}})
        ),
        with(
            with_fs(runtime_tool("desk.send", "marker.sh", &[sent.to_str().unwrap()]), &state),
            json!({"requires_confirmation": true})
        ),
        with(
            tool("desk.lookup", http("GET", "https://api.example.com/lookup")),
            json!({"result_schema": {"type": "object"}})
        ),
        tool("desk.fetch", http("GET", "https://other.example.net/x")),
    ]);
    td.bundle("desk", tools, &bundle::caps("exec = true\nnet = [\"api.example.com\"]\n", &state))
}

/// The record of step `i` of a driver report.
fn step(report: &Value, i: usize) -> &Value {
    &report["steps"][i]
}

/// The `dev.runloop/call` meta of a call record's result.
fn call_meta(record: &Value) -> &Value {
    &record["result"]["_meta"]["dev.runloop/call"]
}

/// The text of the one content block of a call record's result.
fn text_of(record: &Value) -> &str {
    let content = record["result"]["content"].as_array().unwrap_or_else(|| panic!("no content: {record}"));
    assert_eq!(content.len(), 1, "{record}");
    assert_eq!(content[0]["type"], "text", "{record}");
    content[0]["text"].as_str().unwrap()
}

/// Asserts that a call record's meta counts the attempts its last
/// `tool.result` frame in the ledger recorded (here: the tool ran once).
#[track_caller]
fn assert_attempts_recorded(td: &TestDir, record: &Value) {
    let meta = call_meta(record);
    let results = td.payloads("tool.result");
    let recorded = results.iter().rfind(|r| r["invocation_id"] == meta["invocation_id"]).expect("a tool.result frame");
    assert_eq!(recorded["attempt"], 1, "{recorded}");
    assert_eq!(meta["attempts"], recorded["attempt"], "the meta's attempts are not the recorded ones: {record}");
}

#[test]
fn tools_list_shows_exposed_tools_sorted_with_schemas_and_hints() {
    let td = TestDir::new();
    let desk = desk(&td);
    let exec_hints = json!({"readOnlyHint": false, "destructiveHint": false, "openWorldHint": false});
    let expected = json!([
        {"name": "desk.bad", "description": "test tool desk.bad", "inputSchema": {"type": "object"},
         "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}, "annotations": exec_hints},
        {"name": "desk.count", "description": "test tool desk.count", "inputSchema": {"type": "object"},
         "annotations": exec_hints},
        {"name": "desk.greet", "description": "test tool desk.greet", "inputSchema": name_schema(),
         "outputSchema": greeting_schema(), "annotations": exec_hints},
        {"name": "desk.lookup", "description": "test tool desk.lookup", "inputSchema": {"type": "object"},
         "outputSchema": {"type": "object"},
         "annotations": {"readOnlyHint": false, "destructiveHint": false, "openWorldHint": true}},
        {"name": "desk.send", "description": "test tool desk.send", "inputSchema": {"type": "object"},
         "annotations": {"readOnlyHint": false, "destructiveHint": true, "openWorldHint": false}},
    ]);
    for (mode, version) in MODES {
        let report = mcp::drive(&scenario(stdio(&td, &desk, &[]), mode, None, json!([{"op": "list"}])));
        assert_eq!(report["protocol_version"], version);
        // A 2025-11-25 session is told each tool may run as a task.
        let mut expected = expected.clone();
        if version == "2025-11-25" {
            for tool in expected.as_array_mut().unwrap() {
                tool["execution"] = json!({"taskSupport": "optional"});
            }
        }
        assert_eq!(step(&report, 0)["tools"], expected, "{mode}");
    }
}

#[test]
fn a_call_answers_with_structured_content_a_text_block_and_its_call_meta() {
    let td = TestDir::new();
    let desk = desk(&td);
    for (mode, _) in MODES {
        let steps = json!([call("desk.greet", json!({"name": "ada"})), call("desk.count", json!({}))]);
        let report = mcp::drive(&scenario(stdio(&td, &desk, &[]), mode, None, steps));
        let greet = step(&report, 0);
        assert_eq!(greet["result"]["isError"], false, "{mode}: {greet}");
        assert_eq!(greet["result"]["structuredContent"], json!({"greeting": "hello ada"}));
        assert_eq!(text_of(greet), r#"{"greeting":"hello ada"}"#);
        // A result whose schema is not an object's is wrapped.
        let count = step(&report, 1);
        assert_eq!(count["result"]["structuredContent"], json!({"result": 3}), "{mode}: {count}");
        assert_eq!(text_of(count), r#"{"result":3}"#);

        // The meta names the invocation and trace the ledger recorded.
        let events = td.events();
        let calls: Vec<&Event> = events.iter().filter(|e| e.kind == "tool.call").collect();
        let greeted = calls[calls.len() - 2];
        let expected = json!({"invocation_id": payload(greeted)["invocation_id"],
                              "trace_id": greeted.provenance().unwrap().trace_id.to_string(),
                              "attempts": 1, "outcome": "ok"});
        assert_eq!(call_meta(greet), &expected, "{mode}");
        assert_eq!(call_meta(count)["outcome"], "ok");
    }
}

#[test]
fn invalid_arguments_and_unknown_tools_are_invalid_params_errors() {
    let td = TestDir::new();
    let desk = desk(&td);
    for (mode, _) in MODES {
        let steps = json!([
            call("desk.greet", json!({"name": 7})),
            call("desk.greet", json!({})),
            call("desk.nothing", json!({})),
        ]);
        let report = mcp::drive(&scenario(stdio(&td, &desk, &[]), mode, None, steps));
        let schema_error = |i: usize, detail: &str| {
            let error = &step(&report, i)["error"];
            assert_eq!(error["code"], -32602, "{mode}: {error}");
            assert_eq!(
                error["message"],
                format!("the arguments do not match the input_schema of `desk.greet`: {detail}")
            );
            // The refused call's ids, for the ledger.
            assert!(error["data"]["invocation_id"].is_string() && error["data"]["trace_id"].is_string(), "{error}");
        };
        schema_error(0, r#"/name: 7 is not of type "string""#);
        schema_error(1, r#"(root): "name" is a required property"#);
        assert_eq!(
            step(&report, 2)["error"],
            json!({"code": -32602, "data": null,
                   "message": "unknown tool `desk.nothing`; the tools are: desk.bad, desk.count, desk.greet, desk.lookup, desk.send"}),
            "{mode}"
        );
    }
    // Nothing was called.
    assert!(td.payloads("tool.call").is_empty());
}

#[test]
fn an_invalid_result_and_an_unexposed_tool_are_tool_errors() {
    let td = TestDir::new();
    let desk = desk(&td);
    for (mode, _) in MODES {
        let steps = json!([call("desk.bad", json!({})), call("desk.fetch", json!({}))]);
        let report = mcp::drive(&scenario(stdio(&td, &desk, &[]), mode, None, steps));
        let bad = step(&report, 0);
        assert_eq!(bad["result"]["isError"], true, "{mode}: {bad}");
        assert_eq!(call_meta(bad)["outcome"], "error");
        assert_attempts_recorded(&td, bad);
        assert_eq!(
            text_of(bad),
            "the result of `desk.bad` does not match its result_schema: /n: \"not a number\" is not of type \"integer\"\n\
             help: fix the tool, or its result_schema in tools.json"
        );
        let fetch = step(&report, 1);
        assert_eq!(fetch["result"]["isError"], true, "{mode}: {fetch}");
        assert_eq!(call_meta(fetch)["outcome"], "refused");
        assert_eq!(call_meta(fetch)["attempts"], 0);
        assert_eq!(
            text_of(fetch),
            "tool `desk.fetch` is not exposed: it needs `net:other.example.net:443` (policy.caps does not grant it)\n\
             help: grant it under [capabilities] in policy.caps (net = [\"other.example.net:443\"]), then run `rlp digest`"
        );
    }
    let denied: Vec<Value> = td.payloads("cap.audit").into_iter().filter(|p| p["decision"] == "deny").collect();
    assert!(denied.iter().all(|p| p["tool"] == "desk.fetch"), "{denied:?}");
    assert!(!denied.is_empty());
}

/// The help a refused confirmation ends with.
const CONFIRM_HELP: &str = "help: approve the call when the client asks; a client without elicitation cannot be \
                            asked: start the server with `rlp serve --yes`, or set `requires_confirmation: false` on \
                            the tool in tools.json";

#[test]
fn confirmation_is_asked_through_elicitation() {
    let td = TestDir::new();
    let desk = desk(&td);
    let sent = td.state_dir().join("sent");
    let marker = files::fixture("runtime/marker.sh");
    for (mode, _) in MODES {
        let answers = json!([{"action": "decline"}, {"action": "accept", "content": {"approve": true}}]);
        let steps = json!([call("desk.send", json!({})), call("desk.send", json!({}))]);
        let report = mcp::drive(&scenario(stdio(&td, &desk, &[]), mode, Some(answers), steps));

        let declined = step(&report, 0);
        assert_eq!(declined["result"]["isError"], true, "{mode}: {declined}");
        assert_eq!(call_meta(declined)["outcome"], "refused");
        assert_eq!(
            text_of(declined),
            format!(
                "tool `desk.send` requires confirmation and the call was not approved: mcp: declined over MCP\n{CONFIRM_HELP}"
            )
        );
        let approved = step(&report, 1);
        assert_eq!(approved["result"]["structuredContent"], json!({"result": {"ok": true}}), "{mode}: {approved}");
        assert_eq!(call_meta(approved)["outcome"], "ok");
        assert!(sent.exists());
        std::fs::remove_file(&sent).unwrap();

        // Each ask is a form with one boolean, `approve`, naming the tool,
        // its arguments, its target and the invocation.
        let asked = report["elicitations"].as_array().unwrap();
        assert_eq!(asked.len(), 2, "{mode}: {asked:?}");
        for (ask, record) in asked.iter().zip([declined, approved]) {
            let params = &ask["params"];
            assert_eq!(params["mode"], "form");
            assert_eq!(
                params["message"],
                format!(
                    "Allow `desk.send` to run?\ntest tool desk.send\narguments: {{}}\ntarget: {marker} <blob> {}\n\
                     invocation: {}",
                    sent.display(),
                    call_meta(record)["invocation_id"].as_str().unwrap()
                )
            );
            assert_eq!(
                params["requestedSchema"],
                json!({"type": "object", "required": ["approve"], "properties": {"approve": {
                    "type": "boolean", "title": "Run desk.send",
                    "description": "true runs the tool once with these arguments"}}})
            );
        }
    }
    let confirms = td.payloads("tool.confirm");
    let decisions: Vec<(&Value, &Value)> = confirms.iter().map(|c| (&c["approved"], &c["how"])).collect();
    let (no, declined, yes, mcp) = (json!(false), json!("mcp: declined over MCP"), json!(true), json!("mcp"));
    assert_eq!(decisions, [(&no, &declined), (&yes, &mcp), (&no, &declined), (&yes, &mcp)]);
}

#[test]
fn only_an_accepted_approve_true_approves() {
    let td = TestDir::new();
    let desk = desk(&td);
    let answers = json!([
        {"action": "accept", "content": {"approve": false}},
        {"action": "accept"},
        {"action": "accept", "content": {"approve": "true"}},
        {"action": "accept", "content": {"Approve": true}},
        {"action": "cancel"},
    ]);
    let steps = json!(vec![call("desk.send", json!({})); 5]);
    let report = mcp::drive(&scenario(stdio(&td, &desk, &[]), "legacy", Some(answers), steps));
    for i in 0..5 {
        assert_eq!(call_meta(step(&report, i))["outcome"], "refused", "{report}");
    }
    assert!(!td.state_dir().join("sent").exists());
    let hows: Vec<Value> = td.payloads("tool.confirm").iter().map(|c| c["how"].clone()).collect();
    let not_approved = json!("mcp: not approved");
    assert_eq!(
        hows,
        [&not_approved, &not_approved, &not_approved, &not_approved, &json!("mcp: cancelled over MCP")]
            .map(Value::clone)
    );
    assert!(td.payloads("tool.confirm").iter().all(|c| c["approved"] == false));
}

#[test]
fn confirmation_without_elicitation_names_yes_and_yes_approves() {
    let td = TestDir::new();
    let desk = desk(&td);
    for (mode, _) in MODES {
        let report = mcp::drive(&scenario(stdio(&td, &desk, &[]), mode, None, json!([call("desk.send", json!({}))])));
        let refused = step(&report, 0);
        assert_eq!(refused["result"]["isError"], true, "{mode}: {refused}");
        assert_eq!(call_meta(refused)["outcome"], "refused");
        assert_eq!(
            text_of(refused),
            format!(
                "tool `desk.send` requires confirmation and the call was not approved: mcp: the MCP client could not \
                 be asked (it does not support elicitation) or did not answer\n{CONFIRM_HELP}"
            )
        );
        assert!(!td.state_dir().join("sent").exists());

        let report =
            mcp::drive(&scenario(stdio(&td, &desk, &["--yes"]), mode, None, json!([call("desk.send", json!({}))])));
        assert_eq!(call_meta(step(&report, 0))["outcome"], "ok", "{mode}: {report}");
        std::fs::remove_file(td.state_dir().join("sent")).unwrap();
    }
    let confirms = td.payloads("tool.confirm");
    let decisions: Vec<(&Value, &Value)> = confirms.iter().map(|c| (&c["approved"], &c["how"])).collect();
    let unasked = json!("mcp: the MCP client could not be asked (it does not support elicitation) or did not answer");
    let (no, yes, pre_approved) = (json!(false), json!(true), json!("pre-approved (--yes)"));
    assert_eq!(decisions, [(&no, &unasked), (&yes, &pre_approved), (&no, &unasked), (&yes, &pre_approved)]);
}

/// Bundle `drafter`: `mail.draft` asks which tone, then returns its answers.
fn drafter(td: &TestDir) -> PathBuf {
    td.bundle(
        "drafter",
        json!([bundle::runtime_tool("mail.draft", "ask.py", &["tone"])]),
        "[capabilities]\nexec = true\n",
    )
}

/// The client's answers to `mail.draft`'s question: accepted, formal.
fn formal() -> Value {
    json!([{"action": "accept", "content": {"tone": "formal"}}])
}

#[test]
fn questions_are_answered_through_elicitation_and_recorded_as_mcp() {
    let td = TestDir::new();
    let bundle = drafter(&td);
    for (mode, _) in MODES {
        let answers = formal();
        let report = mcp::drive(&scenario(
            stdio(&td, &bundle, &[]),
            mode,
            Some(answers),
            json!([call("mail.draft", json!({}))]),
        ));
        let record = step(&report, 0);
        assert_eq!(
            record["result"]["structuredContent"],
            json!({"result": {"answers": {"tone": "formal"}, "options": {}}}),
            "{mode}: {record}"
        );
        assert_eq!(call_meta(record)["attempts"], 2);
        let asked = report["elicitations"].as_array().unwrap();
        assert_eq!(asked.len(), 1, "{mode}: {asked:?}");
        assert_eq!(asked[0]["params"]["mode"], "form");
        assert_eq!(asked[0]["params"]["message"], "`mail.draft` asks:\n- Which tone?");
        assert_eq!(
            asked[0]["params"]["requestedSchema"],
            json!({"type": "object", "required": ["tone"], "properties": {"tone": {
                "type": "string", "title": "Which tone?", "enum": ["formal", "casual"]}}})
        );

        // Without elicitation, the error lists the question.
        let report =
            mcp::drive(&scenario(stdio(&td, &bundle, &[]), mode, None, json!([call("mail.draft", json!({}))])));
        let record = step(&report, 0);
        assert_eq!(record["result"]["isError"], true, "{mode}: {record}");
        assert_eq!(
            text_of(record),
            "tool `mail.draft` asks a question that no one answered: `tone` (\"Which tone?\", a string, one of \
             formal, casual)\nhelp: answer the questions when the client asks; this client could not be asked (it \
             does not support elicitation), so use one that does"
        );
        assert_eq!(call_meta(record)["outcome"], "error");
        assert_attempts_recorded(&td, record);
    }
    let answers: Vec<Value> = td.payloads("tool.answer").into_iter().map(|a| a["answers"].clone()).collect();
    let formal = json!([{"id": "tone", "value": "formal", "source": "mcp"}]);
    assert_eq!(answers, [formal.clone(), formal]);
}

#[test]
fn parallel_calls_overlap_and_their_frames_verify() {
    let td = TestDir::new();
    let state = td.state_dir();
    let nap = td.script(
        "nap.sh",
        &format!(
            "n=$(jq -r .tool.arguments.n \"$1\")\ndate +%s%N > {s}/$n.start\nsleep 1\ndate +%s%N > {s}/$n.end\necho '{{}}'",
            s = state.display()
        ),
    );
    let bundle = td.bundle(
        "napper",
        json!([with_fs(tool("nap.take", exec(nap.to_str().unwrap(), &[])), &state)]),
        &bundle::caps("exec = true\n", &state),
    );
    let calls: Vec<Value> = (0..8).map(|n| json!({"tool": "nap.take", "arguments": {"n": n}})).collect();
    let report = mcp::drive(&scenario(
        stdio(&td, &bundle, &["--max-calls", "8"]),
        "legacy",
        None,
        json!([{"op": "parallel", "calls": calls}]),
    ));
    let records = step(&report, 0)["calls"].as_array().unwrap();
    assert!(records.iter().all(|r| call_meta(r)["outcome"] == "ok"), "{records:?}");

    // Every call had started before any ended.
    let stamp = |name: String| -> u128 { std::fs::read_to_string(state.join(name)).unwrap().trim().parse().unwrap() };
    let last_start = (0..8).map(|n| stamp(format!("{n}.start"))).max().unwrap();
    let first_end = (0..8).map(|n| stamp(format!("{n}.end"))).min().unwrap();
    assert!(last_start < first_end, "the calls ran one after another: last start {last_start}, first end {first_end}");

    let events = td.events();
    let frames: Vec<&str> = kinds(&events).into_iter().filter(|k| matches!(*k, "tool.call" | "tool.result")).collect();
    assert_eq!(frames.len(), 16, "{frames:?}");
    assert_eq!(frames.iter().filter(|k| **k == "tool.call").count(), 8);
    let verified = td.rlp().args(["trace", "verify"]).output().unwrap();
    assert_eq!(verified.status.code(), Some(0), "{}", stdout(&verified));
}

/// Bundle `waiter`: `wait.long` starts `sleep 60` in the background, writes
/// its pid to `state/child.pid` and waits for it.
fn waiter(td: &TestDir) -> (PathBuf, PathBuf) {
    let state = td.state_dir();
    let pid_file = state.join("child.pid");
    let long =
        td.script("long.sh", &format!("sleep 60 &\necho $! > {p}.tmp && mv {p}.tmp {p}\nwait", p = pid_file.display()));
    let bundle = td.bundle(
        "waiter",
        json!([with_fs(tool("wait.long", exec(long.to_str().unwrap(), &[])), &state)]),
        &bundle::caps("exec = true\n", &state),
    );
    (bundle, pid_file)
}

/// The steps that call `wait.long`, cancel it once its child runs, and watch
/// the child for a second.
fn cancel_steps(pid_file: &Path) -> Value {
    json!([
        {"op": "call", "tool": "wait.long", "arguments": {}, "cancel": {"when_file": pid_file}},
        {"op": "watch_pid", "file": pid_file, "limit_ms": 1000},
    ])
}

/// Asserts that the driver saw its call cancelled and the tool's child gone
/// within a second of it.
fn assert_cancelled_and_gone(report: &Value) {
    let cancelled = step(report, 0);
    assert_eq!(cancelled["cancelled"], true, "{cancelled}");
    let watch = step(report, 1);
    let gone = watch["gone_at_ms"].as_f64().unwrap_or_else(|| panic!("the tool's child outlived the cancel: {watch}"));
    let after = gone - cancelled["cancelled_at_ms"].as_f64().unwrap();
    assert!(after < 1000.0, "the tool's child was gone {after} ms after the cancel");
}

/// Asserts that the last `tool.result` of the ledger is a cancellation.
fn assert_recorded_cancelled(td: &TestDir) {
    let results = td.payloads("tool.result");
    assert_eq!(results.last().unwrap()["error"]["kind"], "cancelled", "{results:?}");
}

#[test]
fn a_cancelled_call_kills_the_tool_and_its_children() {
    let td = TestDir::new();
    let (bundle, pid_file) = waiter(&td);
    let report = mcp::drive(&scenario(stdio(&td, &bundle, &[]), "legacy", None, cancel_steps(&pid_file)));
    assert_cancelled_and_gone(&report);
    assert_recorded_cancelled(&td);
}

#[test]
fn an_http_client_going_away_cancels_its_call() {
    let td = TestDir::new();
    let (bundle, pid_file) = waiter(&td);
    let server = HttpServe::start(&td, &bundle, &[]);
    let report = mcp::drive(&scenario(server.transport(None), "2026-07-28", None, cancel_steps(&pid_file)));
    assert_cancelled_and_gone(&report);
    assert_recorded_cancelled(&td);
}

/// A call waiting for a confirmation its client never gives, then
/// cancelled, frees its slot: with one slot, the next call runs.
#[test]
fn a_cancelled_call_stops_waiting_for_its_confirmation() {
    let td = TestDir::new();
    let desk = desk(&td);
    for transport in ["stdio", "http"] {
        let server = (transport == "http").then(|| HttpServe::start(&td, &desk, &["--max-calls", "1"]));
        let connect = match &server {
            Some(server) => server.transport(None),
            None => stdio(&td, &desk, &["--max-calls", "1"]),
        };
        let steps = json!([
            {"op": "call", "tool": "desk.send", "arguments": {}, "cancel": {"after_ms": 300}},
            call("desk.greet", json!({"name": "ada"})),
        ]);
        let report = mcp::drive(&scenario(connect, "legacy", Some(json!([{"hang": true}])), steps));
        assert_eq!(step(&report, 0)["cancelled"], true, "{transport}: {report}");
        assert_eq!(step(&report, 1)["result"]["structuredContent"], json!({"greeting": "hello ada"}), "{transport}");
    }
    assert!(!td.state_dir().join("sent").exists());
    let confirms = td.payloads("tool.confirm");
    assert_eq!(confirms.len(), 2);
    assert!(confirms.iter().all(|c| c["approved"] == false), "{confirms:?}");
}

#[test]
fn progress_is_reported_when_asked_for() {
    let td = TestDir::new();
    let desk = desk(&td);
    for (mode, _) in MODES {
        let steps = json!([{"op": "call", "tool": "desk.count", "arguments": {}, "progress": true}]);
        let report = mcp::drive(&scenario(stdio(&td, &desk, &[]), mode, None, steps));
        let progress: Vec<Value> = report["progress"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| json!([p["progress"], p["total"], p["message"]]))
            .collect();
        assert_eq!(
            progress,
            [
                json!([1.0, 3.0, "attempt 1 of at most 1 started"]),
                json!([2.0, 3.0, "attempt 1 ended"]),
                json!([3.0, 3.0, "the call ended and is recorded"]),
            ],
            "{mode}"
        );
    }
}

#[test]
fn progress_goes_on_after_a_round_of_questions() {
    // Under 2026-07-28 the questions end the request and the client's retry
    // resumes the call: what follows is reported under the retry's token.
    let td = TestDir::new();
    let bundle = drafter(&td);
    for (mode, _) in MODES {
        let answers = formal();
        let steps = json!([{"op": "call", "tool": "mail.draft", "arguments": {}, "progress": true}]);
        let report = mcp::drive(&scenario(stdio(&td, &bundle, &[]), mode, Some(answers), steps));
        let messages: Vec<&str> =
            report["progress"].as_array().unwrap().iter().map(|p| p["message"].as_str().unwrap()).collect();
        let after_answers = ["attempt 2 of at most 2 started", "attempt 2 ended", "the call ended and is recorded"];
        assert!(messages.ends_with(&after_answers), "{mode}: {messages:?}");
    }
}

/// `rlp serve` over stdio, spoken to line by line: the child, its stdin and
/// its stdout's lines.
fn raw_stdio(td: &TestDir, desk: &Path) -> (std::process::Child, ChildStdin, Lines<BufReader<ChildStdout>>) {
    let mut child = td
        .command()
        .arg("serve")
        .arg(desk)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input = child.stdin.take().unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, input, lines)
}

#[test]
fn stdio_stdout_carries_only_json_rpc() {
    let td = TestDir::new();
    let desk = desk(&td);
    let (child, mut input, mut lines) = raw_stdio(&td, &desk);
    let requests = [
        mcp::initialize(1),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "desk.greet", "arguments": {"name": "ada"}}}),
    ];
    for request in &requests {
        writeln!(input, "{request}").unwrap();
    }
    let mut seen = Vec::new();
    while !seen.iter().any(|m: &Value| m["id"] == 3) {
        let line = lines.next().expect("stdout ended before the call's answer").unwrap();
        let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
        seen.push(message);
    }
    drop(input);
    for line in lines {
        let line = line.unwrap();
        let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let ids: Vec<&Value> = seen.iter().filter_map(|m| m.get("id")).collect();
    assert_eq!(ids, [&json!(1), &json!(2), &json!(3)]);
    assert_eq!(seen[2]["result"]["structuredContent"], json!({"greeting": "hello ada"}));
    assert!(stderr(&out).lines().any(|l| l.starts_with("rlp serve: trace ")), "{}", stderr(&out));
}

#[test]
fn stdio_drops_a_line_past_its_bound_and_goes_on() {
    let td = TestDir::new();
    let desk = desk(&td);
    let (child, mut input, lines) = raw_stdio(&td, &desk);
    let huge = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "desk.greet", "arguments": {"name": "x".repeat(rlp::serve::MAX_MESSAGE_BYTES)}}});
    for request in [
        mcp::initialize(1),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        huge,
        json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}),
    ] {
        writeln!(input, "{request}").unwrap();
    }
    drop(input);
    let ids: Vec<Value> =
        lines.map(|line| serde_json::from_str::<Value>(&line.unwrap()).unwrap()["id"].clone()).collect();
    assert_eq!(ids, [json!(1), json!(3)]);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(td.payloads("tool.call").is_empty());
}

#[test]
fn http_refuses_foreign_origins_and_unbound_addresses() {
    let td = TestDir::new();
    let desk = desk(&td);
    let server = HttpServe::start(&td, &desk, &[]);
    let (status, _) = mcp::post(server.address(), &[("Origin", "http://evil.example")], &mcp::initialize(1));
    assert_eq!(status, 403);
    let (status, body) = mcp::post(server.address(), &[("Origin", "http://127.0.0.1")], &mcp::initialize(1));
    assert_eq!(status, 200, "{body}");

    let out = td.rlp().arg("serve").arg(&desk).args(["--http", "0.0.0.0:0"]).timeout(HANG_GUARD).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).lines().filter(|l| !l.starts_with("note: ")).collect::<Vec<_>>(),
        [
            "error: refusing to serve on 0.0.0.0:0 without a token: only loopback addresses are served without one",
            "  help: pass --token-file FILE (clients then send `Authorization: Bearer <token>`), or bind 127.0.0.1",
        ]
    );
    assert_eq!(stdout(&out), "");
}

#[test]
fn http_refuses_a_body_past_its_bound() {
    let td = TestDir::new();
    let desk = desk(&td);
    let server = HttpServe::start(&td, &desk, &[]);
    let mut big = mcp::initialize(1);
    big["params"]["clientInfo"]["name"] = json!("x".repeat(rlp::serve::MAX_MESSAGE_BYTES));
    let (status, _) = mcp::post(server.address(), &[], &big);
    assert_eq!(status, 413);
    let (status, body) = mcp::post(server.address(), &[], &mcp::initialize(2));
    assert_eq!(status, 200, "{body}");
}

#[test]
fn http_with_a_token_requires_the_bearer() {
    let td = TestDir::new();
    let desk = desk(&td);
    let token_file = td.join("token");
    std::fs::write(&token_file, "s3cret-token-for-the-tests\n").unwrap();
    std::fs::set_permissions(&token_file, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let out = td
        .rlp()
        .arg("serve")
        .arg(&desk)
        .args(["--http", "127.0.0.1:0", "--token-file"])
        .arg(&token_file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).lines().filter(|l| !l.starts_with("note: ")).collect::<Vec<_>>(),
        [
            format!(
                "error: the token file {} is readable by other users (mode 0644); refusing to use it",
                token_file.display()
            ),
            format!(
                "  help: run `chmod 600 {}`, and replace the token if others may have read it",
                token_file.display()
            ),
        ]
    );
    std::fs::set_permissions(&token_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let server = HttpServe::start(&td, &desk, &["--token-file", token_file.to_str().unwrap()]);
    let (status, _) = mcp::post(server.address(), &[], &mcp::initialize(1));
    assert_eq!(status, 401);
    let (status, _) = mcp::post(server.address(), &[("Authorization", "Bearer wrong")], &mcp::initialize(1));
    assert_eq!(status, 401);
    for (mode, version) in MODES {
        let steps = json!([call("desk.greet", json!({"name": "ada"}))]);
        let report = mcp::drive(&scenario(server.transport(Some("s3cret-token-for-the-tests")), mode, None, steps));
        assert_eq!(report["protocol_version"], version);
        assert_eq!(step(&report, 0)["result"]["structuredContent"], json!({"greeting": "hello ada"}), "{report}");
    }
}

#[test]
fn a_served_trace_replays_and_verifies() {
    let td = TestDir::new();
    let desk = desk(&td);
    let steps = json!([call("desk.greet", json!({"name": "ada"})), call("desk.count", json!({}))]);
    let report = mcp::drive(&scenario(stdio(&td, &desk, &[]), "legacy", None, steps));
    let trace = call_meta(step(&report, 0))["trace_id"].as_str().unwrap().to_string();
    assert_eq!(call_meta(step(&report, 1))["trace_id"], trace.as_str());
    let out = td.rlp().args(["replay", &trace, "--bundle"]).arg(&desk).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    rlp_snapshot!(&td, &out);
    let verified = td.rlp().args(["trace", "verify"]).output().unwrap();
    assert_eq!(verified.status.code(), Some(0), "{}", stdout(&verified));
}

#[test]
fn a_client_trace_id_groups_stateless_calls() {
    let td = TestDir::new();
    let desk = desk(&td);
    let trace = "01900000-0000-7000-8000-000000000001";
    let meta = json!({"dev.runloop/trace_id": trace});
    let steps = json!([
        {"op": "call", "tool": "desk.count", "arguments": {}, "meta": meta},
        {"op": "call", "tool": "desk.count", "arguments": {}, "meta": meta},
        call("desk.count", json!({})),
    ]);
    let report = mcp::drive(&scenario(stdio(&td, &desk, &[]), "2026-07-28", None, steps));
    assert_eq!(call_meta(step(&report, 0))["trace_id"], trace);
    assert_eq!(call_meta(step(&report, 1))["trace_id"], trace);
    assert_eq!(call_meta(step(&report, 2))["trace_id"], mcp::stdio_trace(&td).as_str());
}

/// The names a `list` step of a driver report shows.
fn names(record: &Value) -> Vec<&str> {
    record["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect()
}

#[test]
fn the_operators_list_and_tools_narrow_tools_list_and_calls_outside_them_are_refused() {
    let td = TestDir::new();
    let desk = desk(&td);
    let config = td.write_config("[agents.desk.tools]\ndeny = [\"desk.send\", \"desk.b*\"]\n");
    let denied_send = format!(
        "tool `desk.send` is not exposed: denied by the operator's list in {c} (\"desk.send\")\n\
         help: change `allow`/`deny` under [agents.desk.tools] in {c}",
        c = config.display()
    );
    for (mode, _) in MODES {
        let steps = json!([{"op": "list"}, call("desk.send", json!({})), call("desk.count", json!({}))]);
        let report = mcp::drive(&scenario(stdio(&td, &desk, &[]), mode, None, steps));
        assert_eq!(names(step(&report, 0)), ["desk.count", "desk.greet", "desk.lookup"], "{mode}");
        let send = step(&report, 1);
        assert_eq!(send["result"]["isError"], true, "{mode}: {send}");
        assert_eq!(call_meta(send)["outcome"], "refused");
        assert_eq!(call_meta(send)["attempts"], 0);
        assert_eq!(text_of(send), denied_send);
        assert_eq!(step(&report, 2)["result"]["structuredContent"], json!({"result": 3}), "{mode}");

        // --tools narrows within the config's lists: desk.send stays denied.
        let served = stdio(&td, &desk, &["--tools", "desk.g*,desk.send", "--tools", "desk.count"]);
        let steps = json!([
            {"op": "list"},
            call("desk.lookup", json!({})),
            call("desk.send", json!({})),
            call("desk.greet", json!({"name": "ada"})),
        ]);
        let report = mcp::drive(&scenario(served, mode, None, steps));
        assert_eq!(names(step(&report, 0)), ["desk.count", "desk.greet"], "{mode}");
        let lookup = step(&report, 1);
        assert_eq!(call_meta(lookup)["outcome"], "refused", "{mode}: {lookup}");
        assert_eq!(
            text_of(lookup),
            "tool `desk.lookup` is not exposed: not allowed by the operator's list of --tools\n\
             help: serve with a --tools pattern that matches it (e.g. --tools desk.lookup), or without --tools"
        );
        assert_eq!(text_of(step(&report, 2)), denied_send);
        assert_eq!(step(&report, 3)["result"]["structuredContent"], json!({"greeting": "hello ada"}), "{mode}");
    }
    assert!(!td.state_dir().join("sent").exists());
    // Every refusal is a deny frame of the list, and nothing else was decided for those calls.
    let audits = td.payloads("cap.audit");
    let refused: Vec<(&str, &str)> = audits
        .iter()
        .filter(|p| p["decision"] == "deny")
        .map(|p| (p["tool"].as_str().unwrap(), p["capability"].as_str().unwrap()))
        .collect();
    assert_eq!(refused, [("desk.send", "tool"), ("desk.lookup", "tool"), ("desk.send", "tool")].repeat(MODES.len()));
    let send_denials: Vec<&Value> = audits.iter().filter(|p| p["tool"] == "desk.send").map(|p| &p["reason"]).collect();
    assert!(
        send_denials
            .iter()
            .all(|r| **r == format!("denied by the operator's list in {} (\"desk.send\")", config.display())),
        "{send_denials:?}"
    );
    assert!(td.payloads("tool.call").iter().all(|c| c["tool"] != "desk.send" && c["tool"] != "desk.lookup"));
}

#[test]
fn tools_takes_tool_id_patterns_and_warns_of_one_that_matches_nothing() {
    let td = TestDir::new();
    let desk = desk(&td);
    rlp_snapshot!(&td, td.rlp().arg("serve").arg(&desk).args(["--tools", "Desk.*"]));
    rlp_snapshot!(&td, td.rlp().arg("serve").arg(&desk).args(["--tools", "desk.*,nope.*"]).write_stdin(""));
}

/// Bundle `slow`: `slow.answer` sleeps a second, then answers `{"done": true}`.
fn slow(td: &TestDir) -> PathBuf {
    let answer = td.script("answer.sh", "sleep 1\necho '{\"done\": true}'");
    td.bundle(
        "slow",
        json!([tool("slow.answer", exec(answer.to_str().unwrap(), &[]))]),
        &bundle::caps("exec = true\n", &td.state_dir()),
    )
}

/// One POST of `message` in session `session` (none: opens one).
fn post(
    client: &reqwest::blocking::Client,
    url: &str,
    session: Option<&str>,
    message: Value,
) -> reqwest::blocking::Response {
    let mut request = client
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .json(&message);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session).header("mcp-protocol-version", "2025-11-25");
    }
    request.send().unwrap()
}

/// The JSON-RPC answer with id `id` among the SSE events of `stream`.
fn answer_in(stream: reqwest::blocking::Response, id: u64) -> Value {
    BufReader::new(stream)
        .lines()
        .map_while(Result::ok)
        .filter_map(|line| line.strip_prefix("data:").and_then(|data| serde_json::from_str::<Value>(data.trim()).ok()))
        .find(|message| message["id"] == id)
        .unwrap_or_else(|| panic!("no answer with id {id} on the stream"))
}

/// A client whose response stream drops mid-call reconnects with
/// `Last-Event-ID` and gets the call's result; the drop did not cancel the
/// call, which is recorded as a success.
#[test]
fn a_dropped_session_stream_resumes_with_last_event_id() {
    let td = TestDir::new();
    let bundle = slow(&td);
    let server = HttpServe::start(&td, &bundle, &[]);
    let client = reqwest::blocking::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "resume-test", "version": "1"}}});
    let opened = post(&client, &server.url, None, init);
    let session = opened.headers()["mcp-session-id"].to_str().unwrap().to_string();
    drop(opened);
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(&client, &server.url, Some(&session), initialized).status(), 202);

    let call =
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "slow.answer", "arguments": {}}});
    let streamed = post(&client, &server.url, Some(&session), call);
    assert_eq!(streamed.headers()["content-type"], "text/event-stream");
    let mut lines = BufReader::new(streamed).lines();
    // The priming event names the stream; the connection drops after it.
    let last = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|line| line.strip_prefix("id:").map(|id| id.trim().to_string()))
        .unwrap_or_else(|| panic!("the stream named no event"));
    drop(lines);

    let resumed = client
        .get(&server.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .header("last-event-id", &last)
        .send()
        .unwrap();
    assert_eq!(resumed.status(), 200);
    let answer = answer_in(resumed, 2);
    assert_eq!(answer["result"]["structuredContent"], json!({"result": {"done": true}}), "{answer}");

    let events = td.events();
    let results: Vec<Value> = events.iter().filter(|e| e.kind == "tool.result").map(|e| payload(e).clone()).collect();
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["result"], json!({"done": true}), "the drop cancelled the call: {results:?}");
}

/// A JP client's `_meta` tool context (seed 002, `computer.jp/tool`; rlp's
/// own `dev.runloop/tool` alike) brings the call's answers and options:
/// the tool is not asked again, the options reach it, both are checked as
/// `--answer` and `--option` are, and a context that is not an object is
/// refused.
#[test]
fn a_callers_tool_context_in_meta_gives_answers_and_options() {
    let td = TestDir::new();
    let bundle = drafter(&td);
    let context = |key: &str, answers: Value| {
        json!({"op": "call", "tool": "mail.draft", "arguments": {},
               "meta": {key: {"name": "mail.draft", "answers": answers, "options": {"signature": false}}}})
    };
    let steps = json!([
        context("computer.jp/tool", json!({"tone": "formal"})),
        context("dev.runloop/tool", json!({"tone": "casual"})),
        context("computer.jp/tool", json!({"tone": "rude"})),
        {"op": "call", "tool": "mail.draft", "arguments": {}, "meta": {"computer.jp/tool": "formal"}},
    ]);
    let report = mcp::drive(&scenario(stdio(&td, &bundle, &[]), "legacy", None, steps));
    for (i, tone) in [(0, "formal"), (1, "casual")] {
        let record = step(&report, i);
        assert_eq!(
            record["result"]["structuredContent"],
            json!({"result": {"answers": {"tone": tone}, "options": {"signature": false}}}),
            "{record}"
        );
        // Answered from the context when the tool asked, as from --answer:
        // the client is never asked.
        assert_eq!(call_meta(record)["attempts"], 2, "{record}");
    }
    assert!(report["elicitations"].as_array().unwrap().is_empty(), "{report}");
    // An answer its question does not allow is refused, as from --answer.
    let refused = &step(&report, 2)["error"];
    assert_eq!(refused["code"], -32602, "{report}");
    assert_eq!(
        refused["message"],
        "the answer to `tone` (\"rude\", from mcp) does not fit: \"rude\" is not one of \"formal\" or \"casual\" (question `tone` wants a string, one of formal, casual)"
    );
    assert_eq!(
        step(&report, 3)["error"],
        json!({"code": -32602, "data": null, "message": "`_meta` `computer.jp/tool` must be an object"})
    );
    let answered = td.payloads("tool.answer");
    assert_eq!(answered[0]["answers"], json!([{"id": "tone", "value": "formal", "source": "mcp"}]));
    assert_eq!(td.payloads("tool.call")[0]["options"], json!({"signature": false}));
}

/// Three calls that need confirmation at once keep one form open at a time
/// with their client (seed 001: permission prompts serialized): each form
/// is asked only once the one before it was answered.
#[test]
fn concurrent_confirmations_are_asked_one_at_a_time() {
    let td = TestDir::new();
    let tool = with(bundle::runtime_tool("mail.send", "ok.sh", &[]), json!({"requires_confirmation": true}));
    let bundle = td.bundle("sender", json!([tool]), "[capabilities]\nexec = true\n");
    let approve = json!({"action": "accept", "content": {"approve": true}, "after_ms": 200});
    let calls: Vec<Value> = (0..3).map(|_| json!({"tool": "mail.send", "arguments": {}})).collect();
    let report = mcp::drive(&scenario(
        stdio(&td, &bundle, &["--max-calls", "3"]),
        "legacy",
        Some(json!([approve, approve, approve])),
        json!([{"op": "parallel", "calls": calls}]),
    ));
    let records = step(&report, 0)["calls"].as_array().unwrap();
    assert!(records.iter().all(|r| call_meta(r)["outcome"] == "ok"), "{records:?}");
    let asked = report["elicitations"].as_array().unwrap();
    assert_eq!(asked.len(), 3, "{report}");
    for pair in asked.windows(2) {
        let (answered, next) = (pair[0]["answered_ms"].as_f64().unwrap(), pair[1]["at_ms"].as_f64().unwrap());
        assert!(next >= answered, "a form was asked while another was open: {asked:?}");
    }
}
