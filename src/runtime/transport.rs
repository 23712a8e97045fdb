//! What the transports share: the [`Plan`] a transport makes of a call,
//! one attempt's request ([`Attempt`]), its reply and its failure; and the
//! dispatch, the one place that knows every transport.
//!
//! A transport is a module with a plan type that implements [`Plan`] and a
//! step of [`Call`] that makes the plan (checked before anyone is asked to
//! confirm); [`Call::dispatch`] names it in one match arm.

use std::time::Instant;

use serde_json::{Map, Value};
use uuid::Uuid;

use crate::bundle::capability::{Capability, SecretId};
use crate::bundle::tools::Transport;
use crate::event::{CommandRecord, Decision, SandboxRecord, ServerRecord, ToolError, Usage};
use crate::runtime::Runtime;
use crate::runtime::call::{Call, CallOutcome};
use crate::runtime::error::{CallError, CallErrorKind};
use crate::runtime::mcp::Conversation;
use crate::runtime::scrub::Scrubber;
use crate::secrets::SecretValue;

/// What a transport makes of one call before it runs: checked, ready to
/// show for confirmation, and run once per attempt.
pub(crate) trait Plan {
    /// Where the call goes, as a confirmation shows it (`METHOD URL`, the
    /// command line).
    fn target(&self) -> String;

    /// The kernel sandbox recorded on the call frame, for a transport that
    /// confines what it starts.
    fn sandbox(&self) -> Option<&SandboxRecord> {
        None
    }

    /// The program named with `${bundle}`, as written and as resolved, for
    /// a transport that starts one.
    fn command_record(&self) -> Option<CommandRecord> {
        None
    }

    /// The MCP server the call goes to, for the mcp transport.
    fn server_record(&self) -> Option<ServerRecord> {
        None
    }

    /// Whether the plan answers from a recording (a replay): nothing to
    /// confirm, nothing retried.
    fn recorded(&self) -> bool {
        false
    }

    /// Runs one attempt; policy decisions made on the way (a redirect's
    /// target) go to `audits`, recorded once the attempt ends.
    fn run(&self, attempt: &Attempt<'_>, audits: &mut Vec<Audit>) -> Result<Reply, AttemptError>;
}

impl<'r> Call<'r> {
    /// Plans the call with its tool's transport, then confirms, records and
    /// runs it ([`Call::execute`]). Each transport is one arm.
    pub(crate) fn dispatch(mut self) -> Result<CallOutcome, CallError> {
        let tool = self.tool();
        match &tool.transport {
            Some(transport @ Transport::Exec { args, .. }) => {
                let plan = self.plan_exec(transport, args)?;
                self.execute(&plan)
            }
            Some(Transport::Http { method, url: Some(template), headers }) => {
                let plan = self.plan_http(method, template, headers)?;
                self.execute(&plan)
            }
            Some(Transport::Mcp { server, tool: name, definition_blake3, .. }) => {
                let plan = self.plan_mcp(server, name, definition_blake3.as_deref())?;
                self.execute(&plan)
            }
            _ => Err(self.journal.refuse(
                CallError::new(CallErrorKind::Tool, format!("tool `{}` has no usable transport", tool.id))
                    .help("fix `transport` in tools.json"),
            )),
        }
    }
}

/// A policy decision a transport made during an attempt, recorded as an
/// audit frame ([`crate::event::EventKind::CapAudit`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Audit {
    /// The capability decided on.
    pub capability: Capability,
    /// allow or deny.
    pub decision: Decision,
    /// Why.
    pub reason: String,
}

/// Everything one attempt of one call needs: the request a transport is
/// handed, built once per attempt from the call.
pub(crate) struct Attempt<'a> {
    /// The runtime (its bundle folder, policy and shared HTTP client).
    pub runtime: &'a Runtime,
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
    /// The tool's resolved secrets.
    pub secrets: &'a [(SecretId, SecretValue)],
    /// Scrubs those secrets from messages.
    pub scrubber: &'a Scrubber,
    /// Ends the attempt early once cancelled.
    pub cancel: Option<&'a crate::process::cancel::Cancel>,
    /// Hears of the progress a server reports.
    pub progress: Option<&'a std::sync::Arc<dyn crate::runtime::context::ProgressSink>>,
    /// The caller's W3C `traceparent`, passed on to an MCP server.
    pub traceparent: Option<&'a str>,
}

/// What an attempt that did not fail produced.
#[derive(Debug, PartialEq)]
pub(crate) enum Reply {
    /// A result (not yet checked against `result_schema`).
    Result {
        /// The result.
        value: Value,
        /// What the attempt consumed, when the tool said (`usage`).
        usage: Option<Usage>,
    },
    /// An MCP server's `structuredContent` (the result, not yet checked)
    /// with the content blocks it sent beside it, as sent.
    Structured {
        /// The structured result.
        value: Value,
        /// The content blocks.
        content: Vec<Value>,
    },
    /// Questions the tool asks before it can go on (the question objects).
    Questions(Vec<Value>),
    /// An MCP server asks something while the attempt goes on: answered by
    /// the call, after which the attempt waits on.
    Asks(Box<Conversation>),
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
    /// Under a replay, no recording answers the call.
    NotRecorded,
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
            FailureKind::NotRecorded => "not_recorded",
        }
    }

    /// The kind a result frame names (`tool` for one this rlp does not know).
    pub(crate) fn parse(name: &str) -> FailureKind {
        [
            FailureKind::Timeout,
            FailureKind::OutputTooLarge,
            FailureKind::InvalidResult,
            FailureKind::NeedsInput,
            FailureKind::Transport,
            FailureKind::HttpStatus,
            FailureKind::Refused,
            FailureKind::Cancelled,
            FailureKind::NotRecorded,
        ]
        .into_iter()
        .find(|kind| kind.as_str() == name)
        .unwrap_or(FailureKind::Tool)
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
