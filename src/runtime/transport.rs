//! What the transports share: one attempt's context and its failure.

use std::path::Path;
use std::time::Instant;

use serde_json::{Map, Value};
use uuid::Uuid;

use crate::bundle::capability::SecretId;
use crate::event::{ToolError, Usage};
use crate::runtime::scrub::Scrubber;
use crate::secrets::SecretValue;

/// Everything one attempt of one call needs.
pub(crate) struct Attempt<'a> {
    /// The tool id.
    pub tool: &'a str,
    /// The invocation id.
    pub invocation_id: Uuid,
    /// The trace id.
    pub trace_id: Uuid,
    /// The attempt number, from 1.
    pub number: u32,
    /// The validated arguments (not scrubbed: the tool gets them as given).
    pub arguments: &'a Value,
    /// Every answer to the tool's questions so far, by question id.
    pub answers: &'a Map<String, Value>,
    /// The tool's options (`{}` when it takes none).
    pub options: &'a Map<String, Value>,
    /// When this attempt must end.
    pub deadline: Instant,
    /// The tool's `timeout_ms` (for messages).
    pub timeout_ms: u64,
    /// The same deadline in milliseconds since the Unix epoch (for the tool).
    pub deadline_ms: i64,
    /// The bundle folder (absolute).
    pub root: &'a Path,
    /// The tool's resolved secrets.
    pub secrets: &'a [(SecretId, SecretValue)],
    /// Scrubs those secrets from messages.
    pub scrubber: &'a Scrubber,
    /// Ends the attempt early once cancelled.
    pub cancel: Option<&'a crate::process::cancel::Cancel>,
}

/// What an attempt that did not fail produced.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Reply {
    /// A result (not yet checked against `result_schema`).
    Result {
        /// The result.
        value: Value,
        /// What the attempt consumed, when the tool said (`usage`).
        usage: Option<Usage>,
    },
    /// Questions the tool asks before it can go on (the question objects).
    Questions(Vec<Value>),
}

impl Reply {
    /// A bare result, with no usage.
    pub(crate) fn bare(value: Value) -> Reply {
        Reply::Result { value, usage: None }
    }
}

/// The stable class of a failed attempt, recorded as the `kind` of the
/// result frame's error (see [`ToolError::kind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FailureKind {
    /// The tool reported an error, or exited without a result.
    Tool,
    /// The tool ran past its `timeout_ms`.
    Timeout,
    /// The output exceeded `max_output_bytes`.
    OutputTooLarge,
    /// The result does not match the tool's `result_schema`.
    InvalidResult,
    /// The tool asked a question.
    NeedsInput,
    /// The tool could not be started or reached.
    Transport,
    /// An HTTP status outside 2xx.
    HttpStatus,
    /// A policy check refused it (an ungranted redirect).
    Refused,
    /// The caller cancelled the call.
    Cancelled,
}

impl FailureKind {
    /// The name recorded in the ledger.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FailureKind::Tool => "tool",
            FailureKind::Timeout => "timeout",
            FailureKind::OutputTooLarge => "output_too_large",
            FailureKind::InvalidResult => "invalid_result",
            FailureKind::NeedsInput => "needs_input",
            FailureKind::Transport => "transport",
            FailureKind::HttpStatus => "http_status",
            FailureKind::Refused => "refused",
            FailureKind::Cancelled => "cancelled",
        }
    }
}

/// Why an attempt failed. Messages are already scrubbed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AttemptError {
    /// Its class.
    pub kind: FailureKind,
    /// What went wrong.
    pub message: String,
    /// Whether a retry may succeed.
    pub transient: bool,
    /// How long to wait before a retry.
    pub retry_after_ms: Option<u64>,
    /// The HTTP status, for http tools.
    pub status: Option<u16>,
    /// Whether a policy check refused it (exit 3 rather than 1).
    pub refused: bool,
}

impl AttemptError {
    /// A failure of class `kind`.
    pub(crate) fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        AttemptError {
            kind,
            message: message.into(),
            transient: false,
            retry_after_ms: None,
            status: None,
            refused: false,
        }
    }

    /// Marks it transient, with an optional wait.
    pub(crate) fn transient(mut self, retry_after_ms: Option<u64>) -> Self {
        self.transient = true;
        self.retry_after_ms = retry_after_ms;
        self
    }

    /// Marks it as a policy refusal.
    pub(crate) fn refused(mut self) -> Self {
        self.refused = true;
        self
    }

    /// The error half of the result frame.
    pub(crate) fn to_frame(&self, will_retry: bool) -> ToolError {
        ToolError {
            message: self.message.clone(),
            kind: self.kind.as_str().to_string(),
            transient: self.transient,
            retry_after_ms: self.retry_after_ms,
            status: self.status,
            will_retry,
        }
    }
}
