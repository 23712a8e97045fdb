//! The PostgreSQL ledger: the same `events` table and hash chain as the
//! SQLite ledger, in a database many hosts append to at once.
//!
//! **The chain head.** Each append is one transaction that first takes a
//! transaction-level advisory lock (one key per `events` table), then —
//! in a statement of its own, so its snapshot sees the previous holder's
//! commit — reads the last chain value, inserts its rows chained after it
//! and commits; the lock goes with the commit. Appenders on any number of
//! hosts therefore extend one linear chain.
//!
//! **Durability.** An append is acknowledged only once its commit is on
//! disk, as with SQLite's `synchronous=FULL`. The appending transaction
//! commits asynchronously (`SET LOCAL synchronous_commit = off`), which
//! lets the lock go as soon as the commit is written to the WAL buffers;
//! rlp then commits a second, tiny transaction synchronously, and returns
//! only after it: the WAL is flushed in order, so that flush covers the
//! append's commit. Waits for the disk thus overlap across appenders (the
//! server's group commit) instead of queueing behind the lock, and a crash
//! can lose only appends not yet acknowledged — with every later one, so
//! the chain never points at a lost row.
//!
//! **Connections.** One connection per open ledger, on a current-thread
//! runtime of its own: the INSERT and its COMMIT are pipelined. A
//! connection the server closed is opened again on the next use. The
//! schema is created on first use under another advisory lock, with a
//! version table ([`schema.sql`](schema.sql)).

pub(crate) mod connect;
mod pgpass;

use std::future::Future;
use std::ops::ControlFlow;
use std::sync::{Mutex, MutexGuard};

use futures_util::{TryStreamExt, pin_mut};
use tokio::runtime::Runtime;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, SimpleQueryMessage, Statement};
use uuid::Uuid;

pub use connect::PostgresUrl;

use crate::event::hash::{GENESIS, chain_hash, from_hex, to_hex};
use crate::event::{Decision, Event, EventKind, PreparedRow, Record, RecordError, Recorder, Usage};
use crate::ledger::query::TraceSummary;
use crate::ledger::{BulkAppend, LedgerError, LedgerStore, Location, PostgresProblem};

/// The schema, created when a database has none.
const SCHEMA: &str = include_str!("schema.sql");
/// The schema version this rlp writes and reads.
const SCHEMA_VERSION: i32 = 1;
/// The advisory lock held while the schema is created ("RLPSCHEM").
const SCHEMA_LOCK: i64 = 0x524C_5053_4348_454D;
/// The high half of the chain lock's key ("RLPC"); the low half is the
/// `events` table's oid, so ledgers in different schemas do not contend.
const CHAIN_LOCK_HIGH: i64 = 0x524C_5043 << 32;

const COLUMNS: &str = "id, ts_ms, actor, kind, scope, payload_json, provenance_json, hash_blake3, chain_blake3";
/// The trace id of a row, as the `events_by_trace` index has it.
const TRACE: &str = "((provenance_json::json) ->> 'trace_id')";
const LAST_CHAIN: &str = "SELECT chain_blake3 FROM events WHERE chain_blake3 IS NOT NULL ORDER BY id DESC LIMIT 1";
const INSERT: &str = "INSERT INTO events (ts_ms, actor, kind, scope, payload_json, provenance_json, hash_blake3, chain_blake3)
     SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])
     RETURNING id";

/// `rlp trace list`: the SQLite ledger's query (src/ledger/sqlite.rs) in
/// PostgreSQL's words. Kinds and the deny decision are bound by name.
const LIST_SQL: &str = "
SELECT trace, string_agg(DISTINCT v ->> 'agent', ','), min(ts_ms), max(ts_ms), count(*),
       count(*) FILTER (WHERE kind = $1),
       count(*) FILTER (WHERE kind = $2 AND coalesce(json_typeof(p -> 'error'), 'null') <> 'null'
                        AND coalesce(p #>> '{error,will_retry}', '0') IN ('false', '0')),
       count(DISTINCT CASE WHEN (kind = $3 AND p ->> 'decision' = $4)
                             OR (kind = $5 AND p ->> 'approved' IN ('false', '0'))
                           THEN p ->> 'invocation_id' END),
       max(CASE WHEN kind = $6 THEN p ->> 'replay_of' END)
FROM (SELECT id, ts_ms, kind, payload_json::json AS p, provenance_json::json AS v,
             ((provenance_json::json) ->> 'trace_id') AS trace
      FROM events) AS e
GROUP BY trace
ORDER BY min(id)";

const NEWEST_SQL: &str = "
SELECT trace FROM (SELECT ((provenance_json::json) ->> 'trace_id') AS trace, min(id) AS first
                   FROM events GROUP BY 1) AS t
ORDER BY first DESC LIMIT 1";

/// A tool's usage in a trace: the SQLite ledger's sums (every positive
/// number counts, a fraction as the next whole token; a token sum past
/// 64 bits is an error).
const USAGE_SQL: &str = "
SELECT sum(CASE WHEN json_typeof(p #> '{usage,tokens}') = 'number' AND (p #>> '{usage,tokens}')::numeric > 0
                THEN ceil((p #>> '{usage,tokens}')::numeric) END)::int8,
       coalesce(sum(CASE WHEN json_typeof(p #> '{usage,usd}') = 'number' AND (p #>> '{usage,usd}')::float8 > 0
                         THEN (p #>> '{usage,usd}')::float8 END), 0)::float8,
       count(CASE WHEN json_typeof(p #> '{usage,usd}') = 'number' THEN 1 END)
FROM (SELECT payload_json::json AS p FROM events
      WHERE ((provenance_json::json) ->> 'trace_id') = $1 AND kind = $2) AS r
WHERE p ->> 'tool' = $3";

/// An open PostgreSQL ledger. Safe to share between threads; one
/// connection, used by one caller at a time.
pub struct PostgresLedger {
    location: Location,
    url: PostgresUrl,
    session: Mutex<Option<Session>>,
}

impl std::fmt::Debug for PostgresLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresLedger").field("url", &self.url).finish_non_exhaustive()
    }
}

/// One connection and what was prepared on it.
struct Session {
    /// `None` only while dropping (see the `Drop` impl).
    runtime: Option<Runtime>,
    client: Client,
    insert: Statement,
    chain_lock: i64,
    /// Takes the password out of messages.
    credentials: connect::Credentials,
}

impl Drop for Session {
    fn drop(&mut self) {
        // A runtime may not be dropped (blocking) inside another one, as
        // when `rlp serve` drops the ledger on an async worker.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// A failure of one request, before it is named as a ledger error.
enum Failure {
    Db(tokio_postgres::Error),
    Invalid(String),
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Failure {
        Failure::Db(e)
    }
}

/// The words of a client error: the server's message (with its detail
/// and hint), or the client's with its causes.
fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = db.message().to_string();
        for extra in [db.detail(), db.hint()].into_iter().flatten() {
            text.push_str(&format!(" ({extra})"));
        }
        return text;
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(&format!(": {cause}"));
        }
        source = cause_of(source);
    }
    text
}

fn cause_of<'a>(e: Option<&'a (dyn std::error::Error + 'static)>) -> Option<&'a (dyn std::error::Error + 'static)> {
    e.and_then(|e| e.source())
}

/// What kind of problem a client error is, for the help shown with it.
fn problem_of(e: &tokio_postgres::Error) -> PostgresProblem {
    match e.code() {
        Some(code) if *code == SqlState::INVALID_PASSWORD || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION => {
            PostgresProblem::Authentication
        }
        Some(code) if *code == SqlState::INSUFFICIENT_PRIVILEGE => PostgresProblem::Permission,
        Some(_) => PostgresProblem::Server,
        None => PostgresProblem::Connection,
    }
}

fn row_to_event(row: &tokio_postgres::Row) -> Result<Event, tokio_postgres::Error> {
    Ok(Event {
        id: row.try_get(0)?,
        ts_ms: row.try_get(1)?,
        actor: row.try_get(2)?,
        kind: row.try_get(3)?,
        scope: row.try_get(4)?,
        payload_json: row.try_get(5)?,
        provenance_json: row.try_get(6)?,
        hash_blake3: row.try_get(7)?,
        chain_blake3: row.try_get::<_, Option<String>>(8)?.unwrap_or_default(),
    })
}

fn count(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// The text of the first column of the first row the last statement of a
/// simple query returned, if it returned one.
fn last_value(messages: &[SimpleQueryMessage]) -> Option<String> {
    let mut statement_rows: Vec<Option<String>> = Vec::new();
    let mut last_statement = Vec::new();
    for message in messages {
        match message {
            SimpleQueryMessage::Row(row) => statement_rows.push(row.get(0).map(str::to_string)),
            SimpleQueryMessage::CommandComplete(_) => last_statement = std::mem::take(&mut statement_rows),
            _ => {}
        }
    }
    last_statement.into_iter().next().flatten()
}

/// The chain value `text` (as stored) as bytes; an error names an edited head.
fn head(text: Option<String>) -> Result<[u8; 32], Failure> {
    match text {
        None => Ok(GENESIS),
        Some(text) => from_hex(&text).ok_or_else(|| {
            Failure::Invalid(format!("the last row's chain value `{text}` is not 64 hex digits; the ledger was edited"))
        }),
    }
}

impl Session {
    fn block_on<F: Future>(&self, future: F) -> F::Output {
        match &self.runtime {
            Some(runtime) => runtime.block_on(future),
            None => unreachable!("the runtime is taken only when the session is dropped"),
        }
    }

    /// Runs `statements` (simple query) and, on any failure, rolls back.
    async fn rollback_on_failure<T>(&self, result: Result<T, Failure>) -> Result<T, Failure> {
        if result.is_err() {
            // The transaction, if it began, is rolled back; a connection
            // that failed ends it anyway.
            let _ = self.client.batch_execute("ROLLBACK").await;
        }
        result
    }

    /// Appends `rows` in one transaction chained after the head; returns
    /// their ids once the commit is on disk (see the module notes).
    async fn append(&self, rows: &[PreparedRow]) -> Result<Vec<i64>, Failure> {
        let begin = format!(
            "BEGIN; SET LOCAL synchronous_commit = off; SELECT pg_advisory_xact_lock({}); {LAST_CHAIN}",
            self.chain_lock
        );
        let prev = match self.client.simple_query(&begin).await {
            Ok(messages) => head(last_value(&messages)),
            Err(e) => Err(e.into()),
        };
        let mut prev = self.rollback_on_failure(prev).await?;
        let mut columns = Columns::default();
        for row in rows {
            prev = chain_hash(&prev, &row.hash);
            columns.push(row, &prev);
        }
        let params = columns.params();
        let insert = self.client.query(&self.insert, &params);
        let commit = self.client.batch_execute("COMMIT");
        // Pipelined: the COMMIT follows the INSERT without waiting for it;
        // after a failed INSERT the server ends the transaction as a rollback.
        let (inserted, committed) = futures_util::join!(insert, commit);
        let inserted = inserted.map_err(Failure::from);
        let rows = self.rollback_on_failure(inserted).await?;
        committed?;
        // A synchronous commit after ours: once it returns, the WAL is on
        // disk past our commit record.
        self.client.batch_execute("BEGIN; SELECT pg_current_xact_id(); COMMIT").await?;
        let mut ids = rows.iter().map(|r| r.try_get::<_, i64>(0)).collect::<Result<Vec<_>, _>>()?;
        ids.sort_unstable();
        Ok(ids)
    }
}

/// The columns of rows to insert, as the arrays `INSERT` unnests.
#[derive(Default)]
struct Columns {
    ts_ms: Vec<i64>,
    actor: Vec<String>,
    kind: Vec<&'static str>,
    scope: Vec<String>,
    payload: Vec<String>,
    provenance: Vec<String>,
    hash: Vec<String>,
    chain: Vec<String>,
}

impl Columns {
    fn push(&mut self, row: &PreparedRow, chain: &[u8; 32]) {
        self.ts_ms.push(row.ts_ms);
        self.actor.push(row.actor.clone());
        self.kind.push(row.kind.as_str());
        self.scope.push(row.scope.clone());
        self.payload.push(row.payload_json.clone());
        self.provenance.push(row.provenance_json.clone());
        self.hash.push(to_hex(&row.hash));
        self.chain.push(to_hex(chain));
    }

    fn params(&self) -> [&(dyn ToSql + Sync); 8] {
        [&self.ts_ms, &self.actor, &self.kind, &self.scope, &self.payload, &self.provenance, &self.hash, &self.chain]
    }
}

impl PostgresLedger {
    /// Connects to the ledger at `url`; with `create`, creates the schema
    /// when the database has none, else reports [`PostgresProblem::Absent`].
    pub fn open(url: &PostgresUrl, create: bool) -> Result<PostgresLedger, LedgerError> {
        let ledger =
            PostgresLedger { location: Location::Postgres(url.clone()), url: url.clone(), session: Mutex::new(None) };
        drop(ledger.session(create)?);
        Ok(ledger)
    }

    fn error(&self, problem: PostgresProblem, message: String) -> LedgerError {
        LedgerError::Postgres { ledger: self.url.to_string(), server: self.url.server(), problem, message }
    }

    /// The ledger error for `failure`, the password taken out of it.
    fn failed(&self, credentials: &connect::Credentials, failure: Failure) -> LedgerError {
        match failure {
            Failure::Db(e) => self.error(problem_of(&e), credentials.scrub(describe(&e))),
            Failure::Invalid(message) => self.error(PostgresProblem::Edited, message),
        }
    }

    /// The connection, opened (again) when there is none or the server
    /// closed it.
    fn session(&self, create: bool) -> Result<MutexGuard<'_, Option<Session>>, LedgerError> {
        let mut guard = self
            .session
            .lock()
            .map_err(|_| self.error(PostgresProblem::Server, "a thread panicked while using the ledger".into()))?;
        if guard.as_ref().is_none_or(|s| s.client.is_closed()) {
            *guard = None;
            *guard = Some(self.connect(create)?);
        }
        Ok(guard)
    }

    fn connect(&self, create: bool) -> Result<Session, LedgerError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| self.error(PostgresProblem::Connection, format!("cannot start the client: {e}")))?;
        let mut notes = Vec::new();
        let credentials = self.url.credentials(&mut notes);
        let tls = self.url.tls().map_err(|message| self.error(PostgresProblem::Connection, message))?;
        let connected = runtime.block_on(credentials.config.connect(tls));
        let (client, connection) = connected.map_err(|e| {
            let mut message = credentials.scrub(describe(&e));
            for note in &notes {
                message.push_str(&format!("; {note}"));
            }
            if !credentials.has_password() && problem_of(&e) == PostgresProblem::Authentication {
                message.push_str("; no password was given (URL, PGPASSWORD or ~/.pgpass)");
            }
            self.error(problem_of(&e), message)
        })?;
        runtime.spawn(connection);
        match runtime.block_on(Self::prepare(&client, create)) {
            Ok((insert, chain_lock)) => Ok(Session { runtime: Some(runtime), client, insert, chain_lock, credentials }),
            Err(Failure::Db(e)) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => {
                runtime.shutdown_background();
                Err(self
                    .error(PostgresProblem::Absent, format!("the database holds no rlp ledger yet ({})", describe(&e))))
            }
            Err(failure) => {
                runtime.shutdown_background();
                Err(self.failed(&credentials, failure))
            }
        }
    }

    /// Checks (or creates) the schema and prepares the insert; returns it
    /// and the chain lock's key.
    async fn prepare(client: &Client, create: bool) -> Result<(Statement, i64), Failure> {
        client.batch_execute("SET synchronous_commit = on").await?;
        let version = match client.query_opt("SELECT max(version) FROM rlp_schema", &[]).await {
            Err(e) if create && e.code() == Some(&SqlState::UNDEFINED_TABLE) => {
                let create = format!("BEGIN; SELECT pg_advisory_xact_lock({SCHEMA_LOCK}); {SCHEMA} COMMIT;");
                if let Err(e) = client.batch_execute(&create).await {
                    let _ = client.batch_execute("ROLLBACK").await;
                    return Err(e.into());
                }
                client.query_opt("SELECT max(version) FROM rlp_schema", &[]).await?
            }
            other => other?,
        };
        let version: Option<i32> = version.map(|row| row.try_get(0)).transpose()?.flatten();
        if version != Some(SCHEMA_VERSION) {
            return Err(Failure::Invalid(match version {
                Some(v) if v > SCHEMA_VERSION => format!(
                    "the ledger's schema is version {v}, newer than this rlp reads ({SCHEMA_VERSION}); upgrade rlp"
                ),
                other => format!("rlp_schema holds version {other:?}, not {SCHEMA_VERSION}; the ledger was edited"),
            }));
        }
        let oid: i64 = client.query_one("SELECT 'events'::regclass::oid::int8", &[]).await?.try_get(0)?;
        let insert = client.prepare(INSERT).await?;
        Ok((insert, CHAIN_LOCK_HIGH | oid))
    }

    /// Runs `f` on the connection, naming its failure.
    fn with<T>(&self, f: impl AsyncFnOnce(&Session) -> Result<T, Failure>) -> Result<T, LedgerError> {
        let guard = self.session(false)?;
        let Some(session) = guard.as_ref() else { unreachable!("session() leaves a connection in place") };
        session.block_on(f(session)).map_err(|failure| self.failed(&session.credentials, failure))
    }

    /// Streams the rows `sql` selects (with `params`) to `f`.
    fn stream(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        f: &mut dyn FnMut(Event) -> ControlFlow<()>,
    ) -> Result<(), LedgerError> {
        self.with(async |s| {
            let rows = s.client.query_raw(sql, params.iter().copied()).await?;
            pin_mut!(rows);
            while let Some(row) = rows.try_next().await? {
                if f(row_to_event(&row)?).is_break() {
                    break;
                }
            }
            Ok(())
        })
    }
}

impl LedgerStore for PostgresLedger {
    fn location(&self) -> &Location {
        &self.location
    }

    fn append(&self, records: &[Record]) -> Result<Vec<i64>, LedgerError> {
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<PreparedRow> = records
            .iter()
            .map(PreparedRow::from_record)
            .collect::<Result<_, _>>()
            .map_err(|e| self.error(PostgresProblem::Server, e.to_string()))?;
        self.with(async |s| s.append(&rows).await)
    }

    fn count(&self) -> Result<u64, LedgerError> {
        self.with(async |s| Ok(count(s.client.query_one("SELECT count(*) FROM events", &[]).await?.try_get(0)?)))
    }

    fn for_each_event(&self, f: &mut dyn FnMut(Event) -> ControlFlow<()>) -> Result<(), LedgerError> {
        self.stream(&format!("SELECT {COLUMNS} FROM events ORDER BY id"), &[], f)
    }

    fn for_each_in_trace(
        &self,
        trace_id: &Uuid,
        f: &mut dyn FnMut(Event) -> ControlFlow<()>,
    ) -> Result<(), LedgerError> {
        let trace = trace_id.to_string();
        self.stream(&format!("SELECT {COLUMNS} FROM events WHERE {TRACE} = $1 ORDER BY id"), &[&trace], f)
    }

    fn for_each_trace(&self, f: &mut dyn FnMut(TraceSummary) -> ControlFlow<()>) -> Result<u64, LedgerError> {
        let kinds = [
            EventKind::ToolCall.as_str(),
            EventKind::ToolResult.as_str(),
            EventKind::CapAudit.as_str(),
            Decision::Deny.as_str(),
            EventKind::ToolConfirm.as_str(),
            EventKind::TraceReplay.as_str(),
        ];
        self.with(async |s| {
            let rows = s.client.query_raw(LIST_SQL, kinds).await?;
            pin_mut!(rows);
            let mut traces = 0;
            while let Some(row) = rows.try_next().await? {
                let agents: Option<String> = row.try_get(1)?;
                let mut agents: Vec<String> =
                    agents.map(|a| a.split(',').map(str::to_string).collect()).unwrap_or_default();
                agents.sort();
                let flow = f(TraceSummary {
                    trace_id: row.try_get::<_, Option<String>>(0)?.unwrap_or_default(),
                    agents,
                    first_ts_ms: row.try_get(2)?,
                    last_ts_ms: row.try_get(3)?,
                    frames: count(row.try_get(4)?),
                    calls: count(row.try_get(5)?),
                    errors: count(row.try_get(6)?),
                    refused: count(row.try_get(7)?),
                    replay_of: row.try_get(8)?,
                });
                traces += 1;
                if flow.is_break() {
                    break;
                }
            }
            Ok(traces)
        })
    }

    fn newest_trace(&self) -> Result<Option<String>, LedgerError> {
        self.with(async |s| Ok(s.client.query_opt(NEWEST_SQL, &[]).await?.map(|r| r.try_get(0)).transpose()?.flatten()))
    }

    fn begin_bulk(&self) -> Result<Box<dyn BulkAppend + '_>, LedgerError> {
        let guard = self.session(false)?;
        let mut bulk = PostgresBulk { ledger: self, guard, prev: GENESIS, committed: false };
        let begin = format!("BEGIN; SELECT pg_advisory_xact_lock({}); {LAST_CHAIN}", bulk.session().chain_lock);
        // From here on, dropping the bulk append rolls the transaction back.
        let head = bulk.run(async |s| head(last_value(&s.client.simple_query(&begin).await?)))?;
        bulk.prev = head;
        Ok(Box::new(bulk))
    }
}

impl Recorder for PostgresLedger {
    fn record(&self, batch: &[Record]) -> Result<(), RecordError> {
        self.append(batch).map(|_| ()).map_err(|e| RecordError(e.to_string()))
    }

    fn usage(&self, trace_id: Uuid, tool: &str) -> Result<Usage, RecordError> {
        let trace = trace_id.to_string();
        let kind = EventKind::ToolResult.as_str();
        let sums = self.with(async |s| {
            let row = s.client.query_one(USAGE_SQL, &[&trace, &kind, &tool]).await?;
            Ok((row.try_get::<_, Option<i64>>(0)?, row.try_get::<_, f64>(1)?, row.try_get::<_, i64>(2)?))
        });
        let (tokens, usd, usd_count) = sums.map_err(|e| RecordError(e.to_string()))?;
        Ok(Usage { tokens: tokens.map(|t| u64::try_from(t).unwrap_or(0)), usd: (usd_count > 0).then_some(usd) })
    }
}

/// An import's transaction, holding the connection (and the chain lock)
/// for its length.
struct PostgresBulk<'a> {
    ledger: &'a PostgresLedger,
    guard: MutexGuard<'a, Option<Session>>,
    prev: [u8; 32],
    committed: bool,
}

impl PostgresBulk<'_> {
    fn session(&self) -> &Session {
        match self.guard.as_ref() {
            Some(session) => session,
            None => unreachable!("session() leaves a connection in place"),
        }
    }

    fn run<T>(&self, f: impl AsyncFnOnce(&Session) -> Result<T, Failure>) -> Result<T, LedgerError> {
        let session = self.session();
        session.block_on(f(session)).map_err(|failure| self.ledger.failed(&session.credentials, failure))
    }
}

impl BulkAppend for PostgresBulk<'_> {
    fn holds_trace(&mut self, trace_id: &Uuid) -> Result<bool, LedgerError> {
        let trace = trace_id.to_string();
        let sql = format!("SELECT 1 FROM events WHERE {TRACE} = $1 LIMIT 1");
        self.run(async |s| Ok(s.client.query_opt(&sql, &[&trace]).await?.is_some()))
    }

    fn append(&mut self, row: &PreparedRow) -> Result<i64, LedgerError> {
        let chain = chain_hash(&self.prev, &row.hash);
        let mut columns = Columns::default();
        columns.push(row, &chain);
        let id = self.run(async |s| Ok(s.client.query_one(&s.insert, &columns.params()).await?.try_get(0)?))?;
        self.prev = chain;
        Ok(id)
    }

    fn commit(mut self: Box<Self>) -> Result<(), LedgerError> {
        self.run(async |s| Ok(s.client.batch_execute("COMMIT").await?))?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for PostgresBulk<'_> {
    fn drop(&mut self) {
        if !self.committed
            && let Some(session) = self.guard.as_ref()
        {
            // Nothing of an unfinished import is kept.
            let _ = session.block_on(session.client.batch_execute("ROLLBACK"));
        }
    }
}
