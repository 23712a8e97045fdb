//! A replay source: answers an agent's tool calls from a recorded trace, so
//! an agent host can run an agent again without running any tool.
//!
//! A call is matched on its tool id and its arguments in RFC 8785 canonical
//! form (so key order and number spelling do not matter), and on order:
//!
//! - the call matches the *next* unused recording (the earliest one in
//!   recorded order not yet used): it is answered, no divergence;
//! - it matches a later unused recording: it is answered from the earliest
//!   such recording, and an `order_divergence` names both;
//! - it matches no unused recording: `extra_call`, and [`Answer::NotRecorded`];
//! - [`ReplaySource::finish`] reports every recording never asked for as
//!   `unused_recording`, by position.
//!
//! The recording itself is checked while it is loaded: a result without its
//! call, or a call without a final result, is an `invalid_trace` divergence
//! (such a call cannot answer anything), and so is a malformed exchange with
//! a bridged server ([`crate::replay::exchange`]; exchanges answer no call).
//! The source holds one entry per recorded call (tool, arguments, outcome,
//! content blocks) in memory.

use std::collections::{HashMap, VecDeque};
use std::ops::ControlFlow;

use serde_json::Value;
use uuid::Uuid;

use crate::event::canonical::canonical_text;
use crate::event::frame::TraceFrame;
use crate::event::{EventKind, Outcome, Payload};
use crate::ledger::pending::PendingCalls;
use crate::ledger::query::{InputError, TraceInput, for_each_frame};
use crate::replay::divergence::{Divergence, DivergenceKind};
use crate::replay::exchange;
use crate::replay::hooked::HookView;
use crate::replay::replayer::CallOutput;

/// One recorded call with its final outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct Recording {
    /// Position of the call frame in the trace.
    pub position: u64,
    /// Position of its final result frame.
    pub result_position: u64,
    /// The recorded invocation id.
    pub invocation_id: Uuid,
    /// The tool id.
    pub tool: String,
    /// The recorded arguments.
    pub args: Value,
    /// The recorded outcome (result or error) as the caller got it: after
    /// the operator's after-call hooks, when some ran.
    pub outcome: Outcome,
    /// The content blocks a bridged MCP server sent beside its structured
    /// result, as recorded (binary data past 64 KiB by `data_blake3` and
    /// `data_bytes`, or `blob_blake3` and `blob_bytes`, instead of `data` or
    /// `blob`).
    pub content: Option<Vec<Value>>,
    /// The notes after-call hooks added for the caller.
    pub annotations: Vec<String>,
}

/// The answer to one call.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer<'a> {
    /// The recording that answers the call.
    Recorded(&'a Recording),
    /// No unused recording matches the call (`extra_call`).
    NotRecorded,
}

struct OpenCall {
    invocation_id: Uuid,
    tool: String,
    args: Value,
    hooks: HookView,
}

/// Answers calls from a recording; see the module documentation.
pub struct ReplaySource {
    recordings: Vec<Recording>,
    unused: HashMap<(String, String), VecDeque<usize>>,
    used: Vec<bool>,
    next: usize,
    calls: u64,
    divergences: Vec<Divergence>,
    loading: PendingCalls<OpenCall>,
}

impl std::fmt::Debug for ReplaySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplaySource")
            .field("recordings", &self.recordings.len())
            .field("calls", &self.calls)
            .field("divergences", &self.divergences.len())
            .finish()
    }
}

fn key(tool: &str, args: &Value) -> (String, String) {
    (tool.to_string(), canonical_text(args))
}

impl ReplaySource {
    /// Loads the recorded calls of a trace (from a ledger or a JSON Lines file).
    pub fn load(input: &TraceInput) -> Result<ReplaySource, InputError> {
        let mut source = ReplaySource::empty();
        for_each_frame(input, |frame| {
            source.push_frame(frame);
            ControlFlow::Continue(())
        })?;
        Ok(source.loaded())
    }

    /// Builds a source from frames already read, in trace order.
    pub fn from_frames(frames: impl IntoIterator<Item = TraceFrame>) -> ReplaySource {
        let mut source = ReplaySource::empty();
        for frame in frames {
            source.push_frame(frame);
        }
        source.loaded()
    }

    fn empty() -> ReplaySource {
        ReplaySource {
            recordings: Vec::new(),
            unused: HashMap::new(),
            used: Vec::new(),
            next: 0,
            calls: 0,
            divergences: Vec::new(),
            loading: PendingCalls::new(),
        }
    }

    fn push_frame(&mut self, frame: TraceFrame) {
        let position = frame.position;
        if let Some(problem) = frame.body.exchange().and_then(|e| exchange::problem(frame.body.kind(), e)) {
            self.divergences.push(Divergence::at(DivergenceKind::InvalidTrace, position, problem));
            return;
        }
        match frame.body {
            Payload::ToolCall(call) => {
                let open = OpenCall {
                    invocation_id: call.invocation_id,
                    tool: call.tool,
                    args: call.args,
                    hooks: HookView::default(),
                };
                if let Err(earlier) = self.loading.open(call.invocation_id, position, open) {
                    self.divergences.push(
                        Divergence::at(
                            DivergenceKind::InvalidTrace,
                            position,
                            format!(
                                "a second {} for invocation {} while the call at #{earlier} is still waiting",
                                EventKind::ToolCall,
                                call.invocation_id
                            ),
                        )
                        .call(Some(call.invocation_id), None),
                    );
                }
            }
            Payload::ToolResult(result) => {
                if self.loading.get(&result.invocation_id).is_none() {
                    self.divergences.push(
                        Divergence::at(
                            DivergenceKind::InvalidTrace,
                            position,
                            format!(
                                "a {} for invocation {} with no {} waiting for it",
                                EventKind::ToolResult,
                                result.invocation_id,
                                EventKind::ToolCall
                            ),
                        )
                        .call(Some(result.invocation_id), None),
                    );
                    return;
                }
                if result.will_retry() {
                    return;
                }
                if let Some(call) = self.loading.close(&result.invocation_id) {
                    let index = self.recordings.len();
                    self.unused.entry(key(&call.data.tool, &call.data.args)).or_default().push_back(index);
                    let recorded =
                        CallOutput { outcome: result.outcome, content: result.content, annotations: Vec::new() };
                    let seen = call.data.hooks.apply(recorded);
                    self.recordings.push(Recording {
                        position: call.position,
                        result_position: position,
                        invocation_id: call.data.invocation_id,
                        tool: call.data.tool,
                        args: call.data.args,
                        outcome: seen.outcome,
                        content: seen.content,
                        annotations: seen.annotations,
                    });
                    self.used.push(false);
                }
            }
            Payload::ToolHook(hook) => {
                if let Some(open) = self.loading.get_mut(&hook.invocation_id) {
                    open.data.hooks.add(hook);
                }
            }
            // Only calls, the hooks' work on them and their results are replayed.
            _ => {}
        }
    }

    fn loaded(mut self) -> ReplaySource {
        for (id, pending) in std::mem::take(&mut self.loading).into_sorted() {
            self.divergences.push(
                Divergence::at(
                    DivergenceKind::InvalidTrace,
                    pending.position,
                    format!(
                        "the {} has no final {}, so it cannot answer a call",
                        EventKind::ToolCall,
                        EventKind::ToolResult
                    ),
                )
                .call(Some(id), Some(&pending.data.tool)),
            );
        }
        // Recordings are in order of their final result; answer in call order.
        let mut order: Vec<usize> = (0..self.recordings.len()).collect();
        order.sort_by_key(|&i| self.recordings[i].position);
        if order.iter().enumerate().any(|(at, &i)| at != i) {
            let mut sorted: Vec<Recording> = order.iter().map(|&i| self.recordings[i].clone()).collect();
            std::mem::swap(&mut self.recordings, &mut sorted);
            self.unused.clear();
            for (index, recording) in self.recordings.iter().enumerate() {
                self.unused.entry(key(&recording.tool, &recording.args)).or_default().push_back(index);
            }
        }
        self
    }

    /// The recorded calls, in call order.
    pub fn recordings(&self) -> &[Recording] {
        &self.recordings
    }

    /// Divergences found so far (loading the recording, and answering).
    pub fn divergences(&self) -> &[Divergence] {
        &self.divergences
    }

    /// Answers the agent's next call.
    pub fn answer(&mut self, tool: &str, args: &Value) -> Answer<'_> {
        self.calls += 1;
        let call_number = self.calls;
        let found = self.unused.get_mut(&key(tool, args)).and_then(VecDeque::pop_front);
        let Some(index) = found else {
            let expected = self
                .recordings
                .get(self.next)
                .map(|r| format!(" (the next recording is `{}` at #{})", r.tool, r.position));
            self.divergences.push(Divergence {
                call_number: Some(call_number),
                position: None,
                ..Divergence::at(
                    DivergenceKind::ExtraCall,
                    0,
                    format!(
                        "call {call_number} (`{tool}`) matches no unused recording: no recorded call has this tool \
                         and these arguments{}",
                        expected.unwrap_or_default()
                    ),
                )
                .call(None, Some(tool))
            });
            return Answer::NotRecorded;
        };
        if index != self.next {
            let recording = &self.recordings[index];
            let expected = self
                .recordings
                .get(self.next)
                .map(|r| format!("`{}` at #{}", r.tool, r.position))
                .unwrap_or_else(|| "none".into());
            self.divergences.push(Divergence {
                call_number: Some(call_number),
                ..Divergence::at(
                    DivergenceKind::OrderDivergence,
                    recording.position,
                    format!(
                        "call {call_number} (`{tool}`) matches the recording at #{}, but the next recording is {expected}",
                        recording.position
                    ),
                )
                .call(Some(recording.invocation_id), Some(tool))
            });
        }
        self.used[index] = true;
        while self.next < self.used.len() && self.used[self.next] {
            self.next += 1;
        }
        Answer::Recorded(&self.recordings[index])
    }

    /// Ends the replay: every divergence, with the recordings never asked
    /// for (`unused_recording`, by position) last.
    pub fn finish(mut self) -> Vec<Divergence> {
        for (index, recording) in self.recordings.iter().enumerate() {
            if !self.used[index] {
                self.divergences.push(
                    Divergence::at(
                        DivergenceKind::UnusedRecording,
                        recording.position,
                        format!("the recorded call of `{}` at #{} was never made", recording.tool, recording.position),
                    )
                    .call(Some(recording.invocation_id), Some(&recording.tool)),
                );
            }
        }
        self.divergences
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::event::frame::Origin;
    use crate::event::{PAYLOAD_VERSION, Provenance, ServerExchangePayload, ToolCallPayload, ToolResultPayload};
    use crate::replay::exchange::tests::exchange;
    use serde_json::json;

    /// A frame of agent `a` at `position`.
    pub(crate) fn frame(position: u64, body: Payload) -> TraceFrame {
        TraceFrame {
            position,
            origin: Origin::Line(position),
            ts_ms: 0,
            actor: "runtime".into(),
            scope: "a".into(),
            provenance: Provenance { trace_id: Uuid::nil(), msg_id: Uuid::nil(), agent: "a".into() },
            body,
        }
    }

    /// A call frame of invocation `id`.
    pub(crate) fn call(position: u64, id: u128, tool: &str, args: Value) -> TraceFrame {
        frame(
            position,
            Payload::ToolCall(ToolCallPayload {
                v: PAYLOAD_VERSION,
                invocation_id: Uuid::from_u128(id),
                tool: tool.into(),
                args,
                input_schema: String::new(),
                input_schema_blake3: String::new(),
                tags: vec![],
                options: None,
                sandbox: None,
                traceparent: None,
                command: None,
                server: None,
            }),
        )
    }

    /// A result frame of invocation `id`.
    pub(crate) fn result(position: u64, id: u128, value: Value) -> TraceFrame {
        bridged_result(position, id, value, None)
    }

    /// A result frame of invocation `id` with the content blocks a bridged
    /// server sent beside it.
    pub(crate) fn bridged_result(position: u64, id: u128, value: Value, content: Option<Vec<Value>>) -> TraceFrame {
        frame(
            position,
            Payload::ToolResult(ToolResultPayload {
                v: PAYLOAD_VERSION,
                invocation_id: Uuid::from_u128(id),
                tool: String::new(),
                outcome: Outcome::Result(value),
                attempt: 1,
                duration_ms: None,
                result_schema: String::new(),
                result_schema_blake3: String::new(),
                usage: None,
                content,
                tags: vec![],
                traceparent: None,
            }),
        )
    }

    /// An exchange frame of `kind`.
    pub(crate) fn exchange_at(position: u64, kind: EventKind, exchange: ServerExchangePayload) -> TraceFrame {
        frame(position, Payload::read(kind, serde_json::to_value(exchange).unwrap()).unwrap())
    }

    fn kinds(divergences: &[Divergence]) -> Vec<(DivergenceKind, Option<u64>, Option<u64>)> {
        divergences.iter().map(|d| (d.kind, d.position, d.call_number)).collect()
    }

    #[test]
    fn answers_in_order_and_reports_every_divergence() {
        let mut source = ReplaySource::from_frames([
            call(1, 1, "a", json!({"x": 1, "y": 2})),
            result(2, 1, json!("A")),
            call(3, 2, "b", json!({})),
            result(4, 2, json!("B")),
            call(5, 3, "c", json!([])),
            result(6, 3, json!("C")),
            call(7, 4, "d", json!(null)),
        ]);
        assert_eq!(kinds(source.divergences()), [(DivergenceKind::InvalidTrace, Some(7), None)]);
        // Key order and number spelling do not matter.
        let Answer::Recorded(r) = source.answer("a", &json!({"y": 2.0, "x": 1})) else { panic!("a not answered") };
        assert_eq!(r.outcome, Outcome::Result(json!("A")));
        // `c` before `b`: answered, but out of order.
        assert!(matches!(source.answer("c", &json!([])), Answer::Recorded(r) if r.position == 5));
        assert_eq!(source.answer("a", &json!({"x": 1, "y": 2})), Answer::NotRecorded);
        assert_eq!(source.answer("b", &json!({"other": true})), Answer::NotRecorded);
        let all = source.finish();
        assert_eq!(
            kinds(&all),
            [
                (DivergenceKind::InvalidTrace, Some(7), None),
                (DivergenceKind::OrderDivergence, Some(5), Some(2)),
                (DivergenceKind::ExtraCall, None, Some(3)),
                (DivergenceKind::ExtraCall, None, Some(4)),
                (DivergenceKind::UnusedRecording, Some(3), None),
            ]
        );
        assert_eq!(all[1].message, "call 2 (`c`) matches the recording at #5, but the next recording is `b` at #3");
    }

    #[test]
    fn interleaved_calls_are_answered_in_call_order() {
        let mut source = ReplaySource::from_frames([
            call(1, 1, "a", json!(1)),
            call(2, 2, "b", json!(2)),
            result(3, 2, json!("B")),
            result(4, 1, json!("A")),
        ]);
        assert!(matches!(source.answer("a", &json!(1)), Answer::Recorded(r) if r.result_position == 4));
        assert!(matches!(source.answer("b", &json!(2)), Answer::Recorded(r) if r.result_position == 3));
        assert!(source.finish().is_empty());
    }

    #[test]
    fn a_recording_keeps_its_content_and_a_malformed_exchange_is_invalid() {
        let blocks = vec![json!({"type": "image", "mimeType": "image/png", "data_blake3": "ab", "data_bytes": 70000})];
        let read = exchange("files", "resources/read", json!({"uri": "f:a"}), Some(json!({"contents": []})), None);
        let both = exchange("files", "resources/read", json!({"uri": "f:b"}), Some(json!({})), Some("gone"));
        let mut source = ReplaySource::from_frames([
            exchange_at(1, EventKind::ResourceRead, read),
            call(2, 1, "shot", json!({})),
            bridged_result(3, 1, json!({"ok": true}), Some(blocks.clone())),
            exchange_at(4, EventKind::ResourceRead, both),
        ]);
        assert_eq!(kinds(source.divergences()), [(DivergenceKind::InvalidTrace, Some(4), None)]);
        let Answer::Recorded(r) = source.answer("shot", &json!({})) else { panic!("shot not answered") };
        assert_eq!((r.outcome.clone(), r.content.clone()), (Outcome::Result(json!({"ok": true})), Some(blocks)));
        assert_eq!(source.finish().len(), 1);
    }
}
