//! Authoring end to end: `rlp agent scaffold` (flags and the wizard on a real
//! pseudo-terminal), `rlp tools add|import|list`, and `rlp lint --check-tools`.
//! Every test runs the real binary in its own temporary folders and home.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::{Value, json};

const RLP: &str = env!("CARGO_BIN_EXE_rlp");

/// A temporary workspace: `agents/` for bundles, `home/` for RUNLOOP_HOME.
struct Space {
    dir: tempfile::TempDir,
}

impl Space {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("home")).unwrap();
        Space { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn home(&self) -> PathBuf {
        self.path().join("home")
    }

    fn bundle(&self, name: &str) -> PathBuf {
        self.path().join("agents").join(name)
    }

    /// `rlp <args> --home <home>`, run in the workspace, stdin empty.
    fn rlp(&self, args: &[&str]) -> Output {
        Command::new(RLP)
            .args(args)
            .arg("--home")
            .arg(self.home())
            .env_remove("RUNLOOP_HOME")
            .env("NO_COLOR", "1")
            .current_dir(self.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    }

    /// `rlp agent scaffold <name> --non-interactive --root agents <extra…>`.
    fn scaffold_with(&self, name: &str, extra: &[&str]) -> Output {
        let mut args = vec!["agent", "scaffold", name, "--non-interactive", "--root", "agents"];
        args.extend_from_slice(extra);
        self.rlp(&args)
    }

    /// A minimal bundle made by the scaffold, with no tools.
    fn scaffold(&self, name: &str) -> PathBuf {
        let out = self.scaffold_with(name, &[]);
        assert_eq!(code(&out), 0, "{}", text(&out));
        self.bundle(name)
    }

    /// An executable shell script in the workspace.
    fn script(&self, name: &str, body: &str) -> PathBuf {
        let path = self.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn text(out: &Output) -> String {
    format!("status {:?}\n--- stdout\n{}--- stderr\n{}", out.status, stdout(out), stderr(out))
}

/// Every file of a folder and its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                walk(root, &path, out);
            } else {
                out.insert(path.strip_prefix(root).unwrap().to_path_buf(), std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

/// `rlp lint <bundle>` must exit 0 with no finding at all.
fn assert_lints_clean(space: &Space, bundle: &Path) {
    let out = space.rlp(&["lint", bundle.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap(), json!([]), "{}", text(&out));
}

/// The example tool binary (`cargo build --example greet_tool`).
fn greet_tool() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().and_then(Path::parent).unwrap();
        let path = profile_dir.join("examples").join("greet_tool");
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/greet_tool.rs");
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
    let space = Space::new();
    let out = space.scaffold_with("mailer", &["--description", "Sends drafts", "--model", "claude-test-1", "--model-secret", "runloop/model/api_key", "--cap-fs", "/srv/mail,/tmp/out", "--cap-net", "smtp.example.com:587", "--cap-kb-read", "*", "--cap-kb-write", "drafts", "--tool", "id=mail.render;desc=Renders a draft;exec=/usr/local/bin/render;arg=--quiet;input=schema:mail.draft.v1;tag=mail", "--tool", "id=mail.send;desc=Sends a draft;http=POST https://api.mail.example/v1/send/{box};header=Authorization: Bearer ${secret:runloop/mail/key};confirm;tokens=500"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let bundle = space.bundle("mailer");
    for file in
        ["manifest.toml", "policy.caps", "tools.json", "README.md", "bin/.gitkeep", "schemas/mail.draft.v1.json"]
    {
        assert!(bundle.join(file).is_file(), "{file} missing");
    }
    assert_lints_clean(&space, &bundle);
    let out = space.rlp(&["lint", bundle.to_str().unwrap()]);
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
            "requires_confirmation": false,
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
    assert!(manifest.contains("# `name` must equal the bundle's folder name."), "{manifest}");
    assert!(manifest.contains("name = \"mailer\"\nversion = \"0.1.0\"\n"), "{manifest}");
    assert!(manifest.contains("description = \"Sends drafts\"\n"), "{manifest}");
    assert!(manifest.contains("# model: claude-test-1 (secret runloop/model/api_key)"), "{manifest}");
    assert!(manifest.contains("[artifacts.\"bin/.gitkeep\"]"), "{manifest}");
    let readme = read(&bundle.join("README.md"));
    assert!(readme.contains("| model | `claude-test-1` |"), "{readme}");
    assert!(readme.contains("- `mail.send`: Sends a draft (http POST `https://api.mail.example/v1/send/{box}`)"));
    // Digests are correct as written: `rlp digest --check` agrees with lint.
    assert_eq!(read_json(&bundle.join("schemas/mail.draft.v1.json")), json!({"type": "object", "properties": {}}));
}

#[test]
fn flags_default_requires_confirmation_as_the_wizard_does() {
    let space = Space::new();
    let out = space.scaffold_with(
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
    let bundle = space.bundle("demo");
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
        let out = space.rlp(&args);
        assert_eq!(code(&out), 0, "{}", text(&out));
    }
    assert_eq!(confirm(&bundle)[4..], expected(&[("b.web", true), ("b.quiet", false)]));
    let out = space.rlp(&[
        "tools",
        "add",
        b,
        "--id",
        "c",
        "--description",
        "x",
        "--exec",
        "/bin/true",
        "--confirm",
        "--no-confirm",
    ]);
    assert_eq!(code(&out), 2, "{}", text(&out));
}

#[test]
fn scaffold_summary_names_the_files_the_lint_result_and_the_next_steps() {
    let space = Space::new();
    let out = space.scaffold_with("demo", &[]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    insta::assert_snapshot!("scaffold_summary", stdout(&out));
    let bundle = space.bundle("demo");
    assert_eq!(read(&bundle.join("tools.json")), "{\n  \"version\": 1,\n  \"tools\": []\n}\n");
    assert_eq!(read(&bundle.join("policy.caps")).lines().last(), Some("[capabilities]"));
    assert_lints_clean(&space, &bundle);
}

#[test]
fn scaffold_without_a_terminal_fails_fast_and_names_the_flag() {
    let space = Space::new();
    let out = space.rlp(&["agent", "scaffold", "demo", "--root", "agents"]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(stderr(&out).contains("--non-interactive"), "{}", text(&out));
    assert!(!space.path().join("agents").exists(), "nothing is created");
}

#[test]
fn scaffold_refuses_an_existing_folder_unless_forced() {
    let space = Space::new();
    let bundle = space.scaffold("demo");
    std::fs::write(bundle.join("bin/extra"), b"keep me").unwrap();
    let before = snapshot(&space.path().join("agents"));

    let out = space.scaffold_with("demo", &["--description", "New"]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(stderr(&out).contains("already exists; nothing was changed"), "{}", text(&out));
    assert!(stderr(&out).contains("--force"), "{}", text(&out));
    assert_eq!(snapshot(&space.path().join("agents")), before, "nothing changed");

    let out = space.scaffold_with("demo", &["--description", "New", "--force"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(stdout(&out).starts_with("Replaced agents/demo/ (0 tools)\n"), "{}", text(&out));
    assert!(read(&bundle.join("manifest.toml")).contains("description = \"New\"\n"));
    assert!(!bundle.join("bin/extra").exists(), "the old folder is gone");
    let names: Vec<String> = std::fs::read_dir(space.path().join("agents"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["demo"], "no staging folder is left behind");
    assert_lints_clean(&space, &bundle);
}

#[test]
fn scaffold_refuses_bad_answers_before_writing_anything() {
    let space = Space::new();
    for (args, message) in [
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
        let out = space.rlp(&all);
        assert_eq!(code(&out), 2, "{}", text(&out));
        assert!(stderr(&out).contains(message), "{message}\n{}", text(&out));
        assert!(!space.bundle("demo").exists());
    }
    let out = space.rlp(&["agent", "scaffold", "Demo", "--non-interactive"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("`Demo` is not a valid agent name"), "{}", text(&out));
}

/// `rlp agent scaffold demo --non-interactive --root agents <args>`.
fn scaffold_with(space: &Space, args: &[&str]) -> Output {
    let mut all = vec!["agent", "scaffold", "demo", "--non-interactive", "--root", "agents"];
    all.extend(args);
    space.rlp(&all)
}

#[test]
fn scaffold_messages_name_what_they_are_about() {
    let space = Space::new();
    let out = scaffold_with(&space, &["--description", ""]);
    assert_eq!(
        stderr(&out),
        "error: --description: the description is empty; write one line saying what the agent does\n"
    );
    let exec = "{\"id\": \"x\", \"description\": \"X\", \"transport\": {\"kind\": \"exec\", \"command\": \"rel\"}}";
    let out = scaffold_with(&space, &["--tool", "id=a.one;desc=X;exec=/bin/true", "--tool", exec]);
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
        let out = scaffold_with(&space, &["--tool", spec]);
        assert!(stderr(&out).ends_with(&format!("\n  help: {help}\n")), "{}", text(&out));
    }
    assert!(!space.bundle("demo").exists());
}

#[test]
fn scaffold_summary_counts_findings_as_lint_does() {
    let space = Space::new();
    let entry = "{\"id\": \"x\", \"description\": \"X\", \"colour\": 1, \"transport\": {\"kind\": \"exec\", \"command\": \"/bin/true\"}}";
    let out = scaffold_with(&space, &["--tool", entry]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(stdout(&out).contains("\nLint: 0 errors and 1 warning\n"), "{}", text(&out));
}

#[test]
fn descriptions_follow_the_format_a_tools_may_span_lines_the_agents_may_not() {
    let space = Space::new();
    let out = scaffold_with(&space, &["--description", "Sends drafts\nand archives them"]);
    assert_eq!(stderr(&out), "error: --description: the agent description must be one line\n");
    let bundle = space.scaffold("demo");
    let out = space.rlp(&[
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
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert_eq!(read_json(&bundle.join("tools.json"))["tools"][0]["description"], "Line one.\nLine two.");
    assert_lints_clean(&space, &bundle);
}

#[test]
fn a_failed_scaffold_leaves_no_root_folder_behind() {
    let space = Space::new();
    let long = "a".repeat(300);
    let out = space.rlp(&["agent", "scaffold", &long, "--non-interactive", "--root", "new/agents"]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert_eq!(
        stderr(&out),
        "error: the agent name is 300 characters long; at most 64 are allowed (it names the bundle's folder and archive)\n  \
         help: e.g. `rlp agent scaffold mailer`\n"
    );
    let relative = r#"{"id": "x", "description": "X", "transport": {"kind": "exec", "command": "rel"}}"#;
    let out =
        space.rlp(&["agent", "scaffold", "demo", "--non-interactive", "--root", "new/agents", "--tool", relative]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(stderr(&out).contains("command `rel` is not an absolute path"), "{}", text(&out));
    assert!(!space.path().join("new").exists(), "nothing is created");
}

/// The wizard on a real pseudo-terminal: one exec tool and one http tool,
/// with a relative command and a placeholder host refused and asked again.
#[test]
fn wizard_on_a_terminal_adds_an_exec_and_an_http_tool() {
    let space = Space::new();
    let mut command = Command::new(RLP);
    command
        .args(["agent", "scaffold", "wiz", "--root", "agents", "--color", "never", "--home"])
        .arg(space.home())
        .current_dir(space.path())
        .env("TERM", "dumb")
        .env_remove("RUNLOOP_HOME");
    let mut p = rexpect::session::spawn_command(command, Some(30_000)).unwrap();
    let mut answer = |prompt: &str, line: &str| {
        p.exp_string(prompt).unwrap_or_else(|e| panic!("waiting for `{prompt}`: {e}"));
        p.send_line(line).unwrap();
    };
    answer("Description", "");
    answer("Model id", "claude-test-1");
    answer("Secret holding the model's API key", "runloop/model/api_key");
    answer("Directories it may read and write", "");
    answer("Hosts it may reach", "");
    answer("Knowledge-base domains it may read", "");
    answer("Knowledge-base domains it may write", "");
    answer("May it run exec tools", "n");
    answer("Add a tool?", "y");
    answer("Tool id", "wiz.echo");
    answer("What it does", "Echoes its input");
    answer("How is it reached?", "");
    answer("Absolute path of the binary", "bin/echo");
    answer("command `bin/echo` is not an absolute path", "/bin/echo");
    answer("Arguments after the blob path", "");
    answer("Input schema", "");
    answer("Result schema", "");
    answer("Secrets it uses", "");
    answer("Other capabilities it needs", "");
    answer("Ask an operator to approve each call", "n");
    answer("Budget: tokens per call", "");
    answer("Budget: US dollars per call", "");
    answer("Tags for traces", "demo");
    answer("Add this tool?", "");
    answer("Add a tool?", "y");
    answer("Tool id", "wiz.echo");
    answer("a tool `wiz.echo` already exists", "wiz.fetch");
    answer("What it does", "Fetches an item");
    answer("How is it reached?", "j");
    answer("HTTP method", "");
    answer("URL template", "https://{host}/items");
    answer("scheme, host or port", "https://api.example.com/items/{id}");
    answer("Header", "Authorization: Bearer ${secret:runloop/api/token}");
    answer("Header", "");
    answer("Input schema", "");
    answer("Result schema", "");
    answer("Secrets it uses", "");
    answer("Other capabilities it needs", "");
    answer("Ask an operator to approve each call", "");
    answer("Budget: tokens per call", "100");
    answer("Budget: US dollars per call", "0.25");
    answer("Tags for traces", "");
    answer("Add this tool?", "");
    answer("Add a tool?", "n");
    answer("Create agents/wiz?", "");
    p.exp_string("Created agents/wiz/ (2 tools)").unwrap();
    p.exp_string("Lint: no problems").unwrap();
    p.exp_eof().unwrap();

    let bundle = space.bundle("wiz");
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
    let space = Space::new();
    let bundle = space.scaffold("demo");
    let mut command = Command::new(RLP);
    command
        .args(["tools", "add", "agents/demo", "--exec", "/bin/true", "--grant", "--color", "never", "--home"])
        .arg(space.home())
        .current_dir(space.path())
        .env("TERM", "dumb")
        .env_remove("RUNLOOP_HOME");
    let mut p = rexpect::session::spawn_command(command, Some(30_000)).unwrap();
    let mut answer = |prompt: &str, line: &str| {
        p.exp_string(prompt).unwrap_or_else(|e| panic!("waiting for `{prompt}`: {e}"));
        p.send_line(line).unwrap();
    };
    answer("Tool id", "Not.Valid");
    answer("is not a valid tool id", "demo.true");
    answer("What it does", "Always succeeds");
    answer("Input schema", "{\"type\": 5}");
    answer("not a valid JSON Schema", "");
    answer("Result schema", "");
    answer("Secrets it uses", "");
    answer("Other capabilities it needs", "");
    answer("Ask an operator to approve each call", "");
    answer("Budget: tokens per call", "");
    answer("Budget: US dollars per call", "");
    answer("Tags for traces", "");
    p.exp_string("added tool `demo.true` to agents/demo/tools.json").unwrap();
    p.exp_string("exec = true").unwrap();
    p.exp_eof().unwrap();
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
    let space = Space::new();
    let bundle = space.scaffold("demo");
    let b = bundle.to_str().unwrap();
    let out = space.rlp(&["tools", "add", b, "--id", "demo.one", "--description", "First", "--exec", "/usr/bin/true"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert_eq!(stdout(&out), format!("added tool `demo.one` to {b}/tools.json\n"));
    assert_eq!(
        stderr(&out),
        format!(
            "warning: {b}/policy.caps does not grant `exec`: the tool is not exposed until it does, and `rlp lint` reports it\n  \
             add under [capabilities] in {b}/policy.caps (merging lists that share a key):\n    exec = true\n  \
             then run `rlp digest {b}`; or pass --grant to `rlp tools add` to do both\n"
        )
    );
    let out = space.rlp(&["lint", b]);
    assert_eq!(code(&out), 1);
    assert!(stdout(&out).contains("error[RLP401]"), "{}", text(&out));
    assert!(stdout(&out).contains("help: add `exec = true` under [capabilities] in policy.caps"), "{}", text(&out));

    // A comment of the author's survives the edit.
    let policy = bundle.join("policy.caps");
    std::fs::write(&policy, read(&policy).replace("[capabilities]\n", "[capabilities]\ntime = true   # keep me\n"))
        .unwrap();
    let out = space.rlp(&[
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
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out));
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
    let space = Space::new();
    let bundle = space.scaffold("demo");
    let b = bundle.to_str().unwrap();
    let out = space.rlp(&[
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
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out));
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
    let space = Space::new();
    let bundle = space.scaffold("demo");
    let b = bundle.to_str().unwrap();
    let out = space.rlp(&["tools", "add", b, "--id", "a.b", "--description", "A", "--exec", "/bin/true", "--grant"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
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
        let out = space.rlp(&all);
        assert_eq!(code(&out), 2, "{message}\n{}", text(&out));
        assert!(stderr(&out).contains(message), "{message}\n{}", text(&out));
        assert_eq!(snapshot(&bundle), before, "{message}: nothing changed");
    }
    // A URL placeholder the given input schema lacks: lint's RLP208, refused up front.
    let out = space.rlp(&[
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
    ]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(stderr(&out).contains("error[RLP208] tool `c`, transport/url: URL placeholder `{item}`"), "{}", text(&out));
    assert_eq!(snapshot(&bundle), before);
}

#[test]
fn tools_add_names_a_byte_order_mark_in_tools_json() {
    let space = Space::new();
    let bundle = space.scaffold("demo");
    let tools = bundle.join("tools.json");
    std::fs::write(&tools, format!("\u{feff}{}", read(&tools))).unwrap();
    let before = snapshot(&bundle);
    let out = space.rlp(&["tools", "add", "agents/demo", "--id", "a.b", "--description", "A", "--exec", "/bin/true"]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert_eq!(
        stderr(&out),
        "error: agents/demo/tools.json cannot be edited: the file starts with a UTF-8 byte-order mark (U+FEFF), which JSON does not allow\n  \
         help: save the file as UTF-8 without a byte-order mark, or delete its first 3 bytes: `sed -i '1s/^\\xEF\\xBB\\xBF//' agents/demo/tools.json`\n"
    );
    assert_eq!(snapshot(&bundle), before);
}

#[test]
fn tools_add_and_import_keep_crlf_line_endings() {
    let space = Space::new();
    let bundle = space.scaffold("demo");
    let b = bundle.to_str().unwrap();
    for file in ["policy.caps", "tools.json"] {
        let path = bundle.join(file);
        std::fs::write(&path, read(&path).replace('\n', "\r\n")).unwrap();
    }
    assert_eq!(code(&space.rlp(&["digest", b])), 0);
    let out = space.rlp(&["tools", "add", b, "--id", "a.b", "--description", "A", "--exec", "/bin/true", "--grant"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let tool = greet_tool().to_str().unwrap();
    let out = space.rlp(&["tools", "import", b, "--exec", tool]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    for (file, added) in [("policy.caps", "exec = true\r\n"), ("tools.json", "\"id\": \"demo.greet\",\r\n")] {
        let written = read(&bundle.join(file));
        assert!(written.contains(added), "{file}: {written:?}");
        assert_eq!(written.matches('\n').count(), written.matches("\r\n").count(), "{file} keeps CRLF: {written:?}");
    }
    assert_lints_clean(&space, &bundle);
}

// ---------------------------------------------------------------- tools import

#[test]
fn tools_import_warns_when_it_changes_a_tools_transport() {
    let space = Space::new();
    let out =
        space.scaffold_with("demo", &["--tool", "id=demo.greet;desc=Mine;http=GET https://api.mine.example/g;confirm"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let b = space.bundle("demo");
    let out = space.rlp(&["tools", "import", b.to_str().unwrap(), "--exec", greet_tool().to_str().unwrap(), "--grant"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(stdout(&out).contains("updated   demo.greet\n"), "{}", text(&out));
    assert!(
        stderr(&out).contains("warning: `demo.greet` was an http tool; the binary's answer makes it an exec tool"),
        "{}",
        text(&out)
    );
}

#[test]
fn tools_import_adds_the_binarys_tools_and_reports_each() {
    let space = Space::new();
    let bundle = space.scaffold("demo");
    let b = bundle.to_str().unwrap();
    let tool = greet_tool().to_str().unwrap();
    let out = space.rlp(&["tools", "import", b, "--exec", tool, "--grant"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert_eq!(
        stdout(&out),
        format!("added     demo.greet\nadded     demo.word_count\ngranted in {b}/policy.caps:\n  exec = true\n")
    );
    assert_lints_clean(&space, &bundle);
    let tools = read_json(&bundle.join("tools.json"));
    assert_eq!(tools["tools"][0]["id"], "demo.greet");
    assert_eq!(tools["tools"][0]["transport"], json!({"kind": "exec", "command": tool}));
    assert_eq!(tools["tools"][1]["input_schema"]["required"], json!(["text"]));

    // A local change to a field the binary does not state is kept; one it
    // states is drift, and a new import puts it back.
    let path = bundle.join("tools.json");
    let mut edited = tools.clone();
    edited["tools"][0]["requires_confirmation"] = json!(true);
    edited["tools"][1]["description"] = json!("Counts words, roughly.");
    std::fs::write(&path, serde_json::to_string_pretty(&edited).unwrap() + "\n").unwrap();
    assert_eq!(code(&space.rlp(&["digest", b])), 0);
    let out = space.rlp(&["lint", b, "--check-tools"]);
    assert_eq!(code(&out), 1, "{}", text(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "drift: {b}: tool `demo.word_count`: `description` differs from what {tool} describes\n1 bundle checked: 0 errors, 0 warnings and 1 drift\n"
        )
    );
    let out = space.rlp(&["tools", "import", b, "--exec", tool]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert_eq!(stdout(&out), "unchanged demo.greet\nupdated   demo.word_count\n");
    let tools = read_json(&path);
    assert_eq!(tools["tools"][0]["requires_confirmation"], true);
    assert_eq!(tools["tools"][1]["description"], "Counts the words of a text.");
    let out = space.rlp(&["lint", b, "--check-tools"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert_eq!(stdout(&out), "1 bundle checked: no problems\n");
}

#[test]
fn lint_check_tools_counts_drift_escapes_it_and_names_binaries_it_could_not_ask() {
    let space = Space::new();
    let bundle = space.scaffold("demo");
    let b = bundle.to_str().unwrap();
    let liar = space.script("liar.sh", r#"printf '%s\n' '{"tools": [{"id": "x\u001b[2Jy", "description": "d"}]}'"#);
    let plain = space.path().join("plain.txt");
    std::fs::write(&plain, "not a program\n").unwrap();
    let (liar, plain) = (liar.to_str().unwrap(), plain.to_str().unwrap());
    for (id, command) in
        [("a.liar", liar), ("a.gone", "/nonexistent/tool"), ("a.plain", plain), ("a.false", "/bin/false")]
    {
        let out = space.rlp(&["tools", "add", b, "--id", id, "--description", "D", "--exec", command, "--grant"]);
        assert_eq!(code(&out), 0, "{}", text(&out));
    }
    let out = space.rlp(&["lint", b, "--check-tools"]);
    assert_eq!(code(&out), 1, "{}", text(&out));
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
    let out = space.rlp(&["lint", b, "--check-tools", "--format", "json"]);
    assert_eq!(code(&out), 1, "{}", text(&out));
    assert_eq!(stdout(&out), "[]\n");
    assert_eq!(stderr(&out), report);
}

#[test]
fn tools_import_refuses_binaries_that_do_not_answer_and_changes_nothing() {
    let space = Space::new();
    let bundle = space.scaffold("demo");
    let b = bundle.to_str().unwrap();
    let before = snapshot(&bundle);
    let garbage = space.script("garbage.sh", "echo 'this is not json'");
    let sleeper_pid = space.path().join("sleeper.pid");
    let sleeper = space.script("sleeper.sh", &format!("echo $$ > {}\nexec sleep 600", sleeper_pid.display()));
    let shape = space.script("shape.sh", "echo '{\"tools\": 5}'");
    let invalid = space.script("invalid.sh", "echo '{\"tools\": [{\"id\": \"Bad Id\", \"description\": \"x\", \"input_schema\": {}, \"result_schema\": {}}]}'");
    for (command, extra, why) in [
        (PathBuf::from("/bin/false"), None, "it exited with status 1"),
        (garbage, None, "it printed something that is not JSON: this is not json"),
        (sleeper, Some("500"), "it did not answer within 500 ms and was killed"),
        (shape, None, "its answer has no `tools` list"),
        (invalid, None, "tool id `Bad Id` does not match"),
    ] {
        let mut args = vec!["tools", "import", b, "--exec", command.to_str().unwrap()];
        if let Some(ms) = extra {
            args.extend(["--timeout-ms", ms]);
        }
        let out = space.rlp(&args);
        assert_eq!(code(&out), 1, "{why}\n{}", text(&out));
        let err = stderr(&out);
        assert!(err.contains(why), "{why}\n{}", text(&out));
        if !why.contains("does not match") {
            assert!(err.contains("did not answer the `schema` action"), "{}", text(&out));
            assert!(err.contains(&format!("rlp tools add {b} --id <id>")), "{}", text(&out));
        }
        assert!(err.contains("is unchanged"), "{}", text(&out));
        assert_eq!(snapshot(&bundle), before, "{why}: bundle unchanged");
    }
    let pid = std::fs::read_to_string(&sleeper_pid).unwrap();
    assert!(!common::process_is_running(pid.trim()), "the tool that did not answer is still running");
    let out = space.rlp(&["tools", "import", b, "--exec", "greet_tool"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("--exec `greet_tool` is not an absolute path"), "{}", text(&out));
}

// ---------------------------------------------------------------- tools list

#[test]
fn tools_list_shows_transport_needs_and_exposure() {
    let space = Space::new();
    let bundle = space.scaffold("demo");
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
        let out = space.rlp(&all);
        assert_eq!(code(&out), 0, "{}", text(&out));
    }
    let out = space.rlp(&["tools", "list", "agents/demo"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    insta::assert_snapshot!("tools_list_human", stdout(&out));

    let out = space.rlp(&["tools", "list", "agents/demo", "--format", "json"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let listing: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        listing["tools"][1],
        json!({
            "id": "mail.send",
            "transport": {"kind": "http", "method": "POST", "url": "https://api.mail.example/send", "host": "api.mail.example"},
            "capabilities": ["net:api.mail.example", "secrets:runloop/mail/key"],
            "secrets": ["runloop/mail/key"],
            "requires_confirmation": true,
            "exposed": false,
            "missing": ["net:api.mail.example", "secrets:runloop/mail/key"]
        })
    );
    assert_eq!(listing["tools"][0]["exposed"], true);
    assert_eq!(listing["override"], Value::Null);

    // An operator override that revokes exec hides the exec tools.
    let overrides = space.home().join("caps/overrides");
    std::fs::create_dir_all(&overrides).unwrap();
    std::fs::write(overrides.join("demo.toml"), "[capabilities]\nexec = false\n").unwrap();
    let out = space.rlp(&["tools", "list", "agents/demo", "--format", "json"]);
    let listing: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listing["tools"][0]["missing"], json!(["exec"]));
    assert!(listing["override"].as_str().unwrap().ends_with("caps/overrides/demo.toml"));
    let out = space.rlp(&["tools", "list", "agents/demo"]);
    assert!(stdout(&out).contains("no: missing exec"), "{}", text(&out));
    assert!(stdout(&out).ends_with("caps/overrides/demo.toml\n"), "{}", text(&out));

    std::fs::write(overrides.join("demo.toml"), "[capabilities]\nexec = \"no\"\n").unwrap();
    let out = space.rlp(&["tools", "list", "agents/demo"]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(stderr(&out).contains("is not a valid override"), "{}", text(&out));
}

// ---------------------------------------------------------------- duplicate keys

/// JSON with a key given twice is refused wherever authoring reads it, as lint
/// refuses it (RLP002), instead of silently keeping the last value.
#[test]
fn json_with_a_duplicate_key_is_refused_everywhere() {
    let space = Space::new();
    let bundle = space.scaffold("demo");
    let b = bundle.to_str().unwrap();
    let tools = bundle.join("tools.json");
    std::fs::write(&tools, "{\n  \"version\": 1,\n  \"version\": 1,\n  \"tools\": []\n}\n").unwrap();
    assert_eq!(code(&space.rlp(&["digest", b])), 0);
    let before = snapshot(&bundle);
    let add = ["tools", "add", b, "--id", "a.b", "--description", "A", "--exec", "/bin/true"];
    let answer = space.script("answer.sh", "echo '{\"tools\": []}'");
    for args in [&add[..], &["tools", "import", b, "--exec", answer.to_str().unwrap()][..]] {
        let out = space.rlp(args);
        assert_eq!(code(&out), 2, "{}", text(&out));
        assert_eq!(
            stderr(&out),
            format!(
                "error: {b}/tools.json cannot be edited: duplicate key `version` at line 3 column 11 (RLP002: JSON readers disagree on which of the two values wins)\n  help: fix it first; `rlp lint {b}` shows where\n"
            )
        );
        assert_eq!(snapshot(&bundle), before);
    }

    std::fs::write(&tools, "{\"version\": 1, \"tools\": []}\n").unwrap();
    assert_eq!(code(&space.rlp(&["digest", b])), 0);
    let before = snapshot(&bundle);
    let mut schema = add.to_vec();
    schema.extend(["--input-schema", "{\"type\": \"object\", \"type\": \"string\"}"]);
    let out = space.rlp(&schema);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(
        stderr(&out).contains("--input-schema: duplicate key `type` at line 1 column 25 (RLP002"),
        "{}",
        text(&out)
    );
    let twice =
        space.script("twice.sh", "echo '{\"tools\": [{\"id\": \"a.b\", \"id\": \"c.d\", \"description\": \"x\"}]}'");
    let out = space.rlp(&["tools", "import", b, "--exec", twice.to_str().unwrap()]);
    assert_eq!(code(&out), 1, "{}", text(&out));
    assert!(
        stderr(&out).contains("its answer is ambiguous: duplicate key `id` at line 1 column 29 (RLP002"),
        "{}",
        text(&out)
    );
    assert_eq!(snapshot(&bundle), before);

    let spec =
        r#"{"id": "a.b", "id": "c.d", "description": "x", "transport": {"kind": "exec", "command": "/bin/true"}}"#;
    let out = space.scaffold_with("other", &["--tool", spec]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(
        stderr(&out).contains("the tool JSON is refused: duplicate key `id` at line 1 column 18 (RLP002"),
        "{}",
        text(&out)
    );
    assert!(!space.bundle("other").exists());
}

#[test]
fn tools_list_escapes_control_characters() {
    let space = Space::new();
    let bundle = space.scaffold("demo");
    let tools = json!({"version": 1, "tools": [{
        "id": "demo.run", "description": "Runs",
        "transport": {"kind": "exec", "command": "/usr/bin/x\u{1b}[2J\ny", "args": ["\t-v"]},
        "input_schema": {}, "result_schema": {}, "requires_confirmation": false,
    }]});
    std::fs::write(bundle.join("tools.json"), serde_json::to_string_pretty(&tools).unwrap()).unwrap();
    let out = space.rlp(&["tools", "list", "agents/demo"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(!stdout(&out).contains(['\u{1b}', '\t']), "{}", text(&out));
    insta::assert_snapshot!("tools_list_control_characters", stdout(&out));
}

// ------------------------------------------- tools import: the binary never stays

/// A `schema` binary that never answers: it ignores SIGTERM, starts a child
/// in its process group and one in a session of its own (which holds its
/// stdout), writes "<own pid> <group child> <session child>" to `pids`, and
/// sleeps.
fn stubborn_binary(space: &Space, pids: &Path) -> PathBuf {
    space.script(
        "stubborn.sh",
        &format!(
            "trap '' TERM\nsleep 600 &\ngroup=$!\nsetsid sleep 600 &\necho \"$$ $group $!\" > {p}.tmp && mv {p}.tmp {p}\nsleep 600",
            p = pids.display()
        ),
    )
}

/// The three pids `stubborn_binary` wrote, once it wrote them.
fn stubborn_pids(pids: &Path) -> Vec<String> {
    let deadline = std::time::Instant::now() + common::HANG_GUARD;
    while !pids.exists() {
        assert!(std::time::Instant::now() < deadline, "the binary never wrote {}", pids.display());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    read(pids).split_whitespace().map(str::to_string).collect()
}

/// Waits (within the hang guard) until process `pid` is gone.
fn assert_ends(pid: &str, what: &str) {
    let deadline = std::time::Instant::now() + common::HANG_GUARD;
    while common::process_is_running(pid) {
        assert!(std::time::Instant::now() < deadline, "{what} {pid} is still running");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Kills what a test left running (on purpose, or because it failed).
fn kill_left(pid: &str) {
    if common::process_is_running(pid) {
        unsafe {
            libc::kill(pid.parse().unwrap(), libc::SIGKILL);
        }
    }
}

#[test]
fn tools_import_kills_a_binary_that_does_not_answer_with_everything_it_started() {
    let space = Space::new();
    let bundle = space.scaffold("demo");
    let b = bundle.to_str().unwrap();
    let pids = space.path().join("pids");
    let stubborn = stubborn_binary(&space, &pids);
    let out = space.rlp(&["tools", "import", b, "--exec", stubborn.to_str().unwrap(), "--timeout-ms", "500"]);
    assert_eq!(code(&out), 1, "{}", text(&out));
    assert!(stderr(&out).contains("it did not answer within 500 ms and was killed"), "{}", text(&out));
    // Killed by the time rlp returns: the binary that ignores SIGTERM, its
    // child, and the child that left its group and session.
    let running: Vec<_> = stubborn_pids(&pids).into_iter().filter(|pid| common::process_is_running(pid)).collect();
    running.iter().for_each(|pid| kill_left(pid));
    assert!(running.is_empty(), "still running after the import: {running:?}");
}

#[test]
fn tools_import_never_leaves_its_binary_running_when_rlp_is_interrupted_or_killed() {
    use std::os::unix::process::ExitStatusExt;
    for signal in [libc::SIGTERM, libc::SIGKILL] {
        let space = Space::new();
        let bundle = space.scaffold("demo");
        let pids = space.path().join("pids");
        let stubborn = stubborn_binary(&space, &pids);
        let mut rlp = Command::new(RLP)
            .args(["tools", "import", bundle.to_str().unwrap(), "--exec", stubborn.to_str().unwrap()])
            .arg("--home")
            .arg(space.home())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let found = stubborn_pids(&pids);
        unsafe {
            libc::kill(rlp.id() as i32, signal);
        }
        assert_eq!(rlp.wait().unwrap().signal(), Some(signal));
        // Interrupted, rlp kills the binary's process group; SIGKILLed, it
        // runs nothing, and the kernel kills the binary it started.
        let ended = if signal == libc::SIGKILL { &found[..1] } else { &found[..2] };
        for pid in ended {
            assert_ends(pid, &format!("signal {signal}: the binary or its child"));
        }
        found.iter().for_each(|pid| kill_left(pid));
    }
}
