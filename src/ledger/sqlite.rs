//! The SQLite ledger: `$RUNLOOP_HOME/pog/events.sqlite`.
//!
//! WAL mode with `synchronous=FULL`; rows are appended, never updated or
//! deleted. Each append is one `BEGIN IMMEDIATE` transaction that reads the
//! head rows of the traces it appends to, inserts the new rows chained on
//! each trace's own chain and moves those heads (src/ledger/layout.rs). A
//! busy database is waited for (busy timeout) and the transaction retried,
//! never reported as "database is locked" while another writer finishes.
//! The tables are `src/event/schema.sql` and `sqlite_layout.sql`; the
//! PostgreSQL ledger (src/ledger/postgres/) keeps the same ones.
//!
//! A ledger written before per-trace chains is upgraded when first opened,
//! in one transaction: its rows stay as they are (the legacy chain, sealed
//! by its row count and head in `rlp_ledger`), and a trigger refuses rows
//! without a trace position from then on, so an older rlp cannot extend
//! the legacy chain behind the new layout's back.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params};
use uuid::Uuid;

use crate::event::hash::{GENESIS, to_hex};
use crate::event::{Decision, Event, EventKind, PreparedRow, Record, RecordError, Recorder, Usage};
use crate::ledger::layout::{Leaf, LedgerInfo, StoredCheckpoint, TraceChain, TraceHead, attach_leaves, traces_of};
use crate::ledger::query::TraceSummary;
use crate::ledger::{BulkAppend, LedgerError, LedgerStore, Location, VerifyReport, passing_on};

/// How long one statement waits for another writer before SQLITE_BUSY
/// (about: the sum of [`busy_wait`]'s pauses).
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest pause between two tries for a busy database.
const BUSY_PAUSE_MAX: Duration = Duration::from_millis(2);
/// How often a busy transaction is retried after the busy timeout.
const BUSY_RETRIES: u32 = 20;

/// The table definition (shared with the benchmarks).
const SCHEMA: &str = include_str!("../event/schema.sql");
/// The tables beside `events`, created at the upgrade.
const LAYOUT: &str = include_str!("sqlite_layout.sql");
/// Refuses rows outside the per-trace chains in a ledger upgraded to them
/// (one created with them has the CHECK of `schema.sql`, which costs less
/// per row than a trigger).
const CHAINED_ONLY: &str = "CREATE TRIGGER IF NOT EXISTS rlp_events_chained BEFORE INSERT ON events
     WHEN NEW.trace_seq IS NULL
     BEGIN SELECT RAISE(ABORT, 'this ledger was upgraded to per-trace chains by a newer rlp: upgrade rlp'); END";
/// Drops the partial index of unsealed traces earlier ledgers had (every
/// head move rewrote its entry: a page more per commit, where a checkpoint
/// scans the head rows instead).
const NO_UNSEALED_INDEX: &str = "DROP INDEX IF EXISTS rlp_traces_unsealed";

const COLUMNS: &str =
    "id, ts_ms, actor, kind, scope, payload_json, provenance_json, hash_blake3, chain_blake3, trace_seq";
/// A row's trace id, as the `events_by_trace` index has it.
const TRACE: &str = "json_extract(provenance_json, '$.trace_id')";

const INSERT: &str =
    "INSERT INTO events (ts_ms, actor, kind, scope, payload_json, provenance_json, hash_blake3, chain_blake3, trace_seq)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
const READ_HEAD: &str = "SELECT frames, head, sealed FROM rlp_traces WHERE trace_id = ?1";
const MOVE_HEAD: &str = "UPDATE rlp_traces SET frames = ?2, head = ?3 WHERE trace_id = ?1";
const NEW_HEAD: &str = "INSERT INTO rlp_traces (trace_id, frames, head) VALUES (?1, ?2, ?3)";

/// One row per trace: `rlp trace list`. Kinds and the deny decision are
/// bound by name.
const LIST_SQL: &str = "
SELECT json_extract(provenance_json, '$.trace_id') AS trace,
       json_group_array(DISTINCT json_extract(provenance_json, '$.agent')),
       min(ts_ms), max(ts_ms), count(*),
       sum(kind = :call),
       sum(CASE WHEN kind = :result AND json_valid(payload_json)
                THEN json_extract(payload_json, '$.error') IS NOT NULL
                     AND coalesce(json_extract(payload_json, '$.error.will_retry'), 0) = 0
                ELSE 0 END),
       count(DISTINCT CASE WHEN json_valid(payload_json)
                            AND ((kind = :audit AND json_extract(payload_json, '$.decision') = :deny)
                              OR (kind = :confirm AND json_extract(payload_json, '$.approved') = 0))
                           THEN json_extract(payload_json, '$.invocation_id') END),
       max(CASE WHEN kind = :replay AND json_valid(payload_json)
                THEN json_extract(payload_json, '$.replay_of') END)
FROM events
GROUP BY trace
ORDER BY min(id)";

/// The trace `LIST_SQL` lists last, read from the `events_by_trace` index
/// alone (no payload is parsed).
const NEWEST_SQL: &str = "
SELECT json_extract(provenance_json, '$.trace_id') AS trace
FROM events
GROUP BY trace
ORDER BY min(id) DESC
LIMIT 1";

/// An open SQLite ledger. Safe to share between threads; appends from one
/// process are serialised by a mutex, appends from several processes by
/// SQLite.
#[derive(Debug)]
pub struct SqliteLedger {
    location: Location,
    path: PathBuf,
    conn: Mutex<Connection>,
    /// The heads appends left (locked after `conn`, while it is held).
    heads: Mutex<HeadCache>,
}

fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(error.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

/// SQLite's busy handler: whether to try again after the `tries`-th busy
/// answer. Short pauses (50 µs, doubling to 2 ms) rather than SQLite's own
/// (up to 100 ms), so many writers taking turns lose little time waiting
/// for a lock already free; gives up after about [`BUSY_TIMEOUT`].
fn busy_wait(tries: i32) -> bool {
    let tries = u32::try_from(tries).unwrap_or(0);
    let pause = Duration::from_micros(50 << tries.min(6)).min(BUSY_PAUSE_MAX);
    let most = u32::try_from(BUSY_TIMEOUT.as_micros() / BUSY_PAUSE_MAX.as_micros()).unwrap_or(u32::MAX);
    if tries >= most {
        return false;
    }
    std::thread::sleep(pause);
    true
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
        trace_seq: row.get(9)?,
    })
}

fn count(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// Why an append stopped: SQLite failed, or a stored value is not what rlp wrote.
enum AppendError {
    Sqlite(rusqlite::Error),
    Edited(String),
}

impl From<rusqlite::Error> for AppendError {
    fn from(e: rusqlite::Error) -> AppendError {
        AppendError::Sqlite(e)
    }
}

/// The chain of `trace` as its head row has it, and whether it has one
/// (empty when it has none).
fn read_chain(conn: &Connection, trace: &Uuid) -> Result<(TraceChain, bool), AppendError> {
    let head: Option<(i64, String)> =
        conn.prepare_cached(READ_HEAD)?.query_row([trace.to_string()], |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
    match head {
        None => Ok((TraceChain::EMPTY, false)),
        Some((frames, head)) => match TraceChain::of_head(frames, &head) {
            Some(chain) => Ok((chain, true)),
            None => Err(AppendError::Edited(format!(
                "the head `{head}` of trace {trace} in rlp_traces is not 64 hex digits; the ledger was edited"
            ))),
        },
    }
}

/// Inserts `row` as the next frame of `chain`; returns its row id.
fn insert(conn: &Connection, row: &PreparedRow, chain: &mut TraceChain) -> rusqlite::Result<i64> {
    let (seq, value) = chain.push(row);
    conn.prepare_cached(INSERT)?.execute(params![
        row.ts_ms,
        row.actor,
        row.kind.as_str(),
        row.scope,
        row.payload_json,
        row.provenance_json,
        to_hex(&row.hash),
        to_hex(&value),
        seq,
    ])?;
    Ok(conn.last_insert_rowid())
}

/// One trace's chain while rows are appended to it: where it stands, and
/// whether its head row existed before.
struct Appending {
    trace: Uuid,
    chain: TraceChain,
    known: bool,
}

/// The most traces whose heads a [`HeadCache`] keeps; past it, it starts
/// again empty.
const CACHED_HEADS: usize = 4096;

/// The chains this connection last left the traces it appended to at,
/// trusted only while no other connection (process) has committed since:
/// while `PRAGMA data_version` reads as it did. An append then reads no head
/// row; a change by anyone else, or an import, empties it.
#[derive(Debug, Default)]
struct HeadCache {
    data_version: Option<i64>,
    heads: HashMap<Uuid, TraceChain>,
}

impl HeadCache {
    /// Empties the cache unless the database is as this connection left it
    /// (inside the caller's write transaction, so nobody commits meanwhile).
    fn revalidate(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        let version: i64 = conn.prepare_cached("PRAGMA data_version")?.query_row([], |r| r.get(0))?;
        if self.data_version != Some(version) {
            self.heads.clear();
            self.data_version = Some(version);
        }
        Ok(())
    }

    /// Where `chains` stand once their transaction committed.
    fn remember(&mut self, chains: &[Appending]) {
        if self.heads.len() + chains.len() > CACHED_HEADS {
            self.heads.clear();
        }
        self.heads.extend(chains.iter().map(|a| (a.trace, a.chain)));
    }

    /// Forgets every head (another writer on this connection moved some).
    fn clear(&mut self) {
        self.heads.clear();
        self.data_version = None;
    }
}

/// Moves the head rows of `chains` to where they stand (a new trace's is
/// made).
fn write_heads(conn: &Connection, chains: &[Appending]) -> rusqlite::Result<()> {
    for Appending { trace, chain, known } in chains {
        let statement = if *known { MOVE_HEAD } else { NEW_HEAD };
        conn.prepare_cached(statement)?.execute(params![trace.to_string(), chain.frames, chain.head_hex()])?;
    }
    Ok(())
}

/// Appends `rows`, each on its trace's chain, and moves the heads (inside
/// the caller's transaction); returns their ids and where the chains stand.
/// A head `cache` holds is not read again.
fn append_rows(
    conn: &Connection,
    rows: &[PreparedRow],
    cache: &mut HeadCache,
) -> Result<(Vec<i64>, Vec<Appending>), AppendError> {
    cache.revalidate(conn)?;
    let mut chains = Vec::new();
    for trace in traces_of(rows) {
        let (chain, known) = match cache.heads.get(&trace) {
            Some(chain) => (*chain, true),
            None => read_chain(conn, &trace)?,
        };
        chains.push(Appending { trace, chain, known });
    }
    let mut ids = Vec::with_capacity(rows.len());
    for row in rows {
        let Some(appending) = chains.iter_mut().find(|a| a.trace == row.trace_id) else {
            unreachable!("traces_of lists every row's trace")
        };
        ids.push(insert(conn, row, &mut appending.chain)?);
    }
    write_heads(conn, &chains)?;
    Ok((ids, chains))
}

/// A row of `rlp_traces`.
fn head_of_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<TraceHead> {
    Ok(TraceHead { trace_id: row.get(0)?, frames: row.get(1)?, head: row.get(2)?, sealed: row.get(3)? })
}

/// Creates the per-trace layout in a ledger that has none (inside the
/// caller's transaction): the rows there are become the legacy chain.
fn upgrade(conn: &Connection) -> rusqlite::Result<()> {
    let has_column =
        |name: &str| conn.prepare("SELECT 1 FROM pragma_table_info('events') WHERE name = ?1")?.exists([name]);
    if !has_column("chain_blake3")? {
        conn.execute_batch("ALTER TABLE events ADD COLUMN chain_blake3 TEXT")?;
    }
    if !has_column("trace_seq")? {
        conn.execute_batch("ALTER TABLE events ADD COLUMN trace_seq INTEGER")?;
        conn.execute_batch(CHAINED_ONLY)?;
    }
    let upgraded =
        conn.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'rlp_ledger'")?.exists([])?;
    if !upgraded {
        conn.execute_batch(LAYOUT)?;
        let rows: i64 = conn.query_row("SELECT count(*) FROM events", [], |r| r.get(0))?;
        let head: Option<String> = conn
            .query_row(
                "SELECT chain_blake3 FROM events WHERE chain_blake3 IS NOT NULL ORDER BY id DESC LIMIT 1",
                [],
                |r| r.get(0),
            )
            .optional()?;
        conn.execute(
            "INSERT INTO rlp_ledger (one, ledger_id, legacy_rows, legacy_head) VALUES (1, ?1, ?2, ?3)",
            params![Uuid::now_v7().to_string(), rows, head.unwrap_or_else(|| to_hex(&GENESIS))],
        )?;
    }
    conn.execute_batch(NO_UNSEALED_INDEX)
}

/// Changes whenever [`upgrade`] does what it did not before (with the
/// statements it runs, it makes [`layout_version`]).
const UPGRADE_REVISION: &str = "per-trace chains, rlp_ledger, no unsealed index";

/// What `PRAGMA user_version` holds once this rlp's layout is in place: a
/// digest of the statements that make it, positive and never 0 (a new
/// database), so that a ledger whose layout another rlp made, older or
/// newer, goes through them again.
fn layout_version() -> i32 {
    let statements = [SCHEMA, LAYOUT, CHAINED_ONLY, NO_UNSEALED_INDEX, UPGRADE_REVISION].join("\0");
    let digest = blake3::hash(statements.as_bytes());
    let [a, b, c, d, ..] = *digest.as_bytes();
    i32::from_le_bytes([a, b, c, d]) & i32::MAX | 1
}

/// Refuses a ledger path that holds something other than a regular file (a
/// FIFO, a socket, a device, a folder): SQLite cannot keep a ledger there,
/// and opening a FIFO to write would wait for a reader for ever.
fn regular_file(path: &Path, found: &std::fs::Metadata) -> Result<(), LedgerError> {
    let kind = found.file_type();
    if kind.is_file() {
        return Ok(());
    }
    Err(LedgerError::NotAFile { path: path.to_path_buf(), what: crate::bundle::inventory::kind_name(kind) })
}

impl SqliteLedger {
    /// Opens (creating if needed) the ledger at `path`.
    pub fn open(path: &Path) -> Result<SqliteLedger, LedgerError> {
        let io = |source| LedgerError::Io { path: path.to_path_buf(), source };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(io)?;
        }
        match std::fs::metadata(path) {
            Ok(found) => regular_file(path, &found)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        {
            use std::os::unix::fs::OpenOptionsExt;
            // The database (and so its -wal and -shm files) readable by the
            // owner only. Never blocking: a FIFO put there meanwhile fails
            // the open or is refused below, instead of waiting for a reader.
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .custom_flags(libc::O_NONBLOCK)
                .open(path)
                .map_err(io)?;
            regular_file(path, &file.metadata().map_err(io)?)?;
        }
        Self::connect(path)
    }

    /// Opens an existing ledger; an error if the file does not exist.
    pub fn open_existing(path: &Path) -> Result<SqliteLedger, LedgerError> {
        match std::fs::metadata(path) {
            Ok(found) => regular_file(path, &found)?,
            Err(_) => {
                return Err(LedgerError::Io {
                    path: path.to_path_buf(),
                    source: std::io::Error::new(std::io::ErrorKind::NotFound, "no ledger here yet"),
                });
            }
        }
        Self::connect(path)
    }

    fn connect(path: &Path) -> Result<SqliteLedger, LedgerError> {
        let sqlite = |source| LedgerError::Sqlite { path: path.to_path_buf(), source };
        let mut conn = Connection::open(path).map_err(sqlite)?;
        conn.busy_handler(Some(busy_wait)).map_err(sqlite)?;
        retry_busy(|| conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))).map_err(sqlite)?;
        conn.pragma_update(None, "synchronous", "FULL").map_err(sqlite)?;
        // Committed frames are durable in the WAL; checkpointing every time a
        // short-lived `rlp tools call` closes the database would add fsyncs to
        // each call. SQLite checkpoints on its own as the WAL grows, and a
        // closing ledger empties a long one ([`SqliteLedger::drop`]).
        conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true).map_err(sqlite)?;
        // A ledger this rlp's layout is in place in skips the statements
        // that make it: parsing them and taking the write lock is most of
        // what opening costs a short-lived `rlp tools call`.
        let version = layout_version();
        let in_place =
            retry_busy(|| conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i32>(0))).map_err(sqlite)?;
        if in_place != version {
            retry_busy(|| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                tx.execute_batch(SCHEMA)?;
                upgrade(&tx)?;
                tx.pragma_update(None, "user_version", version)?;
                tx.commit()
            })
            .map_err(sqlite)?;
        }
        Ok(SqliteLedger {
            location: Location::Sqlite(path.to_path_buf()),
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
            heads: Mutex::new(HeadCache::default()),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// SQLite's own consistency check (`PRAGMA integrity_check`): `ok`, or
    /// its list of problems.
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

    fn sqlite(&self, source: rusqlite::Error) -> LedgerError {
        LedgerError::Sqlite { path: self.path.clone(), source }
    }

    fn invalid(&self, message: impl Into<String>) -> LedgerError {
        LedgerError::Invalid { path: self.path.clone(), message: message.into() }
    }

    fn append_failed(&self, error: AppendError) -> LedgerError {
        match error {
            AppendError::Sqlite(e) => self.sqlite(e),
            AppendError::Edited(message) => self.invalid(message),
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, Connection>, LedgerError> {
        self.conn.lock().map_err(|_| self.invalid("a thread panicked while writing; reopen the ledger"))
    }

    /// Calls `f` with each row `sql` (a query of [`COLUMNS`]) gives.
    fn stream(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
        f: &mut dyn FnMut(Event) -> ControlFlow<()>,
    ) -> Result<(), LedgerError> {
        self.query(sql, params, row_to_event, f)
    }

    /// Calls `f` with each row of `sql`, read by `read`.
    fn query<T>(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
        read: impl Fn(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
        f: &mut dyn FnMut(T) -> ControlFlow<()>,
    ) -> Result<(), LedgerError> {
        let conn = self.lock()?;
        let mut statement = conn.prepare(sql).map_err(|e| self.sqlite(e))?;
        let mut rows = statement.query(params).map_err(|e| self.sqlite(e))?;
        while let Some(row) = rows.next().map_err(|e| self.sqlite(e))? {
            let item = read(row).map_err(|e| self.sqlite(e))?;
            if f(item).is_break() {
                break;
            }
        }
        Ok(())
    }

    /// The head rows `sql` selects (trace id, frames, head, sealed).
    fn heads(&self, sql: &str, params: impl rusqlite::Params) -> Result<Vec<TraceHead>, LedgerError> {
        let mut heads = Vec::new();
        self.query(sql, params, head_of_row, &mut |head| {
            heads.push(head);
            ControlFlow::Continue(())
        })?;
        Ok(heads)
    }

    /// The checkpoints `condition` (an SQL condition on `seq`, with `params`) keeps, in order, with their leaves.
    fn checkpoints_where(
        &self,
        condition: &str,
        params: impl rusqlite::Params + Copy,
    ) -> Result<Vec<StoredCheckpoint>, LedgerError> {
        let mut checkpoints = Vec::new();
        self.query(
            &format!("SELECT seq, statement, signature FROM rlp_checkpoints WHERE {condition} ORDER BY seq"),
            params,
            |r| Ok(StoredCheckpoint { seq: r.get(0)?, statement: r.get(1)?, signature: r.get(2)?, leaves: Vec::new() }),
            &mut |c| {
                checkpoints.push(c);
                ControlFlow::Continue(())
            },
        )?;
        let mut leaves = Vec::new();
        self.query(
            &format!(
                "SELECT seq, trace_id, frames, head FROM rlp_checkpoint_leaves WHERE {condition} ORDER BY seq, trace_id"
            ),
            params,
            |r| Ok((r.get::<_, i64>(0)?, Leaf { trace_id: r.get(1)?, frames: r.get(2)?, head: r.get(3)? })),
            &mut |leaf| {
                leaves.push(leaf);
                ControlFlow::Continue(())
            },
        )?;
        attach_leaves(&mut checkpoints, leaves);
        Ok(checkpoints)
    }

    /// [`LedgerStore::for_each_event`] for a closure.
    pub fn for_each_event(&self, mut f: impl FnMut(Event) -> ControlFlow<()>) -> Result<(), LedgerError> {
        LedgerStore::for_each_event(self, &mut f)
    }

    /// [`LedgerStore::for_each_in_trace`] for a closure.
    pub fn for_each_in_trace(
        &self,
        trace_id: &Uuid,
        mut f: impl FnMut(Event) -> ControlFlow<()>,
    ) -> Result<(), LedgerError> {
        LedgerStore::for_each_in_trace(self, trace_id, &mut f)
    }
}

impl LedgerStore for SqliteLedger {
    fn location(&self) -> &Location {
        &self.location
    }

    fn append(&self, records: &[Record]) -> Result<Vec<i64>, LedgerError> {
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<PreparedRow> =
            records.iter().map(PreparedRow::from_record).collect::<Result<_, _>>().map_err(|e| self.invalid(e))?;
        let mut conn = self.lock()?;
        let mut cache =
            self.heads.lock().map_err(|_| self.invalid("a thread panicked while writing; reopen the ledger"))?;
        let mut edited = None;
        let ids = retry_busy(|| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let (ids, chains) = match append_rows(&tx, &rows, &mut cache) {
                Ok(done) => done,
                Err(AppendError::Sqlite(e)) => return Err(e),
                Err(AppendError::Edited(message)) => {
                    edited = Some(message);
                    return Err(rusqlite::Error::InvalidQuery);
                }
            };
            tx.commit()?;
            cache.remember(&chains);
            Ok(ids)
        });
        match (ids, edited) {
            (Ok(ids), _) => Ok(ids),
            (Err(_), Some(message)) => Err(self.invalid(message)),
            (Err(e), None) => Err(self.sqlite(e)),
        }
    }

    fn count(&self) -> Result<u64, LedgerError> {
        let conn = self.lock()?;
        retry_busy(|| conn.query_row("SELECT count(*) FROM events", [], |r| r.get::<_, i64>(0)))
            .map(count)
            .map_err(|e| self.sqlite(e))
    }

    fn for_each_event(&self, f: &mut dyn FnMut(Event) -> ControlFlow<()>) -> Result<(), LedgerError> {
        self.stream(&format!("SELECT {COLUMNS} FROM events ORDER BY id"), [], f)
    }

    fn for_each_in_trace(
        &self,
        trace_id: &Uuid,
        f: &mut dyn FnMut(Event) -> ControlFlow<()>,
    ) -> Result<(), LedgerError> {
        self.stream(&format!("SELECT {COLUMNS} FROM events WHERE {TRACE} = ?1 ORDER BY id"), [trace_id.to_string()], f)
    }

    fn for_each_legacy(&self, f: &mut dyn FnMut(Event) -> ControlFlow<()>) -> Result<(), LedgerError> {
        self.stream(&format!("SELECT {COLUMNS} FROM events WHERE trace_seq IS NULL ORDER BY id"), [], f)
    }

    fn for_each_chained(&self, f: &mut dyn FnMut(Event) -> ControlFlow<()>) -> Result<(), LedgerError> {
        self.stream(&format!("SELECT {COLUMNS} FROM events WHERE trace_seq IS NOT NULL ORDER BY {TRACE}, id"), [], f)
    }

    fn for_each_in_trace_from(
        &self,
        trace_id: &Uuid,
        from_seq: i64,
        f: &mut dyn FnMut(Event) -> ControlFlow<()>,
    ) -> Result<(), LedgerError> {
        self.stream(
            &format!("SELECT {COLUMNS} FROM events WHERE {TRACE} = ?1 AND trace_seq >= ?2 ORDER BY id"),
            params![trace_id.to_string(), from_seq],
            f,
        )
    }

    fn for_each_unsealed_row(
        &self,
        heads: &[TraceHead],
        f: &mut dyn FnMut(Event) -> ControlFlow<()>,
    ) -> Result<(), LedgerError> {
        // One indexed query per trace: cheap in the same process.
        let sql = format!("SELECT {COLUMNS} FROM events WHERE {TRACE} = ?1 AND trace_seq >= ?2 ORDER BY id");
        for head in heads {
            let read =
                |f: &mut dyn FnMut(Event) -> ControlFlow<()>| self.stream(&sql, params![head.trace_id, head.sealed], f);
            if passing_on(f, read)?.is_break() {
                break;
            }
        }
        Ok(())
    }

    fn info(&self) -> Result<Option<LedgerInfo>, LedgerError> {
        let conn = self.lock()?;
        conn.query_row("SELECT ledger_id, legacy_rows, legacy_head FROM rlp_ledger", [], |r| {
            Ok(LedgerInfo { ledger_id: r.get(0)?, legacy_rows: count(r.get(1)?), legacy_head: r.get(2)? })
        })
        .optional()
        .map_err(|e| self.sqlite(e))
    }

    fn for_each_head(&self, f: &mut dyn FnMut(TraceHead) -> ControlFlow<()>) -> Result<(), LedgerError> {
        self.query("SELECT trace_id, frames, head, sealed FROM rlp_traces ORDER BY trace_id", [], head_of_row, f)
    }

    fn heads_after(&self, after: Option<&str>, limit: usize) -> Result<Vec<TraceHead>, LedgerError> {
        let sql = "SELECT trace_id, frames, head, sealed FROM rlp_traces WHERE ?1 IS NULL OR trace_id > ?1
                    ORDER BY trace_id LIMIT ?2";
        self.heads(sql, params![after, i64::try_from(limit).unwrap_or(i64::MAX)])
    }

    fn marked_heads(&self) -> Result<Vec<TraceHead>, LedgerError> {
        let sql = "SELECT trace_id, frames, head, sealed FROM rlp_traces WHERE frames <> sealed ORDER BY trace_id";
        self.heads(sql, [])
    }

    fn checkpoint_statements(&self) -> Result<(Vec<StoredCheckpoint>, Vec<u64>), LedgerError> {
        let (mut checkpoints, mut counts) = (Vec::new(), Vec::new());
        self.query(
            crate::ledger::CHECKPOINT_STATEMENTS,
            [],
            |r| {
                let checkpoint =
                    StoredCheckpoint { seq: r.get(0)?, statement: r.get(1)?, signature: r.get(2)?, leaves: Vec::new() };
                Ok((checkpoint, count(r.get(3)?)))
            },
            &mut |(checkpoint, leaves)| {
                checkpoints.push(checkpoint);
                counts.push(leaves);
                ControlFlow::Continue(())
            },
        )?;
        Ok((checkpoints, counts))
    }

    fn headless_traces(&self, after: Option<&str>, upto: Option<&str>) -> Result<Vec<String>, LedgerError> {
        let mut traces = Vec::new();
        let sql = crate::ledger::headless_traces_sql(TRACE, "?1", "?2");
        self.query(&sql, params![after, upto], |r| r.get::<_, String>(0), &mut |trace| {
            traces.push(trace);
            ControlFlow::Continue(())
        })?;
        Ok(traces)
    }

    fn trace_head(&self, trace_id: &Uuid) -> Result<Option<TraceHead>, LedgerError> {
        let mut found = None;
        self.query(
            "SELECT trace_id, frames, head, sealed FROM rlp_traces WHERE trace_id = ?1",
            [trace_id.to_string()],
            head_of_row,
            &mut |head| {
                found = Some(head);
                ControlFlow::Break(())
            },
        )?;
        Ok(found)
    }

    fn checkpoints(&self) -> Result<Vec<StoredCheckpoint>, LedgerError> {
        self.checkpoints_where("1 = 1", [])
    }

    fn checkpoints_of(&self, trace_id: &Uuid) -> Result<Vec<StoredCheckpoint>, LedgerError> {
        self.checkpoints_where(
            "seq IN (SELECT seq FROM rlp_checkpoint_leaves WHERE trace_id = ?1)",
            [&trace_id.to_string()],
        )
    }

    fn leaves_of(&self, trace_id: &Uuid) -> Result<Vec<(i64, Leaf)>, LedgerError> {
        let mut leaves = Vec::new();
        self.query(
            "SELECT seq, trace_id, frames, head FROM rlp_checkpoint_leaves WHERE trace_id = ?1 ORDER BY seq",
            [trace_id.to_string()],
            |r| Ok((r.get(0)?, Leaf { trace_id: r.get(1)?, frames: r.get(2)?, head: r.get(3)? })),
            &mut |leaf| {
                leaves.push(leaf);
                ControlFlow::Continue(())
            },
        )?;
        Ok(leaves)
    }

    fn checkpoints_from(&self, seq: i64) -> Result<Vec<StoredCheckpoint>, LedgerError> {
        self.checkpoints_where("seq >= ?1", [seq])
    }

    fn write_checkpoint(&self, checkpoint: &StoredCheckpoint) -> Result<bool, LedgerError> {
        let mut conn = self.lock()?;
        retry_busy(|| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let latest: i64 = tx.query_row("SELECT coalesce(max(seq), 0) FROM rlp_checkpoints", [], |r| r.get(0))?;
            if latest != checkpoint.seq.saturating_sub(1) {
                return Ok(false);
            }
            tx.execute(
                "INSERT INTO rlp_checkpoints (seq, statement, signature) VALUES (?1, ?2, ?3)",
                params![checkpoint.seq, checkpoint.statement, checkpoint.signature],
            )?;
            {
                let mut leaf_insert = tx.prepare_cached(
                    "INSERT INTO rlp_checkpoint_leaves (seq, trace_id, frames, head) VALUES (?1, ?2, ?3, ?4)",
                )?;
                let mut seal =
                    tx.prepare_cached("UPDATE rlp_traces SET sealed = max(sealed, ?2) WHERE trace_id = ?1")?;
                for leaf in &checkpoint.leaves {
                    leaf_insert.execute(params![checkpoint.seq, leaf.trace_id, leaf.frames, leaf.head])?;
                    seal.execute(params![leaf.trace_id, leaf.frames])?;
                }
            }
            tx.commit()?;
            Ok(true)
        })
        .map_err(|e| self.sqlite(e))
    }

    fn for_each_trace(&self, f: &mut dyn FnMut(TraceSummary) -> ControlFlow<()>) -> Result<u64, LedgerError> {
        let conn = self.lock()?;
        let sqlite = |e| self.sqlite(e);
        let mut statement = conn.prepare(LIST_SQL).map_err(sqlite)?;
        let mut rows = statement
            .query(rusqlite::named_params! {
                ":call": EventKind::ToolCall.as_str(),
                ":result": EventKind::ToolResult.as_str(),
                ":audit": EventKind::CapAudit.as_str(),
                ":deny": Decision::Deny.as_str(),
                ":confirm": EventKind::ToolConfirm.as_str(),
                ":replay": EventKind::TraceReplay.as_str(),
            })
            .map_err(sqlite)?;
        let mut traces = 0;
        while let Some(row) = rows.next().map_err(sqlite)? {
            let agents = crate::ledger::query::agents_of(row.get::<_, Option<String>>(1).map_err(sqlite)?.as_deref());
            let flow = f(TraceSummary {
                trace_id: row.get::<_, Option<String>>(0).map_err(sqlite)?.unwrap_or_default(),
                agents,
                first_ts_ms: row.get(2).map_err(sqlite)?,
                last_ts_ms: row.get(3).map_err(sqlite)?,
                frames: count(row.get(4).map_err(sqlite)?),
                calls: count(row.get(5).map_err(sqlite)?),
                errors: count(row.get(6).map_err(sqlite)?),
                refused: count(row.get(7).map_err(sqlite)?),
                replay_of: row.get(8).map_err(sqlite)?,
            });
            traces += 1;
            if flow.is_break() {
                break;
            }
        }
        Ok(traces)
    }

    fn newest_trace(&self) -> Result<Option<String>, LedgerError> {
        let conn = self.lock()?;
        conn.query_row(NEWEST_SQL, [], |row| row.get::<_, Option<String>>(0))
            .optional()
            .map(Option::flatten)
            .map_err(|e| self.sqlite(e))
    }

    fn begin_bulk(&self) -> Result<Box<dyn BulkAppend + '_>, LedgerError> {
        let conn = self.lock()?;
        retry_busy(|| conn.execute_batch("BEGIN IMMEDIATE")).map_err(|e| self.sqlite(e))?;
        // From here on, dropping the bulk append rolls the transaction back.
        Ok(Box::new(SqliteBulk { ledger: self, conn, chains: Vec::new(), span: None, committed: false }))
    }

    fn begin_snapshot(&self) -> Result<(), LedgerError> {
        let conn = self.lock()?;
        // A WAL reader's snapshot is taken by its transaction's first read.
        conn.execute_batch("BEGIN DEFERRED").map_err(|e| self.sqlite(e))?;
        match conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get::<_, i64>(0)) {
            Ok(_) => Ok(()),
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                Err(self.sqlite(e))
            }
        }
    }

    fn end_snapshot(&self) {
        if let Ok(conn) = self.lock() {
            let _ = conn.execute_batch("COMMIT");
        }
    }
}

impl Recorder for SqliteLedger {
    fn record(&self, batch: &[Record]) -> Result<(), RecordError> {
        self.append(batch).map(|_| ()).map_err(|e| RecordError::from(&e))
    }

    fn usage(&self, trace_id: Uuid, tool: &str) -> Result<Usage, RecordError> {
        let conn = self.lock().map_err(|e| RecordError::from(&e))?;
        // Sums in SQL over the trace's rows (the trace index); a frame
        // without a usage adds nothing, and no usage at all gives NULL.
        // Every positive number counts, whatever its JSON type; a negative
        // one (never written by rlp: an imported frame) subtracts nothing.
        // An integer sum past i64 is an error: the call is then refused.
        let sums = conn.query_row(
            "SELECT SUM(CASE WHEN json_type(payload_json, '$.usage.tokens') IN ('integer', 'real')
                              AND json_extract(payload_json, '$.usage.tokens') > 0
                            THEN CAST(json_extract(payload_json, '$.usage.tokens') AS INTEGER)
                                 + (json_extract(payload_json, '$.usage.tokens')
                                    > CAST(json_extract(payload_json, '$.usage.tokens') AS INTEGER)) END),
                    TOTAL(CASE WHEN json_type(payload_json, '$.usage.usd') IN ('integer', 'real')
                              AND json_extract(payload_json, '$.usage.usd') > 0
                            THEN json_extract(payload_json, '$.usage.usd') END),
                    COUNT(CASE WHEN json_type(payload_json, '$.usage.usd') IN ('integer', 'real') THEN 1 END)
             FROM events
             WHERE json_extract(provenance_json, '$.trace_id') = ?1 AND kind = 'tool.result'
               AND json_extract(payload_json, '$.tool') = ?2",
            rusqlite::params![trace_id.to_string(), tool],
            |row| Ok((row.get::<_, Option<i64>>(0)?, row.get::<_, f64>(1)?, row.get::<_, i64>(2)?)),
        );
        let (tokens, usd, usd_count) = sums.map_err(|e| RecordError::from(&self.sqlite(e)))?;
        Ok(Usage { tokens: tokens.map(|t| u64::try_from(t).unwrap_or(0)), usd: (usd_count > 0).then_some(usd) })
    }
}

/// An import's transaction on the ledger's connection (held for its length).
struct SqliteBulk<'a> {
    ledger: &'a SqliteLedger,
    conn: MutexGuard<'a, Connection>,
    /// The chains appended to, moved in the database at the commit.
    chains: Vec<Appending>,
    /// The first and last row ids appended.
    span: Option<(i64, i64)>,
    committed: bool,
}

impl BulkAppend for SqliteBulk<'_> {
    fn holds_trace(&mut self, trace_id: &Uuid) -> Result<bool, LedgerError> {
        self.conn
            .query_row(
                &format!(
                    "SELECT 1 WHERE EXISTS (SELECT 1 FROM events WHERE {TRACE} = ?1)
                                OR EXISTS (SELECT 1 FROM rlp_traces WHERE trace_id = ?1)"
                ),
                [trace_id.to_string()],
                |_| Ok(()),
            )
            .optional()
            .map(|found| found.is_some())
            .map_err(|e| self.ledger.sqlite(e))
    }

    fn append(&mut self, row: &PreparedRow) -> Result<(), LedgerError> {
        let index = match self.chains.iter().position(|a| a.trace == row.trace_id) {
            Some(index) => index,
            None => {
                let (chain, known) = read_chain(&self.conn, &row.trace_id).map_err(|e| self.ledger.append_failed(e))?;
                self.chains.push(Appending { trace: row.trace_id, chain, known });
                self.chains.len() - 1
            }
        };
        let chain = &mut self.chains[index].chain;
        let id = insert(&self.conn, row, chain).map_err(|e| self.ledger.sqlite(e))?;
        self.span = Some(self.span.map_or((id, id), |(first, _)| (first, id)));
        Ok(())
    }

    fn commit(mut self: Box<Self>) -> Result<(i64, i64), LedgerError> {
        if let Ok(mut cache) = self.ledger.heads.lock() {
            cache.clear();
        }
        write_heads(&self.conn, &self.chains).map_err(|e| self.ledger.sqlite(e))?;
        self.conn.execute_batch("COMMIT").map_err(|e| self.ledger.sqlite(e))?;
        self.committed = true;
        Ok(self.span.unwrap_or_default())
    }
}

/// The file SQLite keeps beside the database `path` under `suffix`
/// (`-wal`, `-shm`, `-journal`).
fn companion(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// A write-ahead log longer than this is emptied when the ledger closes.
///
/// The first connection to open a ledger reads its whole write-ahead log
/// (SQLite rebuilds the log's index from it), and SQLite lets the log grow
/// to 1,000 pages before it checkpoints: up to 4 MB read, about a
/// millisecond, by every `rlp tools call`. Emptied past 256 KB (a few dozen
/// calls), the log costs the next process a fraction of that, for one
/// checkpoint every few dozen calls.
const LONG_WAL_BYTES: u64 = 256 * 1024;

impl Drop for SqliteLedger {
    fn drop(&mut self) {
        if !std::fs::metadata(companion(&self.path, "-wal")).is_ok_and(|m| m.len() > LONG_WAL_BYTES) {
            return;
        }
        let Ok(conn) = self.conn.get_mut() else { return };
        // Never wait for another connection: while one reads or writes, the
        // log stays for a later close (or SQLite's own checkpoint) to empty.
        if conn.busy_timeout(std::time::Duration::ZERO).is_ok() {
            let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        }
    }
}

impl Drop for SqliteBulk<'_> {
    fn drop(&mut self) {
        if !self.committed {
            // Nothing of an unfinished import is kept; a failed rollback
            // leaves the transaction to end with the connection.
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

/// See [`Location::write_all_or_nothing`]: the files a failed first write
/// created (the database, its `-wal`, `-shm` and `-journal`, the folder) are
/// removed again.
pub(crate) fn write_all_or_nothing<T, E: From<LedgerError>>(
    path: &Path,
    f: impl FnOnce(&SqliteLedger) -> Result<T, E>,
) -> Result<T, E> {
    let created_dir = path.parent().filter(|d| !d.as_os_str().is_empty() && !d.exists());
    let existed = path.exists();
    let result = SqliteLedger::open(path).map_err(E::from).and_then(|ledger| f(&ledger));
    if result.is_err() && !existed {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let _ = std::fs::remove_file(companion(path, suffix));
        }
        if let Some(dir) = created_dir {
            let _ = std::fs::remove_dir(dir);
        }
    }
    result
}

/// Opens the SQLite ledger at `path` (which must exist) and verifies all of
/// it, trusting no checkpoint key (see [`crate::ledger::verify::verify`]).
pub fn verify_chain(path: &Path) -> Result<VerifyReport, LedgerError> {
    crate::ledger::verify::verify(&SqliteLedger::open_existing(path)?, &Default::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Provenance;
    use crate::ledger::verify::ProblemKind;
    use serde_json::json;

    fn numbered(trace: Uuid, n: i64) -> Record {
        Record {
            ts_ms: 1000 + n,
            actor: "runtime".into(),
            kind: EventKind::ToolCall,
            scope: "a".into(),
            payload: json!({"n": n}),
            provenance: Provenance { trace_id: trace, msg_id: Uuid::now_v7(), agent: "a".into() },
        }
    }

    fn result_with(trace: Uuid, tool: &str, usage: serde_json::Value) -> Record {
        Record { kind: EventKind::ToolResult, payload: json!({"tool": tool, "usage": usage}), ..numbered(trace, 0) }
    }

    #[test]
    fn usage_counts_every_positive_number_of_the_tool_in_the_trace() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = SqliteLedger::open(&dir.path().join("pog/events.sqlite")).unwrap();
        let (trace, other) = (Uuid::now_v7(), Uuid::now_v7());
        assert_eq!(ledger.usage(trace, "t").unwrap(), Usage::default());
        ledger
            .append(&[
                result_with(trace, "t", json!({"tokens": 600, "usd": 0.25})),
                // What an imported frame may hold: a fraction counts whole,
                // a negative number or a string subtracts nothing.
                result_with(trace, "t", json!({"tokens": 10.5})),
                result_with(trace, "t", json!({"tokens": -5000, "usd": -1})),
                result_with(trace, "t", json!({"tokens": "9"})),
                result_with(trace, "u", json!({"tokens": 7})),
                result_with(other, "t", json!({"tokens": 7})),
            ])
            .unwrap();
        assert_eq!(ledger.usage(trace, "t").unwrap(), Usage { tokens: Some(611), usd: Some(0.25) });
        // A sum beyond 64 bits is an error (the budget check then refuses the call).
        ledger
            .append(&[
                result_with(other, "t", json!({"tokens": 1e30})),
                result_with(other, "t", json!({"tokens": 1e30})),
            ])
            .unwrap();
        assert!(ledger.usage(other, "t").is_err());
    }

    /// The layout's statements run when the database's `user_version` is
    /// not this rlp's (a new ledger, one another rlp made), and not again
    /// once it is.
    #[test]
    fn the_layout_is_made_once_per_version_of_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pog/events.sqlite");
        drop(SqliteLedger::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        let user_version = |conn: &Connection| conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i32>(0));
        let has_marker = |conn: &Connection| {
            conn.prepare("SELECT 1 FROM sqlite_master WHERE name = 'events_by_trace'").unwrap().exists([]).unwrap()
        };
        assert_eq!(user_version(&conn).unwrap(), layout_version());
        assert!(layout_version() > 0);
        // With the version in place, opening trusts it…
        conn.execute_batch("DROP INDEX events_by_trace").unwrap();
        drop(SqliteLedger::open(&path).unwrap());
        assert!(!has_marker(&conn));
        // …and with another one, the layout is made again.
        conn.pragma_update(None, "user_version", 7).unwrap();
        drop(SqliteLedger::open(&path).unwrap());
        assert!(has_marker(&conn));
        assert_eq!(user_version(&conn).unwrap(), layout_version());
    }

    #[test]
    fn appends_iterates_and_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = SqliteLedger::open(&dir.path().join("pog/events.sqlite")).unwrap();
        let (t1, t2) = (Uuid::now_v7(), Uuid::now_v7());
        ledger.append(&[numbered(t1, 1), numbered(t2, 2)]).unwrap();
        ledger.append(&[numbered(t1, 3)]).unwrap();
        let mut seen = Vec::new();
        ledger
            .for_each_in_trace(&t1, |e| {
                seen.push(e.payload().unwrap()["n"].as_i64().unwrap());
                ControlFlow::Continue(())
            })
            .unwrap();
        assert_eq!(seen, [1, 3]);
        let report = verify_chain(ledger.path()).unwrap();
        assert_eq!(report.rows, 3);
        assert_eq!(report.traces, 2);
        assert!(report.is_intact(), "{report:?}");
        assert_eq!(ledger.integrity_check().unwrap(), "ok");
        // A row off the per-trace chains, as an rlp from before them would add it.
        let refused = Connection::open(ledger.path()).unwrap().execute(
            "INSERT INTO events (ts_ms, actor, kind, scope, payload_json, provenance_json, hash_blake3) \
             VALUES (1, 'a', 'k', 's', '{}', '{}', 'h')",
            [],
        );
        assert!(refused.unwrap_err().to_string().contains("upgrade rlp"));
    }

    fn wal_len(path: &Path) -> u64 {
        std::fs::metadata(companion(path, "-wal")).map_or(0, |m| m.len())
    }

    /// Appends frames of trace `t` until the log is longer than
    /// [`LONG_WAL_BYTES`]; how many.
    fn grow_wal(ledger: &SqliteLedger, t: Uuid) -> usize {
        let mut n = 0;
        while wal_len(ledger.path()) <= LONG_WAL_BYTES {
            let batch: Vec<Record> = (0..16).map(|i| numbered(t, i)).collect();
            ledger.append(&batch).unwrap();
            n += batch.len();
        }
        n
    }

    #[test]
    fn a_closing_ledger_empties_a_long_write_ahead_log_and_keeps_every_frame() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.sqlite");
        let ledger = SqliteLedger::open(&path).unwrap();
        let t = Uuid::now_v7();
        let appended = grow_wal(&ledger, t);
        drop(ledger);
        assert_eq!(wal_len(&path), 0);
        let report = verify_chain(&path).unwrap();
        assert!(report.is_intact() && report.rows == appended as u64, "{report:?}");
        // A short log is left as it is: emptying it would cost the call more than it saves the next.
        let ledger = SqliteLedger::open(&path).unwrap();
        ledger.append(&[numbered(t, 0)]).unwrap();
        drop(ledger);
        assert!((1..=LONG_WAL_BYTES).contains(&wal_len(&path)), "{}", wal_len(&path));
    }

    #[test]
    fn a_closing_ledger_does_not_wait_for_a_reader_to_empty_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.sqlite");
        let ledger = SqliteLedger::open(&path).unwrap();
        grow_wal(&ledger, Uuid::now_v7());
        let reader = Connection::open(&path).unwrap();
        // Closed last, it would empty the log itself.
        reader.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true).unwrap();
        reader.execute_batch("BEGIN").unwrap();
        let rows: i64 = reader.query_row("SELECT count(*) FROM events", [], |r| r.get(0)).unwrap();
        // The reader's snapshot is in the log: the close leaves the log whole.
        drop(ledger);
        assert!(wal_len(&path) > LONG_WAL_BYTES);
        let still: i64 = reader.query_row("SELECT count(*) FROM events", [], |r| r.get(0)).unwrap();
        assert_eq!(still, rows);
        reader.execute_batch("COMMIT").unwrap();
        drop(reader);
        assert!(wal_len(&path) > LONG_WAL_BYTES);
        // The next close, with no one reading, empties it.
        drop(SqliteLedger::open(&path).unwrap());
        assert_eq!(wal_len(&path), 0);
        assert!(verify_chain(&path).unwrap().is_intact());
    }

    #[test]
    fn a_head_moved_by_another_connection_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.sqlite");
        let (first, second) = (SqliteLedger::open(&path).unwrap(), SqliteLedger::open(&path).unwrap());
        let t = Uuid::now_v7();
        first.append(&[numbered(t, 1)]).unwrap();
        first.append(&[numbered(t, 2)]).unwrap();
        second.append(&[numbered(t, 3)]).unwrap();
        // The first connection's cached head is two frames old by now.
        first.append(&[numbered(t, 4)]).unwrap();
        let report = verify_chain(&path).unwrap();
        assert!(report.is_intact() && report.rows == 4, "{report:?}");
        let seqs: Vec<i64> = Connection::open(&path)
            .unwrap()
            .prepare("SELECT trace_seq FROM events ORDER BY id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(seqs, [1, 2, 3, 4]);
        // A head edited by hand is read, and refused, at the next append.
        Connection::open(&path).unwrap().execute("UPDATE rlp_traces SET head = 'x'", []).unwrap();
        let e = first.append(&[numbered(t, 5)]).unwrap_err();
        assert!(e.to_string().contains("is not 64 hex digits; the ledger was edited"), "{e}");
    }

    #[test]
    fn detects_edits_and_removals() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.sqlite");
        let ledger = SqliteLedger::open(&path).unwrap();
        let t = Uuid::now_v7();
        ledger.append(&[numbered(t, 1), numbered(t, 2), numbered(t, 3), numbered(t, 4)]).unwrap();
        drop(ledger);
        let conn = Connection::open(&path).unwrap();
        conn.execute("UPDATE events SET payload_json = '{\"n\":9}' WHERE id = 2", []).unwrap();
        conn.execute("DELETE FROM events WHERE id = 3", []).unwrap();
        drop(conn);
        let report = verify_chain(&path).unwrap();
        let found: Vec<(Option<i64>, ProblemKind)> = report.problems.iter().map(|p| (p.row, p.problem)).collect();
        assert_eq!(found, [(Some(2), ProblemKind::Edited), (Some(4), ProblemKind::Removed)], "{report:?}");
        assert!(report.problems[0].message.contains("content"));
        assert_eq!(
            report.problems[1].message,
            "frame 3 of the trace is missing before this row: removed, or rows were reordered"
        );
    }

    #[test]
    fn a_bulk_append_keeps_nothing_until_it_commits() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = SqliteLedger::open(&dir.path().join("events.sqlite")).unwrap();
        let t = Uuid::now_v7();
        ledger.append(&[numbered(t, 1)]).unwrap();
        let row = PreparedRow::from_record(&numbered(t, 2)).unwrap();
        {
            let mut bulk = ledger.begin_bulk().unwrap();
            assert!(bulk.holds_trace(&t).unwrap());
            assert!(!bulk.holds_trace(&Uuid::now_v7()).unwrap());
            bulk.append(&row).unwrap();
        }
        assert_eq!(ledger.count().unwrap(), 1);
        let mut bulk = ledger.begin_bulk().unwrap();
        bulk.append(&row).unwrap();
        assert_eq!(bulk.commit().unwrap(), (2, 2));
        assert_eq!(ledger.count().unwrap(), 2);
        assert!(verify_chain(ledger.path()).unwrap().is_intact());
    }
}
