//! Reading a runtime home's ledger back.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use rlp::event::Event;
use rlp::ledger::SqliteLedger;
use serde_json::Value;

/// The ledger of runtime home `home`.
pub fn path(home: &Path) -> PathBuf {
    home.join("pog/events.sqlite")
}

/// Every event of the ledger at `ledger`, in order.
pub fn events(ledger: &Path) -> Vec<Event> {
    let ledger = SqliteLedger::open_existing(ledger).unwrap();
    let mut events = Vec::new();
    ledger
        .for_each_event(|e| {
            events.push(e);
            ControlFlow::Continue(())
        })
        .unwrap();
    events
}

/// The kind of each event.
pub fn kinds(events: &[Event]) -> Vec<&str> {
    events.iter().map(|e| e.kind.as_str()).collect()
}

/// An event as a test reads it.
#[derive(Debug, Clone)]
pub struct Frame {
    /// Milliseconds since the Unix epoch.
    pub ts_ms: i64,
    /// `tool.call`, `tool.result`, `cap.audit`…
    pub kind: String,
    pub payload: Value,
}

impl Frame {
    /// The frame of `event`.
    pub fn of(event: &Event) -> Self {
        Frame { ts_ms: event.ts_ms, kind: event.kind.clone(), payload: payload(event) }
    }
}

/// An event's payload.
pub fn payload(event: &Event) -> Value {
    event.payload().unwrap()
}

/// The rows of the ledger's table, counted by SQLite itself.
pub fn rows(ledger: &Path) -> i64 {
    let conn = rusqlite::Connection::open(ledger).unwrap();
    conn.query_row("SELECT count(*) FROM events", [], |r| r.get(0)).unwrap()
}

/// The bytes of each file the ledger at `ledger` keeps on disk (the
/// database, and its write-ahead log and shared memory where they exist).
pub fn files(ledger: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    ["", "-wal", "-shm"]
        .iter()
        .filter_map(|suffix| {
            let path = PathBuf::from(format!("{}{suffix}", ledger.display()));
            std::fs::read(&path).ok().map(|bytes| (path, bytes))
        })
        .collect()
}
