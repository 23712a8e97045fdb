//! A replay source: answers an agent's tool calls from a recorded trace, so
//! an agent host can run an agent again without running any tool.
//!
//! A call is matched on its tool id and its arguments in RFC 8785 canonical
//! form (so key order and number spelling do not matter; a placeholder of a
//! redacted export, `<redacted:N>`, in the recorded arguments matches any
//! value at its place), and on order ([`MatchOrder`]):
//!
//! - the call matches the *next* unused recording (the earliest one in
//!   recorded order not yet used): it is answered, no divergence;
//! - it matches a later unused recording: with [`MatchOrder::AnyOrder`] (the
//!   default) it is answered from the earliest such recording, and an
//!   `order_divergence` names both; with [`MatchOrder::InOrder`] it is not
//!   answered ([`Answer::NotRecorded`], an `order_divergence`);
//! - it matches no unused recording: `extra_call`, and
//!   [`Answer::NotRecorded`] with the closest unused recording of the same
//!   tool and the argument paths that differ ([`Miss`]); in order, when
//!   that is the next recording, the changed call takes its turn (the next
//!   calls line up with theirs, and it is not reported unused);
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
use crate::event::placeholder::{holds_placeholder, is_placeholder};
use crate::event::{EventKind, Outcome, Payload, Usage};
use crate::ledger::pending::PendingCalls;
use crate::ledger::query::{InputError, TraceInput, for_each_frame};
use crate::replay::diff::{Change, diff, is_placeholder_change, json_equal};
use crate::replay::divergence::{Divergence, DivergenceKind};
use crate::replay::exchange;
use crate::replay::hooked::HookView;
use crate::replay::replayer::CallOutput;
use crate::runtime::recorded::RecordedRound;

/// Argument paths a [`Miss`] lists; the rest are counted.
const LISTED_PATHS: usize = 10;
/// Unused recordings of a tool a miss compares its arguments with (in call
/// order), so that a call no recording answers costs a bounded time in a
/// recording of many calls of that tool.
const CLOSEST_CANDIDATES: usize = 256;

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
    /// What the tool itself returned, before the operator's after-call
    /// hooks (the same as `outcome` when none ran).
    pub tool_outcome: Outcome,
    /// The content blocks the tool itself sent, before the hooks.
    pub tool_content: Option<Vec<Value>>,
    /// What the call consumed, when the tool said.
    pub usage: Option<Usage>,
    /// The rounds of questions the tool asked, with their answers.
    pub rounds: Vec<RecordedRound>,
}

/// The answer to one call.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer<'a> {
    /// The recording that answers the call.
    Recorded(&'a Recording),
    /// No unused recording answers the call (`extra_call`, or
    /// `order_divergence` in order).
    NotRecorded(Miss<'a>),
}

/// Why no recording answered a call, and the recording closest to it.
#[derive(Clone, Debug, PartialEq)]
pub struct Miss<'a> {
    /// The agent's call number (from 1).
    pub call_number: u64,
    /// The closest unused recording: in order, a later one with the same
    /// tool and arguments; else the one of the same tool whose arguments
    /// differ at the fewest paths (the earliest of those); else the next.
    pub closest: Option<&'a Recording>,
    /// Whether `closest` has the same tool and arguments (it is only out
    /// of order).
    pub out_of_order: bool,
    /// The argument paths that differ from the closest recording's
    /// (placeholders aside), the first few of them.
    pub changes: Vec<Change>,
    /// How many more paths differ.
    pub more: u64,
    /// What the divergence says.
    pub message: String,
}

/// Which recordings a call may match.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MatchOrder {
    /// Only the next unused recording (agents that call one tool at a time).
    InOrder,
    /// Any unused recording, the earliest first (agents that parallelise).
    #[default]
    AnyOrder,
}

struct OpenCall {
    invocation_id: Uuid,
    tool: String,
    args: Value,
    hooks: HookView,
    rounds: Vec<RecordedRound>,
}

/// Answers calls from a recording; see the module documentation.
pub struct ReplaySource {
    recordings: Vec<Recording>,
    /// Unused recordings without placeholders, by tool and canonical
    /// arguments (used ones are skipped when met).
    unused: HashMap<(String, String), VecDeque<usize>>,
    /// Recordings whose arguments hold placeholders, by tool, in call order.
    redacted: HashMap<String, Vec<usize>>,
    /// Every recording, by tool, in call order (the candidates of a miss).
    by_tool: HashMap<String, Vec<usize>>,
    /// Every recording, by its invocation id.
    by_invocation: HashMap<Uuid, usize>,
    used: Vec<bool>,
    next: usize,
    calls: u64,
    order: MatchOrder,
    trace_id: Option<Uuid>,
    agent: Option<String>,
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

/// Whether `given` arguments match `recorded` ones: equal, numbers by
/// value, a placeholder matching anything at its place.
fn arguments_match(recorded: &Value, given: &Value) -> bool {
    match (recorded, given) {
        (Value::String(text), _) if is_placeholder(text) => true,
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(a, b)| arguments_match(a, b)),
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| arguments_match(v, w)))
        }
        _ => json_equal(recorded, given),
    }
}

/// The argument paths where `given` differs from `recorded`, placeholders
/// aside: the first [`LISTED_PATHS`], and how many more.
fn argument_changes(recorded: &Value, given: &Value) -> (Vec<Change>, u64) {
    let found = diff(recorded, given, usize::MAX);
    let mut changes: Vec<Change> = found.changes.into_iter().filter(|c| !is_placeholder_change(c)).collect();
    let more = changes.len().saturating_sub(LISTED_PATHS) as u64;
    changes.truncate(LISTED_PATHS);
    (changes, more)
}

/// `value` as a message quotes it: canonical JSON, cut at 60 characters.
fn quoted(value: &Value) -> String {
    let text = canonical_text(value);
    match text.char_indices().nth(60) {
        Some((cut, _)) => format!("`{}…`", &text[..cut]),
        None => format!("`{text}`"),
    }
}

/// The changes as a message lists them: `/city (recorded `"Oslo"`, given `"Bergen"`)`.
fn listed_changes(changes: &[Change], more: u64) -> String {
    let mut listed: Vec<String> = changes
        .iter()
        .map(|c| {
            let path = if c.path.is_empty() { "the whole value".to_string() } else { c.path.clone() };
            match (&c.recorded, &c.replayed) {
                (Some(recorded), Some(given)) => {
                    format!("{path} (recorded {}, given {})", quoted(recorded), quoted(given))
                }
                (Some(recorded), None) => format!("{path} (recorded {}, not given)", quoted(recorded)),
                (None, Some(given)) => format!("{path} (not recorded, given {})", quoted(given)),
                (None, None) => path,
            }
        })
        .collect();
    if more > 0 {
        listed.push(format!("and {more} more"));
    }
    listed.join(", ")
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
            redacted: HashMap::new(),
            by_tool: HashMap::new(),
            by_invocation: HashMap::new(),
            used: Vec::new(),
            next: 0,
            calls: 0,
            order: MatchOrder::default(),
            trace_id: None,
            agent: None,
            divergences: Vec::new(),
            loading: PendingCalls::new(),
        }
    }

    /// The source matching calls in `order`.
    pub fn matching(mut self, order: MatchOrder) -> ReplaySource {
        self.order = order;
        self
    }

    /// The recorded trace (its first frame's), `None` when it had none.
    pub fn trace_id(&self) -> Option<Uuid> {
        self.trace_id
    }

    fn push_frame(&mut self, frame: TraceFrame) {
        let position = frame.position;
        if self.trace_id.is_none() {
            self.trace_id = Some(frame.provenance.trace_id);
            self.agent = Some(frame.provenance.agent.clone());
        }
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
                    rounds: Vec::new(),
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
                    let recorded = CallOutput {
                        outcome: result.outcome.clone(),
                        content: result.content.clone(),
                        annotations: Vec::new(),
                    };
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
                        tool_outcome: result.outcome,
                        tool_content: result.content,
                        usage: result.usage,
                        rounds: call.data.rounds,
                    });
                    self.used.push(false);
                }
            }
            Payload::ToolInquiry(inquiry) => {
                if let Some(open) = self.loading.get_mut(&inquiry.invocation_id) {
                    open.data.rounds.push(RecordedRound { questions: inquiry.questions, answers: Vec::new() });
                }
            }
            Payload::ToolAnswer(answer) => {
                if let Some(round) =
                    self.loading.get_mut(&answer.invocation_id).and_then(|open| open.data.rounds.last_mut())
                {
                    round.answers = answer.answers;
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
        self.recordings.sort_by_key(|recording| recording.position);
        for (index, recording) in self.recordings.iter().enumerate() {
            self.by_tool.entry(recording.tool.clone()).or_default().push(index);
            self.by_invocation.insert(recording.invocation_id, index);
            if holds_placeholder(&recording.args) {
                self.redacted.entry(recording.tool.clone()).or_default().push(index);
            } else {
                self.unused.entry(key(&recording.tool, &recording.args)).or_default().push_back(index);
            }
        }
        self
    }

    /// Counts a call an earlier process of the same replay made: the next
    /// call gets the number after it, and the recording of `answered_by`
    /// (the invocation that answered it, if one did) is used; whether the
    /// recording has that invocation.
    pub fn earlier_call(&mut self, answered_by: Option<Uuid>) -> bool {
        self.calls += 1;
        let Some(&index) = answered_by.and_then(|id| self.by_invocation.get(&id)) else {
            return false;
        };
        self.use_recording(index);
        true
    }

    fn use_recording(&mut self, index: usize) {
        self.used[index] = true;
        while self.next < self.used.len() && self.used[self.next] {
            self.next += 1;
        }
    }

    /// The earliest unused recording that `tool` with `args` matches.
    fn earliest_match(&mut self, tool: &str, args: &Value) -> Option<usize> {
        let used = &self.used;
        let exact = self.unused.get_mut(&key(tool, args)).and_then(|queue| {
            while queue.front().is_some_and(|&i| used[i]) {
                queue.pop_front();
            }
            queue.front().copied()
        });
        let recordings = &self.recordings;
        let redacted = self
            .redacted
            .get(tool)
            .into_iter()
            .flatten()
            .copied()
            .find(|&i| !used[i] && exact.is_none_or(|e| i < e) && arguments_match(&recordings[i].args, args));
        redacted.or(exact)
    }

    /// The unused recording of `tool` whose arguments differ from `args` at
    /// the fewest paths (the earliest of those), among the first
    /// [`CLOSEST_CANDIDATES`] unused ones, with those paths.
    fn closest_of_tool(&self, tool: &str, args: &Value) -> Option<(usize, Vec<Change>, u64)> {
        let unused = self.by_tool.get(tool).into_iter().flatten().copied().filter(|&i| !self.used[i]);
        let mut best: Option<(usize, Vec<Change>, u64)> = None;
        for index in unused.take(CLOSEST_CANDIDATES) {
            let (changes, more) = argument_changes(&self.recordings[index].args, args);
            let count = changes.len() as u64 + more;
            if best.as_ref().is_none_or(|(_, c, m)| count < c.len() as u64 + m) {
                best = Some((index, changes, more));
            }
        }
        best
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
        let found = self.earliest_match(tool, args);
        let in_turn = found.is_some_and(|index| index == self.next || self.order == MatchOrder::AnyOrder);
        let Some(index) = found.filter(|_| in_turn) else {
            return Answer::NotRecorded(self.miss(call_number, tool, args, found));
        };
        if index != self.next {
            let recording = &self.recordings[index];
            let expected = self.next_shown();
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
        self.use_recording(index);
        Answer::Recorded(&self.recordings[index])
    }

    /// The next unused recording as a message names it.
    fn next_shown(&self) -> String {
        self.recordings
            .get(self.next)
            .map(|r| format!("`{}` at #{}", r.tool, r.position))
            .unwrap_or_else(|| "none (every recording was used)".into())
    }

    /// The miss of call `call_number`, recorded as a divergence; `later`
    /// is the recording it matches out of order, in order.
    fn miss(&mut self, call_number: u64, tool: &str, args: &Value, later: Option<usize>) -> Miss<'_> {
        let next = self.next_shown();
        let (closest, changes, more, message) = if let Some(index) = later {
            let recording = &self.recordings[index];
            let message = format!(
                "call {call_number} (`{tool}`) matches the recording at #{}, but the next recording is {next}: \
                 the calls are answered in the order they were recorded (replay with --match any-order for an \
                 agent whose calls may come in another order)",
                recording.position
            );
            (Some(index), Vec::new(), 0, message)
        } else if let Some((index, changes, more)) = self.closest_of_tool(tool, args) {
            let recording = &self.recordings[index];
            let message = format!(
                "call {call_number} (`{tool}`) matches no recording: the closest is the call of `{tool}` at #{} \
                 (invocation {}), whose arguments differ at {}",
                recording.position,
                recording.invocation_id,
                listed_changes(&changes, more)
            );
            (Some(index), changes, more, message)
        } else {
            let message = format!(
                "call {call_number} (`{tool}`) matches no recording: no unused recording calls `{tool}` (the next \
                 recording is {next})"
            );
            (None, Vec::new(), 0, message)
        };
        // In order, a changed call in place of the next recording (same
        // tool) takes its turn: the calls after it line up with theirs.
        if self.order == MatchOrder::InOrder && later.is_none() && closest == Some(self.next) {
            self.use_recording(self.next);
        }
        // An extra call is at no recorded position; one out of order is at
        // the recording it matches.
        let (kind, at) = match later {
            Some(index) => {
                let recording = &self.recordings[index];
                (DivergenceKind::OrderDivergence, Some((recording.position, recording.invocation_id)))
            }
            None => (DivergenceKind::ExtraCall, None),
        };
        self.divergences.push(Divergence {
            call_number: Some(call_number),
            position: at.map(|(position, _)| position),
            ..Divergence::at(kind, 0, message.clone()).call(at.map(|(_, id)| id), Some(tool))
        });
        Miss {
            call_number,
            closest: closest.map(|i| &self.recordings[i]),
            out_of_order: later.is_some(),
            changes,
            more,
            message,
        }
    }

    /// Ends the replay: every divergence, with the recordings never asked
    /// for (`unused_recording`, by position) last.
    pub fn finish(self) -> Vec<Divergence> {
        self.end()
    }

    /// What [`ReplaySource::finish`] reports, with the source kept (a
    /// server's calls may still hold it).
    pub fn end(&self) -> Vec<Divergence> {
        let unused = self.recordings.iter().zip(&self.used).filter(|(_, used)| !**used).map(|(recording, _)| {
            Divergence::at(
                DivergenceKind::UnusedRecording,
                recording.position,
                format!("the recorded call of `{}` at #{} was never made", recording.tool, recording.position),
            )
            .call(Some(recording.invocation_id), Some(&recording.tool))
        });
        self.divergences.iter().cloned().chain(unused).collect()
    }

    /// Whether every recording has answered a call.
    pub fn all_used(&self) -> bool {
        self.next >= self.used.len()
    }

    /// The agent the recorded trace names (its first frame's).
    pub fn agent(&self) -> Option<&str> {
        self.agent.as_deref()
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
                replay: None,
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
        let Answer::NotRecorded(used_up) = source.answer("a", &json!({"x": 1, "y": 2})) else { panic!("a again") };
        assert_eq!(
            used_up.message,
            "call 3 (`a`) matches no recording: no unused recording calls `a` (the next recording is `b` at #3)"
        );
        let Answer::NotRecorded(other) = source.answer("b", &json!({"other": true})) else { panic!("b answered") };
        assert_eq!(other.closest.map(|r| r.position), Some(3));
        assert!(
            other.message.ends_with("whose arguments differ at /other (not recorded, given `true`)"),
            "{}",
            other.message
        );
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
    fn in_order_a_call_answers_only_from_the_next_recording() {
        let frames = || {
            [
                call(1, 1, "a", json!({"n": 1})),
                result(2, 1, json!("A")),
                call(3, 2, "b", json!({"n": 2})),
                result(4, 2, json!("B")),
            ]
        };
        let mut source = ReplaySource::from_frames(frames()).matching(MatchOrder::InOrder);
        let Answer::NotRecorded(miss) = source.answer("b", &json!({"n": 2})) else { panic!("b answered first") };
        assert!(miss.out_of_order && miss.changes.is_empty());
        assert_eq!(
            miss.message,
            "call 1 (`b`) matches the recording at #3, but the next recording is `a` at #1: the calls are answered \
             in the order they were recorded (replay with --match any-order for an agent whose calls may come in \
             another order)"
        );
        assert!(matches!(source.answer("a", &json!({"n": 1})), Answer::Recorded(r) if r.position == 1));
        assert!(matches!(source.answer("b", &json!({"n": 2.0})), Answer::Recorded(r) if r.position == 3));
        assert_eq!(kinds(&source.finish()), [(DivergenceKind::OrderDivergence, Some(3), Some(1))]);
        // Any order answers it, noting the order.
        let mut source = ReplaySource::from_frames(frames()).matching(MatchOrder::AnyOrder);
        assert!(matches!(source.answer("b", &json!({"n": 2})), Answer::Recorded(_)));
        assert!(matches!(source.answer("a", &json!({"n": 1})), Answer::Recorded(_)));
        assert_eq!(kinds(&source.finish()), [(DivergenceKind::OrderDivergence, Some(3), Some(1))]);
    }

    #[test]
    fn a_placeholder_matches_any_value_and_the_closest_call_names_the_paths() {
        let mut source = ReplaySource::from_frames([
            call(1, 1, "mail.send", json!({"to": "<redacted:1>", "subject": "hi", "cc": ["<redacted:2>"]})),
            result(2, 1, json!({"id": "<redacted:3>"})),
            call(3, 2, "mail.send", json!({"to": "<redacted:1>", "subject": "bye", "cc": []})),
            result(4, 2, json!({"id": 2})),
        ])
        .matching(MatchOrder::InOrder);
        let sent = json!({"to": "ada@example.com", "subject": "hi", "cc": ["bob@example.com"]});
        assert!(matches!(source.answer("mail.send", &sent), Answer::Recorded(r) if r.position == 1));
        // A changed subject and an added cc: the closest is #3, the placeholder is no difference.
        let changed = json!({"to": "grace@example.com", "subject": "later", "cc": ["x"]});
        let Answer::NotRecorded(miss) = source.answer("mail.send", &changed) else { panic!("answered") };
        assert_eq!(miss.closest.map(|r| r.position), Some(3));
        let paths: Vec<&str> = miss.changes.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["/cc/0", "/subject"]);
        assert!(
            miss.message.ends_with(
                "differ at /cc/0 (not recorded, given `\"x\"`), /subject (recorded `\"bye\"`, given `\"later\"`)"
            ),
            "{}",
            miss.message
        );
        // In order, the changed call took the next recording's turn: it is not unused.
        assert_eq!(kinds(&source.finish()), [(DivergenceKind::ExtraCall, None, Some(2))]);
    }

    #[test]
    fn a_recording_keeps_the_tools_own_outcome_and_its_rounds_of_questions() {
        use crate::event::{RecordedAnswer, ToolAnswerPayload, ToolInquiryPayload};
        let asked = vec![json!({"id": "tone", "text": "Which tone?"})];
        let mut source = ReplaySource::from_frames([
            call(1, 1, "draft", json!({})),
            frame(
                2,
                Payload::ToolInquiry(ToolInquiryPayload {
                    v: PAYLOAD_VERSION,
                    invocation_id: Uuid::from_u128(1),
                    tool: "draft".into(),
                    attempt: 1,
                    questions: asked.clone(),
                    tags: vec![],
                }),
            ),
            frame(
                3,
                Payload::ToolAnswer(ToolAnswerPayload {
                    v: PAYLOAD_VERSION,
                    invocation_id: Uuid::from_u128(1),
                    tool: "draft".into(),
                    attempt: 1,
                    answers: vec![RecordedAnswer { id: "tone".into(), value: json!("formal"), source: "mcp".into() }],
                    tags: vec![],
                }),
            ),
            result(4, 1, json!({"text": "Dear"})),
        ]);
        let Answer::Recorded(r) = source.answer("draft", &json!({})) else { panic!("not answered") };
        assert_eq!(r.rounds.len(), 1);
        assert_eq!((r.rounds[0].questions.clone(), r.rounds[0].answers[0].value.clone()), (asked, json!("formal")));
        assert_eq!(r.tool_outcome, Outcome::Result(json!({"text": "Dear"})));
        assert_eq!(source.trace_id(), Some(Uuid::nil()));
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
