//! A ledger for a fleet (docs/fleet.md, "Verifiable without one line"), on
//! a real SQLite file and a real PostgreSQL server: writers in separate
//! processes, a signed checkpoint, then rows edited, removed and reordered
//! and whole traces removed straight in the database — `rlp trace verify`
//! names each, up to the last checkpoint; an inclusion proof checked
//! offline against an export; an import that holds no other writer up; a
//! ledger from before per-trace chains upgraded with its chain intact.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::bundle;
use crate::support::output::{assert_contains, stderr, stdout, stdout_json};
use crate::support::postgres::Postgres;

const GRANT_EXEC: &str = "[capabilities]\nexec = true\n";

/// A ledger the tests write to and tamper with behind rlp's back.
trait Db {
    /// `--ledger` for rlp.
    fn url(&self) -> String;
    /// Runs `sql`; its single value (or rows joined by newlines).
    fn sql(&self, sql: &str) -> String;
    /// The SQL of a row's trace id.
    fn trace_of_row(&self) -> &'static str;
}

struct Sqlite(PathBuf);

impl Db for Sqlite {
    fn url(&self) -> String {
        format!("sqlite://{}", self.0.display())
    }

    fn sql(&self, sql: &str) -> String {
        let conn = rusqlite::Connection::open(&self.0).unwrap();
        let mut out = Vec::new();
        for statement in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            let mut prepared = conn.prepare(statement).unwrap();
            let columns = prepared.column_count();
            let mut rows = prepared.query([]).unwrap();
            while let Some(row) = rows.next().unwrap() {
                let cells: Vec<String> = (0..columns)
                    .map(|i| match row.get_ref(i).unwrap() {
                        rusqlite::types::ValueRef::Null => String::new(),
                        rusqlite::types::ValueRef::Integer(n) => n.to_string(),
                        rusqlite::types::ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                        other => format!("{other:?}"),
                    })
                    .collect();
                out.push(cells.join("|"));
            }
        }
        out.join("\n")
    }

    fn trace_of_row(&self) -> &'static str {
        "json_extract(provenance_json, '$.trace_id')"
    }
}

impl Db for Postgres {
    fn url(&self) -> String {
        Postgres::url(self)
    }

    fn sql(&self, sql: &str) -> String {
        self.psql(sql)
    }

    fn trace_of_row(&self) -> &'static str {
        "(provenance_json::json ->> 'trace_id')"
    }
}

fn fleet_bundle(td: &TestDir) -> PathBuf {
    td.bundle("fleet", json!([bundle::runtime_tool("fleet.ok", "ok.sh", &[])]), GRANT_EXEC)
}

/// `rlp trace verify --format json` against `db`, with its exit code.
fn verify(td: &TestDir, db: &dyn Db, extra: &[&str]) -> (i32, Value) {
    let output =
        td.rlp().args(["trace", "verify", "--format", "json", "--ledger", &db.url()]).args(extra).output().unwrap();
    (output.status.code().unwrap_or(-1), stdout_json(&output))
}

/// The (trace, problem) pairs of a report.
fn named(report: &Value) -> BTreeSet<(String, String)> {
    report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["trace_id"].as_str().unwrap_or("").to_string(), p["problem"].as_str().unwrap().to_string()))
        .collect()
}

/// Row ids of `trace`, in order.
fn rows_of(db: &dyn Db, trace: &str) -> Vec<String> {
    let sql = format!("SELECT id FROM events WHERE {} = '{trace}' ORDER BY id", db.trace_of_row());
    db.sql(&sql).lines().map(str::to_string).collect()
}

/// Writers in separate processes, a checkpoint, then every kind of
/// tampering: each is named, and a trace removed before any checkpoint
/// covered it (with its head row) is the documented blind spot.
fn tampering_is_named_up_to_the_last_checkpoint(db: &dyn Db) {
    let td = TestDir::new();
    let bundle = fleet_bundle(&td);
    let script = format!(
        "for w in 1 2 3 4 5 6; do (for i in 1 2 3; do \
             rlp tools call '{}' fleet.ok --args '{{}}' --ledger \"$URL\" >/dev/null || echo FAILED; \
         done) & done; wait",
        bundle.display()
    );
    let output = td.typed(&script).env("URL", db.url()).output().unwrap();
    assert!(output.status.success() && !stdout(&output).contains("FAILED"), "{}", stderr(&output));
    let traces: Vec<String> =
        db.sql("SELECT trace_id FROM rlp_traces ORDER BY trace_id").lines().map(str::to_string).collect();
    assert_eq!(traces.len(), 18, "one trace per call");

    let checkpoint =
        td.rlp().args(["trace", "checkpoint", "--format", "json", "--ledger", &db.url()]).output().unwrap();
    assert_eq!(checkpoint.status.code(), Some(0), "{}", stderr(&checkpoint));
    let made = stdout_json(&checkpoint);
    assert_eq!((made["checkpoint"].as_i64(), made["traces"].as_u64()), (Some(1), Some(18)), "{made:#}");
    // A call after the checkpoint: not covered yet.
    let late =
        td.call(&bundle, "fleet.ok", json!({})).args(["--ledger", &db.url(), "--format", "json"]).output().unwrap();
    let late = stdout_json(&late)["trace_id"].as_str().unwrap().to_string();
    let (code, report) = verify(&td, db, &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["traces"], 19);
    assert_eq!(report["uncovered_frames"].as_u64(), Some(rows_of(db, &late).len() as u64));

    let [edited, holed, swapped, gone, cut] = [&traces[0], &traces[1], &traces[2], &traces[3], &traces[4]];
    let (e, h, s, c) = (rows_of(db, edited), rows_of(db, holed), rows_of(db, swapped), rows_of(db, cut));
    db.sql(&format!("UPDATE events SET payload_json = replace(payload_json, 'fleet', 'fleek') WHERE id = {}", e[1]));
    db.sql(&format!("DELETE FROM events WHERE id = {}", h[1]));
    // Two rows of a trace swapped (each takes the other's place).
    db.sql(&format!(
        "UPDATE events AS e SET ts_ms = o.ts_ms, actor = o.actor, kind = o.kind, scope = o.scope, \
         payload_json = o.payload_json, provenance_json = o.provenance_json, hash_blake3 = o.hash_blake3, \
         chain_blake3 = o.chain_blake3, trace_seq = o.trace_seq \
         FROM (SELECT * FROM events WHERE id IN ({a}, {b})) AS o WHERE e.id IN ({a}, {b}) AND o.id <> e.id",
        a = s[0],
        b = s[1]
    ));
    // A whole trace removed, its head row too.
    db.sql(&format!(
        "DELETE FROM events WHERE {} = '{gone}'; DELETE FROM rlp_traces WHERE trace_id = '{gone}'",
        db.trace_of_row()
    ));
    // A trace's last frame removed, its head moved back to match.
    let last = c.last().unwrap();
    let before = &c[c.len() - 2];
    db.sql(&format!(
        "DELETE FROM events WHERE id = {last}; UPDATE rlp_traces SET frames = frames - 1, \
         head = (SELECT chain_blake3 FROM events WHERE id = {before}) WHERE trace_id = '{cut}'"
    ));
    // The uncovered trace removed the same way: nothing can tell.
    db.sql(&format!(
        "DELETE FROM events WHERE {} = '{late}'; DELETE FROM rlp_traces WHERE trace_id = '{late}'",
        db.trace_of_row()
    ));

    let (code, report) = verify(&td, db, &[]);
    assert_eq!(code, 1, "{report:#}");
    let expected: BTreeSet<(String, String)> = [
        (edited, "edited"),
        (holed, "removed"),
        (swapped, "removed"),
        (swapped, "chain"),
        (gone, "trace_removed"),
        (cut, "truncated"),
    ]
    .into_iter()
    .map(|(t, k)| (t.to_string(), k.to_string()))
    .collect();
    assert_eq!(named(&report), expected, "{report:#}");
    assert_eq!(report["uncovered_frames"], 0);
    // One trace at a time reads only that trace and its checkpoints.
    for (trace, kind) in [(gone, "trace_removed"), (cut, "truncated"), (edited, "edited")] {
        let (code, report) = verify(&td, db, &[trace]);
        assert_eq!(code, 1, "{report:#}");
        assert_eq!(named(&report), [(trace.to_string(), kind.to_string())].into_iter().collect(), "{report:#}");
    }
    let (code, report) = verify(&td, db, &[&traces[5]]);
    assert_eq!((code, report["rows"].as_u64()), (0, Some(rows_of(db, &traces[5]).len() as u64)), "{report:#}");
    // A verifier that does not trust the checkpoint's key says so.
    let stranger = TestDir::new();
    let output = stranger.rlp().args(["trace", "verify", "--ledger", &db.url(), &traces[5]]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_contains(&stdout(&output), "which is not trusted here");
    // A trace id the ledger holds nothing of is an error, not a pass.
    let unknown = "01234567-89ab-7def-8123-456789abcdef";
    let output = td.rlp().args(["trace", "verify", "--ledger", &db.url(), unknown]).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert_contains(&stderr(&output), &format!("has no trace {unknown}"));

    // The checkpointer trusts no bookkeeping: a trace cut back below what a
    // checkpoint covered is left out and named, and a new trace whose head
    // row claims it sealed is sealed all the same.
    let hidden =
        td.call(&bundle, "fleet.ok", json!({})).args(["--ledger", &db.url(), "--format", "json"]).output().unwrap();
    let hidden = stdout_json(&hidden)["trace_id"].as_str().unwrap().to_string();
    db.sql(&format!("UPDATE rlp_traces SET sealed = frames WHERE trace_id = '{hidden}'"));
    let output = td.rlp().args(["trace", "checkpoint", "--format", "json", "--ledger", &db.url()]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let made = stdout_json(&output);
    assert_eq!((made["checkpoint"].as_i64(), made["traces"].as_u64()), (Some(2), Some(1)), "{made:#}");
    let refused: Vec<&str> =
        made["refused"].as_array().unwrap().iter().map(|p| p["trace_id"].as_str().unwrap()).collect();
    assert_eq!(refused, [cut.as_str()], "{made:#}");
    let (code, report) = verify(&td, db, &[&hidden]);
    assert_eq!((code, report["uncovered_frames"].as_u64()), (0, Some(0)), "{report:#}");
    // A checkpoint whose signature was replaced is never built on.
    db.sql("UPDATE rlp_checkpoints SET signature = 'AAAA' WHERE seq = 1");
    let output = td.rlp().args(["trace", "checkpoint", "--ledger", &db.url()]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_contains(&stdout(&output), "No checkpoint made: those in the ledger do not check out");
    assert_contains(&stdout(&output), "\n  checkpoint #1: its signature does not verify with its key");
    // The ledger's own row deleted is an edit like any other (exit 1).
    db.sql("DELETE FROM rlp_ledger");
    for trace in [None, Some(hidden.as_str())] {
        let output = td.rlp().args(["trace", "verify", "--ledger", &db.url()]).args(trace).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        assert_contains(
            &stdout(&output),
            "\n  ledger: identity: the ledger's own row (rlp_ledger: its id and the legacy",
        );
    }
}

#[test]
fn sqlite_tampering_is_named_up_to_the_last_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    tampering_is_named_up_to_the_last_checkpoint(&Sqlite(dir.path().join("fleet.sqlite")));
}

#[test]
fn postgres_tampering_is_named_up_to_the_last_checkpoint() {
    tampering_is_named_up_to_the_last_checkpoint(&Postgres::start());
}

#[test]
fn a_frame_is_proven_to_a_third_party_offline_from_an_export() {
    let pg = Postgres::start();
    let td = TestDir::new();
    let bundle = fleet_bundle(&td);
    let url = pg.url();
    let called = td.call(&bundle, "fleet.ok", json!({})).args(["--ledger", &url, "--format", "json"]).output().unwrap();
    let trace = stdout_json(&called)["trace_id"].as_str().unwrap().to_string();
    // No checkpoint yet: nothing to prove.
    let early = td.rlp().args(["trace", "prove", &trace, "--ledger", &url]).output().unwrap();
    assert_eq!(early.status.code(), Some(1));
    assert_contains(&stderr(&early), "no checkpoint covers the trace yet");
    td.expect(0, &["trace", "checkpoint", "--ledger", &url]);
    td.expect(0, &["trace", "prove", &trace, "--frame", "2", "-o", "proof.json", "--ledger", &url]);
    let (_, err) = td.expect(2, &["trace", "prove", &trace, "--frame", "9", "--ledger", &url]);
    assert_contains(&err, "the trace has 3 frames: there is no frame 9");
    td.expect(0, &["trace", "export", &trace, "-o", "trace.jsonl", "--ledger", &url]);
    let key = td.home().join("keys/ledger.pub");
    std::fs::copy(&key, td.join("ledger.pub")).unwrap();

    // Elsewhere: no ledger, no configuration, only the files and the key.
    let third = TestDir::new();
    for file in ["proof.json", "trace.jsonl", "ledger.pub"] {
        std::fs::copy(td.join(file), third.join(file)).unwrap();
    }
    let (out, _) = third
        .expect(0, &["trace", "verify", "--proof", "proof.json", "--export", "trace.jsonl", "--key", "ledger.pub"]);
    assert_contains(&out, &format!("The proof holds: frames 1 to 3 of trace {trace} are in checkpoint #1"));
    assert_contains(&out, "Frame 2 is in the proof in full, and is that frame.");
    assert_contains(&out, "The export's first 3 frames are those frames.");
    assert!(!third.ledger_path().exists());
    // Without the key, the signature proves nothing to this verifier.
    let (_, err) = third.expect(1, &["trace", "verify", "--proof", "proof.json"]);
    assert_contains(&err, "which is not among the keys trusted here");
    // An export with a frame changed, or a proof with its frame changed, does not hold.
    let export = std::fs::read_to_string(third.join("trace.jsonl")).unwrap();
    std::fs::write(third.join("changed.jsonl"), export.replacen("\"ok\":true", "\"ok\":false", 1)).unwrap();
    let (_, err) = third
        .expect(1, &["trace", "verify", "--proof", "proof.json", "--export", "changed.jsonl", "--key", "ledger.pub"]);
    assert_contains(&err, "changed.jsonl");
    let mut proof: Value = serde_json::from_str(&std::fs::read_to_string(third.join("proof.json")).unwrap()).unwrap();
    proof["frame"]["ts_ms"] = json!(1);
    std::fs::write(third.join("forged.json"), proof.to_string()).unwrap();
    let (_, err) = third.expect(1, &["trace", "verify", "--proof", "forged.json", "--key", "ledger.pub"]);
    assert_contains(&err, "the proven frame is not frame 2 of the trace the checkpoint covers");
}

#[test]
fn an_import_into_postgres_holds_no_other_writer_up() {
    let pg = Postgres::start();
    let td = TestDir::new();
    let bundle = fleet_bundle(&td);
    let url = pg.url();
    // A long trace to import, recorded in a SQLite home and exported.
    std::fs::write(td.join("batch.jsonl"), "{\"tool\": \"fleet.ok\"}\n".repeat(700)).unwrap();
    let recorded =
        td.rlp().args(["tools", "call", bundle.to_str().unwrap(), "--batch", "batch.jsonl"]).output().unwrap();
    assert_eq!(recorded.status.code(), Some(0), "{}", stderr(&recorded));
    td.expect(0, &["trace", "export", "last", "-o", "long.jsonl"]);
    let lines: Vec<String> =
        std::fs::read_to_string(td.join("long.jsonl")).unwrap().lines().map(str::to_string).collect();
    assert!(lines.len() > 2000, "{} frames", lines.len());

    // The import reads from a pipe: its first part arrives, then it waits
    // for the rest with its transaction open.
    let fifo = td.join("import.fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let import = std::process::Command::new(env!("CARGO_BIN_EXE_rlp"))
        .args(["trace", "import", fifo.to_str().unwrap(), "--ledger", &url, "--home"])
        .arg(td.home())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    for line in &lines[..lines.len() - 10] {
        writeln!(pipe, "{line}").unwrap();
    }
    pipe.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while pg.psql("SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction'") == "0" {
        assert!(Instant::now() < deadline, "the import never began its transaction");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Meanwhile another writer appends at once (well within the 60 s lock timeout).
    let started = Instant::now();
    let other = td.call(&bundle, "fleet.ok", json!({})).args(["--ledger", &url]).output().unwrap();
    assert_eq!(other.status.code(), Some(0), "{}", stderr(&other));
    assert!(started.elapsed() < Duration::from_secs(20), "the writer waited {:?} for the import", started.elapsed());
    assert_eq!(pg.psql("SELECT count(*) FROM events"), "3", "only the other writer's frames are visible yet");
    for line in &lines[lines.len() - 10..] {
        writeln!(pipe, "{line}").unwrap();
    }
    drop(pipe);
    let imported = import.wait_with_output().unwrap();
    assert_eq!(imported.status.code(), Some(0), "{}", String::from_utf8_lossy(&imported.stderr));
    assert_eq!(pg.psql("SELECT count(*) FROM events"), (lines.len() + 3).to_string());
    let (code, report) = verify(&td, &pg, &[]);
    assert_eq!((code, report["traces"].as_u64()), (0, Some(2)), "{report:#}");
    // A checkpoint reads the long trace a page at a time, the short one in a batch.
    let (made, _) = td.expect(0, &["trace", "checkpoint", "--ledger", &url]);
    assert_contains(&made, &format!("Checkpoint #1: {} new frames in 2 traces", lines.len() + 3));
    let (code, report) = verify(&td, &pg, &[]);
    assert_eq!((code, report["uncovered_frames"].as_u64()), (0, Some(0)), "{report:#}");
}

#[test]
fn a_postgres_ledger_of_one_chain_is_upgraded_and_its_chain_still_verifies() {
    let pg = Postgres::start();
    let td = TestDir::new();
    let bundle = fleet_bundle(&td);
    let url = pg.url();
    // One call's frames, then the database turned back into schema 1: one
    // ledger-wide chain (the same values, the frames being one trace), its
    // head in rlp_head.
    td.call(&bundle, "fleet.ok", json!({})).args(["--ledger", &url]).assert().code(0);
    pg.psql(
        "UPDATE events SET trace_seq = NULL;
         DROP TABLE rlp_ledger, rlp_traces, rlp_unsealed, rlp_checkpoints, rlp_checkpoint_leaves;
         CREATE TABLE rlp_head (one boolean PRIMARY KEY DEFAULT true CHECK (one), chain_blake3 text NOT NULL);
         INSERT INTO rlp_head (chain_blake3) SELECT chain_blake3 FROM events ORDER BY id DESC LIMIT 1;
         CREATE TABLE rlp_sync (slot integer PRIMARY KEY, appends bigint NOT NULL DEFAULT 0);
         UPDATE rlp_schema SET version = 1;",
    );
    let legacy_head = pg.psql("SELECT chain_blake3 FROM events ORDER BY id DESC LIMIT 1");
    // Reading upgrades it: the old rows become the sealed legacy chain.
    let (code, report) = verify(&td, &pg, &[]);
    assert_eq!((code, report["legacy_rows"].as_u64()), (0, Some(3)), "{report:#}");
    assert_eq!(pg.psql("SELECT version FROM rlp_schema"), "2");
    assert_eq!(pg.psql("SELECT legacy_rows || ' ' || legacy_head FROM rlp_ledger"), format!("3 {legacy_head}"));
    assert_eq!(pg.psql("SELECT count(*) FROM pg_tables WHERE tablename IN ('rlp_head', 'rlp_sync')"), "0");
    // New frames go on per-trace chains; both verify, and a checkpoint seals the legacy chain.
    td.call(&bundle, "fleet.ok", json!({})).args(["--ledger", &url]).assert().code(0);
    td.expect(0, &["trace", "checkpoint", "--ledger", &url]);
    let (code, report) = verify(&td, &pg, &[]);
    assert_eq!((code, report["rows"].as_u64(), report["legacy_rows"].as_u64()), (0, Some(6), Some(3)), "{report:#}");
    // A legacy row edited, or the legacy chain cut short, is found.
    pg.psql("UPDATE events SET payload_json = replace(payload_json, 'fleet', 'fleek') WHERE id = 2");
    pg.psql("DELETE FROM events WHERE id = 3");
    let (code, report) = verify(&td, &pg, &[]);
    assert_eq!(code, 1);
    let kinds: Vec<(Value, Value)> =
        report["problems"].as_array().unwrap().iter().map(|p| (p["row"].clone(), p["problem"].clone())).collect();
    assert_eq!(kinds, [(json!(2), json!("edited")), (Value::Null, json!("truncated"))], "{report:#}");
}

#[test]
fn checkpoints_made_while_writers_append_miss_no_frame() {
    let pg = Postgres::start();
    let td = TestDir::new();
    let bundle = fleet_bundle(&td);
    td.call(&bundle, "fleet.ok", json!({})).args(["--ledger", &pg.url()]).assert().code(0);
    // Four writers, two of them on one shared trace, while checkpoints are made.
    let script = format!(
        "shared=01900000-0000-7000-8000-00000000abcd; \
         for w in 1 2 3 4; do (for i in 1 2 3 4 5 6; do \
             if [ $w -le 2 ]; then t=\"--trace-id $shared\"; else t=; fi; \
             rlp tools call '{}' fleet.ok --args '{{}}' --ledger \"$URL\" $t >/dev/null || echo FAILED; \
         done) & done; \
         for c in 1 2 3 4 5 6; do rlp trace checkpoint --ledger \"$URL\" >/dev/null || echo FAILED; done; wait; \
         rlp trace checkpoint --ledger \"$URL\" >/dev/null || echo FAILED",
        bundle.display()
    );
    let output = td.typed(&script).env("URL", pg.url()).output().unwrap();
    assert!(output.status.success() && !stdout(&output).contains("FAILED"), "{}", stderr(&output));
    let (code, report) = verify(&td, &pg, &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["uncovered_frames"], 0, "{report:#}");
    assert_eq!(report["rows"].as_u64().unwrap().to_string(), pg.psql("SELECT count(*) FROM events"));
    assert_eq!(pg.psql("SELECT count(*) FROM rlp_unsealed"), "0");
    assert_eq!(pg.psql("SELECT frames FROM rlp_traces WHERE trace_id = '01900000-0000-7000-8000-00000000abcd'"), "36");
}

/// `rlp trace checkpoint --every` sweeps in slices: a head row removed
/// after its first sweep is named once the slices reach its trace, past
/// a thousand other head rows (the fewest a slice reads).
fn a_sweep_in_slices_names_a_head_row_removed(db: &dyn Db) {
    let td = TestDir::new();
    let bundle = fleet_bundle(&td);
    let traces: Vec<String> = (0..3)
        .map(|_| {
            let output =
                td.call(&bundle, "fleet.ok", json!({})).args(["--ledger", &db.url(), "--format", "json"]).output();
            stdout_json(&output.unwrap())["trace_id"].as_str().unwrap().to_string()
        })
        .collect();
    // 1,500 head rows of traces with no frames, sorting before the real ones.
    db.sql(&format!(
        "WITH RECURSIVE n(i, id) AS (SELECT 1, '000000000001' UNION ALL \
           SELECT i + 1, substr('000000000000' || CAST(i + 1 AS TEXT), length(CAST(i + 1 AS TEXT)) + 1) \
             FROM n WHERE i < 1500) \
         INSERT INTO rlp_traces (trace_id, frames, head, sealed) \
         SELECT '00000000-0000-0000-0000-' || id, 0, '{}', 0 FROM n",
        "0".repeat(64)
    ));
    assert_eq!(db.sql("SELECT count(*) FROM rlp_traces"), "1503");

    let mut checkpointer = td
        .command()
        .args(["trace", "checkpoint", "--every", "100ms", "--sweep", "300ms", "--format", "json", "--ledger"])
        .arg(db.url())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, runs) = std::sync::mpsc::channel();
    let out = checkpointer.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(out)) {
            let Ok(line) = line else { break };
            if lines.send(serde_json::from_str::<Value>(&line).unwrap()).is_err() {
                break;
            }
        }
    });
    let next = || runs.recv_timeout(Duration::from_secs(60)).expect("a run within a minute");
    let first = next();
    let made = (first["checkpoint"].as_i64(), first["traces"].as_u64(), first["swept"].as_u64());
    assert_eq!(made, (Some(1), Some(3), Some(1503)), "{first:#}");
    db.sql(&format!("DELETE FROM rlp_traces WHERE trace_id = '{}'", traces[1]));
    let started = Instant::now();
    // Slices of 1,000 head rows (the fewest), then the 502 left (503 in a
    // pass that began before the removal).
    let named = loop {
        let run = next();
        let refused: Vec<String> = run["refused"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["trace_id"].as_str().map(String::from))
            .collect();
        if !refused.is_empty() {
            break (refused, run["swept"].as_u64());
        }
        assert!([Some(1000), Some(502), Some(503)].contains(&run["swept"].as_u64()), "{run:#}");
        assert!(started.elapsed() < Duration::from_secs(60), "never named");
    };
    checkpointer.kill().unwrap();
    checkpointer.wait().unwrap();
    assert_eq!(named, (vec![traces[1].clone()], Some(502)));
}

#[test]
fn sqlite_sweep_in_slices_names_a_head_row_removed() {
    let dir = tempfile::tempdir().unwrap();
    a_sweep_in_slices_names_a_head_row_removed(&Sqlite(dir.path().join("fleet.sqlite")));
}

#[test]
fn postgres_sweep_in_slices_names_a_head_row_removed() {
    a_sweep_in_slices_names_a_head_row_removed(&Postgres::start());
}

/// The 32 bytes of a stored hash or chain value (64 hex digits).
fn hash_bytes(hex: &str) -> [u8; 32] {
    std::array::from_fn(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
}

/// The chain value after `prev` of a frame whose hash is `hash` (hex), as
/// the ledger stores it.
fn chained(prev: &str, hash: &str) -> String {
    let mut link = blake3::Hasher::new();
    link.update(&hash_bytes(prev)).update(&hash_bytes(hash));
    link.finalize().to_hex().to_string()
}

/// The row id, hash and trace position of each row of `trace`, in row order.
fn chained_rows(db: &dyn Db, trace: &str) -> Vec<(String, String, i64)> {
    let sql =
        format!("SELECT id, hash_blake3, trace_seq FROM events WHERE {} = '{trace}' ORDER BY id", db.trace_of_row());
    db.sql(&sql)
        .lines()
        .map(|line| {
            let cells: Vec<&str> = line.split('|').collect();
            (cells[0].to_string(), cells[1].to_string(), cells[2].parse().unwrap())
        })
        .collect()
}

/// Show, replay and export read a trace from the ledger only as far as it
/// checks out: frames removed, reordered or rewritten in the database stop
/// them (exit 1) where it shows, named as `rlp trace verify` names it, and
/// an export writes nothing — it never makes a fresh chain over the damage.
fn a_damaged_trace_is_neither_shown_replayed_nor_exported(db: &dyn Db) {
    let td = TestDir::new();
    let bundle = fleet_bundle(&td);
    let url = db.url();
    let [holed, reordered, rewritten, cut] = [
        "01900000-0000-7000-8000-0000000000d1",
        "01900000-0000-7000-8000-0000000000d2",
        "01900000-0000-7000-8000-0000000000d3",
        "01900000-0000-7000-8000-0000000000d4",
    ];
    let call = |trace: &str| {
        let output = td.call(&bundle, "fleet.ok", json!({})).args(["--ledger", &url, "--trace-id", trace]).output();
        assert_eq!(output.unwrap().status.code(), Some(0));
    };
    // Three calls (nine frames) in each trace, all covered by a checkpoint;
    // a fourth call of the last one after it.
    for trace in [holed, reordered, rewritten, cut] {
        (0..3).for_each(|_| call(trace));
    }
    td.expect(0, &["trace", "checkpoint", "--ledger", &url]);
    call(cut);
    let rows: Vec<Vec<(String, String, i64)>> =
        [holed, reordered, rewritten, cut].iter().map(|trace| chained_rows(db, trace)).collect();

    // The second call's frames removed.
    db.sql(&format!("DELETE FROM events WHERE id IN ({}, {}, {})", rows[0][3].0, rows[0][4].0, rows[0][5].0));
    // The first two calls swapped, row by row: the same frames in another order.
    for i in 0..3 {
        db.sql(&format!(
            "UPDATE events AS e SET ts_ms = o.ts_ms, actor = o.actor, kind = o.kind, scope = o.scope, \
             payload_json = o.payload_json, provenance_json = o.provenance_json, hash_blake3 = o.hash_blake3, \
             chain_blake3 = o.chain_blake3, trace_seq = o.trace_seq \
             FROM (SELECT * FROM events WHERE id IN ({a}, {b})) AS o WHERE e.id IN ({a}, {b}) AND o.id <> e.id",
            a = rows[1][i].0,
            b = rows[1][i + 3].0
        ));
    }
    // The second call's frames removed, the rest renumbered and chained
    // again from there, and the head row moved to match: only the
    // checkpoint's leaf still counts nine frames.
    let mut chain = "0".repeat(64);
    let kept: Vec<&(String, String, i64)> = rows[2].iter().filter(|(_, _, seq)| !(4..=6).contains(seq)).collect();
    db.sql(&format!("DELETE FROM events WHERE id IN ({}, {}, {})", rows[2][3].0, rows[2][4].0, rows[2][5].0));
    for (seq, (id, hash, _)) in kept.iter().enumerate() {
        chain = chained(&chain, hash);
        db.sql(&format!("UPDATE events SET trace_seq = {}, chain_blake3 = '{chain}' WHERE id = {id}", seq + 1));
    }
    db.sql(&format!(
        "UPDATE rlp_traces SET frames = {0}, head = '{chain}', sealed = {0} WHERE trace_id = '{rewritten}'",
        kept.len()
    ));
    // The call after the checkpoint removed, its head row left as it was.
    let late: Vec<&str> = rows[3][9..].iter().map(|(id, _, _)| id.as_str()).collect();
    db.sql(&format!("DELETE FROM events WHERE id IN ({})", late.join(", ")));

    let help = "\n  help: run `rlp trace verify` to see every row that was changed\n";
    let damage = [
        (
            holed,
            format!(
                "ledger row {}: frames 4 to 6 of the trace are missing before this row: removed, or rows were reordered",
                rows[0][6].0
            ),
            3,
        ),
        (
            reordered,
            format!(
                "ledger row {}: frames 1 to 3 of the trace are missing before this row: removed, or rows were reordered",
                rows[1][0].0
            ),
            0,
        ),
        (
            rewritten,
            format!(
                "trace {rewritten}: frames 7 to 9 of the trace, its last, were removed: checkpoint #1 covered 9 frames"
            ),
            6,
        ),
        (
            cut,
            format!("trace {cut}: frames 10 to 12 of the trace, its last, were removed: its head row counts 12 frames"),
            9,
        ),
    ];
    let bundle = bundle.to_str().unwrap();
    for (trace, error, shown) in damage {
        let run = |args: &[&str]| {
            let output = td.rlp().args(["--ledger", &url]).args(args).output().unwrap();
            (output.status.code(), stdout(&output), stderr(&output))
        };
        let (code, out, err) = run(&["trace", "show", trace]);
        assert_eq!((code, err), (Some(1), format!("error: {error}{help}")), "{trace}");
        // The frames before the damage, and nothing after them.
        let frames: Vec<&str> = out.lines().skip(1).collect();
        assert_eq!(frames.len(), shown, "{trace}: {out}");
        assert!(frames.iter().enumerate().all(|(i, line)| line.starts_with(&format!("  #{} ", i + 1))), "{out}");
        let (code, out, err) = run(&["replay", trace, "--bundle", bundle, "--format", "json"]);
        assert_eq!((code, out, err), (Some(1), String::new(), format!("error: {error}{help}")), "{trace}");
        let file = td.join(format!("{trace}.jsonl"));
        let (code, out, err) = run(&["trace", "export", trace, "-o", file.to_str().unwrap()]);
        assert_eq!((code, out, err), (Some(1), String::new(), format!("error: {error}; nothing was exported{help}")));
        assert!(!file.exists(), "{trace}");
        let (code, out, _) = run(&["trace", "export", trace]);
        assert_eq!(code, Some(1), "{trace}");
        assert_eq!(out.lines().count(), shown, "{trace}: only the frames before the damage reach stdout");
    }
}

#[test]
fn sqlite_a_damaged_trace_is_neither_shown_replayed_nor_exported() {
    let dir = tempfile::tempdir().unwrap();
    a_damaged_trace_is_neither_shown_replayed_nor_exported(&Sqlite(dir.path().join("fleet.sqlite")));
}

#[test]
fn postgres_a_damaged_trace_is_neither_shown_replayed_nor_exported() {
    a_damaged_trace_is_neither_shown_replayed_nor_exported(&Postgres::start());
}
