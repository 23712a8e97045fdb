//! What a call brings besides its arguments (docs/runtime.md): answers to
//! the tool's questions, options, budgets and tags; and how replay treats
//! them.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::support::bundle::{self, with};
use crate::support::ledger::{kinds, payload};
use crate::support::output::{assert_contains, stderr, stdout, stdout_json};
use crate::support::pty::Terminal;
use crate::support::rlp_snapshot;
use crate::support::{HANG_GUARD, TestDir};

/// A bundle whose tool `mail.draft` asks the questions named by `asks`
/// (`tone`, `when`, `password`; see the fixture `ask.py`).
fn asking_bundle(td: &TestDir, name: &str, asks: &[&str]) -> PathBuf {
    td.bundle(name, json!([bundle::runtime_tool("mail.draft", "ask.py", asks)]), "[capabilities]\nexec = true\n")
}

#[test]
fn questions_answered_by_flags_are_recorded_in_order() {
    let td = TestDir::new();
    let bundle = asking_bundle(&td, "drafter", &["tone", "when"]);
    let output = td
        .call(&bundle, "mail.draft", json!({}))
        .args(["--answer", "tone=formal", "--answer", "when=2026-12-01", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let doc = stdout_json(&output);
    assert_eq!(doc["result"], json!({"answers": {"tone": "formal", "when": "2026-12-01"}, "options": {}}));
    assert_eq!(doc["attempts"], 3);
    assert_eq!(doc["usage"], json!({"tokens": 600}));
    let events = td.events();
    assert_eq!(
        kinds(&events),
        ["cap.audit", "tool.call", "tool.inquiry", "tool.answer", "tool.inquiry", "tool.answer", "tool.result"]
    );
    let inquiries = td.payloads("tool.inquiry");
    assert_eq!(inquiries[0]["attempt"], 1);
    assert_eq!(inquiries[0]["questions"][0]["id"], "tone");
    assert_eq!(inquiries[1]["attempt"], 2);
    assert_eq!(inquiries[1]["questions"][0]["id"], "when");
    let answers = td.payloads("tool.answer");
    assert_eq!(answers[0]["answers"], json!([{"id": "tone", "value": "formal", "source": "flag"}]));
    assert_eq!(answers[1]["answers"], json!([{"id": "when", "value": "2026-12-01", "source": "flag"}]));
    let result = &td.payloads("tool.result")[0];
    assert_eq!(result["attempt"], 3);
    assert_eq!(result["usage"], json!({"tokens": 600}));

    // Strict replay needs no answers and finds nothing missing; live replay
    // gives the recorded answers again.
    let trace = doc["trace_id"].as_str().unwrap();
    for mode in ["strict", "live"] {
        let output = td.rlp().args(["replay", trace, "--bundle"]).arg(&bundle).args(["--mode", mode]).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{mode}: {}{}", stdout(&output), stderr(&output));
        rlp_snapshot!(&td, &output);
    }
}

#[test]
fn a_question_nobody_answers_fails_naming_it_and_its_flag() {
    let td = TestDir::new();
    let bundle = asking_bundle(&td, "drafter", &["tone", "when"]);
    let output = td.call(&bundle, "mail.draft", json!({})).args(["--answer", "tone=casual"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output).lines().filter(|l| l.starts_with("error") || l.starts_with("  help")).collect::<Vec<_>>(),
        [
            "error: tool `mail.draft` asks a question that no one answered: `when` (\"Send when?\", a string (date))",
            "  help: answer with --answer when=VALUE, or call from a terminal to be asked",
        ]
    );
    let result = &td.payloads("tool.result")[0];
    assert_eq!(result["error"]["kind"], "needs_input");
    assert_eq!(result["attempt"], 2);

    // An answer that does not fit its question is refused before the tool sees it.
    let output = td.call(&bundle, "mail.draft", json!({})).args(["--answer", "tone=rude"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    rlp_snapshot!(&td, &output);
}

#[test]
fn a_question_for_a_secret_is_refused() {
    let td = TestDir::new();
    let bundle = asking_bundle(&td, "drafter", &["password"]);
    let output = td.call(&bundle, "mail.draft", json!({})).args(["--answer", "smtp_password=x"]).output().unwrap();
    assert_eq!(output.status.code(), Some(3));
    rlp_snapshot!(&td, &output);
    assert!(td.payloads("tool.answer").is_empty(), "no answer is recorded");
}

#[test]
fn what_a_tool_asks_is_scrubbed_of_its_secrets_and_bounded_in_depth() {
    let td = TestDir::new();
    let tool = with(bundle::runtime_tool("mail.draft", "ask.py", &["leak"]), json!({"secrets": ["runloop/t/key"]}));
    let bundle = td.bundle("leaky", json!([tool]), "[capabilities]\nexec = true\nsecrets = [\"runloop/t/key\"]\n");
    let output = td.call(&bundle, "mail.draft", json!({})).env("RUNLOOP_T__KEY", "s3cr3t-value").output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    rlp_snapshot!(&td, &output);
    assert!(!err.contains("s3cr3t-value"), "{err}");
    let inquiry = &td.payloads("tool.inquiry")[0];
    assert_eq!(inquiry["questions"][0]["text"], "Copy to [redacted]?");
    let ledger = std::fs::read(td.ledger_path()).unwrap();
    assert!(!ledger.windows(12).any(|w| w == b"s3cr3t-value"), "the ledger's bytes hold no secret");
    // The prompt on a terminal too.
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_rlp"));
    command.arg("--home").arg(td.home()).args(["tools", "call"]).arg(&bundle).arg("mail.draft");
    command.env("RUNLOOP_T__KEY", "s3cr3t-value");
    let mut terminal = Terminal::spawn(command, HANG_GUARD);
    terminal.answer("Copy to [redacted]? [a string]", "ops@example.com");
    terminal.expect("\"cc\": \"ops@example.com\"");
    terminal.expect_end();

    // Questions nested deeper than a frame can hold are not recorded: the call fails.
    let deep = asking_bundle(&td, "deep", &["deep"]);
    let output = td.call(&deep, "mail.draft", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    rlp_snapshot!(&td, &output);
    let verified = td.rlp().args(["trace", "verify"]).output().unwrap();
    assert_eq!(verified.status.code(), Some(0), "{}", stdout(&verified));

    // Options too.
    let nested = "[".repeat(110) + &"]".repeat(110);
    let output = td
        .call(&options_bundle(&td), "blob.echo", json!({}))
        .args(["--option", &format!("max={nested}")])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    rlp_snapshot!(&td, &output);
}

#[test]
fn questions_are_asked_on_a_terminal_until_the_answer_fits() {
    let td = TestDir::new();
    let bundle = asking_bundle(&td, "drafter", &["tone", "when"]);
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_rlp"));
    command.arg("--home").arg(td.home()).args(["tools", "call"]).arg(&bundle).arg("mail.draft");
    let mut terminal = Terminal::spawn(command, HANG_GUARD);
    terminal.expect("Tool `mail.draft` asks 1 question:");
    terminal.answer("Which tone? [a string, one of formal, casual]", "rude");
    terminal.expect("is not one of");
    terminal.press("\u{15}formal\r");
    terminal.answer("Send when? [a string (date)]", "2026-12-01");
    terminal.expect("\"tone\": \"formal\"");
    terminal.expect_end();
    let answers = td.payloads("tool.answer");
    assert_eq!(answers[0]["answers"], json!([{"id": "tone", "value": "formal", "source": "terminal"}]));
    assert_eq!(answers[1]["answers"], json!([{"id": "when", "value": "2026-12-01", "source": "terminal"}]));
}

#[test]
fn live_replay_flags_a_question_the_recording_does_not_answer() {
    let td = TestDir::new();
    let recorded = asking_bundle(&td, "drafter", &["tone"]);
    let output = td
        .call(&recorded, "mail.draft", json!({}))
        .args(["--answer", "tone=formal", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let trace = stdout_json(&output)["trace_id"].as_str().unwrap().to_string();
    // The tool now asks a second question.
    let changed = asking_bundle(&td, "drafter", &["tone", "when"]);
    let output = td
        .rlp()
        .args(["replay", &trace, "--bundle"])
        .arg(&changed)
        .args(["--mode", "live", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let doc = stdout_json(&output);
    let found: Vec<&str> = doc["divergences"].as_array().unwrap().iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(found, ["unanswered_question"]);
    assert_contains(doc["divergences"][0]["message"].as_str().unwrap(), "`when` (\"Send when?\"");
}

#[test]
fn a_changed_schema_is_flagged_even_when_the_data_still_fits() {
    let td = TestDir::new();
    let tool = bundle::runtime_tool("ok", "ok.sh", &[]);
    let bundle = td.bundle("plain", json!([tool.clone()]), "[capabilities]\nexec = true\n");
    let output = td.call(&bundle, "ok", json!({})).args(["--format", "json"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let trace = stdout_json(&output)["trace_id"].as_str().unwrap().to_string();
    let described = with(tool, json!({"result_schema": {"description": "anything at all"}}));
    let bundle = td.bundle("plain", json!([described]), "[capabilities]\nexec = true\n");
    let output =
        td.rlp().args(["replay", &trace, "--bundle"]).arg(&bundle).args(["--format", "json"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let doc = stdout_json(&output);
    assert_eq!(doc["divergences"].as_array().unwrap().len(), 1);
    assert_eq!(doc["divergences"][0]["kind"], "schema_changed");
    assert_eq!(doc["divergences"][0]["message"], "the result_schema of `ok` changed since the recording");
}

/// A tool that prints its blob, with an options schema.
fn options_bundle(td: &TestDir) -> PathBuf {
    let schema = json!({
        "type": "object",
        "properties": {"signature": {"type": "boolean", "default": true}, "max": {"type": "integer", "maximum": 10}},
        "additionalProperties": false
    });
    let tool = with(bundle::runtime_tool("blob.echo", "echo_blob.sh", &[]), json!({"options_schema": schema}));
    td.bundle(
        "optioned",
        json!([tool, bundle::runtime_tool("plain", "echo_blob.sh", &[])]),
        "[capabilities]\nexec = true\n",
    )
}

#[test]
fn options_merge_flags_config_and_defaults_and_are_validated_before_the_tool_runs() {
    let td = TestDir::new();
    let bundle = options_bundle(&td);
    std::fs::create_dir_all(td.home()).unwrap();
    std::fs::write(td.home().join("config.toml"), "[agents.optioned.tools.\"blob.echo\".options]\nmax = 5\n").unwrap();
    let output = td.call(&bundle, "blob.echo", json!({})).args(["--option", "signature=false"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let blob: Value = stdout_json(&output);
    assert_eq!(blob["tool"]["options"], json!({"signature": false, "max": 5}));
    assert_eq!(td.payloads("tool.call")[0]["options"], json!({"signature": false, "max": 5}));

    let calls_before = td.payloads("tool.call").len();
    let output = td.call(&bundle, "blob.echo", json!({})).args(["--option", "max=50"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    rlp_snapshot!(&td, &output);
    assert_eq!(td.payloads("tool.call").len(), calls_before, "no refused call ran");
    // A tool without an options_schema gets its options free-form (seed
    // 003), recorded alike.
    let output =
        td.call(&bundle, "plain", json!({})).args(["--option", "max=1", "--option", "mode=fast"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout_json(&output)["tool"]["options"], json!({"max": 1, "mode": "fast"}));
    assert_eq!(td.payloads("tool.call").last().unwrap()["options"], json!({"max": 1, "mode": "fast"}));

    let output = td.rlp().args(["tools", "list"]).arg(&bundle).output().unwrap();
    rlp_snapshot!(td.filters().aligned(), &output);
}

#[test]
fn a_budget_refuses_the_call_once_its_trace_has_used_it_up() {
    let td = TestDir::new();
    let tool = with(bundle::runtime_tool("mail.send", "usage.sh", &[]), json!({"budget": {"tokens": 1000}}));
    let bundle = td.bundle("spender", json!([tool]), "[capabilities]\nexec = true\n");
    let first = td.call(&bundle, "mail.send", json!({})).args(["--format", "json"]).output().unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let trace = stdout_json(&first)["trace_id"].as_str().unwrap().to_string();
    let again = || td.call(&bundle, "mail.send", json!({})).args(["--trace-id", &trace]).output().unwrap();
    assert_eq!(again().status.code(), Some(0), "600 of 1000 used: the second call runs");
    let third = again();
    assert_eq!(third.status.code(), Some(3));
    rlp_snapshot!(&td, &third);
    let denied: Vec<Value> = td.payloads("cap.audit").into_iter().filter(|a| a["decision"] == "deny").collect();
    assert_eq!(denied.len(), 1);
    assert_eq!(denied[0]["capability"], "budget.tokens");
    assert_eq!(denied[0]["reason"], format!("1200 of 1000 used in trace {trace}"));
    // A new trace starts fresh.
    let fresh = td.call(&bundle, "mail.send", json!({})).output().unwrap();
    assert_eq!(fresh.status.code(), Some(0));

    let shown = td.rlp().args(["trace", "show", &trace]).output().unwrap();
    rlp_snapshot!(&td, &shown);
}

#[test]
fn tags_reach_every_frame_of_the_call() {
    let td = TestDir::new();
    let tool = with(
        bundle::runtime_tool("mail.draft", "ask.py", &["tone"]),
        json!({"observability": {"tags": ["mail"]}, "requires_confirmation": true}),
    );
    let bundle = td.bundle("tagged", json!([tool]), "[capabilities]\nexec = true\n");
    let output = td
        .call(&bundle, "mail.draft", json!({}))
        .args(["--yes", "--answer", "tone=formal", "--tag", "team=mail", "--tag", "mail"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = td.events();
    assert_eq!(
        kinds(&events),
        ["cap.audit", "tool.confirm", "tool.call", "tool.inquiry", "tool.answer", "tool.result"]
    );
    for event in &events {
        assert_eq!(payload(event)["tags"], json!(["mail", "team=mail"]), "{}", event.kind);
    }
    let tagged = events[0].provenance().unwrap().trace_id;
    let untagged =
        td.bundle("plain", json!([bundle::runtime_tool("ok", "ok.sh", &[])]), "[capabilities]\nexec = true\n");
    assert_eq!(td.call(&untagged, "ok", json!({})).output().unwrap().status.code(), Some(0));
    let listed = td.rlp().args(["trace", "list", "--tag", "team=mail", "--format", "json"]).output().unwrap();
    let ids: Vec<String> = stdout_json(&listed).as_array().unwrap().iter().map(|t| t["trace_id"].to_string()).collect();
    assert_eq!(ids, [json!(tagged).to_string()], "only the tagged trace is listed");
    let output = td.call(&bundle, "mail.draft", json!({})).args(["--tag", ""]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    rlp_snapshot!(&td, &output);
}
