//! The ledger: `$RUNLOOP_HOME/pog/events.sqlite`.
//!
//! SQLite in WAL mode with `synchronous=FULL`; rows are appended, never
//! updated or deleted. Each append is one `BEGIN IMMEDIATE` transaction that
//! reads the previous chain value and inserts the new rows, so the hash chain
//! stays linear however many processes write at once. A busy database is
//! waited for (busy timeout) and the transaction retried, never reported as
//! "database is locked" while another writer finishes.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params};
use uuid::Uuid;

use crate::event::hash::{GENESIS, chain_hash, from_hex, to_hex};
use crate::event::{Event, PreparedRow, Record, RecordError, Recorder};
use crate::home::Home;

/// How long one statement waits for another writer before SQLITE_BUSY.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a busy transaction is retried after the busy timeout.
const BUSY_RETRIES: u32 = 20;
/// Problems listed by [`Ledger::verify_chain`] before it stops collecting.
const MAX_PROBLEMS: usize = 100;

/// The table definition (shared with the benchmarks).
const SCHEMA: &str = include_str!("../event/schema.sql");

const COLUMNS: &str = "id, ts_ms, actor, kind, scope, payload_json, provenance_json, hash_blake3, chain_blake3";

/// What went wrong with the ledger.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The database reported an error.
    #[error("ledger {path}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The SQLite error.
        source: rusqlite::Error,
    },
    /// The file or its folder could not be created.
    #[error("ledger {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A row or a record could not be encoded or decoded.
    #[error("ledger {path}: {message}")]
    Invalid {
        /// The database file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl LedgerError {
    /// The database file concerned.
    pub fn path(&self) -> &Path {
        match self {
            LedgerError::Sqlite { path, .. } | LedgerError::Io { path, .. } | LedgerError::Invalid { path, .. } => path,
        }
    }

    /// Whether SQLite cannot read the file as a database at all (it is not
    /// one, or it is damaged): the file is not a ledger rlp can use.
    pub fn is_not_a_database(&self) -> bool {
        matches!(
            self,
            LedgerError::Sqlite { source, .. }
                if matches!(source.sqlite_error_code(), Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt))
        )
    }
}

/// An open ledger. Safe to share between threads; appends from one process
/// are serialised by a mutex, appends from several processes by SQLite.
#[derive(Debug)]
pub struct Ledger {
    path: PathBuf,
    conn: Mutex<Connection>,
}

/// One problem found by [`Ledger::verify_chain`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainProblem {
    /// The row id.
    pub id: i64,
    /// What is wrong with it.
    pub what: String,
}

/// The outcome of [`Ledger::verify_chain`].
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ChainReport {
    /// Rows checked.
    pub rows: u64,
    /// Rows written before the chain column existed (upstream databases), skipped.
    pub unchained: u64,
    /// The chain value of the last row, if any.
    pub head: Option<String>,
    /// Problems, in row order (at most 100).
    pub problems: Vec<ChainProblem>,
}

impl ChainReport {
    /// Whether every row's hash and chain value check out.
    pub fn is_intact(&self) -> bool {
        self.problems.is_empty()
    }
}

fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(error.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

/// Runs `op`, retrying while the database is busy.
fn retry_busy<T>(mut op: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let mut attempt = 0;
    loop {
        match op() {
            Err(e) if is_busy(&e) && attempt < BUSY_RETRIES => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(5 + u64::from(attempt) * 7));
            }
            other => return other,
        }
    }
}

fn row_to_event(row: &rusqlite::Row<'_>) -> rusqlite::Result<Event> {
    Ok(Event {
        id: row.get(0)?,
        ts_ms: row.get(1)?,
        actor: row.get(2)?,
        kind: row.get(3)?,
        scope: row.get(4)?,
        payload_json: row.get(5)?,
        provenance_json: row.get(6)?,
        hash_blake3: row.get(7)?,
        chain_blake3: row.get::<_, Option<String>>(8)?.unwrap_or_default(),
    })
}

impl Ledger {
    /// Opens (creating if needed) the ledger at `path`.
    pub fn open(path: &Path) -> Result<Ledger, LedgerError> {
        let io = |source| LedgerError::Io { path: path.to_path_buf(), source };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(io)?;
        }
        {
            use std::os::unix::fs::OpenOptionsExt;
            // The database (and so its -wal and -shm files) readable by the owner only.
            std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(path).map_err(io)?;
        }
        Self::connect(path)
    }

    /// Opens the ledger of a runtime home (`pog/events.sqlite`).
    pub fn open_home(home: &Home) -> Result<Ledger, LedgerError> {
        Self::open(&home.ledger_file())
    }

    /// Opens an existing ledger; an error if the file does not exist.
    pub fn open_existing(path: &Path) -> Result<Ledger, LedgerError> {
        if !path.is_file() {
            return Err(LedgerError::Io {
                path: path.to_path_buf(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no ledger here yet"),
            });
        }
        Self::connect(path)
    }

    fn connect(path: &Path) -> Result<Ledger, LedgerError> {
        let sqlite = |source| LedgerError::Sqlite { path: path.to_path_buf(), source };
        let mut conn = Connection::open(path).map_err(sqlite)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(sqlite)?;
        retry_busy(|| conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))).map_err(sqlite)?;
        conn.pragma_update(None, "synchronous", "FULL").map_err(sqlite)?;
        // Committed frames are durable in the WAL; checkpointing every time a
        // short-lived `rlp tools call` closes the database would add fsyncs to
        // each call. SQLite checkpoints on its own as the WAL grows.
        conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true).map_err(sqlite)?;
        retry_busy(|| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            tx.execute_batch(SCHEMA)?;
            let has_chain: bool =
                tx.prepare("SELECT 1 FROM pragma_table_info('events') WHERE name = 'chain_blake3'")?.exists([])?;
            if !has_chain {
                tx.execute_batch("ALTER TABLE events ADD COLUMN chain_blake3 TEXT")?;
            }
            tx.commit()
        })
        .map_err(sqlite)?;
        Ok(Ledger { path: path.to_path_buf(), conn: Mutex::new(conn) })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sqlite(&self, source: rusqlite::Error) -> LedgerError {
        LedgerError::Sqlite { path: self.path.clone(), source }
    }

    fn invalid(&self, message: impl Into<String>) -> LedgerError {
        LedgerError::Invalid { path: self.path.clone(), message: message.into() }
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Connection>, LedgerError> {
        self.conn.lock().map_err(|_| self.invalid("a thread panicked while writing; reopen the ledger"))
    }

    /// Appends `records` in one durable transaction; returns their row ids.
    pub fn append(&self, records: &[Record]) -> Result<Vec<i64>, LedgerError> {
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<PreparedRow> =
            records.iter().map(PreparedRow::from_record).collect::<Result<_, _>>().map_err(|e| self.invalid(e))?;
        let mut conn = self.lock()?;
        let mut bad_chain = None;
        let ids = retry_busy(|| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let last: Option<String> = tx
                .query_row(
                    "SELECT chain_blake3 FROM events WHERE chain_blake3 IS NOT NULL ORDER BY id DESC LIMIT 1",
                    [],
                    |r| r.get(0),
                )
                .optional()?;
            let mut prev = match last.as_deref() {
                None => GENESIS,
                Some(text) => match from_hex(text) {
                    Some(bytes) => bytes,
                    None => {
                        bad_chain = Some(text.to_string());
                        return Err(rusqlite::Error::InvalidQuery);
                    }
                },
            };
            let mut ids = Vec::with_capacity(rows.len());
            {
                let mut insert = tx.prepare_cached(
                    "INSERT INTO events (ts_ms, actor, kind, scope, payload_json, provenance_json, hash_blake3, chain_blake3)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )?;
                for row in &rows {
                    let chain = chain_hash(&prev, &row.hash);
                    insert.execute(params![
                        row.ts_ms,
                        row.actor,
                        row.kind.as_str(),
                        row.scope,
                        row.payload_json,
                        row.provenance_json,
                        to_hex(&row.hash),
                        to_hex(&chain),
                    ])?;
                    ids.push(tx.last_insert_rowid());
                    prev = chain;
                }
            }
            tx.commit()?;
            Ok(ids)
        });
        match (ids, bad_chain) {
            (Ok(ids), _) => Ok(ids),
            (Err(_), Some(text)) => Err(self
                .invalid(format!("the last row's chain value `{text}` is not 64 hex digits; the ledger was edited"))),
            (Err(e), None) => Err(self.sqlite(e)),
        }
    }

    /// Number of rows.
    pub fn count(&self) -> Result<u64, LedgerError> {
        let conn = self.lock()?;
        retry_busy(|| conn.query_row("SELECT count(*) FROM events", [], |r| r.get::<_, i64>(0)))
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(|e| self.sqlite(e))
    }

    fn stream(
        &self,
        sql: &str,
        param: Option<String>,
        mut f: impl FnMut(Event) -> ControlFlow<()>,
    ) -> Result<(), LedgerError> {
        let conn = self.lock()?;
        let mut statement = conn.prepare(sql).map_err(|e| self.sqlite(e))?;
        let mut rows = match &param {
            Some(p) => statement.query([p]),
            None => statement.query([]),
        }
        .map_err(|e| self.sqlite(e))?;
        while let Some(row) = rows.next().map_err(|e| self.sqlite(e))? {
            let event = row_to_event(row).map_err(|e| self.sqlite(e))?;
            if f(event).is_break() {
                break;
            }
        }
        Ok(())
    }

    /// Calls `f` with every row in append order (streaming; stops on `Break`).
    pub fn for_each_event(&self, f: impl FnMut(Event) -> ControlFlow<()>) -> Result<(), LedgerError> {
        self.stream(&format!("SELECT {COLUMNS} FROM events ORDER BY id"), None, f)
    }

    /// Calls `f` with every row of one trace in append order (streaming).
    pub fn for_each_in_trace(
        &self,
        trace_id: &Uuid,
        f: impl FnMut(Event) -> ControlFlow<()>,
    ) -> Result<(), LedgerError> {
        self.stream(
            &format!("SELECT {COLUMNS} FROM events WHERE json_extract(provenance_json, '$.trace_id') = ?1 ORDER BY id"),
            Some(trace_id.to_string()),
            f,
        )
    }

    /// Checks every row's hash and chain value, in order (streaming).
    ///
    /// Each row is checked against the stored chain value of the row before
    /// it, so an edited, removed or reordered row is reported where it is.
    pub fn verify_chain(&self) -> Result<ChainReport, LedgerError> {
        let mut report = ChainReport::default();
        let mut prev: Option<[u8; 32]> = None;
        let problem = |report: &mut ChainReport, id: i64, what: String| {
            if report.problems.len() < MAX_PROBLEMS {
                report.problems.push(ChainProblem { id, what });
            }
        };
        self.for_each_event(|event| {
            report.rows += 1;
            if event.chain_blake3.is_empty() {
                if prev.is_some() {
                    problem(&mut report, event.id, "row has no chain value after chained rows".into());
                } else {
                    report.unchained += 1;
                }
                return ControlFlow::Continue(());
            }
            match event.computed_hash() {
                Ok(hash) if to_hex(&hash) == event.hash_blake3 => {}
                Ok(_) => problem(&mut report, event.id, "hash_blake3 does not match the row's content".into()),
                Err(why) => problem(&mut report, event.id, why),
            }
            match (from_hex(&event.hash_blake3), from_hex(&event.chain_blake3)) {
                (Some(row), Some(chain)) => {
                    if chain_hash(&prev.unwrap_or(GENESIS), &row) != chain {
                        problem(
                            &mut report,
                            event.id,
                            "chain_blake3 does not follow from the previous row (a row was edited, removed or reordered)"
                                .into(),
                        );
                    }
                    prev = Some(chain);
                }
                _ => {
                    problem(&mut report, event.id, "hash_blake3 or chain_blake3 is not 64 hex digits".into());
                    prev = from_hex(&event.chain_blake3).or(prev);
                }
            }
            report.head = Some(event.chain_blake3.clone());
            ControlFlow::Continue(())
        })?;
        Ok(report)
    }

    /// `PRAGMA integrity_check`: `ok`, or SQLite's list of problems.
    pub fn integrity_check(&self) -> Result<String, LedgerError> {
        let conn = self.lock()?;
        let mut statement = conn.prepare("PRAGMA integrity_check").map_err(|e| self.sqlite(e))?;
        let lines: Vec<String> = statement
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(|e| self.sqlite(e))?
            .collect::<Result<_, _>>()
            .map_err(|e| self.sqlite(e))?;
        Ok(lines.join("\n"))
    }
}

/// Opens the ledger at `path` and checks its chain (see [`Ledger::verify_chain`]).
pub fn verify_chain(path: &Path) -> Result<ChainReport, LedgerError> {
    Ledger::open_existing(path)?.verify_chain()
}

impl Recorder for Ledger {
    fn record(&self, batch: &[Record]) -> Result<(), RecordError> {
        self.append(batch).map(|_| ()).map_err(|e| RecordError(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventKind, Provenance};
    use serde_json::json;

    fn record(trace: Uuid, n: i64) -> Record {
        Record {
            ts_ms: 1000 + n,
            actor: "runtime".into(),
            kind: EventKind::ToolCall,
            scope: "a".into(),
            payload: json!({"n": n}),
            provenance: Provenance { trace_id: trace, msg_id: Uuid::now_v7(), agent: "a".into() },
        }
    }

    #[test]
    fn appends_iterates_and_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(&dir.path().join("pog/events.sqlite")).unwrap();
        let (t1, t2) = (Uuid::now_v7(), Uuid::now_v7());
        ledger.append(&[record(t1, 1), record(t2, 2)]).unwrap();
        ledger.append(&[record(t1, 3)]).unwrap();
        let mut seen = Vec::new();
        ledger
            .for_each_in_trace(&t1, |e| {
                seen.push(e.payload().unwrap()["n"].as_i64().unwrap());
                ControlFlow::Continue(())
            })
            .unwrap();
        assert_eq!(seen, [1, 3]);
        let report = ledger.verify_chain().unwrap();
        assert_eq!(report.rows, 3);
        assert!(report.is_intact(), "{report:?}");
        assert_eq!(ledger.integrity_check().unwrap(), "ok");
    }

    #[test]
    fn detects_edits_and_removals() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.sqlite");
        let ledger = Ledger::open(&path).unwrap();
        let t = Uuid::now_v7();
        ledger.append(&[record(t, 1), record(t, 2), record(t, 3), record(t, 4)]).unwrap();
        drop(ledger);
        let conn = Connection::open(&path).unwrap();
        conn.execute("UPDATE events SET payload_json = '{\"n\":9}' WHERE id = 2", []).unwrap();
        conn.execute("DELETE FROM events WHERE id = 3", []).unwrap();
        drop(conn);
        let report = verify_chain(&path).unwrap();
        let ids: Vec<i64> = report.problems.iter().map(|p| p.id).collect();
        assert_eq!(ids, [2, 4], "{report:?}");
        assert!(report.problems[0].what.contains("content"));
        assert!(report.problems[1].what.contains("previous row"));
    }
}
