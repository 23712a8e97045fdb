//! The PostgreSQL ledger: the same `events` table and hash chain as the
//! SQLite ledger, in a database many hosts append to at once.
//!
//! **The chain head.** The last chain value is kept in `rlp_head`, a
//! one-row table. An append reads it, computes its rows' chain values, and
//! sends one statement that moves the head from the value it read to its
//! last row's — `UPDATE rlp_head … WHERE chain_blake3 = <the value read>`
//! — and inserts its rows only if that update happened. The head's row
//! lock serialises appenders on any number of hosts for just the time the
//! server takes to run that statement and commit: the critical section
//! holds no round trip to a client. An appender whose head moved in the
//! meantime inserts nothing, learns the new head in the same round trip
//! (the query pipelined after it) and tries again. The chain therefore
//! stays one line, in row id order, whoever appends.
//!
//! **Durability.** An append is acknowledged only once its commit is on
//! disk, as with SQLite's `synchronous=FULL`. The append commits
//! asynchronously (`synchronous_commit = off` on rlp's connection), so its
//! row lock goes as soon as the commit is in the WAL buffers; rlp then
//! commits a second, one-row transaction synchronously (it bumps the
//! connection's counter in `rlp_sync`: a transaction that writes nothing
//! would not wait for the disk) and returns only after it. The WAL is
//! flushed in order, so that flush covers the append's commit. Waits for
//! the disk thus overlap across appenders (the server's group commit)
//! instead of queueing behind the head, and a crash can lose only appends
//! not yet acknowledged — with every later one, so the chain never points
//! at a lost row.
//!
//! **Connections.** One connection per open ledger, on a current-thread
//! runtime of its own, with requests pipelined. A connection the server
//! closed is opened again on the next use. The schema is created on first
//! use under an advisory lock, with a version table
//! ([`schema.sql`](schema.sql)).

pub(crate) mod connect;
mod pgpass;

use std::cell::Cell;
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
/// The advisory lock appenders wait in line for when the head is contended ("RLPCHAIN").
const CHAIN_LOCK: i64 = 0x524C_5043_4841_494E;
/// How many times an append tries again after the head moved under it
/// before it gives up (each try follows another appender's success).
const MAX_TRIES: u32 = 10_000;

/// Rows read per request when streaming (frames may be large).
const PAGE_ROWS: usize = 256;
const COLUMNS: &str = "id, ts_ms, actor, kind, scope, payload_json, provenance_json, hash_blake3, chain_blake3";
/// The trace id of a row, as the `events_by_trace` index has it.
const TRACE: &str = "((provenance_json::json) ->> 'trace_id')";
/// Whether the user may append, and who the user is.
const APPEND_RIGHTS: &str =
    "SELECT has_table_privilege('events', 'INSERT') AND has_table_privilege('rlp_head', 'UPDATE')
            AND has_table_privilege('rlp_sync', 'UPDATE'), current_user::text";
const READ_HEAD: &str = "SELECT chain_blake3 FROM rlp_head";
/// Moves the head from `$10` to `$9` — unless another appender holds the
/// chain lock `$11` — and, only if it did, inserts the rows.
const APPEND: &str = "WITH head AS (UPDATE rlp_head SET chain_blake3 = $9
                   WHERE chain_blake3 = $10 AND pg_try_advisory_xact_lock($11) RETURNING 1)
     INSERT INTO events (ts_ms, actor, kind, scope, payload_json, provenance_json, hash_blake3, chain_blake3)
     SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])
     WHERE EXISTS (SELECT 1 FROM head)
     RETURNING id";
/// Inserts rows while the caller holds the head (an import).
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
    statements: Statements,
    /// The head this connection saw last: the value its next append
    /// chains after (it is checked by the append itself).
    head: Cell<Option<[u8; 32]>>,
    /// Whether appends wait in line for the chain lock (the head was
    /// contended) rather than first trying without it.
    queued: Cell<bool>,
    /// Begins a transaction holding the chain lock.
    lock: String,
    /// The synchronous commit that makes appends durable (see the module notes).
    sync: String,
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
    /// The append committed, but the commit that makes it durable failed.
    Unconfirmed(Box<Failure>),
    /// The user lacks a right appending needs.
    Denied(String),
    /// Something else rlp cannot go on with (a newer schema, a head that
    /// kept moving).
    Refused(String),
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
        None if describe(e).contains("invalid peer certificate") => PostgresProblem::Certificate,
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

/// The chain value `text` (as stored) as bytes; an error names an edited head.
fn chain_value(text: &str) -> Result<[u8; 32], Failure> {
    from_hex(text).ok_or_else(|| {
        Failure::Invalid(format!("the chain head `{text}` in rlp_head is not 64 hex digits; the ledger was edited"))
    })
}

/// The head from a `READ_HEAD` row.
fn head_of(row: Option<tokio_postgres::Row>) -> Result<[u8; 32], Failure> {
    let row = row.ok_or_else(|| Failure::Invalid("rlp_head holds no row; the ledger was edited".into()))?;
    chain_value(&row.try_get::<_, String>(0)?)
}

impl Session {
    fn block_on<F: Future>(&self, future: F) -> F::Output {
        match &self.runtime {
            Some(runtime) => runtime.block_on(future),
            None => unreachable!("the runtime is taken only when the session is dropped"),
        }
    }

    /// Appends `rows` chained after the head; returns their ids once the
    /// commit is on disk (see the module notes).
    async fn append(&self, rows: &[PreparedRow]) -> Result<Vec<i64>, Failure> {
        if !self.queued.get() {
            let guess = match self.head.get() {
                Some(head) => head,
                None => head_of(self.client.query_opt(&self.statements.read_head, &[]).await?)?,
            };
            if let Some(ids) = self.try_append(rows, guess, false).await? {
                return Ok(ids);
            }
            self.queued.set(true);
        }
        for _ in 0..MAX_TRIES {
            let before = self.head.get();
            // In line for the chain lock, then the head as it is once we hold it.
            let begin = self.client.batch_execute(&self.lock);
            let read = self.client.query_opt(&self.statements.read_head, &[]);
            let (locked, read) = futures_util::join!(begin, read);
            let head = match locked.map_err(Failure::from).and_then(|_| head_of(read?)) {
                Ok(head) => head,
                Err(failure) => {
                    let _ = self.client.batch_execute("ROLLBACK").await;
                    return Err(failure);
                }
            };
            let appended = self.try_append(rows, head, true).await;
            if appended.is_err() {
                let _ = self.client.batch_execute("ROLLBACK").await;
            }
            if let Some(ids) = appended? {
                // Nobody else appended since this connection's last append:
                // the next one tries without waiting in line.
                self.queued.set(before != Some(head));
                return Ok(ids);
            }
        }
        Err(Failure::Refused(format!("the chain head moved under {MAX_TRIES} tries in a row; try again")))
    }

    /// One round trip: the append chained after `prev` (committed
    /// asynchronously: on its own, or with the transaction the caller began
    /// when `in_transaction`), the head read again in a snapshot of its own,
    /// and the synchronous commit that, once it returns, has put the WAL on
    /// disk past the append's commit record (see the module notes). `None`
    /// when the head was not `prev` (nothing was appended).
    async fn try_append(
        &self,
        rows: &[PreparedRow],
        prev: [u8; 32],
        in_transaction: bool,
    ) -> Result<Option<Vec<i64>>, Failure> {
        let mut columns = Columns::default();
        let mut chain = prev;
        for row in rows {
            chain = chain_hash(&chain, &row.hash);
            columns.push(row, &chain);
        }
        let (from, to) = (to_hex(&prev), to_hex(&chain));
        let mut params = columns.params().to_vec();
        params.extend([&to as &(dyn ToSql + Sync), &from, &CHAIN_LOCK]);
        // Polled in this order, so sent in this order, before any answer.
        let append = self.client.query(&self.statements.append, &params);
        let commit = async {
            match in_transaction {
                true => self.client.batch_execute("COMMIT").await,
                false => Ok(()),
            }
        };
        let read = self.client.query_opt(&self.statements.read_head, &[]);
        let sync = self.client.simple_query(&self.sync);
        let (appended, committed, read, synced) = futures_util::join!(append, commit, read, sync);
        let appended = appended?;
        committed?;
        let after = |failure: Failure| match appended.is_empty() {
            true => failure,
            false => Failure::Unconfirmed(Box::new(failure)),
        };
        let head = head_of(read.map_err(Failure::from).map_err(after)?).map_err(after)?;
        self.head.set(Some(head));
        synced.map_err(Failure::from).and_then(|messages| synced_one(&messages)).map_err(after)?;
        if appended.is_empty() {
            return Ok(None);
        }
        let mut ids = appended.iter().map(|r| r.try_get::<_, i64>(0)).collect::<Result<Vec<_>, _>>()?;
        ids.sort_unstable();
        Ok(Some(ids))
    }

    /// The synchronous commit alone (see [`Session::try_append`]), on a
    /// connection other than the one whose acknowledgement was lost.
    async fn sync(&self) -> Result<(), Failure> {
        synced_one(&self.client.simple_query(&self.sync).await?)
    }
}

/// Checks that the synchronous commit's `UPDATE` changed its row: a
/// transaction that writes nothing commits without waiting for the disk.
fn synced_one(messages: &[SimpleQueryMessage]) -> Result<(), Failure> {
    let counts: Vec<u64> = messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::CommandComplete(rows) => Some(*rows),
            _ => None,
        })
        .collect();
    // BEGIN, SET, UPDATE, COMMIT.
    match counts.get(2) {
        Some(1) => Ok(()),
        _ => Err(Failure::Invalid("rlp_sync lacks this connection's row; the ledger was edited".into())),
    }
}

/// The statements a connection prepares.
struct Statements {
    read_head: Statement,
    append: Statement,
    insert: Statement,
}

/// What a connection prepares for appends.
struct Prepared {
    statements: Statements,
    /// This connection's row of `rlp_sync`.
    slot: i32,
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
            Failure::Denied(message) => self.error(PostgresProblem::Permission, message),
            Failure::Refused(message) => self.error(PostgresProblem::Server, message),
            Failure::Unconfirmed(failure) => match self.failed(credentials, *failure) {
                LedgerError::Postgres { message, .. } => self.error(
                    PostgresProblem::Unconfirmed,
                    format!("the frames were appended, but the commit that makes them durable failed: {message}"),
                ),
                other => other,
            },
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
            Ok(Prepared { statements, slot }) => Ok(Session {
                runtime: Some(runtime),
                client,
                statements,
                head: Cell::new(None),
                queued: Cell::new(false),
                lock: format!("BEGIN; SELECT pg_advisory_xact_lock({CHAIN_LOCK})"),
                sync: format!(
                    "BEGIN; SET LOCAL synchronous_commit = on; \
                     UPDATE rlp_sync SET appends = appends + 1 WHERE slot = {slot}; COMMIT"
                ),
                credentials,
            }),
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

    /// Checks (or creates) the schema and prepares what appends use.
    async fn prepare(client: &Client, create: bool) -> Result<Prepared, Failure> {
        // Appends commit asynchronously and are then made durable together
        // (see the module notes); every other write sets its own.
        client.batch_execute("SET synchronous_commit = off").await?;
        // A client that stops mid-transaction (an import suspended at a
        // terminal) loses its session, and with it the head, after a minute;
        // an append waits at most that long for the head, then fails.
        client.batch_execute("SET idle_in_transaction_session_timeout = '60s'; SET lock_timeout = '60s'").await?;
        let version = match client.query_opt("SELECT max(version) FROM rlp_schema", &[]).await {
            Err(e) if create && e.code() == Some(&SqlState::UNDEFINED_TABLE) => {
                let create = format!(
                    "BEGIN; SET LOCAL synchronous_commit = on; SELECT pg_advisory_xact_lock({SCHEMA_LOCK}); {SCHEMA} COMMIT;"
                );
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
            return Err(match version {
                Some(v) if v > SCHEMA_VERSION => Failure::Refused(format!(
                    "the ledger's schema is version {v}, newer than this rlp reads ({SCHEMA_VERSION}); upgrade rlp"
                )),
                other => Failure::Invalid(format!(
                    "rlp_schema holds version {other:?}, not {SCHEMA_VERSION}; the ledger was edited"
                )),
            });
        }
        if create {
            // Checked now, not found out after a first append committed.
            let rights = client.query_one(APPEND_RIGHTS, &[]).await?;
            if !rights.try_get::<_, bool>(0)? {
                return Err(Failure::Denied(format!(
                    "user `{}` may not append: it needs INSERT on events and UPDATE on rlp_head and rlp_sync",
                    rights.try_get::<_, String>(1)?
                )));
            }
        }
        let slot: i32 = client.query_one("SELECT pg_backend_pid() % 64", &[]).await?.try_get(0)?;
        let statements = Statements {
            read_head: client.prepare(READ_HEAD).await?,
            append: client.prepare(APPEND).await?,
            insert: client.prepare(INSERT).await?,
        };
        Ok(Prepared { statements, slot })
    }

    /// Runs `f` on the connection, naming its failure.
    fn with<T>(&self, f: impl AsyncFnOnce(&Session) -> Result<T, Failure>) -> Result<T, LedgerError> {
        let guard = self.session(false)?;
        let Some(session) = guard.as_ref() else { unreachable!("session() leaves a connection in place") };
        session.block_on(f(session)).map_err(|failure| self.failed(&session.credentials, failure))
    }

    /// Calls `f` with the rows of `events` (those `filter`, an SQL condition
    /// on `$2`, keeps, when given) in id order, a page at a time: `f` runs
    /// outside the client's runtime, so it may use another ledger (live
    /// replay records while it reads).
    fn stream(
        &self,
        filter: Option<(&str, &(dyn ToSql + Sync))>,
        f: &mut dyn FnMut(Event) -> ControlFlow<()>,
    ) -> Result<(), LedgerError> {
        let condition = filter.map_or(String::new(), |(sql, _)| format!(" AND {sql}"));
        let sql = format!("SELECT {COLUMNS} FROM events WHERE id > $1{condition} ORDER BY id LIMIT {PAGE_ROWS}");
        let mut after = i64::MIN;
        loop {
            let page = self.with(async |s| {
                let mut params: Vec<&(dyn ToSql + Sync)> = vec![&after];
                params.extend(filter.map(|(_, value)| value));
                let rows = s.client.query(&sql, &params).await?;
                Ok(rows.iter().map(row_to_event).collect::<Result<Vec<_>, _>>()?)
            })?;
            let full = page.len() == PAGE_ROWS;
            for event in page {
                after = event.id;
                if f(event).is_break() {
                    return Ok(());
                }
            }
            if !full {
                return Ok(());
            }
        }
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
        match self.with(async |s| s.append(&rows).await) {
            Err(LedgerError::Postgres { problem: PostgresProblem::Unconfirmed, message, .. }) => {
                // The rows are in: make them durable through a fresh
                // connection rather than append them twice.
                self.with(async |s| s.sync().await).map(|()| Vec::new()).map_err(|again| {
                    self.error(PostgresProblem::Unconfirmed, format!("{message}; again on a new connection: {again}"))
                })
            }
            other => other,
        }
    }

    fn count(&self) -> Result<u64, LedgerError> {
        self.with(async |s| Ok(count(s.client.query_one("SELECT count(*) FROM events", &[]).await?.try_get(0)?)))
    }

    fn for_each_event(&self, f: &mut dyn FnMut(Event) -> ControlFlow<()>) -> Result<(), LedgerError> {
        self.stream(None, f)
    }

    fn for_each_in_trace(
        &self,
        trace_id: &Uuid,
        f: &mut dyn FnMut(Event) -> ControlFlow<()>,
    ) -> Result<(), LedgerError> {
        let trace = trace_id.to_string();
        self.stream(Some((&format!("{TRACE} = $2"), &trace)), f)
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
        // Summaries are small, one per trace: read them all, then call `f`
        // outside the client's runtime.
        let summaries = self.with(async |s| {
            let rows = s.client.query_raw(LIST_SQL, kinds).await?;
            pin_mut!(rows);
            let mut summaries = Vec::new();
            while let Some(row) = rows.try_next().await? {
                let agents: Option<String> = row.try_get(1)?;
                let mut agents: Vec<String> =
                    agents.map(|a| a.split(',').map(str::to_string).collect()).unwrap_or_default();
                agents.sort();
                summaries.push(TraceSummary {
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
            }
            Ok(summaries)
        })?;
        let mut traces = 0;
        for summary in summaries {
            traces += 1;
            if f(summary).is_break() {
                break;
            }
        }
        Ok(traces)
    }

    fn newest_trace(&self) -> Result<Option<String>, LedgerError> {
        self.with(async |s| Ok(s.client.query_opt(NEWEST_SQL, &[]).await?.map(|r| r.try_get(0)).transpose()?.flatten()))
    }

    fn begin_bulk(&self) -> Result<Box<dyn BulkAppend + '_>, LedgerError> {
        let guard = self.session(false)?;
        let mut bulk = PostgresBulk { ledger: self, guard, prev: GENESIS, committed: false };
        // Holding the head's row lock until the import commits: appenders
        // wait, then chain after the import's last row.
        let begin = "BEGIN; SET LOCAL synchronous_commit = on";
        // From here on, dropping the bulk append rolls the transaction back.
        bulk.prev = bulk.run(async |s| {
            s.client.batch_execute(begin).await?;
            head_of(s.client.query_opt(&format!("{READ_HEAD} FOR UPDATE"), &[]).await?)
        })?;
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
        let id =
            self.run(async |s| Ok(s.client.query_one(&s.statements.insert, &columns.params()).await?.try_get(0)?))?;
        self.prev = chain;
        Ok(id)
    }

    fn commit(mut self: Box<Self>) -> Result<(), LedgerError> {
        let head = to_hex(&self.prev);
        self.run(async |s| {
            s.client.execute("UPDATE rlp_head SET chain_blake3 = $1", &[&head]).await?;
            s.client.batch_execute("COMMIT").await?;
            // This connection's idea of the head is stale now.
            s.head.set(None);
            Ok(())
        })?;
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
