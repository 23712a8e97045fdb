//! Deferred tool discovery (docs/discovery.md): `rlp serve --expose core`
//! with its meta-tools driven by the official MCP Python SDK,
//! `rlp tools search`, and `rlp tools list` with categories, filters and
//! `--format mcp`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::bundle::{self, runtime_tool, with, with_fs};
use crate::support::files;
use crate::support::ledger::payload;
use crate::support::mcp::{self, call, scenario, stdio};
use crate::support::output::{stderr, stdout, stdout_json};
use crate::support::rlp_snapshot;

/// The catalog of realistic tools the bundle is made of
/// (`tests/fixtures/discovery/catalog.json`): id, category, description,
/// input properties, required ones, and whether the tool is core.
fn catalog() -> Vec<Value> {
    serde_json::from_str(&files::read(Path::new(&files::fixture("discovery/catalog.json")))).unwrap()
}

/// The input schema of a catalog entry.
fn input_schema(entry: &Value) -> Value {
    json!({"type": "object", "properties": entry["properties"], "required": entry["required"]})
}

/// Bundle `workspace`: every catalog tool (each leaves `<state>/ran-<id>`
/// when it runs), `mail.send` needing confirmation, and `admin.delete_repo`
/// needing a network grant the policy does not give.
fn workspace(td: &TestDir) -> PathBuf {
    let state = td.state_dir();
    let mut tools: Vec<Value> = catalog()
        .iter()
        .map(|entry| {
            let id = entry["id"].as_str().unwrap();
            let marker = state.join(format!("ran-{id}"));
            let mut tool = with(
                with_fs(runtime_tool(id, "marker.sh", &[marker.to_str().unwrap()]), &state),
                json!({
                    "description": entry["description"],
                    "category": entry["category"],
                    "input_schema": input_schema(entry),
                    "result_schema": {"type": "object"},
                }),
            );
            if entry["core"] == true {
                tool["discoverability"] = json!("core");
            }
            if id == "mail.send" {
                tool["requires_confirmation"] = json!(true);
            }
            tool
        })
        .collect();
    let marker = state.join("ran-admin.delete_repo");
    let mut denied = with_fs(runtime_tool("admin.delete_repo", "marker.sh", &[marker.to_str().unwrap()]), &state);
    denied["capabilities"].as_array_mut().unwrap().push(json!("net:api.github.com"));
    denied["description"] = json!("Delete a GitHub repository.");
    denied["category"] = json!("admin");
    tools.push(denied);
    td.bundle("workspace", Value::Array(tools), &bundle::caps("exec = true\n", &state))
}

/// Whether tool `id` ran.
fn ran(td: &TestDir, id: &str) -> bool {
    td.state_dir().join(format!("ran-{id}")).exists()
}

/// The exposed catalog ids, sorted.
fn exposed_ids() -> Vec<String> {
    let mut ids: Vec<String> = catalog().iter().map(|e| e["id"].as_str().unwrap().to_string()).collect();
    ids.sort();
    ids
}

/// The core catalog ids, sorted.
fn core_ids() -> Vec<String> {
    let mut ids: Vec<String> =
        catalog().iter().filter(|e| e["core"] == true).map(|e| e["id"].as_str().unwrap().to_string()).collect();
    ids.sort();
    ids
}

/// `rlp tools list <workspace> --format mcp [--expose MODE]`, parsed.
fn listed_by_cli(td: &TestDir, bundle: &Path, expose: &str) -> Value {
    let out =
        td.rlp().args(["tools", "list"]).arg(bundle).args(["--format", "mcp", "--expose", expose]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    stdout_json(&out)
}

/// `rlp serve` over stdio spoken to line by line, one request at a time.
struct Session {
    child: std::process::Child,
    input: std::process::ChildStdin,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
    next_id: u64,
}

impl Session {
    /// Starts the server `command` runs and makes the handshake.
    fn start(mut command: std::process::Command) -> Session {
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let input = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut session = Session { child, input, lines, next_id: 1 };
        session.ask(mcp::initialize(0));
        writeln!(session.input, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
        session
    }

    /// Sends `request` (its `method` and `params`) and reads its answer.
    fn ask(&mut self, request: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let mut message = request;
        message["jsonrpc"] = json!("2.0");
        message["id"] = json!(id);
        writeln!(self.input, "{message}").unwrap();
        loop {
            let line = self.lines.next().expect("the server stopped before answering").unwrap();
            let answer: Value = serde_json::from_str(&line).unwrap();
            if answer["id"] == id {
                return answer;
            }
        }
    }

    /// Closes the server's stdin and waits for it to end.
    fn end(self) {
        let Session { mut child, input, .. } = self;
        drop(input);
        child.wait().unwrap();
    }
}

/// A `tools/call` request.
fn tools_call(name: &str, arguments: Value) -> Value {
    json!({"method": "tools/call", "params": {"name": name, "arguments": arguments}})
}

/// The `tools/list` result a server started with `args` sends, read raw
/// off its stdout.
/// The tools/list of `rlp serve <bundle> <args…>` to a 2025-11-25 client,
/// without the `execution` member each tool but the discovery meta-tools
/// has there (checked).
fn listed_by_server(td: &TestDir, bundle: &Path, args: &[&str]) -> Value {
    let mut command = td.command();
    command.arg("serve").arg(bundle).args(args);
    let mut session = Session::start(command);
    let mut listed = session.ask(json!({"method": "tools/list"}))["result"].clone();
    session.end();
    for tool in listed["tools"].as_array_mut().unwrap() {
        let execution = tool.as_object_mut().unwrap().remove("execution");
        let meta = ["rlp.search_tools", "rlp.describe_tools"].contains(&tool["name"].as_str().unwrap());
        let expected = (!meta).then(|| json!({"taskSupport": "optional"}));
        assert_eq!(execution, expected, "{tool}");
    }
    listed
}

fn names(listed: &Value) -> Vec<String> {
    listed["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn each_expose_mode_lists_what_tools_list_format_mcp_prints() {
    let td = TestDir::new();
    let workspace = workspace(&td);
    let all = listed_by_cli(&td, &workspace, "all");
    let core = listed_by_cli(&td, &workspace, "core");
    assert_eq!(names(&all), exposed_ids());
    let mut expected = core_ids();
    expected.extend(["rlp.search_tools", "rlp.describe_tools", "rlp.call_tool"].map(str::to_string));
    assert_eq!(names(&core), expected);
    assert_eq!(listed_by_server(&td, &workspace, &[]), all);
    assert_eq!(listed_by_server(&td, &workspace, &["--expose", "all"]), all);
    assert_eq!(listed_by_server(&td, &workspace, &["--expose", "core"]), core);
    // The search names the categories of the exposed tools, and calling
    // through rlp.call_tool may reach tools that write or need confirmation.
    let search = &core["tools"][8];
    assert!(
        search["description"]
            .as_str()
            .unwrap()
            .ends_with(" Categories: calendar, chat, code, files, issues, mail, pulls, web."),
        "{search}"
    );
    assert_eq!(search["inputSchema"]["properties"]["category"]["enum"][0], "calendar");
    assert_eq!(
        core["tools"][10]["annotations"],
        json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": false})
    );
    let bytes = |v: &Value| serde_json::to_string(v).unwrap().len();
    assert!(bytes(&core) * 2 < bytes(&all), "core {} bytes, all {} bytes", bytes(&core), bytes(&all));
}

/// The record of step `i` of a driver report.
fn step(report: &Value, i: usize) -> &Value {
    &report["steps"][i]
}

/// Drives `rlp serve <bundle> --expose core` through `steps`; `answers` is
/// the elicitation script.
fn drive_core(td: &TestDir, bundle: &Path, answers: Option<Value>, steps: Value) -> Value {
    mcp::drive(&scenario(stdio(td, bundle, &["--expose", "core"]), "legacy", answers, steps))
}

/// The `tool.discover` frames of the default home's ledger.
fn discoveries(td: &TestDir) -> Vec<Value> {
    td.events().iter().filter(|e| e.kind == "tool.discover").map(payload).collect()
}

#[test]
fn search_ranks_deterministically_agrees_with_the_cli_and_is_recorded() {
    let td = TestDir::new();
    let workspace = workspace(&td);
    let steps = json!([
        call("rlp.search_tools", json!({"query": "create an issue"})),
        call("rlp.search_tools", json!({"query": "channel", "category": "chat", "limit": 2})),
        call("rlp.search_tools", json!({"query": "delete a repository"})),
        call("rlp.search_tools", json!({"query": 7})),
    ]);
    let report = drive_core(&td, &workspace, None, steps);
    let found = &step(&report, 0)["result"]["structuredContent"];
    assert_eq!(
        found["tools"][0],
        json!({"id": "github.create_issue", "category": "issues",
                                           "description": "Create a new issue in a GitHub repository."})
    );
    assert_eq!(found["tools"].as_array().unwrap().len(), 5);
    let cli = td
        .rlp()
        .args(["tools", "search"])
        .arg(&workspace)
        .args(["create an issue", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(cli.status.code(), Some(0), "{}", stderr(&cli));
    assert_eq!(&serde_json::from_str::<Value>(&stdout(&cli)).unwrap(), found);

    let chat = &step(&report, 1)["result"]["structuredContent"]["tools"];
    let chat_ids: Vec<&str> = chat.as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(chat_ids, ["slack.get_channel_history", "slack.list_channels"]);
    // A tool the policy does not expose is never found.
    let deleting = &step(&report, 2)["result"]["structuredContent"]["tools"];
    assert!(deleting.as_array().unwrap().iter().all(|t| t["id"] != "admin.delete_repo"), "{deleting}");
    assert_eq!(
        step(&report, 3)["error"],
        json!({"code": -32602, "data": null, "message": "invalid arguments for `rlp.search_tools`: `query` must be a string, not a number"})
    );

    let recorded = discoveries(&td);
    assert_eq!(recorded.len(), 3, "{recorded:?}");
    let first_ids: Vec<&Value> = found["tools"].as_array().unwrap().iter().map(|t| &t["id"]).collect();
    assert_eq!(recorded[0]["action"], "search");
    assert_eq!(recorded[0]["query"], "create an issue");
    assert_eq!(recorded[0]["limit"], 5);
    assert_eq!(recorded[0]["ids"].as_array().unwrap().iter().collect::<Vec<_>>(), first_ids);
    assert_eq!(recorded[1]["category"], "chat");
    assert_eq!(recorded[1]["ids"], json!(chat_ids));
}

#[test]
fn describe_shows_the_bundles_exact_schemas_and_names_unknown_ids() {
    let td = TestDir::new();
    let workspace = workspace(&td);
    let ids = json!(["github.create_issue", "nope.tool", "admin.delete_repo", "github.create_issue"]);
    let report = drive_core(&td, &workspace, None, json!([call("rlp.describe_tools", json!({"ids": ids}))]));
    let described = &step(&report, 0)["result"]["structuredContent"];
    let entry = catalog().into_iter().find(|e| e["id"] == "github.create_issue").unwrap();
    let all = listed_by_cli(&td, &workspace, "all");
    let definition = all["tools"].as_array().unwrap().iter().find(|t| t["name"] == "github.create_issue").unwrap();
    assert_eq!(described["tools"], json!([definition]));
    assert_eq!(described["tools"][0]["inputSchema"], input_schema(&entry));
    assert_eq!(described["unknown"], json!(["nope.tool", "admin.delete_repo"]));
    let recorded = discoveries(&td);
    assert_eq!(
        recorded,
        [
            json!({"v": 1, "action": "describe", "ids": ["github.create_issue"], "unknown": ["nope.tool", "admin.delete_repo"]})
        ]
    );
}

#[test]
fn call_tool_runs_the_named_tool_through_every_check() {
    let td = TestDir::new();
    let workspace = workspace(&td);
    let issue = json!({"owner": "o", "repo": "r", "title": "t"});
    let steps = json!([
        call("rlp.call_tool", json!({"id": "github.create_issue", "arguments": issue})),
        call(
            "rlp.call_tool",
            json!({"id": "github.update_issue", "arguments": {"owner": "o", "repo": "r", "issue_number": "7"}})
        ),
        call("rlp.call_tool", json!({"id": "admin.delete_repo", "arguments": {}})),
        call("rlp.call_tool", json!({"id": "mail.send", "arguments": {"to": ["a@b.c"], "subject": "s", "body": "b"}})),
        call("rlp.call_tool", json!({"id": "nope.tool"})),
        call("rlp.call_tool", json!({"tool": "github.create_issue"})),
        call("github.list_issues", json!({"owner": "o", "repo": "r"})),
    ]);
    let report = drive_core(&td, &workspace, Some(json!([{"action": "decline"}])), steps);

    let created = &step(&report, 0)["result"];
    assert_eq!(created["structuredContent"], json!({"ok": true}), "{report}");
    assert_eq!(created["_meta"]["dev.runloop/call"]["outcome"], "ok");
    assert!(ran(&td, "github.create_issue"));

    let invalid = &step(&report, 1)["error"];
    assert_eq!(invalid["code"], -32602, "{invalid}");
    assert_eq!(
        invalid["message"],
        r#"the arguments do not match the input_schema of `github.update_issue`: /issue_number: "7" is not of type "integer""#
    );
    assert!(!ran(&td, "github.update_issue"));

    let denied = &step(&report, 2)["result"];
    assert_eq!(denied["isError"], true);
    assert_eq!(denied["_meta"]["dev.runloop/call"]["outcome"], "refused");
    assert!(denied["content"][0]["text"].as_str().unwrap().contains("net:api.github.com"), "{denied}");
    assert!(!ran(&td, "admin.delete_repo"));

    let declined = &step(&report, 3)["result"];
    assert_eq!(declined["_meta"]["dev.runloop/call"]["outcome"], "refused", "{declined}");
    assert_eq!(report["elicitations"].as_array().unwrap().len(), 1);
    assert!(!ran(&td, "mail.send"));

    assert_eq!(
        step(&report, 4)["error"],
        json!({"code": -32602, "data": null, "message": "unknown tool `nope.tool`; find tools with `rlp.search_tools`"})
    );
    assert_eq!(
        step(&report, 5)["error"]["message"],
        "invalid arguments for `rlp.call_tool`: `rlp.call_tool` takes no argument `tool` (it takes id, arguments)"
    );
    // A discoverable tool may still be called by its own name: the same pipeline.
    assert_eq!(step(&report, 6)["result"]["structuredContent"], json!({"ok": true}));

    let calls: Vec<Value> = td.events().iter().filter(|e| e.kind == "tool.call").map(payload).collect();
    let called: Vec<&str> = calls.iter().map(|c| c["tool"].as_str().unwrap()).collect();
    // The declined call was refused before its call frame.
    assert_eq!(called, ["github.create_issue", "github.list_issues"]);
    let confirms: Vec<Value> = td.events().iter().filter(|e| e.kind == "tool.confirm").map(payload).collect();
    assert_eq!(confirms.len(), 1);
    assert_eq!((&confirms[0]["tool"], &confirms[0]["approved"]), (&json!("mail.send"), &json!(false)));
}

/// A search whose frame cannot be recorded is not answered: the model is
/// never shown what the ledger does not hold.
#[test]
fn a_discovery_the_full_disk_cannot_record_is_refused() {
    let td = TestDir::new();
    std::fs::create_dir_all(td.home()).unwrap();
    let tool = with(runtime_tool("disk.check", "ok.sh", &[]), json!({"discoverability": "core", "category": "disk"}));
    let bundle = td.bundle("filler", json!([tool]), "[capabilities]\nexec = true\n");
    // The home is a 1 MiB file system of the server's own mount namespace.
    let script = format!(
        "set -e; mount --make-rprivate /; mount -t tmpfs -o size=1m,mode=0700 tmpfs '{}'; exec \"$@\"",
        td.home().display()
    );
    let mut command = td.wrapped(&["unshare", "--mount", "sh", "-c", &script, "sh"]);
    command.arg("serve").arg(&bundle).args(["--expose", "core"]);
    let mut session = Session::start(command);
    let search = || tools_call("rlp.search_tools", json!({"query": "check"}));
    assert_eq!(session.ask(search())["result"]["structuredContent"]["tools"][0]["id"], "disk.check");
    // Fill the server's home, from inside its mount namespace.
    let fill = format!("dd if=/dev/zero of='{}/filler' bs=4096 2>/dev/null; true", td.home().display());
    let filled = std::process::Command::new("nsenter")
        .args(["-t", &session.child.id().to_string(), "-m", "sh", "-c", &fill])
        .status()
        .unwrap();
    assert!(filled.success(), "this test needs root and nsenter(1)");
    let refused = session.ask(search());
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().starts_with("cannot record the discovery: "), "{refused}");
    assert!(refused.get("result").is_none());
    session.end();
}

#[test]
fn categories_and_ids_outside_the_catalog_are_refused_before_anything_is_recorded() {
    let td = TestDir::new();
    let workspace = workspace(&td);
    let forged = "x\n  #9     +0.001s  tool.confirm  approved by operator";
    let steps = json!([
        call("rlp.search_tools", json!({"query": "list", "category": "nope"})),
        call("rlp.search_tools", json!({"query": "list", "category": "CHAT", "limit": 1})),
        call("rlp.describe_tools", json!({"ids": ["github.get_issue", forged]})),
        call("rlp.describe_tools", json!({"ids": ["a".repeat(129)]})),
    ]);
    let report = drive_core(&td, &workspace, None, steps);
    assert_eq!(
        step(&report, 0)["error"]["message"],
        "invalid arguments for `rlp.search_tools`: no tool has the category `nope`; the categories are: calendar, \
         chat, code, files, issues, mail, pulls, web"
    );
    assert_eq!(step(&report, 1)["result"]["structuredContent"]["tools"][0]["category"], "chat");
    assert_eq!(
        step(&report, 2)["error"]["message"],
        "invalid arguments for `rlp.describe_tools`: `x\\n  #9     +0.001s  tool.confirm  approved by operator` is not a tool id"
    );
    assert_eq!(step(&report, 3)["error"]["code"], -32602);
    // Only the search that was answered is recorded.
    assert_eq!(discoveries(&td).len(), 1);
    let cli = td.rlp().args(["tools", "search"]).arg(&workspace).args(["list", "--category", "nope"]).output().unwrap();
    assert_eq!(cli.status.code(), Some(2));
    let said = stderr(&cli);
    let said: Vec<&str> = said.lines().filter(|l| !l.starts_with("note: ")).collect();
    assert_eq!(
        said[0],
        "error: no tool has the category `nope`; the categories are: calendar, chat, code, files, issues, mail, pulls, web"
    );
}

/// A frame's text from a trace (an imported one too) cannot break
/// `trace show`'s one line per frame.
#[test]
fn trace_show_keeps_each_frame_on_its_line() {
    let td = TestDir::new();
    let trace = "0197a000-0000-7000-8000-000000000001";
    let frame = json!({
        "ts_ms": 1, "actor": "runtime", "kind": "tool.discover", "scope": "w",
        "payload": {"v": 1, "action": "search", "query": "q", "category": "c\n  #9 forged line", "ids": ["a.b"]},
        "provenance": {"agent": "w", "msg_id": "0197a000-0000-7000-8000-000000000002", "trace_id": trace},
    });
    let file = td.join("forged.jsonl");
    std::fs::write(&file, format!("{frame}\n")).unwrap();
    let out = td.rlp().args(["trace", "show"]).arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 3, "{text}");
    rlp_snapshot!(&td, &out);
}

#[test]
fn meta_tools_are_only_served_under_expose_core() {
    let td = TestDir::new();
    let workspace = workspace(&td);
    let report = mcp::drive(&scenario(
        stdio(&td, &workspace, &[]),
        "legacy",
        None,
        json!([call("rlp.search_tools", json!({"query": "issue"}))]),
    ));
    assert_eq!(step(&report, 0)["error"]["code"], -32602);
    assert!(discoveries(&td).is_empty());
}

#[test]
fn a_bundle_tool_named_like_a_meta_tool_is_refused_under_expose_core() {
    let td = TestDir::new();
    let state = td.state_dir();
    let bundle = td.bundle(
        "clash",
        json!([runtime_tool("rlp.search_tools", "ok.sh", &[])]),
        &bundle::caps("exec = true\n", &state),
    );
    let serve = td.rlp().arg("serve").arg(&bundle).args(["--expose", "core"]).output().unwrap();
    let list =
        td.rlp().args(["tools", "list"]).arg(&bundle).args(["--format", "mcp", "--expose", "core"]).output().unwrap();
    for out in [serve, list] {
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(
            stderr(&out).lines().filter(|l| !l.starts_with("note: ")).collect::<Vec<_>>(),
            [
                "error: tool `rlp.search_tools` of bundle `clash` has the name of a meta-tool of --expose core",
                "  help: rename the tool in tools.json (ids starting with `rlp.` are best left to rlp), or serve with --expose all",
            ]
        );
        assert_eq!(stdout(&out), "");
    }
}

#[test]
fn trace_show_renders_what_the_client_was_shown() {
    let td = TestDir::new();
    let workspace = workspace(&td);
    let steps = json!([
        call("rlp.search_tools", json!({"query": "post a message", "category": "chat", "limit": 1})),
        call("rlp.describe_tools", json!({"ids": ["slack.post_message", "x.y"]})),
    ]);
    drive_core(&td, &workspace, None, steps);
    let trace = mcp::stdio_trace(&td);
    let out = td.rlp().args(["trace", "show", &trace]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let shown: Vec<String> = stdout(&out)
        .lines()
        .filter(|l| l.contains("tool.discover"))
        .map(|l| l.split_once("tool.discover").unwrap().1.trim().to_string())
        .collect();
    assert_eq!(
        shown,
        [
            r#"-                        search "post a message" (category chat, limit 1) → slack.post_message"#,
            "-                        describe → slack.post_message; unknown: x.y",
        ]
    );
    let json_out = td.rlp().args(["trace", "show", &trace, "--format", "json"]).output().unwrap();
    let document: Value = stdout_json(&json_out);
    let first = document["frames"].as_array().unwrap().iter().find(|e| e["kind"] == "tool.discover").unwrap();
    assert_eq!(first["status"], "search");
    assert_eq!(first["ids"], json!(["slack.post_message"]));

    // The frames travel with the trace: export, import elsewhere, verify, replay.
    let exported = td.rlp().args(["trace", "export", &trace]).output().unwrap();
    assert_eq!(exported.status.code(), Some(0), "{}", stderr(&exported));
    let file = td.join("discovered.jsonl");
    std::fs::write(&file, &exported.stdout).unwrap();
    let imported = td.rlp().args(["trace", "import"]).arg(&file).args(["--home", "other"]).output().unwrap();
    assert_eq!(imported.status.code(), Some(0), "{}", stderr(&imported));
    let verified = td.rlp().args(["trace", "verify", "--home", "other"]).output().unwrap();
    assert_eq!(verified.status.code(), Some(0), "{}", stdout(&verified));
    let replayed = td.rlp().args(["replay"]).arg(&file).arg("--bundle").arg(&workspace).output().unwrap();
    assert_eq!(replayed.status.code(), Some(0), "{}{}", stdout(&replayed), stderr(&replayed));
}

#[test]
fn tools_search_prints_a_table_and_says_when_nothing_matches() {
    let td = TestDir::new();
    let workspace = workspace(&td);
    let out = td
        .rlp()
        .args(["tools", "search"])
        .arg(&workspace)
        .args(["merge a pull request", "--limit", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "github.merge_pull_request  pulls  Merge a pull request.\n\
         github.request_review      pulls  Request reviewers for a pull request.\n"
    );
    let none = td.rlp().args(["tools", "search"]).arg(&workspace).args(["zebra"]).output().unwrap();
    assert_eq!(none.status.code(), Some(1));
    assert_eq!(stdout(&none), "");
    assert!(stderr(&none).ends_with("no tool of workspace matches `zebra` (34 exposed)\n"), "{}", stderr(&none));
    let bad = td.rlp().args(["tools", "search"]).arg(&workspace).args(["x", "--limit", "0"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).starts_with("error: --limit must be an integer from 1 to 50, not 0\n"), "{}", stderr(&bad));
}

#[test]
fn tools_list_shows_and_filters_by_category_and_discoverability() {
    let td = TestDir::new();
    let workspace = workspace(&td);
    let out = td.rlp().args(["tools", "list"]).arg(&workspace).args(["--category", "web"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let rows: Vec<Vec<&str>> = text.lines().take(3).map(|l| l.split_whitespace().take(3).collect()).collect();
    assert_eq!(
        rows,
        [vec!["ID", "CATEGORY", "DISCOVERY"], vec!["web.fetch", "web", "core"], vec!["web.search", "web", "core"]]
    );
    rlp_snapshot!(td.filters().aligned(), &out);

    let out = td.rlp().args(["tools", "list"]).arg(&workspace).args(["--core", "--format", "json"]).output().unwrap();
    let document: Value = stdout_json(&out);
    let ids: Vec<&str> = document["tools"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, core_ids());
    assert_eq!(document["tools"][0]["discoverability"], "core");
    assert!(document["tools"][0]["category"].is_string());

    let conflicting = td.rlp().args(["tools", "list"]).arg(&workspace).args(["--expose", "core"]).output().unwrap();
    assert_eq!(conflicting.status.code(), Some(2));
    assert!(
        stderr(&conflicting).starts_with("error: --expose applies to --format mcp only\n"),
        "{}",
        stderr(&conflicting)
    );
}

/// A bundle of `count` plain tools named `t.n<i>`; the first `core` of them
/// core, the first `categorised` of those with a category.
fn many(td: &TestDir, count: usize, core: usize, categorised: usize) -> PathBuf {
    let tools: Vec<Value> = (0..count)
        .map(|i| {
            let mut tool = runtime_tool(&format!("t.n{i}"), "ok.sh", &[]);
            if i < core {
                tool["discoverability"] = json!("core");
            }
            if i < categorised {
                tool["category"] = json!("misc");
            }
            tool
        })
        .collect();
    td.bundle("many", Value::Array(tools), "[capabilities]\nexec = true\n")
}

#[test]
fn lint_asks_large_bundles_for_core_tools_and_core_tools_for_a_category() {
    let td = TestDir::new();
    let bundle = many(&td, 31, 0, 0);
    let (code, findings) = td.lint_json([&bundle]);
    assert_eq!(code, 0);
    assert_eq!(findings.len(), 1, "{findings:?}");
    let finding = &findings[0];
    assert_eq!((&finding["code"], &finding["severity"]), (&json!("RLP217"), &json!("warning")));
    assert_eq!(
        finding["message"],
        "31 tools and none marked core: under `rlp serve --expose core` the model starts with only the search"
    );
    assert_eq!((&finding["line"], &finding["column"]), (&json!(3), &json!(3)), "{finding}");
    assert!(td.lint_json([bundle.as_os_str(), "--core-threshold".as_ref(), "31".as_ref()]).1.is_empty());
    assert!(td.lint_json([many(&td, 30, 0, 0)]).1.is_empty());

    let bundle = many(&td, 31, 2, 1);
    let (code, findings) = td.lint_json([bundle.as_os_str(), "--deny-warnings".as_ref()]);
    assert_eq!(code, 1);
    let found: Vec<(&Value, &Value)> = findings.iter().map(|f| (&f["code"], &f["message"])).collect();
    assert_eq!(found, [(&json!("RLP218"), &json!("core tool `t.n1` has no category"))]);
    let human = td.rlp().arg("lint").arg(&bundle).output().unwrap();
    insta::assert_snapshot!(
        "lint_core_tool_uncategorised",
        stdout(&human).replace(&td.path().display().to_string(), "<sandbox>")
    );
}

#[test]
fn the_operators_list_hides_tools_from_search_and_describe_and_refuses_their_calls() {
    let td = TestDir::new();
    let workspace = workspace(&td);
    let config = td.write_config("[agents.workspace.tools]\ndeny = [\"github.create_*\"]\n");
    let issue = json!({"owner": "o", "repo": "r", "title": "t"});
    let steps = json!([
        call("rlp.search_tools", json!({"query": "create an issue"})),
        call("rlp.describe_tools", json!({"ids": ["github.create_issue", "github.get_issue"]})),
        call("rlp.call_tool", json!({"id": "github.create_issue", "arguments": issue})),
    ]);
    let report = drive_core(&td, &workspace, None, steps);
    let found = found_ids(step(&report, 0));
    assert!(!found.is_empty());
    assert!(found.iter().all(|id| !id.starts_with("github.create_")), "{found:?}");
    let described = &step(&report, 1)["result"]["structuredContent"];
    let described_ids: Vec<&Value> = described["tools"].as_array().unwrap().iter().map(|t| &t["name"]).collect();
    assert_eq!(described_ids, [&json!("github.get_issue")]);
    assert_eq!(described["unknown"], json!(["github.create_issue"]));
    let refused = &step(&report, 2)["result"];
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(
        refused["content"][0]["text"],
        format!(
            "tool `github.create_issue` is not exposed: denied by the operator's list in {c} (\"github.create_*\")\n\
             help: change `allow`/`deny` under [agents.workspace.tools] in {c}",
            c = config.display()
        )
    );
    assert!(!ran(&td, "github.create_issue"));
    // `rlp tools search` reads the same lists.
    let cli = td.rlp().args(["tools", "search"]).arg(&workspace).args(["create an issue", "--format", "json"]).output();
    let cli = stdout_json(&cli.unwrap());
    let cli_ids: Vec<&str> = cli["tools"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(cli_ids, found);

    // `--tools` narrows the core list and the search the same way.
    let served = stdio(&td, &workspace, &["--expose", "core", "--tools", "slack.*"]);
    let steps = json!([{"op": "list"}, call("rlp.search_tools", json!({"query": "list issues and channels"}))]);
    let report = mcp::drive(&scenario(served, "legacy", None, steps));
    let listed: Vec<&str> =
        step(&report, 0)["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(listed, ["slack.post_message", "rlp.search_tools", "rlp.describe_tools", "rlp.call_tool"]);
    let narrowed = found_ids(step(&report, 1));
    assert!(!narrowed.is_empty() && narrowed.iter().all(|id| id.starts_with("slack.")), "{narrowed:?}");
}

/// The ids a search's record found.
fn found_ids(record: &Value) -> Vec<&str> {
    record["result"]["structuredContent"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect()
}

/// `rlp.search_tools` with a category and no query lists the category's
/// tools by id (seed 001's `list_tools(category)`), as `rlp tools search
/// --category` does, and records the list as a search without a query.
#[test]
fn a_category_without_a_query_lists_the_category() {
    let td = TestDir::new();
    let workspace = workspace(&td);
    let steps = json!([
        call("rlp.search_tools", json!({"category": "chat"})),
        call("rlp.search_tools", json!({"category": "chat", "limit": 1})),
        call("rlp.search_tools", json!({})),
    ]);
    let report = drive_core(&td, &workspace, None, steps);
    let listed = &step(&report, 0)["result"]["structuredContent"];
    let ids: Vec<&str> = listed["tools"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert!(ids.len() > 1 && ids == sorted, "{listed}");
    assert!(listed["tools"].as_array().unwrap().iter().all(|t| t["category"] == "chat"), "{listed}");
    assert_eq!(step(&report, 1)["result"]["structuredContent"]["tools"].as_array().unwrap().len(), 1);
    assert_eq!(
        step(&report, 2)["error"]["message"],
        "invalid arguments for `rlp.search_tools`: `query` is required: say what the tool should do, or give a \
         category to list its tools"
    );
    let cli = td
        .rlp()
        .args(["tools", "search"])
        .arg(&workspace)
        .args(["--category", "chat", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(cli.status.code(), Some(0), "{}", stderr(&cli));
    assert_eq!(&serde_json::from_str::<Value>(&stdout(&cli)).unwrap(), listed);
    let recorded = discoveries(&td);
    assert_eq!(recorded[0]["category"], "chat");
    assert!(recorded[0].get("query").is_none(), "{:?}", recorded[0]);
    assert_eq!(recorded[0]["ids"], json!(ids));
}

/// A tool's `summary` (seed 000) is what lists show — `tools/list` and a
/// search — and `rlp.describe_tools` shows its full `description`; a search
/// still finds words of the full text.
#[test]
fn lists_show_the_summary_and_a_description_the_full_text() {
    let td = TestDir::new();
    let state = td.state_dir();
    let tool = with(
        with_fs(runtime_tool("notes.add", "marker.sh", &[state.join("ran").to_str().unwrap()]), &state),
        json!({
            "summary": "Add a note.",
            "description": "Add a note to the notebook. Markdown is kept; a title line becomes the heading.",
            "category": "notes"
        }),
    );
    let bundle = td.bundle("notebook", json!([tool]), &bundle::caps("exec = true\n", &state));
    let listed = mcp::drive(&scenario(stdio(&td, &bundle, &[]), "legacy", None, json!([{"op": "list"}])));
    assert_eq!(step(&listed, 0)["tools"][0]["description"], "Add a note.");
    let steps = json!([
        call("rlp.search_tools", json!({"query": "markdown heading"})),
        call("rlp.describe_tools", json!({"ids": ["notes.add"]})),
    ]);
    let report = drive_core(&td, &bundle, None, steps);
    let found = &step(&report, 0)["result"]["structuredContent"]["tools"];
    assert_eq!(found, &json!([{"id": "notes.add", "description": "Add a note.", "category": "notes"}]));
    assert_eq!(
        step(&report, 1)["result"]["structuredContent"]["tools"][0]["description"],
        "Add a note to the notebook. Markdown is kept; a title line becomes the heading."
    );
}

/// `--expose core --activate`: a discoverable tool cannot be called by name
/// until the session describes it; describing it adds it to the session's
/// `tools/list` and tells the client the list changed; `rlp.call_tool`
/// reaches it all along.
#[test]
fn activation_adds_described_tools_to_the_sessions_list() {
    let td = TestDir::new();
    let workspace = workspace(&td);
    let issue = json!({"owner": "o", "repo": "r", "title": "t"});
    let steps = json!([
        call("github.create_issue", issue.clone()),
        {"op": "list"},
        call("rlp.describe_tools", json!({"ids": ["github.create_issue"]})),
        {"op": "list"},
        call("github.create_issue", issue.clone()),
        call("rlp.call_tool", json!({"id": "github.list_issues", "arguments": {"owner": "o", "repo": "r"}})),
    ]);
    let serve = stdio(&td, &workspace, &["--expose", "core", "--activate"]);
    let report = mcp::drive(&scenario(serve, "legacy", None, steps));
    assert_eq!(
        step(&report, 0)["error"]["message"],
        "tool `github.create_issue` is not active in this session: describe it first with `rlp.describe_tools` (or \
         call it with `rlp.call_tool`)"
    );
    let names = |i: usize| -> Vec<String> {
        step(&report, i)["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
    };
    assert!(!names(1).contains(&"github.create_issue".to_string()), "{:?}", names(1));
    let mut grown = names(1);
    grown.push("github.create_issue".into());
    assert_eq!(names(3), grown);
    assert_eq!(step(&report, 4)["result"]["isError"], false, "{report}");
    assert_eq!(step(&report, 5)["result"]["isError"], false, "{report}");
    let changed: Vec<&Value> = report["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["method"] == "notifications/tools/list_changed")
        .collect();
    assert_eq!(changed.len(), 1, "{report}");
    // Without --expose core, --activate is refused.
    let out = td.rlp().args(["serve"]).arg(&workspace).arg("--activate").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
