//! What the runtime records, and the trait it records through.
//!
//! The runtime never touches a database: it hands [`Record`]s to a
//! [`Recorder`]. [`crate::trace::ledger::Ledger`] is the durable
//! implementation; [`NullRecorder`] and [`MemoryRecorder`] serve tests and
//! benchmarks. Every record of one batch is made durable together (one
//! transaction), before `record` returns.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// Content type id of a tool call frame (CT_TOOL_CALL).
pub const CT_TOOL_CALL: u16 = 0x0003;
/// Content type id of a tool result frame (CT_TOOL_RESULT).
pub const CT_TOOL_RESULT: u16 = 0x0004;
/// Version of every payload written by this runtime (`v`).
pub const PAYLOAD_VERSION: u64 = 1;

/// The kinds of event the runtime writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// `tool.call`: a call about to run (CT_TOOL_CALL).
    ToolCall,
    /// `tool.result`: the outcome of one attempt (CT_TOOL_RESULT).
    ToolResult,
    /// `cap.audit`: one allow or deny decision about a capability.
    CapAudit,
    /// `tool.confirm`: who approved or denied a call, and how.
    ToolConfirm,
}

impl EventKind {
    /// Every kind.
    pub const ALL: &'static [EventKind] =
        &[EventKind::ToolCall, EventKind::ToolResult, EventKind::CapAudit, EventKind::ToolConfirm];

    /// The `kind` column value, e.g. `tool.call`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::ToolCall => "tool.call",
            EventKind::ToolResult => "tool.result",
            EventKind::CapAudit => "cap.audit",
            EventKind::ToolConfirm => "tool.confirm",
        }
    }

    /// The kind named by a `kind` column value.
    pub fn parse(text: &str) -> Option<EventKind> {
        EventKind::ALL.iter().copied().find(|k| k.as_str() == text)
    }

    /// The frame content type id, for the two frame kinds.
    pub fn schema_id(self) -> Option<u16> {
        match self {
            EventKind::ToolCall => Some(CT_TOOL_CALL),
            EventKind::ToolResult => Some(CT_TOOL_RESULT),
            _ => None,
        }
    }
}

/// Where an event comes from: `{trace_id, msg_id, agent}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// The trace (a group of calls); UUIDv7.
    pub trace_id: Uuid,
    /// This event's own id; UUIDv7.
    pub msg_id: Uuid,
    /// The agent (bundle name).
    pub agent: String,
}

/// One event to append. Payloads are already scrubbed of secret values.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// Milliseconds since the Unix epoch when the event happened.
    pub ts_ms: i64,
    /// Who produced it (`runtime`, `operator`, `tool:<id>`).
    pub actor: String,
    /// The `kind` column (see [`EventKind`]).
    pub kind: String,
    /// The scope (the agent's name).
    pub scope: String,
    /// The payload.
    pub payload: Value,
    /// The provenance.
    pub provenance: Provenance,
}

/// Why recording failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RecordError(pub String);

/// Something that makes records durable. Implementations must be safe to
/// call from several threads at once.
pub trait Recorder: Send + Sync {
    /// Appends every record of `batch`, in order, durably and atomically.
    fn record(&self, batch: &[Record]) -> Result<(), RecordError>;
}

/// Records nothing (benchmarks of the pipeline without a ledger).
#[derive(Clone, Copy, Debug, Default)]
pub struct NullRecorder;

impl Recorder for NullRecorder {
    fn record(&self, _batch: &[Record]) -> Result<(), RecordError> {
        Ok(())
    }
}

/// Keeps records in memory (tests).
#[derive(Debug, Default)]
pub struct MemoryRecorder {
    records: Mutex<Vec<Record>>,
}

impl MemoryRecorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of everything recorded so far, in order.
    pub fn records(&self) -> Vec<Record> {
        self.records.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Recorder for MemoryRecorder {
    fn record(&self, batch: &[Record]) -> Result<(), RecordError> {
        let mut records = self.records.lock().map_err(|_| RecordError("the memory recorder is poisoned".into()))?;
        records.extend_from_slice(batch);
        Ok(())
    }
}

/// Payload of `tool.call`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCallPayload {
    /// Payload version (1).
    pub v: u64,
    /// The tool id.
    pub tool: String,
    /// The arguments (scrubbed).
    pub args: Value,
    /// The invocation id (UUIDv7), shared by the call's other events.
    pub invocation_id: Uuid,
    /// The input schema reference: `schema:<id>` as written, or `inline`.
    pub input_schema: String,
    /// BLAKE3 (hex) of the RFC 8785 form of the input schema the arguments
    /// were validated against (the referenced document for a `$ref`).
    pub input_schema_blake3: String,
    /// The tool's `observability.tags`.
    pub tags: Vec<String>,
}

/// The error half of a `tool.result` payload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolError {
    /// What went wrong (scrubbed).
    pub message: String,
    /// A stable class: `tool`, `timeout`, `output_too_large`, `invalid_result`,
    /// `needs_input`, `transport`, `http_status`, `refused`.
    pub kind: String,
    /// Whether the tool said a retry may succeed.
    pub transient: bool,
    /// How long the tool asked to wait before a retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// The HTTP status, for http tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Whether another attempt follows this one.
    #[serde(default)]
    pub will_retry: bool,
}

/// Payload of `tool.result`: exactly one of `result` and `error`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResultPayload {
    /// Payload version (1).
    pub v: u64,
    /// The invocation this attempt belongs to.
    pub invocation_id: Uuid,
    /// The result (scrubbed), on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The error, on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
    /// The attempt number, from 1.
    pub attempt: u32,
    /// Wall time of this attempt in milliseconds.
    pub duration_ms: u64,
}

/// An allow or deny decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Allowed.
    Allow,
    /// Denied.
    Deny,
}

/// Payload of `cap.audit`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapAuditPayload {
    /// Payload version (1).
    pub v: u64,
    /// The tool id.
    pub tool: String,
    /// The capability string, e.g. `net:api.example.com:443`.
    pub capability: String,
    /// allow or deny.
    pub decision: Decision,
    /// Why (which grant allowed it, or what is missing).
    pub reason: String,
    /// The invocation id.
    pub invocation_id: Uuid,
}

/// Payload of `tool.confirm`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolConfirmPayload {
    /// Payload version (1).
    pub v: u64,
    /// The tool id.
    pub tool: String,
    /// The invocation id.
    pub invocation_id: Uuid,
    /// Whether the call may go ahead.
    pub approved: bool,
    /// Who decided (`operator`, `config`).
    pub by: String,
    /// How (`terminal prompt`, `--yes`, `no terminal`, the setting that waived it).
    pub how: String,
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip() {
        for kind in EventKind::ALL {
            assert_eq!(EventKind::parse(kind.as_str()), Some(*kind));
        }
        assert_eq!(EventKind::ToolCall.schema_id(), Some(0x0003));
        assert_eq!(EventKind::ToolResult.schema_id(), Some(0x0004));
        assert_eq!(EventKind::parse("tool.inquiry"), None);
    }

    #[test]
    fn result_payload_has_result_or_error() {
        let id = Uuid::now_v7();
        let ok = ToolResultPayload {
            v: 1,
            invocation_id: id,
            result: Some(serde_json::json!({"a": 1})),
            error: None,
            attempt: 1,
            duration_ms: 3,
        };
        let value = serde_json::to_value(&ok).unwrap();
        assert!(value.get("error").is_none());
        assert_eq!(value["result"]["a"], 1);
        let back: ToolResultPayload = serde_json::from_value(value).unwrap();
        assert_eq!(back, ok);
    }
}
