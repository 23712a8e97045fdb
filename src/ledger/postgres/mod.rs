//! The PostgreSQL ledger: the same tables and chains as the SQLite
//! ledger, in a database many hosts append to at once.
//!
//! **No global serial point.** Each trace is a chain of its own with a head
//! row in `rlp_traces` (src/ledger/layout.rs). An append of one trace's
//! frames is one autocommit statement: it moves that trace's head from the
//! state the writer knows to the new one — `UPDATE … WHERE frames =
//! <known> AND head = <known>`, or for a new trace `INSERT … ON CONFLICT DO
//! NOTHING` — and inserts the frames only if the head moved. Writers of different traces never touch the
//! same row, so a fleet's hosts append in parallel, one round trip each,
//! with synchronous commits whose disk flushes the server groups. Writers
//! of one trace (rare: a trace belongs to one session) serialise on its
//! head row; one that finds the head moved reads it and tries again.
//! Frames of several traces (a group commit) go in one transaction, one
//! statement per trace, pipelined.
//!
//! **Durability.** An append returns once its commit is on disk
//! (`synchronous_commit` on). When the connection breaks before the answer
//! arrives, rlp reconnects and reads the heads: moved to the state it
//! wrote, the append is confirmed; unmoved, it is made again; anything
//! else is reported as unconfirmed, never appended twice.
//!
//! **Imports** hold only the imported trace's head row (inserted by the
//! import's transaction), so other writers go on; rows are sent in batches.
//!
//! **Connections.** One connection per open ledger, on a current-thread
//! runtime of its own, with requests pipelined. A connection the server
//! closed is opened again on the next use. The schema is created, or
//! upgraded from version 1 (one global chain; docs/fleet.md, "Upgrading"),
//! on first use under an advisory lock, with a version table
//! ([`schema.sql`](schema.sql)).

pub(crate) mod connect;
mod pgpass;

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::ops::ControlFlow;
use std::sync::{Mutex, MutexGuard};

use futures_util::{TryStreamExt, pin_mut};
use tokio::runtime::Runtime;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};
use uuid::Uuid;

pub use connect::PostgresUrl;

use crate::event::hash::to_hex;
use crate::event::{Decision, Event, EventKind, PreparedRow, Record, RecordError, Recorder, Usage};
use crate::ledger::layout::{Leaf, LedgerInfo, StoredCheckpoint, TraceChain, TraceHead, attach_leaves, traces_of};
use crate::ledger::query::TraceSummary;
use crate::ledger::{BulkAppend, LedgerError, LedgerStore, Location, PostgresProblem, passing_on};

/// The schema, created when a database has none (and the upgrade from version 1).
const SCHEMA: &str = include_str!("schema.sql");
/// The schema version this rlp writes and reads.
const SCHEMA_VERSION: i32 = 2;
/// The advisory lock held while the schema is created ("RLPSCHEM").
const SCHEMA_LOCK: i64 = 0x524C_5053_4348_454D;
/// The advisory lock checkpointers take turns on ("RLPCHECK").
const CHECKPOINT_LOCK: i64 = 0x524C_5043_4845_434B;
/// How many times an append tries again after a trace's head moved under
/// it (each try follows another writer's append to the same trace).
const MAX_TRIES: u32 = 1_000;
/// Heads a connection remembers (the traces it appended to last).
const KNOWN_HEADS: usize = 4096;
/// Rows an import sends in one statement.
const IMPORT_BATCH: usize = 256;

/// Rows read per request when streaming (frames may be large).
const PAGE_ROWS: usize = 256;
const COLUMNS: &str =
    "id, ts_ms, actor, kind, scope, payload_json, provenance_json, hash_blake3, chain_blake3, trace_seq";
/// The trace id of a row, as the `events_by_trace` index has it.
const TRACE: &str = "((provenance_json::json) ->> 'trace_id')";
/// Whether the user may append, and who the user is.
const APPEND_RIGHTS: &str =
    "SELECT has_table_privilege('events', 'INSERT') AND has_table_privilege('rlp_traces', 'INSERT')
            AND has_table_privilege('rlp_traces', 'UPDATE'), current_user::text";
const READ_HEAD: &str = "SELECT frames, head FROM rlp_traces WHERE trace_id = $1";
/// The rows of an append (`$1`–`$9`: the columns, then `trace_seq`), inserted
/// only if the head moved.
const APPEND_ROWS: &str = "INSERT INTO events (ts_ms, actor, kind, scope, payload_json, provenance_json, hash_blake3, chain_blake3, trace_seq)
     SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                          $8::text[], $9::int8[])
     WHERE EXISTS (SELECT 1 FROM moved)
     RETURNING id";
/// Starts trace `$10` at (`$11` frames, `$12`), unless it has a head row,
/// and marks it unsealed.
const START_HEAD: &str = "WITH moved AS (
       INSERT INTO rlp_traces (trace_id, frames, head) VALUES ($10, $11, $12) ON CONFLICT (trace_id) DO NOTHING
       RETURNING 1),
     unsealed AS (INSERT INTO rlp_unsealed SELECT $10 FROM moved ON CONFLICT DO NOTHING) ";
/// Moves the head of trace `$10` from (`$13` frames, `$14`) to (`$11`,
/// `$12`), and marks it unsealed.
const MOVE_HEAD: &str = "WITH moved AS (
       UPDATE rlp_traces SET frames = $11, head = $12 WHERE trace_id = $10 AND frames = $13 AND head = $14
       RETURNING 1),
     unsealed AS (INSERT INTO rlp_unsealed SELECT $10 FROM moved ON CONFLICT DO NOTHING) ";
/// Inserts rows while the caller holds their trace's head (an import).
const INSERT: &str = "INSERT INTO events (ts_ms, actor, kind, scope, payload_json, provenance_json, hash_blake3, chain_blake3, trace_seq)
     SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                          $8::text[], $9::int8[])
     RETURNING id";
/// Claims a trace's head row for an import (locking it until the import
/// ends) and gives the state it holds.
const CLAIM_HEAD: &str = "INSERT INTO rlp_traces AS t (trace_id, frames, head) VALUES ($1, 0, repeat('0', 64))
     ON CONFLICT (trace_id) DO UPDATE SET frames = t.frames RETURNING frames, head";
const SET_HEAD: &str = "UPDATE rlp_traces SET frames = $2, head = $3 WHERE trace_id = $1";
const MARK_UNSEALED: &str = "INSERT INTO rlp_unsealed VALUES ($1) ON CONFLICT DO NOTHING";

/// `rlp trace list`: the SQLite ledger's query (src/ledger/sqlite.rs) in
/// PostgreSQL's words. Kinds and the deny decision are bound by name.
const LIST_SQL: &str = "
SELECT trace, json_agg(DISTINCT v ->> 'agent')::text, min(ts_ms), max(ts_ms), count(*),
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
    /// The heads this connection moved last: the state its next append to
    /// those traces starts from (checked by the append itself).
    heads: RefCell<HashMap<Uuid, TraceChain>>,
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
    /// The append's outcome is unknown: the connection broke before its
    /// answer. It holds the heads the append started from and would leave.
    Lost(Vec<Moved>),
    /// The append may have been made, and rlp could not tell.
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
/// How long a session may sit idle inside a transaction, and how long a
/// statement waits for a lock, in seconds.
const SESSION_WAIT_S: u32 = 60;

fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = db.message().to_string();
        for extra in [db.detail(), db.hint()].into_iter().flatten() {
            text.push_str(&format!(" ({extra})"));
        }
        if *db.code() == SqlState::LOCK_NOT_AVAILABLE {
            text.push_str(&format!(" (another session held what it needed for {SESSION_WAIT_S} s)"));
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
        Some(code) if *code == SqlState::LOCK_NOT_AVAILABLE => PostgresProblem::Busy,
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
        trace_seq: row.try_get(9)?,
    })
}

fn head_of_row(row: &tokio_postgres::Row) -> Result<TraceHead, tokio_postgres::Error> {
    Ok(TraceHead { trace_id: row.try_get(0)?, frames: row.try_get(1)?, head: row.try_get(2)?, sealed: row.try_get(3)? })
}

fn count(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// A trace's chain as its head row (`READ_HEAD`, `CLAIM_HEAD`) has it.
fn chain_of(trace: &Uuid, row: Option<tokio_postgres::Row>) -> Result<TraceChain, Failure> {
    let Some(row) = row else { return Ok(TraceChain::EMPTY) };
    let head: String = row.try_get(1)?;
    TraceChain::of_head(row.try_get(0)?, &head).ok_or_else(|| {
        Failure::Invalid(format!(
            "the head `{head}` of trace {trace} in rlp_traces is not 64 hex digits; the ledger was edited"
        ))
    })
}

/// One trace's part of an append: where its head was and where it goes.
#[derive(Clone, Debug)]
struct Moved {
    trace: Uuid,
    from: TraceChain,
    to: TraceChain,
}

/// Whether a client error means the connection broke (the request's
/// outcome is then unknown), not that the server refused it.
fn is_lost(e: &tokio_postgres::Error) -> bool {
    e.code().is_none()
}

impl Session {
    fn block_on<F: Future>(&self, future: F) -> F::Output {
        match &self.runtime {
            Some(runtime) => runtime.block_on(future),
            None => unreachable!("the runtime is taken only when the session is dropped"),
        }
    }

    /// The head of `trace` this connection knows (the empty chain for one
    /// it never saw: most appends start a new trace).
    fn known(&self, trace: &Uuid) -> TraceChain {
        self.heads.borrow().get(trace).copied().unwrap_or(TraceChain::EMPTY)
    }

    fn remember(&self, trace: Uuid, chain: TraceChain) {
        let mut heads = self.heads.borrow_mut();
        if heads.len() >= KNOWN_HEADS && !heads.contains_key(&trace) {
            heads.clear();
        }
        heads.insert(trace, chain);
    }

    /// Appends `rows` on their traces' chains; returns their ids once the
    /// commit is on disk (see the module notes).
    async fn append(&self, rows: &[PreparedRow]) -> Result<Vec<i64>, Failure> {
        // Head rows are always locked in trace id order, so two writers of
        // the same traces cannot deadlock.
        let mut traces = traces_of(rows);
        traces.sort_unstable();
        for _ in 0..MAX_TRIES {
            let mut plans: Vec<(Moved, Columns)> = traces
                .iter()
                .map(|trace| {
                    let from = self.known(trace);
                    (Moved { trace: *trace, from, to: from }, Columns::default())
                })
                .collect();
            for row in rows {
                let Some((moved, columns)) = plans.iter_mut().find(|(m, _)| m.trace == row.trace_id) else {
                    unreachable!("traces_of lists every row's trace")
                };
                let (seq, chain) = moved.to.push(row);
                columns.push(row, &chain, seq);
            }
            let outcome = match plans.len() {
                1 => self.append_one(&plans[0]).await.map(|ids| vec![ids]),
                _ => self.append_many(&plans).await,
            };
            let moved: Vec<Moved> = plans.iter().map(|(m, _)| m.clone()).collect();
            let answers = match outcome {
                Err(Failure::Db(e)) if is_lost(&e) => return Err(Failure::Lost(moved)),
                // Rolled back by the server (a lock cycle with a writer outside rlp's order): go again.
                Err(Failure::Db(e)) if e.code() == Some(&SqlState::T_R_DEADLOCK_DETECTED) => {
                    moved.iter().map(|_| Vec::new()).collect()
                }
                other => other?,
            };
            let mut stale = Vec::new();
            for (m, ids) in moved.iter().zip(&answers) {
                if ids.is_empty() {
                    stale.push(m.trace);
                }
            }
            if stale.is_empty() {
                for m in moved {
                    self.remember(m.trace, m.to);
                }
                let mut ids: Vec<i64> = answers.into_iter().flatten().collect();
                ids.sort_unstable();
                return Ok(ids);
            }
            // Another writer moved a head first: learn it, and go again.
            for trace in stale {
                let head =
                    chain_of(&trace, self.client.query_opt(&self.statements.read_head, &[&trace.to_string()]).await?)?;
                self.remember(trace, head);
            }
        }
        Err(Failure::Refused(format!("a trace's head moved under {MAX_TRIES} tries in a row; try again")))
    }

    /// One trace's rows in one autocommit statement; their ids, or none
    /// when its head was not where this connection thought.
    async fn append_one(&self, (moved, columns): &(Moved, Columns)) -> Result<Vec<i64>, Failure> {
        let (trace, to_head, from_head) = (moved.trace.to_string(), moved.to.head_hex(), moved.from.head_hex());
        let mut params = columns.params().to_vec();
        params.extend([&columns.seq as &(dyn ToSql + Sync), &trace, &moved.to.frames, &to_head]);
        // A trace this connection has not seen is taken to be new (most
        // appends start one); a wrong guess inserts nothing and goes again.
        let statement = match moved.from.frames {
            0 => &self.statements.start,
            _ => {
                params.extend([&moved.from.frames as &(dyn ToSql + Sync), &from_head]);
                &self.statements.append
            }
        };
        let rows = self.client.query(statement, &params).await?;
        Ok(rows.iter().map(|r| r.try_get::<_, i64>(0)).collect::<Result<Vec<_>, _>>()?)
    }

    /// Several traces' rows in one transaction, their statements pipelined;
    /// rolled back (and each answer emptied) unless every head moved.
    async fn append_many(&self, plans: &[(Moved, Columns)]) -> Result<Vec<Vec<i64>>, Failure> {
        let begin = self.client.batch_execute("BEGIN");
        let appends = futures_util::future::join_all(plans.iter().map(|plan| self.append_one(plan)));
        let (begun, answers) = futures_util::join!(begin, appends);
        let answers: Result<Vec<Vec<i64>>, Failure> =
            begun.map_err(Failure::from).and_then(|()| answers.into_iter().collect());
        match answers {
            Ok(answers) if answers.iter().all(|ids| !ids.is_empty()) => {
                self.client.batch_execute("COMMIT").await?;
                Ok(answers)
            }
            Ok(answers) => {
                self.client.batch_execute("ROLLBACK").await?;
                Ok(answers.into_iter().map(|ids| if ids.is_empty() { ids } else { Vec::new() }).collect::<Vec<_>>())
                    .map(|mut all| {
                        // Every trace of the rolled-back transaction goes again.
                        all.iter_mut().for_each(Vec::clear);
                        all
                    })
            }
            Err(failure) => {
                let _ = self.client.batch_execute("ROLLBACK").await;
                Err(failure)
            }
        }
    }

    /// After a lost answer, on a new connection: whether the append was
    /// made (its ids), not made (`None`), or cannot be told (an error).
    async fn confirm(&self, moved: &[Moved]) -> Result<Option<Vec<i64>>, Failure> {
        let (mut made, mut unmade) = (0, 0);
        for m in moved {
            let head =
                chain_of(&m.trace, self.client.query_opt(&self.statements.read_head, &[&m.trace.to_string()]).await?)?;
            if head == m.to {
                made += 1;
            } else if head == m.from {
                unmade += 1;
            }
        }
        if unmade == moved.len() {
            return Ok(None);
        }
        if made < moved.len() {
            return Err(Failure::Unconfirmed(Box::new(Failure::Invalid(
                "the connection broke during an append, and the traces' heads have moved on since: whether it was \
                 made cannot be told; run `rlp trace verify`"
                    .into(),
            ))));
        }
        let mut ids = Vec::new();
        for m in moved {
            let sql =
                format!("SELECT id FROM events WHERE {TRACE} = $1 AND trace_seq > $2 AND trace_seq <= $3 ORDER BY id");
            for row in self.client.query(&sql, &[&m.trace.to_string(), &m.from.frames, &m.to.frames]).await? {
                ids.push(row.try_get::<_, i64>(0)?);
            }
            self.remember(m.trace, m.to);
        }
        ids.sort_unstable();
        Ok(Some(ids))
    }
}

/// The statements a connection prepares.
struct Statements {
    read_head: Statement,
    /// Starts a trace with its first rows.
    start: Statement,
    /// Appends rows to a trace.
    append: Statement,
    insert: Statement,
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
    seq: Vec<i64>,
}

impl Columns {
    fn push(&mut self, row: &PreparedRow, chain: &[u8; 32], seq: i64) {
        self.ts_ms.push(row.ts_ms);
        self.actor.push(row.actor.clone());
        self.kind.push(row.kind.as_str());
        self.scope.push(row.scope.clone());
        self.payload.push(row.payload_json.clone());
        self.provenance.push(row.provenance_json.clone());
        self.hash.push(to_hex(&row.hash));
        self.chain.push(to_hex(chain));
        self.seq.push(seq);
    }

    fn len(&self) -> usize {
        self.seq.len()
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
            Failure::Lost(_) => self
                .error(PostgresProblem::Unconfirmed, "the connection broke before the append's answer arrived".into()),
            Failure::Unconfirmed(failure) => match self.failed(credentials, *failure) {
                LedgerError::Postgres { message, .. } => self.error(
                    PostgresProblem::Unconfirmed,
                    format!("the frames may have been appended, and rlp could not confirm it: {message}"),
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
            Ok(statements) => Ok(Session {
                runtime: Some(runtime),
                client,
                statements,
                heads: RefCell::new(HashMap::new()),
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

    /// Creates the schema, or upgrades it from version 1, unless another rlp
    /// did while this one waited for the lock (the script's DDL takes locks
    /// that appenders hold too, so it runs only when needed).
    async fn create_or_upgrade(client: &Client) -> Result<(), Failure> {
        let run = async {
            client.batch_execute(&format!("BEGIN; SELECT pg_advisory_xact_lock({SCHEMA_LOCK})")).await?;
            let exists: bool =
                client.query_one("SELECT to_regclass('rlp_schema') IS NOT NULL", &[]).await?.try_get(0)?;
            let version: Option<i32> = match exists {
                true => client.query_one("SELECT max(version) FROM rlp_schema", &[]).await?.try_get(0)?,
                false => None,
            };
            if version.is_none() || version == Some(1) {
                client.batch_execute(SCHEMA).await?;
            }
            client.batch_execute("COMMIT").await
        };
        if let Err(e) = run.await {
            let _ = client.batch_execute("ROLLBACK").await;
            return Err(e.into());
        }
        Ok(())
    }

    /// Checks (or creates, or upgrades) the schema and prepares what appends use.
    async fn prepare(client: &Client, create: bool) -> Result<Statements, Failure> {
        // A client that stops mid-transaction (an import suspended at a
        // terminal) loses its session, and with it the trace it holds, after
        // a minute; an append waits at most that long for a head, then fails.
        client
            .batch_execute(&format!(
                "SET idle_in_transaction_session_timeout = '{SESSION_WAIT_S}s'; SET lock_timeout = '{SESSION_WAIT_S}s'"
            ))
            .await?;
        let read_version = async || match client.query_opt("SELECT max(version) FROM rlp_schema", &[]).await {
            Ok(row) => Ok(row.map(|row| row.try_get::<_, Option<i32>>(0)).transpose()?.flatten()),
            Err(e) if create && e.code() == Some(&SqlState::UNDEFINED_TABLE) => Ok(None),
            Err(e) => Err(Failure::from(e)),
        };
        let mut version = read_version().await?;
        if (version.is_none() && create) || version == Some(1) {
            Self::create_or_upgrade(client).await?;
            version = read_version().await?;
        }
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
                    "user `{}` may not append: it needs INSERT on events and rlp_unsealed, and INSERT and UPDATE on \
                     rlp_traces",
                    rights.try_get::<_, String>(1)?
                )));
            }
        }
        Ok(Statements {
            read_head: client.prepare(READ_HEAD).await?,
            start: client.prepare(&format!("{START_HEAD}{APPEND_ROWS}")).await?,
            append: client.prepare(&format!("{MOVE_HEAD}{APPEND_ROWS}")).await?,
            insert: client.prepare(INSERT).await?,
        })
    }

    /// Runs an append on the connection: its ids, or — when the connection
    /// broke before the answer — the heads it meant to move.
    fn attempt(
        &self,
        f: impl AsyncFnOnce(&Session) -> Result<Vec<i64>, Failure>,
    ) -> Result<Result<Vec<i64>, Vec<Moved>>, LedgerError> {
        let guard = self.session(false)?;
        let Some(session) = guard.as_ref() else { unreachable!("session() leaves a connection in place") };
        match session.block_on(f(session)) {
            Ok(ids) => Ok(Ok(ids)),
            Err(Failure::Lost(moved)) => Ok(Err(moved)),
            Err(failure) => Err(self.failed(&session.credentials, failure)),
        }
    }

    /// Runs `f` on the connection, naming its failure.
    fn with<T>(&self, f: impl AsyncFnOnce(&Session) -> Result<T, Failure>) -> Result<T, LedgerError> {
        let guard = self.session(false)?;
        let Some(session) = guard.as_ref() else { unreachable!("session() leaves a connection in place") };
        session.block_on(f(session)).map_err(|failure| self.failed(&session.credentials, failure))
    }

    /// Calls `f` with the rows of `events` (those `filter`, an SQL condition
    /// on `$2`… bound to `values`, keeps; all when it is empty) in id order,
    /// a page at a time: `f` runs
    /// outside the client's runtime, so it may use another ledger (live
    /// replay records while it reads).
    fn stream(
        &self,
        filter: &str,
        values: &[&(dyn ToSql + Sync)],
        f: &mut dyn FnMut(Event) -> ControlFlow<()>,
    ) -> Result<(), LedgerError> {
        let condition = if filter.is_empty() { String::new() } else { format!(" AND {filter}") };
        let sql = format!("SELECT {COLUMNS} FROM events WHERE id > $1{condition} ORDER BY id LIMIT {PAGE_ROWS}");
        let mut after = i64::MIN;
        loop {
            let page = self.with(async |s| {
                let mut params: Vec<&(dyn ToSql + Sync)> = vec![&after];
                params.extend(values);
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

impl PostgresLedger {
    /// Calls `f` with the rows `select` gives (a query of [`COLUMNS`] and a
    /// trace id, without ORDER BY), in the order of `trace` (that trace id)
    /// then row id, a page at a time.
    fn stream_by_trace(
        &self,
        select: &str,
        trace: &str,
        f: &mut dyn FnMut(Event) -> ControlFlow<()>,
    ) -> Result<(), LedgerError> {
        let sql = format!("{select} AND ({trace}, id) > ($1, $2) ORDER BY {trace}, id LIMIT {PAGE_ROWS}");
        let (mut last_trace, mut after) = (String::new(), i64::MIN);
        loop {
            let page = self.with(async |s| {
                let rows = s.client.query(&sql, &[&last_trace, &after]).await?;
                Ok(rows
                    .iter()
                    .map(|row| Ok((row_to_event(row)?, row.try_get::<_, Option<String>>(10)?.unwrap_or_default())))
                    .collect::<Result<Vec<_>, tokio_postgres::Error>>()?)
            })?;
            let full = page.len() == PAGE_ROWS;
            for (event, event_trace) in page {
                (last_trace, after) = (event_trace, event.id);
                if f(event).is_break() {
                    return Ok(());
                }
            }
            if !full {
                return Ok(());
            }
        }
    }

    /// The checkpoints `condition` (on `seq`; `$1` is `param`) keeps, in order, with their leaves.
    fn checkpoints_where(&self, condition: &str, param: Option<String>) -> Result<Vec<StoredCheckpoint>, LedgerError> {
        let params: Vec<&(dyn ToSql + Sync)> = match &param {
            Some(p) => vec![p],
            None => Vec::new(),
        };
        self.with(async |s| {
            let sql = format!("SELECT seq, statement, signature FROM rlp_checkpoints WHERE {condition} ORDER BY seq");
            let mut checkpoints = Vec::new();
            for row in s.client.query(&sql, &params).await? {
                checkpoints.push(StoredCheckpoint {
                    seq: row.try_get(0)?,
                    statement: row.try_get(1)?,
                    signature: row.try_get(2)?,
                    leaves: Vec::new(),
                });
            }
            let sql = format!(
                "SELECT seq, trace_id, frames, head FROM rlp_checkpoint_leaves WHERE {condition} ORDER BY seq, trace_id"
            );
            let mut leaves = Vec::new();
            for row in s.client.query(&sql, &params).await? {
                leaves.push((
                    row.try_get::<_, i64>(0)?,
                    Leaf { trace_id: row.try_get(1)?, frames: row.try_get(2)?, head: row.try_get(3)? },
                ));
            }
            attach_leaves(&mut checkpoints, leaves);
            Ok(checkpoints)
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
        match self.attempt(async |s| s.append(&rows).await)? {
            Ok(ids) => Ok(ids),
            // The connection broke before the answer: on a new one, find
            // out whether the append was made before making it again.
            Err(moved) => match self.with(async |s| s.confirm(&moved).await)? {
                Some(ids) => Ok(ids),
                None => self.with(async |s| s.append(&rows).await),
            },
        }
    }

    fn count(&self) -> Result<u64, LedgerError> {
        self.with(async |s| Ok(count(s.client.query_one("SELECT count(*) FROM events", &[]).await?.try_get(0)?)))
    }

    fn for_each_event(&self, f: &mut dyn FnMut(Event) -> ControlFlow<()>) -> Result<(), LedgerError> {
        self.stream("", &[], f)
    }

    fn for_each_in_trace(
        &self,
        trace_id: &Uuid,
        f: &mut dyn FnMut(Event) -> ControlFlow<()>,
    ) -> Result<(), LedgerError> {
        let trace = trace_id.to_string();
        self.stream(&format!("{TRACE} = $2"), &[&trace], f)
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
                let agents = crate::ledger::query::agents_of(row.try_get::<_, Option<String>>(1)?.as_deref());
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
        let bulk = PostgresBulk {
            ledger: self,
            guard,
            chains: Vec::new(),
            pending: Columns::default(),
            span: None,
            committed: false,
        };
        // From here on, dropping the bulk append rolls the transaction back.
        bulk.run(async |s| Ok(s.client.batch_execute("BEGIN").await?))?;
        Ok(Box::new(bulk))
    }

    fn begin_snapshot(&self) -> Result<(), LedgerError> {
        self.with(async |s| Ok(s.client.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY").await?))
    }

    fn end_snapshot(&self) {
        let _ = self.with(async |s| Ok(s.client.batch_execute("COMMIT").await?));
    }

    fn for_each_legacy(&self, f: &mut dyn FnMut(Event) -> ControlFlow<()>) -> Result<(), LedgerError> {
        self.stream("trace_seq IS NULL", &[], f)
    }

    fn for_each_chained(&self, f: &mut dyn FnMut(Event) -> ControlFlow<()>) -> Result<(), LedgerError> {
        // Rows whose provenance names no trace (edited) first: the ordered
        // pass below cannot reach them, and none may go unchecked.
        let nameless = format!("trace_seq IS NOT NULL AND {TRACE} IS NULL");
        if passing_on(f, |f| self.stream(&nameless, &[], f))?.is_break() {
            return Ok(());
        }
        self.stream_by_trace(&format!("SELECT {COLUMNS}, {TRACE} FROM events WHERE trace_seq IS NOT NULL"), TRACE, f)
    }

    fn for_each_unsealed_row(
        &self,
        heads: &[TraceHead],
        f: &mut dyn FnMut(Event) -> ControlFlow<()>,
    ) -> Result<(), LedgerError> {
        // Traces in batches of about a page of new frames, each batch one
        // round trip (an index scan per trace); a trace with more new frames
        // than a page is read on its own, a page at a time.
        let sql = format!(
            "SELECT e.* FROM unnest($1::text[], $2::int8[]) WITH ORDINALITY AS u(trace_id, sealed, n)
             CROSS JOIN LATERAL (SELECT {COLUMNS} FROM events WHERE {TRACE} = u.trace_id AND trace_seq >= u.sealed
                                 ORDER BY id) AS e
             ORDER BY u.n, e.id"
        );
        let mut rest = heads;
        while !rest.is_empty() {
            let mut take = 0;
            let mut rows = 0i64;
            let new_frames = |h: &TraceHead| h.frames.saturating_sub(h.sealed);
            while take < rest.len() && (take == 0 || rows.saturating_add(new_frames(&rest[take])) <= PAGE_ROWS as i64) {
                rows = rows.saturating_add(new_frames(&rest[take]));
                take += 1;
            }
            let (batch, after) = rest.split_at(take);
            rest = after;
            if let [big] = batch
                && big.frames.saturating_sub(big.sealed) > PAGE_ROWS as i64
            {
                let trace = Uuid::parse_str(&big.trace_id).map_err(|_| {
                    self.error(
                        PostgresProblem::Edited,
                        format!("rlp_traces holds a trace id that is not a UUID: {}", big.trace_id),
                    )
                })?;
                if passing_on(f, |f| self.for_each_in_trace_from(&trace, big.sealed, f))?.is_break() {
                    return Ok(());
                }
                continue;
            }
            let traces: Vec<&str> = batch.iter().map(|h| h.trace_id.as_str()).collect();
            let sealed: Vec<i64> = batch.iter().map(|h| h.sealed).collect();
            let page = self.with(async |s| {
                let rows = s.client.query(&sql, &[&traces, &sealed]).await?;
                Ok(rows.iter().map(row_to_event).collect::<Result<Vec<_>, _>>()?)
            })?;
            for event in page {
                if f(event).is_break() {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn for_each_in_trace_from(
        &self,
        trace_id: &Uuid,
        from_seq: i64,
        f: &mut dyn FnMut(Event) -> ControlFlow<()>,
    ) -> Result<(), LedgerError> {
        let trace = trace_id.to_string();
        self.stream(&format!("{TRACE} = $2 AND trace_seq >= $3"), &[&trace, &from_seq], f)
    }

    fn info(&self) -> Result<Option<LedgerInfo>, LedgerError> {
        self.with(async |s| {
            let row = s.client.query_opt("SELECT ledger_id, legacy_rows, legacy_head FROM rlp_ledger", &[]).await?;
            let info = |row: tokio_postgres::Row| -> Result<LedgerInfo, Failure> {
                Ok(LedgerInfo {
                    ledger_id: row.try_get(0)?,
                    legacy_rows: count(row.try_get(1)?),
                    legacy_head: row.try_get(2)?,
                })
            };
            row.map(info).transpose()
        })
    }

    fn for_each_head(&self, f: &mut dyn FnMut(TraceHead) -> ControlFlow<()>) -> Result<(), LedgerError> {
        let mut after = None;
        loop {
            let page = self.heads_after(after.as_deref(), PAGE_ROWS * 16)?;
            let full = page.len() == PAGE_ROWS * 16;
            for head in page {
                after = Some(head.trace_id.clone());
                if f(head).is_break() {
                    return Ok(());
                }
            }
            if !full {
                return Ok(());
            }
        }
    }

    fn heads_after(&self, after: Option<&str>, limit: usize) -> Result<Vec<TraceHead>, LedgerError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with(async |s| {
            let sql = "SELECT trace_id, frames, head, sealed FROM rlp_traces WHERE $1::text IS NULL OR trace_id > $1
                        ORDER BY trace_id LIMIT $2";
            Ok(s.client.query(sql, &[&after, &limit]).await?.iter().map(head_of_row).collect::<Result<Vec<_>, _>>()?)
        })
    }

    fn marked_heads(&self) -> Result<Vec<TraceHead>, LedgerError> {
        self.with(async |s| {
            let sql =
                "SELECT t.trace_id, t.frames, t.head, t.sealed FROM rlp_unsealed JOIN rlp_traces AS t USING (trace_id)
                       WHERE t.frames <> t.sealed ORDER BY t.trace_id";
            Ok(s.client.query(sql, &[]).await?.iter().map(head_of_row).collect::<Result<Vec<_>, _>>()?)
        })
    }

    fn checkpoint_statements(&self) -> Result<(Vec<StoredCheckpoint>, Vec<u64>), LedgerError> {
        self.with(async |s| {
            let (mut checkpoints, mut counts) = (Vec::new(), Vec::new());
            for row in s.client.query(crate::ledger::CHECKPOINT_STATEMENTS, &[]).await? {
                checkpoints.push(StoredCheckpoint {
                    seq: row.try_get(0)?,
                    statement: row.try_get(1)?,
                    signature: row.try_get(2)?,
                    leaves: Vec::new(),
                });
                counts.push(u64::try_from(row.try_get::<_, i64>(3)?).unwrap_or(0));
            }
            Ok((checkpoints, counts))
        })
    }

    fn headless_traces(&self, after: Option<&str>, upto: Option<&str>) -> Result<Vec<String>, LedgerError> {
        let sql = crate::ledger::headless_traces_sql(TRACE, "$1::text", "$2::text");
        self.with(async |s| {
            let rows = s.client.query(&sql, &[&after, &upto]).await?;
            Ok(rows.iter().map(|r| r.try_get::<_, String>(0)).collect::<Result<Vec<_>, _>>()?)
        })
    }

    fn trace_head(&self, trace_id: &Uuid) -> Result<Option<TraceHead>, LedgerError> {
        let trace = trace_id.to_string();
        self.with(async |s| {
            let sql = "SELECT trace_id, frames, head, sealed FROM rlp_traces WHERE trace_id = $1";
            Ok(s.client.query_opt(sql, &[&trace]).await?.as_ref().map(head_of_row).transpose()?)
        })
    }

    fn checkpoints(&self) -> Result<Vec<StoredCheckpoint>, LedgerError> {
        self.checkpoints_where("true", None)
    }

    fn checkpoints_of(&self, trace_id: &Uuid) -> Result<Vec<StoredCheckpoint>, LedgerError> {
        self.checkpoints_where(
            "seq IN (SELECT seq FROM rlp_checkpoint_leaves WHERE trace_id = $1)",
            Some(trace_id.to_string()),
        )
    }

    fn leaves_of(&self, trace_id: &Uuid) -> Result<Vec<(i64, Leaf)>, LedgerError> {
        let trace = trace_id.to_string();
        self.with(async |s| {
            let sql = "SELECT seq, trace_id, frames, head FROM rlp_checkpoint_leaves WHERE trace_id = $1 ORDER BY seq";
            let mut leaves = Vec::new();
            for row in s.client.query(sql, &[&trace]).await? {
                leaves.push((
                    row.try_get::<_, i64>(0)?,
                    Leaf { trace_id: row.try_get(1)?, frames: row.try_get(2)?, head: row.try_get(3)? },
                ));
            }
            Ok(leaves)
        })
    }

    fn checkpoints_from(&self, seq: i64) -> Result<Vec<StoredCheckpoint>, LedgerError> {
        self.checkpoints_where("seq >= $1::text::bigint", Some(seq.to_string()))
    }

    fn write_checkpoint(&self, checkpoint: &StoredCheckpoint) -> Result<bool, LedgerError> {
        let traces: Vec<&str> = checkpoint.leaves.iter().map(|l| l.trace_id.as_str()).collect();
        let frames: Vec<i64> = checkpoint.leaves.iter().map(|l| l.frames).collect();
        let heads: Vec<&str> = checkpoint.leaves.iter().map(|l| l.head.as_str()).collect();
        self.with(async |s| {
            s.client.batch_execute(&format!("BEGIN; SELECT pg_advisory_xact_lock({CHECKPOINT_LOCK})")).await?;
            let written = async {
                let latest: i64 =
                    s.client.query_one("SELECT coalesce(max(seq), 0) FROM rlp_checkpoints", &[]).await?.try_get(0)?;
                if latest != checkpoint.seq.saturating_sub(1) {
                    return Ok::<bool, Failure>(false);
                }
                s.client
                    .execute(
                        "INSERT INTO rlp_checkpoints (seq, statement, signature) VALUES ($1, $2, $3)",
                        &[&checkpoint.seq, &checkpoint.statement, &checkpoint.signature],
                    )
                    .await?;
                s.client
                    .execute(
                        "INSERT INTO rlp_checkpoint_leaves (seq, trace_id, frames, head)
                         SELECT $1, * FROM unnest($2::text[], $3::int8[], $4::text[])",
                        &[&checkpoint.seq, &traces, &frames, &heads],
                    )
                    .await?;
                // Head rows locked in trace id order, as appends lock them.
                s.client
                    .execute(
                        "SELECT 1 FROM rlp_traces WHERE trace_id = ANY($1) ORDER BY trace_id FOR UPDATE",
                        &[&traces],
                    )
                    .await?;
                s.client
                    .execute(
                        "UPDATE rlp_traces AS t SET sealed = greatest(t.sealed, l.frames)
                         FROM unnest($1::text[], $2::int8[]) AS l(trace_id, frames) WHERE t.trace_id = l.trace_id",
                        &[&traces, &frames],
                    )
                    .await?;
                // Unmarked only if no frame came since (an append that
                // commits later marks its trace again).
                s.client
                    .execute(
                        "DELETE FROM rlp_unsealed AS u USING rlp_traces AS t
                         WHERE u.trace_id = t.trace_id AND t.frames = t.sealed AND u.trace_id = ANY($1)",
                        &[&traces],
                    )
                    .await?;
                Ok(true)
            }
            .await;
            match written {
                Ok(true) => {
                    s.client.batch_execute("COMMIT").await?;
                    Ok(true)
                }
                other => {
                    let _ = s.client.batch_execute("ROLLBACK").await;
                    other
                }
            }
        })
    }
}

impl Recorder for PostgresLedger {
    fn record(&self, batch: &[Record]) -> Result<(), RecordError> {
        self.append(batch).map(|_| ()).map_err(|e| RecordError::from(&e))
    }

    fn usage(&self, trace_id: Uuid, tool: &str) -> Result<Usage, RecordError> {
        let trace = trace_id.to_string();
        let kind = EventKind::ToolResult.as_str();
        let sums = self.with(async |s| {
            let row = s.client.query_one(USAGE_SQL, &[&trace, &kind, &tool]).await?;
            Ok((row.try_get::<_, Option<i64>>(0)?, row.try_get::<_, f64>(1)?, row.try_get::<_, i64>(2)?))
        });
        let (tokens, usd, usd_count) = sums.map_err(|e| RecordError::from(&e))?;
        Ok(Usage { tokens: tokens.map(|t| u64::try_from(t).unwrap_or(0)), usd: (usd_count > 0).then_some(usd) })
    }
}

/// An import's transaction, holding the connection and the imported
/// traces' head rows (nothing another writer waits for) for its length.
struct PostgresBulk<'a> {
    ledger: &'a PostgresLedger,
    guard: MutexGuard<'a, Option<Session>>,
    /// The chains appended to, moved in the database at the commit.
    chains: Vec<(Uuid, TraceChain)>,
    /// Rows not sent yet.
    pending: Columns,
    /// The first and last row ids sent.
    span: Option<(i64, i64)>,
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

    /// Sends the rows not sent yet.
    fn flush(&mut self) -> Result<(), LedgerError> {
        if self.pending.len() == 0 {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        let ids = self.run(async |s| {
            let mut params = pending.params().to_vec();
            params.push(&pending.seq);
            let rows = s.client.query(&s.statements.insert, &params).await?;
            Ok(rows.iter().map(|r| r.try_get::<_, i64>(0)).collect::<Result<Vec<_>, _>>()?)
        })?;
        if let (Some(first), Some(last)) = (ids.iter().min(), ids.iter().max()) {
            self.span = Some(self.span.map_or((*first, *last), |(a, b)| (a.min(*first), b.max(*last))));
        }
        Ok(())
    }
}

impl BulkAppend for PostgresBulk<'_> {
    fn holds_trace(&mut self, trace_id: &Uuid) -> Result<bool, LedgerError> {
        let trace = trace_id.to_string();
        let sql = format!(
            "SELECT 1 WHERE EXISTS (SELECT 1 FROM events WHERE {TRACE} = $1)
                         OR EXISTS (SELECT 1 FROM rlp_traces WHERE trace_id = $1 AND frames > 0)"
        );
        self.run(async |s| Ok(s.client.query_opt(&sql, &[&trace]).await?.is_some()))
    }

    fn append(&mut self, row: &PreparedRow) -> Result<(), LedgerError> {
        let index = match self.chains.iter().position(|(trace, _)| *trace == row.trace_id) {
            Some(index) => index,
            None => {
                let trace = row.trace_id;
                // Claims the trace's head row (locked until the import ends).
                let chain = self.run(async |s| {
                    chain_of(&trace, Some(s.client.query_one(CLAIM_HEAD, &[&trace.to_string()]).await?))
                })?;
                self.chains.push((trace, chain));
                self.chains.len() - 1
            }
        };
        let (seq, chain) = self.chains[index].1.push(row);
        self.pending.push(row, &chain, seq);
        if self.pending.len() >= IMPORT_BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn commit(mut self: Box<Self>) -> Result<(i64, i64), LedgerError> {
        self.flush()?;
        let chains = self.chains.clone();
        self.run(async |s| {
            for (trace, chain) in &chains {
                s.client.execute(SET_HEAD, &[&trace.to_string(), &chain.frames, &chain.head_hex()]).await?;
                s.client.execute(MARK_UNSEALED, &[&trace.to_string()]).await?;
            }
            s.client.batch_execute("COMMIT").await?;
            Ok(())
        })?;
        self.committed = true;
        Ok(self.span.unwrap_or_default())
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
