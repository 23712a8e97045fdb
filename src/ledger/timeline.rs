//! A trace as a timeline: each frame with what it means, results tied to
//! their calls (`rlp trace show`). Streaming: only calls waiting for their
//! result are kept.

use serde::Serialize;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::event::frame::{Origin, TraceFrame};
use crate::event::{Decision, EventKind, Outcome, Payload, RecordedAnswer, ReplayMark, Usage};
use crate::ledger::pending::PendingCalls;

/// One frame of the timeline.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TimelineEntry {
    /// Position in the trace, from 1.
    pub position: u64,
    /// The ledger row, when read from a ledger.
    pub row: Option<i64>,
    /// Milliseconds since the Unix epoch.
    pub ts_ms: i64,
    /// The kind.
    pub kind: EventKind,
    /// Who produced the frame.
    pub actor: String,
    /// The invocation, when the frame belongs to one.
    pub invocation_id: Option<Uuid>,
    /// The tool, when known (results take it from their call).
    pub tool: Option<String>,
    /// What the frame says.
    pub detail: Detail,
}

/// What a frame says, by kind.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Detail {
    /// A call.
    Call {
        /// The arguments.
        args: Value,
        /// The tool's tags.
        tags: Vec<String>,
        /// What answered it under a replay.
        replay: Option<Box<ReplayMark>>,
    },
    /// A result.
    Result {
        /// Position of the call, when it is in the trace.
        call_position: Option<u64>,
        /// The result or error.
        outcome: Outcome,
        /// The attempt number.
        attempt: u64,
        /// Wall time of the attempt.
        duration_ms: Option<u64>,
        /// Whether another attempt follows.
        will_retry: bool,
        /// What the attempt consumed, when the tool said.
        usage: Option<Usage>,
        /// The content blocks a bridged server sent beside a structured result.
        content: Option<Vec<Value>>,
    },
    /// The questions a tool asked.
    Inquiry {
        /// The question objects, as recorded.
        questions: Vec<Value>,
    },
    /// The answers given.
    Answer {
        /// The answers, with where each came from.
        answers: Vec<RecordedAnswer>,
    },
    /// An audit.
    Audit {
        /// The capability.
        capability: String,
        /// Allow or deny.
        decision: Decision,
        /// Why.
        reason: String,
    },
    /// A confirmation.
    Confirm {
        /// Whether approved.
        approved: bool,
        /// Who decided.
        by: String,
        /// How.
        how: String,
    },
    /// A discovery: what the client was shown.
    Discover(crate::event::ToolDiscoverPayload),
    /// What passed between a client of `rlp serve` and a bridged server
    /// besides tool calls (resources, prompts, completions, changes).
    Exchange(crate::event::ServerExchangePayload),
    /// A model completion a server asked for.
    Sample {
        /// Whether it was relayed to rlp's client (else refused).
        relayed: bool,
        /// The answer given to the server.
        response: Option<Value>,
        /// Why there is none.
        error: Option<String>,
    },
    /// What an after-call hook did to the result.
    Hook(Box<crate::event::ToolHookPayload>),
    /// A replay link.
    ReplayLink {
        /// The replayed trace.
        replay_of: Uuid,
        /// The mode.
        mode: String,
    },
}

impl TimelineEntry {
    /// `ok`, `error`, `retry` (a failed attempt followed by another),
    /// `allow`, `deny`, `approved`, `denied`, or `call` / `replay`.
    pub(crate) fn status(&self) -> &str {
        match &self.detail {
            Detail::Call { .. } => "call",
            Detail::Result { will_retry: true, .. } => "retry",
            Detail::Result { outcome, .. } => outcome.status(),
            Detail::Audit { decision, .. } => decision.as_str(),
            Detail::Confirm { approved: true, .. } => "approved",
            Detail::Confirm { approved: false, .. } => "denied",
            Detail::ReplayLink { .. } => "replay",
            Detail::Discover(discovery) => &discovery.action,
            Detail::Inquiry { .. } => "asked",
            Detail::Answer { .. } => "answered",
            Detail::Sample { error: Some(_), .. } => "refused",
            Detail::Sample { .. } => "sampled",
            Detail::Hook(hook) => hook.effect.as_str(),
            Detail::Exchange(exchange) if exchange.error.is_some() => "error",
            Detail::Exchange(exchange) if exchange.method.starts_with("notifications/") => "notice",
            Detail::Exchange(_) => "ok",
        }
    }

    /// The entry as one JSON object (the `--format json` shape).
    pub(crate) fn to_json(&self) -> Value {
        let mut entry = json!({
            "position": self.position,
            "row": self.row,
            "ts_ms": self.ts_ms,
            "time": crate::text::format_ts(self.ts_ms),
            "kind": self.kind.as_str(),
            "actor": self.actor,
            "invocation_id": self.invocation_id,
            "tool": self.tool,
            "status": self.status(),
        });
        let extra = match &self.detail {
            Detail::Call { args, tags, replay: None } => json!({"args": args, "tags": tags}),
            Detail::Call { args, tags, replay: Some(mark) } => json!({"args": args, "tags": tags, "replay": mark}),
            Detail::Result { call_position, outcome, attempt, duration_ms, usage, content, .. } => {
                let mut value = json!({"call_position": call_position, "attempt": attempt, "duration_ms": duration_ms});
                if let (Value::Object(map), Some(usage)) = (&mut value, usage) {
                    map.insert("usage".into(), json!(usage));
                }
                if let (Value::Object(map), Some(content)) = (&mut value, content) {
                    map.insert("content".into(), json!(content));
                }
                if let (Value::Object(map), Value::Object(out)) = (&mut value, outcome.to_json()) {
                    map.extend(out);
                }
                value
            }
            Detail::Audit { capability, decision, reason } => {
                json!({"capability": capability, "decision": decision.as_str(), "reason": reason})
            }
            Detail::Confirm { approved, by, how } => json!({"approved": approved, "by": by, "how": how}),
            Detail::ReplayLink { replay_of, mode } => json!({"replay_of": replay_of, "mode": mode}),
            Detail::Exchange(exchange) => without_version(serde_json::to_value(exchange)),
            Detail::Discover(discovery) => without_version(serde_json::to_value(discovery)),
            Detail::Hook(hook) => without_version(serde_json::to_value(hook)),
            Detail::Inquiry { questions } => json!({"questions": questions}),
            Detail::Answer { answers } => json!({"answers": answers}),
            Detail::Sample { relayed, response, error } => {
                json!({"relayed": relayed, "response": response, "error": error})
            }
        };
        if let (Value::Object(map), Value::Object(extra)) = (&mut entry, extra) {
            map.extend(extra);
        }
        entry
    }
}

/// A payload as JSON without its version member `v`.
fn without_version(value: Result<Value, serde_json::Error>) -> Value {
    let mut value = value.unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.remove("v");
    }
    value
}

/// Totals of a timeline.
#[derive(Clone, Debug, PartialEq, Default, Serialize)]
pub(crate) struct TimelineSummary {
    /// Frames.
    pub frames: u64,
    /// Call frames.
    pub calls: u64,
    /// Calls whose final result is a result.
    pub ok: u64,
    /// Calls whose final result is an error.
    pub errors: u64,
    /// Failed attempts followed by another.
    pub retries: u64,
    /// Calls without a final result.
    pub without_result: u64,
    /// Results without a call before them.
    pub orphan_results: u64,
    /// `deny` decisions and unapproved confirmations.
    pub denials: u64,
    /// Rounds of questions tools asked.
    pub questions: u64,
    /// What the results report they consumed, summed (absent when none did).
    #[serde(skip_serializing_if = "Usage::is_empty")]
    pub usage: Usage,
    /// Time of the first frame.
    pub first_ts_ms: Option<i64>,
    /// Time of the last frame.
    pub last_ts_ms: Option<i64>,
}

/// Builds timeline entries from frames in order.
#[derive(Debug, Default)]
pub(crate) struct Timeline {
    pending: PendingCalls<String>,
    summary: TimelineSummary,
}

impl Timeline {
    /// An empty timeline.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The entry for the next frame.
    pub(crate) fn entry(&mut self, frame: TraceFrame) -> TimelineEntry {
        let s = &mut self.summary;
        s.frames += 1;
        s.first_ts_ms.get_or_insert(frame.ts_ms);
        s.last_ts_ms = Some(frame.ts_ms);
        let kind = frame.kind();
        let invocation_id = frame.body.invocation_id();
        let (tool, detail) = match frame.body {
            Payload::ToolCall(call) => {
                s.calls += 1;
                let _ = self.pending.open(call.invocation_id, frame.position, call.tool.clone());
                (Some(call.tool), Detail::Call { args: call.args, tags: call.tags, replay: call.replay })
            }
            Payload::ToolResult(result) => {
                let will_retry = result.will_retry();
                let waiting = self.pending.get(&result.invocation_id).map(|p| (p.position, p.data.clone()));
                match (&waiting, will_retry, &result.outcome) {
                    (None, _, _) => s.orphan_results += 1,
                    (Some(_), true, _) => s.retries += 1,
                    (Some(_), false, Outcome::Result(_)) => s.ok += 1,
                    (Some(_), false, Outcome::Error(_)) => s.errors += 1,
                }
                if waiting.is_some() && !will_retry {
                    self.pending.close(&result.invocation_id);
                }
                let (call_position, tool) = match waiting {
                    Some((position, tool)) => (Some(position), Some(tool)),
                    None => (None, (!result.tool.is_empty()).then_some(result.tool)),
                };
                if let Some(usage) = result.usage {
                    s.usage = s.usage.plus(usage);
                }
                (
                    tool,
                    Detail::Result {
                        call_position,
                        outcome: result.outcome,
                        attempt: result.attempt,
                        duration_ms: result.duration_ms,
                        will_retry,
                        usage: result.usage,
                        content: result.content,
                    },
                )
            }
            Payload::ToolInquiry(inquiry) => {
                s.questions += 1;
                (Some(inquiry.tool), Detail::Inquiry { questions: inquiry.questions })
            }
            Payload::ToolAnswer(answer) => (Some(answer.tool), Detail::Answer { answers: answer.answers }),
            Payload::ToolSample(sample) => (
                Some(sample.tool),
                Detail::Sample { relayed: sample.relayed, response: sample.response, error: sample.error },
            ),
            Payload::ToolHook(hook) => (Some(hook.tool.clone()), Detail::Hook(Box::new(hook))),
            Payload::CapAudit(audit) => {
                if audit.decision == Decision::Deny {
                    s.denials += 1;
                }
                (
                    Some(audit.tool),
                    Detail::Audit { capability: audit.capability, decision: audit.decision, reason: audit.reason },
                )
            }
            Payload::ToolConfirm(confirm) => {
                if !confirm.approved {
                    s.denials += 1;
                }
                (Some(confirm.tool), Detail::Confirm { approved: confirm.approved, by: confirm.by, how: confirm.how })
            }
            Payload::TraceReplay(link) => (None, Detail::ReplayLink { replay_of: link.replay_of, mode: link.mode }),
            Payload::ToolDiscover(discovery) => (None, Detail::Discover(discovery)),
            other => match other.exchange() {
                Some(exchange) => (None, Detail::Exchange(exchange.clone())),
                None => unreachable!("every other kind carries an exchange"),
            },
        };
        TimelineEntry {
            position: frame.position,
            row: match frame.origin {
                Origin::Row(id) => Some(id),
                Origin::Line(_) => None,
            },
            ts_ms: frame.ts_ms,
            kind,
            actor: frame.actor,
            invocation_id,
            tool,
            detail,
        }
    }

    /// The totals (calls still waiting count as without result).
    pub(crate) fn finish(mut self) -> TimelineSummary {
        self.summary.without_result = self.pending.len() as u64;
        self.summary
    }
}
