//! Live replay: running recorded calls again through the full runtime
//! (exposure, input validation, secrets, confirmation, transports, result
//! validation), recorded as a new trace linked to the old one.
//!
//! The new trace starts with a replay link frame
//! ([`EventKind::TraceReplay`], payload [`ReplayLinkPayload`]: the recorded
//! trace, mode `live`, the recorded agent), actor `operator`, followed by the
//! frames of every call run again, all under the new trace id. A bridged
//! tool's content blocks are compared as the ledger records them (binary
//! data past a bound by digest). Exchanges with bridged servers are not run
//! again: they belong to no call.

use std::sync::Arc;

use serde_json::Value;
use uuid::Uuid;

use crate::event::{EventKind, Outcome, PAYLOAD_VERSION, Record, RecordedError, Recorder, ReplayLinkPayload};
use crate::replay::replayer::{CallOutput, Executor, Fresh, Mode, RecordedCall, ReplayError};
use crate::runtime::asking::answer::AnswerSource;
use crate::runtime::mcp::content;
use crate::runtime::{CallErrorKind, CallRequest, Runtime};

/// Runs calls through a [`Runtime`] into a new trace.
pub(crate) struct LiveExecutor<'a> {
    runtime: &'a Runtime,
    recorder: Arc<dyn Recorder>,
    new_trace: Uuid,
}

impl std::fmt::Debug for LiveExecutor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveExecutor")
            .field("agent", &self.runtime.agent())
            .field("new_trace", &self.new_trace)
            .finish()
    }
}

impl<'a> LiveExecutor<'a> {
    /// An executor over `runtime`; the link frame goes to `recorder` (the
    /// same ledger the runtime records into).
    pub(crate) fn new(runtime: &'a Runtime, recorder: Arc<dyn Recorder>) -> Self {
        LiveExecutor { runtime, recorder, new_trace: Uuid::now_v7() }
    }

    /// The trace the new calls are recorded in.
    pub(crate) fn trace_id(&self) -> Uuid {
        self.new_trace
    }
}

impl Executor for LiveExecutor<'_> {
    fn begin(&mut self, recorded_trace: Uuid, agent: &str) -> Result<(), ReplayError> {
        self.runtime.check_trust(self.new_trace).map_err(|e| ReplayError::Refused {
            position: 1,
            message: e.message,
            help: e.help,
        })?;
        let link = ReplayLinkPayload {
            v: PAYLOAD_VERSION,
            replay_of: recorded_trace,
            mode: Mode::Live.as_str().into(),
            recorded_agent: agent.into(),
        };
        let payload = serde_json::to_value(link).unwrap_or(Value::Null);
        let record = Record::now(EventKind::TraceReplay, "operator", self.runtime.agent(), self.new_trace, payload);
        self.recorder.record(&[record]).map_err(|e| ReplayError::Failed {
            position: 1,
            message: format!("cannot record the start of the replay: {e}"),
            help: Some("check that the ledger named above can be written".into()),
        })
    }

    fn execute(&mut self, position: u64, call: &RecordedCall<'_>) -> Result<Fresh, ReplayError> {
        let mut request = CallRequest::new(call.tool, call.args.clone());
        request.trace_id = Some(self.new_trace);
        request.answers = call.answers.clone();
        request.answer_source = AnswerSource::Replay;
        match self.runtime.call(&request) {
            Ok(outcome) => Ok(Fresh::Ran(CallOutput {
                outcome: Outcome::Result(outcome.result),
                content: outcome
                    .content
                    .as_ref()
                    .and_then(Value::as_array)
                    .map(|blocks| content::recorded_blocks(blocks)),
                annotations: outcome.annotations.into_iter().map(|note| note.text).collect(),
            })),
            Err(e) => match e.kind {
                CallErrorKind::Refused => Err(ReplayError::Refused { position, message: e.message, help: e.help }),
                CallErrorKind::Recording => Err(ReplayError::Failed { position, message: e.message, help: e.help }),
                CallErrorKind::Unanswered => Ok(Fresh::Unanswered(e.message)),
                CallErrorKind::Tool
                | CallErrorKind::Withheld
                | CallErrorKind::Cancelled
                | CallErrorKind::UnknownTool
                | CallErrorKind::InvalidInput => {
                    Ok(Fresh::Ran(CallOutput::bare(Outcome::Error(RecordedError::from_message(e.message)))))
                }
            },
        }
    }

    fn new_trace_id(&self) -> Option<Uuid> {
        Some(self.new_trace)
    }
}
