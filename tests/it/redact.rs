//! `rlp trace export --redact` and `--redacted`: a trace recorded by real
//! `rlp tools call` processes (and one written by hand with what only a
//! bridged server or a question records), exported with chosen fields
//! replaced by placeholders; the file holds none of the values, reads,
//! imports, shows, diffs and replays, and is the same bytes every time.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::bundle::{exec, tool};
use crate::support::output::{code, stderr, text};

const TRACE: &str = "0197a000-0000-7000-8000-00000000cccc";

/// `mail.send`: answers with where it sent the mail, or fails for bob.
const SEND: &str = r#"
import json, sys
args = json.load(open(sys.argv[1]))["tool"]["arguments"]
if args["to"].startswith("bob"):
    print(json.dumps({"outcome": "error", "message": "no mailbox for " + args["to"]}))
else:
    print(json.dumps({"sent_to": args["to"], "note": "delivered to %s (account 48213)" % args["to"]}))
"#;

/// The after-call hook: notes the senders a `mail.list` result names.
const HOOK: &str = r#"
import json, sys
blob = json.load(open(sys.argv[1]))
senders = [m["from"] for m in blob["result"].get("messages", [])]
print(json.dumps({"annotations": ["senders: " + ", ".join(senders)]} if senders else {}))
"#;

/// An executable Python script `name` in the test folder.
fn python(td: &TestDir, name: &str, body: &str) -> PathBuf {
    let path = td.join(name);
    std::fs::write(&path, format!("#!/usr/bin/env python3\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path
}

/// Bundle `inbox` (`mail.list`, `mail.send`) and the hook in config.toml;
/// three calls recorded in [`TRACE`]: a list naming ada and bob, a mail
/// sent to ada, one to bob that fails.
fn recorded(td: &TestDir) -> PathBuf {
    let list = td.script(
        "list.sh",
        r#"echo '{"messages": [{"from": "ada@example.com", "subject": "lunch"}, {"from": "bob@example.com", "subject": "hi from bob@example.com"}], "account": 48213}'"#,
    );
    let send = python(td, "send.py", SEND);
    let hook = python(td, "hook.py", HOOK);
    let tools = json!([
        tool("mail.list", exec(list.to_str().unwrap(), &[])),
        tool("mail.send", exec(send.to_str().unwrap(), &[])),
    ]);
    let inbox = td.bundle("inbox", tools, "[capabilities]\nexec = true\n");
    td.write_config(&format!(
        "[[hooks.after_call]]\nname = \"senders\"\ncommand = [{:?}]\ntools = [\"mail.list\"]\n",
        hook.display().to_string()
    ));
    for (tool, args, status) in [
        ("mail.list", json!({}), 0),
        ("mail.send", json!({"to": "ada@example.com", "body": "see you at 12"}), 0),
        ("mail.send", json!({"to": "bob@example.com", "body": "hi"}), 1),
    ] {
        let out = td.call(&inbox, tool, args).args(["--trace-id", TRACE]).output().unwrap();
        assert_eq!(code(&out), status, "{tool}: {}", text(&out));
    }
    inbox
}

/// `rlp trace export TRACE <flags> -o <name>` in `home`, which must succeed;
/// returns the file and stderr.
fn export_in(td: &TestDir, home: &str, name: &str, flags: &[&str]) -> (PathBuf, String) {
    let file = td.join(name);
    let out = td.rlp_in(home).args(["trace", "export", TRACE]).args(flags).arg("-o").arg(&file).output().unwrap();
    assert_eq!(code(&out), 0, "export {flags:?}: {}", text(&out));
    (file, stderr(&out))
}

fn export(td: &TestDir, name: &str, flags: &[&str]) -> (PathBuf, String) {
    export_in(td, "home", name, flags)
}

fn lines(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

/// The payloads of the frames of `kind`, in order.
fn payloads(frames: &[Value], kind: &str) -> Vec<Value> {
    frames.iter().filter(|f| f["kind"] == kind).map(|f| f["payload"].clone()).collect()
}

/// `member` of each payload of `kind`, as compact JSON text.
fn members(frames: &[Value], kind: &str, member: &str) -> Vec<String> {
    payloads(frames, kind).iter().map(|p| p[member].to_string()).collect()
}

fn expect(td: &TestDir, home: &str, args: &[&str], status: i32) -> String {
    let out = td.rlp_in(home).args(args).output().unwrap();
    assert_eq!(code(&out), status, "{args:?}: {}", text(&out));
    stderr(&out)
}

#[test]
fn named_values_become_stable_placeholders_and_leave_no_trace_in_the_file() {
    let td = TestDir::new();
    let inbox = recorded(&td);
    let flags = ["--redact", "/result/messages/*/from", "--redact", "mail.send:/args/to"];
    let (file, err) = export(&td, "redacted.jsonl", &flags);
    let exported =
        format!("Exported 10 frames of trace {TRACE} to {} (2 values redacted in 6 frames).\n", file.display());
    assert_eq!(err, exported);
    let frames = lines(&file);
    assert_eq!(
        members(&frames, "tool.call", "args"),
        [r#"{}"#, r#"{"body":"see you at 12","to":"<redacted:1>"}"#, r#"{"body":"hi","to":"<redacted:2>"}"#,]
    );
    let results = payloads(&frames, "tool.result");
    assert_eq!(
        results[0]["result"].to_string(),
        r#"{"account":48213,"messages":[{"from":"<redacted:1>","subject":"lunch"},{"from":"<redacted:2>","subject":"hi from <redacted:2>"}]}"#
    );
    // Not named here, but the same value: the same placeholder, in the text too.
    assert_eq!(
        results[1]["result"].to_string(),
        r#"{"note":"delivered to <redacted:1> (account 48213)","sent_to":"<redacted:1>"}"#
    );
    assert_eq!(results[2]["error"]["message"], "tool `mail.send` failed: no mailbox for <redacted:2>");
    assert_eq!(members(&frames, "tool.hook", "annotations"), [r#"["senders: <redacted:1>, <redacted:2>"]"#]);
    let bytes = std::fs::read(&file).unwrap();
    for secret in ["ada@example.com", "bob@example.com", "ada%40example.com"] {
        assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()), "{secret} is in the file");
    }
    // The same flags give the same bytes; stdout too.
    let (again, _) = export(&td, "again.jsonl", &flags);
    assert_eq!(std::fs::read(&again).unwrap(), bytes);
    let out = td.rlp().args(["trace", "export", TRACE]).args(flags).output().unwrap();
    assert_eq!((code(&out), stderr(&out), out.stdout), (0, String::new(), bytes.clone()));
    // Frames left as they were keep their hash; the others have their new one.
    let (plain, _) = export(&td, "plain.jsonl", &[]);
    let plain = lines(&plain);
    for (original, redacted) in plain.iter().zip(&frames) {
        assert_eq!(original["payload"] == redacted["payload"], original["hash_blake3"] == redacted["hash_blake3"]);
        assert_eq!((&original["ts_ms"], &original["provenance"]), (&redacted["ts_ms"], &redacted["provenance"]));
    }
    assert_eq!(plain.iter().zip(&frames).filter(|(a, b)| a["payload"] != b["payload"]).count(), 6);
    // A trace file like any other: checked, imported, shown, diffed, replayed.
    let file_arg = file.to_str().unwrap();
    expect(&td, "fresh", &["trace", "import", file_arg], 0);
    expect(&td, "fresh", &["trace", "verify"], 0);
    let (round_trip, _) = export_in(&td, "fresh", "round-trip.jsonl", &[]);
    assert_eq!(std::fs::read(&round_trip).unwrap(), bytes);
    expect(&td, "fresh", &["trace", "show", file_arg], 0);
    expect(&td, "fresh", &["trace", "diff", file_arg, file_arg], 0);
    expect(&td, "fresh", &["replay", file_arg, "--bundle", inbox.to_str().unwrap()], 0);
}

#[test]
fn the_config_lists_apply_with_redacted_and_with_redact() {
    let td = TestDir::new();
    recorded(&td);
    let config = std::fs::read_to_string(td.home().join("config.toml")).unwrap();
    td.write_config(&format!(
        "{config}\n[agents.inbox.tools.\"mail.list\"]\nredact = [\"/result/account\"]\n\
         [agents.other.tools.\"mail.send\"]\nredact = [\"/args/body\"]\n"
    ));
    // A plain export is the trace as recorded.
    let (plain, _) = export(&td, "plain.jsonl", &[]);
    assert!(std::fs::read_to_string(&plain).unwrap().contains("ada@example.com"));
    let (file, _) = export(&td, "listed.jsonl", &["--redacted"]);
    let frames = lines(&file);
    let results = payloads(&frames, "tool.result");
    assert_eq!(results[0]["result"]["account"], "<redacted:1>");
    assert_eq!(results[1]["result"]["note"], "delivered to ada@example.com (account <redacted:1>)");
    // Another agent's list does not apply here.
    assert_eq!(members(&frames, "tool.call", "args")[2], r#"{"body":"hi","to":"bob@example.com"}"#);
    // --redact adds its pointers to the lists.
    let (file, _) = export(&td, "both.jsonl", &["--redact", "/args/to"]);
    let frames = lines(&file);
    assert_eq!(payloads(&frames, "tool.result")[0]["result"]["account"], "<redacted:1>");
    assert_eq!(members(&frames, "tool.call", "args")[1], r#"{"body":"see you at 12","to":"<redacted:2>"}"#);
}

#[test]
fn a_pointer_that_names_nothing_is_warned_about() {
    let td = TestDir::new();
    recorded(&td);
    let (file, err) = export(&td, "typo.jsonl", &["--redact", "/args/too", "--redact", "mail.sned:/args/to"]);
    assert_eq!(
        err,
        format!(
            "warning: --redact /args/too matched nothing in trace {TRACE}\n\
             warning: --redact mail.sned:/args/to matched nothing in trace {TRACE}: it has no call of mail.sned\n\
             Exported 10 frames of trace {TRACE} to {} (nothing redacted).\n",
            file.display()
        )
    );
    // A config list is warned about when its tool was called, and only then.
    td.write_config(
        "[agents.inbox.tools.\"mail.send\"]\nredact = [\"/result/sent\"]\n\
         [agents.inbox.tools.\"mail.read\"]\nredact = [\"/result/from\"]\n",
    );
    let (file, err) = export(&td, "listed.jsonl", &["--redacted"]);
    assert_eq!(
        err,
        format!(
            "warning: redact \"/result/sent\" of [agents.inbox.tools.\"mail.send\"] in the config matched nothing in trace {TRACE}\n\
             Exported 10 frames of trace {TRACE} to {} (nothing redacted).\n",
            file.display()
        )
    );
    std::fs::remove_file(td.home().join("config.toml")).unwrap();
    // Asked for a redacted file, with nothing to redact: nothing is written.
    let none = td.join("none.jsonl");
    let out = td.rlp().args(["trace", "export", TRACE, "--redacted", "-o"]).arg(&none).output().unwrap();
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(
        stderr(&out).starts_with(
            "error: --redacted: no config file has a redact list ([agents.<agent>.tools.\"<tool id>\"] redact); \
             nothing was exported\n"
        ),
        "{}",
        stderr(&out)
    );
    assert!(!none.exists());
}

#[test]
fn a_flag_or_list_that_is_not_a_pointer_into_calls_is_a_usage_error() {
    let td = TestDir::new();
    let refused = |args: &[&str], message: &str| {
        let out = td.rlp().args(["trace", "export", TRACE]).args(args).output().unwrap();
        assert_eq!((code(&out), stderr(&out)), (2, message.to_string()), "{args:?}");
    };
    let roots = "a pointer starts with /args (the call's arguments) or /result (its result), e.g. /args/to or \
                 /result/messages/*/from";
    refused(
        &["--redact", "args/to"],
        &format!(
            "error: --redact: `args/to` does not start with /args or /result\n  help: write `/args/to`: {roots}\n"
        ),
    );
    refused(
        &["--redact", "/arguments/to"],
        &format!("error: --redact: `/arguments/to` does not start with /args or /result\n  help: {roots}\n"),
    );
    refused(
        &["--redact", "/args/a~x"],
        "error: --redact: `/args/a~x` is not a JSON Pointer: `~` must be followed by 0 or 1\n  \
         help: write `~0` for a `~` in a key and `~1` for a `/`, e.g. `/args/a~0x`\n",
    );
    refused(
        &["--redact", "Mail.Send:/args/to"],
        "error: --redact: `Mail.Send` is not a tool id\n  help: write TOOL:POINTER with a tool id of the trace \
         (lowercase names joined by dots), e.g. mail.send:/args/to, or the pointer alone for every tool\n",
    );
    let out = td.rlp().args(["trace", "export", TRACE, "--otlp", "--redact", "/args/to"]).output().unwrap();
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(stderr(&out).contains("'--otlp [<ENDPOINT>]' cannot be used with '--redact <POINTER>'"), "{}", text(&out));
    let out = td.rlp().args(["trace", "export", TRACE, "--redacted", "--otlp"]).output().unwrap();
    assert_eq!(code(&out), 2, "{}", text(&out));
    let config = td.write_config("[agents.inbox.tools.\"mail.list\"]\nredact = [\"result/account\"]\n");
    refused(
        &["--redacted"],
        &format!(
            "error: {}:2:11: `agents.inbox.tools.\"mail.list\".redact[0]`: `result/account` does not start with /args or \
             /result\n  help: write `/result/account`: {roots}\n",
            config.display()
        ),
    );
    td.write_config("[agents.inbox.tools.\"mail.list\"]\nredact = \"/result/account\"\n");
    let out = td.rlp().args(["trace", "export", TRACE]).output().unwrap();
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(
        stderr(&out).starts_with(&format!(
            "error: {}:2:10: `agents.inbox.tools.\"mail.list\".redact` must be an array of JSON Pointers, found string\n",
            config.display()
        )),
        "{}",
        text(&out)
    );
}

// ------------------------------------------- what only some frames record

const INV_Q: &str = "0197a000-0000-7000-8000-0000000000c1";
const INV_B: &str = "0197a000-0000-7000-8000-0000000000c2";

/// One frame line of the hand-written trace (import computes the hashes).
fn frame_line(id: u64, kind: &str, actor: &str, payload: Value) -> String {
    let frame = json!({
        "id": id, "ts_ms": 1_764_000_000_000u64 + id, "actor": actor, "kind": kind, "scope": "desk",
        "payload": payload,
        "provenance": {"agent": "desk", "msg_id": format!("0197a000-0000-7000-8000-{id:012}"), "trace_id": TRACE},
    });
    format!("{frame}\n")
}

/// A call that asked a question (answered with the customer's address), and
/// a bridged call whose server repeated its structured result in a text
/// block, then an exchange with the server that names the customer.
fn written_trace() -> String {
    [
        frame_line(1, "tool.call", "runtime", json!({"v": 1, "invocation_id": INV_Q, "tool": "crm.note",
            "args": {"customer": "Ada Lovelace", "text": "call back"}})),
        frame_line(2, "tool.inquiry", "tool:crm.note", json!({"v": 1, "invocation_id": INV_Q, "tool": "crm.note",
            "questions": [{"id": "cc", "text": "Copy Ada Lovelace's manager?", "default": "ada@example.com"}]})),
        frame_line(3, "tool.answer", "operator", json!({"v": 1, "invocation_id": INV_Q, "tool": "crm.note",
            "answers": [{"id": "cc", "value": "ada@example.com", "source": "flag"}]})),
        frame_line(4, "tool.result", "tool:crm.note", json!({"v": 1, "invocation_id": INV_Q, "tool": "crm.note",
            "result": {"saved": true}, "attempt": 1})),
        frame_line(5, "tool.call", "runtime", json!({"v": 1, "invocation_id": INV_B, "tool": "crm.find",
            "args": {"q": "Ada"}})),
        frame_line(6, "tool.result", "tool:crm.find", json!({"v": 1, "invocation_id": INV_B, "tool": "crm.find",
            "result": {"customer": {"name": "Ada Lovelace", "email": "ada@example.com", "id": 48213}},
            "content": [{"type": "text", "text": "{\n  \"customer\": {\n    \"name\": \"Ada Lovelace\",\n    \"email\": \"ada@example.com\",\n    \"id\": 48213\n  }\n}"}],
            "attempt": 1})),
        frame_line(7, "resource.read", "runtime", json!({"v": 1, "server": "crm", "method": "resources/read",
            "request": {"uri": "crm://customers/48213"}, "response": {"contents": [{"text": "Ada Lovelace, since 1843"}]}})),
    ]
    .concat()
}

#[test]
fn content_blocks_questions_answers_and_exchanges_are_scrubbed_too() {
    let td = TestDir::new();
    std::fs::write(td.join("written.jsonl"), written_trace()).unwrap();
    expect(&td, "home", &["trace", "import", "written.jsonl"], 0);
    let flags = ["--redact", "crm.note:/args/customer", "--redact", "crm.find:/result/customer"];
    let (file, _) = export(&td, "redacted.jsonl", &flags);
    let frames = lines(&file);
    // The customer object is one placeholder; its strings and its number have their own.
    assert_eq!(members(&frames, "tool.call", "args")[0], r#"{"customer":"<redacted:1>","text":"call back"}"#);
    assert_eq!(payloads(&frames, "tool.result")[1]["result"], json!({"customer": "<redacted:2>"}));
    assert_eq!(
        payloads(&frames, "tool.result")[1]["content"][0]["text"],
        "{\n  \"customer\": {\n    \"name\": \"<redacted:1>\",\n    \"email\": \"<redacted:3>\",\n    \"id\": <redacted:4>\n  }\n}"
    );
    assert_eq!(
        payloads(&frames, "tool.inquiry")[0]["questions"],
        json!([{"id": "cc", "text": "Copy <redacted:1>'s manager?", "default": "<redacted:3>"}])
    );
    assert_eq!(payloads(&frames, "tool.answer")[0]["answers"][0]["value"], "<redacted:3>");
    assert_eq!(
        payloads(&frames, "resource.read")[0],
        json!({"v": 1, "server": "crm", "method": "resources/read", "request": {"uri": "crm://customers/<redacted:4>"},
               "response": {"contents": [{"text": "<redacted:1>, since 1843"}]}})
    );
    let text = std::fs::read_to_string(&file).unwrap();
    for secret in ["Ada Lovelace", "ada@example.com", "48213"] {
        assert!(!text.contains(secret), "{secret} is in:\n{text}");
    }
    expect(&td, "fresh", &["trace", "import", file.to_str().unwrap()], 0);
}
