//! Replay: running a recorded trace again against a bundle, and reporting
//! every way it diverges.
//!
//! - [`replayer`]: strict replay (nothing runs; recorded calls are checked
//!   against the bundle's schemas) and the engine live replay shares;
//! - [`live`]: live replay, every call run again through the runtime into a
//!   new trace;
//! - [`contract`]: what the bundle promises today (tools and schemas);
//! - [`divergence`] and [`diff`]: what differs, as JSON Pointer paths;
//! - [`exchange`]: exchanges with bridged servers (resources, prompts,
//!   completions, notifications), checked and compared, never run again;
//! - [`hooked`]: what the caller saw of a call whose after-call hooks ran;
//! - [`report`]: the human and JSON reports;
//! - [`source`]: answering an agent's calls from a recording (library API);
//! - [`serving`]: a recording answering a runtime's calls (`rlp serve
//!   --replay`, `rlp tools call --replay`);
//! - [`trace_diff`]: two recorded runs compared call by call, and exchange by
//!   exchange (`rlp trace diff`).
//!
//! Traces are read from a ledger or a JSON Lines export through
//! [`crate::ledger::query`]; replay depends on the runtime and the ledger,
//! and nothing below it depends on replay.

pub(crate) mod contract;
pub(crate) mod diff;
pub mod divergence;
pub(crate) mod exchange;
pub(crate) mod hooked;
pub(crate) mod live;
pub(crate) mod replayer;
pub(crate) mod report;
pub mod serving;
pub mod source;
pub(crate) mod trace_diff;
