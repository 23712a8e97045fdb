//! The tool-call runtime and the ledger, end to end: real `rlp` processes,
//! real tool processes, a real SQLite ledger and a real HTTP server on
//! 127.0.0.1. Every test uses its own temporary home.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rlp::ledger::{LedgerStore, SqliteLedger as Ledger};
use rlp::runtime::recorder::MemoryRecorder;
use rlp::runtime::{CallRequest, Runtime, RuntimeOptions};
use serde_json::{Value, json};

use crate::support::bundle::{self, with};
use crate::support::http::{Reply, Server, redirect, reply};
use crate::support::ledger::{self, kinds, payload};
use crate::support::output::{assert_contains, stderr, stdout, stdout_json};
use crate::support::process::{self, wait_for_file, wait_until_gone};
use crate::support::pty::Terminal;
use crate::support::rlp_snapshot;
use crate::support::{HANG_GUARD, TestDir, files};

const SECRET: &str = "sk-live-7f3a9c1e-RECOGNISABLE";
const TOKEN_ENV: &str = "RUNLOOP_TEST_TOKEN";
const TOKEN_ID: &str = "runloop/test/token";

// ---------------------------------------------------------------- helpers

/// Tool `id` running the fixture script `script` with the argument `path`
/// (a file or folder below `dir`), declaring `fs:<dir>` so that the sandbox
/// lets it reach `path`.
fn exec_tool_on(id: &str, script: &str, path: &Path, dir: &Path) -> Value {
    bundle::with_fs(bundle::runtime_tool(id, script, &[path.to_str().unwrap()]), dir)
}

/// Tool `touch`, which creates the file `marker` (in the folder it declares):
/// a test sees whether it ran.
fn touch_tool(marker: &Path) -> Value {
    exec_tool_on("touch", "marker.sh", marker, marker.parent().unwrap())
}

/// Where [`touch_tool`] leaves its marker: in the sandbox's state folder.
fn marker_of(td: &TestDir) -> PathBuf {
    td.state_dir().join("ran")
}

/// A policy granting `grants` (lines under `[capabilities]`) and the
/// test folder's state folder.
fn state_caps(td: &TestDir, grants: &str) -> String {
    bundle::caps(grants, &td.state_dir())
}

fn http_tool(id: &str, method: &str, url: &str) -> Value {
    bundle::tool(id, bundle::http(method, url))
}

/// [`http_tool`] taking the string argument `arg` (a placeholder of `url`).
fn http_tool_taking(id: &str, method: &str, url: &str, arg: &str) -> Value {
    let schema = json!({"type": "object", "properties": {arg: {"type": "string"}}});
    with(http_tool(id, method, url), json!({"input_schema": schema}))
}

/// A policy granting `net` to 127.0.0.1:`port` alone.
fn net_caps(port: u16) -> String {
    format!("[capabilities]\nnet = [\"127.0.0.1:{port}\"]\n")
}

// ------------------------------------------------------------------ tests

#[test]
fn exec_tool_call_records_frames_in_order() {
    let td = TestDir::new();
    let bundle = td.bundle(
        "echoer",
        json!([with(
            bundle::runtime_tool("blob.echo", "echo_blob.sh", &[]),
            json!({"observability": {"tags": ["t1"]}})
        )]),
        "[capabilities]\nexec = true\n",
    );
    let output =
        td.call(&bundle, "blob.echo", json!({"to": "a@b.c", "n": 2})).args(["--format", "json"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let doc = stdout_json(&output);
    let invocation = doc["invocation_id"].as_str().unwrap().to_string();
    let trace = doc["trace_id"].as_str().unwrap().to_string();
    assert_eq!(uuid::Uuid::parse_str(&invocation).unwrap().get_version_num(), 7);
    assert_eq!(uuid::Uuid::parse_str(&trace).unwrap().get_version_num(), 7);
    assert_eq!(doc["tool"], "blob.echo");
    assert_eq!(doc["attempts"], 1);

    // The blob the tool received, exactly as runtime.md describes it.
    let blob = &doc["result"];
    let keys: Vec<&String> = blob.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["v", "action", "invocation_id", "trace_id", "tool", "context"]);
    assert_eq!(blob["v"], 1);
    assert_eq!(blob["action"], "run");
    assert_eq!(blob["invocation_id"], invocation.as_str());
    assert_eq!(blob["trace_id"], trace.as_str());
    assert_eq!(
        blob["tool"],
        json!({"id": "blob.echo", "name": "blob.echo", "arguments": {"to": "a@b.c", "n": 2}, "answers": {}, "options": {}})
    );
    // The seed's `context.action` beside rlp's top-level `action`.
    assert_eq!(blob["context"]["action"], "run");
    assert_eq!(blob["context"]["root"], bundle.canonicalize().unwrap().display().to_string());
    assert_eq!(blob["context"]["attempt"], 1);
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let deadline = blob["context"]["deadline_ms"].as_i64().unwrap();
    assert!(deadline > now_ms && deadline <= now_ms + 30_000, "deadline {deadline} vs now {now_ms}");

    // The ledger: audit, call, result, in order, all with the same ids.
    let events = td.events();
    assert_eq!(kinds(&events), ["cap.audit", "tool.call", "tool.result"]);
    let audit = payload(&events[0]);
    assert_eq!(
        audit,
        json!({"v": 1, "tool": "blob.echo", "capability": "exec", "decision": "allow",
               "reason": "granted by policy.caps", "invocation_id": invocation, "tags": ["t1"]})
    );
    let call = payload(&events[1]);
    assert_eq!(call["v"], 1);
    assert_eq!(call["tool"], "blob.echo");
    assert_eq!(call["args"], json!({"to": "a@b.c", "n": 2}));
    assert_eq!(call["invocation_id"], invocation.as_str());
    assert_eq!(call["input_schema"], "inline");
    assert_eq!(call["tags"], json!(["t1"]));
    let result = payload(&events[2]);
    assert_eq!(result["invocation_id"], invocation.as_str());
    assert_eq!(result["tool"], "blob.echo");
    assert_eq!(result["result_schema"], "inline");
    assert_eq!(result["result_schema_blake3"].as_str().unwrap().len(), 64);
    assert_eq!(result["tags"], json!(["t1"]));
    assert_eq!(result["attempt"], 1);
    assert_eq!(result["result"], doc["result"]);
    assert!(result.get("error").is_none());
    for event in &events {
        let provenance = event.provenance().unwrap();
        assert_eq!(provenance.trace_id.to_string(), trace);
        assert_eq!(provenance.agent, "echoer");
        assert_eq!(provenance.msg_id.get_version_num(), 7);
        assert_eq!(event.scope, "echoer");
    }
    assert_eq!(events[1].actor, "runtime");
    assert_eq!(events[2].actor, "tool:blob.echo");
    let report = rlp::ledger::verify_chain(&td.ledger_path()).unwrap();
    assert!(report.is_intact() && report.rows == 3, "{report:?}");
}

#[test]
fn human_format_prints_the_result_only() {
    let td = TestDir::new();
    let bundle = td.bundle("plain", json!([bundle::runtime_tool("ok", "ok.sh", &[])]), "[capabilities]\nexec = true\n");
    let output = td.call(&bundle, "ok", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "{\n  \"ok\": true\n}\n");
    // An unsigned working folder is callable; rlp says once that its trust is not checked.
    assert_eq!(
        stderr(&output),
        format!(
            "note: {} is an unsigned working folder: it is not checked against the trust policy\n",
            bundle.canonicalize().unwrap().display()
        )
    );
}

#[test]
fn http_tool_call_records_frames_in_order() {
    let server = Server::start(|_| reply(200, r#"{"id": 7, "status": "queued"}"#));
    let td = TestDir::new();
    let url = format!("http://127.0.0.1:{}/v1/items/{{item}}", server.port);
    let bundle =
        td.bundle("poster", json!([http_tool_taking("items.put", "POST", &url, "item")]), &net_caps(server.port));
    let output = td
        .call(&bundle, "items.put", json!({"item": "a b", "note": "hi", "n": 1}))
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let doc = stdout_json(&output);
    assert_eq!(doc["result"], json!({"id": 7, "status": "queued"}));
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].line, "POST /v1/items/a%20b HTTP/1.1");
    assert_eq!(requests[0].header("content-type"), Some("application/json"));
    assert_eq!(serde_json::from_slice::<Value>(&requests[0].body).unwrap(), json!({"note": "hi", "n": 1}));

    let events = td.events();
    assert_eq!(kinds(&events), ["cap.audit", "cap.audit", "tool.call", "tool.result"]);
    let capability = format!("net:127.0.0.1:{}", server.port);
    assert_eq!(payload(&events[0])["capability"], capability.as_str());
    assert_eq!(payload(&events[1])["capability"], capability.as_str());
    assert_eq!(payload(&events[1])["reason"], "final URL: granted by policy.caps");
    let invocation = doc["invocation_id"].as_str().unwrap();
    for event in &events {
        assert_eq!(payload(event)["invocation_id"], invocation);
    }
    assert_eq!(payload(&events[3])["result"], json!({"id": 7, "status": "queued"}));
}

#[test]
fn trace_id_groups_calls() {
    let td = TestDir::new();
    let bundle =
        td.bundle("grouped", json!([bundle::runtime_tool("ok", "ok.sh", &[])]), "[capabilities]\nexec = true\n");
    let trace = uuid::Uuid::now_v7();
    for _ in 0..2 {
        td.call(&bundle, "ok", json!({})).args(["--trace-id", &trace.to_string()]).assert().code(0);
    }
    td.call(&bundle, "ok", json!({})).assert().code(0);
    let ledger = Ledger::open_existing(&td.ledger_path()).unwrap();
    let mut in_trace = Vec::new();
    ledger
        .for_each_in_trace(&trace, |e| {
            in_trace.push((e.kind.clone(), payload(&e)["invocation_id"].as_str().unwrap().to_string()));
            ControlFlow::Continue(())
        })
        .unwrap();
    assert_eq!(in_trace.len(), 6);
    assert_ne!(in_trace[0].1, in_trace[3].1, "two invocations");
    assert_eq!(ledger.count().unwrap(), 9);

    let output = td.call(&bundle, "ok", json!({})).args(["--trace-id", "not-a-uuid"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    rlp_snapshot!(&td, &output);
}

#[test]
fn ungranted_exec_is_refused_without_running() {
    let td = TestDir::new();
    let marker = marker_of(&td);
    let bundle = td.bundle("noexec", json!([touch_tool(&marker)]), &state_caps(&td, "time = true\n"));
    let output = td.call(&bundle, "touch", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(!marker.exists(), "the tool ran");
    rlp_snapshot!(&td, &output);
    let events = td.events();
    assert_eq!(kinds(&events), ["cap.audit", "cap.audit"]);
    let folder = payload(&events[0]);
    assert_eq!(folder["decision"], "allow");
    assert_eq!(folder["capability"], format!("fs:{}", td.state_dir().display()).as_str());
    let audit = payload(&events[1]);
    assert_eq!(audit["decision"], "deny");
    assert_eq!(audit["capability"], "exec");
    assert_eq!(audit["tool"], "touch");
    assert_eq!(audit["reason"], "policy.caps does not grant it");
}

#[test]
fn ungranted_net_host_is_refused() {
    let td = TestDir::new();
    let bundle = td.bundle(
        "nonet",
        json!([with(
            http_tool("api.get", "GET", "https://api.example.com/v1/x"),
            json!({"capabilities": ["net:api.example.com"]})
        )]),
        "[capabilities]\nnet = [\"other.example.com\"]\n",
    );
    let output = td.call(&bundle, "api.get", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let denied: Vec<Value> = td.events().iter().map(payload).filter(|p| p["decision"] == "deny").collect();
    assert_eq!(denied.len(), 2, "{denied:?}");
    assert_eq!(denied[0]["capability"], "net:api.example.com");
    assert_eq!(denied[1]["capability"], "net:api.example.com:443");
    rlp_snapshot!(&td, &output);
}

#[test]
fn override_revokes_net_without_connecting() {
    let server = Server::start(|_| reply(200, "{}"));
    let td = TestDir::new();
    let url = format!("http://127.0.0.1:{}/x", server.port);
    let bundle = td.bundle("revoked", json!([http_tool("x.get", "GET", &url)]), &net_caps(server.port));
    let override_file = td.write_override("revoked", "[capabilities]\nnet = []\n");
    let output = td.call(&bundle, "x.get", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert_eq!(server.connections(), 0, "a connection was made");
    let events = td.events();
    assert_eq!(kinds(&events), ["cap.audit"]);
    assert_eq!(payload(&events[0])["decision"], "deny");
    assert_eq!(
        payload(&events[0])["reason"],
        format!("revoked by the operator override {}", override_file.display()).as_str()
    );
    rlp_snapshot!(&td, &output);
}

#[test]
fn override_cannot_add_grants() {
    let td = TestDir::new();
    let marker = marker_of(&td);
    let bundle = td.bundle("adder", json!([touch_tool(&marker)]), &state_caps(&td, "time = true\n"));
    td.write_override("adder", &state_caps(&td, "exec = true\n"));
    let output = td.call(&bundle, "touch", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(3));
    assert!(!marker.exists());
    rlp_snapshot!(&td, &output);
}

#[test]
fn invalid_input_never_runs_the_tool() {
    let td = TestDir::new();
    let marker = marker_of(&td);
    let bundle = td.bundle(
        "strict",
        json!([with(
            touch_tool(&marker),
            json!({"input_schema": {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}})
        )]),
        &state_caps(&td, "exec = true\n"),
    );
    let output = td.call(&bundle, "touch", json!({"n": "seven"})).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(!marker.exists(), "the tool ran");
    rlp_snapshot!(&td, &output);
    assert!(!kinds(&td.events()).contains(&"tool.call"));

    let output = td.rlp().args(["tools", "call"]).arg(&bundle).args(["touch", "--args", "{nope"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    rlp_snapshot!(&td, &output);

    td.call(&bundle, "touch", json!({"n": 7})).assert().code(0);
    assert!(marker.exists());
}

#[test]
fn result_failing_result_schema_is_an_error() {
    let td = TestDir::new();
    let bundle = td.bundle(
        "badres",
        json!([with(
            bundle::runtime_tool("bad", "bad_result.sh", &[]),
            json!({"result_schema": {"type": "object", "properties": {"n": {"type": "integer"}}}})
        )]),
        "[capabilities]\nexec = true\n",
    );
    let output = td.call(&bundle, "bad", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(output.stdout.is_empty());
    rlp_snapshot!(&td, &output);
    let events = td.events();
    assert_eq!(kinds(&events), ["cap.audit", "tool.call", "tool.result"]);
    let result = payload(&events[2]);
    assert!(result.get("result").is_none());
    assert_eq!(result["error"]["kind"], "invalid_result");
}

#[test]
fn exec_tool_sees_only_documented_environment() {
    let td = TestDir::new();
    let bundle = td.bundle(
        "envdump",
        json!([with(bundle::runtime_tool("env.dump", "env_dump.sh", &["extra"]), json!({"secrets": [TOKEN_ID]}))]),
        &format!("[capabilities]\nexec = true\nsecrets = [\"{TOKEN_ID}\"]\n"),
    );
    let output = td
        .call(&bundle, "env.dump", json!({}))
        .args(["--format", "json"])
        .env("AWS_SECRET_ACCESS_KEY", "leak")
        .env("HOME", "/root/leak")
        .env("LD_PRELOAD", "/leak.so")
        .env("RUNLOOP_OTHER_SECRET", "leak")
        .env(TOKEN_ENV, SECRET)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let doc = stdout_json(&output);
    let result = &doc["result"];
    let vars = process::decode_environ(result["environ"].as_str().unwrap());
    let names: Vec<&str> = vars.keys().map(String::as_str).collect();
    assert_eq!(names, ["LANG", "PATH", "RLP_INVOCATION_ID", TOKEN_ENV, "RUNLOOP_TEST__TOKEN", "TMPDIR"]);
    assert_eq!(vars["PATH"], "/usr/local/bin:/usr/bin:/bin");
    assert_eq!(vars["LANG"], "C.UTF-8");
    assert_eq!(vars["RLP_INVOCATION_ID"], doc["invocation_id"].as_str().unwrap());
    assert_eq!(vars["RUNLOOP_TEST__TOKEN"], SECRET, "the secret reaches the tool");
    assert_eq!(vars[TOKEN_ENV], SECRET, "and under its earlier name");
    let cwd = result["cwd"].as_str().unwrap();
    assert_eq!(vars["TMPDIR"], cwd, "TMPDIR is the private folder and the working directory");
    assert_eq!(result["blob"], format!("{cwd}/call.json").as_str());
    assert_eq!(result["blob_mode"], "600");
    assert_eq!(result["dir_mode"], "700");
    assert_eq!(result["stdin"], "", "stdin is empty");
    assert_eq!(result["argc"], 2, "argv is [command, blob, extra]");
    assert!(!Path::new(cwd).exists(), "the private folder is removed");
}

#[test]
fn secret_never_leaks_from_exec_tools() {
    let td = TestDir::new();
    let tools = json!([
        with(bundle::runtime_tool("sec.result", "secret_echo.sh", &["result"]), json!({"secrets": [TOKEN_ID]})),
        with(bundle::runtime_tool("sec.stderr", "secret_echo.sh", &["stderr"]), json!({"secrets": [TOKEN_ID]})),
        with(bundle::runtime_tool("sec.envelope", "secret_echo.sh", &["envelope"]), json!({"secrets": [TOKEN_ID]})),
    ]);
    let bundle = td.bundle("secretive", tools, &format!("[capabilities]\nexec = true\nsecrets = [\"{TOKEN_ID}\"]\n"));
    let mut transcript = Vec::new();
    let mut run = |tool: &str, args: Value, code: i32| {
        let output = td.call(&bundle, tool, args).env(TOKEN_ENV, SECRET).output().unwrap();
        assert_eq!(output.status.code(), Some(code), "{tool}: {}", stderr(&output));
        transcript.extend_from_slice(&output.stdout);
        transcript.extend_from_slice(&output.stderr);
        output
    };
    let output = run("sec.result", json!({"echo": SECRET}), 0);
    assert_eq!(stdout_json(&output), json!({"token": "[redacted]", "len": SECRET.len()}));
    let output = run("sec.stderr", json!({}), 1);
    rlp_snapshot!(&td, &output);
    let output = run("sec.envelope", json!({}), 1);
    rlp_snapshot!(&td, &output);
    assert_no_secret(&transcript, "rlp's output");
    assert_ledger_has_no_secret(&td);
    let events = td.events();
    let call = events.iter().find(|e| e.kind == "tool.call").map(payload).unwrap();
    assert_eq!(call["args"], json!({"echo": "[redacted]"}));
}

/// Accepts one connection on `listener` and reads the request's head; the
/// stream is then ready for the response.
fn accept_request(listener: &TcpListener) -> std::net::TcpStream {
    let (stream, _) = listener.accept().unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap() > 2 {
        line.clear();
    }
    stream
}

#[test]
fn a_response_body_that_stalls_is_a_timeout() {
    // Sends the headers and one byte of a 100-byte body, then stalls.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let mut out = accept_request(&listener);
        out.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{").unwrap();
        out.flush().unwrap();
        let mut rest = Vec::new();
        let _ = out.read_to_end(&mut rest); // until rlp hangs up
    });
    let td = TestDir::new();
    let url = format!("http://127.0.0.1:{port}/slow");
    let bundle = td.bundle(
        "stalled",
        json!([with(http_tool("slow.get", "GET", &url), json!({"timeout_ms": 500}))]),
        &net_caps(port),
    );
    let output = td.call(&bundle, "slow.get", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    rlp_snapshot!(&td, &output);
    let result = td.events().iter().find(|e| e.kind == "tool.result").map(payload).unwrap();
    assert_eq!(result["error"]["kind"], "timeout");
    server.join().unwrap();
}

#[test]
fn json_format_reports_a_failed_call_as_one_document() {
    let td = TestDir::new();
    let bundle = td.bundle(
        "failing",
        json!([bundle::runtime_tool("fail", "secret_echo.sh", &["stderr"])]),
        "[capabilities]\nexec = true\n",
    );
    let output = td.call(&bundle, "fail", json!({})).args(["--format", "json"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let document = stdout_json(&output);
    assert_eq!(document["tool"], "fail");
    assert_eq!(document["error"]["exit"], 1);
    assert_eq!(document["error"]["message"], "tool `fail` exited with status 4; stderr: the token is , failing");
    let call = td.events().iter().find(|e| e.kind == "tool.call").map(payload).unwrap();
    assert_eq!(document["invocation_id"], call["invocation_id"]);
    assert!(document["trace_id"].as_str().unwrap().parse::<uuid::Uuid>().is_ok());
    rlp_snapshot!(&td, &output);

    let output = td.call(&bundle, "nope", json!({})).args(["--format", "json"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let document = stdout_json(&output);
    assert_eq!((document["error"]["exit"].clone(), document["invocation_id"].clone()), (json!(2), Value::Null));
}

#[test]
fn a_short_secret_value_leaves_the_trace_readable() {
    let td = TestDir::new();
    let tools = json!([with(
        bundle::runtime_tool("sec.result", "secret_echo.sh", &["result"]),
        json!({"secrets": [TOKEN_ID]})
    )]);
    let bundle = td.bundle("secretive", tools, &format!("[capabilities]\nexec = true\nsecrets = [\"{TOKEN_ID}\"]\n"));
    let trace = "0197b0ff-0000-7000-8000-000000000002";
    let output = td
        .call(&bundle, "sec.result", json!({"n": 100}))
        .args(["--trace-id", trace])
        .env(TOKEN_ENV, "0")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout_json(&output), json!({"token": "[redacted]", "len": 1}));
    let events = td.events();
    let of_kind = |kind: &str| events.iter().find(|e| e.kind == kind).map(payload).unwrap();
    let call = of_kind("tool.call");
    assert_eq!(call["args"], json!({"n": "[redacted]"}), "tool data is scrubbed");
    assert!(call["invocation_id"].as_str().unwrap().parse::<uuid::Uuid>().is_ok(), "{call}");
    assert_eq!(call["input_schema_blake3"].as_str().unwrap().len(), 64, "{call}");
    assert_eq!(of_kind("tool.result")["invocation_id"], call["invocation_id"]);
    for args in [vec!["trace", "show", trace], vec!["trace", "export", trace]] {
        let output = td.rlp().args(&args).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{args:?}: {}", stderr(&output));
    }
}

fn assert_no_secret(bytes: &[u8], what: &str) {
    let needle = SECRET.as_bytes();
    assert!(!bytes.windows(needle.len()).any(|w| w == needle), "the secret appears in {what}");
}

fn assert_ledger_has_no_secret(td: &TestDir) {
    let files = ledger::files(&td.ledger_path());
    assert!(!files.is_empty(), "no ledger file to scan");
    for (path, bytes) in files {
        assert_no_secret(&bytes, &path.display().to_string());
    }
}

#[test]
fn secret_never_leaks_from_http_tools() {
    let server = Server::start(|request| {
        let auth = request.header("authorization").unwrap_or_default().to_string();
        if request.line.contains("/fail") {
            return reply(401, &format!(r#"{{"error": "bad credentials {auth}"}}"#));
        }
        reply(200, &format!(r#"{{"seen": "{auth}"}}"#))
    });
    let td = TestDir::new();
    let header = json!({"Authorization": format!("Bearer ${{secret:{TOKEN_ID}}}")});
    let mk = |id: &str, path: &str| {
        with(
            http_tool(id, "GET", &format!("http://127.0.0.1:{}/{path}", server.port)),
            json!({"secrets": [TOKEN_ID], "transport": {"kind": "http", "method": "GET",
                   "url": format!("http://127.0.0.1:{}/{path}", server.port), "headers": header}}),
        )
    };
    let bundle = td.bundle(
        "httpsecret",
        json!([mk("h.ok", "ok"), mk("h.fail", "fail")]),
        &format!("[capabilities]\nnet = [\"127.0.0.1:{}\"]\nsecrets = [\"{TOKEN_ID}\"]\n", server.port),
    );
    let ok = td.call(&bundle, "h.ok", json!({})).env(TOKEN_ENV, SECRET).output().unwrap();
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert_eq!(stdout_json(&ok), json!({"seen": "Bearer [redacted]"}));
    let fail = td.call(&bundle, "h.fail", json!({})).env(TOKEN_ENV, SECRET).output().unwrap();
    assert_eq!(fail.status.code(), Some(1));
    rlp_snapshot!(&td, &fail);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].header("authorization"), Some(format!("Bearer {SECRET}").as_str()), "the header was sent");
    for output in [&ok, &fail] {
        assert_no_secret(&output.stdout, "stdout");
        assert_no_secret(&output.stderr, "stderr");
    }
    assert_ledger_has_no_secret(&td);
}

#[test]
fn missing_secret_names_the_variable() {
    let td = TestDir::new();
    let marker = marker_of(&td);
    let bundle = td.bundle(
        "nosecret",
        json!([with(touch_tool(&marker), json!({"secrets": [TOKEN_ID]}))]),
        &state_caps(&td, &format!("exec = true\nsecrets = [\"{TOKEN_ID}\"]\n")),
    );
    let output = td.call(&bundle, "touch", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(!marker.exists());
    rlp_snapshot!(&td, &output);
    // The secret's grant is audited once: denied, since no provider has it.
    let events = td.events();
    assert_eq!(kinds(&events), ["cap.audit", "cap.audit", "cap.audit"]);
    let last = payload(&events[2]);
    assert_eq!(last["capability"], "secrets:runloop/test/token");
    assert_eq!(last["decision"], "deny");
    assert_eq!(last["reason"], "the secret is not available (env: RUNLOOP_TEST__TOKEN is not set)");
}

/// Runs `call` of `tool` (its `timeout_ms` 1000), expecting the timeout
/// error that says the tool and everything it started were killed.
fn call_expecting_timeout(mut call: assert_cmd::Command, tool: &str) {
    let output = call.output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let expected = format!(
        "error: tool `{tool}` timed out after 1000 ms (timeout_ms); it and every process it started were killed"
    );
    assert_contains(&stderr(&output), &expected);
}

#[test]
fn timeout_kills_the_whole_process_group() {
    let td = TestDir::new();
    let pids = td.state_dir();
    let bundle = td.bundle(
        "sleeper",
        json!([with(exec_tool_on("sleep", "sleep_fork.sh", &pids, &pids), json!({"timeout_ms": 1000}))]),
        &state_caps(&td, "exec = true\n"),
    );
    call_expecting_timeout(td.call(&bundle, "sleep", json!({})), "sleep");
    let parent = std::fs::read_to_string(pids.join("parent.pid")).unwrap();
    let child = std::fs::read_to_string(pids.join("child.pid")).unwrap();
    assert!(!process::is_running(parent.trim()), "the tool {parent} is still there");
    assert!(!process::is_running(child.trim()), "its child {child} is still there");
    let result = td.events().iter().find(|e| e.kind == "tool.result").map(payload).unwrap();
    assert_eq!(result["error"]["kind"], "timeout");
}

#[test]
fn huge_stdout_is_refused_with_memory_bounded() {
    let td = TestDir::new();
    let bundle = td.bundle(
        "flood",
        json!([bundle::runtime_tool("flood", "flood_stdout.sh", &[])]),
        "[capabilities]\nexec = true\n",
    );
    // rlp runs with its address space capped at 1 GiB: buffering 5 GB would fail.
    let mut command = td.shell("ulimit -v 1048576");
    command.args(["tools", "call"]).arg(&bundle).arg("flood");
    let output = assert_cmd::Command::from_std(command).timeout(HANG_GUARD).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    rlp_snapshot!(&td, &output);
    assert_eq!(payload(&td.events()[2])["error"]["kind"], "output_too_large");
}

#[test]
fn stderr_flood_before_stdout_does_not_deadlock() {
    let td = TestDir::new();
    let bundle = td.bundle(
        "noisy",
        json!([bundle::runtime_tool("noisy", "stderr_first.sh", &[])]),
        "[capabilities]\nexec = true\n",
    );
    let output = td.call(&bundle, "noisy", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout_json(&output), json!({"ok": true}));
}

#[test]
fn http_argument_stays_inside_its_path_segment() {
    let server = Server::start(|_| reply(200, "{}"));
    let td = TestDir::new();
    let url = format!("http://127.0.0.1:{}/users/{{user}}/mail", server.port);
    let bundle =
        td.bundle("traversal", json!([http_tool_taking("mail.get", "GET", &url, "user")]), &net_caps(server.port));
    let output =
        td.call(&bundle, "mail.get", json!({"user": "../../admin?x=1#@evil.example", "q": "a b"})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].line, "GET /users/..%2F..%2Fadmin%3Fx%3D1%23%40evil.example/mail?q=a+b HTTP/1.1");
    assert_eq!(requests[0].header("host"), Some(format!("127.0.0.1:{}", server.port).as_str()));

    let output = td.call(&bundle, "mail.get", json!({"user": ".."})).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    rlp_snapshot!(&td, &output);
    assert_eq!(server.connections(), 1);
}

fn redirect_bundle(td: &TestDir, from: &Server, grants: &[u16]) -> PathBuf {
    let url = format!("http://127.0.0.1:{}/start", from.port);
    let tool = json!({
        "id": "hop",
        "description": "follows a redirect",
        "transport": {"kind": "http", "method": "GET", "url": url,
                      "headers": {"Authorization": format!("Bearer ${{secret:{TOKEN_ID}}}"), "X-Plain": "visible"}},
        "input_schema": {"type": "object"},
        "result_schema": {},
        "secrets": [TOKEN_ID],
        "requires_confirmation": false,
    });
    let net: Vec<String> = grants.iter().map(|p| format!("\"127.0.0.1:{p}\"")).collect();
    td.bundle(
        "hopper",
        json!([tool]),
        &format!("[capabilities]\nnet = [{}]\nsecrets = [\"{TOKEN_ID}\"]\n", net.join(", ")),
    )
}

#[test]
fn redirect_to_an_ungranted_host_is_not_followed() {
    let other = Server::start(|_| reply(200, r#"{"stolen": true}"#));
    let location = format!("http://127.0.0.1:{}/steal", other.port);
    let first = Server::start(move |_| redirect(302, &location));
    let td = TestDir::new();
    let bundle = redirect_bundle(&td, &first, &[first.port]);
    let output = td.call(&bundle, "hop", json!({})).env(TOKEN_ENV, SECRET).output().unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert_contains(
        &stderr(&output),
        &format!(
            "error: HTTP 302 Found: redirect to 127.0.0.1:{0} not followed: the policy does not grant `net:127.0.0.1:{0}`",
            other.port
        ),
    );
    assert_eq!(other.connections(), 0, "the redirect was followed");
    assert_eq!(first.requests()[0].header("authorization"), Some(format!("Bearer {SECRET}").as_str()));
    let deny = td.events().iter().map(payload).find(|p| p["decision"] == "deny").unwrap();
    assert_eq!(deny["capability"], format!("net:127.0.0.1:{}", other.port).as_str());
    assert_ledger_has_no_secret(&td);
}

#[test]
fn granted_redirect_drops_the_secret_header() {
    let other = Server::start(|_| reply(200, r#"{"landed": true}"#));
    let location = format!("http://127.0.0.1:{}/landing", other.port);
    let first = Server::start(move |_| redirect(307, &location));
    let td = TestDir::new();
    let bundle = redirect_bundle(&td, &first, &[first.port, other.port]);
    let output = td.call(&bundle, "hop", json!({})).env(TOKEN_ENV, SECRET).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout_json(&output), json!({"landed": true}));
    let landed = other.requests();
    assert_eq!(landed.len(), 1);
    assert_eq!(landed[0].line, "GET /landing HTTP/1.1");
    assert_eq!(landed[0].header("authorization"), None, "the secret header followed the redirect");
    assert_eq!(landed[0].header("x-plain"), Some("visible"));
    let allowed: Vec<Value> =
        td.events().iter().map(payload).filter(|p| p["reason"] == "redirect target granted by policy").collect();
    assert_eq!(allowed.len(), 1);
}

#[test]
fn header_producing_crlf_is_refused() {
    let server = Server::start(|_| reply(200, "{}"));
    let td = TestDir::new();
    let bundle = redirect_bundle(&td, &server, &[server.port]);
    let output = td.call(&bundle, "hop", json!({})).env(TOKEN_ENV, "abc\r\nX-Injected: 1").output().unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    rlp_snapshot!(&td, &output);
    assert!(!stderr(&output).contains("X-Injected"));
    assert_eq!(server.connections(), 0);
}

fn confirm_bundle(td: &TestDir, marker: &Path) -> PathBuf {
    td.bundle(
        "careful",
        json!([with(touch_tool(marker), json!({"requires_confirmation": true}))]),
        &state_caps(td, "exec = true\n"),
    )
}

#[test]
fn confirmation_without_a_terminal_is_refused_and_yes_approves() {
    let td = TestDir::new();
    let marker = marker_of(&td);
    let bundle = confirm_bundle(&td, &marker);
    let output = td.call(&bundle, "touch", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(!marker.exists());
    rlp_snapshot!(&td, &output);
    let confirm = td.events().iter().find(|e| e.kind == "tool.confirm").map(payload).unwrap();
    assert_eq!(confirm["approved"], false);

    td.call(&bundle, "touch", json!({})).arg("--yes").assert().code(0);
    assert!(marker.exists());
    let events = td.events();
    let confirms: Vec<Value> = events.iter().filter(|e| e.kind == "tool.confirm").map(payload).collect();
    assert_eq!(confirms.len(), 2);
    assert_eq!(confirms[1]["approved"], true);
    assert_eq!(confirms[1]["by"], "operator");
    assert_eq!(confirms[1]["how"], "pre-approved (--yes)");
    let order: Vec<&str> = kinds(&events[events.len() - 4..]);
    assert_eq!(order, ["cap.audit", "tool.confirm", "tool.call", "tool.result"]);
}

#[test]
fn user_config_or_environment_can_waive_confirmation() {
    let td = TestDir::new();
    let marker = marker_of(&td);
    let bundle = confirm_bundle(&td, &marker);
    std::fs::create_dir_all(td.home()).unwrap();
    std::fs::write(td.home().join("config.toml"), "[security]\nconfirm_external_actions = false\n").unwrap();
    td.call(&bundle, "touch", json!({})).assert().code(0);
    assert!(marker.exists());
    let confirm = td.events().iter().find(|e| e.kind == "tool.confirm").map(payload).unwrap();
    assert_eq!(confirm["by"], "config");
    assert_eq!(
        confirm["how"],
        format!(
            "not asked: security.confirm_external_actions = false ([security] in {})",
            td.home().join("config.toml").display()
        )
        .as_str()
    );

    // The environment outranks the user config, in both directions.
    std::fs::remove_file(&marker).unwrap();
    td.call(&bundle, "touch", json!({})).env("RUNLOOP_SECURITY_CONFIRM_EXTERNAL_ACTIONS", "true").assert().code(3);
    assert!(!marker.exists());
    std::fs::remove_file(td.home().join("config.toml")).unwrap();
    td.call(&bundle, "touch", json!({})).env("RUNLOOP_SECURITY_CONFIRM_EXTERNAL_ACTIONS", "false").assert().code(0);
    assert!(marker.exists());
    let output = td
        .call(&bundle, "touch", json!({}))
        .env("RUNLOOP_SECURITY_CONFIRM_EXTERNAL_ACTIONS", "maybe")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    rlp_snapshot!(&td, &output);
}

#[test]
fn system_policy_confirmation_cannot_be_switched_off() {
    let td = TestDir::new();
    let marker = marker_of(&td);
    let bundle = confirm_bundle(&td, &marker);
    let system = td.join("system.toml");
    std::fs::write(&system, "[policy]\nconfirm_external_actions = true\n").unwrap();
    std::fs::create_dir_all(td.home()).unwrap();
    std::fs::write(td.home().join("config.toml"), "[security]\nconfirm_external_actions = false\n").unwrap();
    let output = td
        .call(&bundle, "touch", json!({}))
        .env("RUNLOOP_SYSTEM_CONFIG", &system)
        .env("RUNLOOP_SECURITY_CONFIRM_EXTERNAL_ACTIONS", "false")
        .args(["--confirm-external-actions", "false"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(!marker.exists());
    rlp_snapshot!(&td, &output);
    td.call(&bundle, "touch", json!({})).env("RUNLOOP_SYSTEM_CONFIG", &system).arg("--yes").assert().code(0);
    assert!(marker.exists());
}

#[test]
fn concurrent_processes_lose_nothing_and_keep_the_chain() {
    const PROCESSES: usize = 8;
    const CALLS: usize = 100;
    let td = TestDir::new();
    let bundle = td.bundle("busy", json!([bundle::runtime_tool("ok", "ok.sh", &[])]), "[capabilities]\nexec = true\n");
    let failures = Arc::new(Mutex::new(Vec::new()));
    std::thread::scope(|scope| {
        for _ in 0..PROCESSES {
            let (td, bundle, failures) = (&td, &bundle, failures.clone());
            scope.spawn(move || {
                for _ in 0..CALLS {
                    let output = td.call(bundle, "ok", json!({})).output().unwrap();
                    if output.status.code() != Some(0) {
                        failures.lock().unwrap().push(stderr(&output));
                    }
                }
            });
        }
    });
    let failures = failures.lock().unwrap();
    assert!(failures.is_empty(), "{} calls failed, first: {}", failures.len(), failures[0]);
    let events = td.events();
    let count = |kind: &str| events.iter().filter(|e| e.kind == kind).count();
    assert_eq!(count("tool.call"), PROCESSES * CALLS);
    assert_eq!(count("tool.result"), PROCESSES * CALLS);
    assert_eq!(count("cap.audit"), PROCESSES * CALLS);
    let report = rlp::ledger::verify_chain(&td.ledger_path()).unwrap();
    assert!(report.is_intact(), "{:?}", report.problems);
    assert_eq!(report.rows, (3 * PROCESSES * CALLS) as u64);
    // Within each invocation: call before result.
    let mut seen_call = std::collections::HashSet::new();
    for event in &events {
        let invocation = payload(event)["invocation_id"].as_str().unwrap().to_string();
        match event.kind.as_str() {
            "tool.call" => assert!(seen_call.insert(invocation)),
            "tool.result" => assert!(seen_call.contains(&invocation), "result before call"),
            _ => {}
        }
    }
}

#[test]
fn kill_during_a_call_leaves_a_sound_ledger() {
    let td = TestDir::new();
    let pid_file = td.state_dir().join("tool.pid");
    let bundle = td.bundle(
        "victim",
        json!([exec_tool_on("slow", "slow.sh", &pid_file, &td.state_dir()), bundle::runtime_tool("ok", "ok.sh", &[])]),
        &state_caps(&td, "exec = true\n"),
    );
    td.call(&bundle, "ok", json!({})).assert().code(0);
    let mut child = td
        .command()
        .args(["tools", "call"])
        .arg(&bundle)
        .arg("slow")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let tool_pid: i32 = wait_for_file(&pid_file).trim().parse().unwrap();
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // The kernel kills the tool when rlp dies; what it forked is orphaned: end it.
    wait_until_gone(tool_pid);
    process::signal(-tool_pid, libc::SIGKILL);
    let ledger = Ledger::open(&td.ledger_path()).unwrap();
    assert_eq!(ledger.integrity_check().unwrap(), "ok");
    let report = rlp::ledger::verify_chain(&td.ledger_path()).unwrap();
    assert!(report.is_intact(), "{report:?}");
    let events = td.events();
    assert_eq!(kinds(&events), ["cap.audit", "tool.call", "tool.result", "cap.audit", "cap.audit", "tool.call"]);
    drop(ledger);
    td.call(&bundle, "ok", json!({})).assert().code(0);
    assert!(rlp::ledger::verify_chain(&td.ledger_path()).unwrap().is_intact());
}

#[test]
fn interrupting_rlp_kills_the_tool_and_what_it_forked() {
    use std::os::unix::process::ExitStatusExt;
    // Every catchable fatal signal, SIGPIPE from another process included.
    let signals = [
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGPIPE,
        libc::SIGRTMIN() + 1,
    ];
    for signal in signals {
        let td = TestDir::new();
        let pids = td.state_dir();
        let tmp = td.tmp_dir();
        let bundle = td.bundle(
            "sleeper",
            json!([exec_tool_on("sleep", "sleep_fork.sh", &pids, &pids)]),
            &state_caps(&td, "exec = true\n"),
        );
        let mut command = td.command();
        command
            .args(["tools", "call"])
            .arg(&bundle)
            .arg("sleep")
            .env("TMPDIR", &tmp)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(td.join("rlp.stderr")).unwrap());
        // rlp leaves ignored signals ignored (`nohup`): the test gives it the
        // default disposition whatever the test runner inherited.
        // SAFETY: signal() is async-signal-safe, as pre_exec requires.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, move || {
                libc::signal(signal, libc::SIG_DFL);
                Ok(())
            });
        }
        let mut rlp = command.spawn().unwrap();
        let parent: i32 = wait_for_file(&pids.join("parent.pid")).trim().parse().unwrap();
        let child: i32 = wait_for_file(&pids.join("child.pid")).trim().parse().unwrap();
        process::signal(rlp.id() as i32, signal);
        let status = rlp.wait().unwrap();
        let said = std::fs::read_to_string(td.join("rlp.stderr")).unwrap_or_default();
        assert_eq!(
            status.signal(),
            Some(signal),
            "rlp ends by the signal {signal} it got: {status:?}; stderr:\n{said}"
        );
        wait_until_gone(parent);
        wait_until_gone(child);
        let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(left.is_empty(), "signal {signal}: the call's private folder is removed: {left:?}");
    }
}

#[test]
fn a_later_call_sweeps_the_call_folders_of_dead_rlp_processes() {
    let td = TestDir::new();
    let tmp = td.join("tmp");
    // A pid no process has (above the kernel's pid_max), and this test's own.
    let dead = tmp.join("rlp-call-99999999-AbCdEf");
    let alive = tmp.join(format!("rlp-call-{}-GhIjKl", std::process::id()));
    for folder in [&dead, &alive] {
        std::fs::create_dir_all(folder.join("scratch")).unwrap();
        std::fs::write(folder.join("call.json"), "{\"tool\": {\"arguments\": {\"card\": \"4111\"}}}").unwrap();
    }
    let bundle = td.bundle("plain", json!([bundle::runtime_tool("ok", "ok.sh", &[])]), "[capabilities]\nexec = true\n");
    td.call(&bundle, "ok", json!({})).env("TMPDIR", &tmp).assert().success();
    assert!(!dead.exists(), "the folder of a dead rlp is swept");
    assert!(alive.exists(), "the folder of a live process is kept");
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, [alive.file_name().unwrap()]);
}

/// Bundle `escaper` with tool `escape` (leave_group.pl, `timeout_ms` 1000),
/// which joins rlp's process group and records its pids in `pids`.
fn escaper_bundle(td: &TestDir, pids: &Path) -> PathBuf {
    td.bundle(
        "escaper",
        json!([with(exec_tool_on("escape", "leave_group.pl", pids, &td.state_dir()), json!({"timeout_ms": 1000}))]),
        &state_caps(td, "exec = true\n"),
    )
}

#[test]
fn a_tool_that_leaves_its_process_group_is_still_killed_at_its_timeout() {
    let td = TestDir::new();
    let pids = td.state_dir().join("pids");
    let bundle = escaper_bundle(&td, &pids);
    // A sandboxed tool runs in a session of its own and cannot join rlp's
    // process group at all (see the next test): this is the unconfined path.
    let mut call = td.call(&bundle, "escape", json!({}));
    call.env("RUNLOOP_RUNTIME_SANDBOX", "off");
    // Before the fix rlp waited for the tool (1000 s): the hang guard fails the test.
    call_expecting_timeout(call, "escape");
    let text = std::fs::read_to_string(&pids).unwrap();
    let (tool, child) = text.trim().split_once(' ').unwrap();
    assert!(!process::is_running(tool), "the tool {tool} is still there");
    assert!(!process::is_running(child), "its child {child}, in a session of its own, is still there");
}

#[test]
fn a_sandboxed_tool_cannot_join_the_process_group_of_rlp() {
    let td = TestDir::new();
    let pids = td.state_dir().join("pids");
    let bundle = escaper_bundle(&td, &pids);
    let output = td.call(&bundle, "escape", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let call = td.events().into_iter().find(|e| e.kind == "tool.call").map(|e| payload(&e)).unwrap();
    let record = &call["sandbox"];
    assert_eq!(record["confined"], true, "{record}");
    let script = files::fixture("runtime/leave_group.pl");
    let expected = format!(
        "error: tool `escape` exited with status 1; stderr: setpgrp: Operation not permitted at {script} line 8.; \
         the tool ran sandboxed (Landlock ABI {abi}): read system, {script}, {bundle}; read-write $TMPDIR, {state}; \
         no network\n",
        abi = record["landlock_abi"],
        bundle = bundle.display(),
        state = td.state_dir().display(),
    );
    assert_contains(&stderr(&output), &expected);
    assert!(!pids.exists(), "the tool went on after setpgrp failed");
}

#[test]
fn a_result_printed_before_exit_survives_a_background_process_holding_stdout() {
    let td = TestDir::new();
    let pid_file = td.state_dir().join("background.pid");
    let bundle = td.bundle(
        "holder",
        json!([exec_tool_on("hold", "background_holds_stdout.sh", &pid_file, &td.state_dir())]),
        &state_caps(&td, "exec = true\n"),
    );
    let output = td.call(&bundle, "hold", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout_json(&output), json!({"answer": 42}));
    let background = std::fs::read_to_string(&pid_file).unwrap();
    assert!(!process::is_running(background.trim()), "the background process outlived the call");

    // Embedded in a process that is not the subreaper, the background process
    // escapes rlp and holds the pipe: what the tool printed still counts.
    std::fs::remove_file(&pid_file).unwrap();
    let runtime = Runtime::load(
        &bundle,
        RuntimeOptions::new(rlp::home::Home::new(td.home()), Arc::new(MemoryRecorder::default())),
    )
    .unwrap();
    let request = CallRequest::new("hold", json!({}));
    let outcome = runtime.call(&request);
    let background: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    process::signal(background, libc::SIGKILL);
    assert_eq!(outcome.unwrap().result, json!({"answer": 42}));
}

#[test]
fn transient_errors_are_retried_and_each_attempt_recorded() {
    let td = TestDir::new();
    let counter = td.state_dir().join("attempts");
    let bundle = td.bundle(
        "flaky",
        json!([with(
            exec_tool_on("flaky", "transient.sh", &counter, &td.state_dir()),
            json!({"retry": {"max_attempts": 3}})
        )]),
        &state_caps(&td, "exec = true\n"),
    );
    let output = td.call(&bundle, "flaky", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout_json(&output), json!({"attempt": 3}));
    let results: Vec<Value> = td.events().iter().filter(|e| e.kind == "tool.result").map(payload).collect();
    assert_eq!(results.len(), 3);
    for (i, result) in results.iter().enumerate() {
        assert_eq!(result["attempt"], i + 1);
    }
    assert_eq!(results[0]["error"]["message"], "tool `flaky` failed: busy, try again");
    assert_eq!(results[0]["error"]["transient"], true);
    assert_eq!(results[0]["error"]["will_retry"], true);
    assert_eq!(results[0]["error"]["retry_after_ms"], 10);
    assert_eq!(results[2]["result"], json!({"attempt": 3}));

    // Without retries configured, the first transient failure is final.
    std::fs::remove_file(&counter).unwrap();
    let once = td.bundle(
        "flaky_once",
        json!([bundle::runtime_tool("flaky", "transient.sh", &[counter.to_str().unwrap()])]),
        "[capabilities]\nexec = true\n",
    );
    let output = td.call(&once, "flaky", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    rlp_snapshot!(&td, &output);
}

#[test]
fn unknown_tools_and_invalid_bundles_are_usage_errors() {
    let td = TestDir::new();
    let bundle = td.bundle("known", json!([bundle::runtime_tool("ok", "ok.sh", &[])]), "[capabilities]\nexec = true\n");
    let output = td.call(&bundle, "nope", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    rlp_snapshot!(&td, &output);

    // A stale digest is a lint error: the bundle is refused at load.
    std::fs::write(bundle.join("policy.caps"), "[capabilities]\nexec = true\ntime = true\n").unwrap();
    let output = td.call(&bundle, "ok", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    rlp_snapshot!(&td, &output);
}

#[test]
fn library_runtime_serves_calls_from_several_threads() {
    let td = TestDir::new();
    let bundle = td.bundle(
        "lib",
        json!([bundle::runtime_tool("blob.echo", "echo_blob.sh", &[])]),
        "[capabilities]\nexec = true\n",
    );
    let recorder = Arc::new(MemoryRecorder::new());
    let options = RuntimeOptions::new(rlp::home::Home::new(td.home()), recorder.clone());
    let runtime = Arc::new(Runtime::load(&bundle, options).unwrap());
    assert!(runtime.is_exposed("blob.echo"));
    let trace = uuid::Uuid::now_v7();
    std::thread::scope(|scope| {
        for thread in 0..4 {
            let runtime = runtime.clone();
            scope.spawn(move || {
                for i in 0..5 {
                    let mut request = CallRequest::new("blob.echo", json!({"t": thread, "i": i}));
                    request.trace_id = Some(trace);
                    let outcome = runtime.call(&request).unwrap();
                    assert_eq!(outcome.result["tool"]["arguments"], json!({"t": thread, "i": i}));
                    assert_eq!(outcome.result["invocation_id"], outcome.invocation_id.to_string().as_str());
                }
            });
        }
    });
    let records = recorder.records();
    assert_eq!(records.iter().filter(|r| r.kind == "tool.call").count(), 20);
    assert_eq!(records.iter().filter(|r| r.kind == "tool.result").count(), 20);
    assert!(records.iter().all(|r| r.provenance.trace_id == trace));
}

#[test]
fn confirmation_prompt_on_a_terminal() {
    let td = TestDir::new();
    let marker = marker_of(&td);
    let bundle = confirm_bundle(&td, &marker);
    let spawn = || {
        let mut cmd = td.command();
        cmd.args(["tools", "call"]).arg(&bundle).args(["touch", "--args", r#"{"to": "a@b.c"}"#]);
        Terminal::spawn(cmd, Duration::from_secs(20))
    };
    // Declined: the tool does not run.
    let mut terminal = spawn();
    terminal.expect("Tool `touch` wants to run: test tool touch");
    terminal.expect(&format!("target: {} <blob> {}", files::fixture("runtime/marker.sh"), marker.display()));
    terminal.expect("\"to\": \"a@b.c\"");
    terminal.expect("Allow this call?");
    terminal.press("n");
    terminal.expect("requires confirmation and the call was not approved: declined at the terminal prompt");
    terminal.expect_end();
    assert!(!marker.exists());
    // Approved: it runs and the result is printed.
    let mut terminal = spawn();
    terminal.expect("Allow this call?");
    terminal.press("y");
    terminal.expect("\"ok\": true");
    terminal.expect_end();
    assert!(marker.exists());
    let confirms: Vec<Value> = td.events().iter().filter(|e| e.kind == "tool.confirm").map(payload).collect();
    assert_eq!(confirms.len(), 2);
    assert_eq!(
        (&confirms[0]["approved"], &confirms[0]["how"]),
        (&json!(false), &json!("declined at the terminal prompt"))
    );
    assert_eq!((&confirms[1]["approved"], &confirms[1]["how"]), (&json!(true), &json!("terminal prompt")));
}

// ---------------------------------------------------------------- trust at call time

/// Signs `bundle` with a new key `keys/<name>.key`; returns the public key file.
fn sign_bundle(td: &TestDir, bundle: &Path, name: &str) -> PathBuf {
    let keys = td.join("keys");
    td.rlp().args(["keygen", "--out"]).arg(&keys).args(["--name", name]).assert().success();
    td.rlp().arg("sign").arg(bundle).arg("--key").arg(keys.join(format!("{name}.key"))).assert().success();
    keys.join(format!("{name}.pub"))
}

/// Signs `bundle` with a new key `release` and makes that key a trust
/// anchor allowed `exec`; returns the public key file.
fn sign_trusted(td: &TestDir, bundle: &Path) -> PathBuf {
    let public = sign_bundle(td, bundle, "release");
    td.rlp()
        .args(["trust", "add"])
        .arg(&public)
        .args(["--name", "release", "--allow-caps", "exec", "--allow-exec"])
        .assert()
        .success();
    public
}

/// The trust gate's `cap.audit` events, as (decision, reason).
fn trust_audits(td: &TestDir) -> Vec<(String, String)> {
    td.events()
        .iter()
        .filter(|e| e.kind == "cap.audit")
        .map(payload)
        .filter(|p| p["capability"] == "trust")
        .map(|p| (p["decision"].as_str().unwrap().to_string(), p["reason"].as_str().unwrap().to_string()))
        .collect()
}

fn tool_calls(td: &TestDir) -> usize {
    if !td.ledger_path().exists() {
        return 0;
    }
    td.events().iter().filter(|e| e.kind == "tool.call").count()
}

/// A signed `marked` bundle (one exec tool) installed under the home, its
/// signer a trust anchor allowed `exec`; returns (installed folder, public key file).
fn installed_bundle(td: &TestDir) -> (PathBuf, PathBuf) {
    let bundle =
        td.bundle("marked", json!([bundle::runtime_tool("ok", "ok.sh", &[])]), "[capabilities]\nexec = true\n");
    let public = sign_trusted(td, &bundle);
    td.rlp().args(["agent", "install"]).arg(&bundle).assert().success();
    let installed = td.home().join("agents/marked");
    let output = td.call(&installed, "ok", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stderr(&output), "", "a checked bundle gets no note");
    let audits = trust_audits(td);
    assert_eq!(audits.len(), 1);
    assert_eq!(audits[0].0, "allow");
    assert!(audits[0].1.starts_with("installed bundle verified: signed by trust anchor `release` (key "), "{audits:?}");
    (installed, public)
}

/// Calls `ok` in `bundle`, expecting a trust refusal naming `why`; the tool never runs.
fn assert_refused_by_trust(td: &TestDir, bundle: &Path, why: &str) {
    let calls_before = tool_calls(td);
    let output = td.call(bundle, "ok", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.starts_with("error: bundle `marked` is refused by the trust policy: "), "{err}");
    assert!(err.contains(why), "expected `{why}` in: {err}");
    assert!(output.stdout.is_empty());
    assert_eq!(tool_calls(td), calls_before, "the tool ran");
    let (decision, reason) = trust_audits(td).pop().unwrap();
    assert_eq!(decision, "deny");
    assert_contains(&reason, why);
}

#[test]
fn an_installed_bundle_whose_signer_was_revoked_is_refused_at_call_time() {
    let td = TestDir::new();
    let (installed, _) = installed_bundle(&td);
    td.rlp().args(["trust", "revoke", "release"]).assert().success();
    assert_refused_by_trust(&td, &installed, "which is revoked in trust-policy.toml");
}

#[test]
fn an_installed_bundle_beyond_its_signers_narrowed_rule_is_refused_at_call_time() {
    let td = TestDir::new();
    let (installed, _) = installed_bundle(&td);
    let policy_file = td.home().join("trust-policy.toml");
    let policy = std::fs::read_to_string(&policy_file).unwrap();
    let narrowed = policy.replace("allow_caps = [\"exec\"]", "allow_caps = []").replace("allow_exec = true", "");
    assert_ne!(narrowed, policy);
    std::fs::write(&policy_file, narrowed).unwrap();
    assert_refused_by_trust(&td, &installed, "the bundle requests `exec`, beyond what signer `release`");
}

#[test]
fn an_installed_bundle_edited_and_re_digested_after_install_is_refused_at_call_time() {
    let td = TestDir::new();
    let (installed, _) = installed_bundle(&td);
    let tools = installed.join("tools.json");
    let text = std::fs::read_to_string(&tools).unwrap().replace("test tool ok", "now does something else");
    std::fs::write(&tools, text).unwrap();
    td.rlp().arg("digest").arg(&installed).assert().success();
    assert_refused_by_trust(&td, &installed, "SIGNATURES/manifest.sig does not match manifest.toml");
    // Live replay runs nothing of the recorded trace either.
    let trace = td.events().iter().find(|e| e.kind == "tool.call").unwrap().provenance().unwrap().trace_id.to_string();
    let output = td.rlp().args(["replay", &trace, "--mode", "live", "--bundle"]).arg(&installed).output().unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    rlp_snapshot!(&td, &output);
    assert_eq!(tool_calls(&td), 1);
    // Strict replay runs nothing: it still reads the bundle's tools.
    let output = td.rlp().args(["replay", &trace, "--bundle"]).arg(&installed).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
}

/// A process runs the bundle as it loaded it: when the folder is replaced
/// by another signed bundle after the load, the trust gate verifies the new
/// one, and the call is refused rather than run from what was loaded.
#[test]
fn a_bundle_replaced_after_it_was_loaded_is_not_run_as_loaded() {
    let td = TestDir::new();
    std::fs::create_dir_all(td.home()).unwrap();
    std::fs::write(td.home().join("config.toml"), "[runtime]\nsandbox = \"off\"\n").unwrap();
    let swap = td.join("swap.sh");
    let tools = json!([
        bundle::tool("swap", bundle::exec(&swap.display().to_string(), &[])),
        bundle::runtime_tool("ok", "ok.sh", &[])
    ]);
    let loaded = td.bundle("marked", tools, "[capabilities]\nexec = true\n");
    sign_trusted(&td, &loaded);
    // The same bundle with another tools.json, signed by the same trusted key.
    let other = td.join("other/marked");
    files::copy_tree(&loaded, &other);
    let text =
        std::fs::read_to_string(other.join("tools.json")).unwrap().replace("test tool ok", "does something else");
    std::fs::write(other.join("tools.json"), text).unwrap();
    td.rlp().arg("digest").arg(&other).assert().success();
    td.rlp().arg("sign").arg(&other).arg("--key").arg(td.join("keys/release.key")).assert().success();
    td.rlp().args(["bundle", "verify"]).arg(&other).assert().success();
    // The first call puts the other bundle's files in place of the loaded ones.
    let copies: String = ["tools.json", "manifest.toml", "SIGNATURES/manifest.sig"]
        .iter()
        .map(|file| format!("cp {} {}\n", other.join(file).display(), loaded.join(file).display()))
        .collect();
    std::fs::write(&swap, format!("#!/bin/sh\nset -e\n{copies}echo '{{}}'\n")).unwrap();
    std::fs::set_permissions(&swap, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(td.join("calls.jsonl"), "{\"tool\": \"swap\"}\n{\"tool\": \"ok\"}\n").unwrap();
    let output = td
        .rlp()
        .args(["tools", "call"])
        .arg(&loaded)
        .arg("--batch")
        .arg(td.join("calls.jsonl"))
        .args(["--jobs", "1"])
        .output()
        .unwrap();
    assert_ne!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(tool_calls(&td), 1, "only the first call ran");
    let (decision, reason) = trust_audits(&td).pop().unwrap();
    assert_eq!(decision, "deny");
    assert_eq!(reason, "manifest.toml changed since rlp loaded the bundle: rlp runs only the bundle it verifies");
    // A process that loads the bundle as it is now runs it.
    td.call(&loaded, "ok", json!({})).assert().success();
}

#[test]
fn a_signed_working_folder_is_checked_and_an_unsigned_one_is_not() {
    let td = TestDir::new();
    let bundle =
        td.bundle("marked", json!([bundle::runtime_tool("ok", "ok.sh", &[])]), "[capabilities]\nexec = true\n");
    let public = sign_bundle(&td, &bundle, "author");
    // Signed by a key that is not a trust anchor.
    assert_refused_by_trust(&td, &bundle, "which is not a trust anchor in trust-policy.toml");
    td.rlp()
        .args(["trust", "add"])
        .arg(&public)
        .args(["--name", "author", "--allow-caps", "exec", "--allow-exec"])
        .assert()
        .success();
    td.call(&bundle, "ok", json!({})).assert().success();
    // Changed after signing, even with fresh digests.
    let tools = bundle.join("tools.json");
    std::fs::write(&tools, std::fs::read_to_string(&tools).unwrap().replace("test tool ok", "changed")).unwrap();
    td.rlp().arg("digest").arg(&bundle).assert().success();
    assert_refused_by_trust(&td, &bundle, "does not match manifest.toml");
    let output = td.call(&bundle, "ok", json!({})).output().unwrap();
    rlp_snapshot!(&td, &output);
    // Without its signature it is an author's working folder again.
    std::fs::remove_dir_all(bundle.join("SIGNATURES")).unwrap();
    let output = td.call(&bundle, "ok", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).starts_with("note: "), "{}", stderr(&output));
}

#[test]
fn an_override_with_an_unknown_table_or_key_refuses_every_call_of_its_agent() {
    let td = TestDir::new();
    let marker = marker_of(&td);
    let bundle = td.bundle("guarded", json!([touch_tool(&marker)]), &state_caps(&td, "exec = true\n"));
    for (text, at) in
        [("exec = false\n", "1:1"), ("[Capabilities]\nexec = false\n", "1:2"), ("[capability]\nexec = false\n", "1:2")]
    {
        let override_file = td.write_override("guarded", text);
        let output = td.call(&bundle, "touch", json!({})).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{text:?}: {}", stderr(&output));
        let expected = format!("error: {}:{at}: unknown key", override_file.display());
        assert!(stderr(&output).starts_with(&expected), "{text:?}: {}", stderr(&output));
        rlp_snapshot!(&td, &output);
        assert!(!marker.exists(), "{text:?}: the tool ran");
    }
}

/// Runs `rlp <args>` in a private mount namespace, after the shell
/// commands `setup` (as root; mounts made there are seen by rlp alone) and
/// followed by `after` (run whatever rlp's exit; the script exits with
/// rlp's code). Needs root and unshare(1); fails loudly without them.
fn rlp_in_mount_namespace(
    td: &TestDir,
    setup: &str,
    after: &str,
    env: &[(&str, &str)],
    args: &[&str],
) -> std::process::Output {
    let script = format!("set -e; mount --make-rprivate /; {setup}; set +e; \"$@\"; code=$?; {after}; exit $code");
    let mut command = td.wrapped(&["unshare", "--mount", "sh", "-c", &script, "sh"]);
    command.args(args).envs(env.iter().copied());
    let output = assert_cmd::Command::from_std(command).timeout(HANG_GUARD).output().unwrap();
    assert!(
        !stderr(&output).contains("unshare:") && !stderr(&output).contains("mount:"),
        "this test needs root and unshare(1): {}",
        stderr(&output)
    );
    output
}

/// Runs `rlp <args>` where /etc (an overlay of the real one) holds
/// `/etc/runloop/config.toml` = `system_config`: the real system file,
/// without touching the machine's.
fn rlp_with_etc_config(td: &TestDir, system_config: &str, env: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    let overlay = td.join("etc-overlay");
    std::fs::create_dir_all(overlay.join("upper")).unwrap();
    std::fs::create_dir_all(overlay.join("work")).unwrap();
    std::fs::write(overlay.join("config.toml"), system_config).unwrap();
    let setup = format!(
        "mount -t overlay overlay -o lowerdir=/etc,upperdir='{o}/upper',workdir='{o}/work' /etc; \
         mkdir -p /etc/runloop; cp '{o}/config.toml' /etc/runloop/config.toml",
        o = overlay.display()
    );
    rlp_in_mount_namespace(td, &setup, "true", env, args)
}

#[test]
fn no_variable_or_flag_lifts_the_system_policy() {
    let td = TestDir::new();
    let marker = marker_of(&td);
    let bundle = td.bundle(
        "careful",
        json!([with(touch_tool(&marker), json!({"requires_confirmation": true}))]),
        &state_caps(&td, "exec = true\n"),
    );
    let bundle = bundle.to_str().unwrap();
    let policy = "[policy]\nconfirm_external_actions = true\n";
    let lax = td.join("lax.toml");
    std::fs::write(&lax, "[policy]\nconfirm_external_actions = false\n[security]\nconfirm_external_actions = false\n")
        .unwrap();
    for system_config in ["/dev/null", lax.to_str().unwrap(), "", "/nonexistent/config.toml"] {
        let output = rlp_with_etc_config(
            &td,
            policy,
            &[("RUNLOOP_SYSTEM_CONFIG", system_config), ("RUNLOOP_SECURITY_CONFIRM_EXTERNAL_ACTIONS", "false")],
            &["tools", "call", bundle, "touch", "--confirm-external-actions", "false"],
        );
        assert_eq!(output.status.code(), Some(3), "RUNLOOP_SYSTEM_CONFIG={system_config:?}: {}", stderr(&output));
        rlp_snapshot!(&td, &output);
        assert!(!marker.exists(), "RUNLOOP_SYSTEM_CONFIG={system_config:?}: the tool ran unconfirmed");
    }
    // The policy asks for confirmation; --yes gives it.
    let output = rlp_with_etc_config(
        &td,
        policy,
        &[("RUNLOOP_SYSTEM_CONFIG", "/dev/null")],
        &["tools", "call", bundle, "touch", "--yes"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(marker.exists());
}

#[test]
fn a_result_the_full_disk_cannot_record_is_still_shown_with_its_ids() {
    let td = TestDir::new();
    let saved = td.join("saved");
    std::fs::create_dir_all(td.home()).unwrap();
    // The tool writes to the home's file system: it declares the home.
    let bundle = td.bundle(
        "filler",
        json!([exec_tool_on("fill", "fill_disk.sh", &td.home(), &td.home())]),
        &bundle::caps("exec = true\n", &td.home()),
    );
    // The home is a 1 MiB file system; the tool fills it after its call frame is recorded.
    let setup = format!("mount -t tmpfs -o size=1m,mode=0700 tmpfs '{}'", td.home().display());
    let after = format!("mkdir -p '{s}' && cp -r '{}/pog' '{s}/'", td.home().display(), s = saved.display());
    for format in ["human", "json"] {
        let output = rlp_in_mount_namespace(
            &td,
            &setup,
            &after,
            &[("RUNLOOP_SYSTEM_CONFIG", "/nonexistent/system.toml")],
            &["tools", "call", bundle.to_str().unwrap(), "fill", "--format", format],
        );
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        let err = stderr(&output);
        assert!(
            err.contains("the tool's result, NOT recorded in the ledger:\n{\n  \"sent\": true\n}\n"),
            "{format}: {err}"
        );
        assert_contains(&err, "error: tool `fill` ran, but its result was not recorded: ");
        assert_contains(&err, "full");
        // The ids, to find the call frame that was recorded.
        let call = ledger::events(&ledger::path(&saved)).into_iter().rfind(|e| e.kind == "tool.call").unwrap();
        let (trace, invocation) = (call.provenance().unwrap().trace_id, payload(&call)["invocation_id"].clone());
        let invocation = invocation.as_str().unwrap();
        assert_contains(&err, &format!("the call is invocation {invocation} in trace {trace}"));
        if format == "json" {
            let document = stdout_json(&output);
            assert_eq!(document["trace_id"], trace.to_string());
            assert_eq!(document["invocation_id"], invocation);
            assert_eq!(document["unrecorded_result"], json!({"sent": true}));
            assert_eq!(document["error"]["exit"], 1);
        }
        std::fs::remove_dir_all(&saved).unwrap();
    }
}

/// An object holding arrays nested so that the whole value is `depth` levels deep.
fn nested(depth: usize) -> Value {
    let mut value = json!(1);
    for _ in 1..depth {
        value = json!([value]);
    }
    json!({"deep": value})
}

#[test]
fn what_a_call_records_at_the_deepest_reads_back_and_deeper_is_refused_up_front() {
    let td = TestDir::new();
    let bundle = td.bundle(
        "deep",
        json!([bundle::runtime_tool("ok", "ok.sh", &[]), bundle::runtime_tool("echo", "echo_blob.sh", &[])]),
        "[capabilities]\nexec = true\n",
    );
    let output = td.call(&bundle, "ok", nested(100)).args(["--format", "json"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let trace = stdout_json(&output)["trace_id"].as_str().unwrap().to_string();
    // Every reader reads it back, and the round trip through JSONL is lossless.
    td.rlp().args(["trace", "show", &trace]).assert().success();
    td.rlp().args(["trace", "show", &trace, "--format", "json"]).assert().success();
    let file = td.join("deep.jsonl");
    td.rlp().args(["trace", "export", &trace, "-o"]).arg(&file).assert().success();
    td.rlp().args(["replay", &trace, "--bundle"]).arg(&bundle).assert().success();
    td.rlp().arg("replay").arg(&file).arg("--bundle").arg(&bundle).assert().success();
    let other = TestDir::new();
    other.rlp().args(["trace", "import"]).arg(&file).assert().success();
    let again = other.join("again.jsonl");
    other.rlp().args(["trace", "export", &trace, "-o"]).arg(&again).assert().success();
    assert_eq!(std::fs::read(&file).unwrap(), std::fs::read(&again).unwrap());
    let call = other.events().iter().find(|e| e.kind == "tool.call").map(payload).unwrap();
    assert_eq!(call["args"], nested(100));

    // One level more is refused before anything runs.
    let output = td.call(&bundle, "ok", nested(101)).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    rlp_snapshot!(&td, &output);
    // A result nested too deeply is an invalid result, recorded as an error.
    let output = td.call(&bundle, "echo", nested(99)).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    rlp_snapshot!(&td, &output);
    let result = td.events().iter().rev().find(|e| e.kind == "tool.result").map(payload).unwrap();
    assert_eq!(result["error"]["kind"], "invalid_result");
    td.rlp().args(["trace", "verify"]).assert().success();

    // A hand-made file with a deeper payload is refused on import, naming the line.
    let text = std::fs::read_to_string(&file).unwrap();
    let deeper = text.replace("{\"deep\":", "{\"deep\":[[").replacen("]}", "]]]}", 1);
    assert_ne!(deeper, text);
    std::fs::write(td.join("deeper.jsonl"), deeper).unwrap();
    let output = TestDir::new().rlp().args(["trace", "import"]).arg(td.join("deeper.jsonl")).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    rlp_snapshot!(&td, &output);
}

#[test]
fn a_bundle_path_cannot_drive_the_terminal() {
    let td = TestDir::new();
    let parent = td.join("clear\x1b[2Jscreen");
    let bundle = bundle::write(
        &parent,
        "plain",
        json!([bundle::runtime_tool("ok", "ok.sh", &[])]),
        "[capabilities]\nexec = true\n",
    );
    let output = td.call(&bundle, "ok", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(!stderr(&output).contains('\x1b'), "{:?}", stderr(&output));
    rlp_snapshot!(&td, &output);
}

/// A library runtime for `bundle`, recording into `recorder`.
fn library_runtime(td: &TestDir, bundle: &Path, recorder: Arc<MemoryRecorder>) -> Runtime {
    Runtime::load(bundle, RuntimeOptions::new(rlp::home::Home::new(td.home()), recorder)).unwrap()
}

/// Cancels its call when the first attempt ends.
struct CancelAfterFirstAttempt(rlp::runtime::Cancel);

impl rlp::runtime::ProgressSink for CancelAfterFirstAttempt {
    fn progress(&self, step: rlp::runtime::Progress) {
        if matches!(step, rlp::runtime::Progress::AttemptEnded { attempt: 1, .. }) {
            self.0.cancel();
        }
    }
}

#[test]
fn a_cancel_ends_the_pause_before_a_retry() {
    let server = Server::start(|_| Reply {
        status: 503,
        headers: vec![("Retry-After".into(), "30".into())],
        body: String::new(),
    });
    let td = TestDir::new();
    let url = format!("http://127.0.0.1:{}/busy", server.port);
    let bundle = td.bundle(
        "busy",
        json!([with(http_tool("busy.get", "GET", &url), json!({"retry": {"max_attempts": 3}}))]),
        &net_caps(server.port),
    );
    let recorder = Arc::new(MemoryRecorder::new());
    let runtime = library_runtime(&td, &bundle, recorder.clone());
    let cancel = rlp::runtime::Cancel::new().unwrap();
    let context = rlp::runtime::CallContext {
        cancel: Some(cancel.clone()),
        progress: Some(Arc::new(CancelAfterFirstAttempt(cancel))),
        ..Default::default()
    };
    let started = std::time::Instant::now();
    let error = runtime.call_in(&CallRequest::new("busy.get", json!({})), &context).unwrap_err();
    // The server asked for a 30 s pause; the cancel cut it short.
    assert!(started.elapsed() < Duration::from_secs(20), "the retry pause outlived the cancel");
    assert_eq!(error.kind, rlp::runtime::CallErrorKind::Cancelled, "{error:?}");
    assert_eq!(server.requests().len(), 1);
    let results: Vec<Value> =
        recorder.records().into_iter().filter(|r| r.kind == "tool.result").map(|r| r.payload).collect();
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0]["error"]["will_retry"], true);
    assert_eq!(results[1]["error"]["kind"], "cancelled");
}

#[test]
fn a_cancel_ends_an_http_call_while_its_body_trickles_in() {
    // Sends the headers of a long body, then one space every 50 ms until
    // rlp hangs up; says when the first bytes are out.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (sent, first_bytes) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        let mut out = accept_request(&listener);
        out.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n ")
            .unwrap();
        out.flush().unwrap();
        sent.send(()).unwrap();
        while out.write_all(b" ").and_then(|()| out.flush()).is_ok() {
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let td = TestDir::new();
    let url = format!("http://127.0.0.1:{port}/trickle");
    let bundle = td.bundle(
        "trickle",
        json!([with(http_tool("trickle.get", "GET", &url), json!({"timeout_ms": 600_000}))]),
        &net_caps(port),
    );
    let recorder = Arc::new(MemoryRecorder::new());
    let runtime = library_runtime(&td, &bundle, recorder.clone());
    let cancel = rlp::runtime::Cancel::new().unwrap();
    let context = rlp::runtime::CallContext { cancel: Some(cancel.clone()), ..Default::default() };
    let canceller = std::thread::spawn(move || {
        first_bytes.recv_timeout(HANG_GUARD).unwrap();
        cancel.cancel();
    });
    let error = runtime.call_in(&CallRequest::new("trickle.get", json!({})), &context).unwrap_err();
    assert_eq!(error.kind, rlp::runtime::CallErrorKind::Cancelled, "{error:?}");
    assert_eq!(error.message, "the call of `trickle.get` was cancelled; its request was abandoned");
    let result = recorder.records().into_iter().find(|r| r.kind == "tool.result").unwrap().payload;
    assert_eq!(result["error"]["kind"], "cancelled");
    canceller.join().unwrap();
    drop(runtime);
    server.join().unwrap();
}

#[test]
fn showing_the_tools_needs_no_ledger() {
    let td = TestDir::new();
    let bundle = td.bundle("shown", json!([bundle::runtime_tool("ok", "ok.sh", &[])]), "[capabilities]\nexec = true\n");
    // Where the ledger's folder would go, a file: no ledger can be opened.
    let ledger_dir = td.ledger_path().parent().unwrap().to_path_buf();
    std::fs::create_dir_all(ledger_dir.parent().unwrap()).unwrap();
    std::fs::write(&ledger_dir, "not a folder").unwrap();
    let listed = td.rlp().args(["tools", "list"]).arg(&bundle).args(["--format", "mcp"]).output().unwrap();
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    assert_eq!(stdout_json(&listed)["tools"][0]["name"], "ok");
    let found = td.rlp().args(["tools", "search"]).arg(&bundle).args(["test", "--format", "json"]).output().unwrap();
    assert_eq!(found.status.code(), Some(0), "{}", stderr(&found));
    assert_eq!(stdout_json(&found)["tools"][0]["id"], "ok");
    // A call does need the ledger.
    let called = td.call(&bundle, "ok", json!({})).output().unwrap();
    assert_eq!(called.status.code(), Some(1));
    assert_contains(&stderr(&called), "error: cannot open the ledger");
    assert_eq!(std::fs::read_to_string(&ledger_dir).unwrap(), "not a folder");
}

/// Bundle `github`: `issues.list`, `issues.delete` and `repos.get`, every
/// capability granted; each leaves `<state>/ran-<id>` when it runs.
fn github_bundle(td: &TestDir) -> PathBuf {
    let state = td.state_dir();
    let tools: Vec<Value> = ["issues.list", "issues.delete", "repos.get"]
        .into_iter()
        .map(|id| {
            let marker = state.join(format!("ran-{id}"));
            bundle::with_fs(bundle::runtime_tool(id, "marker.sh", &[marker.to_str().unwrap()]), &state)
        })
        .collect();
    td.bundle("github", Value::Array(tools), &state_caps(td, "exec = true\n"))
}

/// The `cap.audit` frames of the operator's lists (`capability` `tool`).
fn list_audits(td: &TestDir) -> Vec<Value> {
    td.payloads("cap.audit").into_iter().filter(|p| p["capability"] == "tool").collect()
}

#[test]
fn the_operators_list_refuses_a_call_like_the_policy_with_an_audit_frame() {
    let td = TestDir::new();
    let github = github_bundle(&td);
    let config = td.write_config("[agents.github.tools]\nallow = [\"issues.*\", \"repos.*\"]\ndeny = [\"*.delete\"]\n");
    let output = td.call(&github, "issues.delete", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    rlp_snapshot!(&td, &output);
    // Nothing ran, nothing but the decision was recorded.
    assert!(!td.state_dir().join("ran-issues.delete").exists());
    assert_eq!(kinds(&td.events()), ["cap.audit"]);
    let denied = &td.payloads("cap.audit")[0];
    assert_eq!(denied["tool"], "issues.delete");
    assert_eq!(denied["capability"], "tool");
    assert_eq!(denied["decision"], "deny");
    assert_eq!(denied["reason"], format!("denied by the operator's list in {} (\"*.delete\")", config.display()));

    // A tool the lists let through runs; the decision is audited first.
    td.call(&github, "issues.list", json!({})).assert().code(0);
    assert!(td.state_dir().join("ran-issues.list").exists());
    let audits = td.payloads("cap.audit");
    assert_eq!(audits[1]["capability"], "tool");
    assert_eq!(audits[1]["decision"], "allow");
    assert_eq!(audits[1]["reason"], format!("allowed by the operator's list in {}", config.display()));

    // The system config's list is a floor: the home's `allow` cannot widen it.
    let system = td.join("system.toml");
    std::fs::write(&system, "[agents.github.tools]\nallow = [\"issues.*\"]\n").unwrap();
    let output = td.call(&github, "repos.get", json!({})).env("RUNLOOP_SYSTEM_CONFIG", &system).output().unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    rlp_snapshot!(&td, &output);
    assert!(!td.state_dir().join("ran-repos.get").exists());
    let last = list_audits(&td).pop().unwrap();
    assert_eq!(
        (last["tool"].as_str(), last["decision"].as_str(), last["reason"].as_str()),
        (
            Some("repos.get"),
            Some("deny"),
            Some(format!("not allowed by the operator's list in {}", system.display()).as_str())
        )
    );
    // Nor can it undo the system's deny.
    std::fs::write(&system, "[agents.github.tools]\ndeny = [\"issues.list\"]\n").unwrap();
    td.write_config("[agents.github.tools]\nallow = [\"*\"]\n");
    td.call(&github, "issues.list", json!({})).env("RUNLOOP_SYSTEM_CONFIG", &system).assert().code(3);
    assert_eq!(list_audits(&td).pop().unwrap()["decision"], "deny");
}

#[test]
fn a_bad_list_stops_the_command_naming_the_file_and_key() {
    let td = TestDir::new();
    let github = github_bundle(&td);
    td.write_config("[agents.github.tools]\ndeny = [\"Issues.*\"]\n");
    let output = td.call(&github, "issues.list", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    rlp_snapshot!(&td, &output);
    td.write_config("[agents.github.tools]\nallow = \"issues.*\"\n");
    let output = td.rlp().args(["tools", "list"]).arg(&github).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    rlp_snapshot!(&td, &output);
    // The command stopped before any ledger was opened.
    assert!(!td.ledger_path().exists());
}

#[test]
fn tools_list_shows_what_the_operators_list_does_not_expose_and_why() {
    let td = TestDir::new();
    // Tools that name no temporary path: the table's columns keep their widths.
    let tools: Vec<Value> =
        ["issues.list", "issues.delete", "repos.get"].map(|id| bundle::tool(id, bundle::exec("/bin/true", &[]))).into();
    let github = td.bundle("github", Value::Array(tools), "[capabilities]\nexec = true\n");
    td.write_config("[agents.github.tools]\ndeny = [\"*.delete\"]\n");
    let system = td.join("system.toml");
    std::fs::write(&system, "[agents.github.tools]\nallow = [\"issues.*\"]\n").unwrap();
    let list = |format: &str| {
        td.rlp()
            .args(["tools", "list"])
            .arg(&github)
            .args(["--format", format])
            .env("RUNLOOP_SYSTEM_CONFIG", &system)
            .output()
            .unwrap()
    };
    let output = list("human");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // The temporary folder's length sets the columns' widths: gaps shown as two spaces.
    rlp_snapshot!(td.filters().regex(" {2,}", "  "), &output);
    let json = stdout_json(&list("json"));
    let exposed: Vec<(&Value, &Value, &Value)> =
        json["tools"].as_array().unwrap().iter().map(|t| (&t["id"], &t["exposed"], &t["unlisted"])).collect();
    let home_config = td.home().join("config.toml");
    assert_eq!(
        exposed,
        [
            (&json!("issues.list"), &json!(true), &Value::Null),
            (
                &json!("issues.delete"),
                &json!(false),
                &json!(format!("denied by the operator's list in {} (\"*.delete\")", home_config.display()))
            ),
            (
                &json!("repos.get"),
                &json!(false),
                &json!(format!("not allowed by the operator's list in {}", system.display()))
            ),
        ]
    );
    assert_eq!(json["operator_list"], format!("in {}, in {}", system.display(), home_config.display()));
    // `--format mcp` lists what `rlp serve` would: the one tool let through.
    let mcp = stdout_json(&list("mcp"));
    let names: Vec<&Value> = mcp["tools"].as_array().unwrap().iter().map(|t| &t["name"]).collect();
    assert_eq!(names, [&json!("issues.list")]);
}

// ---------------------------------------------------------------- the runtime home

/// Every folder below `dir` (its path from `dir`, `.` for `dir` itself)
/// with its permission bits, in path order.
fn folder_modes(dir: &Path) -> Vec<(String, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let mode = std::fs::metadata(&folder).unwrap().permissions().mode() & 0o7777;
        let relative = folder.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
        found.push((if relative.is_empty() { ".".to_string() } else { relative }, mode));
        for entry in std::fs::read_dir(&folder).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                pending.push(entry.path());
            }
        }
    }
    found.sort();
    found
}

#[test]
fn the_home_and_every_folder_rlp_makes_in_it_are_private_whatever_the_umask() {
    let td = TestDir::new();
    let bundle =
        td.bundle("marked", json!([bundle::runtime_tool("ok", "ok.sh", &[])]), "[capabilities]\nexec = true\n");
    td.rlp().args(["keygen", "--out", "keys", "--name", "release"]).assert().success();
    let loose = |args: &[&str]| {
        let output = td.shell("umask 000").args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{args:?}: {}", stderr(&output));
    };
    loose(&["trust", "add", "keys/release.pub", "--name", "release"]);
    loose(&["agent", "install", bundle.to_str().unwrap(), "--allow-unsigned"]);
    let installed = td.home().join("agents/marked");
    loose(&["tools", "call", installed.to_str().unwrap(), "ok", "--args", "{}"]);
    loose(&["trace", "checkpoint"]);
    let modes: Vec<(String, String)> =
        folder_modes(&td.home()).into_iter().map(|(path, mode)| (path, format!("{mode:04o}"))).collect();
    let expected = [
        (".", "0700"),
        ("agents", "0700"),
        // An installed bundle is as readable as its archive's folders.
        ("agents/marked", "0755"),
        ("cache", "0700"),
        ("cache/sandbox", "0700"),
        ("cache/trust", "0700"),
        ("keys", "0700"),
        ("pog", "0700"),
    ];
    assert_eq!(modes, expected.map(|(path, mode)| (path.to_string(), mode.to_string())));
}

#[test]
fn a_home_whose_folders_other_users_can_change_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let td = TestDir::new();
    let bundle =
        td.bundle("marked", json!([bundle::runtime_tool("ok", "ok.sh", &[])]), "[capabilities]\nexec = true\n");
    td.rlp().args(["agent", "install"]).arg(&bundle).arg("--allow-unsigned").assert().success();
    let agents = td.home().join("agents");
    std::fs::set_permissions(&agents, std::fs::Permissions::from_mode(0o777)).unwrap();
    let installed = agents.join("marked");
    rlp_snapshot!(&td, &mut td.call(&installed, "ok", json!({})));
    std::fs::set_permissions(&agents, std::fs::Permissions::from_mode(0o700)).unwrap();
    // A folder that another user owns, whatever its mode.
    std::os::unix::fs::chown(&installed, Some(65534), None).unwrap();
    let output = td.rlp().args(["agent", "list"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output),
        format!(
            "error: {} belongs to another user (uid 65534): they could change what rlp runs and trusts from this \
             runtime home\n  help: use a home of your own (--home DIR or RUNLOOP_HOME)\n",
            installed.display()
        )
    );
    std::os::unix::fs::chown(&installed, Some(0), None).unwrap();
    td.rlp().args(["agent", "list"]).assert().success();
    assert_eq!(tool_calls(&td), 0, "no tool ran from the home others could change");
}

#[test]
fn with_no_absolute_home_rlp_never_takes_its_home_from_the_current_folder() {
    let td = TestDir::new();
    let marker = marker_of(&td);
    let bundle = td.bundle("marked", json!([touch_tool(&marker)]), &state_caps(&td, "exec = true"));
    // A checkout's `.runloop/` that would run the tool unconfined.
    std::fs::create_dir(td.join(".runloop")).unwrap();
    std::fs::write(td.join(".runloop/config.toml"), "[runtime]\nsandbox = \"off\"\n").unwrap();
    let call = |home: Option<&str>| {
        let mut command = td.command_without_home();
        match home {
            Some(value) => command.env("HOME", value),
            None => command.env_remove("HOME"),
        };
        command.args(["tools", "call"]).arg(&bundle).args(["touch", "--args", "{}"]).output().unwrap()
    };
    rlp_snapshot!(&td, &call(None));
    for (home, why) in [("", "HOME is empty"), (".", "HOME (`.`) is not an absolute path")] {
        let output = call(Some(home));
        assert_eq!(output.status.code(), Some(2), "HOME={home:?}");
        assert_eq!(
            stderr(&output),
            format!(
                "error: {why}: the default runtime home ~/.runloop needs it (rlp never takes its home from the \
                 current folder)\n  help: set HOME to your home folder, or name the runtime home: --home DIR or \
                 RUNLOOP_HOME=DIR\n"
            )
        );
    }
    assert!(!marker.exists(), "the tool ran");
    // Named by the variable, the home is used whatever HOME says.
    let output = td
        .command_without_home()
        .env("HOME", "")
        .env("RUNLOOP_HOME", td.home())
        .args(["agent", "list"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
}

#[test]
fn a_config_table_of_the_wrong_type_or_bad_syntax_stops_the_command_at_its_line_and_column() {
    let td = TestDir::new();
    let marker = marker_of(&td);
    let bundle = td.bundle("marked", json!([touch_tool(&marker)]), &state_caps(&td, "exec = true"));
    let call = |system: &Path| {
        let output = td.call(&bundle, "touch", json!({})).env("RUNLOOP_SYSTEM_CONFIG", system).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        output
    };
    // A system floor written as a value is not dropped: nothing runs.
    let system = td.join("system.toml");
    std::fs::write(&system, "# the machine's floor\npolicy = \"required\"\n").unwrap();
    rlp_snapshot!(&td, &call(&system));
    std::fs::write(&system, "").unwrap();
    td.write_config("hooks = 1\n");
    rlp_snapshot!(&td, &call(&system));
    td.write_config("[runtime]\nsandbox = best-effort\n");
    rlp_snapshot!(&td, &call(&system));
    assert!(!marker.exists(), "the tool ran");
    assert!(!td.ledger_path().exists(), "the command stopped before any ledger was opened");
}
