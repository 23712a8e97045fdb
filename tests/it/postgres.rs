//! The PostgreSQL ledger, against a real server the tests start
//! (support/postgres.rs): calls recorded in it and read back by every
//! trace command, concurrent appenders from several processes, an edit
//! found by `trace verify`, traces moved to and from SQLite, `rlp serve`,
//! budgets, and credentials that never show.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::bundle::{self, with};
use crate::support::output::{self, assert_contains, stderr, stdout, stdout_json};
use crate::support::postgres::{Postgres, RLP_PASSWORD};
use crate::support::rlp_snapshot;
use crate::support::{TestDir, mcp};

const GRANT_EXEC: &str = "[capabilities]\nexec = true\n";

fn fleet_bundle(td: &TestDir) -> PathBuf {
    td.bundle("fleet", json!([bundle::runtime_tool("fleet.ok", "ok.sh", &[])]), GRANT_EXEC)
}

/// `rlp <args…>` against the ledger at `url` (given with `--ledger`).
fn on(td: &TestDir, url: &str, code: i32, args: &[&str]) -> (String, String) {
    let output = td.rlp().arg("--ledger").arg(url).args(args).output().unwrap();
    let (out, err) = (stdout(&output), stderr(&output));
    assert_eq!(output.status.code(), Some(code), "rlp {args:?}\nstdout:\n{out}\nstderr:\n{err}");
    for text in [&out, &err] {
        assert!(!text.contains(RLP_PASSWORD), "the password was shown: {text}");
    }
    (out, err)
}

fn call_json(td: &TestDir, bundle: &Path, url: &str) -> Value {
    let output = td
        .call(bundle, "fleet.ok", json!({}))
        .env("RUNLOOP_LEDGER_URL", url)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    stdout_json(&output)
}

#[test]
fn calls_are_recorded_in_postgres_and_every_trace_command_reads_them() {
    let pg = Postgres::start();
    let td = TestDir::new();
    let bundle = fleet_bundle(&td);
    let url = pg.url();

    let first = call_json(&td, &bundle, &url);
    let trace = first["trace_id"].as_str().unwrap().to_string();
    assert_eq!(first["result"], json!({"ok": true}));
    // The rows are in PostgreSQL, and no SQLite ledger was made.
    assert_eq!(pg.psql("SELECT kind FROM events WHERE kind LIKE 'tool.%' ORDER BY id"), "tool.call\ntool.result");
    assert_eq!(pg.psql("SELECT version FROM rlp_schema"), "2");
    assert_eq!(
        pg.psql(&format!("SELECT count(*) FROM events WHERE provenance_json::json->>'trace_id' = '{trace}'")),
        { pg.psql("SELECT count(*) FROM events") }
    );
    assert!(!td.ledger_path().exists(), "a SQLite ledger was created");

    let (listed, _) = on(&td, &url, 0, &["trace", "list"]);
    assert_contains(&listed, &trace);
    let (shown, _) = on(&td, &url, 0, &["trace", "show", "last"]);
    assert_contains(&shown, "fleet.ok");
    let (verified, _) = on(&td, &url, 0, &["trace", "verify"]);
    assert_contains(&verified, &format!("{}: ", url_shown(&pg)));
    assert_contains(&verified, "every hash, chain, head and checkpoint checks out");
    let (replayed, _) = on(&td, &url, 0, &["replay", "last", "--bundle", bundle.to_str().unwrap()]);
    assert_contains(&replayed, "fleet.ok");
    // A live replay reads the trace and records the new one in the same ledger.
    on(&td, &url, 0, &["replay", &trace, "--mode", "live", "--bundle", bundle.to_str().unwrap()]);
    assert_eq!(pg.psql("SELECT count(*) FROM events WHERE kind = 'tool.result'"), "2");
    assert_eq!(pg.psql("SELECT count(*) FROM events WHERE kind = 'trace.replay'"), "1");
    // The config file's [ledger] url is the third way to name it.
    std::fs::create_dir_all(td.home()).unwrap();
    std::fs::write(td.home().join("config.toml"), format!("[ledger]\nurl = \"{url}\"\n")).unwrap();
    let listed = td.rlp().args(["trace", "list", "--format", "json"]).output().unwrap();
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    rlp_snapshot!(&td, &listed);
}

fn url_shown(pg: &Postgres) -> String {
    format!("postgres://rlp@127.0.0.1:{}/rlp", pg.port)
}

#[test]
fn four_processes_appending_at_once_keep_every_trace_verifiable() {
    let pg = Postgres::start();
    let td = TestDir::new();
    let bundle = fleet_bundle(&td);
    let url = pg.url();
    let script = format!(
        "for w in 1 2 3 4; do (for i in 1 2 3 4 5 6 7 8 9 10; do \
             rlp tools call '{}' fleet.ok --args '{{}}' --ledger \"$URL\" >/dev/null || echo FAILED; \
         done) & done; wait",
        bundle.display()
    );
    let output = td.typed(&script).env("URL", &url).output().unwrap();
    assert!(output.status.success() && !stdout(&output).contains("FAILED"), "{}", stderr(&output));
    assert_eq!(pg.psql("SELECT count(*) FROM events WHERE kind = 'tool.call'"), "40");
    assert_eq!(pg.psql("SELECT count(*) FROM events WHERE kind = 'tool.result'"), "40");
    let (verified, _) = on(&td, &url, 0, &["trace", "verify", "--format", "json"]);
    let report: Value = serde_json::from_str(&verified).unwrap();
    assert_eq!(report["intact"], true, "{report:#}");
    assert_eq!(report["rows"].as_u64().unwrap().to_string(), pg.psql("SELECT count(*) FROM events"));
    let (listed, _) = on(&td, &url, 0, &["trace", "list", "--format", "json"]);
    let traces: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(traces.as_array().unwrap().len(), 40, "one trace per call:\n{listed}");
}

#[test]
fn a_row_edited_or_removed_with_psql_is_found_by_verify() {
    let pg = Postgres::start();
    let td = TestDir::new();
    let bundle = fleet_bundle(&td);
    let url = pg.url();
    for _ in 0..3 {
        call_json(&td, &bundle, &url);
    }
    let target = pg.psql("SELECT id FROM events WHERE kind = 'tool.result' ORDER BY id LIMIT 1");
    pg.psql(&format!(
        "UPDATE events SET payload_json = replace(payload_json, '\"ok\":true', '\"ok\":false') WHERE id = {target}"
    ));
    let (text, _) = on(&td, &url, 1, &["trace", "verify"]);
    assert_contains(&text, "rows in 3 traces; 1 problem:");
    assert_contains(&text, &format!("  row {target} (tool.result, trace "));
    assert_contains(&text, "edited: the row's content does not match its hash_blake3");
    // `trace show` refuses the edited trace too.
    let trace = pg.psql(&format!("SELECT provenance_json::json->>'trace_id' FROM events WHERE id = {target}"));
    let shown = td.rlp().args(["--ledger", &url, "trace", "show", &trace]).output().unwrap();
    assert_eq!(shown.status.code(), Some(1), "{}", stdout(&shown));

    let last = pg.psql("SELECT max(id) FROM events");
    pg.psql(&format!("DELETE FROM events WHERE id = {} - 1", last));
    let (text, _) = on(&td, &url, 1, &["trace", "verify", "--format", "json"]);
    let report: Value = serde_json::from_str(&text).unwrap();
    let rows: Vec<String> = report["problems"].as_array().unwrap().iter().map(|p| p["row"].to_string()).collect();
    assert_eq!(rows, [target.clone(), last.clone()], "{report:#}");

    // A head moved by hand no longer matches its trace's last frame.
    pg.psql(&format!("UPDATE rlp_traces SET head = '{}' WHERE trace_id = '{trace}'", "ab".repeat(32)));
    let (text, _) = on(&td, &url, 1, &["trace", "verify", "--format", "json"]);
    let report: Value = serde_json::from_str(&text).unwrap();
    let head = &report["problems"].as_array().unwrap()[2];
    assert_eq!(
        (head["trace_id"].as_str(), head["problem"].as_str()),
        (Some(trace.as_str()), Some("head")),
        "{report:#}"
    );
    // A head that is not a chain value at all stops appends to its trace with a clear error.
    const KNOWN: &str = "01900000-0000-7000-8000-000000000001";
    let first = td.call(&bundle, "fleet.ok", json!({})).args(["--ledger", &url, "--trace-id", KNOWN]).output().unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    pg.psql(&format!("UPDATE rlp_traces SET head = 'not hex' WHERE trace_id = '{KNOWN}'"));
    let refused =
        td.call(&bundle, "fleet.ok", json!({})).args(["--ledger", &url, "--trace-id", KNOWN]).output().unwrap();
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    rlp_snapshot!(&td, &refused);
}

#[test]
fn traces_move_between_postgres_and_sqlite_and_replay_strictly() {
    let pg = Postgres::start();
    let td = TestDir::new();
    let bundle = fleet_bundle(&td);
    let url = pg.url();
    let trace = call_json(&td, &bundle, &url)["trace_id"].as_str().unwrap().to_string();

    // PostgreSQL → file → a SQLite home, then a strict replay there.
    on(&td, &url, 0, &["trace", "export", &trace, "-o", "from-pg.jsonl"]);
    td.expect(0, &["trace", "import", "from-pg.jsonl"]);
    let replayed = td.rlp().args(["replay", &trace, "--bundle"]).arg(&bundle).output().unwrap();
    assert_eq!(replayed.status.code(), Some(0), "{}", stderr(&replayed));
    td.expect(0, &["trace", "verify"]);

    // SQLite → file → PostgreSQL: a trace recorded locally joins the shared ledger.
    let local = td.call(&bundle, "fleet.ok", json!({})).args(["--format", "json"]).output().unwrap();
    let local = stdout_json(&local)["trace_id"].as_str().unwrap().to_string();
    td.expect(0, &["trace", "export", &local, "-o", "from-sqlite.jsonl"]);
    let (imported, _) = on(&td, &url, 0, &["trace", "import", "from-sqlite.jsonl"]);
    assert_contains(&imported, &format!("of trace {local} into {}", url_shown(&pg)));
    // Importing it again is refused: the trace is there already.
    on(&td, &url, 1, &["trace", "import", "from-sqlite.jsonl"]);
    on(&td, &url, 0, &["replay", &local, "--bundle", bundle.to_str().unwrap()]);
    let (verified, _) = on(&td, &url, 0, &["trace", "verify"]);
    assert_contains(&verified, "every hash, chain, head and checkpoint checks out");
}

#[test]
fn a_budget_is_counted_from_the_postgres_ledger() {
    let pg = Postgres::start();
    let td = TestDir::new();
    let tool = with(bundle::runtime_tool("mail.send", "usage.sh", &[]), json!({"budget": {"tokens": 1000}}));
    let bundle = td.bundle("spender", json!([tool]), GRANT_EXEC);
    let url = pg.url();
    let call = |trace: Option<&str>| {
        let mut command = td.call(&bundle, "mail.send", json!({}));
        command.args(["--ledger", &url]);
        if let Some(trace) = trace {
            command.args(["--trace-id", trace]);
        }
        command.args(["--format", "json"]).output().unwrap()
    };
    let first = call(None);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let trace = stdout_json(&first)["trace_id"].as_str().unwrap().to_string();
    assert_eq!(call(Some(&trace)).status.code(), Some(0), "600 of 1000 used: the second call runs");
    let third = call(Some(&trace));
    assert_eq!(third.status.code(), Some(3));
    rlp_snapshot!(&td, &third);
}

#[test]
fn serve_records_its_calls_in_postgres() {
    let pg = Postgres::start();
    let td = TestDir::new();
    let bundle = fleet_bundle(&td);
    let url = pg.url();
    let steps = json!([mcp::call("fleet.ok", json!({})), mcp::call("fleet.ok", json!({}))]);
    let report = mcp::drive(&mcp::scenario(mcp::stdio(&td, &bundle, &["--ledger", &url]), "legacy", None, steps));
    for i in 0..2 {
        assert_eq!(report["steps"][i]["result"]["isError"], false, "{report:#}");
    }
    assert_eq!(pg.psql("SELECT count(*) FROM events WHERE kind = 'tool.result'"), "2");
    on(&td, &url, 0, &["trace", "verify"]);
    assert!(!td.ledger_path().exists());
}

#[test]
fn credentials_never_show_and_failures_are_usage_errors() {
    let pg = Postgres::start();
    let td = TestDir::new();
    let bundle = fleet_bundle(&td);
    let wrong = "Wr0ng-pa55word";
    let with_wrong = format!("postgres://rlp:{wrong}@127.0.0.1:{}/rlp", pg.port);
    let no_password = pg.url_as("rlp");
    let cases: Vec<(&str, Vec<(&str, String)>)> =
        vec![(with_wrong.as_str(), vec![]), (no_password.as_str(), vec![("PGPASSWORD", wrong.to_string())])];
    for (url, env) in cases {
        let output = td.call(&bundle, "fleet.ok", json!({})).args(["--ledger", url]).envs(env).output().unwrap();
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{err}");
        rlp_snapshot!(&td, &output);
        assert!(!err.contains(wrong) && !stdout(&output).contains(wrong), "{err}");
        let listed = td.rlp().args(["--ledger", url, "trace", "list"]).envs([("PGPASSWORD", wrong)]).output().unwrap();
        assert_eq!(listed.status.code(), Some(2));
        assert!(!stderr(&listed).contains(wrong));
    }

    // The right password from a password file, used only while others cannot read it.
    let pgpass = td.join("pgpass");
    std::fs::write(&pgpass, format!("127.0.0.1:{}:rlp:rlp:{RLP_PASSWORD}\n", pg.port)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o644)).unwrap();
    let refused = td
        .call(&bundle, "fleet.ok", json!({}))
        .args(["--ledger", &no_password])
        .env("PGPASSFILE", &pgpass)
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    rlp_snapshot!(&td, &refused);
    std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600)).unwrap();
    let called = td
        .call(&bundle, "fleet.ok", json!({}))
        .args(["--ledger", &no_password])
        .env("PGPASSFILE", &pgpass)
        .output()
        .unwrap();
    assert_eq!(called.status.code(), Some(0), "{}", stderr(&called));

    // No server there: a clear error naming where it looked.
    drop(pg);
    let output = td.call(&bundle, "fleet.ok", json!({})).args(["--ledger", &with_wrong]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert_contains(&err, "error: cannot reach the ledger: ledger postgres://rlp@127.0.0.1:");
    assert_contains(&err, "check that PostgreSQL is running at 127.0.0.1:");
    assert!(!err.contains(wrong));
}

#[test]
fn a_bad_ledger_url_is_a_usage_error_that_does_not_quote_it() {
    let td = TestDir::new();
    let cases = [
        ("mysql://u:hunter22@h/d", "a ledger URL starts with sqlite:/// (a file) or postgres://"),
        ("postgres://u:hunter22@h:notaport/d", "the PostgreSQL URL cannot be read"),
        ("sqlite://relative.sqlite", "a SQLite ledger URL names an absolute path"),
    ];
    for (url, _said) in cases {
        let err = output::stderr(&rlp_snapshot!(&td, td.expect_output(2, &["trace", "list", "--ledger", url])));
        assert!(!err.contains("hunter22"), "{err}");
        let called = td.rlp().args(["trace", "list"]).env("RUNLOOP_LEDGER_URL", url).output().unwrap();
        assert_eq!(called.status.code(), Some(2));
        rlp_snapshot!(&td, &called);
    }
    // A SQLite URL names another file.
    let other = td.join("elsewhere/events.sqlite");
    let bundle = fleet_bundle(&td);
    let url = format!("sqlite://{}", other.display());
    let called = td.call(&bundle, "fleet.ok", json!({})).args(["--ledger", &url]).output().unwrap();
    assert_eq!(called.status.code(), Some(0), "{}", stderr(&called));
    assert!(other.is_file() && !td.ledger_path().exists());
}

#[test]
fn reading_an_empty_database_creates_nothing() {
    let pg = Postgres::start();
    let td = TestDir::new();
    let url = pg.url();
    let (listed, _) = on(&td, &url, 0, &["trace", "list"]);
    assert_eq!(listed, "");
    let (_, err) = on(&td, &url, 2, &["trace", "verify"]);
    assert_contains(&err, "there is no ledger at postgres://rlp@127.0.0.1:");
    assert_eq!(pg.psql("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"), "0");
}

#[test]
fn a_role_with_only_the_documented_grants_appends_and_reads() {
    let pg = Postgres::start();
    let td = TestDir::new();
    let bundle = fleet_bundle(&td);
    // The schema made by its owner (docs/fleet.md, "Permissions"), then the
    // agents' role granted what the document lists, and nothing more.
    call_json(&td, &bundle, &pg.url());
    pg.admin("postgres", "CREATE ROLE agents LOGIN PASSWORD 'agents-pw'");
    pg.psql(
        "GRANT SELECT, INSERT ON events, rlp_unsealed TO agents; GRANT SELECT, INSERT, UPDATE ON rlp_traces TO agents; \
         GRANT SELECT ON rlp_schema, rlp_ledger, rlp_checkpoints, rlp_checkpoint_leaves TO agents",
    );
    let url = format!("postgres://agents:agents-pw@127.0.0.1:{}/rlp", pg.port);
    call_json(&td, &bundle, &url);
    on(&td, &url, 0, &["trace", "verify"]);
    assert_eq!(pg.psql("SELECT count(*) FROM events WHERE kind = 'tool.result'"), "2");
    // Rows cannot be changed through that role.
    let changed = std::process::Command::new("psql")
        .env("PGPASSWORD", "agents-pw")
        .args(["-X", "-h", "127.0.0.1", "-U", "agents", "-p", &pg.port.to_string(), "-d", "rlp"])
        .args(["-c", "DELETE FROM events"])
        .output()
        .unwrap();
    assert_contains(&String::from_utf8_lossy(&changed.stderr), "permission denied for table events");
    // Without a right appending needs, the call is refused before anything runs.
    let before = pg.psql("SELECT count(*) FROM events");
    for revoke in ["REVOKE UPDATE ON rlp_traces FROM agents", "REVOKE INSERT ON events FROM agents"] {
        pg.psql(revoke);
        let refused = td.call(&bundle, "fleet.ok", json!({})).args(["--ledger", &url]).output().unwrap();
        assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
        rlp_snapshot!(&td, &refused);
    }
    assert_eq!(pg.psql("SELECT count(*) FROM events"), before, "nothing was appended");
    // Reading needs only SELECT.
    on(&td, &url, 0, &["trace", "verify"]);
    // The checkpointer's role: what the document gives it, and it checkpoints;
    // the agents' role cannot.
    pg.admin("postgres", "CREATE ROLE checkpointer LOGIN PASSWORD 'checkpointer-pw'");
    pg.psql(
        "GRANT SELECT ON ALL TABLES IN SCHEMA public TO checkpointer; \
         GRANT INSERT ON rlp_checkpoints, rlp_checkpoint_leaves TO checkpointer; \
         GRANT DELETE ON rlp_unsealed TO checkpointer; \
         GRANT UPDATE (sealed) ON rlp_traces TO checkpointer",
    );
    let checkpointer = format!("postgres://checkpointer:checkpointer-pw@127.0.0.1:{}/rlp", pg.port);
    let (made, _) = on(&td, &checkpointer, 0, &["trace", "checkpoint"]);
    assert_contains(&made, "Checkpoint #1: 6 new frames in 2 traces");
    call_json(&td, &bundle, &pg.url());
    let (_, err) = on(&td, &url, 2, &["trace", "checkpoint"]);
    assert_contains(&err, "permission denied for table rlp_checkpoints");
}

#[test]
fn tls_is_verified_and_never_falls_back_to_plain_text() {
    let (pg, certs) = Postgres::start_tls();
    let td = TestDir::new();
    let bundle = fleet_bundle(&td);
    let require = format!("{}?sslmode=require", pg.url());
    // The server's certificate is signed by a CA rlp does not know: refused.
    let refused = td.call(&bundle, "fleet.ok", json!({})).args(["--ledger", &require]).output().unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    rlp_snapshot!(&td, &refused);
    // `prefer` (the default) does not fall back to plain text either.
    let preferred = td.call(&bundle, "fleet.ok", json!({})).args(["--ledger", &pg.url()]).output().unwrap();
    assert_eq!(preferred.status.code(), Some(2), "{}", stderr(&preferred));
    // With the CA named by PGSSLROOTCERT, the connection is encrypted and verified.
    let ca = certs.path().join("ca.pem");
    let called = td
        .call(&bundle, "fleet.ok", json!({}))
        .args(["--ledger", &require])
        .env("PGSSLROOTCERT", &ca)
        .output()
        .unwrap();
    assert_eq!(called.status.code(), Some(0), "{}", stderr(&called));
    assert_eq!(pg.psql("SELECT count(*) FROM events WHERE kind = 'tool.result'"), "1");
}
