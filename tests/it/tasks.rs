//! Tool calls run as MCP tasks by `rlp serve` (docs/serve.md, "Tasks"),
//! spoken to in raw JSON-RPC over stdio: the experimental tasks of
//! 2025-11-25 (the client asks, with `task` in `tools/call`) and the
//! `io.modelcontextprotocol/tasks` extension of 2026-07-28 (the server
//! decides: a `long_running` tool's call is a task at once).

use std::io::{BufRead, BufReader, Lines, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::bundle::{self, exec, tool, with, with_fs};
use crate::support::mcp;
use crate::support::output::stderr;

/// Bundle `jobs`: `jobs.greet` (quick, an object result), `jobs.long`
/// (`long_running`: starts `sleep 60`, writes its pid to `state/child.pid`
/// and waits for it) and `jobs.slow` (`long_running`: sleeps a moment,
/// then answers).
fn jobs(td: &TestDir) -> (PathBuf, PathBuf) {
    let state = td.state_dir();
    let pid_file = state.join("child.pid");
    let greet = td.script("greet.sh", r#"exec jq -c '{greeting: ("hello " + .tool.arguments.name)}' "$1""#);
    let long =
        td.script("long.sh", &format!("sleep 60 &\necho $! > {p}.tmp && mv {p}.tmp {p}\nwait", p = pid_file.display()));
    let slow = td.script("slow.sh", "sleep 0.3\necho '{\"done\": true}'");
    let tools = json!([
        with(
            tool("jobs.greet", exec(greet.to_str().unwrap(), &[])),
            json!({"input_schema": {"type": "object", "properties": {"name": {"type": "string"}}},
                   "result_schema": {"type": "object"}})
        ),
        with(with_fs(tool("jobs.long", exec(long.to_str().unwrap(), &[])), &state), json!({"long_running": true})),
        with(
            tool("jobs.slow", exec(slow.to_str().unwrap(), &[])),
            json!({"long_running": true, "result_schema": {"type": "object"}})
        ),
    ]);
    (td.bundle("jobs", tools, &bundle::caps("exec = true\n", &state)), pid_file)
}

/// `rlp serve` over stdio, spoken to line by line.
struct Raw {
    child: Child,
    input: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    /// Notifications read while waiting for answers.
    notifications: Vec<Value>,
}

impl Raw {
    fn start(td: &TestDir, bundle: &Path) -> Raw {
        let mut child = td
            .command()
            .arg("serve")
            .arg(bundle)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let input = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Raw { child, input, lines, notifications: Vec::new() }
    }

    /// A 2025-11-25 session, initialized.
    fn session(td: &TestDir, bundle: &Path) -> (Raw, Value) {
        let mut raw = Raw::start(td, bundle);
        let initialized = raw.ask(mcp::initialize(1));
        raw.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        (raw, initialized)
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.input.as_mut().unwrap(), "{message}").unwrap();
    }

    /// Sends `request` and reads until its answer (a server request, an
    /// elicitation, is not expected).
    fn ask(&mut self, request: Value) -> Value {
        let id = request["id"].clone();
        self.send(&request);
        loop {
            let line = self.lines.next().expect("stdout ended before the answer").unwrap();
            let message: Value = serde_json::from_str(&line).unwrap();
            if message.get("id") == Some(&id) && message.get("method").is_none() {
                return message;
            }
            self.notifications.push(message);
        }
    }

    /// The first notification of `method` that `matches`, among those read
    /// so far or the next ones.
    fn notified(&mut self, method: &str, matches: impl Fn(&Value) -> bool) -> Value {
        loop {
            if let Some(found) = self.notifications.iter().find(|n| n["method"] == method && matches(n)) {
                return found.clone();
            }
            let line = self.lines.next().unwrap_or_else(|| panic!("stdout ended before {method}")).unwrap();
            self.notifications.push(serde_json::from_str(&line).unwrap());
        }
    }

    /// Ends the session; the server's stderr.
    fn finish(mut self) -> String {
        drop(self.input.take());
        for _ in self.lines.by_ref() {}
        let out = self.child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stderr(&out)
    }
}

fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The `_meta` of a stateless 2026-07-28 request, declaring the tasks
/// extension or not.
fn stateless_meta(tasks: bool) -> Value {
    let extensions = if tasks { json!({"io.modelcontextprotocol/tasks": {}}) } else { json!({}) };
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {"extensions": extensions},
    })
}

/// Polls `tasks/get` (with `meta`, for 2026-07-28) until the task is no
/// longer `working`.
fn poll(raw: &mut Raw, id: &mut u64, task_id: &str, meta: Option<&Value>) -> Value {
    for _ in 0..2000 {
        *id += 1;
        let mut params = json!({"taskId": task_id});
        if let Some(meta) = meta {
            params["_meta"] = meta.clone();
        }
        let got = raw.ask(request(*id, "tasks/get", params));
        if got["result"]["status"] != "working" {
            return got;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("the task {task_id} stayed working");
}

#[test]
fn a_2025_11_25_task_runs_to_completion_and_its_result_is_the_plain_calls() {
    let td = TestDir::new();
    let (bundle, _) = jobs(&td);
    let (mut raw, initialized) = Raw::session(&td, &bundle);
    assert_eq!(
        initialized["result"]["capabilities"]["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
    );
    let listed = raw.ask(request(2, "tools/list", json!({})));
    let tools = listed["result"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 3);
    assert!(tools.iter().all(|t| t["execution"] == json!({"taskSupport": "optional"})), "{listed}");

    let arguments = json!({"name": "ada"});
    let plain = raw.ask(request(3, "tools/call", json!({"name": "jobs.greet", "arguments": arguments})));
    let created = raw.ask(request(
        4,
        "tools/call",
        json!({"name": "jobs.greet", "arguments": arguments, "task": {"ttl": 60000}}),
    ));
    let task = &created["result"]["task"];
    let task_id = task["taskId"].as_str().unwrap().to_string();
    assert_eq!(task_id.len(), 32, "{created}");
    assert_eq!(task["status"], "working");
    assert_eq!(task["ttl"], 60000);
    assert_eq!(task["pollInterval"], 500);
    assert!(task["createdAt"].as_str().unwrap().ends_with('Z'));

    let result = raw.ask(request(5, "tasks/result", json!({"taskId": task_id})));
    let mut id = 5;
    let got = poll(&mut raw, &mut id, &task_id, None);
    assert_eq!(got["result"]["status"], "completed", "{got}");
    let mut result = result["result"].clone();
    assert_eq!(result["_meta"]["io.modelcontextprotocol/related-task"], json!({"taskId": task_id}));
    let mut plain = plain["result"].clone();
    // The same call, but for its own invocation and the task it ran as.
    for answer in [&mut result, &mut plain] {
        let meta = answer["_meta"].as_object_mut().unwrap();
        meta.remove("io.modelcontextprotocol/related-task");
        meta["dev.runloop/call"].as_object_mut().unwrap().remove("invocation_id");
    }
    assert_eq!(result, plain);
    assert_eq!(plain["structuredContent"], json!({"greeting": "hello ada"}));

    let listed = raw.ask(request(100, "tasks/list", json!({})));
    let listed: Vec<&Value> = listed["result"]["tasks"].as_array().unwrap().iter().map(|t| &t["taskId"]).collect();
    assert_eq!(listed, [&json!(task_id)]);
    // The status notifications come as the task changes, not in step with
    // the answers: the last one says it completed.
    let status = raw.notified("notifications/tasks/status", |n| n["params"]["status"] == "completed");
    assert_eq!(status["params"]["taskId"], json!(task_id), "{status}");

    // A completed task cannot be cancelled; an unknown id is not found.
    let refused = raw.ask(request(101, "tasks/cancel", json!({"taskId": task_id})));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let unknown = raw.ask(request(102, method, json!({"taskId": "0123456789abcdef0123456789abcdef"})));
        assert_eq!(unknown["error"]["code"], -32602, "{method}: {unknown}");
    }
    // A task that is not one is refused, and nothing runs.
    for (id, task) in [(103, json!("x")), (104, json!({"ttl": -5})), (105, json!({"ttl": "soon"}))] {
        let refused =
            raw.ask(request(id, "tools/call", json!({"name": "jobs.greet", "arguments": arguments, "task": task})));
        assert_eq!(refused["error"]["code"], -32602, "{task}: {refused}");
    }
    let diagnostics = raw.finish();
    let trace = diagnostics.lines().find_map(|l| l.strip_prefix("rlp serve: trace ")).unwrap().to_string();

    // The call is recorded as any other, tagged with its task.
    let calls = td.payloads("tool.call");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["tags"], json!([]));
    assert_eq!(calls[1]["tags"], json!([format!("mcp.task={task_id}")]));
    let shown = td.rlp().args(["trace", "show", &trace, "--tag", &format!("mcp.task={task_id}")]).output().unwrap();
    assert_eq!(shown.status.code(), Some(0), "{}", stderr(&shown));
    assert!(String::from_utf8_lossy(&shown.stdout).contains("jobs.greet"));
}

#[test]
fn cancelling_a_task_kills_its_tool_and_records_the_call_cancelled() {
    let td = TestDir::new();
    let (bundle, pid_file) = jobs(&td);
    let (mut raw, _) = Raw::session(&td, &bundle);
    let created = raw.ask(request(2, "tools/call", json!({"name": "jobs.long", "arguments": {}, "task": {}})));
    let task_id = created["result"]["task"]["taskId"].as_str().unwrap().to_string();
    assert_eq!(created["result"]["task"]["ttl"], 3_600_000, "the longest time to live, when none is asked");
    for _ in 0..2000 {
        if pid_file.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let pid = std::fs::read_to_string(&pid_file).unwrap().trim().to_string();
    let cancelled = raw.ask(request(3, "tasks/cancel", json!({"taskId": task_id})));
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    assert_eq!(cancelled["result"]["taskId"], json!(task_id));
    // tasks/cancel answers once the call is recorded: its child is gone.
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists() || proc_is_zombie(&pid),
        "the tool's child outlived the cancel"
    );
    let got = raw.ask(request(4, "tasks/get", json!({"taskId": task_id})));
    assert_eq!(got["result"]["status"], "cancelled");
    let result = raw.ask(request(5, "tasks/result", json!({"taskId": task_id})));
    assert_eq!(result["error"]["code"], -32603, "{result}");
    raw.finish();
    let results = td.payloads("tool.result");
    assert_eq!(results.last().unwrap()["error"]["kind"], "cancelled", "{results:?}");
}

/// Whether process `pid` has exited and waits for its parent to reap it.
fn proc_is_zombie(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| stat.contains(") Z "))
}

#[test]
fn a_session_sees_only_its_own_tasks() {
    let td = TestDir::new();
    let (bundle, _) = jobs(&td);
    let (mut raw, _) = Raw::session(&td, &bundle);
    let created =
        raw.ask(request(2, "tools/call", json!({"name": "jobs.greet", "arguments": {"name": "x"}, "task": {}})));
    let task_id = created["result"]["task"]["taskId"].as_str().unwrap().to_string();
    // A stateless request (2026-07-28) is not the session: the task is not its.
    let meta = stateless_meta(true);
    let other = raw.ask(request(3, "tasks/get", json!({"taskId": task_id, "_meta": meta})));
    assert_eq!(other["error"]["code"], -32602, "{other}");
    let listed = raw.ask(request(4, "tasks/list", json!({"_meta": meta})));
    assert_eq!(listed["error"]["code"], -32601, "{listed}");
    raw.finish();
}

#[test]
fn a_long_running_tool_is_a_task_for_a_2026_07_28_client_that_takes_tasks() {
    let td = TestDir::new();
    let (bundle, _) = jobs(&td);
    let mut raw = Raw::start(&td, &bundle);
    let meta = stateless_meta(true);
    let created = raw.ask(request(1, "tools/call", json!({"name": "jobs.slow", "arguments": {}, "_meta": meta})));
    let task = &created["result"];
    assert_eq!(task["resultType"], "task", "{created}");
    assert_eq!(task["status"], "working");
    assert_eq!(task["ttlMs"], 3_600_000);
    assert_eq!(task["pollIntervalMs"], 500);
    let task_id = task["taskId"].as_str().unwrap().to_string();
    let mut id = 1;
    let got = poll(&mut raw, &mut id, &task_id, Some(&meta));
    assert_eq!(got["result"]["status"], "completed", "{got}");
    assert_eq!(got["result"]["resultType"], "complete");
    assert_eq!(got["result"]["result"]["structuredContent"], json!({"done": true}));
    assert_eq!(got["result"]["result"]["isError"], false);

    // A quick tool is answered at once (within --task-after).
    let quick =
        raw.ask(request(50, "tools/call", json!({"name": "jobs.greet", "arguments": {"name": "bo"}, "_meta": meta})));
    assert_eq!(quick["result"]["resultType"], "complete", "{quick}");
    assert_eq!(quick["result"]["structuredContent"], json!({"greeting": "hello bo"}));

    // A client that does not declare the extension gets the result.
    let plain = stateless_meta(false);
    let answered = raw.ask(request(51, "tools/call", json!({"name": "jobs.slow", "arguments": {}, "_meta": plain})));
    assert_eq!(answered["result"]["resultType"], "complete", "{answered}");
    assert_eq!(answered["result"]["structuredContent"], json!({"done": true}));
    raw.finish();
    let calls = td.payloads("tool.call");
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[0]["tags"], json!([format!("mcp.task={task_id}")]));
    assert_eq!(calls[2]["tags"], json!([]));
}

#[test]
fn a_client_without_tasks_gets_the_result_of_a_long_running_tool() {
    let td = TestDir::new();
    let (bundle, _) = jobs(&td);
    let (mut raw, _) = Raw::session(&td, &bundle);
    let answered = raw.ask(request(2, "tools/call", json!({"name": "jobs.slow", "arguments": {}})));
    assert_eq!(answered["result"]["structuredContent"], json!({"done": true}), "{answered}");
    assert!(answered["result"].get("task").is_none());
    raw.finish();
    assert_eq!(td.payloads("tool.call")[0]["tags"], json!([]));
}

/// Runs `tests/tasks/ts_client.mjs` (the TypeScript SDK's tasks client) for
/// a task of `jobs.slow`, over stdio (`target` the bundle, rlp started by
/// the client) or Streamable HTTP (`target` the URL of a running server);
/// checks what it printed, and returns it.
fn typescript_client_runs_a_task(td: &TestDir, target: &std::ffi::OsStr) -> Vec<Value> {
    let servers = crate::support::bridge::servers();
    let output = td
        .program(&servers.node)
        .arg(crate::support::files::repo("tests/tasks/ts_client.mjs"))
        .arg(&servers.node_modules)
        .arg(env!("CARGO_BIN_EXE_rlp"))
        .arg(target)
        .arg("jobs.slow")
        .env("RUNLOOP_HOME", td.home())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let messages: Vec<Value> =
        String::from_utf8_lossy(&output.stdout).lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(messages[0]["tasks"], json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}));
    assert_eq!(messages[1]["execution"], json!({"taskSupport": "optional"}));
    assert_eq!((&messages[2]["type"], &messages[2]["status"]), (&json!("taskCreated"), &json!("working")));
    let result = messages.iter().find(|m| m["type"] == "result").expect("a result message");
    assert_eq!(result["result"]["structuredContent"], json!({"done": true}), "{messages:?}");
    assert_eq!(result["result"]["isError"], false);
    // The SDK follows the status by polling; once it sees `input_required`
    // it waits on tasks/result, which brings the result (and may come
    // before a poll sees `completed`). The listing after says where it ended.
    let statuses: Vec<&str> =
        messages.iter().filter(|m| m["type"] == "taskStatus").filter_map(|m| m["status"].as_str()).collect();
    let asked = messages.iter().any(|m| m["type"] == "elicit");
    match statuses.last() {
        Some(&"input_required") => assert!(asked, "{messages:?}"),
        last => assert_eq!(last, Some(&"completed"), "{messages:?}"),
    }
    assert_eq!(messages.last().unwrap(), &json!({"type": "list", "statuses": ["completed"]}));
    // The call is recorded like any other, tagged with its task.
    let results = td.payloads("tool.result");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["result"], json!({"done": true}));
    assert!(results[0]["tags"].as_array().unwrap().iter().any(|t| t.as_str().unwrap().starts_with("mcp.task=")));
    messages
}

#[test]
fn the_typescript_sdks_tasks_client_streams_a_task_to_its_result() {
    let td = TestDir::new();
    let (jobs, _) = jobs(&td);
    typescript_client_runs_a_task(&td, jobs.as_os_str());
}

#[test]
fn a_task_runs_over_streamable_http_as_over_stdio() {
    let td = TestDir::new();
    let (jobs, _) = jobs(&td);
    let server = mcp::HttpServe::start(&td, &jobs, &[]);
    typescript_client_runs_a_task(&td, std::ffi::OsStr::new(&server.url));
}

#[test]
fn a_task_whose_tool_needs_confirmation_asks_the_client_on_the_tasks_behalf() {
    let td = TestDir::new();
    let (jobs, _) = jobs(&td);
    let mut tools: Value = serde_json::from_str(&std::fs::read_to_string(jobs.join("tools.json")).unwrap()).unwrap();
    let list = if tools.is_array() { &mut tools } else { &mut tools["tools"] };
    let slow = list.as_array_mut().unwrap().iter_mut().find(|t| t["id"] == "jobs.slow").unwrap();
    slow["requires_confirmation"] = json!(true);
    let confirmed = td.bundle_document("jobs", &tools, &std::fs::read_to_string(jobs.join("policy.caps")).unwrap());
    let messages = typescript_client_runs_a_task(&td, confirmed.as_os_str());
    let asked: Vec<&Value> = messages.iter().filter(|m| m["type"] == "elicit").collect();
    assert_eq!(asked, [&json!({"type": "elicit", "message": "Allow `jobs.slow` to run?", "related": true})]);
    let confirms = td.payloads("tool.confirm");
    assert_eq!((&confirms[0]["approved"], &confirms[0]["how"]), (&json!(true), &json!("mcp")));
}
