//! Traces: the events the runtime records and the SQLite ledger that keeps them.
//!
//! [`event`] defines a stored row, its canonical payloads, the row hash and
//! the hash chain; [`ledger`] opens `$RUNLOOP_HOME/pog/events.sqlite`,
//! appends durably, streams the events of a trace in order and verifies the
//! chain. The runtime writes through [`crate::runtime::recorder::Recorder`],
//! which [`ledger::Ledger`] implements.

pub mod contract;
pub mod diff;
pub mod divergence;
pub mod event;
pub mod export;
pub mod frame;
pub mod import;
pub mod jsonl;
pub mod ledger;
pub mod live;
pub mod pending;
pub mod query;
pub mod replay;
pub mod report;
pub mod source;
pub mod timeline;
pub mod verify;

pub use event::Event;
pub use ledger::{ChainReport, Ledger, LedgerError, verify_chain};
