//! Authoring end to end: `rlp agent scaffold` (flags and the wizard on a real
//! pseudo-terminal), `rlp tools add|import|list`, and `rlp lint --check-tools`.
//! Every test runs the real binary in its own temporary folders and home.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::files::{contents as snapshot, read, read_json, repo};
use crate::support::output::{assert_contains, code, stderr, stdout, stdout_json, text};
use crate::support::process;
use crate::support::pty::Terminal;
use crate::support::rlp_snapshot;

/// `rlp agent scaffold <name> --non-interactive --root agents <extra…>`.
fn scaffold_with(space: &TestDir, name: &str, extra: &[&str]) -> Output {
    let mut args = vec!["agent", "scaffold", name, "--non-interactive", "--root", "agents"];
    args.extend_from_slice(extra);
    space.run(&args)
}

/// A minimal bundle made by the scaffold, with no tools.
fn scaffold(space: &TestDir, name: &str) -> PathBuf {
    let out = scaffold_with(space, name, &[]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    space.bundle_path(name)
}

/// A test folder holding the scaffold's bundle `agents/demo`, and its path.
fn demo() -> (TestDir, PathBuf) {
    let space = TestDir::new();
    let bundle = scaffold(&space, "demo");
    (space, bundle)
}

/// `rlp lint <bundle>` must exit 0 with no finding at all.
fn assert_lints_clean(space: &TestDir, bundle: &Path) {
    let out = space.expect_output(0, &["lint", bundle.to_str().unwrap(), "--format", "json"]);
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap(), json!([]), "{}", text(&out));
}

/// The example tool binary (`cargo build --example greet_tool`).
fn greet_tool() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().and_then(Path::parent).unwrap();
        let path = profile_dir.join("examples").join("greet_tool");
        let source = repo("examples/greet_tool.rs");
        let stale = |p: &Path| {
            let built = std::fs::metadata(p).and_then(|m| m.modified());
            let written = std::fs::metadata(&source).and_then(|m| m.modified());
            !matches!((built, written), (Ok(b), Ok(w)) if b >= w)
        };
        if stale(&path) {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let status = Command::new(cargo)
                .args(["build", "--example", "greet_tool"])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .unwrap();
            assert!(status.success(), "cargo build --example greet_tool failed");
        }
        path
    })
}

// ---------------------------------------------------------------- scaffold

#[test]
fn scaffold_from_flags_builds_a_bundle_that_lints_clean() {
    let space = TestDir::new();
    let out = scaffold_with(
        &space,
        "mailer",
        &[
            "--description",
            "Sends drafts",
            "--model",
            "claude-test-1",
            "--model-secret",
            "runloop/model/api_key",
            "--cap-fs",
            "/srv/mail,/tmp/out",
            "--cap-net",
            "smtp.example.com:587",
            "--cap-kb-read",
            "*",
            "--cap-kb-write",
            "drafts",
            "--tool",
            "id=mail.render;desc=Renders a draft;exec=/usr/local/bin/render;arg=--quiet;input=schema:mail.draft.v1;tag=mail;cap=fs:/srv/mail;cap=fs:/tmp/out;cap=net:smtp.example.com:587",
            "--tool",
            "id=mail.send;desc=Sends a draft;http=POST https://api.mail.example/v1/send/{box};header=Authorization: Bearer ${secret:runloop/mail/key};confirm;tokens=500",
        ],
    );
    assert_eq!(code(&out), 0, "{}", text(&out));
    let bundle = space.bundle_path("mailer");
    for file in
        ["manifest.toml", "policy.caps", "tools.json", "README.md", "bin/.gitkeep", "schemas/mail.draft.v1.json"]
    {
        assert!(bundle.join(file).is_file(), "{file} missing");
    }
    assert_lints_clean(&space, &bundle);
    let out = space.run(&["lint", bundle.to_str().unwrap()]);
    assert_eq!(stdout(&out), "1 bundle checked: no problems\n");

    let tools = read_json(&bundle.join("tools.json"));
    assert_eq!(tools["version"], 1);
    assert_eq!(
        tools["tools"][0],
        json!({
            "id": "mail.render",
            "description": "Renders a draft",
            "transport": {"kind": "exec", "command": "/usr/local/bin/render", "args": ["--quiet"]},
            "input_schema": {"$ref": "schema:mail.draft.v1"},
            "result_schema": {"type": "object"},
            "capabilities": ["fs:/srv/mail", "fs:/tmp/out", "net:smtp.example.com:587"],
            "requires_confirmation": true,
            "observability": {"tags": ["mail"]}
        })
    );
    assert_eq!(
        tools["tools"][1],
        json!({
            "id": "mail.send",
            "description": "Sends a draft",
            "transport": {
                "kind": "http",
                "method": "POST",
                "url": "https://api.mail.example/v1/send/{box}",
                "headers": {"Authorization": "Bearer ${secret:runloop/mail/key}"}
            },
            "input_schema": {"type": "object", "properties": {"box": {"type": "string"}}, "required": ["box"]},
            "result_schema": {"type": "object"},
            "secrets": ["runloop/mail/key"],
            "requires_confirmation": true,
            "budget": {"tokens": 500}
        })
    );
    let policy = read(&bundle.join("policy.caps"));
    assert!(policy.starts_with("# policy.caps: the capabilities the agent `mailer` is granted."), "{policy}");
    assert!(
        policy.ends_with(
            "[capabilities]\nfs = [\"/srv/mail\", \"/tmp/out\"]\nnet = [\"smtp.example.com:587\", \"api.mail.example\"]\n\
             kb_read = true\nkb_write = [\"drafts\"]\nmodel = true\nsecrets = [\"runloop/model/api_key\", \"runloop/mail/key\"]\n\
             exec = true\n"
        ),
        "{policy}"
    );
    let manifest = read(&bundle.join("manifest.toml"));
    assert_contains(&manifest, "# `name` must equal the bundle's folder name.");
    assert_contains(&manifest, "name = \"mailer\"\nversion = \"0.1.0\"\n");
    assert_contains(&manifest, "description = \"Sends drafts\"\n");
    assert_contains(&manifest, "# model: claude-test-1 (secret runloop/model/api_key)");
    assert_contains(&manifest, "[artifacts.\"bin/.gitkeep\"]");
    let readme = read(&bundle.join("README.md"));
    assert_contains(&readme, "| model | `claude-test-1` |");
    assert!(readme.contains("- `mail.send`: Sends a draft (http POST `https://api.mail.example/v1/send/{box}`)"));
    // Digests are correct as written: `rlp digest --check` agrees with lint.
    assert_eq!(read_json(&bundle.join("schemas/mail.draft.v1.json")), json!({"type": "object", "properties": {}}));
}

#[test]
fn flags_default_requires_confirmation_as_the_wizard_does() {
    let space = TestDir::new();
    let out = scaffold_with(
        &space,
        "demo",
        &[
            "--tool",
            "id=a.web;desc=x;http=GET https://h.example/x",
            "--tool",
            "id=a.quiet;desc=x;http=GET https://h.example/y;confirm=false",
            "--tool",
            "id=a.local;desc=x;exec=/bin/true",
            "--tool",
            "id=a.keyed;desc=x;exec=/bin/true;secret=runloop/a/key",
        ],
    );
    assert_eq!(code(&out), 0, "{}", text(&out));
    let bundle = space.bundle_path("demo");
    let confirm = |bundle: &Path| -> Vec<(String, Value)> {
        read_json(&bundle.join("tools.json"))["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["id"].as_str().unwrap().to_string(), t["requires_confirmation"].clone()))
            .collect()
    };
    let expected = |pairs: &[(&str, bool)]| -> Vec<(String, Value)> {
        pairs.iter().map(|(id, c)| (id.to_string(), json!(c))).collect()
    };
    assert_eq!(
        confirm(&bundle),
        expected(&[("a.web", true), ("a.quiet", false), ("a.local", false), ("a.keyed", true)])
    );
    let b = bundle.to_str().unwrap();
    for (id, flag) in [("b.web", None), ("b.quiet", Some("--no-confirm"))] {
        let mut args =
            vec!["tools", "add", b, "--id", id, "--description", "x", "--http", "GET", "https://h.example/z"];
        args.extend(flag);
        space.expect_output(0, &args);
    }
    assert_eq!(confirm(&bundle)[4..], expected(&[("b.web", true), ("b.quiet", false)]));
    space.expect_output(
        2,
        &["tools", "add", b, "--id", "c", "--description", "x", "--exec", "/bin/true", "--confirm", "--no-confirm"],
    );
}

#[test]
fn scaffold_summary_names_the_files_the_lint_result_and_the_next_steps() {
    let space = TestDir::new();
    let out = scaffold_with(&space, "demo", &[]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    insta::assert_snapshot!("scaffold_summary", stdout(&out));
    let bundle = space.bundle_path("demo");
    assert_eq!(read(&bundle.join("tools.json")), "{\n  \"version\": 1,\n  \"tools\": []\n}\n");
    assert_eq!(read(&bundle.join("policy.caps")).lines().last(), Some("[capabilities]"));
    assert_lints_clean(&space, &bundle);
}

#[test]
fn scaffold_without_a_terminal_fails_fast_and_names_the_flag() {
    let space = TestDir::new();
    let out = space.expect_output(2, &["agent", "scaffold", "demo", "--root", "agents"]);
    rlp_snapshot!(&space, &out);
    assert!(!space.join("agents").exists(), "nothing is created");
}

#[test]
fn scaffold_refuses_an_existing_folder_unless_forced() {
    let (space, bundle) = demo();
    std::fs::write(bundle.join("bin/extra"), b"keep me").unwrap();
    let before = snapshot(&space.join("agents"));

    let out = scaffold_with(&space, "demo", &["--description", "New"]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    rlp_snapshot!(&space, &out);
    assert_eq!(snapshot(&space.join("agents")), before, "nothing changed");

    let out = scaffold_with(&space, "demo", &["--description", "New", "--force"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(stdout(&out).starts_with("Replaced agents/demo/ (0 tools)\n"), "{}", text(&out));
    assert!(read(&bundle.join("manifest.toml")).contains("description = \"New\"\n"));
    assert!(!bundle.join("bin/extra").exists(), "the old folder is gone");
    let names: Vec<String> = std::fs::read_dir(space.join("agents"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["demo"], "no staging folder is left behind");
    assert_lints_clean(&space, &bundle);
}

#[test]
fn scaffold_refuses_bad_answers_before_writing_anything() {
    let space = TestDir::new();
    // What each case says is in its snapshot.
    for (args, _says) in [
        (vec!["--tool", "id=x.y;desc=X;exec=bin/x"], "--tool #1: `exec`: command `bin/x` is not an absolute path"),
        (vec!["--tool", "id=x;desc=X;http=GET https://{host}/a"], "scheme, host or port"),
        (
            vec!["--tool", "id=x;desc=X;http=GET https://x.example/{id}#{frag}"],
            "a placeholder in the fragment (after `#`) is never sent to the server",
        ),
        (vec!["--cap-net", "http://x.example"], "--cap-net:"),
        (vec!["--model-secret", "mail/key"], "--model-secret: `mail/key` is not a secret id"),
        (
            vec![
                "--tool",
                "{\"id\": \"x\", \"description\": \"X\", \"transport\": {\"kind\": \"exec\", \"command\": \"rel\"}}",
            ],
            "error[RLP204] tool `x`, transport/command: command `rel` is not an absolute path",
        ),
    ] {
        let mut all = vec!["agent", "scaffold", "demo", "--non-interactive", "--root", "agents"];
        all.extend(args);
        let out = space.expect_output(2, &all);
        rlp_snapshot!(&space, &out);
        assert!(!space.bundle_path("demo").exists());
    }
    let out = space.run(&["agent", "scaffold", "Demo", "--non-interactive"]);
    assert_eq!(code(&out), 2);
    rlp_snapshot!(&space, &out);
}

#[test]
fn scaffold_messages_name_what_they_are_about() {
    let space = TestDir::new();
    let out = scaffold_with(&space, "demo", &["--description", ""]);
    assert_eq!(
        stderr(&out),
        "error: --description: the description is empty; write one line saying what the agent does\n"
    );
    let exec = "{\"id\": \"x\", \"description\": \"X\", \"transport\": {\"kind\": \"exec\", \"command\": \"rel\"}}";
    let out = scaffold_with(&space, "demo", &["--tool", "id=a.one;desc=X;exec=/bin/true", "--tool", exec]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(stderr(&out).starts_with("error: the tool `x` would not pass lint:\n"), "{}", text(&out));
    for (spec, help) in [
        (
            "id=x;desc=X;http=GET ftp://x.example/",
            "write `id=…;desc=…;http=METHOD https://host/path`, adding `header=Name: value` as needed (see `rlp agent scaffold --help`)",
        ),
        (
            "id=x;desc=X;exec=bin/x",
            "write `id=…;desc=…;exec=/abs/path`, adding `arg=…` as needed (see `rlp agent scaffold --help`)",
        ),
        (
            "id=X;desc=X;exec=/bin/true",
            "write `id=…;desc=…;exec=/abs/path` or `id=…;desc=…;http=METHOD URL` (see `rlp agent scaffold --help`)",
        ),
    ] {
        let out = scaffold_with(&space, "demo", &["--tool", spec]);
        assert!(stderr(&out).ends_with(&format!("\n  help: {help}\n")), "{}", text(&out));
    }
    assert!(!space.bundle_path("demo").exists());
}

#[test]
fn scaffold_summary_counts_findings_as_lint_does() {
    let space = TestDir::new();
    let entry = "{\"id\": \"x\", \"description\": \"X\", \"colour\": 1, \"transport\": {\"kind\": \"exec\", \"command\": \"/bin/true\"}}";
    let out = scaffold_with(&space, "demo", &["--tool", entry]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    rlp_snapshot!(&space, &out);
}

#[test]
fn descriptions_follow_the_format_a_tools_may_span_lines_the_agents_may_not() {
    let space = TestDir::new();
    let out = scaffold_with(&space, "demo", &["--description", "Sends drafts\nand archives them"]);
    assert_eq!(stderr(&out), "error: --description: the agent description must be one line\n");
    let bundle = scaffold(&space, "demo");
    space.expect_output(
        0,
        &[
            "tools",
            "add",
            "agents/demo",
            "--id",
            "a.b",
            "--description",
            "Line one.\nLine two.",
            "--exec",
            "/bin/true",
            "--grant",
        ],
    );
    assert_eq!(read_json(&bundle.join("tools.json"))["tools"][0]["description"], "Line one.\nLine two.");
    assert_lints_clean(&space, &bundle);
}

#[test]
fn a_failed_scaffold_leaves_no_root_folder_behind() {
    let space = TestDir::new();
    let long = "a".repeat(300);
    let out = space.expect_output(2, &["agent", "scaffold", &long, "--non-interactive", "--root", "new/agents"]);
    assert_eq!(
        stderr(&out),
        "error: the agent name is 300 characters long; at most 64 are allowed (it names the bundle's folder and archive)\n  \
         help: e.g. `rlp agent scaffold mailer`\n"
    );
    let relative = r#"{"id": "x", "description": "X", "transport": {"kind": "exec", "command": "rel"}}"#;
    let out =
        space.run(&["agent", "scaffold", "demo", "--non-interactive", "--root", "new/agents", "--tool", relative]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    rlp_snapshot!(&space, &out);
    assert!(!space.join("new").exists(), "nothing is created");
}

/// `rlp <args> --color never` on a pseudo-terminal with a plain `TERM`.
fn on_terminal(space: &TestDir, args: &[&str]) -> Terminal {
    let mut command = space.command();
    command.args(args).args(["--color", "never"]).env("TERM", "dumb");
    Terminal::spawn(command, Duration::from_secs(30))
}

/// The wizard on a real pseudo-terminal: one exec tool and one http tool,
/// with a relative command and a placeholder host refused and asked again.
#[test]
fn wizard_on_a_terminal_adds_an_exec_and_an_http_tool() {
    let space = TestDir::new();
    let mut p = on_terminal(&space, &["agent", "scaffold", "wiz", "--root", "agents"]);
    p.answer("Description", "");
    p.answer("Model id", "claude-test-1");
    p.answer("Secret holding the model's API key", "runloop/model/api_key");
    p.answer("Directories it may read and write", "");
    p.answer("Hosts it may reach", "");
    p.answer("Knowledge-base domains it may read", "");
    p.answer("Knowledge-base domains it may write", "");
    p.answer("May it run exec tools", "n");
    p.answer("Add a tool?", "y");
    p.answer("Tool id", "wiz.echo");
    p.answer("What it does", "Echoes its input");
    p.answer("How is it reached?", "");
    p.answer("Absolute path of the binary", "bin/echo");
    p.answer("command `bin/echo` is not an absolute path", "/bin/echo");
    p.answer("Arguments after the blob path", "");
    p.answer("Input schema", "");
    p.answer("Result schema", "");
    p.answer("Secrets it uses", "");
    p.answer("Other capabilities it needs", "");
    p.answer("Ask an operator to approve each call", "n");
    p.answer("Budget: tokens per call", "");
    p.answer("Budget: US dollars per call", "");
    p.answer("Tags for traces", "demo");
    p.answer("Add this tool?", "");
    p.answer("Add a tool?", "y");
    p.answer("Tool id", "wiz.echo");
    p.answer("a tool `wiz.echo` already exists", "wiz.fetch");
    p.answer("What it does", "Fetches an item");
    p.answer("How is it reached?", "j");
    p.answer("HTTP method", "");
    p.answer("URL template", "https://{host}/items");
    p.answer("scheme, host or port", "https://api.example.com/items/{id}");
    p.answer("Header", "Authorization: Bearer ${secret:runloop/api/token}");
    p.answer("Header", "");
    p.answer("Input schema", "");
    p.answer("Result schema", "");
    p.answer("Secrets it uses", "");
    p.answer("Other capabilities it needs", "");
    p.answer("Ask an operator to approve each call", "");
    p.answer("Budget: tokens per call", "100");
    p.answer("Budget: US dollars per call", "0.25");
    p.answer("Tags for traces", "");
    p.answer("Add this tool?", "");
    p.answer("Add a tool?", "n");
    p.answer("Create agents/wiz?", "");
    p.expect("Created agents/wiz/ (2 tools)");
    p.expect("Lint: no problems");
    p.expect_end();

    let bundle = space.bundle_path("wiz");
    assert_lints_clean(&space, &bundle);
    let tools = read_json(&bundle.join("tools.json"));
    assert_eq!(tools["tools"][0]["transport"], json!({"kind": "exec", "command": "/bin/echo"}));
    assert_eq!(tools["tools"][0]["observability"], json!({"tags": ["demo"]}));
    assert_eq!(tools["tools"][1]["transport"]["url"], "https://api.example.com/items/{id}");
    assert_eq!(tools["tools"][1]["secrets"], json!(["runloop/api/token"]));
    assert_eq!(tools["tools"][1]["requires_confirmation"], true);
    assert_eq!(tools["tools"][1]["budget"], json!({"tokens": 100, "usd": 0.25}));
    let policy = read(&bundle.join("policy.caps"));
    assert!(
        policy.ends_with(
            "[capabilities]\nmodel = true\nsecrets = [\"runloop/model/api_key\", \"runloop/api/token\"]\nexec = true\nnet = [\"api.example.com\"]\n"
        ),
        "{policy}"
    );
    assert!(read(&bundle.join("README.md")).contains("| model | `claude-test-1` |"));
}

// ---------------------------------------------------------------- tools add

/// `rlp tools add` on a terminal asks only for what the flags leave open.
#[test]
fn tools_add_on_a_terminal_asks_for_what_is_missing() {
    let (space, bundle) = demo();
    let mut p = on_terminal(&space, &["tools", "add", "agents/demo", "--exec", "/bin/true", "--grant"]);
    p.answer("Tool id", "Not.Valid");
    p.answer("is not a valid tool id", "demo.true");
    p.answer("What it does", "Always succeeds");
    p.answer("Input schema", "{\"type\": 5}");
    p.answer("not a valid JSON Schema", "");
    p.answer("Result schema", "");
    p.answer("Secrets it uses", "");
    p.answer("Other capabilities it needs", "");
    p.answer("Ask an operator to approve each call", "");
    p.answer("Budget: tokens per call", "");
    p.answer("Budget: US dollars per call", "");
    p.answer("Tags for traces", "");
    p.expect("added tool `demo.true` to agents/demo/tools.json");
    p.expect("exec = true");
    p.expect_end();
    assert_lints_clean(&space, &bundle);
    let tools = read_json(&bundle.join("tools.json"));
    assert_eq!(
        tools["tools"][0],
        json!({
            "id": "demo.true",
            "description": "Always succeeds",
            "transport": {"kind": "exec", "command": "/bin/true"},
            "input_schema": {"type": "object", "properties": {}},
            "result_schema": {"type": "object"},
            "requires_confirmation": false
        })
    );
}

#[test]
fn tools_add_exec_prints_the_missing_grant_then_grant_adds_it() {
    let (space, bundle) = demo();
    let b = bundle.to_str().unwrap();
    let out = space.expect_output(
        0,
        &["tools", "add", b, "--id", "demo.one", "--description", "First", "--exec", "/usr/bin/true"],
    );
    assert_eq!(stdout(&out), format!("added tool `demo.one` to {b}/tools.json\n"));
    assert_eq!(
        stderr(&out),
        format!(
            "warning: {b}/policy.caps does not grant `exec`: the tool is not exposed until it does, and `rlp lint` reports it\n  \
             add under [capabilities] in {b}/policy.caps (merging lists that share a key):\n    exec = true\n  \
             then run `rlp digest {b}`; or pass --grant to `rlp tools add` to do both\n"
        )
    );
    let out = space.run(&["lint", b]);
    assert_eq!(code(&out), 1);
    rlp_snapshot!(&space, &out);

    // A comment of the author's survives the edit.
    let policy = bundle.join("policy.caps");
    std::fs::write(&policy, read(&policy).replace("[capabilities]\n", "[capabilities]\ntime = true   # keep me\n"))
        .unwrap();
    let out = space.expect_output(
        0,
        &[
            "tools",
            "add",
            b,
            "--id",
            "demo.two",
            "--description",
            "Second",
            "--exec",
            "/usr/bin/env",
            "--arg",
            "-i",
            "--grant",
        ],
    );
    assert_eq!(
        stdout(&out),
        format!("added tool `demo.two` to {b}/tools.json\ngranted in {b}/policy.caps:\n  exec = true\n")
    );
    assert_eq!(stderr(&out), "");
    assert!(read(&policy).ends_with("[capabilities]\ntime = true   # keep me\nexec = true\n"), "{}", read(&policy));
    assert_lints_clean(&space, &bundle);
    let tools = read_json(&bundle.join("tools.json"));
    assert_eq!(tools["tools"][1]["transport"], json!({"kind": "exec", "command": "/usr/bin/env", "args": ["-i"]}));
    assert_eq!(tools["tools"][1]["input_schema"], json!({"type": "object", "properties": {}}));
}

#[test]
fn tools_add_http_with_secret_and_shared_schema() {
    let (space, bundle) = demo();
    let b = bundle.to_str().unwrap();
    let out = space.expect_output(
        0,
        &[
            "tools",
            "add",
            b,
            "--id",
            "mail.send",
            "--description",
            "Sends a draft",
            "--http",
            "post",
            "https://api.mail.example:8443/v1/boxes/{box}/send",
            "--header",
            "Authorization: Bearer ${secret:runloop/mail/key}",
            "--input-schema",
            "schema:mail.send.v1",
            "--result-schema",
            "{\"type\": \"object\", \"properties\": {\"id\": {\"type\": \"string\"}}}",
            "--confirm",
            "--tag",
            "mail",
            "--timeout-ms",
            "5000",
            "--grant",
        ],
    );
    assert_eq!(
        stdout(&out),
        format!(
            "added tool `mail.send` to {b}/tools.json\ncreated {b}/schemas/mail.send.v1.json (a starter schema: fill it in)\n\
             granted in {b}/policy.caps:\n  net = [\"api.mail.example:8443\"]\n  secrets = [\"runloop/mail/key\"]\n"
        )
    );
    assert_lints_clean(&space, &bundle);
    let tools = read_json(&bundle.join("tools.json"));
    assert_eq!(
        tools["tools"][0],
        json!({
            "id": "mail.send",
            "description": "Sends a draft",
            "transport": {
                "kind": "http",
                "method": "POST",
                "url": "https://api.mail.example:8443/v1/boxes/{box}/send",
                "headers": {"Authorization": "Bearer ${secret:runloop/mail/key}"}
            },
            "input_schema": {"$ref": "schema:mail.send.v1"},
            "result_schema": {"type": "object", "properties": {"id": {"type": "string"}}},
            "secrets": ["runloop/mail/key"],
            "requires_confirmation": true,
            "observability": {"tags": ["mail"]},
            "timeout_ms": 5000
        })
    );
    assert_eq!(
        read_json(&bundle.join("schemas/mail.send.v1.json")),
        json!({"type": "object", "properties": {"box": {"type": "string"}}, "required": ["box"]})
    );
}

#[test]
fn tools_add_refuses_duplicates_bad_input_and_missing_flags() {
    let (space, bundle) = demo();
    let b = bundle.to_str().unwrap();
    space.expect_output(0, &["tools", "add", b, "--id", "a.b", "--description", "A", "--exec", "/bin/true", "--grant"]);
    let before = snapshot(&bundle);
    for (args, message) in [
        (
            vec!["--id", "a.b", "--description", "Again", "--exec", "/bin/true"],
            "already has a tool `a.b`; nothing was changed",
        ),
        (
            vec!["--id", "c", "--description", "C", "--exec", "bin/true"],
            "--exec: command `bin/true` is not an absolute path",
        ),
        (vec!["--id", "C", "--description", "C", "--exec", "/bin/true"], "--id: `C` is not a valid tool id"),
        (vec!["--id", "c", "--description", "C", "--http", "GET", "https://{h}.example/x"], "scheme, host or port"),
        (
            vec!["--id", "c", "--description", "C", "--http", "GET", "https://h.example/{id}#{frag}"],
            "--http: URL `https://h.example/{id}#{frag}` is refused: a placeholder in the fragment",
        ),
        (
            vec!["--id", "c", "--description", "C", "--exec", "/bin/true", "--input-schema", "{\"type\": 3}"],
            "--input-schema: not a valid JSON Schema",
        ),
        (
            vec!["--id", "c", "--description", "C", "--exec", "/bin/true", "--secret", "nope"],
            "--secret: `nope` is not a secret id",
        ),
        (
            vec!["--id", "c", "--description", "C", "--exec", "/bin/true", "--header", "X: y"],
            "the argument '--exec <CMD>' cannot be used with '--header <K:V>'",
        ),
        (
            vec!["--id", "c", "--description", "C", "--http", "GET", "https://h.example/x", "--arg", "-v"],
            "the argument '--http <METHOD> <URL>' cannot be used with '--arg <A>'",
        ),
        (vec!["--id", "c", "--description", "C"], "missing --exec or --http, and there is no terminal to ask on"),
        (vec!["--exec", "/bin/true"], "missing --id, --description, and there is no terminal to ask on"),
    ] {
        let mut all = vec!["tools", "add", b];
        all.extend(args);
        let out = space.run(&all);
        assert_eq!(code(&out), 2, "{message}\n{}", text(&out));
        rlp_snapshot!(&space, &out);
        assert_eq!(snapshot(&bundle), before, "{message}: nothing changed");
    }
    // A URL placeholder the given input schema lacks: lint's RLP208, refused up front.
    let out = space.expect_output(
        2,
        &[
            "tools",
            "add",
            b,
            "--id",
            "c",
            "--description",
            "C",
            "--http",
            "GET",
            "https://api.example.com/{item}",
            "--input-schema",
            "{\"type\": \"object\"}",
        ],
    );
    rlp_snapshot!(&space, &out);
    assert_eq!(snapshot(&bundle), before);
}

#[test]
fn tools_add_names_a_byte_order_mark_in_tools_json() {
    let (space, bundle) = demo();
    let tools = bundle.join("tools.json");
    std::fs::write(&tools, format!("\u{feff}{}", read(&tools))).unwrap();
    let before = snapshot(&bundle);
    let out = space
        .expect_output(2, &["tools", "add", "agents/demo", "--id", "a.b", "--description", "A", "--exec", "/bin/true"]);
    assert_eq!(
        stderr(&out),
        "error: agents/demo/tools.json cannot be edited: the file starts with a UTF-8 byte-order mark (U+FEFF), which JSON does not allow\n  \
         help: save the file as UTF-8 without a byte-order mark, or delete its first 3 bytes: `sed -i '1s/^\\xEF\\xBB\\xBF//' agents/demo/tools.json`\n"
    );
    assert_eq!(snapshot(&bundle), before);
}

#[test]
fn tools_add_and_import_keep_crlf_line_endings() {
    let (space, bundle) = demo();
    let b = bundle.to_str().unwrap();
    for file in ["policy.caps", "tools.json"] {
        let path = bundle.join(file);
        std::fs::write(&path, read(&path).replace('\n', "\r\n")).unwrap();
    }
    assert_eq!(code(&space.run(&["digest", b])), 0);
    space.expect_output(0, &["tools", "add", b, "--id", "a.b", "--description", "A", "--exec", "/bin/true", "--grant"]);
    let tool = greet_tool().to_str().unwrap();
    space.expect_output(0, &["tools", "import", b, "--exec", tool]);
    for (file, added) in [("policy.caps", "exec = true\r\n"), ("tools.json", "\"id\": \"demo.greet\",\r\n")] {
        let written = read(&bundle.join(file));
        assert!(written.contains(added), "{file}: {written:?}");
        assert_eq!(written.matches('\n').count(), written.matches("\r\n").count(), "{file} keeps CRLF: {written:?}");
    }
    assert_lints_clean(&space, &bundle);
}

/// `tools add` writes tools.json, then manifest.toml, each atomically.
/// Killed outright between the two, it leaves tools.json new, the manifest
/// stale, and the manifest's temporary file (named after its dead process):
/// lint names both problems, digest refuses the temporary file rather than
/// list it, and the next edit of the bundle removes it.
#[test]
fn a_temporary_file_of_an_interrupted_tools_add_never_becomes_a_bundle_file() {
    let (space, bundle) = demo();
    let b = bundle.to_str().unwrap();
    let manifest = bundle.join("manifest.toml");
    let stale = read(&manifest);
    space.expect_output(
        0,
        &["tools", "add", b, "--id", "demo.one", "--description", "One", "--exec", "/bin/true", "--grant"],
    );
    let left = bundle.join(".rlp-~99999999-AbCdEf.tmp");
    std::fs::rename(&manifest, &left).unwrap();
    std::fs::write(&manifest, &stale).unwrap();

    let out = space.run(&["lint", b]);
    assert_eq!(code(&out), 1);
    rlp_snapshot!(&space, &out);
    let out = space.run(&["digest", b]);
    assert_eq!(code(&out), 1);
    rlp_snapshot!(&space, &out);
    assert_eq!(read(&manifest), stale);

    space.expect_output(0, &["tools", "add", b, "--id", "demo.two", "--description", "Two", "--exec", "/bin/true"]);
    assert!(!left.exists(), "the temporary file is left");
    assert!(!read(&manifest).contains(".rlp"), "{}", read(&manifest));
    assert_lints_clean(&space, &bundle);
}

// ---------------------------------------------------------------- tools import

#[test]
fn tools_import_warns_when_it_changes_a_tools_transport() {
    let space = TestDir::new();
    let out = scaffold_with(
        &space,
        "demo",
        &["--tool", "id=demo.greet;desc=Mine;http=GET https://api.mine.example/g;confirm"],
    );
    assert_eq!(code(&out), 0, "{}", text(&out));
    let b = space.bundle_path("demo");
    let out = space.expect_output(
        0,
        &["tools", "import", b.to_str().unwrap(), "--exec", greet_tool().to_str().unwrap(), "--grant"],
    );
    rlp_snapshot!(&space, &out);
}

#[test]
fn tools_import_adds_the_binarys_tools_and_reports_each() {
    let (space, bundle) = demo();
    let b = bundle.to_str().unwrap();
    let tool = greet_tool().to_str().unwrap();
    let out = space.expect_output(0, &["tools", "import", b, "--exec", tool, "--grant"]);
    assert_eq!(
        stdout(&out),
        format!("added     demo.greet\nadded     demo.word_count\ngranted in {b}/policy.caps:\n  exec = true\n")
    );
    assert_lints_clean(&space, &bundle);
    let tools = read_json(&bundle.join("tools.json"));
    assert_eq!(tools["tools"][0]["id"], "demo.greet");
    assert_eq!(tools["tools"][0]["transport"], json!({"kind": "exec", "command": tool}));
    assert_eq!(tools["tools"][1]["input_schema"]["required"], json!(["text"]));

    // A local change to a field the binary does not state, or to one the
    // author owns, is kept; a change to a schema the binary states is drift,
    // and a new import puts it back.
    let path = bundle.join("tools.json");
    let mut edited = tools.clone();
    edited["tools"][0]["requires_confirmation"] = json!(true);
    edited["tools"][1]["description"] = json!("Counts words, roughly.");
    edited["tools"][1]["input_schema"] = json!({"type": "object"});
    std::fs::write(&path, serde_json::to_string_pretty(&edited).unwrap() + "\n").unwrap();
    assert_eq!(code(&space.run(&["digest", b])), 0);
    let out = space.expect_output(1, &["lint", b, "--check-tools"]);
    assert_eq!(
        stdout(&out),
        format!(
            "drift: {b}: tool `demo.word_count`: `input_schema` differs from what {tool} describes\n1 bundle checked: 0 errors, 0 warnings and 1 drift\n"
        )
    );
    let out = space.expect_output(0, &["tools", "import", b, "--exec", tool]);
    assert_eq!(stdout(&out), "unchanged demo.greet\nupdated   demo.word_count\n");
    assert_eq!(stderr(&out), "demo.word_count: updated input_schema; kept description (edited in tools.json)\n");
    let tools = read_json(&path);
    assert_eq!(tools["tools"][0]["requires_confirmation"], true);
    assert_eq!(tools["tools"][1]["description"], "Counts words, roughly.");
    assert_eq!(tools["tools"][1]["input_schema"]["required"], json!(["text"]));
    let out = space.expect_output(0, &["lint", b, "--check-tools"]);
    assert_eq!(stdout(&out), "1 bundle checked: no problems\n");
}

/// A tool binary at `<sandbox>/answer.sh` whose `schema` answer is `tools`.
fn answering(space: &TestDir, tools: Value) -> PathBuf {
    let answer = json!({"tools": tools}).to_string().replace('\'', "'\\''");
    space.script("answer.sh", &format!("printf '%s\\n' '{answer}'"))
}

/// The `schema` answer entry of tool `id`: `description`, no confirmation,
/// and `input_schema` requiring `required`.
fn answered(id: &str, description: &str, required: &[&str]) -> Value {
    json!({
        "id": id,
        "description": description,
        "input_schema": {"type": "object", "required": required},
        "result_schema": {"type": "object"},
        "requires_confirmation": false,
    })
}

#[test]
fn tools_import_keeps_the_authors_edits_updates_the_binarys_fields_and_replace_overwrites() {
    let (space, bundle) = demo();
    let b = bundle.to_str().unwrap();
    let binary = answering(&space, json!([answered("demo.echo", "Echo v1", &[]), answered("demo.old", "Old", &[])]));
    let exec = binary.to_str().unwrap();
    let out = space.expect_output(0, &["tools", "import", b, "--exec", exec, "--grant"]);
    assert_eq!(
        stdout(&out),
        format!("added     demo.echo\nadded     demo.old\ngranted in {b}/policy.caps:\n  exec = true\n")
    );
    assert_eq!(stderr(&out), "");

    let path = bundle.join("tools.json");
    let mut tools = read_json(&path);
    tools["tools"][0]["description"] = json!("Echoes, as I put it.");
    tools["tools"][0]["requires_confirmation"] = json!(true);
    tools["tools"][0]["observability"] = json!({"tags": ["mine"]});
    std::fs::write(&path, serde_json::to_string_pretty(&tools).unwrap() + "\n").unwrap();
    answering(&space, json!([answered("demo.echo", "Echo v2", &["text"])]));

    let out = space.expect_output(0, &["tools", "import", b, "--exec", exec]);
    assert_eq!(stdout(&out), "updated   demo.echo\n");
    assert_eq!(
        stderr(&out),
        format!(
            "demo.echo: updated input_schema; kept description, requires_confirmation (edited in tools.json)\n\
             demo.old: kept (no longer described by {exec}; remove it from tools.json if it is gone)\n"
        )
    );
    let tools = read_json(&path);
    let echo = &tools["tools"][0];
    assert_eq!(
        (
            &echo["description"],
            &echo["requires_confirmation"],
            &echo["observability"],
            &echo["input_schema"]["required"]
        ),
        (&json!("Echoes, as I put it."), &json!(true), &json!({"tags": ["mine"]}), &json!(["text"]))
    );
    assert_eq!(tools["tools"][1]["id"], "demo.old");
    assert_lints_clean(&space, &bundle);

    let out = space.expect_output(0, &["tools", "import", b, "--exec", exec, "--replace", "--format", "json"]);
    assert_eq!(
        stdout_json(&out),
        json!({
            "bundle": b,
            "tools": [{"id": "demo.echo", "change": "updated", "updated": ["description", "requires_confirmation"], "kept": []}],
            "not_described": ["demo.old"],
            "retyped": [],
            "grants": {"policy": format!("{b}/policy.caps"), "added": [], "missing": []},
        })
    );
    let echo = &read_json(&path)["tools"][0];
    assert_eq!((&echo["description"], &echo["requires_confirmation"]), (&json!("Echo v2"), &json!(false)));
    assert_eq!(echo["observability"], json!({"tags": ["mine"]}), "a field the binary does not state is kept");
}

#[test]
fn lint_check_tools_counts_drift_escapes_it_and_names_binaries_it_could_not_ask() {
    let (space, bundle) = demo();
    let b = bundle.to_str().unwrap();
    let liar = space.script("liar.sh", r#"printf '%s\n' '{"tools": [{"id": "x\u001b[2Jy", "description": "d"}]}'"#);
    let plain = space.join("plain.txt");
    std::fs::write(&plain, "not a program\n").unwrap();
    let (liar, plain) = (liar.to_str().unwrap(), plain.to_str().unwrap());
    for (id, command) in
        [("a.liar", liar), ("a.gone", "/nonexistent/tool"), ("a.plain", plain), ("a.false", "/bin/false")]
    {
        space.expect_output(0, &["tools", "add", b, "--id", id, "--description", "D", "--exec", command, "--grant"]);
    }
    let out = space.expect_output(1, &["lint", b, "--check-tools"]);
    let report = format!(
        "drift: {b}: tool `x\\u{{1b}}[2Jy` is described by {liar} but not in tools.json\n\
         drift: {b}: tool `a.liar` runs {liar}, which no longer describes it\n\
         note: {b}: /nonexistent/tool was not checked: it could not be started: No such file or directory (os error 2)\n\
         note: {b}: {plain} was not checked: it could not be started: Permission denied (os error 13)\n\
         note: {b}: /bin/false was not checked: it exited with status 1\n"
    );
    assert_eq!(
        stdout(&out),
        format!("{report}1 bundle checked: 0 errors, 0 warnings and 2 drifts (3 tool binaries not checked)\n")
    );
    let out = space.expect_output(1, &["lint", b, "--check-tools", "--format", "json"]);
    assert_eq!(stdout(&out), "[]\n");
    assert_eq!(stderr(&out), report);
}

#[test]
fn tools_import_refuses_binaries_that_do_not_answer_and_changes_nothing() {
    let (space, bundle) = demo();
    let b = bundle.to_str().unwrap();
    let before = snapshot(&bundle);
    let garbage = space.script("garbage.sh", "echo 'this is not json'");
    // Asked for its schema a binary may write only its private folder: the
    // test reads its pid there while the import waits for it.
    let tmp = space.tmp_dir();
    let sleeper = space.script(
        "sleeper.sh",
        "echo $$ > \"$TMPDIR/pid.tmp\" && mv \"$TMPDIR/pid.tmp\" \"$TMPDIR/pid\"\nexec sleep 600",
    );
    let mut sleeper_pid = None;
    let shape = space.script("shape.sh", "echo '{\"tools\": 5}'");
    let invalid = space.script("invalid.sh", "echo '{\"tools\": [{\"id\": \"Bad Id\", \"description\": \"x\", \"input_schema\": {}, \"result_schema\": {}}]}'");
    for (command, extra, why) in [
        (PathBuf::from("/bin/false"), None, "it exited with status 1"),
        (garbage, None, "it printed something that is not JSON: this is not json"),
        (sleeper.clone(), Some("3000"), "it did not answer within 3000 ms and was killed"),
        (shape, None, "its answer has no `tools` list"),
        (invalid, None, "tool id `Bad Id` does not match"),
    ] {
        let extra: Vec<&str> = extra.map_or_else(Vec::new, |ms| vec!["--timeout-ms", ms]);
        let import = spawn_import(&space, &bundle, &command, &tmp, &extra);
        if command == sleeper {
            sleeper_pid = Some(process::wait_for_private_file(&tmp, "pid"));
        }
        let out = import.wait_with_output().unwrap();
        assert_eq!(code(&out), 1, "{why}\n{}", text(&out));
        rlp_snapshot!(&space, &out);
        assert_eq!(snapshot(&bundle), before, "{why}: bundle unchanged");
    }
    let pid = sleeper_pid.unwrap();
    assert!(!process::is_running(pid.trim()), "the tool that did not answer is still running");
    let out = space.run(&["tools", "import", b, "--exec", "greet_tool"]);
    assert_eq!(code(&out), 2);
    rlp_snapshot!(&space, &out);
}

// ---------------------------------------------------------------- tools list

#[test]
fn tools_list_shows_transport_needs_and_exposure() {
    let (space, bundle) = demo();
    let b = bundle.to_str().unwrap();
    for args in [
        vec!["--id", "demo.run", "--description", "Runs", "--exec", "/usr/bin/true", "--arg", "-v", "--grant"],
        vec![
            "--id",
            "mail.send",
            "--description",
            "Sends",
            "--http",
            "POST",
            "https://api.mail.example/send",
            "--header",
            "X-Key: ${secret:runloop/mail/key}",
            "--confirm",
        ],
        vec!["--id", "notes.read", "--description", "Reads notes", "--exec", "/usr/bin/cat", "--cap", "fs:/srv/notes"],
    ] {
        let mut all = vec!["tools", "add", b];
        all.extend(args);
        space.expect_output(0, &all);
    }
    let out = space.expect_output(0, &["tools", "list", "agents/demo"]);
    insta::assert_snapshot!("tools_list_human", stdout(&out));

    let out = space.expect_output(0, &["tools", "list", "agents/demo", "--format", "json"]);
    let listing: Value = stdout_json(&out);
    assert_eq!(
        listing["tools"][1],
        json!({
            "id": "mail.send",
            "transport": {"kind": "http", "method": "POST", "url": "https://api.mail.example/send", "host": "api.mail.example"},
            "capabilities": ["net:api.mail.example", "secrets:runloop/mail/key"],
            "secrets": ["runloop/mail/key"],
            "requires_confirmation": true,
            "category": null,
            "discoverability": "discoverable",
            "exposed": false,
            "missing": ["net:api.mail.example", "secrets:runloop/mail/key"],
            "unlisted": null,
            "sandbox": null,
            "options": null
        })
    );
    assert_eq!(listing["tools"][0]["exposed"], true);
    // An exec tool's sandbox: its private folder and the folder it declares, no network.
    let sandbox = &listing["tools"][2]["sandbox"];
    assert_eq!((&sandbox["mode"], &sandbox["confined"]), (&json!("best-effort"), &json!(true)), "{sandbox}");
    assert_eq!((&sandbox["write"], &sandbox["net"]), (&json!(["$TMPDIR", "/srv/notes"]), &json!("none")), "{sandbox}");
    assert_eq!(listing["override"], Value::Null);

    // An operator override that revokes exec hides the exec tools.
    space.write_override("demo", "[capabilities]\nexec = false\n");
    let out = space.run(&["tools", "list", "agents/demo", "--format", "json"]);
    let listing: Value = stdout_json(&out);
    assert_eq!(listing["tools"][0]["missing"], json!(["exec"]));
    assert!(listing["override"].as_str().unwrap().ends_with("caps/overrides/demo.toml"));
    let out = space.run(&["tools", "list", "agents/demo"]);
    rlp_snapshot!(&space, &out);
    assert!(stdout(&out).ends_with("caps/overrides/demo.toml\n"), "{}", text(&out));

    space.write_override("demo", "[capabilities]\nexec = \"no\"\n");
    let out = space.expect_output(2, &["tools", "list", "agents/demo"]);
    rlp_snapshot!(&space, &out);
}

// ---------------------------------------------------------------- duplicate keys

/// JSON with a key given twice is refused wherever authoring reads it, as lint
/// refuses it (RLP002), instead of silently keeping the last value.
#[test]
fn json_with_a_duplicate_key_is_refused_everywhere() {
    let (space, bundle) = demo();
    let b = bundle.to_str().unwrap();
    let tools = bundle.join("tools.json");
    std::fs::write(&tools, "{\n  \"version\": 1,\n  \"version\": 1,\n  \"tools\": []\n}\n").unwrap();
    assert_eq!(code(&space.run(&["digest", b])), 0);
    let before = snapshot(&bundle);
    let add = ["tools", "add", b, "--id", "a.b", "--description", "A", "--exec", "/bin/true"];
    let answer = space.script("answer.sh", "echo '{\"tools\": []}'");
    for args in [&add[..], &["tools", "import", b, "--exec", answer.to_str().unwrap()][..]] {
        let out = space.expect_output(2, args);
        assert_eq!(
            stderr(&out),
            format!(
                "error: {b}/tools.json cannot be edited: duplicate key `version` at line 3 column 11 (RLP002: JSON readers disagree on which of the two values wins)\n  help: fix it first; `rlp lint {b}` shows where\n"
            )
        );
        assert_eq!(snapshot(&bundle), before);
    }

    std::fs::write(&tools, "{\"version\": 1, \"tools\": []}\n").unwrap();
    assert_eq!(code(&space.run(&["digest", b])), 0);
    let before = snapshot(&bundle);
    let mut schema = add.to_vec();
    schema.extend(["--input-schema", "{\"type\": \"object\", \"type\": \"string\"}"]);
    let out = space.expect_output(2, &schema);
    rlp_snapshot!(&space, &out);
    let twice =
        space.script("twice.sh", "echo '{\"tools\": [{\"id\": \"a.b\", \"id\": \"c.d\", \"description\": \"x\"}]}'");
    let out = space.expect_output(1, &["tools", "import", b, "--exec", twice.to_str().unwrap()]);
    rlp_snapshot!(&space, &out);
    assert_eq!(snapshot(&bundle), before);

    let spec =
        r#"{"id": "a.b", "id": "c.d", "description": "x", "transport": {"kind": "exec", "command": "/bin/true"}}"#;
    let out = scaffold_with(&space, "other", &["--tool", spec]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    rlp_snapshot!(&space, &out);
    assert!(!space.bundle_path("other").exists());
}

#[test]
fn tools_list_escapes_control_characters() {
    let (space, bundle) = demo();
    let tools = json!({"version": 1, "tools": [{
        "id": "demo.run", "description": "Runs",
        "transport": {"kind": "exec", "command": "/usr/bin/x\u{1b}[2J\ny", "args": ["\t-v"]},
        "input_schema": {}, "result_schema": {}, "requires_confirmation": false,
    }]});
    std::fs::write(bundle.join("tools.json"), serde_json::to_string_pretty(&tools).unwrap()).unwrap();
    let out = space.expect_output(0, &["tools", "list", "agents/demo"]);
    assert!(!stdout(&out).contains(['\u{1b}', '\t']), "{}", text(&out));
    insta::assert_snapshot!("tools_list_control_characters", stdout(&out));
}

#[test]
fn authoring_commands_report_as_json() {
    let space = TestDir::new();
    let out = scaffold_with(&space, "demo", &["--format", "json", "--tool", "id=demo.run;desc=Runs;exec=/bin/true"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let bundle = space.bundle_path("demo");
    let b = bundle.to_str().unwrap();
    let report: Value = stdout_json(&out);
    assert_eq!(report["bundle"], json!("agents/demo"));
    assert_eq!(report["replaced"], json!(false));
    assert_eq!(report["tools"], json!(1));
    assert_eq!(report["files"][0], json!("manifest.toml"));
    assert_eq!(report["lint"], json!({"errors": 0, "warnings": 0, "findings": []}));

    let out = space.run(&[
        "tools",
        "add",
        b,
        "--id",
        "demo.fetch",
        "--description",
        "Fetches",
        "--http",
        "GET",
        "https://api.example.com/items/{id}",
        "--input-schema",
        "schema:demo.item",
        "--format",
        "json",
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let report: Value = stdout_json(&out);
    assert_eq!(
        report,
        json!({
            "bundle": b,
            "tool": "demo.fetch",
            "tools_file": format!("{b}/tools.json"),
            "schema_files": [format!("{b}/schemas/demo.item.json")],
            "grants": {
                "policy": format!("{b}/policy.caps"),
                "added": [],
                "missing": [{"capability": "net:api.example.com", "line": "net = [\"api.example.com\"]"}],
            },
        })
    );
    // The missing grant is explained on stderr all the same.
    rlp_snapshot!(&space, &out);

    let tool = greet_tool().to_str().unwrap();
    let out = space.run(&["tools", "import", b, "--exec", tool, "--grant", "--format", "json"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let report: Value = stdout_json(&out);
    assert_eq!(
        report,
        json!({
            "bundle": b,
            "tools": [
                {"id": "demo.greet", "change": "added", "updated": [], "kept": []},
                {"id": "demo.word_count", "change": "added", "updated": [], "kept": []},
            ],
            "not_described": [],
            "retyped": [],
            "grants": {"policy": format!("{b}/policy.caps"), "added": [], "missing": []},
        })
    );
}

// ------------------------------------------- tools import: the binary never stays

/// A `schema` binary that never answers: it ignores SIGTERM, starts a child
/// in its process group and one in a session of its own (which holds its
/// stdout), writes "<own pid> <group child> <session child>" to `pids` in its
/// private folder (the only folder it may write), and sleeps.
fn stubborn_binary(space: &TestDir) -> PathBuf {
    space.script(
        "stubborn.sh",
        "trap '' TERM\nsleep 600 &\ngroup=$!\nsetsid sleep 600 &\n\
         echo \"$$ $group $!\" > \"$TMPDIR/pids.tmp\" && mv \"$TMPDIR/pids.tmp\" \"$TMPDIR/pids\"\nsleep 600",
    )
}

/// `rlp tools import <bundle> --exec <binary> <extra…>` started with `TMPDIR`
/// `tmp` and its output captured.
fn spawn_import(space: &TestDir, bundle: &Path, binary: &Path, tmp: &Path, extra: &[&str]) -> std::process::Child {
    let mut command = space.command();
    command.args(["tools", "import"]).arg(bundle).arg("--exec").arg(binary).args(extra).env("TMPDIR", tmp);
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

/// The three pids `stubborn_binary` wrote, read from its private folder
/// below `tmp` while the import runs.
fn stubborn_pids(tmp: &Path) -> Vec<String> {
    process::wait_for_private_file(tmp, "pids").split_whitespace().map(str::to_string).collect()
}

/// Kills what a test left running (on purpose, or because it failed).
fn kill_left(pid: &str) {
    if process::is_running(pid) {
        process::signal(pid.parse().unwrap(), libc::SIGKILL);
    }
}

#[test]
fn tools_import_kills_a_binary_that_does_not_answer_with_everything_it_started() {
    let space = TestDir::new();
    let bundle = scaffold(&space, "demo");
    let tmp = space.tmp_dir();
    let stubborn = stubborn_binary(&space);
    // Long enough for the test to read the pids before the binary is killed.
    let import = spawn_import(&space, &bundle, &stubborn, &tmp, &["--timeout-ms", "3000"]);
    let found = stubborn_pids(&tmp);
    let out = import.wait_with_output().unwrap();
    assert_eq!(code(&out), 1, "{}", text(&out));
    rlp_snapshot!(&space, &out);
    // Killed by the time rlp returns: the binary that ignores SIGTERM, its
    // child, and the child that left its group and session.
    let running: Vec<_> = found.into_iter().filter(|pid| process::is_running(pid)).collect();
    running.iter().for_each(|pid| kill_left(pid));
    assert!(running.is_empty(), "still running after the import: {running:?}");
}

#[test]
fn tools_import_never_leaves_its_binary_running_when_rlp_is_interrupted_or_killed() {
    use std::os::unix::process::ExitStatusExt;
    for signal in [libc::SIGTERM, libc::SIGKILL] {
        let space = TestDir::new();
        let bundle = scaffold(&space, "demo");
        let tmp = space.tmp_dir();
        let stubborn = stubborn_binary(&space);
        let mut rlp = spawn_import(&space, &bundle, &stubborn, &tmp, &[]);
        let found = stubborn_pids(&tmp);
        process::signal(rlp.id() as i32, signal);
        assert_eq!(rlp.wait().unwrap().signal(), Some(signal));
        // Interrupted, rlp kills the binary's process group; SIGKILLed, it
        // runs nothing, and the kernel kills the binary it started.
        let ended = if signal == libc::SIGKILL { &found[..1] } else { &found[..2] };
        for pid in ended {
            process::wait_until_gone(pid.parse().unwrap());
        }
        found.iter().for_each(|pid| kill_left(pid));
    }
}

/// Fresh scaffold output with granted folders and hosts and an exec tool
/// that names none of them is clean under `--deny-warnings`: the tool gets
/// the agent's grants (and, reaching the network, asks for confirmation).
#[test]
fn an_exec_tool_of_a_fresh_scaffold_gets_the_agents_grants_and_lints_clean() {
    let td = TestDir::new();
    let data = td.join("data");
    td.expect(
        0,
        &[
            "agent",
            "scaffold",
            "demo",
            "--non-interactive",
            "--cap-fs",
            data.to_str().unwrap(),
            "--cap-net",
            "api.example.com",
            "--tool",
            "id=demo.list;desc=Lists things;exec=/usr/bin/env",
        ],
    );
    let (out, _) = td.expect(0, &["lint", "agents/demo", "--deny-warnings"]);
    assert_eq!(out, "1 bundle checked: no problems\n");
    let tools = crate::support::files::read_json(&td.join("agents/demo/tools.json"));
    assert_eq!(
        tools["tools"][0]["capabilities"],
        serde_json::json!([format!("fs:{}", data.display()), "net:api.example.com"])
    );
    assert_eq!(tools["tools"][0]["requires_confirmation"], true);
}

/// A binary that answers the `schema` action in seed 000's own shape
/// (`name`, `summary`, `description`, `parameters`) is imported, mapped to
/// tools.json's fields, and the result lints clean.
#[test]
fn tools_import_reads_the_seeds_own_schema_shape() {
    let (space, bundle) = demo();
    let b = bundle.to_str().unwrap();
    let binary = answering(
        &space,
        json!([{
            "name": "demo.cargo_check",
            "summary": "Run cargo check for the given package.",
            "description": "Longer description with details.",
            "parameters": {
                "package": {"type": "string", "summary": "Package to check."},
                "release": {"type": "boolean", "default": false}
            }
        }]),
    );
    let out = space.expect_output(0, &["tools", "import", b, "--exec", binary.to_str().unwrap(), "--grant"]);
    assert_eq!(stdout(&out), format!("added     demo.cargo_check\ngranted in {b}/policy.caps:\n  exec = true\n"));
    let tools = read_json(&bundle.join("tools.json"));
    let imported = &tools["tools"][0];
    assert_eq!(imported["id"], "demo.cargo_check");
    assert_eq!(imported["description"], "Run cargo check for the given package.\n\nLonger description with details.");
    assert_eq!(
        imported["input_schema"],
        json!({
            "type": "object",
            "properties": {
                "package": {"type": "string", "description": "Package to check."},
                "release": {"type": "boolean", "default": false}
            },
            "required": ["package"],
            "additionalProperties": false
        })
    );
    assert_lints_clean(&space, &bundle);
}
