//! How a call fails: [`CallError`] and its class, [`CallErrorKind`].

use std::fmt;
use std::sync::Arc;

use uuid::Uuid;

use crate::error::{Exit, Reportable};
use crate::event::RecordError;

/// How a call failed; the CLI maps each kind to an exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallErrorKind {
    /// No tool with that id (exit 2).
    UnknownTool,
    /// The arguments, options or answers do not fit the tool (exit 2).
    InvalidInput,
    /// The tool asked questions nobody answered (exit 2: pass `--answer`).
    Unanswered,
    /// Refused by policy: capability, secret, confirmation, unsafe header (exit 3).
    Refused,
    /// The tool ran and failed, or its result is invalid (exit 1).
    Tool,
    /// The ledger could not record the call (exit 1).
    Recording,
    /// The caller cancelled the call (exit 1).
    Cancelled,
    /// The tool ran, and an operator's after-call hook withheld its result
    /// (exit 3, a refusal by policy).
    Withheld,
}

impl CallErrorKind {
    /// The exit-code class of docs/cli.md.
    pub fn class(self) -> Exit {
        match self {
            CallErrorKind::UnknownTool | CallErrorKind::InvalidInput | CallErrorKind::Unanswered => Exit::Usage,
            CallErrorKind::Refused | CallErrorKind::Withheld => Exit::Refused,
            CallErrorKind::Tool | CallErrorKind::Recording | CallErrorKind::Cancelled => Exit::Problems,
        }
    }
}

/// A failed call. Messages never contain secret values.
#[derive(Clone, Debug)]
pub struct CallError {
    /// The class.
    pub kind: CallErrorKind,
    /// What went wrong.
    pub message: String,
    /// What to do.
    pub help: Option<String>,
    /// The invocation id, once one was assigned.
    pub invocation_id: Option<Uuid>,
    /// The trace the call was recorded in, once it was recorded.
    pub trace_id: Option<Uuid>,
    /// Attempts made (0 when the call was refused before the tool ran).
    pub attempts: u32,
    /// A tool that ran but whose outcome could not be recorded (kind
    /// [`CallErrorKind::Recording`]): its result, or its error as
    /// `{"error": message}`, scrubbed — so that nobody re-runs a side effect
    /// blindly.
    pub unrecorded: Option<Box<serde_json::Value>>,
    /// The error this one wraps (the ledger's, for a recording failure).
    source: Option<Arc<RecordError>>,
}

impl PartialEq for CallError {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
            && self.message == other.message
            && self.help == other.help
            && self.invocation_id == other.invocation_id
            && self.trace_id == other.trace_id
            && self.attempts == other.attempts
            && self.unrecorded == other.unrecorded
            && self.source.as_deref() == other.source.as_deref()
    }
}

impl Eq for CallError {}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CallError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl Reportable for CallError {
    fn class(&self) -> Exit {
        self.kind.class()
    }

    fn help(&self) -> Option<String> {
        self.help.clone()
    }
}

impl CallError {
    pub(crate) fn new(kind: CallErrorKind, message: impl Into<String>) -> Self {
        CallError {
            kind,
            message: message.into(),
            help: None,
            invocation_id: None,
            trace_id: None,
            attempts: 0,
            unrecorded: None,
            source: None,
        }
    }

    pub(crate) fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Notes the ledger's error this one comes from.
    pub(crate) fn caused_by(mut self, source: RecordError) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// Keeps the error `other` wraps as this one's source.
    pub(crate) fn with_source_of(mut self, other: &CallError) -> Self {
        self.source.clone_from(&other.source);
        self
    }

    /// Names the call it belongs to.
    pub(crate) fn of_call(mut self, invocation_id: Uuid, trace_id: Uuid) -> Self {
        self.invocation_id = Some(invocation_id);
        self.trace_id = Some(trace_id);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes() {
        assert_eq!(CallErrorKind::Refused.class().code(), 3);
        assert_eq!(CallErrorKind::InvalidInput.class().code(), 2);
        assert_eq!(CallErrorKind::UnknownTool.class().code(), 2);
        assert_eq!(CallErrorKind::Tool.class().code(), 1);
    }

    #[test]
    fn a_recording_failure_keeps_the_ledger_error_as_its_source() {
        use std::error::Error;
        let error = CallError::new(CallErrorKind::Recording, "cannot record").caused_by(RecordError::new("disk full"));
        assert_eq!(error.source().map(ToString::to_string).as_deref(), Some("disk full"));
        assert!(CallError::new(CallErrorKind::Tool, "x").source().is_none());
    }
}
