//! OpenTelemetry spans end to end, against an OTLP/HTTP receiver started on
//! 127.0.0.1 (support/otlp.rs): the `execute_tool` span of a call with its
//! GenAI and `rlp.*` attributes, failures and refusals, a caller's
//! `traceparent` over MCP, a collector that is down or hangs, content only
//! when asked for and never a secret, and `rlp trace export --otlp`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Instant;

use serde_json::{Value, json};

use crate::secrets::{SECRET, SECRET_ENV, SECRET_ID, assert_absent, needles, whole_spellings};
use crate::support::otlp::{Blackhole, Received, Receiver, dead_endpoint};
use crate::support::output::{code, stderr, stdout_json, text};
use crate::support::rlp_snapshot;
use crate::support::{HANG_GUARD, TestDir, bundle};

const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
const CAPTURE: &str = "RLP_OTEL_CAPTURE_CONTENT";
/// A caller's W3C trace context.
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
/// The OTLP span kind INTERNAL.
const INTERNAL: i32 = 1;
/// The OTLP status code ERROR.
const ERROR: i32 = 2;

/// Bundle `mailer`: `mail.ok` succeeds, `mail.fail` answers an error
/// envelope, `mail.flaky` fails transiently twice and then succeeds (three
/// attempts allowed; its count kept in `state/`).
fn mailer(td: &TestDir) -> PathBuf {
    let fail = td.script("fail.sh", r#"echo '{"outcome":"error","message":"mailbox full"}'"#);
    let state = td.state_dir();
    let counter = state.join("flaky-count");
    let flaky = bundle::runtime_tool("mail.flaky", "transient.sh", &[counter.to_str().unwrap()]);
    let tools = json!([
        bundle::runtime_tool("mail.ok", "ok.sh", &[]),
        bundle::tool("mail.fail", bundle::exec(fail.to_str().unwrap(), &[])),
        bundle::with(bundle::with_fs(flaky, &state), json!({"retry": {"max_attempts": 3}})),
    ]);
    td.bundle("mailer", tools, &bundle::caps("exec = true\n", &state))
}

/// `rlp tools call <bundle> <tool> --format json <extra…>`, spans sent to
/// `endpoint`.
fn call(td: &TestDir, bundle: &Path, tool: &str, endpoint: &str, extra: &[&str]) -> Output {
    let mut command = td.call(bundle, tool, json!({}));
    command.args(["--format", "json"]).args(extra).env(ENDPOINT, endpoint);
    command.output().unwrap()
}

/// The invocation and trace ids `--format json` printed.
fn ids(out: &Output) -> (String, String) {
    let doc = stdout_json(out);
    let id = |key: &str| doc[key].as_str().unwrap_or_else(|| panic!("no {key}: {}", text(out))).to_string();
    (id("invocation_id"), id("trace_id"))
}

/// A UUID as an OTel id: 32 hex digits.
fn trace_hex(uuid: &str) -> String {
    uuid::Uuid::parse_str(uuid).unwrap().simple().to_string()
}

/// The span id of an invocation: the first 8 bytes of BLAKE3 of its 16.
fn span_hex(invocation: &str) -> String {
    let id = uuid::Uuid::parse_str(invocation).unwrap();
    blake3::hash(id.as_bytes()).as_bytes()[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// The span of `invocation` among `spans`.
fn span_of<'a>(spans: &'a [Received], invocation: &str) -> &'a Received {
    let id = span_hex(invocation);
    let found: Vec<&Received> = spans.iter().filter(|s| s.ids().1 == id).collect();
    assert_eq!(found.len(), 1, "spans of invocation {invocation}: {spans:#?}");
    found[0]
}

/// The `warning:` lines of `stderr`.
fn warnings(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|line| line.starts_with("warning:")).collect()
}

#[test]
fn a_call_is_an_execute_tool_span_with_the_genai_and_rlp_attributes() {
    let td = TestDir::new();
    let receiver = Receiver::start();
    let bundle = mailer(&td);
    let out = call(&td, &bundle, "mail.ok", &receiver.endpoint(), &["--tag", "team=mail"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert_eq!(warnings(&stderr(&out)), Vec::<&str>::new());
    let (invocation, trace) = ids(&out);
    let spans = receiver.wait_for(1);
    assert_eq!(spans.len(), 1, "{spans:#?}");
    let span = &spans[0];
    assert_eq!(span.span.name, "execute_tool mail.ok");
    assert_eq!(span.span.kind, INTERNAL);
    assert_eq!(span.ids(), (trace_hex(&trace), span_hex(&invocation), String::new()));
    let frames: Vec<_> = td.frames().into_iter().filter(|f| f.payload["invocation_id"] == invocation).collect();
    let (first, last) = (frames.first().unwrap(), frames.last().unwrap());
    assert_eq!(last.kind, "tool.result");
    assert_eq!(span.span.start_time_unix_nano, first.ts_ms as u64 * 1_000_000);
    assert_eq!(span.span.end_time_unix_nano, last.ts_ms as u64 * 1_000_000);
    assert_eq!(
        Value::Object(span.attributes()),
        json!({
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.call.id": invocation,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.name": "mail.ok",
            "rlp.agent": "mailer",
            "rlp.trace_id": trace,
            "rlp.attempt": 1,
            "rlp.outcome": "ok",
            "rlp.bundle.version": "0.1.0",
            "rlp.duration_ms": last.payload["duration_ms"],
            "rlp.tags": ["team=mail"],
        })
    );
    assert_eq!(
        span.events(),
        [json!({"name": "rlp.capability", "attributes": {"rlp.capability": "exec", "rlp.decision": "allow"}})]
    );
    assert_eq!(span.status(), (0, String::new()));
    assert_eq!(span.resource["service.name"], "unknown_service:rlp");
}

#[test]
fn failures_and_refusals_are_error_spans_with_their_error_type() {
    let td = TestDir::new();
    let receiver = Receiver::start();
    let bundle = mailer(&td);
    let endpoint = receiver.endpoint();

    let failed = call(&td, &bundle, "mail.fail", &endpoint, &[]);
    assert_eq!(code(&failed), 1, "{}", text(&failed));
    let flaky = call(&td, &bundle, "mail.flaky", &endpoint, &[]);
    assert_eq!(code(&flaky), 0, "{}", text(&flaky));
    td.write_override("mailer", "[capabilities]\nexec = false\n");
    let refused = call(&td, &bundle, "mail.ok", &endpoint, &[]);
    assert_eq!(code(&refused), 3, "{}", text(&refused));
    let spans = receiver.wait_for(3);
    assert_eq!(spans.len(), 3, "{spans:#?}");

    let (invocation, _) = ids(&failed);
    let span = span_of(&spans, &invocation);
    let attributes = span.attributes();
    assert_eq!(attributes["error.type"], "tool");
    assert_eq!(attributes["rlp.outcome"], "error");
    assert_eq!(attributes["rlp.attempt"], 1);
    assert_eq!(span.status(), (ERROR, "tool".to_string()), "the message stays out without capture");

    let (invocation, _) = ids(&flaky);
    let span = span_of(&spans, &invocation);
    assert_eq!(span.attributes()["rlp.outcome"], "ok");
    assert_eq!(span.attributes()["rlp.attempt"], 3);
    assert!(!span.attributes().contains_key("error.type"));
    let retries: Vec<Value> = span.events().into_iter().filter(|e| e["name"] == "rlp.retry").collect();
    let retried = |attempt: u64| json!({"name": "rlp.retry", "attributes": {"rlp.attempt": attempt, "error.type": "tool", "rlp.retry_after_ms": 10}});
    assert_eq!(retries.len(), 2, "{retries:#?}");
    for (retry, attempt) in retries.iter().zip([1, 2]) {
        let mut retry = retry.clone();
        retry["attributes"].as_object_mut().unwrap().remove("rlp.duration_ms");
        assert_eq!(retry, retried(attempt));
    }

    let (invocation, trace) = ids(&refused);
    let span = span_of(&spans, &invocation);
    assert_eq!(span.span.name, "execute_tool mail.ok");
    assert_eq!(span.ids().0, trace_hex(&trace));
    assert_eq!(
        Value::Object(span.attributes()),
        json!({
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.call.id": invocation,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.name": "mail.ok",
            "error.type": "capability_denied",
            "rlp.agent": "mailer",
            "rlp.trace_id": trace,
            "rlp.attempt": 0,
            "rlp.outcome": "refused",
            "rlp.bundle.version": "0.1.0",
        })
    );
    assert_eq!(
        span.events(),
        [json!({"name": "rlp.capability", "attributes": {"rlp.capability": "exec", "rlp.decision": "deny"}})]
    );
    assert_eq!(span.status(), (ERROR, "capability_denied".to_string()));
}

/// Reads the JSON-RPC lines of `rlp serve` on a thread.
fn lines_of(stdout: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<Value> {
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Ok(message) = serde_json::from_str(&line)
                && send.send(message).is_err()
            {
                break;
            }
        }
    });
    receive
}

#[test]
fn a_traceparent_sent_over_mcp_makes_the_span_a_child_of_the_caller() {
    let td = TestDir::new();
    let receiver = Receiver::start();
    let bundle = mailer(&td);
    let server_stderr = std::fs::File::create(td.join("serve.stderr")).unwrap();
    let mut server = td
        .command()
        .arg("serve")
        .arg(&bundle)
        .env(ENDPOINT, receiver.endpoint())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(server_stderr)
        .spawn()
        .unwrap();
    let replies = lines_of(server.stdout.take().unwrap());
    let mut stdin = server.stdin.take().unwrap();
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "otel-test", "version": "1"}}});
    let with_parent = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "mail.ok", "arguments": {}, "_meta": {"traceparent": TRACEPARENT}}});
    let without =
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "mail.ok", "arguments": {}}});
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let next = |replies: &std::sync::mpsc::Receiver<Value>| {
        replies.recv_timeout(HANG_GUARD).unwrap_or_else(|_| panic!("rlp serve did not answer within {HANG_GUARD:?}"))
    };
    writeln!(stdin, "{initialize}").unwrap();
    assert_eq!(next(&replies)["id"], 0);
    writeln!(stdin, "{initialized}\n{with_parent}\n{without}").unwrap();
    let mut invocations = BTreeMap::new();
    while invocations.len() < 2 {
        let reply = next(&replies);
        let meta = &reply["result"]["_meta"]["dev.runloop/call"];
        if let Some(id) = reply["id"].as_u64() {
            assert_eq!(meta["outcome"], "ok", "{reply}");
            invocations.insert(id, meta["invocation_id"].as_str().unwrap().to_string());
        }
    }
    drop(stdin);
    let deadline = Instant::now() + HANG_GUARD;
    let status = loop {
        if let Some(status) = server.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = server.kill();
            panic!("rlp serve did not end within {HANG_GUARD:?} of its input closing");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let serve_stderr = std::fs::read_to_string(td.join("serve.stderr")).unwrap();
    assert!(status.success(), "{serve_stderr}");
    assert_eq!(warnings(&serve_stderr), Vec::<&str>::new());
    let run_trace = serve_stderr.lines().find_map(|l| l.strip_prefix("rlp serve: trace ")).unwrap().to_string();

    let spans = receiver.wait_for(2);
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let child = span_of(&spans, &invocations[&1]);
    assert_eq!(
        child.ids(),
        ("4bf92f3577b34da6a3ce929d0e0e4736".into(), span_hex(&invocations[&1]), "00f067aa0ba902b7".into())
    );
    assert_eq!(child.attributes()["rlp.trace_id"], run_trace.as_str(), "rlp's own trace stays an attribute");
    let root = span_of(&spans, &invocations[&2]);
    assert_eq!(root.ids(), (trace_hex(&run_trace), span_hex(&invocations[&2]), String::new()));
}

#[test]
fn a_collector_that_is_down_or_hangs_costs_a_call_one_warning() {
    let td = TestDir::new();
    let bundle = mailer(&td);
    let blackhole = Blackhole::start();
    for endpoint in [dead_endpoint(), blackhole.endpoint()] {
        let with_password = endpoint.replace("http://", "http://otel-user:pa55word@");
        let out = td
            .call(&bundle, "mail.ok", json!({}))
            .env(ENDPOINT, &with_password)
            .env("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20header-s3cret")
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{endpoint}: {}", text(&out));
        assert_eq!(stdout_json(&out), json!({"ok": true}));
        let err = stderr(&out);
        let warned = warnings(&err);
        assert_eq!(warned.len(), 1, "{endpoint}: {err}");
        assert!(warned[0].starts_with(&format!("warning: cannot send spans to {endpoint}/v1/traces: ")), "{err}");
        for hidden in ["otel-user", "pa55word", "header-s3cret"] {
            assert!(!err.contains(hidden), "{hidden} shown: {err}");
        }
    }
    // Five calls, each span sent on its own: several exports fail, one warning.
    std::fs::write(td.join("calls.jsonl"), "{\"tool\": \"mail.ok\"}\n".repeat(5)).unwrap();
    let out = td
        .rlp()
        .args(["tools", "call"])
        .arg(&bundle)
        .args(["--batch", "calls.jsonl"])
        .env(ENDPOINT, dead_endpoint())
        .env("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1")
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert_eq!(warnings(&stderr(&out)).len(), 1, "{}", stderr(&out));
}

/// What the echo tool prints: mode `result`, every spelling of its secret
/// in a result; mode `envelope`, in an error message.
const ECHO: &str = r#"case "$2" in
  result) cat 'DATA/result.json' ;;
  envelope) cat 'DATA/envelope.json' ;;
esac
"#;

#[test]
fn content_is_exported_only_when_asked_and_never_a_secret() {
    let td = TestDir::new();
    let receiver = Receiver::start();
    let data = td.state_dir();
    let spellings: serde_json::Map<String, Value> =
        whole_spellings(SECRET).into_iter().map(|(label, spelled)| (label, json!(spelled))).collect();
    let mut result = spellings.clone();
    result.insert("visible".into(), json!("result-shown"));
    std::fs::write(data.join("result.json"), Value::Object(result).to_string()).unwrap();
    let quoted: Vec<String> = spellings.values().map(|s| s.as_str().unwrap().to_string()).collect();
    let message = format!("error-shown: {}", quoted.join(" | "));
    std::fs::write(data.join("envelope.json"), json!({"outcome": "error", "message": message}).to_string()).unwrap();
    let script = td.script("echo_secret.sh", &ECHO.replace("DATA", &data.display().to_string()));
    let tool = |mode: &str| {
        let mut tool = bundle::tool(&format!("echo.{mode}"), bundle::exec(script.to_str().unwrap(), &[mode]));
        tool["secrets"] = json!([SECRET_ID]);
        bundle::with_fs(tool, &data)
    };
    let caps = bundle::caps(&format!("exec = true\nsecrets = {}\n", json!([SECRET_ID])), &data);
    let bundle = td.bundle("echoer", json!([tool("result"), tool("envelope")]), &caps);
    let arguments = json!({"echo": SECRET, "note": "argument-shown"});
    let run = |tool: &str, capture: bool, exit: i32| {
        let mut command = td.call(&bundle, tool, arguments.clone());
        command.args(["--format", "json"]).env(ENDPOINT, receiver.endpoint()).env(SECRET_ENV, SECRET);
        if capture {
            command.env(CAPTURE, "true");
        }
        let out = command.output().unwrap();
        assert_eq!(code(&out), exit, "{tool}: {}", text(&out));
        ids(&out).0
    };
    let plain = run("echo.result", false, 0);
    let captured = run("echo.result", true, 0);
    let failed = run("echo.envelope", true, 1);
    let spans = receiver.wait_for(3);
    assert_eq!(spans.len(), 3);

    let attributes = span_of(&spans, &plain).attributes();
    assert!(!attributes.contains_key("gen_ai.tool.call.arguments"), "{attributes:#?}");
    assert!(!attributes.contains_key("gen_ai.tool.call.result"), "{attributes:#?}");

    let attributes = span_of(&spans, &captured).attributes();
    let shown_arguments: Value =
        serde_json::from_str(attributes["gen_ai.tool.call.arguments"].as_str().unwrap()).unwrap();
    assert_eq!(shown_arguments, json!({"echo": "[redacted]", "note": "argument-shown"}));
    let shown_result: Value = serde_json::from_str(attributes["gen_ai.tool.call.result"].as_str().unwrap()).unwrap();
    assert_eq!(shown_result["visible"], "result-shown");
    assert_eq!(shown_result["raw"], "[redacted]");

    let span = span_of(&spans, &failed);
    let (status, description) = span.status();
    assert_eq!(status, ERROR);
    let scrubbed = vec!["[redacted]"; spellings.len()].join(" | ");
    assert_eq!(description, format!("tool `echo.envelope` failed: error-shown: {scrubbed}"));
    assert_eq!(span.attributes()["error.type"], "tool");

    let needles = needles(SECRET, &["Qx9k", "Lt3Nb8"]);
    let bodies = receiver.bodies();
    assert!(!bodies.is_empty());
    for body in &bodies {
        assert_absent(&needles, "an exported body", body);
    }
}

#[test]
fn trace_export_otlp_sends_the_spans_a_trace_sent_live() {
    let td = TestDir::new();
    let live = Receiver::start();
    let bundle = mailer(&td);
    let trace = "0197b0ff-0000-7000-8000-0000000e4a01";
    let in_trace = ["--trace-id", trace];
    let mut invocations = Vec::new();
    for (tool, exit) in [("mail.ok", 0), ("mail.fail", 1), ("mail.flaky", 0)] {
        let out = call(&td, &bundle, tool, &live.endpoint(), &in_trace);
        assert_eq!(code(&out), exit, "{}", text(&out));
        invocations.push(ids(&out).0);
    }
    td.write_override("mailer", "[capabilities]\nexec = false\n");
    let out = call(&td, &bundle, "mail.ok", &live.endpoint(), &in_trace);
    assert_eq!(code(&out), 3, "{}", text(&out));
    invocations.push(ids(&out).0);
    let sent_live = live.wait_for(4);

    let after = Receiver::start();
    let out = td.rlp().args(["trace", "export", trace, "--otlp", &after.endpoint()]).output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert_eq!(stderr(&out), format!("Sent 4 spans of trace {trace} to {}/v1/traces.\n", after.endpoint()));
    let exported = after.wait_for(4);
    assert_eq!(exported.len(), 4);
    for invocation in &invocations {
        let (then, now) = (span_of(&sent_live, invocation), span_of(&exported, invocation));
        let mut live_attributes = then.attributes();
        assert_eq!(live_attributes.remove("rlp.bundle.version"), Some(json!("0.1.0")), "known live only");
        assert_eq!(now.attributes(), live_attributes, "{invocation}");
        assert_eq!(
            (&now.span.name, now.ids(), now.events(), now.status()),
            (&then.span.name, then.ids(), then.events(), then.status())
        );
        assert_eq!(
            (now.span.start_time_unix_nano, now.span.end_time_unix_nano),
            (then.span.start_time_unix_nano, then.span.end_time_unix_nano)
        );
    }

    let dead = dead_endpoint();
    let out = td.rlp().args(["trace", "export", "last", "--otlp", &dead]).output().unwrap();
    assert_eq!(code(&out), 1, "{}", text(&out));
    assert!(
        stderr(&out).starts_with(&format!("error: cannot send the spans of trace {trace} to {dead}/v1/traces: ")),
        "{}",
        stderr(&out)
    );
    let hung = Blackhole::start();
    let out = td
        .rlp()
        .args(["trace", "export", trace, "--otlp"])
        .env(ENDPOINT, hung.endpoint())
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "300")
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}", text(&out));
    rlp_snapshot!(&td, &out);
    let out = td.rlp().args(["trace", "export", trace, "--otlp"]).output().unwrap();
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(stderr(&out).starts_with("error: no collector to send to"), "{}", stderr(&out));
}
