//! Traces: the SQLite ledger that keeps the frames the runtime records
//! ([`crate::event`]), and replay.
//!
//! [`ledger`] opens `$RUNLOOP_HOME/pog/events.sqlite`, appends durably,
//! streams the events of a trace in order and verifies the chain. The runtime
//! writes through [`crate::event::Recorder`], which [`ledger::Ledger`]
//! implements.

pub mod contract;
pub mod diff;
pub mod divergence;
pub mod export;
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

pub use crate::event::Event;
pub use ledger::{ChainReport, Ledger, LedgerError, verify_chain};
