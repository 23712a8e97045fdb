//! The span of one invocation: [`span`] turns the frames of one call — its
//! audits, confirmation, questions and answers, call, and the result of
//! every attempt — into one `execute_tool {tool id}` span after the
//! OpenTelemetry GenAI semantic conventions. Live spans and `rlp trace
//! export --otlp` both come from it, so the same frames give the same span
//! (the same ids, times, attributes and events).
//!
//! Frames may come from a hand-edited export: every value is read as it
//! is, a `traceparent` that is not well formed is ignored, times are
//! clamped to what a span can carry, text attributes are cut at
//! [`MAX_TEXT`] characters and events at [`MAX_EVENTS`].

use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{Event, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState};
use opentelemetry::{Array, InstrumentationScope, KeyValue, StringValue, Value};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use serde::Serialize;
use uuid::Uuid;

use crate::event::traceparent::TraceParent;
use crate::event::{Outcome, Payload, ToolCallPayload, ToolResultPayload};

/// Characters a text attribute keeps at most (longer text is cut, `…`
/// marking the cut): arguments and results included.
pub(crate) const MAX_TEXT: usize = 32_768;
/// Events a span keeps at most (the SDK's default limit); the rest are
/// counted as dropped.
pub(crate) const MAX_EVENTS: usize = 128;
/// The latest time a span can carry (nanoseconds since the Unix epoch in 64
/// bits), in milliseconds.
const MAX_TS_MS: i64 = (u64::MAX / 1_000_000) as i64;
/// `error.type` of a call refused because a capability (or the trust
/// policy, the sandbox, a budget, a secret) was denied: a `cap.audit` deny.
pub(crate) const CAPABILITY_DENIED: &str = "capability_denied";
/// `error.type` of a call that needed confirmation and was not approved.
pub(crate) const NOT_CONFIRMED: &str = "not_confirmed";
/// `error.type` of a call that stopped before it ran for a reason its
/// frames do not name (arguments or options that do not fit, a refused
/// header, a missing program): the conventions' fallback.
pub(crate) const OTHER_ERROR: &str = "_OTHER";

/// One frame of an invocation, as the span reads it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Frame {
    /// When it was recorded (ms since the Unix epoch).
    pub ts_ms: i64,
    /// What it records.
    pub body: Payload,
}

/// The frames of one invocation, in the order they were recorded.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Invocation {
    /// rlp's trace the invocation belongs to.
    pub trace_id: Uuid,
    /// The invocation id its frames share.
    pub invocation_id: Uuid,
    /// The agent (bundle name) that made it.
    pub agent: String,
    /// Its frames.
    pub frames: Vec<Frame>,
}

/// What a span carries besides its frames.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SpanOptions<'a> {
    /// Whether arguments, results, messages, questions and answers are
    /// exported (`RLP_OTEL_CAPTURE_CONTENT`).
    pub capture_content: bool,
    /// The bundle's version, when known (live spans).
    pub bundle_version: Option<&'a str>,
}

/// How the invocation ended, as its frames say.
enum Ending<'a> {
    /// Its last result.
    Finished(&'a ToolResultPayload),
    /// Refused before its call frame: the error type, and the deny reason
    /// or how confirmation was refused.
    Refused(&'static str, &'a str),
    /// Stopped before its call frame, no frame saying why.
    NotRun,
    /// A call frame without a result (the process was stopped mid-call).
    Unfinished,
}

/// The span of `invocation`.
pub(crate) fn span(invocation: &Invocation, options: &SpanOptions<'_>) -> SpanData {
    let frames = &invocation.frames;
    let call = frames.iter().find_map(|f| match &f.body {
        Payload::ToolCall(call) => Some(call),
        _ => None,
    });
    let results: Vec<&ToolResultPayload> = frames
        .iter()
        .filter_map(|f| match &f.body {
            Payload::ToolResult(result) => Some(result),
            _ => None,
        })
        .collect();
    let ending = match (results.last(), call) {
        (Some(last), _) => Ending::Finished(last),
        (None, Some(_)) => Ending::Unfinished,
        (None, None) => refusal(frames),
    };
    let tool = call.map(|c| c.tool.as_str()).filter(|t| !t.is_empty()).or_else(|| frames.iter().find_map(tool_of));
    let parent = call
        .and_then(|c| c.traceparent.as_deref())
        .or_else(|| results.iter().find_map(|r| r.traceparent.as_deref()))
        .and_then(TraceParent::parse);
    let (trace_id, parent_span_id) = match parent {
        Some(parent) => (TraceId::from_bytes(parent.trace_id), SpanId::from_bytes(parent.parent_id)),
        None => (TraceId::from_bytes(*invocation.trace_id.as_bytes()), SpanId::INVALID),
    };

    let (outcome, error) = match &ending {
        Ending::Finished(result) => match &result.outcome {
            Outcome::Result(_) => ("ok", None),
            Outcome::Error(e) => {
                let kind = if e.error.kind.is_empty() { OTHER_ERROR } else { e.error.kind.as_str() };
                (if kind == "refused" { "refused" } else { "error" }, Some((kind, e.error.message.as_str())))
            }
        },
        Ending::Refused(kind, why) => ("refused", Some((*kind, *why))),
        Ending::NotRun => ("error", Some((OTHER_ERROR, ""))),
        Ending::Unfinished => ("unfinished", None),
    };

    let mut attributes = vec![
        KeyValue::new("gen_ai.operation.name", "execute_tool"),
        KeyValue::new("gen_ai.tool.call.id", invocation.invocation_id.to_string()),
        // rlp runs the tool on the caller's side of the model, with
        // arguments the model wrote: a "function" in the conventions'
        // terms (not an agent-side "extension" or a "datastore").
        KeyValue::new("gen_ai.tool.type", "function"),
    ];
    if let Some(tool) = tool {
        attributes.push(KeyValue::new("gen_ai.tool.name", text(tool)));
    }
    if let Some((kind, _)) = error {
        attributes.push(KeyValue::new("error.type", text(kind)));
    }
    attributes.push(KeyValue::new("rlp.agent", text(&invocation.agent)));
    attributes.push(KeyValue::new("rlp.trace_id", invocation.trace_id.to_string()));
    let last = match &ending {
        Ending::Finished(result) => Some(*result),
        _ => None,
    };
    attributes.push(KeyValue::new("rlp.attempt", count(last.map_or(0, |r| r.attempt))));
    attributes.push(KeyValue::new("rlp.outcome", outcome));
    if let Some(version) = options.bundle_version {
        attributes.push(KeyValue::new("rlp.bundle.version", text(version)));
    }
    if let Some(ms) = last.and_then(|r| r.duration_ms) {
        attributes.push(KeyValue::new("rlp.duration_ms", count(ms)));
    }
    let tags = frames.iter().map(|f| tags_of(&f.body)).find(|tags| !tags.is_empty()).unwrap_or_default();
    if !tags.is_empty() {
        attributes.push(KeyValue::new("rlp.tags", texts(tags.iter().map(String::as_str))));
    }
    if options.capture_content {
        if let Some(call) = call {
            attributes.push(KeyValue::new("gen_ai.tool.call.arguments", json(&call.args)));
        }
        if let Some(ToolResultPayload { outcome: Outcome::Result(value), .. }) = last {
            attributes.push(KeyValue::new("gen_ai.tool.call.result", json(value)));
        }
    }

    let status = match error {
        Some((_, message)) if options.capture_content && !message.is_empty() => {
            Status::Error { description: Cow::Owned(text(message)) }
        }
        Some((kind, _)) => Status::Error { description: Cow::Owned(text(kind)) },
        None => Status::Unset,
    };

    let mut events = SpanEvents::default();
    let earlier_results = results.len().saturating_sub(1);
    let mut results_seen = 0;
    for frame in frames {
        let event = match &frame.body {
            Payload::ToolResult(_) if results_seen >= earlier_results => None,
            Payload::ToolResult(result) => {
                results_seen += 1;
                Some(retry_event(result, options))
            }
            body => event_of(body, options),
        };
        let Some((name, attributes)) = event else { continue };
        if events.events.len() < MAX_EVENTS {
            events.events.push(Event::new(name, time(frame.ts_ms), attributes, 0));
        } else {
            events.dropped_count = events.dropped_count.saturating_add(1);
        }
    }

    let start = frames.iter().map(|f| f.ts_ms).min().unwrap_or(0);
    let end = frames.iter().map(|f| f.ts_ms).max().unwrap_or(0);
    SpanData {
        span_context: SpanContext::new(
            trace_id,
            span_id(invocation.invocation_id),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id,
        parent_span_is_remote: parent.is_some(),
        span_kind: SpanKind::Internal,
        name: Cow::Owned(match tool {
            Some(tool) => format!("execute_tool {}", text(tool)),
            None => "execute_tool".to_string(),
        }),
        start_time: time(start),
        end_time: time(end),
        attributes,
        dropped_attributes_count: 0,
        events,
        links: SpanLinks::default(),
        status,
        instrumentation_scope: InstrumentationScope::builder("rlp").with_version(env!("CARGO_PKG_VERSION")).build(),
    }
}

/// The span id of invocation `id`: the first 8 bytes of the BLAKE3 hash of
/// its 16 bytes (never all zero), so a span exported again keeps its id.
pub(crate) fn span_id(id: Uuid) -> SpanId {
    let hash = blake3::hash(id.as_bytes());
    let mut bytes = [0; 8];
    bytes.copy_from_slice(&hash.as_bytes()[..8]);
    if bytes == [0; 8] {
        bytes[7] = 1;
    }
    SpanId::from_bytes(bytes)
}

/// Why an invocation without a call frame ended: a deny audit, else a
/// confirmation that was not approved, else nothing its frames say.
fn refusal(frames: &[Frame]) -> Ending<'_> {
    let denied = frames.iter().find_map(|f| match &f.body {
        Payload::CapAudit(audit) if audit.decision == crate::event::Decision::Deny => Some(audit.reason.as_str()),
        _ => None,
    });
    let unconfirmed = || {
        frames.iter().find_map(|f| match &f.body {
            Payload::ToolConfirm(confirm) if !confirm.approved => Some(confirm.how.as_str()),
            _ => None,
        })
    };
    match (denied, unconfirmed()) {
        (Some(reason), _) => Ending::Refused(CAPABILITY_DENIED, reason),
        (None, Some(how)) => Ending::Refused(NOT_CONFIRMED, how),
        (None, None) => Ending::NotRun,
    }
}

/// The tool a frame names, if it names one.
fn tool_of(frame: &Frame) -> Option<&str> {
    let tool = match &frame.body {
        Payload::ToolCall(ToolCallPayload { tool, .. }) | Payload::ToolResult(ToolResultPayload { tool, .. }) => tool,
        Payload::CapAudit(audit) => &audit.tool,
        Payload::ToolConfirm(confirm) => &confirm.tool,
        Payload::ToolInquiry(inquiry) => &inquiry.tool,
        Payload::ToolAnswer(answer) => &answer.tool,
        Payload::ToolSample(sample) => &sample.tool,
        Payload::ToolHook(hook) => &hook.tool,
        _ => return None,
    };
    Some(tool.as_str()).filter(|t| !t.is_empty())
}

/// The call's tags as a frame records them.
fn tags_of(body: &Payload) -> &[String] {
    match body {
        Payload::ToolCall(call) => &call.tags,
        Payload::ToolResult(result) => &result.tags,
        Payload::CapAudit(audit) => &audit.tags,
        Payload::ToolConfirm(confirm) => &confirm.tags,
        Payload::ToolInquiry(inquiry) => &inquiry.tags,
        Payload::ToolAnswer(answer) => &answer.tags,
        Payload::ToolSample(sample) => &sample.tags,
        Payload::ToolHook(hook) => &hook.tags,
        _ => &[],
    }
}

/// The event of an attempt that another one followed: `rlp.retry`.
fn retry_event(result: &ToolResultPayload, options: &SpanOptions<'_>) -> (&'static str, Vec<KeyValue>) {
    let mut attributes = vec![KeyValue::new("rlp.attempt", count(result.attempt))];
    if let Outcome::Error(e) = &result.outcome {
        let kind = if e.error.kind.is_empty() { OTHER_ERROR } else { e.error.kind.as_str() };
        attributes.push(KeyValue::new("error.type", text(kind)));
        if let Some(ms) = e.error.retry_after_ms {
            attributes.push(KeyValue::new("rlp.retry_after_ms", count(ms)));
        }
        if options.capture_content {
            attributes.push(KeyValue::new("rlp.error.message", text(&e.error.message)));
        }
    }
    if let Some(ms) = result.duration_ms {
        attributes.push(KeyValue::new("rlp.duration_ms", count(ms)));
    }
    ("rlp.retry", attributes)
}

/// The event of a frame other than a call or a result.
fn event_of(body: &Payload, options: &SpanOptions<'_>) -> Option<(&'static str, Vec<KeyValue>)> {
    let capture = options.capture_content;
    match body {
        Payload::CapAudit(audit) => {
            let mut attributes = vec![
                KeyValue::new("rlp.capability", text(&audit.capability)),
                KeyValue::new("rlp.decision", audit.decision.as_str()),
            ];
            if let Some(provider) = &audit.provider {
                attributes.push(KeyValue::new("rlp.provider", text(provider)));
            }
            if capture {
                attributes.push(KeyValue::new("rlp.reason", text(&audit.reason)));
            }
            Some(("rlp.capability", attributes))
        }
        Payload::ToolConfirm(confirm) => Some((
            "rlp.confirmation",
            vec![
                KeyValue::new("rlp.approved", confirm.approved),
                KeyValue::new("rlp.by", text(&confirm.by)),
                KeyValue::new("rlp.how", text(&confirm.how)),
            ],
        )),
        Payload::ToolInquiry(inquiry) => {
            let ids = inquiry.questions.iter().filter_map(|q| q.get("id").and_then(serde_json::Value::as_str));
            let mut attributes = vec![
                KeyValue::new("rlp.attempt", count(inquiry.attempt)),
                KeyValue::new("rlp.question.count", count(inquiry.questions.len() as u64)),
                KeyValue::new("rlp.question.ids", texts(ids)),
            ];
            if capture {
                attributes.push(KeyValue::new("rlp.questions", json(&inquiry.questions)));
            }
            Some(("rlp.question", attributes))
        }
        Payload::ToolAnswer(answer) => {
            let mut attributes = vec![
                KeyValue::new("rlp.attempt", count(answer.attempt)),
                KeyValue::new("rlp.answer.count", count(answer.answers.len() as u64)),
                KeyValue::new("rlp.answer.ids", texts(answer.answers.iter().map(|a| a.id.as_str()))),
                KeyValue::new("rlp.answer.sources", texts(answer.answers.iter().map(|a| a.source.as_str()))),
            ];
            if capture {
                attributes.push(KeyValue::new("rlp.answers", json(&answer.answers)));
            }
            Some(("rlp.answer", attributes))
        }
        Payload::ToolSample(sample) => {
            let mut attributes =
                vec![KeyValue::new("rlp.attempt", count(sample.attempt)), KeyValue::new("rlp.relayed", sample.relayed)];
            if capture {
                attributes.push(KeyValue::new("rlp.request", json(&sample.request)));
            }
            Some(("rlp.sampling", attributes))
        }
        Payload::ToolHook(hook) => {
            let mut attributes = vec![
                KeyValue::new("rlp.hook", text(&hook.hook)),
                KeyValue::new("rlp.hook.effect", text(hook.effect.as_str())),
            ];
            if capture {
                attributes.extend(hook.result.as_ref().map(|result| KeyValue::new("rlp.result", json(result))));
                if let Some(reason) = &hook.reason {
                    attributes.push(KeyValue::new("rlp.hook.reason", text(reason)));
                }
            }
            Some(("rlp.hook", attributes))
        }
        _ => None,
    }
}

/// `ts_ms` as a time a span can carry: clamped to the Unix epoch and the
/// last millisecond 64 bits of nanoseconds reach.
fn time(ts_ms: i64) -> SystemTime {
    let ms = u64::try_from(ts_ms.clamp(0, MAX_TS_MS)).unwrap_or_default();
    UNIX_EPOCH.checked_add(Duration::from_millis(ms)).unwrap_or(UNIX_EPOCH)
}

/// A whole number as an attribute (saturating at `i64::MAX`).
fn count(n: u64) -> Value {
    Value::I64(i64::try_from(n).unwrap_or(i64::MAX))
}

/// Text as an attribute value, cut at [`MAX_TEXT`] characters.
fn text(value: &str) -> String {
    crate::text::ellipsize(value, MAX_TEXT)
}

/// Texts as a string-array attribute, each cut at [`MAX_TEXT`] characters
/// (at most [`MAX_EVENTS`] of them).
fn texts<'a>(values: impl Iterator<Item = &'a str>) -> Value {
    Value::Array(Array::String(values.take(MAX_EVENTS).map(|v| StringValue::from(text(v))).collect()))
}

/// A value as compact JSON text, cut at [`MAX_TEXT`] characters.
fn json(value: &impl Serialize) -> String {
    text(&serde_json::to_string(value).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventKind;
    use serde_json::json;

    const TRACE: Uuid = Uuid::from_u128(0x0197b0ff_0000_7000_8000_00000000c0de);
    const INVOCATION: Uuid = Uuid::from_u128(0x0197b0ff_0000_7000_8000_000000000001);
    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn frame(ts_ms: i64, kind: EventKind, payload: serde_json::Value) -> Frame {
        let mut payload = payload;
        payload["invocation_id"] = json!(INVOCATION);
        Frame { ts_ms, body: Payload::read(kind, payload).unwrap() }
    }

    fn invocation(frames: Vec<Frame>) -> Invocation {
        Invocation { trace_id: TRACE, invocation_id: INVOCATION, agent: "mailer".into(), frames }
    }

    fn build(frames: Vec<Frame>, capture_content: bool) -> SpanData {
        span(&invocation(frames), &SpanOptions { capture_content, bundle_version: Some("1.2.0") })
    }

    fn attribute(span: &SpanData, key: &str) -> Option<Value> {
        span.attributes.iter().find(|kv| kv.key.as_str() == key).map(|kv| kv.value.clone())
    }

    fn keys(attributes: &[KeyValue]) -> Vec<&str> {
        attributes.iter().map(|kv| kv.key.as_str()).collect()
    }

    fn audit(decision: &str) -> serde_json::Value {
        json!({"tool": "mail.send", "capability": "net:api.mail.example:443", "decision": decision,
               "reason": "granted by policy.caps", "tags": ["team=mail"]})
    }

    fn call(args: serde_json::Value) -> serde_json::Value {
        json!({"tool": "mail.send", "args": args, "tags": ["team=mail"]})
    }

    #[test]
    fn a_successful_call_is_an_execute_tool_span() {
        let span = build(
            vec![
                frame(1_000, EventKind::CapAudit, audit("allow")),
                frame(1_001, EventKind::ToolCall, call(json!({"to": "a@b.c"}))),
                frame(
                    1_250,
                    EventKind::ToolResult,
                    json!({"tool": "mail.send", "result": {"sent": true}, "attempt": 1, "duration_ms": 248}),
                ),
            ],
            false,
        );
        assert_eq!(span.name, "execute_tool mail.send");
        assert_eq!(span.span_kind, SpanKind::Internal);
        assert_eq!(span.span_context.trace_id(), TraceId::from_bytes(*TRACE.as_bytes()));
        assert_eq!(span.span_context.span_id(), span_id(INVOCATION));
        assert_eq!(span.parent_span_id, SpanId::INVALID);
        assert_eq!((span.start_time, span.end_time), (time(1_000), time(1_250)));
        assert_eq!(span.status, Status::Unset);
        assert_eq!(
            keys(&span.attributes),
            [
                "gen_ai.operation.name",
                "gen_ai.tool.call.id",
                "gen_ai.tool.type",
                "gen_ai.tool.name",
                "rlp.agent",
                "rlp.trace_id",
                "rlp.attempt",
                "rlp.outcome",
                "rlp.bundle.version",
                "rlp.duration_ms",
                "rlp.tags",
            ]
        );
        assert_eq!(attribute(&span, "gen_ai.tool.call.id"), Some(Value::from(INVOCATION.to_string())));
        assert_eq!(attribute(&span, "rlp.outcome"), Some(Value::from("ok")));
        assert_eq!(attribute(&span, "rlp.duration_ms"), Some(Value::I64(248)));
        assert_eq!(attribute(&span, "rlp.tags"), Some(Value::Array(vec![StringValue::from("team=mail")].into())));
        assert_eq!(span.events.len(), 1);
        assert_eq!(span.events[0].name, "rlp.capability");
        assert_eq!(keys(&span.events[0].attributes), ["rlp.capability", "rlp.decision"]);
    }

    #[test]
    fn content_and_messages_only_with_capture() {
        let frames = vec![
            frame(1, EventKind::ToolCall, call(json!({"to": "a@b.c"}))),
            frame(
                2,
                EventKind::ToolResult,
                json!({"error": {"message": "busy", "kind": "tool", "transient": true, "retry_after_ms": 10, "will_retry": true}, "attempt": 1}),
            ),
            frame(
                3,
                EventKind::ToolResult,
                json!({"error": {"message": "mailbox full", "kind": "tool"}, "attempt": 2}),
            ),
        ];
        let plain = build(frames.clone(), false);
        assert_eq!(attribute(&plain, "error.type"), Some(Value::from("tool")));
        assert_eq!(attribute(&plain, "rlp.outcome"), Some(Value::from("error")));
        assert_eq!(attribute(&plain, "rlp.attempt"), Some(Value::I64(2)));
        assert_eq!(plain.status, Status::error("tool"));
        assert_eq!(attribute(&plain, "gen_ai.tool.call.arguments"), None);
        assert_eq!(plain.events.len(), 1);
        assert_eq!(plain.events[0].name, "rlp.retry");
        assert_eq!(keys(&plain.events[0].attributes), ["rlp.attempt", "error.type", "rlp.retry_after_ms"]);
        let captured = build(frames, true);
        assert_eq!(captured.status, Status::error("mailbox full"));
        assert_eq!(attribute(&captured, "gen_ai.tool.call.arguments"), Some(Value::from(r#"{"to":"a@b.c"}"#)));
        assert_eq!(
            keys(&captured.events[0].attributes),
            ["rlp.attempt", "error.type", "rlp.retry_after_ms", "rlp.error.message"]
        );
        let ok = build(
            vec![
                frame(1, EventKind::ToolCall, call(json!({}))),
                frame(2, EventKind::ToolResult, json!({"result": [1]})),
            ],
            true,
        );
        assert_eq!(attribute(&ok, "gen_ai.tool.call.result"), Some(Value::from("[1]")));
    }

    #[test]
    fn refusals_carry_their_kind() {
        let denied = build(vec![frame(5, EventKind::CapAudit, audit("deny"))], false);
        assert_eq!(denied.name, "execute_tool mail.send");
        assert_eq!(attribute(&denied, "error.type"), Some(Value::from(CAPABILITY_DENIED)));
        assert_eq!(attribute(&denied, "rlp.outcome"), Some(Value::from("refused")));
        assert_eq!(attribute(&denied, "rlp.attempt"), Some(Value::I64(0)));
        assert_eq!(denied.status, Status::error(CAPABILITY_DENIED));
        assert_eq!(denied.events[0].attributes[1], KeyValue::new("rlp.decision", "deny"));
        let unconfirmed = build(
            vec![frame(
                5,
                EventKind::ToolConfirm,
                json!({"tool": "mail.send", "approved": false, "by": "operator", "how": "no terminal"}),
            )],
            true,
        );
        assert_eq!(attribute(&unconfirmed, "error.type"), Some(Value::from(NOT_CONFIRMED)));
        assert_eq!(unconfirmed.status, Status::error("no terminal"));
        let stopped = build(vec![frame(5, EventKind::CapAudit, audit("allow"))], false);
        assert_eq!(attribute(&stopped, "error.type"), Some(Value::from(OTHER_ERROR)));
        assert_eq!(attribute(&stopped, "rlp.outcome"), Some(Value::from("error")));
        let redirect = build(
            vec![
                frame(1, EventKind::ToolCall, call(json!({}))),
                frame(2, EventKind::ToolResult, json!({"error": {"message": "m", "kind": "refused"}})),
            ],
            false,
        );
        assert_eq!(attribute(&redirect, "rlp.outcome"), Some(Value::from("refused")));
        let unfinished = build(vec![frame(1, EventKind::ToolCall, call(json!({})))], false);
        assert_eq!(attribute(&unfinished, "rlp.outcome"), Some(Value::from("unfinished")));
        assert_eq!(attribute(&unfinished, "error.type"), None);
    }

    #[test]
    fn a_traceparent_makes_the_caller_the_parent() {
        let mut with_parent = call(json!({}));
        with_parent["traceparent"] = json!(PARENT);
        let span = build(vec![frame(1, EventKind::ToolCall, with_parent)], false);
        assert_eq!(span.span_context.trace_id(), TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap());
        assert_eq!(span.parent_span_id, SpanId::from_hex("00f067aa0ba902b7").unwrap());
        assert!(span.parent_span_is_remote);
        for hostile in ["00-zz", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "\u{0}\u{202e}", ""] {
            let mut odd = call(json!({}));
            odd["traceparent"] = json!(hostile);
            let span = build(vec![frame(1, EventKind::ToolCall, odd)], false);
            assert_eq!(span.span_context.trace_id(), TraceId::from_bytes(*TRACE.as_bytes()), "{hostile:?}");
            assert_eq!(span.parent_span_id, SpanId::INVALID);
        }
    }

    #[test]
    fn hostile_frames_make_a_bounded_span() {
        let huge = "x".repeat(MAX_TEXT * 3);
        let mut frames = vec![frame(i64::MIN, EventKind::ToolCall, json!({"tool": huge, "args": {"a": huge}}))];
        for _ in 0..MAX_EVENTS + 5 {
            frames.push(frame(
                i64::MAX,
                EventKind::CapAudit,
                json!({"tool": "t", "capability": huge, "decision": "allow"}),
            ));
        }
        let span = build(frames, true);
        assert_eq!(span.start_time, UNIX_EPOCH);
        assert_eq!(span.end_time, time(MAX_TS_MS));
        assert!(span.name.chars().count() <= MAX_TEXT + "execute_tool ".len());
        assert_eq!((span.events.len(), span.events.dropped_count), (MAX_EVENTS, 5));
        let Some(Value::String(arguments)) = attribute(&span, "gen_ai.tool.call.arguments") else { panic!() };
        assert_eq!(arguments.as_str().chars().count(), MAX_TEXT);
    }

    #[test]
    fn questions_and_answers_are_counted_and_their_values_kept_out() {
        let span = build(
            vec![
                frame(1, EventKind::ToolCall, call(json!({}))),
                frame(
                    2,
                    EventKind::ToolInquiry,
                    json!({"tool": "mail.send", "attempt": 1, "questions": [{"id": "tone", "text": "Which?"}]}),
                ),
                frame(
                    3,
                    EventKind::ToolAnswer,
                    json!({"tool": "mail.send", "attempt": 1, "answers": [{"id": "tone", "value": "formal", "source": "flag"}]}),
                ),
                frame(4, EventKind::ToolResult, json!({"result": {}, "attempt": 2})),
            ],
            false,
        );
        let names: Vec<&str> = span.events.iter().map(|e| e.name.as_ref()).collect();
        assert_eq!(names, ["rlp.question", "rlp.answer"]);
        assert_eq!(keys(&span.events[0].attributes), ["rlp.attempt", "rlp.question.count", "rlp.question.ids"]);
        assert_eq!(
            keys(&span.events[1].attributes),
            ["rlp.attempt", "rlp.answer.count", "rlp.answer.ids", "rlp.answer.sources"]
        );
        assert!(!format!("{:?}", span.events).contains("formal"));
    }

    #[test]
    fn span_ids_are_stable_and_never_zero() {
        assert_eq!(span_id(INVOCATION), span_id(INVOCATION));
        assert_ne!(span_id(INVOCATION), span_id(TRACE));
        assert_ne!(span_id(Uuid::nil()), SpanId::INVALID);
    }
}
