//! The MCP bridge (docs/bridge.md): tools whose transport is `mcp`, called
//! through the MCP servers tools.json declares under `servers`, with real
//! servers started by real `rlp tools call` and `rlp serve` processes: the
//! tests' own server `tests/bridge/servers/seed.py` (the MCP Python SDK),
//! and the reference filesystem, memory and everything servers from npm and
//! the time server from PyPI, all installed by `tests/bridge/setup.sh` under
//! the cargo target folder (`target/bridge`, see its `servers.env`).
//!
//! Every stdio server runs in the kernel sandbox with its server's grants,
//! so each bundle grants what its server's program reads: the Python or
//! Node.js installation, `target/bridge` and the folders a test hands it.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::bridge::{
    HttpSeed, echo_description, one_text, pin_of, seed_command, seed_folders, servers, succeeded, unsigned_note,
};
use crate::support::bundle::{self, with};
use crate::support::files;
use crate::support::mcp::{self, HttpServe, call, scenario, stdio};
use crate::support::output::{self, stderr, stdout};
use crate::support::process::is_running;

/// The SDK's connect modes and the revision each speaks.
const MODES: [(&str, &str); 2] = [("legacy", "2025-11-25"), ("2026-07-28", "2026-07-28")];

/// The `timeout_ms` of `seed.hang`.
const HANG_TIMEOUT_MS: u64 = 1500;

/// A pause between two calls of `rlp serve`: longer than an idle thread
/// of a tokio blocking pool lives (10 s), which the calls run on.
const IDLE: Duration = Duration::from_secs(12);

/// What the seed server says of itself at the handshake, as the call frame
/// records it.
fn seed_server_record() -> Value {
    json!({"name": "rlp-bridge-seed", "version": "1.0.0", "protocol": "2025-11-25"})
}

// ---------------------------------------------------------------------------
// Bundles of bridged tools

/// A server of a bridged bundle: its name, its tools.json entry (without
/// `capabilities`, which are filled in) and the folders it needs (`fs:`).
struct Server {
    name: &'static str,
    entry: Value,
    fs: Vec<PathBuf>,
}

impl Server {
    /// What the server needs, and so what each of its tools declares:
    /// `exec` and its folders.
    fn capabilities(&self) -> Vec<String> {
        std::iter::once("exec".to_string()).chain(self.fs.iter().map(|dir| format!("fs:{}", dir.display()))).collect()
    }
}

/// A stdio server running `command` with `args`, needing the folders `fs`.
fn stdio_server(name: &'static str, command: &str, args: &[&str], fs: Vec<PathBuf>) -> Server {
    Server { name, entry: json!({"command": command, "args": args}), fs }
}

/// Tool `id` living in `server` under the name `tool`: an object in,
/// anything out, no confirmation, unpinned.
fn mcp_tool(id: &str, server: &str, tool: &str) -> Value {
    bundle::tool(id, json!({"kind": "mcp", "server": server, "tool": tool}))
}

/// Writes bundle `agents/<name>` with `servers` and `tools`: each server
/// and each tool that declares no capabilities of its own declare what
/// their server needs (its folders, and its secrets), and policy.caps
/// grants `exec`, every server's folders and their secrets.
fn bridged(td: &TestDir, name: &str, servers: &[Server], tools: Vec<Value>) -> PathBuf {
    let mut entries = serde_json::Map::new();
    let mut folders: Vec<String> = Vec::new();
    let mut secrets: Vec<Value> = Vec::new();
    for server in servers {
        let mut entry = server.entry.clone();
        entry["capabilities"] = json!(server.capabilities());
        entries.insert(server.name.to_string(), entry);
        for dir in &server.fs {
            let dir = dir.display().to_string();
            if !folders.contains(&dir) {
                folders.push(dir);
            }
        }
        secrets.extend(server.entry.get("secrets").and_then(Value::as_array).into_iter().flatten().cloned());
    }
    let tools: Vec<Value> = tools
        .into_iter()
        .map(|mut tool| {
            if tool.get("capabilities").is_none() {
                let named = tool["transport"]["server"].as_str().expect("an mcp tool").to_string();
                let server = servers.iter().find(|s| s.name == named).expect("a server of the bundle");
                tool["capabilities"] = json!(server.capabilities());
                if let Some(secrets) = server.entry.get("secrets") {
                    tool["secrets"] = secrets.clone();
                }
            }
            tool
        })
        .collect();
    let mut caps = format!("[capabilities]\nexec = true\nfs = {}\n", serde_json::to_string(&folders).unwrap());
    if !secrets.is_empty() {
        caps.push_str(&format!("secrets = {}\n", Value::Array(secrets)));
    }
    td.bundle_document(name, &json!({"version": 1, "servers": entries, "tools": tools}), &caps)
}

/// The seed server of a test's bundle: seed.py on the SDK's Python,
/// granted the folders it needs.
fn seed_server(td: &TestDir) -> Server {
    let command = seed_command(td);
    Server { name: "seed", entry: json!({"command": command[0], "args": command[1..]}), fs: seed_folders(td) }
}

/// Tool `seed.<tool>`: seed.py's `tool`.
fn seed_tool(tool: &str) -> Value {
    mcp_tool(&format!("seed.{tool}"), "seed", tool)
}

/// Bundle `seed` over seed.py: one tool for each of its tools, besides
/// `seed.flaky` (3 attempts), `seed.hang` (a 1.5 s timeout),
/// `seed.outcome_twice` (`outcome` with 2 attempts) and `seed.echo_options`
/// (`echo_meta` taking options).
fn seed_bundle(td: &TestDir) -> PathBuf {
    let mut tools: Vec<Value> = [
        "echo_meta",
        "structured",
        "outcome",
        "needs_input",
        "ask",
        "sample",
        "roots",
        "progress",
        "crash",
        "read_file",
    ]
    .into_iter()
    .map(seed_tool)
    .collect();
    tools.push(with(seed_tool("flaky"), json!({"retry": {"max_attempts": 3}})));
    tools.push(with(seed_tool("hang"), json!({"timeout_ms": HANG_TIMEOUT_MS})));
    tools.push(with(mcp_tool("seed.outcome_twice", "seed", "outcome"), json!({"retry": {"max_attempts": 2}})));
    tools.push(with(
        mcp_tool("seed.echo_options", "seed", "echo_meta"),
        json!({"options_schema": {"type": "object", "properties": {"level": {"type": "integer"}}}}),
    ));
    bridged(td, "seed", &[seed_server(td)], tools)
}

// ---------------------------------------------------------------------------
// Calls and what they leave

/// `rlp tools call <bundle> <tool> --args <args> <extra…>` with an empty
/// stdin.
fn call_tool(td: &TestDir, bundle: &Path, tool: &str, args: Value, extra: &[&str]) -> Output {
    td.call(bundle, tool, args).args(extra).write_stdin("").output().unwrap()
}

/// Asserts that a call exited with `code`, printed nothing on stdout, and
/// on stderr exactly the unsigned note, `error: <message>` and
/// `  help: <help>`.
#[track_caller]
fn assert_failed(out: &Output, bundle: &Path, code: i32, message: &str, help: &str) {
    assert_eq!(out.status.code(), Some(code), "{}", output::text(out));
    assert_eq!(stdout(out), "", "{}", output::text(out));
    assert_eq!(stderr(out), format!("{}error: {message}\n  help: {help}\n", unsigned_note(bundle)));
}

/// The help of a failed tool: see its message, and the invocation.
fn see_message(td: &TestDir) -> String {
    format!("see the tool's message; the call is recorded under invocation {}", last_invocation(td))
}

/// The invocation id of the last call of the default home.
fn last_invocation(td: &TestDir) -> String {
    let calls = td.payloads("tool.call");
    calls.last().expect("a tool.call frame")["invocation_id"].as_str().unwrap().to_string()
}

/// The frames of kind `kind` of invocation `invocation`.
fn frames_of(td: &TestDir, kind: &str, invocation: &str) -> Vec<Value> {
    td.payloads(kind).into_iter().filter(|p| p["invocation_id"] == invocation).collect()
}

/// The processes (not zombies) whose command line holds `marker`.
fn processes_with(marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(pid) = name.parse::<i32>() else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        if String::from_utf8_lossy(&cmdline).contains(marker) && is_running(&name) {
            found.push(pid);
        }
    }
    found
}

/// The test's seed.py processes.
fn seed_processes(td: &TestDir) -> Vec<i32> {
    processes_with(echo_description(td).to_str().unwrap())
}

/// Waits up to `limit` until the test has no seed.py process; returns
/// those left at the limit.
fn wait_for_no_seed(td: &TestDir, limit: Duration) -> Vec<i32> {
    let deadline = Instant::now() + limit;
    loop {
        let left = seed_processes(td);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How long a stopped server may take to be gone: its grace to exit once
/// its stdin is closed (0.5 s), with room for a busy machine.
const STOPPING: Duration = Duration::from_secs(3);

/// The pid in the text of `/proc/self/stat`, as seed.py read it.
fn pid_of_stat(stat: &str) -> i32 {
    stat.split_whitespace().next().and_then(|pid| pid.parse().ok()).unwrap_or_else(|| panic!("not a stat: {stat}"))
}

// ---------------------------------------------------------------------------
// Serving bridged tools

/// The record of step `i` of a driver report.
fn step(report: &Value, i: usize) -> &Value {
    &report["steps"][i]
}

/// The text of the one content block the bridged server answered, as
/// `rlp serve` passes it on: the server's content blocks as it sent them
/// (with its `structuredContent` when it gave one).
#[track_caller]
fn served_text(record: &Value) -> String {
    let result = &record["result"];
    assert_eq!(result["isError"], false, "{record}");
    let content = result["content"].as_array().unwrap_or_else(|| panic!("not a bridged server's answer: {record}"));
    assert_eq!(content.len(), 1, "{record}");
    assert_eq!(content[0]["type"], "text", "{record}");
    content[0]["text"].as_str().unwrap().to_string()
}

/// The text of the one content block of an `isError` result of `rlp serve`.
#[track_caller]
fn served_error(record: &Value) -> String {
    let result = &record["result"];
    assert_eq!(result["isError"], true, "{record}");
    let content = result["content"].as_array().unwrap_or_else(|| panic!("no content: {record}"));
    assert_eq!(content.len(), 1, "{record}");
    content[0]["text"].as_str().unwrap().to_string()
}

/// The `dev.runloop/call` meta of a served call's result.
fn call_meta(record: &Value) -> &Value {
    &record["result"]["_meta"]["dev.runloop/call"]
}

/// A call step reading the server's own `/proc/self/stat`.
fn read_own_stat() -> Value {
    call("seed.read_file", json!({"path": "/proc/self/stat"}))
}

/// `rlp serve --http` of the test's bundle `seed` ([`seed_bundle`]).
fn serve_seed(td: &TestDir) -> HttpServe {
    HttpServe::start(td, &seed_bundle(td), &[])
}

/// The pid of the seed.py behind `serve`, as it reads it in a call of a
/// client session of its own.
fn served_seed_pid(serve: &HttpServe) -> i32 {
    let report = mcp::drive(&scenario(serve.transport(None), "legacy", None, json!([read_own_stat()])));
    pid_of_stat(&served_text(step(&report, 0)))
}

// ---------------------------------------------------------------------------
// rlp tools call with the seed server

#[test]
fn the_answer_comes_back_with_the_tool_context_in_meta_only_when_there_are_options_or_answers() {
    let td = TestDir::new();
    let seed = seed_bundle(&td);

    // Without answers or options the request's _meta holds only the
    // progress token: no tool context (seed 002).
    let out = call_tool(&td, &seed, "seed.echo_meta", json!({"text": "hi"}), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", output::text(&out));
    let expected = one_text(r#"{"text":"hi","meta":{"progressToken":1}}"#);
    assert_eq!(stdout(&out), format!("{}\n", serde_json::to_string_pretty(&expected).unwrap()));
    assert_eq!(stderr(&out), unsigned_note(&seed));
    // Answers given up front that no question asked for are not context.
    let out = call_tool(&td, &seed, "seed.echo_meta", json!({"text": "hi"}), &["--answer", "colour=red"]);
    assert_eq!(succeeded(&out), expected);

    // With options, the tool and its context ride under rlp's keys and the seed's.
    let out = call_tool(&td, &seed, "seed.echo_options", json!({"text": "hi"}), &["--option", "level=3"]);
    let answer = succeeded(&out);
    let text = answer["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(answer, one_text(text));
    let call = td.events().into_iter().rev().find(|e| e.kind == "tool.call").unwrap();
    let trace_id = call.provenance().unwrap().trace_id.to_string();
    let invocation_id = last_invocation(&td);
    let tool =
        json!({"name": "seed.echo_options", "arguments": {"text": "hi"}, "answers": {}, "options": {"level": 3}});
    let context = json!({"action": "run", "root": seed.display().to_string(), "trace_id": trace_id,
                         "invocation_id": invocation_id});
    let echoed: Value = serde_json::from_str(text).unwrap();
    assert_eq!(
        echoed,
        json!({"text": "hi", "meta": {
            "dev.runloop/tool": tool, "dev.runloop/context": context,
            "computer.jp/tool": tool, "computer.jp/context": context,
            "progressToken": 1,
        }})
    );
    // The keys in this order: rlp's, then the seed's.
    let keys: Vec<&String> = echoed["meta"].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["dev.runloop/tool", "dev.runloop/context", "computer.jp/tool", "computer.jp/context", "progressToken"]
    );
}

#[test]
fn outcome_envelopes_in_the_answer_are_unwrapped_and_anything_else_is_kept_whole() {
    let td = TestDir::new();
    let seed = seed_bundle(&td);
    let outcome = |kind: &str| call_tool(&td, &seed, "seed.outcome", json!({"kind": kind}), &[]);

    assert_eq!(succeeded(&outcome("success")), json!({"ok": true}));

    let out = outcome("error");
    assert_failed(&out, &seed, 1, "tool `seed.outcome` failed: it broke", &see_message(&td));

    let out = outcome("success_but_is_error");
    assert_failed(
        &out,
        &seed,
        1,
        "tool `seed.outcome` failed: the server `seed` flagged its answer `isError` while its content is an outcome \
         envelope of `success`; the MCP flag wins",
        &see_message(&td),
    );

    // Two blocks are no envelope, even when the first is one.
    assert_eq!(
        succeeded(&outcome("two_contents")),
        json!({"content": [
            {"type": "text", "text": r#"{"outcome":"success","result":{"ok":true}}"#},
            {"type": "text", "text": "more"},
        ]})
    );
    assert_eq!(succeeded(&outcome("plain_text")), one_text("hello, world"));

    // Structured content is the result.
    let out = call_tool(&td, &seed, "seed.structured", json!({"n": 21}), &[]);
    assert_eq!(succeeded(&out), json!({"doubled": 42}));

    // Each call recorded its result, or its error, once.
    let results = td.payloads("tool.result");
    assert_eq!(results.len(), 6, "{results:?}");
    assert_eq!(results[1]["error"]["message"], "tool `seed.outcome` failed: it broke");
    assert_eq!(results[1]["error"]["transient"], false);
    assert_eq!(results[0]["result"], json!({"ok": true}));
}

#[test]
fn a_transient_error_is_retried_up_to_the_tools_attempts_and_each_attempt_recorded() {
    let td = TestDir::new();
    let seed = seed_bundle(&td);

    // flaky fails transiently twice, then succeeds: 3 attempts allowed.
    let out = call_tool(&td, &seed, "seed.flaky", json!({"key": "k"}), &[]);
    assert_eq!(succeeded(&out), json!({"calls": 3}));
    let invocation = last_invocation(&td);
    let results = frames_of(&td, "tool.result", &invocation);
    let attempts: Vec<&Value> = results.iter().map(|r| &r["attempt"]).collect();
    assert_eq!(attempts, [1, 2, 3]);
    for failed in &results[..2] {
        assert_eq!(
            failed["error"],
            json!({"kind": "tool", "message": "tool `seed.flaky` failed: busy", "retry_after_ms": 5,
                   "transient": true, "will_retry": true}),
            "{failed}"
        );
    }
    assert_eq!(results[2]["result"], json!({"calls": 3}));
    // The same server answered all three (it counts in its memory).
    let shown = td.rlp().args(["trace", "show", "last", "--format", "json"]).output().unwrap();
    let summary = &succeeded(&shown)["summary"];
    assert_eq!(
        (&summary["calls"], &summary["ok"], &summary["retries"]),
        (&json!(1), &json!(1), &json!(2)),
        "{summary}"
    );

    // A transient error on every attempt fails once they are spent.
    let out = call_tool(&td, &seed, "seed.outcome_twice", json!({"kind": "transient"}), &[]);
    assert_failed(
        &out,
        &seed,
        1,
        "tool `seed.outcome_twice` failed: try later (after 2 attempts)",
        "the tool says the failure is transient; retry later, or set retry.max_attempts in tools.json",
    );
    let results = frames_of(&td, "tool.result", &last_invocation(&td));
    let attempts: Vec<(&Value, &Value)> = results.iter().map(|r| (&r["attempt"], &r["error"]["will_retry"])).collect();
    assert_eq!(attempts, [(&json!(1), &json!(true)), (&json!(2), &json!(false))]);

    // With the default of one attempt, nothing is retried.
    let out = call_tool(&td, &seed, "seed.outcome", json!({"kind": "transient"}), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", output::text(&out));
    assert_eq!(frames_of(&td, "tool.result", &last_invocation(&td)).len(), 1);
}

#[test]
fn a_needs_input_answer_asks_the_question_and_the_tool_is_called_again_with_the_answers() {
    let td = TestDir::new();
    let seed = seed_bundle(&td);

    let out = call_tool(&td, &seed, "seed.needs_input", json!({"topic": "t"}), &["--answer", "colour=red"]);
    // seed.py succeeds once the answer came in the tool context.
    assert_eq!(succeeded(&out), json!({"topic": "t", "colour": "red"}));
    let invocation = last_invocation(&td);
    let inquiries = frames_of(&td, "tool.inquiry", &invocation);
    assert_eq!(inquiries.len(), 1, "{inquiries:?}");
    assert_eq!(inquiries[0]["attempt"], 1);
    assert_eq!(
        inquiries[0]["questions"],
        json!([{"id": "colour", "text": "Which colour?", "schema": {"type": "string", "enum": ["red", "green"]}}])
    );
    let answers = frames_of(&td, "tool.answer", &invocation);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["answers"], json!([{"id": "colour", "value": "red", "source": "flag"}]));
    let results = frames_of(&td, "tool.result", &invocation);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!((&results[0]["attempt"], &results[0]["result"]), (&json!(2), &json!({"topic": "t", "colour": "red"})));

    // No terminal and no answer: the question goes unanswered (exit 2).
    let out = call_tool(&td, &seed, "seed.needs_input", json!({"topic": "t"}), &[]);
    assert_failed(
        &out,
        &seed,
        2,
        "tool `seed.needs_input` asks a question that no one answered: `colour` (\"Which colour?\", a string, one of \
         red, green)",
        "answer with --answer colour=VALUE, or call from a terminal to be asked",
    );
}

#[test]
fn an_elicitation_during_the_call_is_asked_as_the_calls_question_and_recorded() {
    let td = TestDir::new();
    let seed = seed_bundle(&td);

    let out = call_tool(&td, &seed, "seed.ask", json!({}), &["--answer", "name=Ada"]);
    assert_eq!(succeeded(&out), one_text(r#"{"action":"accept","content":{"name":"Ada"}}"#));
    let invocation = last_invocation(&td);
    let inquiries = frames_of(&td, "tool.inquiry", &invocation);
    assert_eq!(inquiries.len(), 1, "{inquiries:?}");
    assert_eq!(inquiries[0]["questions"], json!([{"id": "name", "text": "Your name?", "schema": {"type": "string"}}]));
    let answers = frames_of(&td, "tool.answer", &invocation);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["answers"], json!([{"id": "name", "value": "Ada", "source": "flag"}]));
    // The call was made once: the server got its answer during it.
    let results = frames_of(&td, "tool.result", &invocation);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["attempt"], 1);

    // Unanswered, the elicitation is declined and the server goes on.
    let out = call_tool(&td, &seed, "seed.ask", json!({}), &[]);
    assert_eq!(succeeded(&out), one_text(r#"{"action":"decline","content":null}"#));
    let invocation = last_invocation(&td);
    assert_eq!(frames_of(&td, "tool.inquiry", &invocation).len(), 1);
    assert!(frames_of(&td, "tool.answer", &invocation).is_empty());
}

#[test]
fn sampling_under_tools_call_is_refused_and_recorded() {
    let td = TestDir::new();
    let seed = seed_bundle(&td);
    let out = call_tool(&td, &seed, "seed.sample", json!({"prompt": "Say hi"}), &[]);
    let refusal = "sampling is refused: `rlp tools call` has no model to ask; call the tool through `rlp serve`, \
                   whose client may sample";
    assert_failed(
        &out,
        &seed,
        1,
        &format!("tool `seed.sample` failed: sampling refused: {refusal}"),
        &see_message(&td),
    );
    let samples = frames_of(&td, "tool.sample", &last_invocation(&td));
    assert_eq!(samples.len(), 1, "{samples:?}");
    let sample = &samples[0];
    assert_eq!(sample["relayed"], false);
    assert_eq!(sample["attempt"], 1);
    assert_eq!(sample["tool"], "seed.sample");
    assert_eq!(sample["error"], refusal);
    assert!(sample.get("response").is_none_or(Value::is_null), "{sample}");
    assert_eq!(
        sample["request"],
        json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}], "maxTokens": 50})
    );
}

#[test]
fn the_server_runs_in_the_sandbox_with_its_grants_and_its_roots_are_those_grants() {
    let td = TestDir::new();
    let seed = seed_bundle(&td);

    // A file in a granted folder is read.
    let granted = td.state_dir().join("granted.txt");
    std::fs::write(&granted, "granted\n").unwrap();
    let out = call_tool(&td, &seed, "seed.read_file", json!({"path": granted}), &[]);
    assert_eq!(succeeded(&out), one_text("granted\n"));

    // A file that exists outside the grants is not there for the server.
    let hidden = td.join("hidden/secret.txt");
    std::fs::create_dir_all(hidden.parent().unwrap()).unwrap();
    std::fs::write(&hidden, "secret\n").unwrap();
    let out = call_tool(&td, &seed, "seed.read_file", json!({"path": hidden}), &[]);
    assert_failed(
        &out,
        &seed,
        1,
        &format!("tool `seed.read_file` failed: [Errno 2] No such file or directory: '{}'", hidden.display()),
        &see_message(&td),
    );

    // The call frame records the server and the sandbox it ran in.
    let frame = td.payloads("tool.call").pop().unwrap();
    assert_eq!(frame["server"], seed_server_record(), "{frame}");
    let sandbox = &frame["sandbox"];
    assert_eq!(sandbox["confined"], true, "{sandbox}");
    assert_eq!(sandbox["net"], "none", "{sandbox}");
    let grants: Vec<String> = seed_folders(&td).iter().map(|dir| dir.display().to_string()).collect();
    let mut write = vec!["$TMPDIR".to_string()];
    write.extend(grants.iter().cloned());
    assert_eq!(sandbox["write"], json!(write), "{sandbox}");
    let program = std::fs::canonicalize(&servers().sdk_python).unwrap();
    assert_eq!(sandbox["read"], json!(["system", program.display().to_string(), seed.display().to_string()]));

    // The server's roots are its folders.
    let out = call_tool(&td, &seed, "seed.roots", json!({}), &[]);
    let roots: Vec<String> = grants.iter().map(|dir| format!("file://{dir}")).collect();
    assert_eq!(succeeded(&out), one_text(&json!({"roots": roots}).to_string()));
}

#[test]
fn a_server_gets_its_env_with_its_secret_and_the_secret_is_scrubbed_from_its_answers() {
    let td = TestDir::new();
    let id = "runloop/test/token";
    let value = "s3cr3t-t0ken-value";
    let set = td.rlp().args(["secrets", "set", id]).write_stdin(value).output().unwrap();
    assert_eq!(set.status.code(), Some(0), "{}", output::text(&set));
    let mut server = seed_server(&td);
    server.entry["env"] = json!({"TOKEN": format!("${{secret:{id}}}")});
    server.entry["secrets"] = json!([id]);
    let tools = vec![seed_tool("secret_env"), seed_tool("echo_meta")];
    let seed = bridged(&td, "seed", &[server], tools);

    // The server has the value (scrubbed as it comes back: not the
    // placeholder), and not under the name an exec tool gets it by.
    let out = call_tool(&td, &seed, "seed.secret_env", json!({"name": "TOKEN"}), &[]);
    assert_eq!(succeeded(&out), one_text(r#"{"value":"[redacted]"}"#));
    let out = call_tool(&td, &seed, "seed.secret_env", json!({"name": "RUNLOOP_TEST_TOKEN"}), &[]);
    assert_eq!(succeeded(&out), one_text(r#"{"value":null}"#));
    // Its environment is PATH, LANG and its `env`: nothing else of rlp's.
    let environment = |name: &str| {
        let out = td.call(&seed, "seed.secret_env", json!({"name": name})).env("BRIDGE_TEST_LEAK", "leaked").output();
        succeeded(&out.unwrap())
    };
    assert_eq!(environment("BRIDGE_TEST_LEAK"), one_text(r#"{"value":null}"#));
    assert_eq!(environment("PATH"), one_text(r#"{"value":"/usr/local/bin:/usr/bin:/bin"}"#));
    assert_eq!(environment("LANG"), one_text(r#"{"value":"C.UTF-8"}"#));
    // Whatever brings the value back, it is scrubbed.
    let out = call_tool(&td, &seed, "seed.echo_meta", json!({"text": format!("it is {value}")}), &[]);
    assert_eq!(succeeded(&out), one_text(r#"{"text":"it is [redacted]","meta":{"progressToken":1}}"#));
    let ledger = files::contents(&td.home().join("pog"));
    assert!(!ledger.is_empty());
    for (path, bytes) in ledger {
        assert!(!String::from_utf8_lossy(&bytes).contains(value), "{} holds the secret", path.display());
    }
    let audits = td.payloads("cap.audit");
    assert!(
        audits.iter().any(|a| a["capability"] == format!("secrets:{id}") && a["decision"] == "allow"),
        "{audits:?}"
    );
}

#[test]
fn a_call_past_its_timeout_is_cancelled_and_its_server_stopped() {
    let td = TestDir::new();
    let seed = seed_bundle(&td);
    let started = Instant::now();
    let out = call_tool(&td, &seed, "seed.hang", json!({}), &[]);
    let took = started.elapsed();
    let message = format!(
        "tool `seed.hang` timed out after {HANG_TIMEOUT_MS} ms (timeout_ms); the server `seed` was told \
         (notifications/cancelled); the server process is stopped with everything it started, and started again at \
         the next call"
    );
    assert_failed(
        &out,
        &seed,
        1,
        &message,
        "the tool took longer than its timeout_ms; raise it in tools.json if the work needs longer",
    );
    assert!(took >= Duration::from_millis(HANG_TIMEOUT_MS), "the call ended after {took:?}");
    assert_eq!(seed_processes(&td), Vec::<i32>::new(), "seed.py is still running");
    let results = frames_of(&td, "tool.result", &last_invocation(&td));
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["error"]["kind"], "timeout");
    assert_eq!(results[0]["error"]["message"], message);
}

#[test]
fn a_server_that_exits_during_the_call_is_reported_with_its_stderr() {
    let td = TestDir::new();
    let seed = seed_bundle(&td);
    let out = call_tool(&td, &seed, "seed.crash", json!({}), &[]);
    assert_failed(
        &out,
        &seed,
        1,
        "tool `seed.crash` failed: the MCP server `seed` exited during the call (Transport closed); it is started \
         again at the next call; its stderr: seed: crash tool called, exiting with status 3",
        &see_message(&td),
    );
    let results = frames_of(&td, "tool.result", &last_invocation(&td));
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["error"]["transient"], false);
}

#[test]
fn a_server_that_does_not_finish_the_handshake_in_time_is_stopped_and_the_call_fails() {
    let td = TestDir::new();
    let marker = td.state_dir().join("slow-server");
    let mut server = stdio_server(
        "slow",
        "/bin/sh",
        &["-c", "echo slow to start >&2; exec sleep 60", marker.to_str().unwrap()],
        vec![td.state_dir()],
    );
    server.entry["startup_timeout_ms"] = json!(1000);
    let slow = bridged(&td, "slow", &[server], vec![mcp_tool("slow.work", "slow", "work")]);
    let started = Instant::now();
    let out = call_tool(&td, &slow, "slow.work", json!({}), &[]);
    assert_failed(
        &out,
        &slow,
        1,
        "tool `slow.work`: cannot start the MCP server `slow`: the server did not finish the MCP handshake within \
         1000 ms (startup_timeout_ms); its stderr: slow to start",
        "check the server's `command` or `url` in tools.json, and try it by hand",
    );
    assert!(started.elapsed() < Duration::from_secs(10), "the call took {:?}", started.elapsed());
    assert_eq!(processes_with(marker.to_str().unwrap()), Vec::<i32>::new());
    assert!(td.payloads("tool.call").is_empty());
}

#[test]
fn a_streamable_http_server_is_reached_at_its_url() {
    let td = TestDir::new();
    let seed = HttpSeed::start(&td);
    let host = format!("127.0.0.1:{}", seed.port);
    let tool = |name: &str, extra: Value| {
        with(
            mcp_tool(&format!("web.{name}"), "web", name),
            with(json!({"capabilities": [format!("net:{host}")]}), extra),
        )
    };
    let document = json!({
        "version": 1,
        "servers": {"web": {"url": format!("http://{host}/mcp")}},
        "tools": [
            tool("echo_meta", json!({})),
            tool("ask", json!({})),
            tool("needs_input", json!({})),
            tool("hang", json!({"timeout_ms": HANG_TIMEOUT_MS})),
        ],
    });
    let web = td.bundle_document("web", &document, &format!("[capabilities]\nnet = [\"{host}\"]\n"));

    let out = call_tool(&td, &web, "web.echo_meta", json!({"text": "over http"}), &[]);
    assert_eq!(succeeded(&out), one_text(r#"{"text":"over http","meta":{"progressToken":1}}"#));
    let frame = td.payloads("tool.call").pop().unwrap();
    assert_eq!(frame["server"], seed_server_record(), "{frame}");
    // Nothing of rlp's runs: no sandbox.
    assert!(frame.get("sandbox").is_none_or(Value::is_null), "{frame}");

    let out = call_tool(&td, &web, "web.ask", json!({}), &["--answer", "name=Ada"]);
    assert_eq!(succeeded(&out), one_text(r#"{"action":"accept","content":{"name":"Ada"}}"#));
    let out = call_tool(&td, &web, "web.needs_input", json!({"topic": "t"}), &["--answer", "colour=green"]);
    assert_eq!(succeeded(&out), json!({"topic": "t", "colour": "green"}));

    // At the timeout the request is cancelled; the server goes on.
    let out = call_tool(&td, &web, "web.hang", json!({}), &[]);
    assert_failed(
        &out,
        &web,
        1,
        &format!(
            "tool `web.hang` timed out after {HANG_TIMEOUT_MS} ms (timeout_ms); the server `web` was told \
             (notifications/cancelled)"
        ),
        "the tool took longer than its timeout_ms; raise it in tools.json if the work needs longer",
    );
    let out = call_tool(&td, &web, "web.echo_meta", json!({"text": "still there"}), &[]);
    assert_eq!(succeeded(&out), one_text(r#"{"text":"still there","meta":{"progressToken":1}}"#));
}

#[test]
fn a_pinned_tool_is_called_while_its_server_keeps_the_definition_and_refused_once_it_changes() {
    let td = TestDir::new();
    let input_schema = json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
    let description = "Echoes its text and the request's _meta, as JSON text.";
    let pin = pin_of(&json!({"name": "echo_meta", "description": description, "inputSchema": input_schema}));
    // The bundle's copy of the definition is the server's.
    let pinned = with(
        mcp_tool("seed.pinned", "seed", "echo_meta"),
        json!({
            "description": description,
            "input_schema": input_schema,
            "transport": {"kind": "mcp", "server": "seed", "tool": "echo_meta", "definition_blake3": pin},
        }),
    );
    let gone = mcp_tool("seed.gone", "seed", "nope");
    let seed = bridged(&td, "seed", &[seed_server(&td)], vec![pinned, gone]);

    // Lint warns of the unpinned tool only, and the bundle is callable.
    let (code, findings) = td.lint_json([&seed]);
    assert_eq!(code, 0, "{findings:?}");
    let found: Vec<(&Value, &Value, &Value)> =
        findings.iter().map(|f| (&f["code"], &f["severity"], &f["message"])).collect();
    assert_eq!(
        found,
        [(
            &json!("RLP223"),
            &json!("warning"),
            &json!("tool `seed.gone` does not pin its server's definition of `nope`")
        )]
    );

    let out = call_tool(&td, &seed, "seed.pinned", json!({"text": "same"}), &[]);
    assert_eq!(succeeded(&out), one_text(r#"{"text":"same","meta":{"progressToken":1}}"#));

    // The server now describes the tool otherwise.
    let changed = "Echoes its text, louder.";
    std::fs::write(echo_description(&td), changed).unwrap();
    let now = pin_of(&json!({"name": "echo_meta", "description": changed, "inputSchema": input_schema}));
    let reason = format!(
        "the server `seed` changed its definition of `echo_meta` since it was pinned (definition_blake3 {}…, now \
         {}…); it differs from this bundle's copy in: description",
        &pin[..12],
        &now[..12]
    );
    let out = call_tool(&td, &seed, "seed.pinned", json!({"text": "changed"}), &[]);
    assert_failed(
        &out,
        &seed,
        3,
        &format!("tool `seed.pinned` refused: {reason}"),
        &format!(
            "review the change (`rlp lint --check-tools`), then re-import with `rlp tools import {} --mcp seed` to \
             accept it",
            seed.display()
        ),
    );
    let denied: Vec<Value> = td.payloads("cap.audit").into_iter().filter(|a| a["decision"] == "deny").collect();
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert_eq!((&denied[0]["capability"], &denied[0]["reason"]), (&json!("mcp:seed/echo_meta"), &json!(reason)));
    // Refused before the tool was called.
    assert_eq!(td.payloads("tool.call").len(), 1);

    // A tool the server does not list is refused too.
    let out = call_tool(&td, &seed, "seed.gone", json!({}), &[]);
    assert_failed(
        &out,
        &seed,
        3,
        "tool `seed.gone` refused: the server `seed` no longer lists a tool `nope`",
        "see what changed with `rlp lint --check-tools`, then re-import with `rlp tools import --mcp seed`",
    );
}

#[test]
fn a_tool_must_declare_what_its_server_needs() {
    let td = TestDir::new();
    // The tool declares `exec` but not the server's folders.
    let tool = with(seed_tool("echo_meta"), json!({"capabilities": ["exec"]}));
    let seed = bridged(&td, "seed", &[seed_server(&td)], vec![tool]);
    let (code, findings) = td.lint_json([&seed]);
    assert_eq!(code, 1, "{findings:?}");
    let errors: Vec<&Value> = findings.iter().filter(|f| f["severity"] == "error").collect();
    assert_eq!(errors.len(), 1, "{findings:?}");
    assert_eq!(errors[0]["code"], "RLP221", "{findings:?}");
    // Such a bundle is not loaded, and no server is started.
    let out = call_tool(&td, &seed, "seed.echo_meta", json!({"text": "hi"}), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", output::text(&out));
    output::assert_contains(&stderr(&out), "RLP221");
    assert!(td.payloads("tool.call").is_empty());
    assert_eq!(seed_processes(&td), Vec::<i32>::new());
}

// ---------------------------------------------------------------------------
// rlp serve with the seed server, driven by the MCP Python SDK

#[test]
fn serve_lists_bridged_tools_and_calls_them_through_one_server_process() {
    let td = TestDir::new();
    let serve = serve_seed(&td);
    let mut pids = Vec::new();
    for (mode, version) in MODES {
        let steps = json!([{"op": "list"}, read_own_stat(), call("seed.echo_meta", json!({"text": mode})), read_own_stat(), read_own_stat()]);
        let report = mcp::drive(&scenario(serve.transport(None), mode, None, steps));
        assert_eq!(report["protocol_version"], version);
        let listed = step(&report, 0)["tools"].as_array().unwrap();
        let mut read =
            listed.iter().find(|t| t["name"] == "seed.read_file").unwrap_or_else(|| panic!("{listed:?}")).clone();
        // A 2025-11-25 session is told each tool may run as a task.
        let execution = read.as_object_mut().unwrap().remove("execution");
        assert_eq!(execution, (version == "2025-11-25").then(|| json!({"taskSupport": "optional"})));
        let read = &read;
        assert_eq!(
            read,
            &json!({"name": "seed.read_file", "description": "test tool seed.read_file",
                    "inputSchema": {"type": "object"},
                    "annotations": {"readOnlyHint": false, "destructiveHint": false, "openWorldHint": false}})
        );
        assert_eq!(listed.len(), 14, "{listed:?}");
        // The answer of the bridged server: its content blocks, as sent.
        let text = served_text(step(&report, 2));
        let echoed: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(echoed["text"], mode);
        assert_eq!(echoed["meta"].as_object().unwrap().keys().collect::<Vec<_>>(), ["progressToken"], "{echoed}");
        for i in [1, 3, 4] {
            pids.push(pid_of_stat(&served_text(step(&report, i))));
        }
        // One seed.py for the serve, whatever the client session.
        assert_eq!(seed_processes(&td), [pids[0]], "{mode}: {}", serve.stderr());
    }
    assert!(pids.iter().all(|pid| *pid == pids[0]), "{pids:?}");
    // Every call frame names the server and the sandbox it runs in, the
    // calls that found it running as the one that started it.
    let calls = td.payloads("tool.call");
    assert_eq!(calls.len(), 8);
    assert!(calls.iter().all(|c| c["server"] == seed_server_record()), "{calls:?}");
    assert!(calls[0]["sandbox"].is_object(), "{}", calls[0]);
    assert!(calls.iter().all(|c| c["sandbox"] == calls[0]["sandbox"]), "{calls:?}");
    drop(serve);
    assert_eq!(wait_for_no_seed(&td, STOPPING), Vec::<i32>::new(), "seed.py outlived rlp serve");
}

#[test]
fn serve_keeps_its_server_between_calls_far_apart() {
    let td = TestDir::new();
    let serve = serve_seed(&td);
    let first = served_seed_pid(&serve);
    // rlp serve waits for its next call, however long: its server with it.
    std::thread::sleep(IDLE);
    assert_eq!(seed_processes(&td), [first], "the server of rlp serve stopped while it waited; {}", serve.stderr());
    assert_eq!(served_seed_pid(&serve), first);
}

#[test]
fn serve_starts_a_server_that_crashed_again_at_the_next_call() {
    let td = TestDir::new();
    let seed = seed_bundle(&td);
    for (mode, _) in MODES {
        let steps = json!([
            read_own_stat(),
            call("seed.crash", json!({})),
            read_own_stat(),
            call("seed.echo_meta", json!({"text": "again"}))
        ]);
        let report = mcp::drive(&scenario(stdio(&td, &seed, &[]), mode, None, steps));
        let first = pid_of_stat(&served_text(step(&report, 0)));
        let crashed = step(&report, 1);
        assert_eq!(call_meta(crashed)["outcome"], "error", "{mode}: {crashed}");
        // The next call starts the server again.
        let second = pid_of_stat(&served_text(step(&report, 2)));
        assert_ne!(first, second, "{mode}: the crashed server answered again");
        assert!(!is_running(&first.to_string()), "{mode}: the crashed server {first} still runs");
        let echoed: Value = serde_json::from_str(&served_text(step(&report, 3))).unwrap();
        assert_eq!(echoed["text"], "again", "{mode}");
        // The failed call says the server exited, quoting its stderr.
        assert_eq!(
            served_error(crashed),
            format!(
                "tool `seed.crash` failed: the MCP server `seed` exited during the call (Transport closed); it is \
                 started again at the next call; its stderr: seed: crash tool called, exiting with status 3\n\
                 help: see the tool's message; the call is recorded under invocation {}",
                call_meta(crashed)["invocation_id"].as_str().unwrap()
            ),
            "{mode}"
        );
    }
}

#[test]
fn serve_passes_an_elicitation_during_a_call_on_to_a_client_that_supports_elicitation() {
    let td = TestDir::new();
    let seed = seed_bundle(&td);
    for (mode, _) in MODES {
        let answers = json!([{"action": "accept", "content": {"name": "Ada"}}]);
        let report =
            mcp::drive(&scenario(stdio(&td, &seed, &[]), mode, Some(answers), json!([call("seed.ask", json!({}))])));
        assert_eq!(served_text(step(&report, 0)), r#"{"action":"accept","content":{"name":"Ada"}}"#, "{mode}");
        let asked = report["elicitations"].as_array().unwrap();
        assert_eq!(asked.len(), 1, "{mode}: {asked:?}");
        // The client sees the form as the server wrote it.
        assert_eq!(asked[0]["params"]["mode"], "form");
        assert_eq!(asked[0]["params"]["message"], "Your name?");
        assert_eq!(
            asked[0]["params"]["requestedSchema"],
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
            "{mode}"
        );

        // A client without elicitation cannot be asked: the server is declined.
        let report = mcp::drive(&scenario(stdio(&td, &seed, &[]), mode, None, json!([call("seed.ask", json!({}))])));
        assert_eq!(served_text(step(&report, 0)), r#"{"action":"decline","content":null}"#, "{mode}");
    }
    let answers: Vec<Value> = td.payloads("tool.answer").into_iter().map(|a| a["answers"].clone()).collect();
    let ada = json!([{"id": "name", "value": "Ada", "source": "mcp"}]);
    assert_eq!(answers, [ada.clone(), ada]);
    assert_eq!(td.payloads("tool.inquiry").len(), 4);
}

#[test]
fn serve_cancels_a_call_past_its_timeout_stops_the_server_and_starts_it_again_at_the_next_call() {
    let td = TestDir::new();
    let serve = serve_seed(&td);
    let first = served_seed_pid(&serve);
    assert_eq!(seed_processes(&td), [first]);

    let report = mcp::drive(&scenario(serve.transport(None), "legacy", None, json!([call("seed.hang", json!({}))])));
    let hung = step(&report, 0);
    assert_eq!(
        served_error(hung),
        format!(
            "tool `seed.hang` timed out after {HANG_TIMEOUT_MS} ms (timeout_ms); the server `seed` was told \
             (notifications/cancelled); the server process is stopped with everything it started, and started again \
             at the next call\nhelp: the tool took longer than its timeout_ms; raise it in tools.json if the work \
             needs longer"
        )
    );
    // Stopped while rlp serve goes on, before any other call.
    let left = wait_for_no_seed(&td, STOPPING);

    let second = served_seed_pid(&serve);
    assert_ne!(first, second);
    assert_eq!(seed_processes(&td), [second]);
    assert_eq!(
        left,
        Vec::<i32>::new(),
        "the retired seed.py still ran {STOPPING:?} after the call; {}",
        serve.stderr()
    );
}

#[test]
fn serve_passes_the_servers_progress_on_in_order() {
    let td = TestDir::new();
    let seed = seed_bundle(&td);
    let steps = json!([{"op": "call", "tool": "seed.progress", "arguments": {"steps": 4}, "progress": true}]);
    let report = mcp::drive(&scenario(stdio(&td, &seed, &[]), "legacy", None, steps));
    assert_eq!(served_text(step(&report, 0)), r#"{"done":4}"#);
    let progress: Vec<(f64, String)> = report["progress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["progress"].as_f64().unwrap(), p["message"].as_str().unwrap().to_string()))
        .collect();
    let messages: Vec<&str> = progress.iter().map(|(_, m)| m.as_str()).collect();
    // Each of the server's reports, within the attempt's step.
    assert_eq!(
        messages,
        [
            "attempt 1 of at most 1 started",
            "the server reports 1",
            "the server reports 2",
            "the server reports 3",
            "the server reports 4",
            "attempt 1 ended",
            "the call ended and is recorded",
        ],
        "{progress:?}"
    );
    assert!(progress.windows(2).all(|w| w[0].0 < w[1].0), "{progress:?}");
}

#[test]
fn serve_relays_sampling_to_a_client_that_samples() {
    let td = TestDir::new();
    let seed = seed_bundle(&td);
    let request = json!({
        "transport": stdio(&td, &seed, &[]),
        "tool": "seed.sample",
        "arguments": {"prompt": "Say hi"},
        "reply": "hi from the client's model",
    });
    let out = mcp::run_client(Path::new(&servers().sdk_python), "tests/bridge/sampling_client.py", &request);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("the sampling client printed no report ({e})\n{}", output::text(&out)));
    assert!(report.get("fatal").is_none(), "{}\n{}", report["fatal"].as_str().unwrap_or_default(), output::text(&out));
    // The client's SDK adds a progress token of its own in `_meta`.
    let mut asked = report["sampling_requests"].clone();
    for request in asked.as_array_mut().into_iter().flatten() {
        request.as_object_mut().map(|r| r.remove("_meta"));
    }
    assert_eq!(
        asked,
        json!([{"messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}], "maxTokens": 50}]),
        "{report}"
    );
    assert_eq!(served_text(&json!({"result": report["result"]})), r#"{"sampled":"hi from the client's model"}"#);
    let samples = td.payloads("tool.sample");
    assert_eq!(samples.len(), 1, "{samples:?}");
    assert_eq!(samples[0]["relayed"], true);
}

// ---------------------------------------------------------------------------
// Reference servers from npm and PyPI

/// The filesystem server over `dirs`, granted only `granted` (and its own
/// packages).
fn filesystem_server(dirs: &[&Path], granted: &Path) -> Server {
    let servers = servers();
    let mut args = vec![servers.filesystem_js.as_str()];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    stdio_server("files", &servers.node, &args, vec![servers.node_modules.clone(), granted.to_path_buf()])
}

/// The time server from PyPI.
fn time_server() -> Server {
    let servers = servers();
    stdio_server(
        "time",
        &servers.time_python,
        &["-m", "mcp_server_time"],
        vec![servers.time_python_home.clone(), servers.root.clone()],
    )
}

/// The filesystem server's tools of the tests.
fn filesystem_tools() -> Vec<Value> {
    ["read_text_file", "list_directory", "list_allowed_directories"]
        .into_iter()
        .map(|name| mcp_tool(&format!("files.{name}"), "files", name))
        .collect()
}

/// Folders `shared` (holding `a.txt`) and `other` (holding `b.txt`) in the
/// test folder.
fn two_folders(td: &TestDir) -> (PathBuf, PathBuf) {
    let shared = td.join("shared");
    let other = td.join("other");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(shared.join("a.txt"), "in shared\n").unwrap();
    std::fs::write(other.join("b.txt"), "in other\n").unwrap();
    (shared, other)
}

/// Seconds since the Unix epoch of an RFC 3339 time with a `+00:00` offset.
fn epoch_seconds(time: &str) -> i64 {
    let (date, clock) = time.strip_suffix("+00:00").and_then(|t| t.split_once('T')).unwrap_or_else(|| panic!("{time}"));
    let numbers = |text: &str, sep: char| -> Vec<i64> {
        text.split(sep).map(|n| n.split('.').next().unwrap().parse().unwrap_or_else(|_| panic!("{time}"))).collect()
    };
    let (ymd, hms) = (numbers(date, '-'), numbers(clock, ':'));
    // Days from civil (H. Hinnant).
    let (y, m, d) = (if ymd[1] <= 2 { ymd[0] - 1 } else { ymd[0] }, ymd[1], ymd[2]);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    days * 86_400 + hms[0] * 3600 + hms[1] * 60 + hms[2]
}

#[test]
fn the_filesystem_server_reads_inside_its_grant_and_nothing_beyond_it() {
    let td = TestDir::new();
    let (shared, other) = two_folders(&td);
    // The server is told of both folders; only `shared` is granted.
    let files = bridged(&td, "files", &[filesystem_server(&[&shared, &other], &shared)], filesystem_tools());
    let node_modules = &servers().node_modules;

    // The server cannot reach `other`, which the sandbox hides from it, and
    // drops it as it starts ("Cannot access directory …, skipping"). Once it
    // has the roots it asks rlp for after the handshake, its folders are
    // those: the server's grants. A first call may come before the roots do.
    let by_arguments = shared.display().to_string();
    let by_roots = format!("{}, {}", node_modules.display(), shared.display());
    let out = call_tool(&td, &files, "files.list_allowed_directories", json!({}), &[]);
    let allowed = succeeded(&out);
    assert!(
        [&by_arguments, &by_roots]
            .iter()
            .any(|dirs| allowed == json!({"content": format!("Allowed directories:\n{}", dirs.replace(", ", "\n"))})),
        "{allowed}"
    );
    let out = call_tool(&td, &files, "files.read_text_file", json!({"path": shared.join("a.txt")}), &[]);
    assert_eq!(succeeded(&out), json!({"content": "in shared\n"}));
    let out = call_tool(&td, &files, "files.list_directory", json!({"path": shared}), &[]);
    assert_eq!(succeeded(&out), json!({"content": "[FILE] a.txt"}));

    let out = call_tool(&td, &files, "files.read_text_file", json!({"path": other.join("b.txt")}), &[]);
    let denied = |dirs: &str| {
        format!(
            "{}error: tool `files.read_text_file` failed: Access denied - path outside allowed directories: {} not in \
             {dirs}\n  help: {}\n",
            unsigned_note(&files),
            other.join("b.txt").display(),
            see_message(&td)
        )
    };
    assert_eq!(out.status.code(), Some(1), "{}", output::text(&out));
    assert!(stderr(&out) == denied(&by_arguments) || stderr(&out) == denied(&by_roots), "{}", output::text(&out));
    let frame = td.payloads("tool.call").pop().unwrap();
    assert_eq!(frame["server"]["name"], "secure-filesystem-server", "{frame}");

    // Granted `other` too, the same server reads it.
    let wide = bridged(&td, "wide", &[filesystem_server(&[&shared, &other], &other)], filesystem_tools());
    let out = call_tool(&td, &wide, "files.read_text_file", json!({"path": other.join("b.txt")}), &[]);
    assert_eq!(succeeded(&out), json!({"content": "in other\n"}));
}

#[test]
fn the_memory_server_keeps_its_graph_in_the_granted_file_across_calls() {
    let td = TestDir::new();
    let servers = servers();
    let memory_file = td.state_dir().join("memory.jsonl");
    let mut server = stdio_server(
        "memory",
        &servers.node,
        &[&servers.memory_js],
        vec![servers.node_modules.clone(), td.state_dir()],
    );
    server.entry["env"] = json!({"MEMORY_FILE_PATH": memory_file});
    let tools = vec![
        mcp_tool("memory.create_entities", "memory", "create_entities"),
        mcp_tool("memory.read_graph", "memory", "read_graph"),
    ];
    let memory = bridged(&td, "memory", &[server], tools);

    let ada = json!({"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]});
    let out = call_tool(&td, &memory, "memory.create_entities", json!({"entities": [ada]}), &[]);
    assert_eq!(succeeded(&out), json!({"entities": [ada]}));
    assert_eq!(
        serde_json::from_str::<Value>(files::read(&memory_file).trim()).unwrap(),
        json!({"type": "entity", "name": "Ada", "entityType": "person", "observations": ["wrote the first program"]})
    );
    // Another rlp, another server process: the graph is read back.
    let out = call_tool(&td, &memory, "memory.read_graph", json!({}), &[]);
    assert_eq!(succeeded(&out), json!({"entities": [ada], "relations": []}));
}

#[test]
fn the_everything_server_echoes_and_adds() {
    let td = TestDir::new();
    let servers = servers();
    let server =
        stdio_server("everything", &servers.node, &[&servers.everything_js], vec![servers.node_modules.clone()]);
    let tools =
        vec![mcp_tool("everything.echo", "everything", "echo"), mcp_tool("everything.sum", "everything", "get-sum")];
    let everything = bridged(&td, "everything", &[server], tools);
    let out = call_tool(&td, &everything, "everything.echo", json!({"message": "hi"}), &[]);
    assert_eq!(succeeded(&out), one_text("Echo: hi"));
    let out = call_tool(&td, &everything, "everything.sum", json!({"a": 2, "b": 3}), &[]);
    assert_eq!(succeeded(&out), one_text("The sum of 2 and 3 is 5."));
}

#[test]
fn the_time_server_tells_the_time() {
    let td = TestDir::new();
    let time = bridged(&td, "clock", &[time_server()], vec![mcp_tool("time.now", "time", "get_current_time")]);
    let out = call_tool(&td, &time, "time.now", json!({"timezone": "UTC"}), &[]);
    let now = succeeded(&out);
    let keys: Vec<&String> = now.as_object().unwrap_or_else(|| panic!("{now}")).keys().collect();
    assert_eq!(keys, ["timezone", "datetime", "day_of_week", "is_dst"], "{now}");
    assert_eq!((&now["timezone"], &now["is_dst"]), (&json!("UTC"), &json!(false)));
    let told = epoch_seconds(now["datetime"].as_str().unwrap());
    let clock = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() as i64;
    assert!((clock - told).abs() < 120, "{now} is not now ({clock})");
    let frame = td.payloads("tool.call").pop().unwrap();
    assert_eq!(frame["server"]["name"], "mcp-time", "{frame}");
}

#[test]
fn serve_calls_the_filesystem_and_time_servers() {
    let td = TestDir::new();
    let (shared, other) = two_folders(&td);
    let mut tools = filesystem_tools();
    tools.push(mcp_tool("time.now", "time", "get_current_time"));
    let desk = bridged(&td, "desk", &[filesystem_server(&[&shared, &other], &shared), time_server()], tools);
    for (mode, _) in MODES {
        let steps = json!([
            {"op": "list"},
            call("files.read_text_file", json!({"path": shared.join("a.txt")})),
            call("files.read_text_file", json!({"path": other.join("b.txt")})),
            call("time.now", json!({"timezone": "UTC"})),
        ]);
        let report = mcp::drive(&scenario(stdio(&td, &desk, &[]), mode, None, steps));
        let names: Vec<&str> =
            step(&report, 0)["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            ["files.list_allowed_directories", "files.list_directory", "files.read_text_file", "time.now"]
        );
        let read = step(&report, 1);
        assert_eq!(read["result"]["isError"], false, "{mode}: {read}");
        // The server's structuredContent is the result, and its content
        // blocks are answered as it sent them.
        assert_eq!(served_text(read), "in shared\n", "{mode}");
        assert_eq!(read["result"]["structuredContent"], json!({"content": "in shared\n"}), "{mode}");
        let refused = served_error(step(&report, 2));
        output::assert_contains(
            &refused,
            &format!("Access denied - path outside allowed directories: {}", other.join("b.txt").display()),
        );
        let now: Value = serde_json::from_str(&served_text(step(&report, 3))).unwrap();
        assert_eq!(now["timezone"], "UTC", "{mode}: {now}");
        let told = epoch_seconds(now["datetime"].as_str().unwrap_or_else(|| panic!("{mode}: {now}")));
        let clock = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() as i64;
        assert!((clock - told).abs() < 120, "{now} is not now ({clock})");
    }
}

#[test]
fn serve_as_a_gateway_finds_bridged_tools_by_server_under_its_allow_list_confirmation_and_token() {
    let td = TestDir::new();
    let (shared, other) = two_folders(&td);
    // As import writes them: each tool in its server's category.
    let mut tools: Vec<Value> = filesystem_tools().into_iter().map(|t| with(t, json!({"category": "files"}))).collect();
    tools[0] = with(tools[0].clone(), json!({"requires_confirmation": true}));
    tools.push(with(mcp_tool("time.now", "time", "get_current_time"), json!({"category": "time"})));
    let desk = bridged(&td, "desk", &[filesystem_server(&[&shared, &other], &shared), time_server()], tools);
    let token_file = td.join("token");
    std::fs::write(&token_file, "gateway-token-for-the-tests\n").unwrap();
    std::fs::set_permissions(&token_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let token = ["--token-file", token_file.to_str().unwrap()];
    let server = HttpServe::start(&td, &desk, &[&["--expose", "core", "--tools", "files.*"][..], &token].concat());
    let read = json!({"id": "files.read_text_file", "arguments": {"path": shared.join("a.txt")}});
    let steps = json!([
        {"op": "list"},
        call("rlp.search_tools", json!({"query": "read a file", "category": "files"})),
        call("rlp.search_tools", json!({"query": "current time"})),
        call("rlp.call_tool", read),
        call("rlp.call_tool", json!({"id": "time.now", "arguments": {"timezone": "UTC"}})),
    ]);
    for (mode, _) in MODES {
        // The client approves the call that needs confirmation.
        let approve = json!([{"action": "accept", "content": {"approve": true}}]);
        let report = mcp::drive(&scenario(
            server.transport(Some("gateway-token-for-the-tests")),
            mode,
            Some(approve),
            steps.clone(),
        ));
        let listed: Vec<&str> =
            step(&report, 0)["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(listed, ["rlp.search_tools", "rlp.describe_tools", "rlp.call_tool"], "{mode}");
        let found: Vec<&str> = step(&report, 1)["result"]["structuredContent"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap())
            .collect();
        assert!(!found.is_empty() && found.iter().all(|id| id.starts_with("files.")), "{mode}: {found:?}");
        let timeless = &step(&report, 2)["result"]["structuredContent"]["tools"];
        assert!(timeless.as_array().unwrap().iter().all(|t| t["id"] != "time.now"), "{mode}: {timeless}");
        assert_eq!(served_text(step(&report, 3)), "in shared\n", "{mode}");
        assert_eq!(report["elicitations"].as_array().unwrap().len(), 1, "{mode}: {report}");
        assert_eq!(
            served_error(step(&report, 4)),
            "tool `time.now` is not exposed: not allowed by the operator's list of --tools\n\
             help: serve with a --tools pattern that matches it (e.g. --tools time.now), or without --tools",
            "{mode}"
        );
    }
    // A client that cannot be asked does not get the call run.
    let report = mcp::drive(&scenario(server.transport(Some("gateway-token-for-the-tests")), "legacy", None, steps));
    output::assert_contains(
        &served_error(step(&report, 3)),
        "tool `files.read_text_file` requires confirmation and the call was not approved",
    );
    // Without the token, nothing.
    let (status, _) = mcp::post(server.address(), &[], &mcp::initialize(1));
    assert_eq!(status, 401);
}

/// tests/bridge/servers/hostile.py, a server that asks too much.
fn hostile_server() -> Server {
    let servers = servers();
    let script = servers.servers_dir.join("hostile.py");
    stdio_server(
        "hostile",
        &servers.sdk_python,
        &[script.to_str().unwrap()],
        vec![servers.sdk_python_home.clone(), servers.root.clone(), servers.servers_dir.clone()],
    )
}

#[test]
fn a_server_that_asks_too_much_during_a_call_is_declined_past_its_rounds_and_its_forms_stay_flat() {
    let td = TestDir::new();
    let bundle = bridged(&td, "hostile", &[hostile_server()], vec![mcp_tool("hostile.ask", "hostile", "ask")]);
    let accept = json!({"action": "accept", "content": {"name": "Ada"}});
    let answers = Value::Array(vec![accept; 12]);
    let steps = json!([
        call("hostile.ask", json!({"times": 10, "depth": 1})),
        call("hostile.ask", json!({"times": 1, "depth": 105})),
    ]);
    let report = mcp::drive(&scenario(stdio(&td, &bundle, &[]), "legacy", Some(answers), steps));
    // At most 8 rounds a call reach the client; the rest are declined.
    let mut expected = vec!["accept"; 8];
    expected.extend(["decline", "decline"]);
    assert_eq!(served_text(step(&report, 0)), serde_json::to_string(&expected).unwrap(), "{report}");
    // A schema nested deep reaches the client as the flat form elicitation
    // allows (the SDK reads it into that shape), and is recorded.
    assert_eq!(served_text(step(&report, 1)), r#"["accept"]"#, "{report}");
    let asked = report["elicitations"].as_array().unwrap();
    assert_eq!(asked.len(), 9, "{report}");
    assert_eq!(asked[8]["params"]["requestedSchema"]["properties"]["name"], json!({"type": "string"}));
    assert_eq!(td.payloads("tool.inquiry").len(), 9);
}

#[test]
fn serve_relays_at_most_eight_completions_a_call_and_refuses_the_rest() {
    let td = TestDir::new();
    let bundle = bridged(&td, "hostile", &[hostile_server()], vec![mcp_tool("hostile.sample", "hostile", "sample")]);
    let request = json!({
        "transport": stdio(&td, &bundle, &[]),
        "tool": "hostile.sample",
        "arguments": {"times": 10},
        "reply": "again and again",
    });
    let out = mcp::run_client(Path::new(&servers().sdk_python), "tests/bridge/sampling_client.py", &request);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("the sampling client printed no report ({e})\n{}", output::text(&out)));
    assert_eq!(report["sampling_requests"].as_array().unwrap().len(), 8, "{report}");
    let mut expected = vec!["ok"; 8];
    expected.extend(["refused", "refused"]);
    assert_eq!(served_text(&json!({"result": report["result"]})), serde_json::to_string(&expected).unwrap());
    // Each request is recorded, the refused ones with why.
    let samples = td.payloads("tool.sample");
    assert_eq!(samples.len(), 10);
    let refused = &samples[9];
    assert_eq!(refused["error"], "sampling is refused: the server asked for more than 8 completions during one call");
}

#[test]
fn serve_passes_a_servers_log_messages_on_and_leaves_out_a_huge_one() {
    let td = TestDir::new();
    let bundle = bridged(&td, "hostile", &[hostile_server()], vec![mcp_tool("hostile.log", "hostile", "log")]);
    let steps = json!([call("hostile.log", json!({"size": 100_000}))]);
    let report = mcp::drive(&scenario(stdio(&td, &bundle, &[]), "legacy", None, steps));
    assert_eq!(served_text(step(&report, 0)), r#""logged""#, "{report}");
    assert_eq!(
        report["logs"],
        json!([
            {"level": "info", "logger": null,
             "data": "rlp: a log message of 100002 bytes from the server was left out (over 16 KiB)"},
            {"level": "info", "logger": null, "data": "done"},
        ]),
    );
}
