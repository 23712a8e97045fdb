//! `rlp serve` as a gateway to its bundle's MCP servers (docs/bridge.md,
//! "What `rlp serve` passes on besides tools"): resources, resource
//! templates, prompts, completions and subscriptions of the servers, their
//! tools' content blocks, each exchange on the record, the bundle's policy
//! and the operator's list deciding what is offered; and the cap on the
//! sessions `rlp serve --http` holds, and the `Host` it serves on a
//! loopback address.
//!
//! The servers are real: the conformance suite's server of the tests
//! (`tests/bridge/servers/conformance_tools.py`, Streamable HTTP) and the
//! reference everything server from npm (stdio), installed by
//! `tests/bridge/setup.sh`, each imported with `rlp tools import --mcp`.
//! What rlp serves is compared with what the same server answers the same
//! client (`tests/mcp/drive.py`, the official MCP Python SDK) directly.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::support::bridge::servers;
use crate::support::mcp::{self, HttpServe, call, scenario, stdio};
use crate::support::output::{self, stdout, stdout_json};
use crate::support::{HANG_GUARD, TestDir, process};

/// The 1x1 PNG conformance_tools.py serves (test://static-binary, its image
/// blocks), base64.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// The frame kinds of exchanges with a bridged server.
const EXCHANGE_KINDS: [&str; 9] = [
    "resource.list",
    "resource.templates",
    "resource.read",
    "resource.subscribe",
    "resource.updated",
    "prompt.list",
    "prompt.get",
    "completion.complete",
    "server.changed",
];

/// How long a step waits for a notification: a guard against a hang, not
/// a timing assertion.
const NOTICE_GUARD_MS: u64 = 20_000;

// ---------------------------------------------------------------------------
// The servers and the bundles that import them

/// conformance_tools.py serving Streamable HTTP on a port of its choosing;
/// killed when dropped.
struct Conformance {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`.
    url: String,
}

impl Conformance {
    /// Starts it and waits for the port it writes to `<testdir>/conformance.port`;
    /// its stderr goes to `<testdir>/conformance.stderr`.
    fn start(td: &TestDir) -> Conformance {
        let servers = servers();
        let port_file = td.join("conformance.port");
        let child = Command::new(&servers.sdk_python)
            .arg(servers.servers_dir.join("conformance_tools.py"))
            .args(["--http", "0", "--port-file"])
            .arg(&port_file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(td.join("conformance.stderr")).unwrap())
            .spawn()
            .unwrap();
        let port = process::wait_for_file(&port_file).trim().to_string();
        Conformance { child, url: format!("http://127.0.0.1:{port}/mcp") }
    }

    /// The driver's transport to it, directly.
    fn transport(&self) -> Value {
        json!({"kind": "http", "url": self.url})
    }
}

impl Drop for Conformance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The scaffold's bundle `agents/<name>` with the server of `import` (the
/// arguments after `rlp tools import <bundle>`) imported, its grants added
/// to policy.caps (`--grant`).
fn imported(td: &TestDir, name: &str, import: &[&str]) -> PathBuf {
    td.expect_output(0, &["agent", "scaffold", name, "--non-interactive", "--root", "agents"]);
    let bundle = td.bundle_path(name);
    let mut args = vec!["tools", "import", bundle.to_str().unwrap()];
    args.extend(import);
    td.expect_output(0, &args);
    bundle
}

/// Bundle `agents/demo` with the conformance server imported as `conf` by
/// URL, with `extra` import flags (`--bare-ids`).
fn conformance_bundle(td: &TestDir, server: &Conformance, extra: &[&str]) -> PathBuf {
    let mut import = vec!["--mcp", "conf", "--url", &server.url, "--grant"];
    import.extend(extra);
    imported(td, "demo", &import)
}

/// The everything server's command line: node and its script.
fn everything_command() -> [String; 2] {
    let servers = servers();
    [servers.node.clone(), servers.everything_js.clone()]
}

/// Bundle `agents/every` with the everything server imported as
/// `everything` (stdio, granted its node_modules).
fn everything_bundle(td: &TestDir) -> PathBuf {
    let [node, script] = everything_command();
    let cap = format!("fs:{}", servers().node_modules.display());
    imported(td, "every", &["--mcp", "everything", "--cap", &cap, "--grant", "--", &node, &script])
}

/// The driver's transport to the everything server, directly (stdio).
fn everything_direct(td: &TestDir) -> Value {
    let [node, script] = everything_command();
    json!({"kind": "stdio", "command": node, "args": [script], "cwd": td.path(),
           "stderr": td.join("everything.stderr")})
}

// ---------------------------------------------------------------------------
// Driving rlp serve and the servers

/// How a test reaches `rlp serve`.
#[derive(Clone, Copy, Debug)]
enum Via {
    Stdio,
    Http,
}

/// Both transports.
const VIAS: [Via; 2] = [Via::Stdio, Via::Http];

/// Drives `rlp serve <bundle> <args…>` over `via` with `steps` (the
/// 2025-11-25 handshake); returns the driver's report and the trace the
/// session's frames are in (stdio: the server run's; HTTP: the session's).
fn drive_served(td: &TestDir, bundle: &Path, args: &[&str], via: Via, steps: &Value) -> (Value, String) {
    match via {
        Via::Stdio => {
            let report = mcp::drive(&scenario(stdio(td, bundle, args), "legacy", None, steps.clone()));
            (report, mcp::stdio_trace(td))
        }
        Via::Http => {
            let serve = HttpServe::start(td, bundle, args);
            let report = mcp::drive(&scenario(serve.transport(None), "legacy", None, steps.clone()));
            (report, session_trace(&serve))
        }
    }
}

/// Drives a server directly (the 2025-11-25 handshake) with `steps`.
fn drive_direct(transport: Value, steps: &Value) -> Value {
    mcp::drive(&scenario(transport, "legacy", None, steps.clone()))
}

/// The trace of the one client session `serve` announced on its stderr
/// (`rlp serve: session trace <id>`), waited for as its stderr is read.
fn session_trace(serve: &HttpServe) -> String {
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        let stderr = serve.stderr();
        if let Some(trace) = stderr.lines().find_map(|line| line.strip_prefix("rlp serve: session trace ")) {
            return trace.to_string();
        }
        assert!(Instant::now() < deadline, "rlp serve announced no session trace:\n{stderr}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A `request` step of the driver: `method` with `params`.
fn request(method: &str, params: Value) -> Value {
    json!({"op": "request", "method": method, "params": params})
}

/// `resources/read` of `uri`.
fn read(uri: &str) -> Value {
    request("resources/read", json!({"uri": uri}))
}

/// `prompts/get` of prompt `name` with `arguments` (none when null).
fn get_prompt(name: &str, arguments: Value) -> Value {
    let mut params = json!({"name": name});
    if !arguments.is_null() {
        params["arguments"] = arguments;
    }
    request("prompts/get", params)
}

/// `completion/complete` of argument `argument` typed as `value` of the
/// prompt or resource template `reference` (a `ref/…` object).
fn complete(reference: Value, argument: &str, value: &str) -> Value {
    request("completion/complete", json!({"ref": reference, "argument": {"name": argument, "value": value}}))
}

/// The record of step `i` of a report.
fn step(report: &Value, i: usize) -> &Value {
    &report["steps"][i]
}

/// The result of request step `i`, which must have one.
#[track_caller]
fn result(report: &Value, i: usize) -> &Value {
    let record = step(report, i);
    assert!(record.get("result").is_some(), "step {i} has no result: {record}");
    &record["result"]
}

/// The JSON-RPC error of request step `i`, which must have one: `(code, message)`.
#[track_caller]
fn error(report: &Value, i: usize) -> (i64, String) {
    let record = step(report, i);
    let error = record.get("error").unwrap_or_else(|| panic!("step {i} did not fail: {record}"));
    (error["code"].as_i64().unwrap(), error["message"].as_str().unwrap().to_string())
}

/// `items` (of a list) with each `name` served under `prefix`.
fn prefixed(list: &Value, prefix: &str) -> Value {
    let mut items = list.clone();
    for item in items.as_array_mut().unwrap_or_else(|| panic!("not a list: {list}")) {
        let own = item["name"].as_str().unwrap().to_string();
        item["name"] = json!(format!("{prefix}{own}"));
    }
    items
}

/// Asserts that each list step `(i, member)` of `served` answered the
/// items of the same step of `direct`, each named under `prefix`.
#[track_caller]
fn assert_lists_prefixed(served: &Value, direct: &Value, lists: &[(usize, &str)], prefix: &str, via: Via) {
    for (i, member) in lists {
        let expected = json!({ *member: prefixed(&result(direct, *i)[*member], prefix) });
        assert_eq!(result(served, *i), &expected, "{via:?}: step {i}");
    }
}

/// The `name` of each item of a list.
fn names(items: &Value) -> Vec<&str> {
    items
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {items}"))
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect()
}

/// The frames of `trace`, as `rlp trace show <trace> --format json` prints them.
fn trace_frames(td: &TestDir, trace: &str) -> Vec<Value> {
    let out = td.expect_output(0, &["trace", "show", trace, "--format", "json"]);
    stdout_json(&out)["frames"].as_array().unwrap().clone()
}

/// The exchange frames of `trace`.
fn exchanges(td: &TestDir, trace: &str) -> Vec<Value> {
    trace_frames(td, trace).into_iter().filter(|f| EXCHANGE_KINDS.contains(&f["kind"].as_str().unwrap())).collect()
}

/// Each frame's kind, server and method.
fn kinds(frames: &[Value]) -> Vec<(&str, &str, &str)> {
    frames
        .iter()
        .map(|f| (f["kind"].as_str().unwrap(), f["server"].as_str().unwrap(), f["method"].as_str().unwrap()))
        .collect()
}

// ---------------------------------------------------------------------------
// Resources, templates, prompts and completions

/// The requests of a host exploring the conformance server, its prompts
/// named with `prefix`.
fn exploring(prefix: &str) -> Value {
    let arguments = json!({"arg1": "paris", "arg2": "world"});
    json!([
        request("resources/list", json!({})),
        request("resources/templates/list", json!({})),
        read("test://static-text"),
        read("test://static-binary"),
        read("test://template/42/data"),
        request("prompts/list", json!({})),
        get_prompt(&format!("{prefix}test_prompt_with_arguments"), arguments),
        get_prompt(&format!("{prefix}test_prompt_with_image"), Value::Null),
        get_prompt(
            &format!("{prefix}test_prompt_with_embedded_resource"),
            json!({"resourceUri": "test://static-text"})
        ),
        complete(json!({"type": "ref/prompt", "name": format!("{prefix}test_prompt_with_arguments")}), "arg1", "pa"),
        complete(json!({"type": "ref/resource", "uri": "test://template/{id}/data"}), "id", "1"),
    ])
}

/// The steps of [`exploring`] whose answers name nothing the prefix
/// changes (reads, prompts got, completions).
const UNCHANGED: [usize; 8] = [2, 3, 4, 6, 7, 8, 9, 10];

#[test]
fn resources_prompts_and_completions_pass_through_under_the_servers_prefix_as_it_answered_them() {
    let td = TestDir::new();
    let server = Conformance::start(&td);
    let bundle = conformance_bundle(&td, &server, &[]);
    let direct = drive_direct(server.transport(), &exploring(""));
    for via in VIAS {
        let (served, trace) = drive_served(&td, &bundle, &[], via, &exploring("conf."));
        // The lists: the server's items, named under its prefix.
        let lists = [(0, "resources"), (1, "resourceTemplates"), (5, "prompts")];
        assert_lists_prefixed(&served, &direct, &lists, "conf.", via);
        assert_eq!(
            names(&result(&served, 0)["resources"]),
            ["conf.static-text", "conf.static-binary", "conf.watched-resource"],
            "{via:?}"
        );
        assert_eq!(result(&served, 1)["resourceTemplates"][0]["uriTemplate"], "test://template/{id}/data");
        assert_eq!(
            names(&result(&served, 5)["prompts"]),
            [
                "conf.test_simple_prompt",
                "conf.test_prompt_with_arguments",
                "conf.test_prompt_with_embedded_resource",
                "conf.test_prompt_with_image"
            ],
            "{via:?}"
        );
        // Everything else: the server's answer as it sent it.
        for i in UNCHANGED {
            assert_eq!(result(&served, i), result(&direct, i), "{via:?}: step {i}");
        }
        assert_eq!(
            result(&served, 2),
            &json!({"contents": [{"uri": "test://static-text", "mimeType": "text/plain",
                                  "text": "This is the content of the static text resource."}]})
        );
        // The binary resource, byte for byte.
        let blob = result(&served, 3)["contents"][0]["blob"].as_str().unwrap();
        let bytes = STANDARD.decode(blob).unwrap();
        assert_eq!(bytes, STANDARD.decode(PNG).unwrap(), "{via:?}");
        assert_eq!((bytes.len(), &bytes[..4]), (70, &b"\x89PNG"[..]), "{via:?}");
        assert_eq!(
            result(&served, 4)["contents"][0]["text"],
            r#"{"id":"42","templateTest":true,"data":"Data for ID: 42"}"#
        );
        assert_eq!(
            result(&served, 6)["messages"],
            json!([{"role": "user", "content": {"type": "text",
                                               "text": "Prompt with arguments: arg1='paris', arg2='world'"}}])
        );
        assert_eq!(
            result(&served, 7)["messages"][0]["content"],
            json!({"type": "image", "data": PNG, "mimeType": "image/png"})
        );
        assert_eq!(
            result(&served, 9)["completion"],
            json!({"values": ["paris", "park", "party"], "total": 3, "hasMore": false})
        );
        assert_eq!(result(&served, 10)["completion"], json!({"values": ["1", "123"], "total": 2, "hasMore": false}));

        // Each exchange is on the record, in the session's trace: the
        // request as the client sent it, the answer as the client got it.
        let frames = exchanges(&td, &trace);
        let methods = [
            ("resource.list", "resources/list"),
            ("resource.templates", "resources/templates/list"),
            ("resource.read", "resources/read"),
            ("resource.read", "resources/read"),
            ("resource.read", "resources/read"),
            ("prompt.list", "prompts/list"),
            ("prompt.get", "prompts/get"),
            ("prompt.get", "prompts/get"),
            ("prompt.get", "prompts/get"),
            ("completion.complete", "completion/complete"),
            ("completion.complete", "completion/complete"),
        ];
        let expected: Vec<(&str, &str, &str)> = methods.iter().map(|(kind, method)| (*kind, "conf", *method)).collect();
        assert_eq!(kinds(&frames), expected, "{via:?}");
        for (i, frame) in frames.iter().enumerate() {
            assert_eq!(&frame["response"], result(&served, i), "{via:?}: frame of step {i}");
            assert_eq!(frame["status"], "ok", "{via:?}: {frame}");
        }
        assert_eq!(frames[3]["request"], json!({"uri": "test://static-binary"}));
        assert_eq!(frames[3]["response"]["contents"][0]["blob"], PNG, "the blob is recorded inline");
        assert_eq!(
            frames[6]["request"],
            json!({"name": "conf.test_prompt_with_arguments", "arguments": {"arg1": "paris", "arg2": "world"}})
        );
        assert_eq!(
            frames[9]["request"]["ref"],
            json!({"type": "ref/prompt", "name": "conf.test_prompt_with_arguments"})
        );
    }
}

#[test]
fn a_server_imported_with_bare_ids_has_its_prompts_and_resources_served_under_their_own_names() {
    let td = TestDir::new();
    let server = Conformance::start(&td);
    let bundle = conformance_bundle(&td, &server, &["--bare-ids"]);
    let direct = drive_direct(server.transport(), &exploring(""));
    let (served, trace) = drive_served(&td, &bundle, &[], Via::Stdio, &exploring(""));
    for i in 0..exploring("").as_array().unwrap().len() {
        assert_eq!(result(&served, i), result(&direct, i), "step {i}");
    }
    assert_eq!(names(&result(&served, 0)["resources"]), ["static-text", "static-binary", "watched-resource"]);
    assert_eq!(names(&result(&served, 5)["prompts"])[0], "test_simple_prompt");
    let frames = exchanges(&td, &trace);
    assert_eq!(frames[6]["request"]["name"], "test_prompt_with_arguments");
    assert_eq!(frames[9]["request"]["ref"]["name"], "test_prompt_with_arguments");
}

#[test]
fn unknown_uris_and_prompts_are_errors_and_a_servers_own_error_is_passed_on_and_recorded() {
    let td = TestDir::new();
    let server = Conformance::start(&td);
    let bundle = conformance_bundle(&td, &server, &[]);
    let steps = json!([
        read("test://nope"),
        get_prompt("conf.nope", Value::Null),
        get_prompt("conf.test_prompt_with_arguments", json!({"arg1": "paris"})),
        complete(json!({"type": "ref/prompt", "name": "nope"}), "arg1", "pa"),
    ]);
    for via in VIAS {
        let (report, trace) = drive_served(&td, &bundle, &[], via, &steps);
        // One server: a URI nobody listed is the server's to answer.
        assert_eq!(error(&report, 0), (-32602, "Resource not found: test://nope".into()), "{via:?}");
        assert_eq!(
            error(&report, 1),
            (-32602, "no prompt `conf.nope` is offered: list them with prompts/list".into()),
            "{via:?}"
        );
        assert_eq!(error(&report, 2), (-32602, "Missing required argument: arg2".into()), "{via:?}");
        assert_eq!(error(&report, 3), (-32602, "no prompt `nope` is offered".into()), "{via:?}");
        // What the server answered is recorded with its error; a prompt
        // nobody offers is looked for in the server's list, once (the list
        // holds until the server says it changed).
        let frames = exchanges(&td, &trace);
        assert_eq!(
            kinds(&frames),
            [
                ("resource.read", "conf", "resources/read"),
                ("prompt.list", "conf", "prompts/list"),
                ("prompt.get", "conf", "prompts/get"),
            ],
            "{via:?}"
        );
        assert_eq!(frames[0]["error"], "Resource not found: test://nope");
        assert_eq!(frames[2]["error"], "Missing required argument: arg2");
        assert!(frames[2].get("response").is_none(), "{}", frames[2]);
        let shown = stdout(&td.expect_output(0, &["trace", "show", &trace]));
        output::assert_contains(
            &shown,
            r#"conf: resources/read {"uri":"test://nope"} → error: Resource not found: test://nope in "#,
        );
    }
}

// ---------------------------------------------------------------------------
// What the operator and the policy let through

/// A host's look at what is offered: every list, reads of a listed
/// resource, of one outside the operator's list and of a template's URI,
/// and a prompt the list leaves out.
fn looking_around() -> Value {
    json!([
        {"op": "list"},
        request("resources/list", json!({})),
        request("resources/templates/list", json!({})),
        request("prompts/list", json!({})),
        read("test://static-text"),
        read("test://watched-resource"),
        read("test://template/1/data"),
        get_prompt("conf.test_simple_prompt", Value::Null),
        complete(json!({"type": "ref/resource", "uri": "test://template/{id}/data"}), "id", "1"),
    ])
}

/// The error of a resource nobody offers.
fn not_offered(uri: &str) -> (i64, String) {
    (-32002, format!("no resource `{uri}` is offered: list them with resources/list and resources/templates/list"))
}

#[test]
fn the_operators_list_of_tools_hides_the_prompts_and_resources_it_does_not_name() {
    let td = TestDir::new();
    let server = Conformance::start(&td);
    let bundle = conformance_bundle(&td, &server, &[]);
    let args = ["--tools", "conf.static*,conf.test_prompt_*"];
    for via in VIAS {
        let (report, trace) = drive_served(&td, &bundle, &args, via, &looking_around());
        assert_eq!(step(&report, 0)["tools"], json!([]), "{via:?}: no tool matches");
        assert_eq!(names(&result(&report, 1)["resources"]), ["conf.static-text", "conf.static-binary"], "{via:?}");
        assert_eq!(result(&report, 2), &json!({"resourceTemplates": []}), "{via:?}");
        assert_eq!(
            names(&result(&report, 3)["prompts"]),
            [
                "conf.test_prompt_with_arguments",
                "conf.test_prompt_with_embedded_resource",
                "conf.test_prompt_with_image"
            ],
            "{via:?}"
        );
        assert_eq!(result(&report, 4)["contents"][0]["text"], "This is the content of the static text resource.");
        // What the list hides cannot be read by URI either.
        assert_eq!(error(&report, 5), not_offered("test://watched-resource"), "{via:?}");
        assert_eq!(error(&report, 6), not_offered("test://template/1/data"), "{via:?}");
        assert_eq!(
            error(&report, 7),
            (-32602, "no prompt `conf.test_simple_prompt` is offered: list them with prompts/list".into()),
            "{via:?}"
        );
        assert_eq!(
            error(&report, 8),
            (-32602, "no resource or template `test://template/{id}/data` is offered".into()),
            "{via:?}"
        );
        // The lists record what the client was answered; the hidden
        // resources reach no server.
        let frames = exchanges(&td, &trace);
        assert_eq!(
            kinds(&frames),
            [
                ("resource.list", "conf", "resources/list"),
                ("resource.templates", "conf", "resources/templates/list"),
                ("prompt.list", "conf", "prompts/list"),
                ("resource.read", "conf", "resources/read"),
            ],
            "{via:?}"
        );
        assert_eq!(frames[0]["response"], *result(&report, 1));
    }

    // config.toml's deny list hides the prompt it names, and only that.
    td.write_config("[agents.demo.tools]\ndeny = [\"conf.test_simple_prompt\"]\n");
    let steps = json!([
        request("prompts/list", json!({})),
        get_prompt("conf.test_simple_prompt", Value::Null),
        get_prompt("conf.test_prompt_with_image", Value::Null),
    ]);
    let (report, _) = drive_served(&td, &bundle, &[], Via::Stdio, &steps);
    assert_eq!(
        names(&result(&report, 0)["prompts"]),
        ["conf.test_prompt_with_arguments", "conf.test_prompt_with_embedded_resource", "conf.test_prompt_with_image"]
    );
    assert_eq!(error(&report, 1).0, -32602);
    assert_eq!(result(&report, 2)["messages"][1]["content"]["text"], "Please analyze the image above.");
}

#[test]
fn a_resource_the_operators_list_lets_through_is_read_by_uri_before_any_list() {
    let td = TestDir::new();
    let server = Conformance::start(&td);
    let bundle = conformance_bundle(&td, &server, &[]);
    let steps = json!([read("test://static-text"), read("test://watched-resource")]);
    // An allow list that names the resource, and a deny list that names
    // only a prompt: neither hides the resource, so a client that reads
    // it by URI first (as it may, knowing the URI) gets it.
    let static_text = json!({"contents": [{"uri": "test://static-text", "mimeType": "text/plain",
                                           "text": "This is the content of the static text resource."}]});
    let (report, _) = drive_served(&td, &bundle, &["--tools", "conf.static*"], Via::Stdio, &steps);
    assert_eq!(step(&report, 0).get("result"), Some(&static_text), "{}", step(&report, 0));
    td.write_config("[agents.demo.tools]\ndeny = [\"conf.test_simple_prompt\"]\n");
    let (report, _) = drive_served(&td, &bundle, &[], Via::Stdio, &steps);
    assert_eq!(step(&report, 0).get("result"), Some(&static_text), "{}", step(&report, 0));
    assert_eq!(
        result(&report, 1)["contents"][0]["text"],
        "This resource is watched: subscribe to hear of its updates."
    );
}

/// The capabilities a server declared, but for tasks: the extension, and
/// for a 2025-11-25 session `tasks` (docs/serve.md, "Tasks").
fn without_tasks(report: &Value) -> Value {
    let mut capabilities = report["server_capabilities"].clone();
    let fields = capabilities.as_object_mut().unwrap();
    assert_eq!(fields.remove("extensions"), Some(json!({"io.modelcontextprotocol/tasks": {}})));
    fields.remove("tasks");
    capabilities
}

#[test]
fn a_policy_that_does_not_grant_what_the_server_needs_offers_none_of_its_resources_or_prompts() {
    let td = TestDir::new();
    let server = Conformance::start(&td);
    let bundle = conformance_bundle(&td, &server, &[]);
    // The operator revokes the network the server is reached over.
    td.write_override("demo", "[capabilities]\nnet = []\n");
    for via in VIAS {
        let (report, _) = drive_served(&td, &bundle, &[], via, &looking_around());
        // The bundle offers tools and logging only.
        assert_eq!(without_tasks(&report), json!({"logging": {}, "tools": {}}), "{via:?}");
        assert_eq!(step(&report, 0)["tools"], json!([]), "{via:?}");
        // Undeclared, their methods are not there at all.
        for i in 1..looking_around().as_array().unwrap().len() {
            assert_eq!(
                error(&report, i),
                (
                    -32601,
                    "this bundle offers no resources, prompts or completions: its tools live in no MCP server".into()
                ),
                "{via:?}: step {i}"
            );
        }
    }
    // No server was asked anything: no exchange is on the record.
    let frames = if td.ledger_path().exists() { td.frames() } else { Vec::new() };
    let recorded: Vec<&str> =
        frames.iter().map(|f| f.kind.as_str()).filter(|kind| EXCHANGE_KINDS.contains(kind)).collect();
    assert_eq!(recorded, Vec::<&str>::new());

    // Granted again, the same bundle declares and offers them.
    std::fs::remove_file(td.home().join("caps/overrides/demo.toml")).unwrap();
    let (report, _) = drive_served(&td, &bundle, &[], Via::Stdio, &json!([request("resources/list", json!({}))]));
    assert_eq!(
        without_tasks(&report),
        json!({"logging": {}, "completions": {}, "prompts": {"listChanged": true},
               "resources": {"subscribe": true, "listChanged": true}, "tools": {"listChanged": true}})
    );
    assert_eq!(result(&report, 0)["resources"].as_array().unwrap().len(), 3);
}

// ---------------------------------------------------------------------------
// Subscriptions

#[test]
fn a_subscribed_client_hears_of_the_update_the_server_sends_and_both_are_recorded() {
    let td = TestDir::new();
    let server = Conformance::start(&td);
    let bundle = conformance_bundle(&td, &server, &[]);
    let watched = json!({"uri": "test://watched-resource"});
    // The server tells a client that subscribes of an update at once.
    let steps = json!([
        request("resources/subscribe", watched.clone()),
        {"op": "await", "method": "notifications/resources/updated", "limit_ms": NOTICE_GUARD_MS},
        request("resources/unsubscribe", watched.clone()),
    ]);
    let direct = drive_direct(server.transport(), &steps);
    assert_eq!(direct["notifications"][0]["params"], watched, "{direct}");
    for via in VIAS {
        let (report, trace) = drive_served(&td, &bundle, &[], via, &steps);
        assert_eq!(result(&report, 0), &json!({}), "{via:?}");
        assert_eq!(step(&report, 1)["seen"], true, "{via:?}: the update did not reach the client: {report}");
        let updates: Vec<&Value> = report["notifications"].as_array().unwrap().iter().map(|n| &n["params"]).collect();
        assert_eq!(updates, [&watched], "{via:?}");
        assert_eq!(result(&report, 2), &json!({}), "{via:?}");
        let frames = exchanges(&td, &trace);
        // The server says the resource changed as it answers the
        // subscription: the two frames may come in either order.
        let mut recorded = kinds(&frames);
        recorded[..2].sort_unstable();
        assert_eq!(
            recorded,
            [
                ("resource.subscribe", "conf", "resources/subscribe"),
                ("resource.updated", "conf", "notifications/resources/updated"),
                ("resource.subscribe", "conf", "resources/unsubscribe"),
            ],
            "{via:?}"
        );
        assert_eq!(frames[1]["request"], watched);
    }
}

#[test]
fn a_client_subscribed_already_hears_of_the_next_update_and_it_is_recorded_in_its_session() {
    let td = TestDir::new();
    let server = Conformance::start(&td);
    let bundle = conformance_bundle(&td, &server, &[]);
    let watched = json!({"uri": "test://watched-resource"});
    // Subscribed once, the session hears of the update the server sends
    // as it is subscribed again.
    let steps = json!([
        request("resources/subscribe", watched.clone()),
        request("resources/subscribe", watched.clone()),
        {"op": "await", "method": "notifications/resources/updated", "limit_ms": NOTICE_GUARD_MS},
    ]);
    for via in VIAS {
        let (report, trace) = drive_served(&td, &bundle, &[], via, &steps);
        assert_eq!(step(&report, 2)["seen"], true, "{via:?}: {report}");
        let notice = &report["notifications"].as_array().unwrap()[0];
        assert_eq!(
            (&notice["method"], &notice["params"]),
            (&json!("notifications/resources/updated"), &watched),
            "{via:?}"
        );
        let frames = exchanges(&td, &trace);
        let updated: Vec<&Value> = frames.iter().filter(|f| f["kind"] == "resource.updated").collect();
        assert!(!updated.is_empty(), "{via:?}: {frames:?}");
        assert!(updated.iter().all(|f| f["server"] == "conf" && f["request"] == watched), "{via:?}: {updated:?}");
    }
}

// ---------------------------------------------------------------------------
// Content blocks

/// Calls of the conformance server's tools that answer with content blocks
/// other than text, their names under `prefix`.
fn content_calls(prefix: &str) -> Value {
    let tools = ["test_image_content", "test_audio_content", "test_embedded_resource", "test_multiple_content_types"];
    Value::Array(tools.iter().map(|tool| call(&format!("{prefix}{tool}"), json!({}))).collect())
}

#[test]
fn a_tools_content_blocks_reach_the_client_as_the_server_sent_them_and_are_recorded() {
    let td = TestDir::new();
    let server = Conformance::start(&td);
    let bundle = conformance_bundle(&td, &server, &[]);
    let direct = drive_direct(server.transport(), &content_calls(""));
    // The imported tools need confirmation (no annotations): --yes.
    for via in VIAS {
        let (served, trace) = drive_served(&td, &bundle, &["--yes"], via, &content_calls("conf."));
        for i in 0..4 {
            let (served, direct) = (&step(&served, i)["result"], &step(&direct, i)["result"]);
            assert_eq!(served["isError"], false, "{via:?}: {served}");
            assert_eq!(served["content"], direct["content"], "{via:?}: call {i}");
        }
        assert_eq!(
            step(&served, 0)["result"]["content"],
            json!([{"type": "image", "data": PNG, "mimeType": "image/png"}])
        );
        let mixed = step(&served, 3)["result"]["content"].as_array().unwrap();
        let types: Vec<&str> = mixed.iter().map(|b| b["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["text", "image", "resource"], "{via:?}");
        // Each result frame records the blocks as the client got them.
        let results: Vec<Value> =
            trace_frames(&td, &trace).into_iter().filter(|f| f["kind"] == "tool.result").collect();
        assert_eq!(results.len(), 4, "{via:?}");
        for (i, frame) in results.iter().enumerate() {
            assert_eq!(frame["result"], json!({"content": step(&served, i)["result"]["content"]}), "{via:?}: {frame}");
        }
    }
}

#[test]
fn trace_show_renders_a_tools_content_blocks_in_words_with_their_sizes() {
    let td = TestDir::new();
    let server = Conformance::start(&td);
    let bundle = conformance_bundle(&td, &server, &[]);
    let (_, trace) = drive_served(&td, &bundle, &["--yes"], Via::Stdio, &content_calls("conf."));
    let shown = stdout(&td.expect_output(0, &["trace", "show", &trace]));
    // The PNG is 70 bytes, the WAV 44 (their base64 is padded).
    for rendered in [
        "→ image (image/png, 70 bytes)  (call #",
        "→ audio (audio/wav, 44 bytes)  (call #",
        "→ resource test://embedded (text)  (call #",
        r#"→ text "Multiple content types:", image (image/png, 70 bytes), resource test://embedded (text)  (call #"#,
    ] {
        output::assert_contains(&shown, rendered);
    }
}

// ---------------------------------------------------------------------------
// A server nobody here wrote

/// A host's look at the everything server, its names under `prefix`, and
/// a call of its tool `get-tiny-image` by the name `image_tool`.
fn everything_steps(prefix: &str, image_tool: &str) -> Value {
    json!([
        request("resources/list", json!({})),
        request("resources/templates/list", json!({})),
        request("prompts/list", json!({})),
        read("demo://resource/static/document/features.md"),
        get_prompt(&format!("{prefix}args-prompt"), json!({"city": "Paris"})),
        complete(json!({"type": "ref/prompt", "name": format!("{prefix}completable-prompt")}), "department", "E"),
        call(image_tool, json!({})),
    ])
}

#[test]
fn the_everything_server_is_served_as_it_answers_a_client_directly() {
    let td = TestDir::new();
    let bundle = everything_bundle(&td);
    let direct = drive_direct(everything_direct(&td), &everything_steps("", "get-tiny-image"));
    for via in VIAS {
        let (served, trace) =
            drive_served(&td, &bundle, &["--yes"], via, &everything_steps("everything.", "everything.get_tiny_image"));
        let lists = [(0, "resources"), (1, "resourceTemplates"), (2, "prompts")];
        assert_lists_prefixed(&served, &direct, &lists, "everything.", via);
        assert_eq!(
            names(&result(&served, 2)["prompts"]),
            [
                "everything.simple-prompt",
                "everything.args-prompt",
                "everything.completable-prompt",
                "everything.resource-prompt"
            ],
        );
        for i in [3, 4, 5] {
            assert_eq!(result(&served, i), result(&direct, i), "{via:?}: step {i}");
        }
        assert_eq!(
            result(&served, 4)["messages"],
            json!([{"role": "user", "content": {"type": "text", "text": "What's weather in Paris?"}}])
        );
        assert_eq!(result(&served, 5)["completion"]["values"], json!(["Engineering"]));
        let content = &step(&served, 6)["result"]["content"];
        assert_eq!(content, &step(&direct, 6)["result"]["content"], "{via:?}");
        assert_eq!(content[1]["type"], "image", "{via:?}: {content}");
        assert_eq!(content[1]["mimeType"], "image/png", "{via:?}");

        let frames = exchanges(&td, &trace);
        assert_eq!(
            kinds(&frames),
            [
                ("resource.list", "everything", "resources/list"),
                ("resource.templates", "everything", "resources/templates/list"),
                ("prompt.list", "everything", "prompts/list"),
                ("resource.read", "everything", "resources/read"),
                ("prompt.get", "everything", "prompts/get"),
                ("completion.complete", "everything", "completion/complete"),
            ],
            "{via:?}"
        );
        assert_eq!(frames[3]["response"], *result(&served, 3));
    }
}

// ---------------------------------------------------------------------------
// The 2026-07-28 revision

#[test]
fn a_client_of_the_2026_07_28_revision_gets_answers_valid_for_it() {
    let td = TestDir::new();
    let server = Conformance::start(&td);
    let bundle = conformance_bundle(&td, &server, &[]);
    let direct = drive_direct(server.transport(), &exploring(""));
    let report = mcp::drive(&scenario(stdio(&td, &bundle, &[]), "2026-07-28", None, exploring("conf.")));
    assert_eq!(report["protocol_version"], "2026-07-28");
    // Every answer reads as the revision's result (its `resultType` marker
    // among what it requires) to the SDK's client.
    let refused: Vec<(usize, &Value)> = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some((i, s.get("invalid")?)))
        .collect();
    assert_eq!(refused, [], "the SDK refused these answers of rlp");
    // And says what the server said, the revision's markers aside.
    let mut answers = report.clone();
    for record in answers["steps"].as_array_mut().unwrap() {
        let shown = record.to_string();
        let result = record["result"].as_object_mut().unwrap_or_else(|| panic!("no result: {shown}"));
        result.retain(|key, _| !["resultType", "ttlMs", "cacheScope"].contains(&key.as_str()));
    }
    assert_lists_prefixed(
        &answers,
        &direct,
        &[(0, "resources"), (1, "resourceTemplates"), (5, "prompts")],
        "conf.",
        Via::Stdio,
    );
    for i in UNCHANGED {
        assert_eq!(result(&answers, i), result(&direct, i), "step {i}");
    }
}

// ---------------------------------------------------------------------------
// Sessions over HTTP

/// An HTTP response as read off the wire.
struct RawReply {
    status: u16,
    /// The header lines.
    head: String,
    body: String,
}

impl RawReply {
    /// The value of header `name` (case-insensitive).
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }
}

/// The head of `method /mcp` to `address`, with `headers` besides the usual
/// ones, for a body of `length` bytes, on a connection closed after the
/// response. A `Host` among `headers` replaces the one naming `address`.
fn head(address: &str, method: &str, headers: &[(&str, &str)], length: usize) -> String {
    let mut head = format!(
        "{method} /mcp HTTP/1.1\r\nAccept: application/json, text/event-stream\r\nContent-Length: {length}\r\n\
         Connection: close\r\n"
    );
    if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {address}\r\n"));
    }
    if length > 0 {
        head.push_str("Content-Type: application/json\r\n");
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    head
}

/// A connection to `address`, its reads bounded by the hang guard.
fn connect(address: &str) -> TcpStream {
    let stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(HANG_GUARD)).unwrap();
    stream
}

/// The rest of `stream`, read whole: the response to its request.
fn reply(mut stream: TcpStream) -> RawReply {
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or_else(|| panic!("not an HTTP response: {response}"));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{response}"));
    let mut reply = RawReply { status, head: head.to_string(), body: body.to_string() };
    if reply.header("transfer-encoding") == Some("chunked") {
        reply.body = dechunked(body);
    }
    reply
}

/// The data of `body`, sent in chunks (`Transfer-Encoding: chunked`).
fn dechunked(mut body: &str) -> String {
    let mut data = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size, 16).unwrap_or_else(|_| panic!("not a chunk: {body}"));
        if size == 0 {
            break;
        }
        data.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
    data
}

/// Sends `method /mcp` with `headers` and `body` to `address` on a
/// connection of its own, closed after the response, which is read whole.
fn raw(address: &str, method: &str, headers: &[(&str, &str)], body: &str) -> RawReply {
    let mut stream = connect(address);
    stream.write_all(format!("{}{body}", head(address, method, headers, body.len())).as_bytes()).unwrap();
    reply(stream)
}

/// A 2025-11-25 client opening a session: `initialize` with id `id`.
fn open_session(address: &str, id: u64) -> RawReply {
    raw(address, "POST", &[], &mcp::initialize(id).to_string())
}

/// Asserts that `reply` refuses a session as past `--max-sessions N`: 503,
/// when to try again, and why.
fn assert_sessions_full(reply: &RawReply, max_sessions: usize) {
    assert_eq!((reply.status, reply.header("retry-after")), (503, Some("5")), "{}\n{}", reply.head, reply.body);
    assert_eq!(
        reply.body,
        format!(
            "rlp serve holds its most sessions ({max_sessions}, --max-sessions); end one (DELETE /mcp with its \
             Mcp-Session-Id) or try again later\n"
        )
    );
}

/// The scaffold's bundle `agents/demo`.
fn demo(td: &TestDir) -> PathBuf {
    td.expect_output(0, &["agent", "scaffold", "demo", "--non-interactive", "--root", "agents"]);
    td.bundle_path("demo")
}

#[test]
fn a_client_past_max_sessions_is_told_to_come_back_until_a_session_ends() {
    let td = TestDir::new();
    let serve = HttpServe::start(&td, &demo(&td), &["--max-sessions", "1"]);
    let address = serve.address();
    let first = open_session(address, 1);
    assert_eq!(first.status, 200, "{}\n{}", first.head, first.body);
    let session = first.header("mcp-session-id").expect("a session id").to_string();

    // The one session is held: a second client is refused, told when to
    // try again, and why.
    assert_sessions_full(&open_session(address, 2), 1);
    // A stateless client (2026-07-28) opens no session: it is served.
    let report = mcp::drive(&scenario(serve.transport(None), "2026-07-28", None, json!([{"op": "list"}])));
    assert_eq!(step(&report, 0)["tools"], json!([]));

    // Once the session ends, the next client gets one.
    let ended = raw(address, "DELETE", &[("Mcp-Session-Id", &session), ("Mcp-Protocol-Version", "2025-11-25")], "");
    assert!((200..300).contains(&ended.status), "{}", ended.head);
    let third = open_session(address, 3);
    assert_eq!(third.status, 200, "{}\n{}", third.head, third.body);
    assert_ne!(third.header("mcp-session-id"), Some(session.as_str()));
}

/// An `initialize` opens a session whichever revision it names: one that
/// names 2026-07-28 (in its header and its params) is held to the cap too.
#[test]
fn an_initialize_naming_2026_07_28_is_refused_past_max_sessions_too() {
    let td = TestDir::new();
    let serve = HttpServe::start(&td, &demo(&td), &["--max-sessions", "1"]);
    let address = serve.address();
    let first = open_session(address, 1);
    assert_eq!(first.status, 200, "{}\n{}", first.head, first.body);

    let mut initialize = mcp::initialize(2);
    initialize["params"]["protocolVersion"] = json!("2026-07-28");
    let second = raw(address, "POST", &[("MCP-Protocol-Version", "2026-07-28")], &initialize.to_string());
    assert_sessions_full(&second, 1);
}

/// Clients that all ask for a session at once get no more than the cap
/// between them: each request's headers are in and accepted (the server's
/// `100 Continue`) before any body is sent, and the sessions are counted
/// only as they are made.
#[test]
fn initializes_sent_at_once_open_no_more_sessions_than_the_cap() {
    const CLIENTS: u64 = 8;
    let td = TestDir::new();
    let serve = HttpServe::start(&td, &demo(&td), &["--max-sessions", "2"]);
    let address = serve.address();
    let bodies: Vec<String> = (1..=CLIENTS).map(|id| mcp::initialize(id).to_string()).collect();
    let mut clients: Vec<TcpStream> = bodies
        .iter()
        .map(|body| {
            let mut stream = connect(address);
            let head = head(address, "POST", &[("Expect", "100-continue")], body.len());
            stream.write_all(head.as_bytes()).unwrap();
            let mut interim = [0; 25];
            stream.read_exact(&mut interim).unwrap();
            assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
            stream
        })
        .collect();
    for (stream, body) in clients.iter_mut().zip(&bodies) {
        stream.write_all(body.as_bytes()).unwrap();
    }
    let replies: Vec<RawReply> = clients.into_iter().map(reply).collect();

    let (opened, refused): (Vec<_>, Vec<_>) = replies.iter().partition(|reply| reply.status == 200);
    assert_eq!(opened.len(), 2, "{:?}", replies.iter().map(|r| r.status).collect::<Vec<_>>());
    for reply in refused {
        assert_sessions_full(reply, 2);
    }
}

/// `rlp serve <bundle> --http <ip>:0` on a loopback address other than the
/// 127.0.0.1 [`HttpServe`] binds; killed when dropped.
struct ServedOn {
    child: Child,
    /// The `host:port` it listens on.
    address: String,
}

impl ServedOn {
    /// Starts it and waits for the endpoint it announces on stderr (the rest
    /// of which is read and dropped).
    fn start(td: &TestDir, bundle: &Path, ip: &str) -> ServedOn {
        let mut child = td
            .command()
            .arg("serve")
            .arg(bundle)
            .args(["--http", &format!("{ip}:0")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let address = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|line| {
                line.strip_prefix("rlp serve: listening on http://")?.strip_suffix("/mcp").map(str::to_string)
            })
            .expect("rlp serve announced no endpoint");
        std::thread::spawn(move || lines.for_each(drop));
        ServedOn { child, address }
    }
}

impl Drop for ServedOn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server bound to 127.0.0.2 serves clients that name that address in
/// `Host` (as every client of `http://127.0.0.2:PORT/mcp` does), and still
/// refuses a `Host` naming anything else (DNS rebinding).
#[test]
fn a_server_on_another_loopback_address_serves_clients_that_name_it() {
    let td = TestDir::new();
    let served = ServedOn::start(&td, &demo(&td), "127.0.0.2");
    let address = served.address.as_str();
    let port = address.rsplit_once(':').unwrap().1;
    let initialize = mcp::initialize(1).to_string();
    for host in [address.to_string(), format!("localhost:{port}")] {
        let opened = raw(address, "POST", &[("Host", &host)], &initialize);
        assert_eq!(opened.status, 200, "Host: {host}\n{}\n{}", opened.head, opened.body);
    }
    for host in [format!("rebound.example:{port}"), format!("127.0.0.3:{port}")] {
        let refused = raw(address, "POST", &[("Host", &host)], &initialize);
        assert_eq!((refused.status, refused.body.as_str()), (403, "Forbidden: Host header is not allowed"), "{host}");
    }
}
