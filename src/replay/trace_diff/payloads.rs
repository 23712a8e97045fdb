//! The second pass of `rlp trace diff`: the arguments, results and answers
//! of the calls and exchanges that differ, read again (streaming, keeping
//! only those).

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use serde_json::Value;

use crate::event::{Outcome, Payload};
use crate::ledger::query::{TraceInput, for_each_frame};
use crate::replay::diff::{Answer, Diff, result_diff};
use crate::replay::exchange;
use crate::replay::replayer::MAX_LISTED_CHANGES;
use crate::replay::trace_diff::digest::Side;
use crate::replay::trace_diff::{DiffKind, Found, TraceDiffError};

/// What one frame holds that is compared: a call's arguments, a result with
/// the content blocks sent beside it, or an exchange's answer.
#[derive(Debug, PartialEq)]
pub(super) struct Compared {
    /// The arguments, the result, or the answer (`{"response": …}` or
    /// `{"error": …}`).
    pub value: Value,
    /// A result's content blocks.
    pub content: Option<Vec<Value>>,
}

impl Compared {
    fn bare(value: Value) -> Self {
        Compared { value, content: None }
    }

    /// The paths that differ from this (baseline) to `candidate`.
    pub(super) fn diff(&self, candidate: &Compared) -> Diff {
        result_diff(
            Answer::of(&self.value, self.content.as_deref()),
            Answer::of(&candidate.value, candidate.content.as_deref()),
            MAX_LISTED_CHANGES,
        )
    }
}

/// For a kind whose paths are listed: the frame of call or exchange `index`
/// of `side` whose payload is compared (the call frame for arguments, the
/// final result frame for results, the exchange's frame for answers).
pub(super) fn compared(kind: DiffKind, side: &Side, index: usize) -> Option<u64> {
    match kind {
        DiffKind::ArgsMismatch => Some(side.calls[index].position),
        DiffKind::ResultChanged => side.calls[index].result_position,
        DiffKind::ResponseChanged => Some(side.exchanges[index].position),
        _ => None,
    }
}

/// The frames of `side` whose payloads the divergences need (`pick`: the
/// call or exchange of that side).
pub(super) fn wanted(found: &[Found], pick: fn(&Found) -> Option<usize>, side: &Side) -> HashSet<u64> {
    found.iter().filter_map(|divergence| compared(divergence.kind, side, pick(divergence)?)).collect()
}

/// What is compared of the frames at the positions in `want`.
pub(super) fn read(input: &TraceInput, want: &HashSet<u64>) -> Result<HashMap<u64, Compared>, TraceDiffError> {
    let mut values = HashMap::with_capacity(want.len());
    if want.is_empty() {
        return Ok(values);
    }
    let last = want.iter().copied().max().unwrap_or(0);
    for_each_frame(input, |frame| {
        if want.contains(&frame.position)
            && let Some(compared) = compared_of(frame.body)
        {
            values.insert(frame.position, compared);
        }
        if frame.position >= last { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    })
    .map_err(TraceDiffError::Input)?;
    Ok(values)
}

/// What is compared of a frame's payload, for the frames that have it.
fn compared_of(body: Payload) -> Option<Compared> {
    if let Some(exchange) = body.exchange() {
        return Some(Compared::bare(exchange::answer(exchange)));
    }
    match body {
        Payload::ToolCall(call) => Some(Compared::bare(call.args)),
        Payload::ToolResult(result) => match result.outcome {
            Outcome::Result(value) => Some(Compared { value, content: result.content }),
            Outcome::Error(_) => None,
        },
        _ => None,
    }
}
