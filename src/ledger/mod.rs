//! The ledger: the store of frames, behind the [`LedgerStore`] boundary, and
//! what works on any store — queries, verification, JSON Lines export and
//! import, the timeline of `rlp trace show`.
//!
//! [`Location`] names a ledger and is the one place that picks a backend:
//! a SQLite file ([`sqlite::SqliteLedger`], by default
//! `$RUNLOOP_HOME/pog/events.sqlite`) or a PostgreSQL database
//! ([`postgres::PostgresLedger`]). Callers (the CLI, live replay) hold a
//! `Location` or a `dyn LedgerStore` and do not know which.
//!
//! The ledger depends on the event schema ([`crate::event`]) and nothing
//! above it; the runtime records into a ledger through
//! [`crate::event::Recorder`], which every store implements.

pub mod checked;
pub mod checkpoint;
pub mod export;
pub mod group;
pub mod import;
pub mod jsonl;
pub mod layout;
pub mod merkle;
pub(crate) mod pending;
pub mod postgres;
pub mod proof;
pub mod query;
pub mod redact;
pub(crate) mod sqlite;
pub(crate) mod timeline;
pub mod verify;

use std::fmt;
use std::ops::ControlFlow;
use std::path::PathBuf;

use rusqlite::ErrorCode;
use serde::Serialize;
use uuid::Uuid;

use crate::error::{Exit, Reportable};
use crate::event::{Event, PreparedRow, Record, RecordError, Recorder};
use crate::home::Home;
use crate::ledger::layout::{Leaf, LedgerInfo, StoredCheckpoint, TraceHead};

pub use postgres::{PostgresLedger, PostgresUrl};
pub use query::TraceSummary;
pub use sqlite::{SqliteLedger, verify_chain};
pub use verify::VerifyReport;

/// Runs `read`, a streaming read, handing its rows on to `f`; whether `f`
/// asked it to stop (so a caller reading in several parts stops too).
pub(crate) fn passing_on(
    f: &mut dyn FnMut(Event) -> ControlFlow<()>,
    read: impl FnOnce(&mut dyn FnMut(Event) -> ControlFlow<()>) -> Result<(), LedgerError>,
) -> Result<ControlFlow<()>, LedgerError> {
    let mut last = ControlFlow::Continue(());
    read(&mut |event| {
        last = f(event);
        last
    })?;
    Ok(last)
}

/// What a ledger does for its callers. Implementations are safe to share
/// between threads; every method reads or writes in append order.
pub trait LedgerStore: Recorder {
    /// Where the ledger is.
    fn location(&self) -> &Location;

    /// Appends `records` durably, each chained on its trace's own chain
    /// (the frames of one trace all or none); returns their row ids.
    fn append(&self, records: &[Record]) -> Result<Vec<i64>, LedgerError>;

    /// Number of rows.
    fn count(&self) -> Result<u64, LedgerError>;

    /// Calls `f` with every row in append order (streaming; stops on `Break`).
    fn for_each_event(&self, f: &mut dyn FnMut(Event) -> ControlFlow<()>) -> Result<(), LedgerError>;

    /// Calls `f` with every row of one trace in append order (streaming).
    fn for_each_in_trace(
        &self,
        trace_id: &Uuid,
        f: &mut dyn FnMut(Event) -> ControlFlow<()>,
    ) -> Result<(), LedgerError>;

    /// Calls `f` with every row of the legacy chain (`trace_seq` NULL) in row order.
    fn for_each_legacy(&self, f: &mut dyn FnMut(Event) -> ControlFlow<()>) -> Result<(), LedgerError>;

    /// Calls `f` with every row of the per-trace chains, trace by trace
    /// (by trace id), each trace's in row order.
    fn for_each_chained(&self, f: &mut dyn FnMut(Event) -> ControlFlow<()>) -> Result<(), LedgerError>;

    /// Calls `f` with the rows of one trace's chain from position
    /// `from_seq` on, in row order.
    fn for_each_in_trace_from(
        &self,
        trace_id: &Uuid,
        from_seq: i64,
        f: &mut dyn FnMut(Event) -> ControlFlow<()>,
    ) -> Result<(), LedgerError>;

    /// Calls `f` with the rows of the traces of `heads` from each one's
    /// last frame a checkpoint covered (`sealed`, inclusive) on, trace by
    /// trace in the order of `heads`, each trace's in row order.
    fn for_each_unsealed_row(
        &self,
        heads: &[TraceHead],
        f: &mut dyn FnMut(Event) -> ControlFlow<()>,
    ) -> Result<(), LedgerError>;

    /// The ledger's id and its legacy chain's seal; `None` when its row
    /// (`rlp_ledger`) is gone, which only an edit of the database does.
    fn info(&self) -> Result<Option<LedgerInfo>, LedgerError>;

    /// Calls `f` with every trace's head row, by trace id.
    fn for_each_head(&self, f: &mut dyn FnMut(TraceHead) -> ControlFlow<()>) -> Result<(), LedgerError>;

    /// Up to `limit` head rows whose trace ids sort after `after` (every
    /// one with `None`), by trace id: a slice of a sweep.
    fn heads_after(&self, after: Option<&str>, limit: usize) -> Result<Vec<TraceHead>, LedgerError>;

    /// The head rows whose appends marked them as grown past what the
    /// checkpoints cover (`sealed`; in PostgreSQL, `rlp_unsealed`), by trace
    /// id: a hint, kept by writers, that a checkpoint run between two sweeps
    /// reads instead of every head row.
    fn marked_heads(&self) -> Result<Vec<TraceHead>, LedgerError>;

    /// The traces with frames on their own chains but no head row, found
    /// from the frames themselves (one index probe a trace), not from any
    /// bookkeeping a writer keeps: those whose ids sort after `after` (from
    /// the first with `None`, an empty id included) and, with `upto`, not
    /// after it.
    fn headless_traces(&self, after: Option<&str>, upto: Option<&str>) -> Result<Vec<String>, LedgerError>;

    /// One trace's head row.
    fn trace_head(&self, trace_id: &Uuid) -> Result<Option<TraceHead>, LedgerError>;

    /// Every checkpoint, in order, with its leaves.
    fn checkpoints(&self) -> Result<Vec<StoredCheckpoint>, LedgerError>;

    /// Every checkpoint, in order, without its leaves, and how many leaves
    /// each has stored (counted, not read).
    fn checkpoint_statements(&self) -> Result<(Vec<StoredCheckpoint>, Vec<u64>), LedgerError>;

    /// The checkpoints with a leaf of `trace_id`, in order, with all their leaves.
    fn checkpoints_of(&self, trace_id: &Uuid) -> Result<Vec<StoredCheckpoint>, LedgerError>;

    /// The leaves of `trace_id`, each with the number of its checkpoint, in
    /// order: what the checkpoints say the trace held (read by the leaves'
    /// index on trace ids, without any other leaf or the statements).
    fn leaves_of(&self, trace_id: &Uuid) -> Result<Vec<(i64, Leaf)>, LedgerError>;

    /// The checkpoints numbered `seq` and after, in order, with their leaves.
    fn checkpoints_from(&self, seq: i64) -> Result<Vec<StoredCheckpoint>, LedgerError>;

    /// Stores `checkpoint` and marks its traces sealed up to its leaves,
    /// unless another checkpoint took its number first (`false`).
    fn write_checkpoint(&self, checkpoint: &StoredCheckpoint) -> Result<bool, LedgerError>;

    /// Calls `f` with every trace, oldest first (by first row), until it
    /// breaks; returns how many it was called with.
    fn for_each_trace(&self, f: &mut dyn FnMut(TraceSummary) -> ControlFlow<()>) -> Result<u64, LedgerError>;

    /// The id of the newest trace — the one [`LedgerStore::for_each_trace`]
    /// gives last — without summarising any; `None` for an empty ledger.
    fn newest_trace(&self) -> Result<Option<String>, LedgerError>;

    /// Starts an all-or-nothing append of many rows (import): nothing is
    /// kept unless [`BulkAppend::commit`] is called.
    fn begin_bulk(&self) -> Result<Box<dyn BulkAppend + '_>, LedgerError>;

    /// Starts a read snapshot (use [`Snapshot`]): until
    /// [`LedgerStore::end_snapshot`], every read of this store sees the
    /// ledger as it stood at the first one, while other writers go on.
    /// Nothing is written through the store meanwhile.
    fn begin_snapshot(&self) -> Result<(), LedgerError>;

    /// Ends the snapshot [`LedgerStore::begin_snapshot`] started.
    fn end_snapshot(&self);
}

/// The query of [`LedgerStore::headless_traces`], for a backend whose
/// `events_by_trace` index is on `trace` (its trace id expression), its
/// two parameters `after` and `upto` (text, or NULL for no bound): each next
/// trace id is one probe of the index (a loose index scan), so the cost
/// follows the number of traces, not of frames. Rows from before per-trace
/// chains name traces too; only those with a chained frame count.
pub(crate) fn headless_traces_sql(trace: &str, after: &str, upto: &str) -> String {
    format!(
        "WITH RECURSIVE ids(trace) AS (
           SELECT (SELECT {trace} FROM events
                    WHERE {trace} IS NOT NULL AND ({after} IS NULL OR {trace} > {after}) ORDER BY {trace} LIMIT 1)
           UNION ALL
           SELECT (SELECT {trace} FROM events WHERE {trace} > ids.trace ORDER BY {trace} LIMIT 1)
             FROM ids WHERE ids.trace IS NOT NULL AND ({upto} IS NULL OR ids.trace < {upto}))
         SELECT ids.trace FROM ids
          WHERE ids.trace IS NOT NULL
            AND ({upto} IS NULL OR ids.trace <= {upto})
            AND NOT EXISTS (SELECT 1 FROM rlp_traces AS h WHERE h.trace_id = ids.trace)
            AND EXISTS (SELECT 1 FROM events WHERE {trace} = ids.trace AND trace_seq IS NOT NULL)"
    )
}

/// The query of [`LedgerStore::checkpoint_statements`].
pub(crate) const CHECKPOINT_STATEMENTS: &str = "SELECT c.seq, c.statement, c.signature,
        (SELECT count(*) FROM rlp_checkpoint_leaves AS l WHERE l.seq = c.seq)
   FROM rlp_checkpoints AS c ORDER BY c.seq";

/// Reads that see one state of a ledger while the guard lives: a verify or
/// a checkpoint reads head rows, frames and checkpoints that belong
/// together, however many writers append meanwhile.
pub struct Snapshot<'a>(&'a dyn LedgerStore);

impl<'a> Snapshot<'a> {
    /// Starts a snapshot of `store`.
    pub fn of(store: &'a dyn LedgerStore) -> Result<Snapshot<'a>, LedgerError> {
        store.begin_snapshot()?;
        Ok(Snapshot(store))
    }
}

impl Drop for Snapshot<'_> {
    fn drop(&mut self) {
        self.0.end_snapshot();
    }
}

/// Many rows appended in one transaction (see [`LedgerStore::begin_bulk`]);
/// dropped without [`BulkAppend::commit`], it leaves the ledger as it was.
pub trait BulkAppend {
    /// Whether the ledger already holds a row of `trace_id`.
    fn holds_trace(&mut self, trace_id: &Uuid) -> Result<bool, LedgerError>;

    /// Appends one row, chained on its trace's chain.
    fn append(&mut self, row: &PreparedRow) -> Result<(), LedgerError>;

    /// Makes every appended row durable; returns the first and last row ids.
    fn commit(self: Box<Self>) -> Result<(i64, i64), LedgerError>;
}

/// Where a ledger is; opening one here is the only place a backend is chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A SQLite database file.
    Sqlite(PathBuf),
    /// A PostgreSQL database.
    Postgres(PostgresUrl),
}

/// In JSON reports a location is its display form: JSON strings are
/// Unicode, and a path that is not UTF-8 must not make the report fail.
impl Serialize for Location {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl Location {
    /// The ledger of a runtime home (`pog/events.sqlite`).
    pub fn of_home(home: &Home) -> Location {
        Location::Sqlite(home.ledger_file())
    }

    /// Reads a ledger URL: `sqlite:///ABSOLUTE/PATH` or
    /// `postgres://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE` (also
    /// `postgresql://`). The error never quotes the URL (it may hold a
    /// password).
    pub fn parse(url: &str) -> Result<Location, String> {
        if let Some(path) = url.strip_prefix("sqlite://") {
            return if path.starts_with('/') {
                Ok(Location::Sqlite(PathBuf::from(path)))
            } else {
                Err("a SQLite ledger URL names an absolute path: sqlite:///path/to/events.sqlite".into())
            };
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return PostgresUrl::parse(url).map(Location::Postgres);
        }
        Err("a ledger URL starts with sqlite:/// (a file) or postgres:// (a PostgreSQL database)".into())
    }

    /// Opens the ledger, creating it if needed.
    pub fn open(&self) -> Result<Box<dyn LedgerStore>, LedgerError> {
        match self {
            Location::Sqlite(path) => Ok(Box::new(SqliteLedger::open(path)?)),
            Location::Postgres(url) => Ok(Box::new(PostgresLedger::open(url, true)?)),
        }
    }

    /// Opens an existing ledger; `None` when there is none here yet (no
    /// file, or a database without rlp's tables). Creates nothing.
    pub fn open_if_exists(&self) -> Result<Option<Box<dyn LedgerStore>>, LedgerError> {
        match self {
            Location::Sqlite(path) if !path.exists() => Ok(None),
            Location::Sqlite(path) => Ok(Some(Box::new(SqliteLedger::open_existing(path)?))),
            Location::Postgres(url) => match PostgresLedger::open(url, false) {
                Ok(ledger) => Ok(Some(Box::new(ledger))),
                Err(LedgerError::Postgres { problem: PostgresProblem::Absent, .. }) => Ok(None),
                Err(e) => Err(e),
            },
        }
    }

    /// Runs `f` on the ledger, creating it if needed; when `f` fails and
    /// there was no ledger before, what opening created is removed again, so
    /// a refused first write leaves nothing behind (a PostgreSQL ledger
    /// keeps its empty tables: other hosts may be using them already).
    pub fn write_all_or_nothing<T, E: From<LedgerError>>(
        &self,
        f: impl FnOnce(&dyn LedgerStore) -> Result<T, E>,
    ) -> Result<T, E> {
        match self {
            Location::Sqlite(path) => sqlite::write_all_or_nothing(path, |ledger| f(ledger)),
            Location::Postgres(url) => f(&PostgresLedger::open(url, true)?),
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Sqlite(path) => write!(f, "{}", path.display()),
            Location::Postgres(url) => write!(f, "{url}"),
        }
    }
}

/// What kind of problem a PostgreSQL ledger has, for the help shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostgresProblem {
    /// The server could not be reached, or the connection broke.
    Connection,
    /// The server's TLS certificate did not verify.
    Certificate,
    /// The server refused the user or password.
    Authentication,
    /// The user may not read or write the tables.
    Permission,
    /// Another session held a lock past the lock timeout.
    Busy,
    /// The database holds no rlp ledger yet.
    Absent,
    /// The ledger's contents or schema are not what rlp wrote.
    Edited,
    /// An append committed but could not be made durable: it must not be
    /// appended again.
    Unconfirmed,
    /// Anything else the server reported.
    Server,
}

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
    /// The ledger's path holds something that is not a regular file.
    #[error("{} is {what}, not a ledger file", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What is there: `a FIFO`, `a folder`, …
        what: &'static str,
    },
    /// A row or a record could not be encoded or decoded.
    #[error("ledger {path}: {message}")]
    Invalid {
        /// The database file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A PostgreSQL ledger failed (the message never holds the password).
    #[error("ledger {ledger}: {message}")]
    Postgres {
        /// The ledger's URL, shown without its password.
        ledger: String,
        /// The server's host and port.
        server: String,
        /// What kind of problem.
        problem: PostgresProblem,
        /// What the server or client said.
        message: String,
    },
}

/// A ledger that cannot be read stops the command (exit 2); a file that is
/// no database at all is named as not a ledger.
impl Reportable for LedgerError {
    fn class(&self) -> Exit {
        Exit::Usage
    }

    fn message(&self) -> String {
        match self {
            LedgerError::Sqlite { path, .. } if self.is_not_a_database() => {
                format!("{} is not an rlp ledger: {self}", path.display())
            }
            LedgerError::Postgres { problem: PostgresProblem::Connection | PostgresProblem::Certificate, .. } => {
                format!("cannot reach the ledger: {self}")
            }
            LedgerError::NotAFile { .. } => format!("cannot use the ledger: {self}"),
            _ => format!("cannot read the ledger: {self}"),
        }
    }

    fn help(&self) -> Option<String> {
        Some(match self {
            _ if self.is_not_a_database() => "restore the file from a backup, or move it aside to start a new ledger; \
                                              pass --home to use another runtime home"
                .into(),
            LedgerError::Postgres { problem, server, .. } => match problem {
                PostgresProblem::Connection => format!(
                    "check that PostgreSQL is running at {server} and that the ledger URL (--ledger, \
                     RUNLOOP_LEDGER_URL or [ledger] url in config.toml) is right"
                ),
                PostgresProblem::Certificate => "name the certificate of the server's certificate authority with \
                                                 PGSSLROOTCERT=/path/to/ca.pem (rlp checks certificates whatever \
                                                 the sslmode; docs/fleet.md, \"Credentials\")"
                    .into(),
                PostgresProblem::Authentication => "check the user and the password: in the URL, PGPASSWORD or \
                                                    ~/.pgpass (rlp never shows it)"
                    .into(),
                PostgresProblem::Permission => "grant the user what docs/fleet.md (\"Permissions\") lists: \
                                                SELECT on the ledger's tables; to append, also INSERT on events \
                                                and rlp_unsealed and INSERT and UPDATE on rlp_traces; to make \
                                                checkpoints, INSERT on rlp_checkpoints and rlp_checkpoint_leaves, \
                                                DELETE on rlp_unsealed and UPDATE (sealed) on rlp_traces"
                    .into(),
                PostgresProblem::Busy => "a session holds the trace or the ledger's schema locked: a transaction \
                                          left open, or a client stopped mid-write; find it in pg_stat_activity \
                                          (state `idle in transaction`) and end it with pg_terminate_backend"
                    .into(),
                PostgresProblem::Absent => "a first `rlp tools call` with this ledger creates its tables".into(),
                PostgresProblem::Edited => EDITED_ROW_HELP.into(),
                PostgresProblem::Unconfirmed => "the frames are in the ledger but may not survive a crash of the \
                                                 server; check the server and its disk"
                    .into(),
                PostgresProblem::Server => "see the server's message; the server's log may say more".into(),
            },
            LedgerError::NotAFile { .. } => "a SQLite ledger is a regular file: move what is there aside, or name \
                                             another ledger (--home, or --ledger sqlite:///path/to/events.sqlite)"
                .into(),
            _ => "check the runtime home (--home or $RUNLOOP_HOME) and that the ledger file is readable".into(),
        })
    }
}

/// A ledger's failure to record: a PostgreSQL ledger's own help goes with
/// it (a lock timeout, an edited head row, a permission), since the
/// runtime's general hint about writing cannot say which.
impl From<&LedgerError> for RecordError {
    fn from(e: &LedgerError) -> RecordError {
        let help = match e {
            LedgerError::Postgres { .. } => e.help(),
            _ => None,
        };
        RecordError::new(e.to_string()).with_help(help)
    }
}

/// The hint for a ledger row that does not match its hash.
pub(crate) const EDITED_ROW_HELP: &str = "run `rlp trace verify` to see every row that was changed";

impl LedgerError {
    /// Whether the failed append's rows were written nonetheless (a
    /// PostgreSQL commit whose durability could not be confirmed): they
    /// must not be appended again.
    pub fn was_appended(&self) -> bool {
        matches!(self, LedgerError::Postgres { problem: PostgresProblem::Unconfirmed, .. })
    }

    /// Whether the ledger's path holds nothing rlp can use as a ledger: not
    /// a regular file (a FIFO, a folder), or a file that is no database or
    /// is damaged. Its own message and help say what to do, whatever the
    /// command.
    pub fn is_not_a_ledger(&self) -> bool {
        matches!(self, LedgerError::NotAFile { .. }) || self.is_not_a_database()
    }

    /// Whether the storage cannot be read as a ledger at all (the file is
    /// not a database, or it is damaged): it is not a ledger rlp can use.
    pub fn is_not_a_database(&self) -> bool {
        matches!(
            self,
            LedgerError::Sqlite { source, .. }
                if matches!(source.sqlite_error_code(), Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt))
        )
    }
}
