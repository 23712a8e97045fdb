//! One `tools/call` through the runtime: the call runs on a blocking thread
//! (the runtime is synchronous) while the request's task follows it,
//! turning what happens into MCP: questions for the client
//! ([`Event::Input`]), the outcome ([`Event::Done`]), progress
//! notifications, and cancellation.

use std::sync::mpsc::Sender;

use rmcp::model::{
    CallToolResponse, CallToolResult, InputRequests, InputRequiredResult, InputResponses, ProgressNotificationParam,
    ProgressToken,
};
use rmcp::service::Peer;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use crate::runtime::{CallError, CallErrorKind, CallOutcome, Cancel, Progress, ProgressSink};
use crate::serve::parked::Parked;

/// What a running call tells the request that follows it.
pub(crate) enum Event {
    /// The call asks the client (2026-07-28: end the request with an
    /// `InputRequiredResult`).
    Input(InputRequests),
    /// The call ended.
    Done(Box<Result<CallOutcome, CallError>>),
}

/// A call in flight, as its follower holds it.
pub(crate) struct Pending {
    /// What the call says.
    pub(crate) events: UnboundedReceiver<Event>,
    /// Where the client's answers go (2026-07-28 rounds).
    pub(crate) answers: Option<Sender<InputResponses>>,
    /// Cancels the call.
    pub(crate) cancel: Cancel,
    /// Whether the tool's result is wrapped as `{"result": …}`.
    pub(crate) wrapped: bool,
}

/// Follows `pending` until it ends or asks the client; cancels it when the
/// request is cancelled (and still waits for its cancelled result to be
/// recorded).
pub(crate) async fn follow(
    mut pending: Pending,
    parked: &Parked,
    cancelled: &CancellationToken,
) -> Result<CallToolResponse, ErrorData> {
    let event = tokio::select! {
        event = pending.events.recv() => event,
        () = cancelled.cancelled() => {
            pending.cancel.cancel();
            // The tool is being killed; its result frame is written before
            // the call's thread ends.
            while let Some(event) = pending.events.recv().await {
                if matches!(event, Event::Done(_)) {
                    break;
                }
            }
            return Err(ErrorData::internal_error("the request was cancelled; the call was recorded as cancelled", None));
        }
    };
    match event {
        Some(Event::Done(result)) => outcome(*result, pending.wrapped),
        Some(Event::Input(requests)) => {
            let state = parked
                .park(pending)
                .ok_or_else(|| ErrorData::internal_error("cannot make a requestState: no randomness", None))?;
            Ok(CallToolResponse::InputRequired(InputRequiredResult::new(Some(requests), Some(state))))
        }
        None => Err(ErrorData::internal_error("the call ended without an outcome", None)),
    }
}

/// The `dev.runloop/call` member of a result's `_meta`.
fn call_meta(invocation_id: Option<uuid::Uuid>, trace_id: Option<uuid::Uuid>, attempts: u32, outcome: &str) -> Value {
    json!({
        "dev.runloop/call": {
            "invocation_id": invocation_id,
            "trace_id": trace_id,
            "attempts": attempts,
            "outcome": outcome,
        }
    })
}

/// A call's outcome as MCP: a result (with `isError` for failures the
/// model can act on), or a JSON-RPC error (-32602) for an unknown tool or
/// invalid arguments.
pub(crate) fn outcome(result: Result<CallOutcome, CallError>, wrapped: bool) -> Result<CallToolResponse, ErrorData> {
    let built = match result {
        Ok(done) => {
            let structured = if wrapped { json!({"result": done.result}) } else { done.result };
            let text = serde_json::to_string(&structured).unwrap_or_default();
            json!({
                "resultType": "complete",
                "content": [{"type": "text", "text": text}],
                "structuredContent": structured,
                "isError": false,
                "_meta": call_meta(Some(done.invocation_id), Some(done.trace_id), done.attempts, "ok"),
            })
        }
        Err(e) if matches!(e.kind, CallErrorKind::UnknownTool | CallErrorKind::InvalidInput) => {
            // The runtime's help speaks of command-line flags; the message
            // names the tool and the schema path.
            return Err(ErrorData::invalid_params(
                e.message,
                Some(json!({"invocation_id": e.invocation_id, "trace_id": e.trace_id})),
            ));
        }
        Err(e) => {
            let outcome = if e.kind == CallErrorKind::Refused { "refused" } else { "error" };
            let mut text = e.message.clone();
            if let Some(help) = &e.help {
                text.push_str(&format!("\nhelp: {help}"));
            }
            if let Some(unrecorded) = &e.unrecorded {
                text.push_str(&format!("\noutcome (not recorded): {unrecorded}"));
            }
            json!({
                "resultType": "complete",
                "content": [{"type": "text", "text": text}],
                "isError": true,
                "_meta": call_meta(e.invocation_id, e.trace_id, 0, outcome),
            })
        }
    };
    serde_json::from_value::<CallToolResult>(built)
        .map(CallToolResponse::Complete)
        .map_err(|e| ErrorData::internal_error(format!("cannot build the result: {e}"), None))
}

/// Sends progress notifications for one call (`progressToken` given): two
/// steps per attempt, started and ended.
pub(crate) struct ProgressNotifier {
    pub(crate) peer: Peer<RoleServer>,
    pub(crate) token: ProgressToken,
    pub(crate) handle: tokio::runtime::Handle,
}

impl ProgressSink for ProgressNotifier {
    fn progress(&self, step: Progress) {
        let (progress, total, message) = match step {
            Progress::AttemptStarted { attempt, of } => {
                (2 * attempt - 1, 2 * of, format!("attempt {attempt} of at most {of} started"))
            }
            Progress::AttemptEnded { attempt, of, ok } => {
                let how = if ok { "ended" } else { "failed" };
                (2 * attempt, 2 * of, format!("attempt {attempt} {how}"))
            }
        };
        let params = json!({
            "progressToken": self.token,
            "progress": progress,
            "total": total,
            "message": message,
        });
        let Ok(params) = serde_json::from_value::<ProgressNotificationParam>(params) else { return };
        let peer = self.peer.clone();
        self.handle.spawn(async move {
            let _ = peer.notify_progress(params).await;
        });
    }
}
