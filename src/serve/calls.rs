//! One `tools/call` through the runtime: the call runs on a blocking thread
//! (the runtime is synchronous) while the request's task follows it,
//! turning what happens into MCP: questions for the client
//! ([`Event::Input`]), the outcome ([`Event::Done`]), progress and log
//! notifications, and cancellation.

use std::sync::Arc;
use std::sync::mpsc::Sender;

use rmcp::model::{
    CallToolResponse, CallToolResult, InputRequests, InputRequiredResult, InputResponses, ProgressNotificationParam,
    ProgressToken,
};
use rmcp::service::Peer;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio_util::sync::CancellationToken;

use crate::discovery::definition::ResultShape;
use crate::runtime::{CallError, CallErrorKind, CallOutcome, Cancel, Progress, ProgressSink};
use crate::serve::logging::LogThreshold;
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
    /// How the tool's result is answered.
    pub(crate) shape: ResultShape,
    /// Where its progress and log notifications go.
    pub(crate) notifications: Notifications,
}

/// A call ready to run once a call slot (`--max-calls`) is free.
pub(crate) struct Job {
    pub(crate) runtime: Arc<crate::runtime::Runtime>,
    pub(crate) request: crate::runtime::CallRequest,
    pub(crate) context: crate::runtime::CallContext,
    pub(crate) events: UnboundedSender<Event>,
}

impl Job {
    /// Waits for a call slot, then runs the call on a blocking thread; its
    /// outcome goes to the follower as [`Event::Done`].
    pub(crate) async fn start(self, calls: Arc<tokio::sync::Semaphore>) -> Result<(), ErrorData> {
        let permit =
            calls.acquire_owned().await.map_err(|_| ErrorData::internal_error("the server is shutting down", None))?;
        let Job { runtime, request, context, events } = self;
        tokio::task::spawn_blocking(move || {
            let result = runtime.call_in(&request, &context);
            // The progress notifier goes first: its last notification is
            // sent before the outcome is answered.
            drop(context);
            let _ = events.send(Event::Done(Box::new(result)));
            drop(permit);
        });
        Ok(())
    }
}

/// Follows `pending` until it ends or asks the client; cancels it when the
/// request is cancelled or its HTTP client goes away (`gone`), and still
/// waits for its cancelled result to be recorded.
pub(crate) async fn follow(
    mut pending: Pending,
    parked: &Parked,
    cancelled: &CancellationToken,
    gone: Option<&CancellationToken>,
) -> Result<CallToolResponse, ErrorData> {
    let client_gone = async {
        match gone {
            Some(gone) => gone.cancelled().await,
            None => std::future::pending().await,
        }
    };
    let event = tokio::select! {
        event = pending.events.recv() => event,
        () = async { tokio::select! { () = cancelled.cancelled() => (), () = client_gone => () } } => {
            pending.cancel.cancel();
            // A call waiting for the client's answer stops waiting: the
            // session's question is withdrawn (the request's token, which
            // the session asker watches), a round trip's answers will not
            // come (their channel closes).
            cancelled.cancel();
            drop(pending.answers.take());
            // The tool is being killed; its result frame is written before
            // the call's thread ends.
            while let Some(event) = pending.events.recv().await {
                if matches!(event, Event::Done(_)) {
                    break;
                }
            }
            pending.notifications.finish().await;
            return Err(ErrorData::internal_error("the request was cancelled; the call was recorded as cancelled", None));
        }
    };
    match event {
        Some(Event::Done(result)) => {
            let shape = pending.shape;
            // Every notification precedes the response.
            pending.notifications.finish().await;
            outcome(*result, shape)
        }
        Some(Event::Input(requests)) => {
            // The request ends here, its progress token with it: until the
            // client's retry resumes the call, nothing is sent.
            pending.notifications.pause();
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
pub(crate) fn outcome(
    result: Result<CallOutcome, CallError>,
    shape: ResultShape,
) -> Result<CallToolResponse, ErrorData> {
    let built = match result {
        Ok(done) => {
            let meta = call_meta(Some(done.invocation_id), Some(done.trace_id), done.attempts, "ok");
            // A bridged server's content blocks go out as it sent them.
            let (structured, content) = match (shape, done.content) {
                (ResultShape::Object, content) => (Some(done.result), content),
                (ResultShape::Wrapped, content) => (Some(json!({"result": done.result})), content),
                (ResultShape::Content, Some(content)) => (Some(done.result), Some(content)),
                (ResultShape::Content, None) => (None, Some(content_blocks(done.result))),
            };
            let mut content = match (content, &structured) {
                (Some(content), _) => content,
                (None, structured) => {
                    json!([{"type": "text", "text": serde_json::to_string(structured).unwrap_or_default()}])
                }
            };
            // The notes of the operator's hooks follow the result's blocks.
            if let Value::Array(blocks) = &mut content {
                blocks.extend(done.annotations.iter().map(|note| json!({"type": "text", "text": note.text})));
            }
            let mut built = json!({"resultType": "complete", "content": content, "isError": false, "_meta": meta});
            if let Some(structured) = structured {
                built["structuredContent"] = structured;
            }
            return into_response(built);
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
            let outcome = match e.kind {
                CallErrorKind::Refused => "refused",
                CallErrorKind::Withheld => "withheld",
                _ => "error",
            };
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
                "_meta": call_meta(e.invocation_id, e.trace_id, e.attempts, outcome),
            })
        }
    };
    into_response(built)
}

/// A successful result holding `structured` (and its JSON as the one text
/// block), with `meta` as its `_meta`.
pub(crate) fn complete(structured: Value, meta: Value) -> Result<CallToolResponse, ErrorData> {
    let text = serde_json::to_string(&structured).unwrap_or_default();
    into_response(json!({
        "resultType": "complete",
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
        "isError": false,
        "_meta": meta,
    }))
}

/// The content blocks of a bridged tool's result: those its server sent
/// (`{"content": [...]}`, rlp's form of them), else the result's JSON as
/// one text block.
fn content_blocks(result: Value) -> Value {
    match result {
        Value::Object(mut only) if only.len() == 1 && only.get("content").is_some_and(Value::is_array) => {
            only.remove("content").unwrap_or_default()
        }
        other => json!([{"type": "text", "text": serde_json::to_string(&other).unwrap_or_default()}]),
    }
}

/// A built result as the SDK's type.
fn into_response(built: Value) -> Result<CallToolResponse, ErrorData> {
    serde_json::from_value::<CallToolResult>(built)
        .map(CallToolResponse::Complete)
        .map_err(|e| ErrorData::internal_error(format!("cannot build the result: {e}"), None))
}

/// Hears of a call's progress on its blocking thread and hands each step to
/// the call's [`forward_notifications`] task, which sends them in order.
pub(crate) struct ProgressNotifier {
    steps: UnboundedSender<Progress>,
}

impl ProgressSink for ProgressNotifier {
    fn progress(&self, step: Progress) {
        let _ = self.steps.send(step);
    }
}

/// The request a call's notifications go to (its peer, and its progress
/// token when it gave one): the request that started the call, then the
/// retry that resumed it (2026-07-28); none while the call is parked.
type Target = Option<(Peer<RoleServer>, Option<ProgressToken>)>;

/// The sending side of a call's notifications: whom they go to now, and
/// the task that sends them.
pub(crate) struct Notifications {
    target: Arc<std::sync::Mutex<Target>>,
    task: tokio::task::JoinHandle<()>,
}

impl Notifications {
    /// Sends what follows to `peer`'s request, with progress under `token`.
    pub(crate) fn follow(&self, peer: Peer<RoleServer>, token: Option<ProgressToken>) {
        *self.target.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((peer, token));
    }

    /// Sends nothing until the next [`Notifications::follow`].
    fn pause(&self) {
        *self.target.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// Waits until every notification of the ended call is sent.
    pub(crate) async fn finish(self) {
        let _ = self.task.await;
    }
}

/// A notifier for one call, and the task that sends what it hears in
/// order to the request it follows: the log messages of a bridged server
/// that pass the session's `threshold`, and, when the request gave a
/// `progressToken`, progress — two notifications per attempt (started,
/// ended), the server's own reports within them, then one when the call
/// has ended and is recorded (`progress` = `total`). The task ends once
/// the notifier is dropped, which the call does before it ends.
#[allow(deprecated, reason = "logging is deprecated by SEP-2577 and what servers in use today send")]
pub(crate) fn forward_notifications(threshold: Arc<LogThreshold>) -> (ProgressNotifier, Notifications) {
    let target: Arc<std::sync::Mutex<Target>> = Arc::default();
    let current = Arc::clone(&target);
    let (steps, mut received) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let target = || current.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let notify = |progress: f64, total: u32, message: String| {
            let (peer, token) = target()?;
            let params = json!({"progressToken": token?, "progress": progress, "total": total, "message": message});
            Some((peer, serde_json::from_value::<ProgressNotificationParam>(params).ok()?))
        };
        let mut most_attempts = None;
        // Notifications must go up: a server's report that does not is not passed on.
        let mut last = 0.0;
        while let Some(step) = received.recv().await {
            let (progress, of, message) = match step {
                Progress::AttemptStarted { attempt, of } => {
                    (f64::from(2 * attempt - 1), of, format!("attempt {attempt} of at most {of} started"))
                }
                Progress::AttemptEnded { attempt, of, ok } => {
                    (f64::from(2 * attempt), of, format!("attempt {attempt} {}", if ok { "ended" } else { "failed" }))
                }
                // The server's own progress, within the attempt's step.
                Progress::Reported { attempt, progress, total, message } => {
                    let done = match total {
                        Some(total) if total > 0.0 => (progress / total).clamp(0.0, 1.0),
                        _ => 1.0 - 1.0 / (1.0 + progress.max(0.0)),
                    };
                    let said = message.unwrap_or_else(|| format!("the server reports {progress}"));
                    (f64::from(2 * attempt - 1) + 0.9 * done, most_attempts.unwrap_or(attempt), said)
                }
                Progress::Logged { level, logger, data } => {
                    let params = json!({"level": level, "logger": logger, "data": data});
                    let params = serde_json::from_value::<rmcp::model::LoggingMessageNotificationParam>(params);
                    if let (true, Some((peer, _)), Ok(params)) = (threshold.passes(&level), target(), params) {
                        let _ = peer.notify_logging_message(params).await;
                    }
                    continue;
                }
            };
            if progress <= last {
                continue;
            }
            last = progress;
            most_attempts = Some(of);
            if let Some((peer, params)) = notify(progress, 2 * of + 1, message) {
                let _ = peer.notify_progress(params).await;
            }
        }
        if let Some(of) = most_attempts
            && let Some((peer, params)) =
                notify(f64::from(2 * of + 1), 2 * of + 1, "the call ended and is recorded".into())
        {
            let _ = peer.notify_progress(params).await;
        }
    });
    (ProgressNotifier { steps }, Notifications { target, task })
}
