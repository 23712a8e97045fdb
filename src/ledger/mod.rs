//! The ledger: the store of frames, behind the [`LedgerStore`] boundary, and
//! what works on any store — queries, verification, JSON Lines export and
//! import, the timeline of `rlp trace show`.
//!
//! [`Location`] names a ledger and is the one place that picks a backend;
//! today every ledger is a SQLite file ([`sqlite::SqliteLedger`],
//! `$RUNLOOP_HOME/pog/events.sqlite`). A second backend is a new file that
//! implements [`LedgerStore`] and [`BulkAppend`], and a `Location` variant:
//! callers (the CLI, live replay) hold a `Location` or a `dyn LedgerStore`
//! and are not touched.
//!
//! The ledger depends on the event schema ([`crate::event`]) and nothing
//! above it; the runtime records into a ledger through
//! [`crate::event::Recorder`], which every store implements.

pub mod export;
pub mod group;
pub mod import;
pub mod jsonl;
pub(crate) mod pending;
pub mod query;
pub(crate) mod sqlite;
pub(crate) mod timeline;
pub(crate) mod verify;

use std::fmt;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use rusqlite::ErrorCode;
use serde::Serialize;
use uuid::Uuid;

use crate::error::{Class, Reportable};
use crate::event::{Event, PreparedRow, Record, Recorder};
use crate::home::Home;

pub use query::TraceSummary;
pub use sqlite::{SqliteLedger, verify_chain};
pub use verify::VerifyReport;

/// What a ledger does for its callers. Implementations are safe to share
/// between threads; every method reads or writes in append order.
pub trait LedgerStore: Recorder {
    /// Where the ledger is.
    fn location(&self) -> &Location;

    /// Appends `records` in one durable transaction, chained after the last
    /// row; returns their row ids.
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

    /// Calls `f` with every trace, oldest first (by first row), until it
    /// breaks; returns how many it was called with.
    fn for_each_trace(&self, f: &mut dyn FnMut(TraceSummary) -> ControlFlow<()>) -> Result<u64, LedgerError>;

    /// The id of the newest trace — the one [`LedgerStore::for_each_trace`]
    /// gives last — without summarising any; `None` for an empty ledger.
    fn newest_trace(&self) -> Result<Option<String>, LedgerError>;

    /// Starts an all-or-nothing append of many rows (import): nothing is
    /// kept unless [`BulkAppend::commit`] is called.
    fn begin_bulk(&self) -> Result<Box<dyn BulkAppend + '_>, LedgerError>;

    /// The storage's own consistency check: `ok`, or its list of problems.
    fn integrity_check(&self) -> Result<String, LedgerError>;

    /// Checks every row hash and every link of the chain (see [`verify`]).
    fn verify_chain(&self) -> Result<VerifyReport, LedgerError> {
        verify::verify(self)
    }
}

/// Many rows appended in one transaction (see [`LedgerStore::begin_bulk`]);
/// dropped without [`BulkAppend::commit`], it leaves the ledger as it was.
pub trait BulkAppend {
    /// Whether the ledger already holds a row of `trace_id`.
    fn holds_trace(&mut self, trace_id: &Uuid) -> Result<bool, LedgerError>;

    /// Appends one row, chained after the one before; returns its row id.
    fn append(&mut self, row: &PreparedRow) -> Result<i64, LedgerError>;

    /// Makes every appended row durable.
    fn commit(self: Box<Self>) -> Result<(), LedgerError>;
}

/// Where a ledger is; opening one here is the only place a backend is chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A SQLite database file.
    Sqlite(PathBuf),
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

    /// Whether a ledger exists here yet.
    pub fn exists(&self) -> bool {
        match self {
            Location::Sqlite(path) => path.exists(),
        }
    }

    /// Opens the ledger, creating it if needed.
    pub fn open(&self) -> Result<Box<dyn LedgerStore>, LedgerError> {
        match self {
            Location::Sqlite(path) => Ok(Box::new(SqliteLedger::open(path)?)),
        }
    }

    /// Opens an existing ledger; an error if there is none.
    pub fn open_existing(&self) -> Result<Box<dyn LedgerStore>, LedgerError> {
        match self {
            Location::Sqlite(path) => Ok(Box::new(SqliteLedger::open_existing(path)?)),
        }
    }

    /// Runs `f` on the ledger, creating it if needed; when `f` fails and
    /// there was no ledger before, what opening created is removed again, so
    /// a refused first write leaves nothing behind.
    pub fn write_all_or_nothing<T, E: From<LedgerError>>(
        &self,
        f: impl FnOnce(&dyn LedgerStore) -> Result<T, E>,
    ) -> Result<T, E> {
        match self {
            Location::Sqlite(path) => sqlite::write_all_or_nothing(path, |ledger| f(ledger)),
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Sqlite(path) => write!(f, "{}", path.display()),
        }
    }
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
    /// A row or a record could not be encoded or decoded.
    #[error("ledger {path}: {message}")]
    Invalid {
        /// The database file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// A ledger that cannot be read stops the command (exit 2); a file that is
/// no database at all is named as not a ledger.
impl Reportable for LedgerError {
    fn class(&self) -> Class {
        Class::Usage
    }

    fn message(&self) -> String {
        if self.is_not_a_database() {
            format!("{} is not an rlp ledger: {self}", self.path().display())
        } else {
            format!("cannot read the ledger: {self}")
        }
    }

    fn help(&self) -> Option<String> {
        Some(if self.is_not_a_database() {
            "restore the file from a backup, or move it aside to start a new ledger; pass --home to use another \
             runtime home"
                .into()
        } else {
            "check the runtime home (--home or $RUNLOOP_HOME) and that the ledger file is readable".into()
        })
    }
}

/// The hint for a ledger row that does not match its hash.
pub(crate) const EDITED_ROW_HELP: &str = "run `rlp trace verify` to see every row that was changed";

impl LedgerError {
    /// The ledger concerned.
    pub fn path(&self) -> &Path {
        match self {
            LedgerError::Sqlite { path, .. } | LedgerError::Io { path, .. } | LedgerError::Invalid { path, .. } => path,
        }
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
