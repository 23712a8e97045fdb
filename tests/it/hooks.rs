//! After-call hooks (config.toml `[[hooks.after_call]]`, docs/runtime.md):
//! the operator's commands that see a result before the caller, recorded
//! frame by frame so that replay shows what the caller saw.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::bundle::{self, tool};
use crate::support::ledger::kinds;
use crate::support::mcp::{self, call, scenario, stdio};
use crate::support::output::{stderr, stdout, stdout_json};

/// The hook fixture: what it does is its first argument (see the script).
const HOOK: &str = r#"
import json, os, re, socket, sys
blob = json.load(open(sys.argv[1]))
mode = sys.argv[2]
if mode == "redact":
    found = []
    def scrub(value):
        if isinstance(value, str):
            hits = re.findall(r"[\w.]+@[\w.]+", value)
            found.extend(hits)
            return re.sub(r"[\w.]+@[\w.]+", "[redacted]", value)
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [scrub(v) for v in value]
        return value
    result = scrub(blob["result"])
    print(json.dumps({"result": result, "annotations": ["redacted %d address(es)" % len(found)]}))
elif mode == "note":
    print(json.dumps({"annotations": ["seen by %s after: %s" % (blob["hook"], ", ".join(blob["annotations"]))]}))
elif mode == "withhold":
    print(json.dumps({"withhold": "the result names a customer"}))
elif mode == "fail":
    sys.stderr.write("redaction rules are missing\n")
    sys.exit(3)
elif mode == "bad":
    print(json.dumps({"result": {"from": 7}}))
elif mode == "deep":
    print('{"result": {"from": "x", "deep": ' + "[" * 110 + "]" * 110 + "}}")
elif mode == "huge":
    sys.stdout.write(" " * (17 << 20))
elif mode == "probe":
    tried = []
    try:
        open(sys.argv[3], "w").write("escaped")
        tried.append("wrote")
    except OSError as e:
        tried.append("write refused")
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[4])), timeout=2)
        tried.append("connected")
    except OSError:
        tried.append("connect refused")
    print(json.dumps({"annotations": tried}))
"#;

/// A bundle `inbox` with `mail.read` (an exec tool answering a message
/// from ada@example.com) and `calendar.list`; the hook fixture at
/// `hook.py`.
fn setup(td: &TestDir) -> (PathBuf, PathBuf) {
    let read = td.script("read.sh", r#"echo '{"from": "ada@example.com", "subject": "lunch"}'"#);
    let list = td.script("list.sh", r#"echo '{"events": 2}'"#);
    let mut mail = tool("mail.read", bundle::exec(read.to_str().unwrap(), &[]));
    mail["result_schema"] = json!({"type": "object", "properties": {"from": {"type": "string"}}, "required": ["from"]});
    let calendar = tool("calendar.list", bundle::exec(list.to_str().unwrap(), &[]));
    let inbox = td.bundle("inbox", json!([mail, calendar]), "[capabilities]\nexec = true\n");
    let hook = td.join("hook.py");
    std::fs::write(&hook, format!("#!/usr/bin/env python3\n{HOOK}")).unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    (inbox, hook)
}

/// A `[[hooks.after_call]]` table.
fn hook_table(name: &str, hook: &Path, args: &[&str], extra: &str) -> String {
    let command: Vec<String> =
        std::iter::once(hook.display().to_string()).chain(args.iter().map(|a| a.to_string())).collect();
    format!("[[hooks.after_call]]\nname = \"{name}\"\ncommand = {}\n{extra}\n", json!(command))
}

#[test]
fn hooks_redact_and_annotate_and_replay_shows_what_the_caller_saw() {
    let td = TestDir::new();
    let (inbox, hook) = setup(&td);
    td.write_config(&format!(
        "{}{}",
        hook_table("redact", &hook, &["redact"], "tools = [\"mail.*\"]"),
        hook_table("audit", &hook, &["note"], "")
    ));

    let output = td.call(&inbox, "mail.read", json!({})).args(["--format", "json"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let doc = stdout_json(&output);
    assert_eq!(doc["result"], json!({"from": "[redacted]", "subject": "lunch"}));
    assert_eq!(
        doc["annotations"],
        json!([
            {"hook": "redact", "text": "redacted 1 address(es)"},
            {"hook": "audit", "text": "seen by audit after: redacted 1 address(es)"}
        ])
    );
    // Each hook's work, then the result as the tool returned it.
    let events = td.events();
    assert_eq!(kinds(&events), ["cap.audit", "tool.call", "tool.hook", "tool.hook", "tool.result"]);
    let hooks = td.payloads("tool.hook");
    assert_eq!(
        (&hooks[0]["hook"], &hooks[0]["effect"], &hooks[0]["result"]),
        (&json!("redact"), &json!("replaced"), &json!({"from": "[redacted]", "subject": "lunch"}))
    );
    assert_eq!(hooks[0]["command"], json!([hook.display().to_string(), "redact"]));
    assert_eq!((&hooks[1]["effect"], hooks[1].get("result")), (&json!("annotated"), None));
    assert_eq!(td.payloads("tool.result")[0]["result"], json!({"from": "ada@example.com", "subject": "lunch"}));

    // The human form: the result on stdout, the notes on stderr.
    let output = td.call(&inbox, "mail.read", json!({})).output().unwrap();
    assert_eq!(stdout_json(&output), json!({"from": "[redacted]", "subject": "lunch"}));
    assert_eq!(
        stderr(&output).lines().filter(|l| l.starts_with("note (hook")).collect::<Vec<_>>(),
        [
            "note (hook `redact`): redacted 1 address(es)",
            "note (hook `audit`): seen by audit after: redacted 1 address(es)"
        ]
    );

    // A tool the pattern leaves out sees only the hook for every tool.
    let output = td.call(&inbox, "calendar.list", json!({})).args(["--format", "json"]).output().unwrap();
    assert_eq!(stdout_json(&output)["result"], json!({"events": 2}));
    assert_eq!(td.payloads("tool.hook").last().unwrap()["hook"], "audit");

    // trace show says what each hook did.
    let trace = doc["trace_id"].as_str().unwrap();
    let shown = td.rlp().args(["trace", "show", trace]).output().unwrap();
    let text = stdout(&shown);
    assert!(
        text.contains(r#"hook redact replaced the result → {"from":"[redacted]","subject":"lunch"}; annotated: "redacted 1 address(es)""#),
        "{text}"
    );
    assert!(text.contains(r#"hook audit annotated: "seen by audit after: redacted 1 address(es)""#), "{text}");

    // Strict replay answers with what the caller saw; live replay runs the
    // hooks again and finds the same.
    for mode in ["strict", "live"] {
        let output = td
            .rlp()
            .args(["replay", trace, "--bundle"])
            .arg(&inbox)
            .args(["--mode", mode, "--format", "json"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{mode}: {}{}", stdout(&output), stderr(&output));
        let report = stdout_json(&output);
        let call = &report["calls"][0];
        assert_eq!(call["output"]["result"], json!({"from": "[redacted]", "subject": "lunch"}), "{mode}: {report}");
        assert_eq!(call["output"]["annotations"][0], "redacted 1 address(es)", "{mode}");
    }

    // Without the hooks, live replay sees the result change.
    td.write_config("");
    let output = td
        .rlp()
        .args(["replay", trace, "--bundle"])
        .arg(&inbox)
        .args(["--mode", "live", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let report = stdout_json(&output);
    let paths: Vec<&str> =
        report["divergences"][0]["changes"].as_array().unwrap().iter().map(|c| c["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/from", "/annotations"], "{report}");
}

#[test]
fn a_hook_that_withholds_or_fails_keeps_the_result_from_the_caller() {
    let td = TestDir::new();
    let (inbox, hook) = setup(&td);

    // A hook's decision: refused by policy (exit 3).
    let config = td.write_config(&hook_table("dlp", &hook, &["withhold"], ""));
    let output = td.call(&inbox, "mail.read", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert_eq!(stdout(&output), "");
    assert!(
        stderr(&output).contains(
            "\nerror: the result of `mail.read` was withheld by the hook `dlp`: the result names a customer\n"
        ),
        "{}",
        stderr(&output)
    );
    assert!(!stdout(&output).contains("ada@"));
    let hooks = td.payloads("tool.hook");
    assert_eq!((&hooks[0]["effect"], &hooks[0]["reason"]), (&json!("withheld"), &json!("the result names a customer")));

    // A failed hook withholds the result by default (exit 1) ...
    std::fs::write(&config, hook_table("redact", &hook, &["fail"], "")).unwrap();
    let output = td.call(&inbox, "mail.read", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let text = stderr(&output);
    assert!(
        text.contains("\nerror: the result of `mail.read` was withheld: the hook `redact` failed: it exited with exit status: 3; stderr: redaction rules are missing\n"),
        "{text}"
    );
    assert!(text.contains(&format!("help: fix the hook declared in {}", config.display())), "{text}");
    assert!(!text.contains("ada@"));
    assert_eq!(td.payloads("tool.hook").last().unwrap()["effect"], "failed_withheld");

    // ... and so does a replaced result its schema refuses ...
    std::fs::write(&config, hook_table("redact", &hook, &["bad"], "")).unwrap();
    let output = td.call(&inbox, "mail.read", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("the result it gave does not match the tool's result_schema"),
        "{}",
        stderr(&output)
    );

    // ... or one nested past what the ledger reads back, or output past 16 MiB.
    for (mode, said) in [
        ("deep", "what it gave nests arrays and objects 111 levels deep; rlp records at most 100"),
        ("huge", "it printed more than 16777216 bytes"),
    ] {
        std::fs::write(&config, hook_table("redact", &hook, &[mode], "")).unwrap();
        let output = td.call(&inbox, "mail.read", json!({})).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{mode}: {}", stderr(&output));
        assert!(stderr(&output).contains(said), "{mode}: {}", stderr(&output));
        assert!(!stdout(&output).contains("ada@"));
    }
    td.rlp().args(["trace", "verify"]).assert().code(0);

    // ... unless the operator lets results through.
    std::fs::write(&config, hook_table("redact", &hook, &["fail"], "on_failure = \"pass\"")).unwrap();
    let output = td.call(&inbox, "mail.read", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout_json(&output)["from"], "ada@example.com");
    let last = td.payloads("tool.hook").last().unwrap().clone();
    assert_eq!(last["effect"], "failed_passed");

    // Strict replay of the withheld call answers with the same error.
    let output = td
        .rlp()
        .args(["replay", &first_trace(&td), "--bundle"])
        .arg(&inbox)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let report = stdout_json(&output);
    assert_eq!(
        report["calls"][0]["output"]["error"]["message"],
        "the result of `mail.read` was withheld by the hook `dlp`: the result names a customer",
        "{report}"
    );

    // A hook others could replace never runs: it is a failure, and withholds.
    let shared = td.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::copy(&hook, shared.join("hook.py")).unwrap();
    std::fs::set_permissions(&shared, std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    std::fs::write(&config, hook_table("dlp", &shared.join("hook.py"), &["note"], "")).unwrap();
    let output = td.call(&inbox, "mail.read", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains(&format!("{} is writable by group or others (mode 1777)", shared.display())),
        "{}",
        stderr(&output)
    );

    // A config file with a bad hook stops every command that reads it.
    std::fs::write(&config, "[[hooks.after_call]]\nname = \"x\"\ncommand = [\"redact\"]\n").unwrap();
    let output = td.call(&inbox, "mail.read", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("`hooks.after_call[0]` runs `redact`, which is not a path"),
        "{}",
        stderr(&output)
    );
}

/// The trace of the first frame of the default ledger.
fn first_trace(td: &TestDir) -> String {
    let provenance: Value = serde_json::from_str(&td.events()[0].provenance_json).unwrap();
    provenance["trace_id"].as_str().unwrap().to_string()
}

#[test]
fn a_hook_runs_in_the_sandbox_with_nothing_granted() {
    let td = TestDir::new();
    let (inbox, hook) = setup(&td);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let target = td.join("escaped.txt");
    td.write_config(&hook_table("probe", &hook, &["probe", target.to_str().unwrap(), &port], ""));
    let output = td.call(&inbox, "mail.read", json!({})).args(["--format", "json"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let doc = stdout_json(&output);
    let notes: Vec<&str> = doc["annotations"].as_array().unwrap().iter().map(|n| n["text"].as_str().unwrap()).collect();
    assert_eq!(notes, ["write refused", "connect refused"]);
    assert!(!target.exists());
}

#[test]
fn an_mcp_client_of_rlp_serve_gets_the_hooked_result_and_the_notes() {
    let td = TestDir::new();
    let (inbox, hook) = setup(&td);
    td.write_config(&hook_table("redact", &hook, &["redact"], ""));
    let report = mcp::drive(&scenario(stdio(&td, &inbox, &[]), "legacy", None, json!([call("mail.read", json!({}))])));
    let result = &report["steps"][0]["result"];
    assert_eq!(result["isError"], false, "{report}");
    assert_eq!(result["structuredContent"], json!({"from": "[redacted]", "subject": "lunch"}));
    let texts: Vec<&str> =
        result["content"].as_array().unwrap().iter().map(|b| b["text"].as_str().unwrap_or_default()).collect();
    assert_eq!(texts, [r#"{"from":"[redacted]","subject":"lunch"}"#, "redacted 1 address(es)"]);
    let served: Value = td.payloads("tool.hook")[0].clone();
    assert_eq!(served["effect"], "replaced");
}
