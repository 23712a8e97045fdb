//! Divergences: the ways a replay can differ from its recording.
//!
//! | kind | found by | meaning |
//! |---|---|---|
//! | `missing_tool` | strict, live | a recorded call names a tool the bundle no longer has |
//! | `args_mismatch` | strict, live | the recorded arguments no longer validate against the tool's `input_schema` |
//! | `schema_mismatch` | strict | the recorded result no longer validates against the tool's `result_schema` |
//! | `invalid_trace` | strict, live, source | the trace itself is inconsistent: a result with no waiting call before it, a call with no final result, or a second call for an invocation still waiting |
//! | `result_changed` | live | running the call again gave another outcome than the recorded one (the changes are listed as JSON Pointer paths) |
//! | `extra_call` | source | the agent made a call (tool + canonical arguments) that no recording answers |
//! | `unused_recording` | source | a recorded call was never made by the agent |
//! | `order_divergence` | source | the agent's call matches a recording, but not the next one in recorded order |
//!
//! "source" is [`crate::replay::source::ReplaySource`], the library API that
//! answers an agent's calls from a recording.

use std::fmt;

use serde::Serialize;
use uuid::Uuid;

use crate::replay::diff::Change;

/// The class of a divergence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DivergenceKind {
    /// The bundle has no tool of that id any more.
    MissingTool,
    /// The recorded result does not validate against today's `result_schema`.
    SchemaMismatch,
    /// The recorded arguments do not validate against today's `input_schema`.
    ArgsMismatch,
    /// The agent made a call that no recording answers.
    ExtraCall,
    /// A recording was never asked for.
    UnusedRecording,
    /// A call matched a recording that was not the next one.
    OrderDivergence,
    /// The trace is inconsistent (result without call, call without result).
    InvalidTrace,
    /// A live call gave another outcome than the recorded one.
    ResultChanged,
    /// A tool's `input_schema` or `result_schema` is not the one recorded
    /// (their BLAKE3 differ), even if the data still validates.
    SchemaChanged,
    /// Live: the tool asked a question the recording holds no answer to.
    UnansweredQuestion,
}

impl DivergenceKind {
    /// Every kind, in the order reports list counts.
    pub const ALL: &'static [DivergenceKind] = &[
        DivergenceKind::ArgsMismatch,
        DivergenceKind::ExtraCall,
        DivergenceKind::InvalidTrace,
        DivergenceKind::MissingTool,
        DivergenceKind::OrderDivergence,
        DivergenceKind::ResultChanged,
        DivergenceKind::SchemaChanged,
        DivergenceKind::SchemaMismatch,
        DivergenceKind::UnansweredQuestion,
        DivergenceKind::UnusedRecording,
    ];

    /// The stable name, e.g. `missing_tool`.
    pub fn as_str(self) -> &'static str {
        match self {
            DivergenceKind::MissingTool => "missing_tool",
            DivergenceKind::SchemaMismatch => "schema_mismatch",
            DivergenceKind::ArgsMismatch => "args_mismatch",
            DivergenceKind::ExtraCall => "extra_call",
            DivergenceKind::UnusedRecording => "unused_recording",
            DivergenceKind::OrderDivergence => "order_divergence",
            DivergenceKind::InvalidTrace => "invalid_trace",
            DivergenceKind::ResultChanged => "result_changed",
            DivergenceKind::SchemaChanged => "schema_changed",
            DivergenceKind::UnansweredQuestion => "unanswered_question",
        }
    }
}

impl fmt::Display for DivergenceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One divergence, with where it is and what it concerns.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Divergence {
    /// The class.
    pub kind: DivergenceKind,
    /// The frame's position in the recorded trace (from 1), when one is concerned.
    pub position: Option<u64>,
    /// For [`crate::replay::source::ReplaySource`]: the agent's call number (from 1).
    pub call_number: Option<u64>,
    /// The recorded invocation id, when known.
    pub invocation_id: Option<Uuid>,
    /// The tool id, when known.
    pub tool: Option<String>,
    /// What differs, in one sentence.
    pub message: String,
    /// Supporting lines (schema errors as `<pointer>: <message>`).
    pub details: Vec<String>,
    /// For `result_changed`: what changed, as JSON Pointer paths.
    pub changes: Vec<Change>,
    /// Changes found beyond those listed.
    pub more_changes: u64,
}

impl Divergence {
    /// A divergence at a frame of the recording.
    pub fn at(kind: DivergenceKind, position: u64, message: impl Into<String>) -> Self {
        Divergence {
            kind,
            position: Some(position),
            call_number: None,
            invocation_id: None,
            tool: None,
            message: message.into(),
            details: Vec::new(),
            changes: Vec::new(),
            more_changes: 0,
        }
    }

    /// Sets the invocation and the tool.
    pub fn call(mut self, invocation_id: Option<Uuid>, tool: Option<&str>) -> Self {
        self.invocation_id = invocation_id;
        self.tool = tool.map(str::to_string);
        self
    }

    /// Sets the supporting lines.
    pub fn details(mut self, details: Vec<String>) -> Self {
        self.details = details;
        self
    }
}
