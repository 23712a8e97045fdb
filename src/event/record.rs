//! What is recorded: a [`Record`] (one frame to append), its
//! [`Provenance`], and the [`Recorder`] trait the runtime writes through.
//!
//! The runtime never touches a database: it hands records to a recorder. A
//! ledger (a layer above this one) is the durable recorder; every record of
//! one batch is made durable together (one transaction) before `record`
//! returns.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::event::EventKind;
use crate::event::payload::Usage;

/// Where a frame comes from: `{trace_id, msg_id, agent}`; no other key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// The trace (a group of calls); UUIDv7.
    pub trace_id: Uuid,
    /// This frame's own id; UUIDv7.
    pub msg_id: Uuid,
    /// The agent (bundle name).
    pub agent: String,
}

/// One frame to append. Payloads are already scrubbed of secret values.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// Milliseconds since the Unix epoch when it happened.
    pub ts_ms: i64,
    /// Who produced it (`runtime`, `operator`, `config`, `tool:<id>`).
    pub actor: String,
    /// The kind.
    pub kind: EventKind,
    /// The scope (the agent's name).
    pub scope: String,
    /// The payload (see [`crate::event::payload`]).
    pub payload: Value,
    /// The provenance.
    pub provenance: Provenance,
}

impl Record {
    /// A frame of `kind` made now by `actor` for `agent` (its scope and
    /// provenance) in trace `trace_id`, with a fresh message id.
    pub fn now(kind: EventKind, actor: &str, agent: &str, trace_id: Uuid, payload: Value) -> Record {
        Record {
            ts_ms: now_ms(),
            actor: actor.to_string(),
            kind,
            scope: agent.to_string(),
            payload,
            provenance: Provenance { trace_id, msg_id: Uuid::now_v7(), agent: agent.to_string() },
        }
    }
}

/// Why recording failed, and what to do about it when the recorder knows.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RecordError {
    message: String,
    help: Option<String>,
}

impl RecordError {
    /// A failure said in `message`.
    pub fn new(message: impl Into<String>) -> RecordError {
        RecordError { message: message.into(), help: None }
    }

    /// The same failure, with what to do about it.
    pub fn with_help(self, help: Option<String>) -> RecordError {
        RecordError { help, ..self }
    }

    /// What to do about it, when the recorder knows better than its caller.
    pub fn help(&self) -> Option<&str> {
        self.help.as_deref()
    }
}

/// Something that makes records durable. Implementations must be safe to
/// call from several threads at once.
pub trait Recorder: Send + Sync {
    /// Appends every record of `batch`, in order, durably and atomically.
    fn record(&self, batch: &[Record]) -> Result<(), RecordError>;

    /// The sum of the `usage` recorded on the result frames of `tool` in
    /// trace `trace_id` (what its budget is checked against).
    fn usage(&self, trace_id: Uuid, tool: &str) -> Result<Usage, RecordError>;
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
