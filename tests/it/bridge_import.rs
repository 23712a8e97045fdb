//! Importing MCP servers into a bundle (docs/bridge.md, "Importing servers"
//! and "Drift"): `rlp tools import --mcp NAME` (a stdio server after `--`,
//! or `--url`), `--mcp NAME` alone re-importing a server tools.json
//! declares, `--mcp-config FILE` reading an MCP host's configuration, and
//! `rlp lint --check-tools` asking each server for its tools.
//!
//! The servers are those `tests/bridge/setup.sh` installs under the cargo
//! target folder (its `servers.env`, read in tests/it/support/bridge.rs): the
//! tests' own seed.py, the npm filesystem and memory servers and the PyPI
//! time server. Every import starts its stdio server in the kernel sandbox
//! with the `--cap` grants, so each import grants what the server reads.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::bridge::{
    HttpSeed, echo_description, one_text, parts_of, pin_of, seed_command, seed_folders, servers, succeeded,
    unsigned_note,
};
use crate::support::files::{contents, read_json};
use crate::support::output::{self, code, stderr, stdout, stdout_json};

// ---------------------------------------------------------------------------
// The bundle, the seed server and what an import of it writes

/// The scaffold's bundle `agents/demo`, with no tools.
fn demo(td: &TestDir) -> PathBuf {
    td.expect_output(0, &["agent", "scaffold", "demo", "--non-interactive", "--root", "agents"]);
    td.bundle_path("demo")
}

/// A path as a `&str`.
fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// seed.py's description of `echo_meta` while the file does not exist.
const DEFAULT_ECHO: &str = "Echoes its text and the request's _meta, as JSON text.";

/// The grants seed.py needs: `fs:` of each of its folders.
fn seed_caps(td: &TestDir) -> Vec<String> {
    seed_folders(td).iter().map(|dir| format!("fs:{}", dir.display())).collect()
}

/// `rlp tools import <bundle> --mcp seed --cap … <extra…> -- <seed.py…>`.
fn import_seed(td: &TestDir, bundle: &Path, extra: &[&str]) -> Output {
    let mut args: Vec<String> = vec!["tools".into(), "import".into(), s(bundle).into(), "--mcp".into(), "seed".into()];
    for cap in seed_caps(td) {
        args.extend(["--cap".to_string(), cap]);
    }
    args.extend(extra.iter().map(|a| a.to_string()));
    args.push("--".into());
    args.extend(seed_command(td));
    td.command().args(&args).stdin(Stdio::null()).output().unwrap()
}

/// `rlp tools import <bundle> --mcp seed --grant` of seed.py, which must
/// succeed.
fn imported_seed(td: &TestDir, bundle: &Path) -> Output {
    let out = import_seed(td, bundle, &["--grant"]);
    assert_eq!(code(&out), 0, "{}", output::text(&out));
    out
}

/// The scaffold's bundle `agents/demo` with seed.py imported (`--grant`).
fn demo_with_seed(td: &TestDir) -> PathBuf {
    let bundle = demo(td);
    imported_seed(td, &bundle);
    bundle
}

/// `rlp tools import <bundle> --mcp seed <extra…>`: a re-import of the
/// server tools.json declares, which must succeed.
fn reimported_seed(td: &TestDir, bundle: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["tools", "import", s(bundle), "--mcp", "seed"];
    args.extend(extra);
    let out = rlp(td, &args);
    assert_eq!(code(&out), 0, "{}", output::text(&out));
    out
}

/// `--cap <cap>` for each of `caps`.
fn cap_args(caps: &[String]) -> Vec<&str> {
    caps.iter().flat_map(|cap| ["--cap", cap.as_str()]).collect()
}

/// `rlp tools import <bundle> --mcp-config <config> --grant --cap <cap>…`
/// with `PATH` set to `path` alone, where a host finds the servers'
/// programs; it must succeed.
fn imported_config_on_path(td: &TestDir, bundle: &Path, config: &Path, caps: &[String], path: &Path) -> Output {
    let mut args = vec!["tools", "import", s(bundle), "--mcp-config", s(config), "--grant"];
    args.extend(cap_args(caps));
    let out = td.command().args(&args).env("PATH", path).stdin(Stdio::null()).output().unwrap();
    assert_eq!(code(&out), 0, "{}", output::text(&out));
    out
}

/// `rlp <args…>` with an empty stdin.
fn rlp(td: &TestDir, args: &[&str]) -> Output {
    td.run(args)
}

/// The output schema of seed.py's `structured`.
fn structured_output() -> Value {
    json!({"type": "object", "properties": {"doubled": {"type": "integer"}}, "required": ["doubled"]})
}

/// seed.py's 13 tool definitions, as it lists them, `echo_meta` described
/// as `echo`.
fn seed_definitions(echo: &str) -> Vec<Value> {
    let obj = |properties: Value, required: &[&str]| {
        let mut schema = json!({"type": "object", "properties": properties});
        if !required.is_empty() {
            schema["required"] = json!(required);
        }
        schema
    };
    let string = json!({"type": "string"});
    let integer = json!({"type": "integer"});
    let kinds = ["success", "error", "transient", "success_but_is_error", "two_contents", "plain_text"];
    vec![
        json!({"name": "echo_meta", "description": echo, "inputSchema": obj(json!({"text": string}), &["text"])}),
        json!({"name": "structured", "description": "Doubles n, as structuredContent (and its JSON as text).",
               "inputSchema": obj(json!({"n": integer}), &["n"]), "outputSchema": structured_output()}),
        json!({"name": "outcome", "description": "Returns the outcome envelope of the given kind.",
               "inputSchema": obj(json!({"kind": {"type": "string", "enum": kinds}}), &["kind"])}),
        json!({"name": "needs_input", "description": "Asks which colour, unless the answer came in _meta.",
               "inputSchema": obj(json!({"topic": string}), &["topic"])}),
        json!({"name": "flaky", "description": "Fails transiently the first two calls with a key, then succeeds.",
               "inputSchema": obj(json!({"key": string}), &["key"])}),
        json!({"name": "ask", "description": "Elicits a name from the user during the call.",
               "inputSchema": obj(json!({}), &[])}),
        json!({"name": "sample", "description": "Asks the client's model to complete the prompt during the call.",
               "inputSchema": obj(json!({"prompt": string}), &["prompt"])}),
        json!({"name": "roots", "description": "Lists the client's roots during the call.",
               "inputSchema": obj(json!({}), &[])}),
        json!({"name": "progress", "description": "Reports progress `steps` times, then returns.",
               "inputSchema": obj(json!({"steps": integer}), &["steps"])}),
        json!({"name": "crash", "description": "Exits the server process during the call.",
               "inputSchema": obj(json!({}), &[]), "annotations": {"destructiveHint": true}}),
        json!({"name": "hang", "description": "Never answers.", "inputSchema": obj(json!({}), &[])}),
        json!({"name": "secret_env", "description": "Returns the value of an environment variable of the server.",
               "inputSchema": obj(json!({"name": string}), &["name"])}),
        json!({"name": "read_file", "description": "Returns the text of a file.",
               "inputSchema": obj(json!({"path": string}), &["path"]), "annotations": {"readOnlyHint": true}}),
    ]
}

/// The names of seed.py's tools, sorted.
fn seed_names() -> Vec<String> {
    let mut names: Vec<String> =
        seed_definitions(DEFAULT_ECHO).iter().map(|d| d["name"].as_str().unwrap().to_string()).collect();
    names.sort();
    names
}

/// The ids of seed.py's tools imported as server `server`, sorted.
fn seed_ids(server: &str) -> Vec<String> {
    seed_names().iter().map(|name| format!("{server}.{name}")).collect()
}

/// The report an import prints on stdout for tools `ids`: a line each, what
/// `change` says of the id (`added`, `updated`, `unchanged`), then the id.
fn report_lines(ids: &[String], change: impl Fn(&str) -> &'static str) -> String {
    ids.iter().map(|id| format!("{:9} {id}\n", change(id))).collect()
}

/// The record of tool `id` in the JSON report of an import of one server.
fn reported_tool(report: &Value, id: &str) -> Option<Value> {
    report["servers"][0]["tools"].as_array().unwrap().iter().find(|t| t["id"] == id).cloned()
}

/// The definition of seed.py's tool `name`.
fn seed_definition(name: &str, echo: &str) -> Value {
    seed_definitions(echo).into_iter().find(|d| d["name"] == name).unwrap()
}

/// The tools.json entry an import writes for seed.py's tool `definition`
/// when the server was given `caps`.
fn expected_seed_entry(definition: &Value, caps: &[String]) -> Value {
    let name = definition["name"].as_str().unwrap();
    let mut capabilities = vec!["exec".to_string()];
    capabilities.extend(caps.iter().cloned());
    json!({
        "id": format!("seed.{name}"),
        "description": definition["description"],
        "category": "seed",
        "capabilities": capabilities,
        "transport": {"kind": "mcp", "server": "seed", "tool": name, "definition_blake3": pin_of(definition),
                      "definition_parts": parts_of(definition)},
        "input_schema": definition["inputSchema"],
        "result_schema": definition.get("outputSchema").cloned().unwrap_or_else(|| json!({})),
        // Read-only tools need no confirmation; MCP's destructiveHint
        // defaults to true, so a tool without annotations is confirmed.
        "requires_confirmation": name != "read_file",
    })
}

/// The `granted in` lines of an import that added `lines` to policy.caps.
fn granted(bundle: &Path, lines: &[String]) -> String {
    let mut text = format!("granted in {}/policy.caps:\n", bundle.display());
    for line in lines {
        text.push_str(&format!("  {line}\n"));
    }
    text
}

/// The policy.caps lines `--grant` adds for the `fs:` capabilities `caps`:
/// one a folder.
fn fs_grant_lines(caps: &[String]) -> Vec<String> {
    caps.iter().map(|cap| format!("fs = {}", json!([cap.strip_prefix("fs:").unwrap()]))).collect()
}

/// The grant lines of seed.py's import with `--grant` in a fresh bundle.
fn seed_grant_lines(td: &TestDir) -> Vec<String> {
    let mut lines = vec!["exec = true".to_string()];
    lines.extend(fs_grant_lines(&seed_caps(td)));
    lines
}

/// What an import of seed.py says on stderr first.
const SEED_SERVER_LINE: &str = "server `seed`: rlp-bridge-seed 1.0.0, protocol 2025-11-25, 13 tools\n";

/// The tools.json of a bundle.
fn tools_json(bundle: &Path) -> Value {
    read_json(&bundle.join("tools.json"))
}

/// The entry of tool `id` in tools.json `document`.
fn entry<'a>(document: &'a Value, id: &str) -> &'a Value {
    document["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .unwrap_or_else(|| panic!("no tool `{id}` in {document:#}"))
}

/// The ids of tools.json `document`, sorted.
fn ids(document: &Value) -> Vec<String> {
    let mut ids: Vec<String> =
        document["tools"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap().to_string()).collect();
    ids.sort();
    ids
}

/// Rewrites the tools.json of `bundle` with `edit`, then `rlp digest`.
fn edit_tools(td: &TestDir, bundle: &Path, edit: impl FnOnce(&mut Value)) {
    let path = bundle.join("tools.json");
    let mut document = read_json(&path);
    edit(&mut document);
    std::fs::write(&path, serde_json::to_string_pretty(&document).unwrap() + "\n").unwrap();
    let out = rlp(td, &["digest", s(bundle)]);
    assert_eq!(code(&out), 0, "{}", output::text(&out));
}

/// Sets the description of tool `id` in the tools.json of `bundle`, as its
/// author would ([`edit_tools`]).
fn describe_tool(td: &TestDir, bundle: &Path, id: &str, description: &str) {
    edit_tools(td, bundle, |tools| {
        let tool = tools["tools"].as_array_mut().unwrap().iter_mut().find(|t| t["id"] == id).unwrap();
        tool["description"] = json!(description);
    });
}

/// `rlp tools call <bundle> <tool> --args <args> --yes` with an empty stdin.
fn call(td: &TestDir, bundle: &Path, tool: &str, args: Value) -> Output {
    td.call(bundle, tool, args).arg("--yes").write_stdin("").output().unwrap()
}

/// What `seed.echo_meta` answers to `text` ([`call`]), which must succeed.
fn echoed(td: &TestDir, bundle: &Path, text: &str) -> Value {
    succeeded(&call(td, bundle, "seed.echo_meta", json!({"text": text})))
}

/// `rlp tools import <bundle> --mcp <name> --cap fs:<dir>… --grant --
/// <command…>` of a server of tests/bridge/servers, which must succeed.
fn import_test_server(td: &TestDir, bundle: &Path, name: &str, grants: &[&Path], command: &[&str]) -> Output {
    let mut args = vec!["tools".to_string(), "import".into(), s(bundle).into(), "--mcp".into(), name.into()];
    for dir in grants {
        args.extend(["--cap".to_string(), format!("fs:{}", dir.display())]);
    }
    args.extend(["--grant".into(), "--".into()]);
    args.extend(command.iter().map(|part| part.to_string()));
    let out = td.command().args(&args).stdin(Stdio::null()).output().unwrap();
    assert_eq!(code(&out), 0, "{}", output::text(&out));
    out
}

/// The payload of the last `tool.result` frame of the default home.
fn last_result(td: &TestDir) -> Value {
    td.frames().into_iter().filter(|f| f.kind == "tool.result").map(|f| f.payload).next_back().unwrap()
}

/// `rlp lint <bundle> --check-tools`: exit code and stdout.
fn check_tools(td: &TestDir, bundle: &Path) -> (i32, String) {
    let out = rlp(td, &["lint", s(bundle), "--check-tools"]);
    assert_eq!(stderr(&out), "", "{}", output::text(&out));
    (code(&out), stdout(&out))
}

/// What `rlp lint --check-tools` prints of a bundle that is clean.
const CLEAN: &str = "1 bundle checked: no problems\n";

/// Asserts that `rlp lint <bundle>` finds nothing, and `--check-tools` no
/// drift either.
#[track_caller]
fn assert_lints_clean(td: &TestDir, bundle: &Path) {
    let out = rlp(td, &["lint", s(bundle), "--format", "json"]);
    assert_eq!((code(&out), stdout_json(&out)), (0, json!([])), "{}", output::text(&out));
    assert_eq!(check_tools(td, bundle), (0, CLEAN.to_string()));
}

// ---------------------------------------------------------------------------
// rlp tools import --mcp: a stdio server

#[test]
fn importing_a_stdio_server_writes_it_and_a_pinned_entry_for_each_of_its_tools() {
    let td = TestDir::new();
    let bundle = demo(&td);
    let out = imported_seed(&td, &bundle);
    let imported = seed_ids("seed");
    let added = report_lines(&imported, |_| "added");
    assert_eq!(stdout(&out), format!("{added}{}", granted(&bundle, &seed_grant_lines(&td))));
    assert_eq!(stderr(&out), SEED_SERVER_LINE);

    // The server, as given: its absolute command, its arguments, its grants.
    let caps = seed_caps(&td);
    let tools = tools_json(&bundle);
    let command = seed_command(&td);
    assert_eq!(tools["servers"], json!({"seed": {"command": command[0], "args": command[1..], "capabilities": caps}}));
    // One entry per tool, pinned to the definition the server sent.
    assert_eq!(ids(&tools), imported);
    for definition in seed_definitions(DEFAULT_ECHO) {
        let id = format!("seed.{}", definition["name"].as_str().unwrap());
        assert_eq!(entry(&tools, &id), &expected_seed_entry(&definition, &caps), "{id}");
    }
    let pick = |id: &str, field: &str| entry(&tools, id)[field].clone();
    assert_eq!(pick("seed.read_file", "requires_confirmation"), false);
    assert_eq!(pick("seed.crash", "requires_confirmation"), true);
    assert_eq!(pick("seed.hang", "requires_confirmation"), true);
    assert_eq!(pick("seed.structured", "result_schema"), structured_output());
    assert_eq!(pick("seed.echo_meta", "result_schema"), json!({}));

    // --grant granted everything: the bundle lints clean, and its tools run.
    let caps_text = std::fs::read_to_string(bundle.join("policy.caps")).unwrap();
    let folders: Vec<&str> = caps.iter().map(|c| c.strip_prefix("fs:").unwrap()).collect();
    output::assert_contains(
        &caps_text,
        &format!("exec = true\nfs = {}\n", json!(folders).to_string().replace(',', ", ")),
    );
    assert_lints_clean(&td, &bundle);

    let out = call(&td, &bundle, "seed.structured", json!({"n": 2}));
    assert_eq!(succeeded(&out), json!({"doubled": 4}));
    assert_eq!(echoed(&td, &bundle, "hi"), one_text(r#"{"text":"hi","meta":{"progressToken":1}}"#));
    // A read-only tool needs no approval; the others do.
    let hello = td.state_dir().join("hello.txt");
    std::fs::write(&hello, "hello\n").unwrap();
    let out = td.call(&bundle, "seed.read_file", json!({"path": hello})).write_stdin("").output().unwrap();
    assert_eq!(succeeded(&out), one_text("hello\n"));
    let out = td.call(&bundle, "seed.echo_meta", json!({"text": "hi"})).write_stdin("").output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", output::text(&out));
    output::assert_contains(&stderr(&out), "error: tool `seed.echo_meta` requires confirmation");
}

#[test]
fn importing_in_json_reports_each_tool_the_server_and_the_grants() {
    let td = TestDir::new();
    let bundle = demo(&td);
    let out = import_seed(&td, &bundle, &["--format", "json"]);
    assert_eq!(code(&out), 0, "{}", output::text(&out));
    // Without --grant, what is missing is named, and nothing is granted.
    let tools: Vec<Value> =
        seed_ids("seed").iter().map(|id| json!({"id": id, "change": "added", "updated": [], "kept": []})).collect();
    let report = stdout_json(&out);
    assert_eq!(report["bundle"], s(&bundle));
    assert_eq!(
        report["servers"],
        json!([{
            "name": "seed",
            "server": {"name": "rlp-bridge-seed", "version": "1.0.0", "protocol": "2025-11-25"},
            "tools": tools,
            "gone": [],
            "left_out": [],
        }])
    );
    assert_eq!(report["grants"]["added"], json!([]));
    let missing: Vec<&str> =
        report["grants"]["missing"].as_array().unwrap().iter().map(|m| m["capability"].as_str().unwrap()).collect();
    let mut expected = vec!["exec".to_string()];
    expected.extend(seed_caps(&td));
    assert_eq!(missing, expected.iter().map(String::as_str).collect::<Vec<_>>(), "{report:#}");
    assert!(!stderr(&out).contains("server `seed`"), "the human report in JSON mode: {}", output::text(&out));
    // The bundle needs the grants.
    let out = rlp(&td, &["lint", s(&bundle)]);
    assert_eq!(code(&out), 1, "{}", output::text(&out));
}

#[test]
fn a_reimport_keeps_an_edited_description_and_reports_the_other_tools_unchanged() {
    let td = TestDir::new();
    let bundle = demo_with_seed(&td);
    describe_tool(&td, &bundle, "seed.echo_meta", "Echoes, as I put it.");
    let before = tools_json(&bundle);
    // An edited description is the author's, not drift.
    assert_eq!(check_tools(&td, &bundle), (0, CLEAN.to_string()));

    // `--mcp seed` alone: the server tools.json declares.
    let out = reimported_seed(&td, &bundle, &[]);
    assert_eq!(stdout(&out), report_lines(&seed_ids("seed"), |_| "unchanged"));
    assert_eq!(stderr(&out), format!("{SEED_SERVER_LINE}seed.echo_meta: kept description (edited in tools.json)\n"));
    let after = tools_json(&bundle);
    assert_eq!(entry(&after, "seed.echo_meta")["description"], "Echoes, as I put it.");
    assert_eq!(after, before);

    let out = reimported_seed(&td, &bundle, &["--format", "json"]);
    assert_eq!(
        reported_tool(&stdout_json(&out), "seed.echo_meta"),
        Some(json!({"id": "seed.echo_meta", "change": "unchanged", "updated": [], "kept": ["description"]}))
    );
    assert_eq!(echoed(&td, &bundle, "still"), one_text(r#"{"text":"still","meta":{"progressToken":1}}"#));
}

#[test]
fn a_server_with_a_secret_in_its_env_is_imported_and_lint_says_it_was_not_checked() {
    let td = TestDir::new();
    let bundle = demo(&td);
    let b = s(&bundle);
    let id = "runloop/test/token";
    let set = td.rlp().args(["secrets", "set", id]).write_stdin("s3cr3t-t0ken-value").output().unwrap();
    assert_eq!(set.status.code(), Some(0), "{}", output::text(&set));
    let env = format!("TOKEN=${{secret:{id}}}");
    let out = import_seed(&td, &bundle, &["--env", &env, "--secret", id, "--grant"]);
    assert_eq!(code(&out), 0, "{}", output::text(&out));
    let mut grants = seed_grant_lines(&td);
    grants.push(format!("secrets = [\"{id}\"]"));
    let added = report_lines(&seed_ids("seed"), |_| "added");
    assert_eq!(stdout(&out), format!("{added}{}", granted(&bundle, &grants)));

    let tools = tools_json(&bundle);
    let command = seed_command(&td);
    assert_eq!(
        tools["servers"]["seed"],
        json!({"command": command[0], "args": command[1..], "env": {"TOKEN": format!("${{secret:{id}}}")},
               "capabilities": seed_caps(&td), "secrets": [id]})
    );
    assert_eq!(entry(&tools, "seed.secret_env")["secrets"], json!([id]));
    // The server gets the value (scrubbed on the way back).
    let out = call(&td, &bundle, "seed.secret_env", json!({"name": "TOKEN"}));
    assert_eq!(succeeded(&out), one_text(r#"{"value":"[redacted]"}"#));
    // Lint resolves no secret: the server is not started, and said so.
    assert_eq!(
        check_tools(&td, &bundle),
        (
            0,
            format!(
                "note: {b}: MCP server `seed` was not checked: it needs secrets, which lint does not resolve; `rlp \
                 tools import --mcp` checks it\n1 bundle checked: no problems (1 MCP server not checked)\n"
            )
        )
    );
}

#[test]
fn a_tool_listed_under_a_name_no_tool_can_have_is_left_out_and_the_bundle_still_loads() {
    let td = TestDir::new();
    let bundle = demo(&td);
    let servers = servers();
    let script = servers.servers_dir.join("hostile.py");
    let grants = [servers.sdk_python_home.as_path(), &servers.root, &servers.servers_dir];
    let out = import_test_server(&td, &bundle, "hostile", &grants, &[&servers.sdk_python, s(&script)]);
    assert!(
        stdout(&out).starts_with(&report_lines(
            &["hostile.ask".into(), "hostile.log".into(), "hostile.sample".into()],
            |_| "added"
        )),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out).contains(
            "warning: `bad\\u{1b}[31mname` left out: the server `hostile` lists a tool under a name no tool can have (empty, over 128 characters, or with spaces or control characters)"
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(ids(&tools_json(&bundle)), ["hostile.ask", "hostile.log", "hostile.sample"]);
    let lint = rlp(&td, &["lint", s(&bundle)]);
    assert_eq!(code(&lint), 0, "{}", output::text(&lint));
}

#[test]
fn a_server_that_floods_rlp_with_requests_is_stopped_and_its_call_fails() {
    let td = TestDir::new();
    let bundle = demo(&td);
    let servers = servers();
    let script = servers.servers_dir.join("flood.py");
    import_test_server(&td, &bundle, "flood", &[&servers.servers_dir], &["/usr/bin/python3", s(&script), "100000"]);
    // 100,000 pings it never reads the answers to: without a bound, rlp
    // would hold each answer (gigabytes) until the call's timeout.
    let out = call(&td, &bundle, "flood.pings", json!({}));
    assert_eq!(code(&out), 1, "{}", output::text(&out));
    assert!(
        stderr(&out).contains(
            "error: tool `flood.pings` failed: the MCP server `flood` sent requests faster than rlp answers them (over 1024 at once, or 256 a second after that), so rlp stopped reading it; the server process is stopped with everything it started, and started again at the next call\n"
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(last_result(&td)["error"]["kind"], "transport");
}

#[test]
fn an_answer_longer_than_max_output_bytes_is_refused_and_not_recorded() {
    let td = TestDir::new();
    let bundle = demo_with_seed(&td);
    edit_tools(&td, &bundle, |tools| {
        let tool = tools["tools"].as_array_mut().unwrap().iter_mut().find(|t| t["id"] == "seed.echo_meta").unwrap();
        tool["max_output_bytes"] = json!(200);
    });
    assert_eq!(echoed(&td, &bundle, "short"), one_text(r#"{"text":"short","meta":{"progressToken":1}}"#));
    let long = "x".repeat(300);
    let out = call(&td, &bundle, "seed.echo_meta", json!({"text": long}));
    assert_eq!(code(&out), 1, "{}", output::text(&out));
    let said = stderr(&out);
    assert!(
        said.contains("error: tool `seed.echo_meta` output too large: the server `seed` answered ")
            && said.contains(" bytes, more than 200 (max_output_bytes)"),
        "{said}"
    );
    let result = last_result(&td);
    assert_eq!(result["error"]["kind"], "output_too_large");
    assert!(!result.to_string().contains(&long));
}

#[test]
fn a_server_that_lists_a_secret_it_was_given_is_not_imported() {
    let td = TestDir::new();
    let bundle = demo(&td);
    let id = "runloop/test/token";
    let set = td.rlp().args(["secrets", "set", id]).write_stdin("s3cr3t-t0ken-value").output().unwrap();
    assert_eq!(set.status.code(), Some(0), "{}", output::text(&set));
    // What a server that echoes its environment into a description lists.
    std::fs::write(echo_description(&td), "Echoes. Connected with s3cr3t-t0ken-value.").unwrap();
    let before = std::fs::read(bundle.join("tools.json")).unwrap();
    let env = format!("TOKEN=${{secret:{id}}}");
    let out = import_seed(&td, &bundle, &["--env", &env, "--secret", id, "--grant"]);
    assert_eq!(code(&out), 1, "{}", output::text(&out));
    let text = output::text(&out);
    assert!(
        text.contains(&format!(
            "error: the MCP server `seed` put the value of a secret it was given in its definition of `echo_meta`; rlp writes no secret into tools.json, and {} is unchanged",
            s(&bundle)
        )),
        "{text}"
    );
    assert!(!text.contains("s3cr3t"), "{text}");
    assert_eq!(std::fs::read(bundle.join("tools.json")).unwrap(), before);
}

#[test]
fn a_streamable_http_server_is_imported_by_url_with_its_headers() {
    let td = TestDir::new();
    let bundle = demo(&td);
    let b = s(&bundle);
    let seed = HttpSeed::start(&td);
    let host = format!("127.0.0.1:{}", seed.port);
    let url = format!("http://{host}/mcp");
    let out = rlp(&td, &["tools", "import", b, "--mcp", "web", "--url", &url, "--header", "X-Client=rlp", "--grant"]);
    assert_eq!(code(&out), 0, "{}", output::text(&out));
    let added = report_lines(&seed_ids("web"), |_| "added");
    assert_eq!(stdout(&out), format!("{added}{}", granted(&bundle, &[format!("net = [\"{host}\"]")])));
    assert_eq!(stderr(&out), "server `web`: rlp-bridge-seed 1.0.0, protocol 2025-11-25, 13 tools\n");

    let tools = tools_json(&bundle);
    assert_eq!(tools["servers"], json!({"web": {"url": url, "headers": {"X-Client": "rlp"}}}));
    // Each tool needs the net: of the server's URL, and nothing to run.
    let structured = entry(&tools, "web.structured");
    assert_eq!(structured["capabilities"], json!([format!("net:{host}")]));
    assert_eq!(structured["category"], "web");
    assert_eq!(
        structured["transport"],
        json!({"kind": "mcp", "server": "web", "tool": "structured",
               "definition_blake3": pin_of(&seed_definition("structured", DEFAULT_ECHO)),
               "definition_parts": parts_of(&seed_definition("structured", DEFAULT_ECHO))})
    );
    assert_lints_clean(&td, &bundle);
    let out = call(&td, &bundle, "web.structured", json!({"n": 3}));
    assert_eq!(succeeded(&out), json!({"doubled": 6}));
}

// ---------------------------------------------------------------------------
// rlp tools import --mcp-config: a host's servers

#[test]
fn a_desktop_hosts_and_a_vscode_configuration_import_every_server_with_programs_made_absolute() {
    let td = TestDir::new();
    let bundle = demo(&td);
    let b = s(&bundle);
    let servers = servers();
    let shared = td.join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::write(shared.join("a.txt"), "in shared\n").unwrap();
    let memory_file = td.state_dir().join("memory.jsonl");

    // A desktop host's file names `node` as a shell finds it.
    let desktop = td.join("claude_desktop_config.json");
    let document = json!({"mcpServers": {
        "files": {"command": "node", "args": [servers.filesystem_js, shared]},
        "memory": {"command": "node", "args": [servers.memory_js], "env": {"MEMORY_FILE_PATH": memory_file}},
    }});
    std::fs::write(&desktop, serde_json::to_string_pretty(&document).unwrap()).unwrap();
    let node_dir = Path::new(&servers.node).parent().unwrap();
    let caps = [servers.node_modules.clone(), shared.clone(), td.state_dir()].map(|d| format!("fs:{}", d.display()));
    let out = imported_config_on_path(&td, &bundle, &desktop, &caps, node_dir);

    let tools = tools_json(&bundle);
    let of = |server: &str| -> Vec<String> {
        ids(&tools).into_iter().filter(|id| id.starts_with(&format!("{server}."))).collect()
    };
    let (files, memory) = (of("files"), of("memory"));
    for id in ["files.read_text_file", "files.list_directory", "memory.create_entities", "memory.read_graph"] {
        assert!(files.contains(&id.to_string()) || memory.contains(&id.to_string()), "no {id} in {tools:#}");
    }
    let added = report_lines(&[files.as_slice(), memory.as_slice()].concat(), |_| "added");
    let mut grant_lines = vec!["exec = true".to_string()];
    grant_lines.extend(fs_grant_lines(&caps));
    assert_eq!(stdout(&out), format!("{added}{}", granted(&bundle, &grant_lines)));
    let node_note = |server: &str| {
        format!(
            "note: the server `{server}` runs `{}` (`node` as found now: rlp never searches PATH when it runs a server)",
            servers.node
        )
    };
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "{err}");
    assert_eq!(lines[..2], [node_note("files"), node_note("memory")], "{err}");
    assert!(lines[2].starts_with("server `files`: secure-filesystem-server "), "{err}");
    assert!(lines[2].ends_with(&format!(", protocol 2025-11-25, {} tools", files.len())), "{err}");
    assert!(lines[3].starts_with("server `memory`: memory-server "), "{err}");
    assert!(lines[3].ends_with(&format!(", protocol 2025-11-25, {} tools", memory.len())), "{err}");

    // VS Code's file: `servers`, a `type`, and a key that is no server name.
    let vscode = td.join("mcp.json");
    let document = json!({"servers": {"My Time": {"type": "stdio", "command": servers.time_python,
                                                   "args": ["-m", "mcp_server_time"]}}});
    std::fs::write(&vscode, serde_json::to_string_pretty(&document).unwrap()).unwrap();
    let time_caps = [&servers.time_python_home, &servers.root].map(|d| format!("fs:{}", d.display()));
    let mut args = vec!["tools", "import", b, "--mcp-config", s(&vscode)];
    args.extend(cap_args(&time_caps));
    args.push("--grant");
    let out = rlp(&td, &args);
    assert_eq!(code(&out), 0, "{}", output::text(&out));
    let tools = tools_json(&bundle);
    let time: Vec<String> = ids(&tools).into_iter().filter(|id| id.starts_with("my_time.")).collect();
    assert!(time.contains(&"my_time.get_current_time".to_string()), "{time:?}");
    let added = report_lines(&time, |_| "added");
    assert_eq!(stdout(&out), format!("{added}{}", granted(&bundle, &fs_grant_lines(&time_caps))));
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert_eq!(lines[0], "note: the server `My Time` is imported as `my_time`");
    assert!(lines[1].starts_with("server `my_time`: mcp-time "), "{err}");
    assert!(lines[1].ends_with(&format!(", protocol 2025-11-25, {} tools", time.len())), "{err}");

    // Every server, with absolute programs, and its tools' ids and categories.
    assert_eq!(
        tools["servers"],
        json!({
            "files": {"command": servers.node, "args": [servers.filesystem_js, shared], "capabilities": caps},
            "memory": {"command": servers.node, "args": [servers.memory_js],
                       "env": {"MEMORY_FILE_PATH": memory_file}, "capabilities": caps},
            "my_time": {"command": servers.time_python, "args": ["-m", "mcp_server_time"], "capabilities": time_caps},
        })
    );
    let now = entry(&tools, "my_time.get_current_time");
    assert_eq!(
        (&now["category"], &now["transport"]["server"], &now["transport"]["tool"]),
        (&json!("my_time"), &json!("my_time"), &json!("get_current_time"))
    );
    assert_lints_clean(&td, &bundle);

    // A call through each server.
    let out = call(&td, &bundle, "files.read_text_file", json!({"path": shared.join("a.txt")}));
    assert_eq!(succeeded(&out), json!({"content": "in shared\n"}));
    let ada = json!({"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]});
    let out = call(&td, &bundle, "memory.create_entities", json!({"entities": [ada]}));
    assert_eq!(succeeded(&out), json!({"entities": [ada]}));
    let out = call(&td, &bundle, "memory.read_graph", json!({}));
    assert_eq!(succeeded(&out), json!({"entities": [ada], "relations": []}));
    let out = call(&td, &bundle, "my_time.get_current_time", json!({"timezone": "UTC"}));
    let now = succeeded(&out);
    assert_eq!((&now["timezone"], &now["is_dst"]), (&json!("UTC"), &json!(false)), "{now}");
}

#[test]
fn a_server_started_by_a_launcher_that_downloads_is_warned_about() {
    let td = TestDir::new();
    let bundle = demo(&td);
    let servers = servers();
    // An `npx` of the test's own that runs the installed memory server.
    let bin = td.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let npx = td.script("bin/npx", &format!("exec {} {}", servers.node, servers.memory_js));
    let config = td.join(".mcp.json");
    let memory_file = td.state_dir().join("memory.jsonl");
    let document = json!({"mcpServers": {"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"],
                                                     "env": {"MEMORY_FILE_PATH": memory_file}}}});
    std::fs::write(&config, document.to_string()).unwrap();
    let caps = [bin.clone(), servers.node_modules.clone(), td.state_dir()].map(|d| format!("fs:{}", d.display()));
    let out = imported_config_on_path(&td, &bundle, &config, &caps, &bin);
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert_eq!(
        lines[..2],
        [
            format!(
                "note: the server `memory` runs `{}` (`npx` as found now: rlp never searches PATH when it runs a server)",
                npx.display()
            ),
            "warning: the server `memory` is started by `npx`, which downloads `@modelcontextprotocol/server-memory` \
             when it starts: grant it the registry and its cache (e.g. --cap net:registry.npmjs.org --cap fs:~/.npm \
             for npx), or install the package and import its installed command instead"
                .to_string(),
        ],
        "{err}"
    );
    assert!(lines[2].starts_with("server `memory`: memory-server "), "{err}");
    let tools = tools_json(&bundle);
    assert_eq!(tools["servers"]["memory"]["command"], s(&npx));
    assert_eq!(tools["servers"]["memory"]["args"], json!(["-y", "@modelcontextprotocol/server-memory"]));
    let out = call(&td, &bundle, "memory.read_graph", json!({}));
    assert_eq!(succeeded(&out), json!({"entities": [], "relations": []}));
}

// ---------------------------------------------------------------------------
// What an import refuses

/// Asserts that `out` failed with `exit`, printed nothing on stdout and on
/// stderr exactly `error: <message>` (and `  help: <help>` when given).
#[track_caller]
fn assert_refused(out: &Output, exit: i32, message: &str, help: Option<&str>) {
    assert_eq!(out.status.code(), Some(exit), "{}", output::text(out));
    assert_eq!(stdout(out), "", "{}", output::text(out));
    let help = help.map(|h| format!("  help: {h}\n")).unwrap_or_default();
    assert_eq!(stderr(out), format!("error: {message}\n{help}"));
}

#[test]
fn an_import_that_cannot_be_done_says_why_and_changes_nothing() {
    let td = TestDir::new();
    let bundle = demo(&td);
    let b = s(&bundle);
    let before = contents(&bundle);

    // `--mcp NAME` alone needs a server tools.json declares.
    let out = rlp(&td, &["tools", "import", b, "--mcp", "x"]);
    assert_refused(
        &out,
        2,
        "tools.json declares no server `x`: give it as `-- COMMAND [ARGS…]` or --url URL",
        Some(&format!("e.g. rlp tools import {b} --mcp x -- /usr/bin/python3 -m mcp_server_time")),
    );
    // A program that is not there.
    let out = rlp(&td, &["tools", "import", b, "--mcp", "x", "--grant", "--", "/nonexistent/mcp-server", "--stdio"]);
    assert_refused(
        &out,
        1,
        &format!(
            "cannot list the tools of the MCP server `x`: command `/nonexistent/mcp-server` cannot be used: No such \
             file or directory (os error 2); {b} is unchanged"
        ),
        Some(
            "check the command or URL by hand; a stdio server runs sandboxed: grant what it reads with --cap fs:<dir> \
             (and net:<host> for what it downloads)",
        ),
    );
    let out = rlp(&td, &["tools", "import", b, "--mcp", "x", "--", "no-such-mcp-server-program"]);
    assert_refused(
        &out,
        2,
        "the server `x`'s program `no-such-mcp-server-program` is not found (on PATH, or as a path)",
        Some("install it, or give its absolute path"),
    );

    // A file that is no host's configuration, or no JSON.
    let other = td.join("other.json");
    std::fs::write(&other, r#"{"mcp": {"servers": {}}}"#).unwrap();
    let out = rlp(&td, &["tools", "import", b, "--mcp-config", s(&other)]);
    assert_refused(
        &out,
        2,
        &format!("{} has no `mcpServers` or `servers` object", other.display()),
        Some("give the configuration file of an MCP host (claude_desktop_config.json, .mcp.json, .vscode/mcp.json)"),
    );
    let broken = td.join("broken.json");
    std::fs::write(&broken, "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}\n").unwrap();
    let out = rlp(&td, &["tools", "import", b, "--mcp-config", s(&broken)]);
    assert_refused(&out, 2, &format!("{}:3:26: not JSON: trailing comma at line 3 column 26", broken.display()), None);

    // One server that cannot be listed: none of the file's is imported.
    let servers = servers();
    let memory_file = td.state_dir().join("memory.jsonl");
    let config = td.join("two.json");
    let document = json!({"mcpServers": {
        "memory": {"command": servers.node, "args": [servers.memory_js], "env": {"MEMORY_FILE_PATH": memory_file}},
        "zz_gone": {"command": "/nonexistent/mcp-server"},
    }});
    std::fs::write(&config, document.to_string()).unwrap();
    let node_modules = format!("fs:{}", servers.node_modules.display());
    let state = format!("fs:{}", td.state_dir().display());
    let out = rlp(
        &td,
        &["tools", "import", b, "--mcp-config", s(&config), "--cap", &node_modules, "--cap", &state, "--grant"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", output::text(&out));
    assert_eq!(stdout(&out), "", "{}", output::text(&out));
    output::assert_contains(
        &stderr(&out),
        &format!(
            "error: cannot list the tools of the MCP server `zz_gone`: command `/nonexistent/mcp-server` cannot be \
             used: No such file or directory (os error 2); {b} is unchanged\n"
        ),
    );

    // Not a byte of the bundle changed.
    assert_eq!(contents(&bundle), before);
}

// ---------------------------------------------------------------------------
// Drift: rlp lint --check-tools

#[test]
fn a_changed_definition_is_drift_and_refused_until_it_is_reimported() {
    let td = TestDir::new();
    let bundle = demo_with_seed(&td);
    let b = s(&bundle);
    assert_eq!(check_tools(&td, &bundle), (0, CLEAN.to_string()));

    // The server now describes echo_meta otherwise.
    let changed = "Echoes its text, louder.";
    std::fs::write(echo_description(&td), changed).unwrap();
    let (pin, now) =
        (pin_of(&seed_definition("echo_meta", DEFAULT_ECHO)), pin_of(&seed_definition("echo_meta", changed)));
    assert_eq!(
        check_tools(&td, &bundle),
        (
            1,
            format!(
                "drift: {b}: tool `seed.echo_meta`: MCP server `seed` changed its definition since it was pinned \
                 (its description changed); calls are refused until it is re-imported\n\
                 1 bundle checked: 0 errors, 0 warnings and 1 drift\n"
            )
        )
    );
    let out = call(&td, &bundle, "seed.echo_meta", json!({"text": "changed"}));
    assert_eq!(out.status.code(), Some(3), "{}", output::text(&out));
    assert_eq!(stdout(&out), "");
    assert_eq!(
        stderr(&out),
        format!(
            "{}error: tool `seed.echo_meta` refused: the server `seed` changed its definition of `echo_meta` since it \
             was pinned (definition_blake3 {}…, now {}…); its description changed\n  help: \
             review the change (`rlp lint --check-tools`), then re-import with `rlp tools import {b} --mcp seed` to \
             accept it\n",
            unsigned_note(&bundle),
            &pin[..12],
            &now[..12]
        )
    );
    // The other tools of the server are still called.
    let out = call(&td, &bundle, "seed.structured", json!({"n": 1}));
    assert_eq!(succeeded(&out), json!({"doubled": 2}));

    // Re-imported, the change is accepted: the new pin, and the call goes.
    let out = reimported_seed(&td, &bundle, &[]);
    let changes = report_lines(&seed_ids("seed"), |id| if id == "seed.echo_meta" { "updated" } else { "unchanged" });
    assert_eq!(stdout(&out), changes);
    let tools = tools_json(&bundle);
    assert_eq!(entry(&tools, "seed.echo_meta")["transport"]["definition_blake3"], now);
    assert_eq!(check_tools(&td, &bundle), (0, CLEAN.to_string()));
    assert_eq!(echoed(&td, &bundle, "accepted"), one_text(r#"{"text":"accepted","meta":{"progressToken":1}}"#));
}

#[test]
fn a_reimport_takes_the_servers_new_description_unless_the_author_edited_it() {
    let td = TestDir::new();
    let bundle = demo_with_seed(&td);
    // The author leaves echo_meta alone and edits structured's description.
    describe_tool(&td, &bundle, "seed.structured", "Doubles, as I put it.");
    let changed = "Echoes its text, louder.";
    std::fs::write(echo_description(&td), changed).unwrap();

    // The re-import accepts the server's change of a description nobody
    // edited (it is what the new pin covers), and keeps the author's.
    let out = reimported_seed(&td, &bundle, &["--format", "json"]);
    let report = stdout_json(&out);
    let record = |id: &str| reported_tool(&report, id);
    assert_eq!(
        record("seed.structured"),
        Some(json!({"id": "seed.structured", "change": "unchanged", "updated": [], "kept": ["description"]}))
    );
    let tools = tools_json(&bundle);
    assert_eq!(entry(&tools, "seed.structured")["description"], "Doubles, as I put it.");
    assert_eq!(
        entry(&tools, "seed.echo_meta"),
        &expected_seed_entry(&seed_definition("echo_meta", changed), &seed_caps(&td)),
        "{report:#}"
    );
    assert_eq!(
        record("seed.echo_meta"),
        Some(json!({"id": "seed.echo_meta", "change": "updated", "updated": ["description", "transport"], "kept": []}))
    );
}

#[test]
fn tools_missing_on_either_side_are_drift() {
    let td = TestDir::new();
    let bundle = demo_with_seed(&td);
    let b = s(&bundle);
    // tools.json loses seed.hang, and gains a tool the server does not list.
    edit_tools(&td, &bundle, |tools| {
        let list = tools["tools"].as_array_mut().unwrap();
        let at = list.iter().position(|t| t["id"] == "seed.hang").unwrap();
        let mut vanished = list.remove(at);
        vanished["id"] = json!("seed.vanished");
        vanished["transport"]["tool"] = json!("vanished");
        list.push(vanished);
    });
    let out = rlp(&td, &["lint", b]);
    assert_eq!(code(&out), 0, "{}", output::text(&out));
    let drift = format!(
        "drift: {b}: tool `seed.hang` is described by MCP server `seed` but not in tools.json\n\
         drift: {b}: tool `seed.vanished` runs MCP server `seed`, which no longer describes it\n"
    );
    assert_eq!(check_tools(&td, &bundle), (1, format!("{drift}1 bundle checked: 0 errors, 0 warnings and 2 drifts\n")));
    // In JSON, the drift goes to stderr and still fails lint.
    let out = rlp(&td, &["lint", b, "--check-tools", "--format", "json"]);
    assert_eq!((code(&out), stdout(&out), stderr(&out)), (1, "[]\n".to_string(), drift));

    let out = call(&td, &bundle, "seed.vanished", json!({}));
    assert_eq!(out.status.code(), Some(3), "{}", output::text(&out));
    output::assert_contains(
        &stderr(&out),
        "error: tool `seed.vanished` refused: the server `seed` no longer lists a tool `vanished`\n",
    );

    // A re-import adds what the server lists and keeps what it does not.
    let out = reimported_seed(&td, &bundle, &[]);
    let changes = report_lines(&seed_ids("seed"), |id| if id == "seed.hang" { "added" } else { "unchanged" });
    assert_eq!(stdout(&out), changes);
    assert_eq!(
        stderr(&out),
        format!(
            "{SEED_SERVER_LINE}seed.vanished: kept (the server no longer lists it; remove it from tools.json if it is \
             gone)\n"
        )
    );
    assert_eq!(
        check_tools(&td, &bundle),
        (
            1,
            format!(
                "drift: {b}: tool `seed.vanished` runs MCP server `seed`, which no longer describes it\n1 bundle \
                 checked: 0 errors, 0 warnings and 1 drift\n"
            )
        )
    );
}
