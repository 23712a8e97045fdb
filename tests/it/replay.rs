//! The ledger commands (`rlp trace list|show|export|import|verify`) and
//! deterministic replay (`rlp replay`), end to end: real `rlp` processes,
//! real tool processes, real SQLite files and a real HTTP server on
//! 127.0.0.1. Every test uses its own temporary homes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rlp::event::Outcome;
use rlp::ledger::query::TraceInput;
use rlp::replay::divergence::DivergenceKind;
use rlp::replay::source::{Answer, ReplaySource};
use serde_json::{Value, json};

use crate::support::bundle;
use crate::support::http::{Server, reply};
use crate::support::ledger;
use crate::support::output::{assert_contains, stderr, stdout, stdout_json};
use crate::support::process::closed_pipe;
use crate::support::{TestDir, files};
use crate::support::{rlp_snapshot, text_snapshot};

const TRACE: &str = "0197a000-0000-7000-8000-00000000aaaa";

// ---------------------------------------------------------------- helpers

/// Writes a data file a `cat_file.sh` tool prints, in the sandbox's state
/// folder (which [`data_caps`] grants).
pub(crate) fn data(td: &TestDir, name: &str, value: Value) -> String {
    let path = td.state_dir().join(name);
    std::fs::write(&path, value.to_string()).unwrap();
    path.display().to_string()
}

/// A policy granting `grants` (lines under `[capabilities]`) and the folder
/// of the data files.
pub(crate) fn data_caps(td: &TestDir, grants: &str) -> String {
    bundle::caps(grants, &td.state_dir())
}

/// `rlp tools call` into trace [`TRACE`] with runtime home `home`; asserts success.
fn record(td: &TestDir, home: &str, bundle: &Path, tool: &str, args: Value) {
    let output = td
        .rlp_in(home)
        .args(["tools", "call"])
        .arg(bundle)
        .arg(tool)
        .args(["--args", &args.to_string(), "--trace-id", TRACE, "--yes"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "call {tool}: {}", stderr(&output));
}

/// `rlp trace export TRACE -o <file>` from `home`; returns the file.
fn export(td: &TestDir, home: &str, name: &str) -> PathBuf {
    let file = td.join(name);
    let output = td.rlp_in(home).args(["trace", "export", TRACE, "-o"]).arg(&file).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "export: {}", stderr(&output));
    file
}

/// The rows of the ledger of `home`.
fn rows(td: &TestDir, home: &str) -> i64 {
    ledger::rows(&td.ledger_path_in(home))
}

/// Tool `id` printing `data_file` with `cat_file.sh`; it declares the
/// folder of the file (so each call is audited for `exec` and `fs:`).
pub(crate) fn exec_tool(id: &str, data_file: &str, input_schema: Value, result_schema: Value) -> Value {
    let tool = json!({
        "id": id,
        "description": format!("test tool {id}"),
        "transport": {"kind": "exec", "command": files::fixture("replay/cat_file.sh"), "args": [data_file]},
        "input_schema": input_schema,
        "result_schema": result_schema,
        "observability": {"tags": ["test"]},
    });
    bundle::with_fs(tool, Path::new(data_file).parent().unwrap())
}

fn frames(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Replaces each invocation id of the trace by `<inv-N>` (in call order), so
/// reports can be compared with stored snapshots.
fn redact(text: &str, export: &Path) -> String {
    let mut text = text.to_string();
    let mut n = 0;
    for frame in frames(export) {
        if frame["kind"] == "tool.call" {
            n += 1;
            let id = frame["payload"]["invocation_id"].as_str().unwrap().to_string();
            text = text.replace(&id, &format!("<inv-{n}>"));
        }
    }
    text
}

// --------------------------------------------------- a hand-written trace

const INV_A: &str = "0197a000-0000-7000-8000-0000000000a1";
const INV_B: &str = "0197a000-0000-7000-8000-0000000000b2";

/// One frame line of the hand-written trace (no hashes: import computes them).
fn frame_line(id: u64, kind: &str, actor: &str, payload: Value) -> String {
    let frame = json!({
        "id": id,
        "ts_ms": 1_764_000_000_000u64 + id * 7,
        "actor": actor,
        "kind": kind,
        "scope": "desk",
        "payload": payload,
        "provenance": {"agent": "desk", "msg_id": format!("0197a000-0000-7000-8000-{id:012}"), "trace_id": TRACE},
    });
    format!("{frame}\n")
}

/// Two calls: `notes.read` succeeds; `weather.get` fails once (retried), then succeeds.
fn written_trace() -> Vec<String> {
    vec![
        frame_line(
            1,
            "cap.audit",
            "runtime",
            json!({"v": 1, "tool": "notes.read", "capability": "exec", "decision": "allow", "reason": "policy.caps grants exec", "invocation_id": INV_A}),
        ),
        frame_line(
            2,
            "tool.call",
            "runtime",
            json!({"v": 1, "tool": "notes.read", "args": {}, "invocation_id": INV_A, "input_schema": "inline", "tags": ["notes"]}),
        ),
        frame_line(
            3,
            "tool.result",
            "tool:notes.read",
            json!({"v": 1, "invocation_id": INV_A, "result": {"note": "hello"}, "attempt": 1, "duration_ms": 4}),
        ),
        frame_line(
            4,
            "tool.call",
            "runtime",
            json!({"v": 1, "tool": "weather.get", "args": {"city": "Oslo"}, "invocation_id": INV_B, "input_schema": "inline", "tags": []}),
        ),
        frame_line(
            5,
            "tool.result",
            "tool:weather.get",
            json!({"v": 1, "invocation_id": INV_B, "error": {"message": "busy", "kind": "tool", "transient": true, "will_retry": true}, "attempt": 1, "duration_ms": 9}),
        ),
        frame_line(
            6,
            "tool.result",
            "tool:weather.get",
            json!({"v": 1, "invocation_id": INV_B, "result": {"temp": 21}, "attempt": 2, "duration_ms": 12}),
        ),
    ]
}

fn write_lines(td: &TestDir, name: &str, lines: &[String]) -> PathBuf {
    let path = td.join(name);
    std::fs::write(&path, lines.concat()).unwrap();
    path
}

// ------------------------------------------------------------------ tests

/// exec + http calls → export → import into another home → export again:
/// identical bytes; strict replay exits 0, returns every recorded result,
/// and gives the same report bytes every time and from either source.
#[test]
fn record_export_import_and_replay_strictly() {
    let td = TestDir::new();
    let forecast = json!({"city": "Oslo", "days": [{"high": 7}, {"high": 9}]}).to_string();
    let server = Server::start(move |_| reply(200, &forecast));
    let notes = data(&td, "notes.json", json!({"note": "hello", "n": 1.5}));
    let tools = json!([
        exec_tool("notes.read", &notes, json!({"type": "object"}), json!({"type": "object", "required": ["note"]})),
        {
            "id": "forecast.get",
            "description": "test tool forecast.get",
            "transport": {"kind": "http", "method": "GET", "url": format!("http://127.0.0.1:{}/forecast/{{city}}", server.port)},
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            "result_schema": {"type": "object", "required": ["days"]},
        }
    ]);
    let bundle = td.bundle("desk", tools, &data_caps(&td, "exec = true\nnet = [\"127.0.0.1\"]\n"));
    record(&td, "a", &bundle, "notes.read", json!({}));
    record(&td, "a", &bundle, "forecast.get", json!({"city": "Oslo"}));
    record(&td, "a", &bundle, "notes.read", json!({"again": true}));

    let golden = export(&td, "a", "golden.jsonl");
    let lines = frames(&golden);
    let kinds: Vec<&str> = lines.iter().map(|f| f["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "cap.audit",
            "cap.audit",
            "tool.call",
            "tool.result",
            "cap.audit",
            "cap.audit",
            "tool.call",
            "tool.result",
            "cap.audit",
            "cap.audit",
            "tool.call",
            "tool.result"
        ]
    );
    for (i, frame) in lines.iter().enumerate() {
        let keys: Vec<&String> = frame.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["id", "ts_ms", "actor", "kind", "scope", "payload", "provenance", "hash_blake3", "chain_blake3"]
        );
        assert_eq!(frame["id"], i as u64 + 1);
        assert_eq!(frame["provenance"]["trace_id"], TRACE);
    }

    // Import into another home, export again: byte for byte the same.
    let imported = td.rlp_in("b").args(["trace", "import"]).arg(&golden).output().unwrap();
    assert_eq!(imported.status.code(), Some(0), "{}", stderr(&imported));
    assert_eq!(
        stdout(&imported).trim_end().rsplit_once(" into ").unwrap().0,
        format!("Imported 12 frames (3 calls) of trace {TRACE}")
    );
    let again = export(&td, "b", "again.jsonl");
    assert_eq!(std::fs::read(&golden).unwrap(), std::fs::read(&again).unwrap());
    // A second import of the same trace is refused, and changes nothing.
    let twice = td.rlp_in("b").args(["trace", "import"]).arg(&golden).output().unwrap();
    assert_eq!(twice.status.code(), Some(1));
    rlp_snapshot!(td.filters().literal(TRACE, "[TRACE]"), &twice);
    assert_eq!(rows(&td, "b"), 12);

    // Strict replay: exit 0, every result identical to the recorded one.
    let replay = |home: &str, source: &str, format: &str| {
        let output = td
            .rlp_in(home)
            .args(["replay", source, "--bundle"])
            .arg(&bundle)
            .args(["--format", format])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
        output.stdout
    };
    let golden_arg = golden.display().to_string();
    let report = replay("b", &golden_arg, "json");
    let doc: Value = serde_json::from_slice(&report).unwrap();
    assert_eq!(doc["clean"], true);
    assert_eq!(doc["summary"]["calls"], 3);
    assert_eq!(doc["summary"]["ok"], 3);
    assert_eq!(doc["divergences"], json!([]));
    let recorded: HashMap<String, Value> = lines
        .iter()
        .filter(|f| f["kind"] == "tool.result")
        .map(|f| (f["payload"]["invocation_id"].as_str().unwrap().to_string(), f["payload"]["result"].clone()))
        .collect();
    let calls = doc["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 3);
    for call in calls {
        assert_eq!(call["status"], "ok");
        assert_eq!(call["output"]["result"], recorded[call["invocation_id"].as_str().unwrap()]);
    }
    assert_eq!(calls[1]["output"]["result"], json!({"city": "Oslo", "days": [{"high": 7}, {"high": 9}]}));
    assert_eq!((calls[1]["position"].as_u64(), calls[1]["result_position"].as_u64()), (Some(7), Some(8)));

    // Byte-identical reports: run twice, and from the ledger of either home.
    assert_eq!(replay("b", &golden_arg, "json"), report);
    assert_eq!(replay("b", TRACE, "json"), report);
    assert_eq!(replay("a", TRACE, "json"), report);
    let human = replay("a", &golden_arg, "human");
    assert_eq!(replay("b", TRACE, "human"), human);
    let human = String::from_utf8(human).unwrap();
    assert!(
        human.starts_with(&format!("Strict replay of trace {TRACE} (agent `desk`) against bundle desk 0.1.0\n")),
        "{human}"
    );
    assert!(
        human.ends_with("Result: no divergence in 12 frames, 3 calls (3 ok, 0 error, 0 diverged, 0 without result)\n"),
        "{human}"
    );
    // Strict replay runs nothing: no request reached the server, no row was added.
    assert_eq!(rows(&td, "a"), 12);
    assert_eq!(rows(&td, "b"), 12);
}

/// A tool removed, an input schema tightened, a result schema changed: every
/// divergence in one report, at its frame, in both formats.
#[test]
fn strict_replay_reports_every_divergence_at_its_frame() {
    let td = TestDir::new();
    let notes = data(&td, "notes.json", json!({"note": "hello"}));
    let weather = data(&td, "weather.json", json!({"temp": 21}));
    let stats = data(&td, "stats.json", json!({"min": 1}));
    let city = |extra: Value| {
        let mut schema = json!({"type": "string"});
        for (k, v) in extra.as_object().unwrap() {
            schema[k] = v.clone();
        }
        json!({"type": "object", "properties": {"city": schema}, "required": ["city"]})
    };
    let caps = &data_caps(&td, "exec = true\n");
    let bundle = td.bundle(
        "desk",
        json!([
            exec_tool("notes.read", &notes, json!({"type": "object"}), json!({"type": "object"})),
            exec_tool("weather.get", &weather, city(json!({})), json!({"type": "object", "required": ["temp"]})),
            exec_tool("stats.get", &stats, json!({"type": "object"}), json!({"type": "object", "required": ["min"]})),
        ]),
        caps,
    );
    record(&td, "home", &bundle, "notes.read", json!({}));
    record(&td, "home", &bundle, "weather.get", json!({"city": "Oslo"}));
    record(&td, "home", &bundle, "stats.get", json!({}));
    record(&td, "home", &bundle, "weather.get", json!({"city": "Bergen"}));
    let golden = export(&td, "home", "golden.jsonl");

    // Today's bundle: notes.read is gone, city is at most 4 characters, stats need `max` too.
    td.bundle(
        "desk",
        json!([
            exec_tool(
                "weather.get",
                &weather,
                city(json!({"maxLength": 4})),
                json!({"type": "object", "required": ["temp"]})
            ),
            exec_tool(
                "stats.get",
                &stats,
                json!({"type": "object"}),
                json!({"type": "object", "required": ["min", "max"]})
            ),
        ]),
        caps,
    );
    let run = |format: &str| {
        let output = td
            .rlp_in("home")
            .args(["replay"])
            .arg(&golden)
            .arg("--bundle")
            .arg(&bundle)
            .args(["--format", format])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{}{}", stdout(&output), stderr(&output));
        assert_eq!(stderr(&output), "");
        stdout(&output)
    };
    let human = run("human");
    let json_report = run("json");
    assert_eq!(run("human"), human, "the same inputs give the same bytes");
    assert_eq!(run("json"), json_report);

    let doc: Value = serde_json::from_str(&json_report).unwrap();
    let found: Vec<(String, u64, String)> = doc["divergences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (d["kind"].as_str().unwrap().into(), d["position"].as_u64().unwrap(), d["tool"].as_str().unwrap().into())
        })
        .collect();
    assert_eq!(
        found,
        [
            ("missing_tool".to_string(), 3, "notes.read".to_string()),
            // The input_schema of weather.get and the result_schema of stats.get changed.
            ("schema_changed".to_string(), 7, "weather.get".to_string()),
            ("schema_changed".to_string(), 12, "stats.get".to_string()),
            ("schema_mismatch".to_string(), 12, "stats.get".to_string()),
            ("args_mismatch".to_string(), 15, "weather.get".to_string()),
            ("schema_changed".to_string(), 15, "weather.get".to_string()),
        ]
    );
    assert_eq!(
        doc["summary"]["by_kind"],
        json!({"args_mismatch": 1, "missing_tool": 1, "schema_changed": 3, "schema_mismatch": 1})
    );
    insta::assert_snapshot!("strict_divergences_human", redact(&human, &golden));
    insta::assert_snapshot!("strict_divergences_json", redact(&json_report, &golden));
}

/// Live replay runs each call again through the runtime (confirmation
/// applies), records a new trace linked to the old one, and names the
/// fields that changed.
#[test]
fn live_replay_diffs_new_results_and_links_the_new_trace() {
    let td = TestDir::new();
    // The forecast every request (`GET /forecast/<city>`) gets, changed below.
    let forecast = Arc::new(Mutex::new(json!({"city": "Oslo", "days": [{"high": 7}]}).to_string()));
    let server = {
        let forecast = forecast.clone();
        Server::start(move |_| reply(200, &forecast.lock().unwrap()))
    };
    let weather = data(&td, "weather.json", json!({"temp": 21, "sky": "clear"}));
    let mut now = exec_tool("weather.now", &weather, json!({"type": "object"}), json!({"type": "object"}));
    now["requires_confirmation"] = json!(true);
    let tools = json!([
        now,
        {
            "id": "forecast.get",
            "description": "test tool forecast.get",
            "transport": {"kind": "http", "method": "GET", "url": format!("http://127.0.0.1:{}/forecast/{{city}}", server.port)},
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
            "result_schema": {"type": "object"},
        }
    ]);
    let bundle = td.bundle("desk", tools, &data_caps(&td, "exec = true\nnet = [\"127.0.0.1\"]\n"));
    record(&td, "home", &bundle, "weather.now", json!({}));
    record(&td, "home", &bundle, "forecast.get", json!({"city": "Oslo"}));
    let golden = export(&td, "home", "golden.jsonl");
    let live = |extra: &[&str]| {
        td.rlp_in("home")
            .arg("replay")
            .arg(&golden)
            .arg("--bundle")
            .arg(&bundle)
            .args(["--mode", "live", "--format", "json"])
            .args(extra)
            .output()
            .unwrap()
    };

    // Unchanged tools: nothing diverges.
    let same = live(&["--yes"]);
    assert_eq!(same.status.code(), Some(0), "{}{}", stdout(&same), stderr(&same));

    // Without --yes and without a terminal, the call that needs confirmation is refused.
    let refused = live(&[]);
    assert_eq!(refused.status.code(), Some(3), "{}", stderr(&refused));
    rlp_snapshot!(td.filters().literal(TRACE, "[TRACE]"), &refused);
    assert_eq!(stdout(&refused), "");

    // The tools' outputs change.
    data(&td, "weather.json", json!({"temp": 25, "sky": "clear", "wind": 3}));
    *forecast.lock().unwrap() = json!({"city": "Oslo", "days": []}).to_string();
    let changed = live(&["--yes"]);
    assert_eq!(changed.status.code(), Some(1), "{}", stderr(&changed));
    let doc: Value = stdout_json(&changed);
    let divergences = doc["divergences"].as_array().unwrap();
    assert_eq!(divergences.len(), 2, "{doc:#}");
    assert_eq!(divergences[0]["kind"], "result_changed");
    assert_eq!(divergences[0]["position"], 5);
    assert_eq!(divergences[0]["tool"], "weather.now");
    assert_eq!(
        divergences[0]["changes"],
        json!([
            {"op": "changed", "path": "/temp", "recorded": 21, "replayed": 25},
            {"op": "added", "path": "/wind", "replayed": 3},
        ])
    );
    assert_eq!(divergences[0]["message"], "the result of `weather.now` changed (2 changes: /temp, /wind)");
    assert_eq!(divergences[1]["tool"], "forecast.get");
    assert_eq!(divergences[1]["changes"], json!([{"op": "removed", "path": "/days/0", "recorded": {"high": 7}}]));
    let calls = doc["calls"].as_array().unwrap();
    assert_eq!(calls[0]["recorded"]["result"], json!({"sky": "clear", "temp": 21}));
    assert_eq!(calls[0]["output"]["result"], json!({"sky": "clear", "temp": 25, "wind": 3}));
    assert_eq!(calls[0]["status"], "diverged");

    // The new trace is in the ledger, linked to the old one by its first frame.
    let new_trace = doc["new_trace_id"].as_str().unwrap().to_string();
    assert_ne!(new_trace, TRACE);
    let list = td.rlp_in("home").args(["trace", "list", "--format", "json"]).output().unwrap();
    let list: Value = stdout_json(&list);
    let entry = list.as_array().unwrap().iter().find(|t| t["trace_id"] == new_trace.as_str()).unwrap();
    assert_eq!(entry["replay_of"], TRACE);
    assert_eq!(entry["calls"], 2);
    let export = td.rlp_in("home").args(["trace", "export", &new_trace]).output().unwrap();
    let first: Value = serde_json::from_str(stdout(&export).lines().next().unwrap()).unwrap();
    assert_eq!(first["kind"], "trace.replay");
    assert_eq!(first["payload"]["replay_of"], TRACE);
    assert_eq!(first["payload"]["mode"], "live");

    // Replaying from the ledger itself (read while the new calls are written) finds the same.
    let by_id = td
        .rlp_in("home")
        .args(["replay", TRACE, "--bundle"])
        .arg(&bundle)
        .args(["--mode", "live", "--format", "json", "--yes"])
        .output()
        .unwrap();
    assert_eq!(by_id.status.code(), Some(1), "{}", stderr(&by_id));
    let by_id: Value = stdout_json(&by_id);
    assert_eq!(by_id["divergences"], doc["divergences"]);
    assert_ne!(by_id["new_trace_id"], doc["new_trace_id"]);

    // The human report names the changed fields too.
    let human = td
        .rlp_in("home")
        .arg("replay")
        .arg(&golden)
        .arg("--bundle")
        .arg(&bundle)
        .args(["--mode", "live", "--yes"])
        .output()
        .unwrap();
    assert_eq!(human.status.code(), Some(1));
    rlp_snapshot!(td.filters().literal(TRACE, "[TRACE]"), &human);
}

/// `rlp trace verify` names the row that was edited or removed (exit 1).
#[test]
fn verify_names_the_edited_or_removed_row() {
    let td = TestDir::new();
    // A recorded run: its times, durations and hashes differ from run to run.
    let filters = td.filters().literal(TRACE, "[TRACE]").digests();
    let bundle = notes_bundle(&td);
    for n in 0..3 {
        record(&td, "a", &bundle, "notes.read", json!({"n": n}));
    }
    std::fs::create_dir_all(td.join("b/pog")).unwrap();
    let conn = rusqlite::Connection::open(td.ledger_path_in("a")).unwrap();
    conn.execute("VACUUM INTO ?1", [td.ledger_path_in("b").display().to_string()]).unwrap();
    drop(conn);
    let verify =
        |home: &str, format: &str| td.rlp_in(home).args(["trace", "verify", "--format", format]).output().unwrap();

    let intact = verify("a", "human");
    assert_eq!(intact.status.code(), Some(0), "{}", stdout(&intact));
    rlp_snapshot!(&filters, &intact);

    // Edit one row's payload in place.
    let conn = rusqlite::Connection::open(td.ledger_path_in("a")).unwrap();
    let changed = conn
        .execute("UPDATE events SET payload_json = replace(payload_json, '\"n\":1', '\"n\":7') WHERE id = 7", [])
        .unwrap();
    assert_eq!(changed, 1);
    drop(conn);
    let edited = verify("a", "human");
    assert_eq!(edited.status.code(), Some(1));
    rlp_snapshot!(&filters, &edited);
    let doc: Value = serde_json::from_slice(&verify("a", "json").stdout).unwrap();
    assert_eq!(doc["intact"], false);
    assert_eq!(doc["problems"][0]["row"], 7);
    assert_eq!(doc["problems"][0]["problem"], "edited");

    // Delete a row in the copy.
    let conn = rusqlite::Connection::open(td.ledger_path_in("b")).unwrap();
    conn.execute("DELETE FROM events WHERE id = 4", []).unwrap();
    drop(conn);
    let removed = verify("b", "json");
    assert_eq!(removed.status.code(), Some(1));
    let doc: Value = stdout_json(&removed);
    assert_eq!(doc["rows"], 11);
    assert_eq!(doc["problems"].as_array().unwrap().len(), 1, "{doc:#}");
    assert_eq!(doc["problems"][0]["row"], 5);
    assert_eq!(doc["problems"][0]["problem"], "removed");
    assert_eq!(
        doc["problems"][0]["message"],
        "frame 4 of the trace is missing before this row: removed, or rows were reordered"
    );

    // Export refuses an edited trace.
    let export = td.rlp_in("a").args(["trace", "export", TRACE]).output().unwrap();
    assert_eq!(export.status.code(), Some(1));
    rlp_snapshot!(&filters, &export);

    // No ledger at all: exit 2.
    let none = verify("empty", "human");
    assert_eq!(none.status.code(), Some(2));
    rlp_snapshot!(&filters, &none);
}

/// Malformed files are refused whole, with line numbers (exit 2); nothing is imported.
#[test]
fn import_refuses_malformed_files_with_line_numbers() {
    let td = TestDir::new();
    let good = written_trace();
    let import = |home: &str, file: &Path| td.rlp_in(home).args(["trace", "import"]).arg(file).output().unwrap();

    // A truncated last line.
    let mut truncated = good.clone();
    let last = truncated.pop().unwrap();
    truncated.push(last[..last.len() / 2].to_string());
    let output = import("fresh", &write_lines(&td, "truncated.jsonl", &truncated));
    assert_eq!(output.status.code(), Some(2));
    rlp_snapshot!(td.filters().literal(TRACE, "[TRACE]"), &output);
    assert!(!td.ledger_path_in("fresh").exists(), "a refused import into a new home leaves no ledger");

    // An unknown kind, a result without its call, and bad JSON: all listed.
    let mut bad = good.clone();
    bad[0] = bad[0].replace("cap.audit", "tool.question");
    bad[1] = frame_line(
        2,
        "tool.result",
        "tool:x",
        json!({"v": 1, "invocation_id": "0197a000-0000-7000-8000-0000000000ff", "result": 1}),
    );
    bad[3] = "{\"id\": 4,\n".to_string();
    let output = import("fresh", &write_lines(&td, "bad.jsonl", &bad));
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    let listed: Vec<&str> = text.lines().filter(|l| l.starts_with("  line ")).collect();
    assert_eq!(
        listed,
        [
            "  line 1: unknown kind `tool.question` (known: tool.call, tool.result, cap.audit, tool.confirm, tool.inquiry, tool.answer, tool.sample, tool.hook, trace.replay, tool.discover, resource.list, resource.templates, resource.read, resource.subscribe, resource.updated, prompt.list, prompt.get, completion.complete, server.changed)",
            "  line 2: tool.result for invocation 0197a000-0000-7000-8000-0000000000ff has no tool.call before it (or that call already has its final result): a result without its call",
            "  line 3: tool.result for invocation 0197a000-0000-7000-8000-0000000000a1 has no tool.call before it (or that call already has its final result): a result without its call",
            "  line 4: not valid JSON: EOF while parsing a value (column 9)",
            &format!(
                "  line 5: tool.result for invocation {INV_B} has no tool.call before it (or that call already has its final result): a result without its call"
            ),
            &format!(
                "  line 6: tool.result for invocation {INV_B} has no tool.call before it (or that call already has its final result): a result without its call"
            ),
        ],
        "{text}"
    );
    rlp_snapshot!(td.filters().literal(TRACE, "[TRACE]"), &output);
    assert!(!td.ledger_path_in("fresh").exists());

    // An edited frame whose hash no longer matches.
    let exported_home = "src";
    let good_file = write_lines(&td, "good.jsonl", &good);
    assert_eq!(import(exported_home, &good_file).status.code(), Some(0));
    let hashed = export(&td, exported_home, "hashed.jsonl");
    let edited = std::fs::read_to_string(&hashed).unwrap().replace("\"note\":\"hello\"", "\"note\":\"HELLO\"");
    let edited_file = td.join("edited.jsonl");
    std::fs::write(&edited_file, edited).unwrap();

    // Into a ledger that already holds a trace: refused, and the ledger is unchanged.
    let other: Vec<String> = good.iter().map(|l| l.replace(TRACE, "0197a000-0000-7000-8000-00000000bbbb")).collect();
    assert_eq!(import("busy", &write_lines(&td, "other.jsonl", &other)).status.code(), Some(0));
    let output = import("busy", &edited_file);
    assert_eq!(output.status.code(), Some(2));
    rlp_snapshot!(td.filters().literal(TRACE, "[TRACE]"), &output);
    assert_eq!(rows(&td, "busy"), 6);
    let list = td.rlp_in("busy").args(["trace", "list", "--format", "json"]).output().unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&list.stdout).unwrap().as_array().unwrap().len(), 1);
}

/// `trace list` and `trace show` of a known trace, in both formats.
#[test]
fn list_and_show_a_trace() {
    let td = TestDir::new();
    let file = write_lines(&td, "written.jsonl", &written_trace());
    let output = td.rlp_in("home").args(["trace", "import", "--format", "json"]).arg(&file).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let doc: Value = stdout_json(&output);
    assert_eq!(
        (doc["frames"].as_u64(), doc["calls"].as_u64(), doc["first_row"].as_u64(), doc["last_row"].as_u64()),
        (Some(6), Some(2), Some(1), Some(6))
    );

    let run = |args: &[&str]| {
        let output = td.rlp_in("home").args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        stdout(&output)
    };
    insta::assert_snapshot!("list_human", run(&["trace", "list"]));
    insta::assert_snapshot!("list_json", run(&["trace", "list", "--format", "json"]));
    insta::assert_snapshot!("show_human", run(&["trace", "show", TRACE]));
    let show_json = run(&["trace", "show", TRACE, "--format", "json"]);
    insta::assert_snapshot!("show_json", show_json);
    let doc: Value = serde_json::from_str(&show_json).unwrap();
    assert_eq!(doc["summary"]["retries"], 1);
    // The file itself can be shown too, with the same frames (no row ids).
    let from_file: Value =
        serde_json::from_str(&run(&["trace", "show", file.to_str().unwrap(), "--format", "json"])).unwrap();
    assert_eq!(from_file["frames"].as_array().unwrap().len(), 6);
    assert_eq!(from_file["frames"][5]["row"], Value::Null);
    assert_eq!(from_file["frames"][5]["result"], json!({"temp": 21}));

    // An empty home lists nothing.
    let empty = td.rlp_in("empty").args(["trace", "list", "--format", "json"]).output().unwrap();
    assert_eq!(stdout(&empty), "[]\n");
}

/// Unreadable input stops replay with exit 2 and a message that says what to do.
#[test]
fn replay_refuses_unreadable_input() {
    let td = TestDir::new();
    let bundle = notes_bundle(&td);
    let file = write_lines(&td, "written.jsonl", &written_trace());
    // Each refusal's whole output, in one snapshot.
    let mut shown = String::new();
    let mut replay = |trace: &str, bundle: &Path| {
        let output = td.rlp_in("home").args(["replay", trace, "--bundle"]).arg(bundle).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{trace}: {}", stdout(&output));
        assert_eq!(stdout(&output), "");
        shown.push_str(&format!("$ rlp replay {trace}\n{}", stderr(&output)));
    };
    replay(TRACE, &bundle);
    record(&td, "home", &bundle, "notes.read", json!({}));
    replay("0197a000-0000-7000-8000-00000000cccc", &bundle);
    replay("nope.jsonl", &bundle);
    let empty = write_lines(&td, "empty.jsonl", &[]);
    replay(empty.to_str().unwrap(), &bundle);
    let broken = write_lines(&td, "broken.jsonl", &["{\"id\": 1}\n".to_string()]);
    replay(broken.to_str().unwrap(), &bundle);
    std::fs::remove_file(bundle.join("manifest.toml")).unwrap();
    replay(file.to_str().unwrap(), &bundle);
    text_snapshot!(
        td.filters().literal("0197a000-0000-7000-8000-00000000cccc", "[UNKNOWN]").literal(TRACE, "[TRACE]"),
        shown
    );
}

/// A bundle `desk` with tool `notes.read` alone, answering with a fixed
/// note and accepting any object.
fn notes_bundle(td: &TestDir) -> PathBuf {
    let notes = data(td, "notes.json", json!({"note": "hello"}));
    td.bundle(
        "desk",
        json!([exec_tool("notes.read", &notes, json!({"type": "object"}), json!({"type": "object"}))]),
        &data_caps(td, "exec = true\n"),
    )
}

/// A bundle `desk` with the two tools of [`written_trace`], both answering
/// with a fixed note and accepting any object.
fn desk_bundle(td: &TestDir) -> PathBuf {
    let notes = data(td, "notes.json", json!({"note": "hello"}));
    td.bundle(
        "desk",
        json!([
            exec_tool("notes.read", &notes, json!({"type": "object"}), json!({"type": "object"})),
            exec_tool("weather.get", &notes, json!({"type": "object"}), json!({"type": "object"})),
        ]),
        &data_caps(td, "exec = true\n"),
    )
}

/// A trace where calls have no result (or results no call) is `invalid_trace`.
#[test]
fn strict_replay_flags_an_inconsistent_trace() {
    let td = TestDir::new();
    let bundle = desk_bundle(&td);
    let mut lines = written_trace();
    lines.truncate(5); // weather.get's final result is gone: its retry is the last frame.
    let file = write_lines(&td, "cut.jsonl", &lines);
    let output = td
        .rlp_in("home")
        .args(["replay"])
        .arg(&file)
        .arg("--bundle")
        .arg(&bundle)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let doc: Value = stdout_json(&output);
    assert_eq!(doc["divergences"].as_array().unwrap().len(), 1);
    assert_eq!(doc["divergences"][0]["kind"], "invalid_trace");
    assert_eq!(doc["divergences"][0]["position"], 4);
    assert_eq!(doc["divergences"][0]["invocation_id"], INV_B);
    assert_eq!(doc["calls"][1]["status"], "no_result");
    assert_eq!(doc["calls"][1]["attempts"], 1);
}

/// The library replay source answers an agent's calls from a recording and
/// reports extra, unused and out-of-order calls.
#[test]
fn replay_source_answers_calls_from_a_recording() {
    let td = TestDir::new();
    let file = write_lines(&td, "written.jsonl", &written_trace());
    let mut source = ReplaySource::load(&TraceInput::File(file)).unwrap();
    assert_eq!(source.recordings().len(), 2);
    // weather.get first (out of order), with the same arguments spelled differently.
    match source.answer("weather.get", &json!({"city": "Oslo"})) {
        Answer::Recorded(r) => {
            assert_eq!(r.outcome, Outcome::Result(json!({"temp": 21})));
            assert_eq!((r.position, r.result_position), (4, 6));
        }
        Answer::NotRecorded(_) => panic!("weather.get was recorded"),
    }
    let Answer::NotRecorded(miss) = source.answer("weather.get", &json!({"city": "Bergen"})) else {
        panic!("weather.get with Bergen was not recorded")
    };
    assert_eq!(miss.closest, None, "the one weather.get recording was used");
    let divergences = source.finish();
    let found: Vec<(DivergenceKind, Option<u64>, Option<u64>)> =
        divergences.iter().map(|d| (d.kind, d.position, d.call_number)).collect();
    assert_eq!(
        found,
        [
            (DivergenceKind::OrderDivergence, Some(4), Some(1)),
            (DivergenceKind::ExtraCall, None, Some(2)),
            (DivergenceKind::UnusedRecording, Some(2), None),
        ]
    );
    assert_eq!(divergences[2].message, "the recorded call of `notes.read` at #2 was never made");
}

/// Gives each line the `id` and `msg_id` of its place in the file (after
/// lines were added or removed).
fn renumber(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let id = i as u64 + 1;
            let mut frame: Value = serde_json::from_str(line).unwrap();
            frame["id"] = json!(id);
            frame["provenance"]["msg_id"] = json!(format!("0197a000-0000-7000-8000-{id:012}"));
            format!("{frame}\n")
        })
        .collect()
}

/// Strict replay of `file` against `bundle` as JSON; asserts the exit code.
fn replay_json(td: &TestDir, file: &Path, bundle: &Path, code: i32) -> Value {
    let output = td
        .rlp_in("home")
        .arg("replay")
        .arg(file)
        .arg("--bundle")
        .arg(bundle)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(code), "{}{}", stdout(&output), stderr(&output));
    stdout_json(&output)
}

/// A call whose arguments and result both no longer validate has both
/// divergences reported.
#[test]
fn strict_replay_reports_args_and_schema_mismatch_of_one_call() {
    let td = TestDir::new();
    let notes = data(&td, "notes.json", json!({"note": "hello"}));
    let bundle = td.bundle(
        "desk",
        json!([
            exec_tool(
                "notes.read",
                &notes,
                json!({"type": "object", "required": ["id"]}),
                json!({"type": "object", "required": ["body"]})
            ),
            exec_tool("weather.get", &notes, json!({"type": "object"}), json!({"type": "object"})),
        ]),
        &data_caps(&td, "exec = true\n"),
    );
    let file = write_lines(&td, "written.jsonl", &written_trace());
    let doc = replay_json(&td, &file, &bundle, 1);
    let found: Vec<(&str, u64, &str)> = doc["divergences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["kind"].as_str().unwrap(), d["position"].as_u64().unwrap(), d["details"][0].as_str().unwrap()))
        .collect();
    assert_eq!(
        found,
        [
            ("args_mismatch", 2, "(root): \"id\" is a required property"),
            ("schema_mismatch", 3, "(root): \"body\" is a required property"),
        ]
    );
    assert_eq!(doc["calls"][0]["divergences"], json!(["args_mismatch", "schema_mismatch"]));
    assert_eq!(doc["calls"][0]["status"], "diverged");
    assert_eq!(doc["summary"]["by_kind"], json!({"args_mismatch": 1, "schema_mismatch": 1}));
}

/// A second `tool.call` for an invocation still waiting is an
/// `invalid_trace`, not another call: the counts add up to the calls listed.
#[test]
fn strict_replay_counts_each_listed_call_once() {
    let td = TestDir::new();
    let bundle = desk_bundle(&td);
    let mut lines = written_trace();
    lines.insert(2, lines[1].clone());
    let file = write_lines(&td, "twice.jsonl", &renumber(&lines));
    let doc = replay_json(&td, &file, &bundle, 1);
    let summary = &doc["summary"];
    assert_eq!(
        json!([
            summary["frames"],
            summary["calls"],
            summary["ok"],
            summary["errors"],
            summary["diverged"],
            summary["no_result"]
        ]),
        json!([7, 2, 2, 0, 0, 0])
    );
    assert_eq!(doc["calls"].as_array().unwrap().len(), 2);
    assert_eq!(doc["divergences"].as_array().unwrap().len(), 1);
    assert_eq!(doc["divergences"][0]["kind"], "invalid_trace");
    assert_eq!(doc["divergences"][0]["position"], 3);
}

/// [`written_trace`] with exchanges with bridged servers after it (a
/// resource read, a prompt that failed, a resource read recorded with
/// neither a response nor an error, a notification) and content blocks
/// beside the first call's result.
fn trace_with_exchanges() -> Vec<String> {
    let mut lines = written_trace();
    lines[2] = edit_line(&lines[2], |frame| {
        frame["payload"]["content"] = json!([
            {"type": "text", "text": "hello"},
            {"type": "image", "mimeType": "image/png", "data_blake3": "ab".repeat(32), "data_bytes": 70000},
        ]);
    });
    let exchange = |id: u64, kind: &str, server: &str, method: &str, request: Value, answer: Value| {
        let mut payload = json!({"v": 1, "server": server, "method": method, "request": request});
        payload.as_object_mut().unwrap().extend(answer.as_object().unwrap().clone());
        frame_line(id, kind, "runtime", payload)
    };
    let read = json!({"response": {"contents": [{"uri": "file:///notes/a.md", "text": "# A"}]}, "duration_ms": 3});
    lines.extend([
        exchange(7, "resource.read", "files", "resources/read", json!({"uri": "file:///notes/a.md"}), read),
        exchange(8, "prompt.get", "files", "prompts/get", json!({"name": "sum"}), json!({"error": "no prompt `sum`"})),
        exchange(9, "resource.read", "files", "resources/read", json!({"uri": "file:///notes/b.md"}), json!({})),
        exchange(10, "server.changed", "files", "notifications/resources/list_changed", json!({}), json!({})),
    ]);
    lines
}

/// Exchanges with bridged servers are counted by kind and checked (one
/// without an answer is `invalid_trace` at its frame), never run again;
/// the content blocks recorded beside a result are part of the replayed
/// output.
#[test]
fn strict_replay_counts_and_checks_exchanges_and_returns_content() {
    let td = TestDir::new();
    let bundle = desk_bundle(&td);
    let file = write_lines(&td, "exchanges.jsonl", &trace_with_exchanges());
    let run = |args: &[&str]| {
        let output =
            td.rlp_in("home").arg("replay").arg(&file).arg("--bundle").arg(&bundle).args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{}{}", stdout(&output), stderr(&output));
        stdout(&output)
    };
    let (human, json_report) = (run(&[]), run(&["--format", "json"]));
    insta::assert_snapshot!("strict_exchanges_human", human);
    insta::assert_snapshot!("strict_exchanges_json", json_report);
    let doc: Value = serde_json::from_str(&json_report).unwrap();
    assert_eq!(doc["summary"]["exchanges"], 4);
    assert_eq!(doc["summary"]["exchanges_by_kind"], json!({"prompt.get": 1, "resource.read": 2, "server.changed": 1}));
    assert_eq!(
        (doc["divergences"][0]["kind"].clone(), doc["divergences"][0]["position"].clone()),
        (json!("invalid_trace"), json!(9))
    );
    assert_eq!(doc["calls"][0]["output"]["content"][1]["data_bytes"], 70000);
    // Live, the calls run again and the exchanges do not.
    let live = run(&["--mode", "live", "--yes"]);
    assert!(
        live.contains(
            "\nExchanges with bridged servers: 4, not re-run (prompt.get 1, resource.read 2, server.changed 1)\n"
        ),
        "{live}"
    );
}

/// Imports the hand-written trace into `home`; asserts success.
fn import_written(td: &TestDir, home: &str) -> PathBuf {
    let file = write_lines(td, "written.jsonl", &written_trace());
    let output = td.rlp_in(home).args(["trace", "import"]).arg(&file).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    file
}

/// A ledger file that is not an SQLite database is unreadable input (exit
/// 2), named as not a ledger, with what to do; verify still prints its JSON
/// document.
#[test]
fn a_file_that_is_not_a_ledger_is_unreadable_input() {
    let td = TestDir::new();
    let ledger = td.ledger_path_in("junk");
    std::fs::create_dir_all(ledger.parent().unwrap()).unwrap();
    std::fs::write(&ledger, "garbage\n").unwrap();
    let expected = format!(
        "error: {0} is not an rlp ledger: ledger {0}: file is not a database\n  help: restore the file from a backup, \
         or move it aside to start a new ledger; pass --home to use another runtime home\n",
        ledger.display()
    );
    let file = write_lines(&td, "written.jsonl", &written_trace());
    let runs: [&[&str]; 5] = [
        &["trace", "verify"],
        &["trace", "list"],
        &["trace", "show", TRACE],
        &["trace", "export", TRACE],
        &["trace", "import", file.to_str().unwrap()],
    ];
    for args in runs {
        let output = td.rlp_in("junk").args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
        assert_eq!(stderr(&output), expected, "{args:?}");
        assert_eq!(stdout(&output), "", "{args:?}");
    }
    let output = td.rlp_in("junk").args(["trace", "verify", "--format", "json"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stderr(&output), expected);
    let doc: Value = stdout_json(&output);
    assert_eq!(doc["ledger"], ledger.display().to_string());
    assert_eq!(doc["intact"], false);
    assert_eq!(doc["error"]["message"], expected.lines().next().unwrap().trim_start_matches("error: "));
    assert_eq!(std::fs::read(&ledger).unwrap(), b"garbage\n", "the file is left as it was");

    // No ledger at all: the JSON document too.
    let output = td.rlp_in("none").args(["trace", "verify", "--format", "json"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let doc: Value = stdout_json(&output);
    assert_eq!(doc["intact"], false);
    assert!(doc["error"]["message"].as_str().unwrap().starts_with("there is no ledger at "), "{doc}");
}

/// A ledger path that holds a FIFO or a folder is refused at once, naming
/// it, by the commands that read the ledger and by those that write it
/// (which would otherwise wait for a reader of the FIFO for ever); what is
/// there is left as it was.
#[test]
fn a_ledger_path_that_is_not_a_file_is_refused_without_waiting() {
    let td = TestDir::new();
    let bundle = notes_bundle(&td);
    let file = write_lines(&td, "written.jsonl", &written_trace());
    let fifo = td.join("ledger.fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let folder = td.join("ledger.folder");
    std::fs::create_dir(&folder).unwrap();
    let help = "help: a SQLite ledger is a regular file: move what is there aside, or name another ledger (--home, \
                or --ledger sqlite:///path/to/events.sqlite)";
    for (path, what) in [(&fifo, "a FIFO"), (&folder, "a folder")] {
        let url = format!("sqlite://{}", path.display());
        let refused = format!("{} is {what}, not a ledger file", path.display());
        let runs: [(&[&str], i32, String); 7] = [
            (&["trace", "verify"], 2, format!("error: cannot use the ledger: {refused}\n  {help}\n")),
            (&["trace", "list"], 2, format!("error: cannot use the ledger: {refused}\n  {help}\n")),
            (&["trace", "show", TRACE], 2, format!("error: cannot use the ledger: {refused}\n  {help}\n")),
            (&["trace", "export", TRACE], 2, format!("error: cannot use the ledger: {refused}\n  {help}\n")),
            (&["trace", "checkpoint"], 2, format!("error: cannot use the ledger: {refused}\n  {help}\n")),
            (
                &["trace", "import", file.to_str().unwrap()],
                2,
                format!("error: cannot use the ledger: {refused}\n  {help}\n"),
            ),
            (
                &["tools", "call", bundle.to_str().unwrap(), "notes.read", "--args", "{}"],
                2,
                format!("error: cannot use the ledger: {refused}\n  {help}\n"),
            ),
        ];
        for (args, code, expected) in runs {
            let output = td
                .rlp()
                .args(["--ledger", &url])
                .args(args)
                .timeout(std::time::Duration::from_secs(20))
                .output()
                .unwrap();
            assert_eq!((output.status.code(), stderr(&output)), (Some(code), expected), "{args:?}");
            assert_eq!(stdout(&output), "", "{args:?}");
        }
    }
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&std::fs::metadata(&fifo).unwrap().file_type()));
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 0, "nothing was made in the folder");
}

/// `trace export -o` to a folder, or into a folder that does not exist, is a
/// usage error (exit 2) naming the path.
#[test]
fn export_refuses_an_output_path_it_cannot_write() {
    let td = TestDir::new();
    import_written(&td, "home");
    let folder = td.join("out");
    std::fs::create_dir(&folder).unwrap();
    let missing = td.join("no-such-folder/x.jsonl");
    let export = |path: &Path| {
        let output = td.rlp_in("home").args(["trace", "export", TRACE, "-o"]).arg(path).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        stderr(&output)
    };
    assert_eq!(
        export(&folder),
        format!(
            "error: cannot write {}: it is a folder\n  help: pass the file to write with -o, e.g. -o golden.jsonl\n",
            folder.display()
        )
    );
    assert_eq!(
        export(&missing),
        format!(
            "error: cannot write {}: the folder {} does not exist\n  help: create the folder first, or pass another \
             path with -o\n",
            missing.display(),
            missing.parent().unwrap().display()
        )
    );
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 0, "nothing was left in the folder");
}

/// Show and replay from the ledger check each row's hash as they read it,
/// and refuse an edited row as export does (exit 1, naming the row).
#[test]
fn show_and_replay_refuse_an_edited_row_like_export() {
    let td = TestDir::new();
    let bundle = desk_bundle(&td);
    import_written(&td, "home");
    let conn = rusqlite::Connection::open(td.ledger_path_in("home")).unwrap();
    let changed = conn
        .execute("UPDATE events SET payload_json = replace(payload_json, '\"hello\"', '\"HELLO\"') WHERE id = 3", [])
        .unwrap();
    assert_eq!(changed, 1);
    drop(conn);
    let refused = "error: ledger row 3: the row does not match its hash_blake3: the ledger was edited";
    let help = "\n  help: run `rlp trace verify` to see every row that was changed\n";
    let run = |args: &[&str]| {
        let output = td.rlp_in("home").args(args).arg("--bundle").arg(&bundle).output().unwrap();
        (output.status.code(), stderr(&output), stdout(&output))
    };
    let (code, err, out) = run(&["replay", TRACE, "--format", "json"]);
    assert_eq!((code, err, out), (Some(1), format!("{refused}{help}"), String::new()));
    let output = td.rlp_in("home").args(["trace", "show", TRACE]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stderr(&output), format!("{refused}{help}"));
    assert!(!stdout(&output).contains("HELLO"), "{}", stdout(&output));
    let output = td.rlp_in("home").args(["trace", "export", TRACE]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stderr(&output), format!("{refused}; nothing was exported{help}"));
}

/// A reader that goes away (EPIPE) ends the command quietly.
#[test]
fn a_closed_stdout_ends_commands_quietly() {
    let td = TestDir::new();
    let bundle = desk_bundle(&td);
    let file = import_written(&td, "home");
    let bundle_arg = bundle.display().to_string();
    let runs: [(&[&str], i32); 6] = [
        (&["trace", "list"], 0),
        (&["trace", "show", TRACE], 0),
        (&["trace", "show", TRACE, "--format", "json"], 0),
        (&["trace", "export", TRACE], 0),
        (&["trace", "verify"], 0),
        (&["replay", file.to_str().unwrap(), "--bundle", &bundle_arg], 0),
    ];
    for (args, code) in runs {
        // As in `rlp … | head -3`.
        let output = td.command().args(args).stdout(closed_pipe()).output().unwrap();
        assert_eq!((output.status.code(), stderr(&output)), (Some(code), String::new()), "{args:?}");
    }
}

/// `trace show` gives the wait before a retry from `retry_after_ms`, and
/// claims no wait when none was recorded.
#[test]
fn show_states_the_recorded_retry_wait() {
    let td = TestDir::new();
    let mut lines = written_trace();
    lines[4] = frame_line(
        5,
        "tool.result",
        "tool:weather.get",
        json!({"v": 1, "invocation_id": INV_B, "error": {"message": "busy", "kind": "tool", "transient": true, "retry_after_ms": 100, "will_retry": true}, "attempt": 1, "duration_ms": 3}),
    );
    let with_wait = write_lines(&td, "wait.jsonl", &lines);
    let without_wait = write_lines(&td, "written.jsonl", &written_trace());
    let show = |file: &Path| {
        let output = td.rlp_in("home").args(["trace", "show"]).arg(file).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        stdout(&output).lines().nth(5).unwrap().to_string()
    };
    assert_eq!(
        show(&with_wait),
        "  #5        +0.028s  tool.result         weather.get              failed in 3 ms, will retry after 100 ms → busy  (call #4, attempt 1)"
    );
    assert_eq!(
        show(&without_wait),
        "  #5        +0.028s  tool.result         weather.get              failed in 9 ms, will retry → busy  (call #4, attempt 1)"
    );
}

/// Control characters from a trace (escape sequences, BEL) are escaped in
/// the human output of `trace show` and `replay`.
#[test]
fn human_output_escapes_control_characters_from_the_trace() {
    let td = TestDir::new();
    let notes = data(&td, "notes.json", json!({"note": "hello"}));
    let bundle = td.bundle(
        "desk",
        json!([
            exec_tool("notes.read", &notes, json!({"type": "object"}), json!({"type": "object"})),
            exec_tool("weather.get", &notes, json!({"type": "object"}), json!({"type": "object", "required": ["x"]})),
        ]),
        &data_caps(&td, "exec = true\n"),
    );
    let hostile = "boom\u{1b}[2J\u{1b}]0;owned\u{7}\u{9b}31m";
    let mut lines = written_trace();
    lines[2] = frame_line(
        3,
        "tool.result",
        "tool:notes.read",
        json!({"v": 1, "invocation_id": INV_A, "error": {"message": hostile, "kind": "tool", "will_retry": false}, "attempt": 1}),
    );
    lines[5] = frame_line(
        6,
        "tool.result",
        "tool:weather.get",
        json!({"v": 1, "invocation_id": INV_B, "result": {"temp": hostile}, "attempt": 2}),
    );
    let file = write_lines(&td, "hostile.jsonl", &lines);
    let show = td.rlp_in("home").args(["trace", "show"]).arg(&file).output().unwrap();
    let replay = td.rlp_in("home").arg("replay").arg(&file).arg("--bundle").arg(&bundle).output().unwrap();
    assert_eq!(replay.status.code(), Some(1), "{}", stderr(&replay));
    for text in [stdout(&show), stdout(&replay)] {
        assert!(!text.contains(['\u{1b}', '\u{7}', '\u{9b}']), "{text:?}");
    }
    rlp_snapshot!(td.filters().literal(TRACE, "[TRACE]"), &show);
    rlp_snapshot!(td.filters().literal(TRACE, "[TRACE]"), &replay);
    // The result is quoted as JSON, whose escapes (\u001b) leave C1 characters as they are.
}

/// Control characters in the ledger's text — an imported trace's agent, a
/// trace id written into the database — are escaped in the human output of
/// `trace list`, `trace verify` and `trace checkpoint`, which print them.
#[test]
fn list_verify_and_checkpoint_escape_control_characters_from_the_ledger() {
    let td = TestDir::new();
    let agent = "desk\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}31m";
    let lines: Vec<String> = written_trace()
        .iter()
        .map(|line| {
            edit_line(line, |f| {
                f["scope"] = json!(agent);
                f["provenance"]["agent"] = json!(agent);
            })
        })
        .collect();
    let file = write_lines(&td, "hostile.jsonl", &lines);
    assert_eq!(td.rlp().args(["trace", "import"]).arg(&file).output().unwrap().status.code(), Some(0));
    // The checkpoint key made on first use is named in a note.
    let filters = td.filters().literal(TRACE, "[TRACE]").digests().regex(r"ed25519:[A-Za-z0-9+/]+=*", "[PUBLIC_KEY]");
    let list = rlp_snapshot!(&filters, td.rlp().args(["trace", "list"]));
    // A row whose trace id clears the screen, fakes a clean report and hides the rest.
    let forged = "\u{1b}[2J\u{1b}[HLedger: every hash, chain, head and checkpoint checks out.\n\u{1b}[8m";
    let conn = rusqlite::Connection::open(td.ledger_path()).unwrap();
    conn.execute(
        "INSERT INTO events (id, ts_ms, actor, kind, scope, payload_json, provenance_json, hash_blake3, chain_blake3, \
         trace_seq) VALUES (-1, 0, 'runtime', 'cap.audit', 'x', '{}', ?1, 'zz', 'zz', 1)",
        [json!({"agent": "x", "msg_id": "m", "trace_id": forged}).to_string()],
    )
    .unwrap();
    drop(conn);
    let verify = rlp_snapshot!(&filters, td.rlp().args(["trace", "verify"]));
    assert_eq!(verify.status.code(), Some(1));
    let checkpoint = rlp_snapshot!(&filters, td.rlp().args(["trace", "checkpoint"]));
    assert_eq!(checkpoint.status.code(), Some(1));
    for output in [list, verify, checkpoint] {
        let text = stdout(&output);
        assert!(!text.contains(['\u{1b}', '\u{7}', '\u{9b}']), "{text:?}");
    }
}

/// A frame line changed by `f`.
fn edit_line(line: &str, f: impl FnOnce(&mut Value)) -> String {
    let mut frame: Value = serde_json::from_str(line).unwrap();
    f(&mut frame);
    format!("{frame}\n")
}

/// Import refuses what the format forbids, each with its line number (exit
/// 2); replay of the file refuses the same frames.
#[test]
fn import_refuses_frames_the_format_forbids() {
    let td = TestDir::new();
    let good = written_trace();
    let msg_id = |id: u64| format!("0197a000-0000-7000-8000-{id:012}");
    let mut cases: Vec<(&str, Vec<String>, String)> = Vec::new();

    let mut lines = good.clone();
    lines[2] = edit_line(&lines[2], |f| f["provenance"]["msg_id"] = json!(msg_id(2)));
    cases.push((
        "msg_id",
        lines,
        format!(
            "line 3: `provenance.msg_id` {} is also the msg_id of an earlier frame: every frame has its own msg_id",
            msg_id(2)
        ),
    ));

    let other_call = edit_line(&good[3], |f| f["payload"]["invocation_id"] = json!(INV_A));
    let lines = renumber(&[good[1].clone(), other_call, good[2].clone()]);
    cases.push((
        "shared",
        lines,
        format!("line 2: tool.call for invocation {INV_A} while the call at line 1 is still waiting for its result: every call has its own invocation_id"),
    ));

    let mut lines = good.clone();
    lines.push(good[1].clone());
    cases.push((
        "repeated",
        renumber(&lines),
        format!("line 7: tool.call for invocation {INV_A} after that call's final result: every call has its own invocation_id"),
    ));

    for actor in ["robot", "tool:", "tool:Not An Id"] {
        let mut lines = good.clone();
        lines[0] = edit_line(&lines[0], |f| f["actor"] = json!(actor));
        cases.push((
            "actor",
            lines,
            format!("line 1: `actor` is `{actor}`; it must be `runtime`, `operator`, `config` or `tool:<tool id>`"),
        ));
    }

    let mut lines = good.clone();
    lines[0] = edit_line(&lines[0], |f| f["scope"] = json!("other"));
    cases.push((
        "scope",
        lines,
        "line 1: `scope` is `other` but `provenance.agent` is `desk`; both name the agent that made the frame".into(),
    ));

    let mut lines = good.clone();
    lines[0] = edit_line(&lines[0], |f| f["ts_ms"] = json!(-5));
    cases.push((
        "ts",
        lines,
        "line 1: `ts_ms` is -5: a time is milliseconds since the Unix epoch and cannot be negative".into(),
    ));

    let mut lines = good.clone();
    lines[0] = edit_line(&lines[0], |f| f["provenance"]["host"] = json!("x"));
    cases.push((
        "provenance",
        lines,
        "line 1: `provenance` is not {trace_id, msg_id, agent}: unknown field `host`, expected one of `trace_id`, \
         `msg_id`, `agent`"
            .into(),
    ));

    // A UUID in another spelling than the one the ledger stores and looks up.
    let canonical = "lower case with hyphens, the one spelling of a UUID the ledger stores and looks up";
    let spellings = [
        ("trace_upper", 0, "/provenance/trace_id", TRACE.to_uppercase(), TRACE),
        ("trace_urn", 0, "/provenance/trace_id", format!("urn:uuid:{TRACE}"), TRACE),
        ("msg_braces", 4, "/provenance/msg_id", format!("{{{}}}", msg_id(5)), &msg_id(5)),
        ("invocation_simple", 0, "/payload/invocation_id", INV_A.replace('-', ""), INV_A),
    ];
    for (name, index, pointer, written, id) in spellings {
        let mut lines = good.clone();
        lines[index] = edit_line(&lines[index], |f| *f.pointer_mut(pointer).unwrap() = json!(written));
        let field = pointer[1..].replace('/', ".");
        cases.push((
            name,
            lines,
            format!("line {}: `{field}` is `{written}`: write it `{id}`, in {canonical}", index + 1),
        ));
    }

    // An integer the ledger's canonical JSON (IEEE doubles) would round.
    let inexact = "an integer the ledger cannot store exactly (it stores numbers as IEEE doubles, as RFC 8785 does: \
                   integers up to 2^53 = 9007199254740992, and larger ones only when a double holds them); write a \
                   number a double holds exactly";
    let mut lines = good.clone();
    lines[2] = edit_line(&lines[2], |f| f["payload"]["attempt"] = json!(u64::MAX));
    cases.push(("attempt", lines, format!("line 3: `payload.attempt` is 18446744073709551615, {inexact}")));
    let mut lines = good.clone();
    lines[5] = edit_line(&lines[5], |f| f["payload"]["result"]["ids"] = json!([1, i64::MIN + 1]));
    cases.push(("nested", lines, format!("line 6: `payload.result.ids[1]` is -9223372036854775807, {inexact}")));

    for (name, lines, expected) in cases {
        let file = write_lines(&td, &format!("{name}.jsonl"), &lines);
        let output = td.rlp_in("fresh").args(["trace", "import"]).arg(&file).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{name}: {}", stderr(&output));
        assert_eq!(
            stderr(&output),
            format!(
                "error: {}: 1 problem; nothing was imported:\n  {expected}\n  help: fix the file or export the trace \
                 again; the ledger is unchanged\n",
                file.display()
            ),
            "{name}"
        );
        assert!(!td.ledger_path_in("fresh").exists(), "{name}");
    }

    // Integers a double holds exactly, however large, keep their value
    // (written as RFC 8785 writes that double): the trace shows, exports and
    // imports again.
    let mut lines = good.clone();
    lines[5] = edit_line(&lines[5], |f| {
        f["payload"]["result"]["ids"] = json!([9_007_199_254_740_994u64, i64::MIN, 18_446_744_073_709_552_000f64])
    });
    let file = write_lines(&td, "exact.jsonl", &lines);
    assert_eq!(td.rlp_in("exact").args(["trace", "import"]).arg(&file).output().unwrap().status.code(), Some(0));
    let show = td.rlp_in("exact").args(["trace", "show", TRACE]).output().unwrap();
    assert_eq!(show.status.code(), Some(0), "{}", stderr(&show));
    let exported = export(&td, "exact", "exact-export.jsonl");
    let text = std::fs::read_to_string(&exported).unwrap();
    assert_contains(&text, r#""ids":[9007199254740994,-9223372036854776000,18446744073709552000]"#);
    let again = td.rlp_in("exact-again").args(["trace", "import"]).arg(&exported).output().unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));

    // Replay reads files with the same reader: the same frames are refused.
    let mut lines = good.clone();
    lines[0] = edit_line(&lines[0], |f| f["actor"] = json!("robot"));
    let file = write_lines(&td, "actor.jsonl", &lines);
    let bundle = notes_bundle(&td);
    let output = td.rlp_in("fresh").arg("replay").arg(&file).arg("--bundle").arg(&bundle).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).starts_with(&format!(
            "error: {}: line 1: `actor` is `robot`; it must be `runtime`, `operator`, `config` or `tool:<tool id>`\n",
            file.display()
        )),
        "{}",
        stderr(&output)
    );
}

/// A malformed file is refused for its problems (exit 2) even when the
/// ledger already holds its trace; a good one then for the duplicate (exit 1).
#[test]
fn import_reports_file_problems_before_a_trace_already_held() {
    let td = TestDir::new();
    import_written(&td, "home");
    let mut lines = written_trace();
    lines[3] = "{\"id\": 4,\n".to_string();
    let file = write_lines(&td, "broken.jsonl", &lines);
    let output = td.rlp_in("home").args(["trace", "import"]).arg(&file).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let text = stderr(&output);
    rlp_snapshot!(td.filters().literal(TRACE, "[TRACE]"), &output);
    assert!(!text.contains("already holds"), "{text}");
    let file = write_lines(&td, "good.jsonl", &written_trace());
    let output = td.rlp_in("home").args(["trace", "import"]).arg(&file).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    rlp_snapshot!(td.filters().literal(TRACE, "[TRACE]"), &output);
    assert_eq!(rows(&td, "home"), 6);
}

/// `--tag` on `trace list|show|export`: only traces with a frame carrying
/// every tag, and only the frames of the calls that carry them; a tagged
/// export is a partial trace that imports and shows like a whole one.
#[test]
fn tag_filters_list_show_and_export() {
    let td = TestDir::new();
    let notes = data(&td, "notes.json", json!({"note": "hello"}));
    let mail = bundle::with(
        exec_tool("mail.send", &notes, json!({"type": "object"}), json!({"type": "object"})),
        json!({"observability": {"tags": ["mail", "external"]}}),
    );
    let bundle = td.bundle(
        "desk",
        json!([exec_tool("notes.read", &notes, json!({"type": "object"}), json!({"type": "object"})), mail]),
        &data_caps(&td, "exec = true\n"),
    );
    let other = "0197a000-0000-7000-8000-00000000bbbb";
    record(&td, "home", &bundle, "notes.read", json!({}));
    record(&td, "home", &bundle, "mail.send", json!({"to": "ann"}));
    record(&td, "home", &bundle, "notes.read", json!({"again": true}));
    let output = td
        .rlp_in("home")
        .args(["tools", "call"])
        .arg(&bundle)
        .args(["notes.read", "--args", "{}", "--trace-id", other, "--yes"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));

    let run = |args: &[&str], code: i32| {
        let output = td.rlp_in("home").args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(code), "{}", stderr(&output));
        output
    };
    let listed = |tags: &[&str]| -> Vec<String> {
        let mut args = vec!["trace", "list", "--format", "json"];
        for tag in tags {
            args.extend(["--tag", tag]);
        }
        let doc: Value = serde_json::from_slice(&run(&args, 0).stdout).unwrap();
        doc.as_array().unwrap().iter().map(|t| t["trace_id"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(listed(&[]), [TRACE, other]);
    assert_eq!(listed(&["test"]), [TRACE, other]);
    assert_eq!(listed(&["mail"]), [TRACE]);
    assert_eq!(listed(&["external", "mail"]), [TRACE]);
    assert_eq!(listed(&["mail", "test"]), Vec::<String>::new());
    let none = run(&["trace", "list", "--tag", "mail", "--tag", "test"], 0);
    assert_eq!(stdout(&none), "");
    rlp_snapshot!(td.filters().literal(TRACE, "[TRACE]"), &none);

    // show: the frames of the mail call only, at their positions in the whole trace.
    let timeline = |output: &std::process::Output| -> Vec<(u64, String, String)> {
        let doc: Value = stdout_json(output);
        doc["frames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["position"].as_u64().unwrap(),
                    f["kind"].as_str().unwrap().into(),
                    f["tool"].as_str().unwrap().into(),
                )
            })
            .collect()
    };
    let whole = timeline(&run(&["trace", "show", TRACE, "--format", "json"], 0));
    let shown = timeline(&run(&["trace", "show", TRACE, "--format", "json", "--tag", "mail"], 0));
    let expected: Vec<_> = whole.iter().filter(|f| f.2 == "mail.send").cloned().collect();
    assert_eq!(shown, expected);
    assert_eq!(
        shown.iter().map(|f| f.1.as_str()).collect::<Vec<_>>(),
        ["cap.audit", "cap.audit", "tool.call", "tool.result"]
    );
    let missing = run(&["trace", "show", TRACE, "--tag", "nope"], 1);
    assert_eq!(stdout(&missing), "");
    rlp_snapshot!(td.filters().literal(TRACE, "[TRACE]"), &missing);

    // export: the same frames, renumbered and chained on their own; importable.
    let file = td.join("mail.jsonl");
    run(&["trace", "export", TRACE, "--tag", "mail", "-o", file.to_str().unwrap()], 0);
    let lines = frames(&file);
    assert_eq!(lines.iter().map(|f| f["id"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2, 3, 4]);
    assert!(lines.iter().all(|f| f["payload"]["tool"] == "mail.send" || f["kind"] == "tool.result"));
    let imported = td.rlp_in("other").args(["trace", "import"]).arg(&file).output().unwrap();
    assert_eq!(imported.status.code(), Some(0), "{}", stderr(&imported));
    let reshown = td.rlp_in("other").args(["trace", "show", TRACE, "--format", "json"]).output().unwrap();
    assert_eq!(
        timeline(&reshown).iter().map(|f| (f.1.clone(), f.2.clone())).collect::<Vec<_>>(),
        shown.iter().map(|f| (f.1.clone(), f.2.clone())).collect::<Vec<_>>()
    );
    let verify = td.rlp_in("other").args(["trace", "verify"]).output().unwrap();
    assert_eq!(verify.status.code(), Some(0), "{}", stdout(&verify));
}
