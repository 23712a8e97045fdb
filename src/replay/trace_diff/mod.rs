//! `rlp trace diff`: two runs of an agent compared call by call, and
//! exchange by exchange with bridged servers (the regression gate).
//!
//! Two streaming passes over each trace, both traces read side by side on
//! two threads:
//!
//! 1. [`digest`]: every call as a compact digest (tool, BLAKE3 of the
//!    canonical arguments and result with its content blocks, error kind,
//!    positions), and every exchange (kind, server, method, BLAKE3 of the
//!    request and of the answer); no payload is kept;
//! 2. the calls are aligned by tool id ([`align`]) and each aligned pair is
//!    compared by digest; unmatched calls with the same tool and arguments on
//!    both sides are the same call made in another order. The exchanges are
//!    aligned by kind, server, method and request, each aligned pair's
//!    answers compared, the others added or removed; their divergences follow
//!    the calls';
//! 3. [`payloads`]: only the arguments, results and answers of the pairs
//!    that differ are read again, to list the JSON Pointer paths that differ.
//!
//! Memory follows the number of calls and exchanges (about 80 bytes each per
//! side) and the payloads of the differing pairs, never the payloads of whole
//! traces.
//! [`render`] writes the human and JSON reports.

pub(crate) mod align;
mod digest;
mod payloads;
pub(crate) mod render;

use std::collections::{HashMap, VecDeque};
use std::fmt;

use crate::error::{Exit, Reportable};
use crate::ledger::query::{InputError, TraceInput};
use crate::replay::diff::{Change, is_placeholder_change};
use crate::replay::trace_diff::align::{Step, align};
use crate::replay::trace_diff::digest::{CallDigest, Digest, ExchangeDigest, OutcomeDigest, Side, load};

/// How the two runs differ at one place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum DiffKind {
    /// A candidate call the baseline does not have.
    ExtraCall,
    /// A baseline call the candidate does not make.
    UnusedRecording,
    /// The same call (tool and arguments), made at another place in the order.
    OrderDivergence,
    /// Aligned calls of the same tool with different arguments.
    ArgsMismatch,
    /// Both succeeded, with different results.
    ResultChanged,
    /// One succeeded and the other failed, the error kind changed, or one has no result.
    OutcomeChanged,
    /// A candidate exchange with a bridged server the baseline does not have.
    ExtraExchange,
    /// A baseline exchange the candidate does not have.
    MissingExchange,
    /// Aligned exchanges (same kind, server, method and request) answered
    /// differently: another response, another error, or one for the other.
    ResponseChanged,
}

impl DiffKind {
    /// The stable name, e.g. `extra_call`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DiffKind::ExtraCall => "extra_call",
            DiffKind::UnusedRecording => "unused_recording",
            DiffKind::OrderDivergence => "order_divergence",
            DiffKind::ArgsMismatch => "args_mismatch",
            DiffKind::ResultChanged => "result_changed",
            DiffKind::OutcomeChanged => "outcome_changed",
            DiffKind::ExtraExchange => "extra_exchange",
            DiffKind::MissingExchange => "missing_exchange",
            DiffKind::ResponseChanged => "response_changed",
        }
    }

    /// Whether the kind concerns exchanges (its indexes are into each
    /// side's exchanges, not its calls).
    pub(crate) fn is_exchange(self) -> bool {
        matches!(self, DiffKind::ExtraExchange | DiffKind::MissingExchange | DiffKind::ResponseChanged)
    }
}

/// One divergence: the calls concerned (indexes into each side's calls, or
/// its exchanges for the exchange kinds) and, for `args_mismatch`,
/// `result_changed` and `response_changed`, what differs.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Found {
    /// The class.
    pub kind: DiffKind,
    /// The baseline call or exchange, when there is one.
    pub baseline: Option<usize>,
    /// The candidate call or exchange, when there is one.
    pub candidate: Option<usize>,
    /// The differing paths (`recorded` is the baseline value, `replayed` the candidate's).
    pub changes: Vec<Change>,
    /// Paths that differ beyond those listed.
    pub more_changes: u64,
}

impl Found {
    fn new(kind: DiffKind, baseline: Option<usize>, candidate: Option<usize>) -> Self {
        Found { kind, baseline, candidate, changes: Vec::new(), more_changes: 0 }
    }
}

/// The comparison of two traces.
#[derive(Debug)]
pub(crate) struct TraceDiff {
    /// The baseline run.
    pub baseline: Side,
    /// The candidate run.
    pub candidate: Side,
    /// Whether the alignment of the calls or of the exchanges fell back to
    /// the greedy one (see [`align`]).
    pub greedy: bool,
    /// The divergences, in alignment order.
    pub divergences: Vec<Found>,
}

impl TraceDiff {
    /// Whether nothing diverged.
    pub(crate) fn is_clean(&self) -> bool {
        self.divergences.is_empty()
    }
}

/// Why two traces could not be compared.
#[derive(Debug)]
pub(crate) enum TraceDiffError {
    /// A trace could not be read (the error names the file and line, or the trace).
    Input(InputError),
    /// A trace is not a consistent recording (a result without its call…).
    Inconsistent {
        /// The input as given.
        input: String,
        /// The frame.
        position: u64,
        /// What is wrong.
        message: String,
    },
}

impl fmt::Display for TraceDiffError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceDiffError::Input(error) => f.write_str(&error.message()),
            TraceDiffError::Inconsistent { input, position, message } => {
                write!(f, "{input}: frame #{position}: {message}; the trace cannot be compared")
            }
        }
    }
}

impl std::error::Error for TraceDiffError {}

/// Exit 2 (unreadable or inconsistent), except an edited ledger row (1).
impl Reportable for TraceDiffError {
    fn class(&self) -> Exit {
        match self {
            TraceDiffError::Input(error) => error.class(),
            TraceDiffError::Inconsistent { .. } => Exit::Usage,
        }
    }

    fn help(&self) -> Option<String> {
        match self {
            TraceDiffError::Input(error) => error.help(),
            TraceDiffError::Inconsistent { input, .. } => {
                Some(format!("`rlp trace show {input}` lists its frames; export the trace again from the ledger"))
            }
        }
    }
}

/// Runs `a` and `b` at once, `a` on a thread of its own.
fn both<A: Send, B>(a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B) -> (A, B) {
    std::thread::scope(|scope| {
        let thread = scope.spawn(a);
        let second = b();
        let first = thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (first, second)
    })
}

fn outcomes_equal(baseline: &Side, b: &CallDigest, candidate: &Side, c: &CallDigest) -> bool {
    match (b.outcome, c.outcome) {
        (OutcomeDigest::Result(x), OutcomeDigest::Result(y)) => x == y,
        (OutcomeDigest::Error(x), OutcomeDigest::Error(y)) => baseline.name(x) == candidate.name(y),
        (OutcomeDigest::NoResult, OutcomeDigest::NoResult) => true,
        _ => false,
    }
}

/// What differs between two calls taken to be the same one: their
/// arguments first (then the outcomes are not compared), then their
/// outcomes. Arguments holding placeholders of a redacted export are told
/// equal or not only by their paths ([`trace_diff`]): their outcomes are
/// compared too.
fn compare(baseline: &Side, i: usize, candidate: &Side, j: usize) -> Vec<Found> {
    let (b, c) = (&baseline.calls[i], &candidate.calls[j]);
    let mut found = Vec::new();
    if b.args != c.args {
        found.push(Found::new(DiffKind::ArgsMismatch, Some(i), Some(j)));
        if !(b.redacted || c.redacted) {
            return found;
        }
    }
    if !outcomes_equal(baseline, b, candidate, c) {
        let kind = match (b.outcome, c.outcome) {
            (OutcomeDigest::Result(_), OutcomeDigest::Result(_)) => DiffKind::ResultChanged,
            _ => DiffKind::OutcomeChanged,
        };
        found.push(Found::new(kind, Some(i), Some(j)));
    }
    found
}

/// The divergences of an alignment, in its order.
fn divergences(baseline: &Side, candidate: &Side, steps: &[Step]) -> Vec<Found> {
    // Unmatched calls with the same tool and arguments on both sides are
    // the same call, moved: paired in order of each side.
    let mut unmatched: HashMap<(&str, [u8; 16]), VecDeque<usize>> = HashMap::new();
    for step in steps {
        if let Step::Baseline(i) = *step {
            let call = &baseline.calls[i];
            unmatched.entry((baseline.name(call.tool), call.args)).or_default().push_back(i);
        }
    }
    let mut moved_to: HashMap<usize, usize> = HashMap::new();
    let mut moved_from: HashMap<usize, usize> = HashMap::new();
    for step in steps {
        if let Step::Candidate(j) = *step {
            let call = &candidate.calls[j];
            if let Some(i) = unmatched.get_mut(&(candidate.name(call.tool), call.args)).and_then(VecDeque::pop_front) {
                moved_to.insert(i, j);
                moved_from.insert(j, i);
            }
        }
    }
    let mut found = Vec::new();
    for step in steps {
        match *step {
            Step::Pair(i, j) => found.extend(compare(baseline, i, candidate, j)),
            Step::Baseline(i) => match moved_to.get(&i) {
                Some(&j) => {
                    found.push(Found::new(DiffKind::OrderDivergence, Some(i), Some(j)));
                    found.extend(compare(baseline, i, candidate, j));
                }
                None => found.push(Found::new(DiffKind::UnusedRecording, Some(i), None)),
            },
            Step::Candidate(j) if !moved_from.contains_key(&j) => {
                found.push(Found::new(DiffKind::ExtraCall, None, Some(j)));
            }
            Step::Candidate(_) => {}
        }
    }
    found
}

/// The divergences of an alignment of exchanges, in its order: aligned
/// exchanges answered differently, and those of one side only.
fn exchange_divergences(baseline: &Side, candidate: &Side, steps: &[Step]) -> Vec<Found> {
    steps
        .iter()
        .filter_map(|step| match *step {
            Step::Pair(i, j) => (baseline.exchanges[i].answer != candidate.exchanges[j].answer)
                .then(|| Found::new(DiffKind::ResponseChanged, Some(i), Some(j))),
            Step::Baseline(i) => Some(Found::new(DiffKind::MissingExchange, Some(i), None)),
            Step::Candidate(j) => Some(Found::new(DiffKind::ExtraExchange, None, Some(j))),
        })
        .collect()
}

fn tool_ids(side: &Side) -> Vec<&str> {
    side.calls.iter().map(|call| side.name(call.tool)).collect()
}

/// What exchanges are aligned on: kind, server, method and request (names
/// as text: each side interned its own).
fn exchange_keys(side: &Side) -> Vec<(&str, &str, &str, Digest)> {
    let key = |x: &ExchangeDigest| (x.kind.as_str(), side.name(x.server), side.name(x.method), x.request);
    side.exchanges.iter().map(key).collect()
}

/// The divergences of the calls, then of the exchanges, each in alignment
/// order; and whether either alignment was greedy.
fn all_divergences(b: &Side, c: &Side) -> (Vec<Found>, bool) {
    // Tool ids compared as text: each side interned its own.
    let calls = align(&tool_ids(b), &tool_ids(c));
    let exchanges = align(&exchange_keys(b), &exchange_keys(c));
    let mut found = divergences(b, c, &calls.steps);
    found.extend(exchange_divergences(b, c, &exchanges.steps));
    (found, calls.greedy || exchanges.greedy)
}

/// Compares `candidate` with `baseline`; see the module documentation.
pub(crate) fn trace_diff(baseline: &TraceInput, candidate: &TraceInput) -> Result<TraceDiff, TraceDiffError> {
    let (b, c) = both(|| load(baseline), || load(candidate));
    let (b, c) = (b?, c?);
    let (mut found, greedy) = all_divergences(&b, &c);
    let want_b = payloads::wanted(&found, |f| f.baseline, &b);
    let want_c = payloads::wanted(&found, |f| f.candidate, &c);
    let (values_b, values_c) = both(|| payloads::read(baseline, &want_b), || payloads::read(candidate, &want_c));
    let (values_b, values_c) = (values_b?, values_c?);
    for divergence in &mut found {
        let (Some(i), Some(j)) = (divergence.baseline, divergence.candidate) else { continue };
        let at = |side: &Side, index| payloads::compared(divergence.kind, side, index);
        let (Some(x), Some(y)) = (at(&b, i).and_then(|p| values_b.get(&p)), at(&c, j).and_then(|p| values_c.get(&p)))
        else {
            continue;
        };
        let changes = x.diff(y);
        divergence.changes = changes.changes;
        divergence.more_changes = changes.more;
        // A placeholder of a redacted export stands for any value.
        if divergence.kind == DiffKind::ArgsMismatch && (b.calls[i].redacted || c.calls[j].redacted) {
            divergence.changes.retain(|change| !is_placeholder_change(change));
        }
    }
    // Arguments that differ only at placeholders do not differ.
    let redacted =
        |d: &Found| d.baseline.is_some_and(|i| b.calls[i].redacted) || d.candidate.is_some_and(|j| c.calls[j].redacted);
    found.retain(|d| !(d.kind == DiffKind::ArgsMismatch && redacted(d) && d.changes.is_empty() && d.more_changes == 0));
    Ok(TraceDiff { baseline: b, candidate: c, greedy, divergences: found })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// A trace of agent `desk` with the frames `(kind, payload)` written as
    /// JSON Lines into `dir`; `side` tells the ids of two runs apart.
    fn written(dir: &std::path::Path, side: u8, frames: &[(&str, Value)]) -> TraceInput {
        let trace = format!("0197a000-0000-7000-8000-0000000000{side:02x}");
        let lines: String = frames
            .iter()
            .enumerate()
            .map(|(n, (kind, payload))| {
                let position = n as u64 + 1;
                let frame = json!({
                    "id": position, "ts_ms": 1_764_000_000_000u64 + position, "actor": "runtime", "kind": kind,
                    "scope": "desk", "payload": payload,
                    "provenance": {"agent": "desk", "msg_id": format!("0197a001-0000-7000-8000-{side:02x}{position:010}"), "trace_id": trace},
                });
                format!("{frame}\n")
            })
            .collect();
        let path = dir.join(format!("{side}.jsonl"));
        std::fs::write(&path, lines).unwrap();
        TraceInput::File(path)
    }

    /// A call of `shot` and its result, with `content` beside it.
    fn shot(side: u8, content: Value) -> [(&'static str, Value); 2] {
        let id = format!("0197a002-0000-7000-8000-{side:02x}0000000001");
        [
            ("tool.call", json!({"v": 1, "tool": "shot", "args": {}, "invocation_id": id, "input_schema": "inline"})),
            (
                "tool.result",
                json!({"v": 1, "invocation_id": id, "result": {"ok": true}, "attempt": 1, "content": content}),
            ),
        ]
    }

    /// An exchange frame of `kind`: `answer` holds `response` or `error`.
    fn exchange(
        kind: &'static str,
        server: &str,
        method: &str,
        request: Value,
        answer: Value,
    ) -> (&'static str, Value) {
        let mut payload = json!({"v": 1, "server": server, "method": method, "request": request, "duration_ms": 4});
        payload.as_object_mut().unwrap().extend(answer.as_object().unwrap().clone());
        (kind, payload)
    }

    fn read(text: &str) -> (&'static str, Value) {
        let contents = json!({"response": {"contents": [{"uri": "f:a", "text": text}]}});
        exchange("resource.read", "files", "resources/read", json!({"uri": "f:a"}), contents)
    }

    fn listed() -> (&'static str, Value) {
        exchange("resource.list", "files", "resources/list", json!({}), json!({"response": {"resources": []}}))
    }

    fn paths(found: &Found) -> Vec<String> {
        found.changes.iter().map(|c| format!("{} {}", c.op.as_str(), c.path)).collect()
    }

    /// A call of `mail.send` with `args`, and its result.
    fn sent(side: u8, n: u8, args: Value) -> [(&'static str, Value); 2] {
        let id = format!("0197a002-0000-7000-8000-{side:02x}{n:010}");
        [
            ("tool.call", json!({"v": 1, "tool": "mail.send", "args": args, "invocation_id": id})),
            ("tool.result", json!({"v": 1, "invocation_id": id, "result": {"id": n}, "attempt": 1})),
        ]
    }

    #[test]
    fn a_placeholder_of_a_redacted_baseline_stands_for_any_value() {
        let dir = tempfile::tempdir().unwrap();
        let mut baseline = sent(0xa, 1, json!({"to": "<redacted:1>", "subject": "hi"})).to_vec();
        baseline.extend(sent(0xa, 2, json!({"to": "<redacted:1>", "subject": "again"})));
        let mut candidate = sent(0xb, 1, json!({"to": "ada@example.com", "subject": "hi"})).to_vec();
        candidate.extend(sent(0xb, 2, json!({"to": "ada@example.com", "subject": "changed"})));
        let diff = trace_diff(&written(dir.path(), 0xa, &baseline), &written(dir.path(), 0xb, &candidate)).unwrap();
        let kinds: Vec<&str> = diff.divergences.iter().map(|d| d.kind.as_str()).collect();
        assert_eq!(kinds, ["args_mismatch"], "{:?}", diff.divergences);
        assert_eq!((diff.divergences[0].baseline, diff.divergences[0].candidate), (Some(1), Some(1)));
        assert_eq!(paths(&diff.divergences[0]), ["changed /subject"]);
    }

    #[test]
    fn content_blocks_and_exchanges_are_compared() {
        let dir = tempfile::tempdir().unwrap();
        let prompt =
            exchange("prompt.get", "p", "prompts/get", json!({"name": "hi"}), json!({"response": {"messages": []}}));
        let complete =
            exchange("completion.complete", "p", "completion/complete", json!({"ref": {}}), json!({"error": "nope"}));
        let mut baseline = shot(0xa, json!([{"type": "text", "text": "a"}])).to_vec();
        baseline.extend([read("one"), prompt, listed()]);
        let mut candidate = shot(0xb, json!([{"type": "text", "text": "b"}])).to_vec();
        candidate.extend([read("two"), complete, listed()]);
        let diff = trace_diff(&written(dir.path(), 0xa, &baseline), &written(dir.path(), 0xb, &candidate)).unwrap();
        let kinds: Vec<&str> = diff.divergences.iter().map(|d| d.kind.as_str()).collect();
        assert_eq!(kinds, ["result_changed", "response_changed", "missing_exchange", "extra_exchange"]);
        assert_eq!(paths(&diff.divergences[0]), ["changed /content/0/text"]);
        assert_eq!(paths(&diff.divergences[1]), ["changed /response/contents/0/text"]);
        assert_eq!((diff.divergences[2].baseline, diff.divergences[2].candidate), (Some(1), None));
        assert_eq!((diff.divergences[3].baseline, diff.divergences[3].candidate), (None, Some(1)));
        assert_eq!((diff.baseline.exchanges.len(), diff.candidate.exchanges.len()), (3, 3));
    }

    #[test]
    fn an_error_for_a_response_is_a_changed_response_and_timing_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let failed =
            exchange("resource.read", "files", "resources/read", json!({"uri": "f:a"}), json!({"error": "gone"}));
        let mut slower = read("one");
        slower.1["duration_ms"] = json!(900);
        let diff = trace_diff(
            &written(dir.path(), 0xa, &[read("one"), read("one")]),
            &written(dir.path(), 0xb, &[slower, failed]),
        )
        .unwrap();
        assert_eq!(diff.divergences.len(), 1);
        assert_eq!(diff.divergences[0].kind, DiffKind::ResponseChanged);
        assert_eq!(paths(&diff.divergences[0]), ["added /error", "removed /response"]);
    }

    #[test]
    fn a_malformed_exchange_makes_the_trace_inconsistent() {
        let dir = tempfile::tempdir().unwrap();
        let both = exchange("prompt.list", "p", "prompts/list", json!({}), json!({"response": {}, "error": "no"}));
        let good = written(dir.path(), 0xa, &[listed()]);
        let Err(error) = trace_diff(&good, &written(dir.path(), 0xb, &[listed(), both])) else {
            panic!("a malformed exchange was compared")
        };
        assert!(matches!(error, TraceDiffError::Inconsistent { position: 2, .. }), "{error}");
        assert!(error.to_string().ends_with("has both a response and an error; the trace cannot be compared"));
    }

    #[test]
    fn exchange_divergences_are_rendered_with_their_server_and_frames() {
        let dir = tempfile::tempdir().unwrap();
        let diff =
            trace_diff(&written(dir.path(), 0xa, &[read("one"), listed()]), &written(dir.path(), 0xb, &[read("two")]))
                .unwrap();
        let mut human = Vec::new();
        diff.write_human(&mut human).unwrap();
        let human = String::from_utf8(human).unwrap();
        let label = |side: u8| dir.path().join(format!("{side}.jsonl")).display().to_string();
        assert_eq!(
            human.replace(&label(0xa), "A").replace(&label(0xb), "B"),
            "Baseline:  A (trace 0197a000-0000-7000-8000-00000000000a, agent `desk`): 2 frames, 0 calls, 2 exchanges with bridged servers\n\
             Candidate: B (trace 0197a000-0000-7000-8000-00000000000b, agent `desk`): 1 frame, 0 calls, 1 exchange with bridged servers\n\
             \n\
             Divergences:\n  \
             response_changed  resource.read (files): baseline exchange 1 and candidate exchange 1 differ in response (1 change)\n            \
             baseline:  exchange 1 (#1, resources/read)\n            \
             candidate: exchange 1 (#1, resources/read)\n            \
             changed /response/contents/0/text: \"one\" → \"two\"\n  \
             missing_exchange  resource.list (files): baseline exchange 2 is not in the candidate\n            \
             baseline:  exchange 2 (#2, resources/list)\n\
             \n\
             Result: 2 divergences (missing_exchange 1, response_changed 1) between 0 baseline calls and 0 candidate calls\n"
        );
        let mut json = Vec::new();
        diff.write_json(&mut json).unwrap();
        let json: Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(json["exchanges"], json!({"baseline": 2, "candidate": 1}));
        assert_eq!(json["baseline"]["exchanges"], 2);
        let missing = &json["divergences"][1];
        assert_eq!(missing["tool"], Value::Null);
        assert_eq!(
            missing["exchange"],
            json!({"kind": "resource.list", "server": "files", "method": "resources/list"})
        );
        assert_eq!(
            (missing["baseline"].clone(), missing["candidate"].clone()),
            (json!({"exchange": 2, "position": 2}), Value::Null)
        );
        assert_eq!(
            json["divergences"][0]["changes"],
            json!([{"op": "changed", "path": "/response/contents/0/text", "baseline": "one", "candidate": "two"}])
        );
    }
}
