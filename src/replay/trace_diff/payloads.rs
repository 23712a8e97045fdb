//! The second pass of `rlp trace diff`: the arguments and results of the
//! calls that differ, read again (streaming, keeping only those).

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use serde_json::Value;

use crate::event::{Outcome, Payload};
use crate::ledger::query::{TraceInput, for_each_frame};
use crate::replay::trace_diff::digest::{CallDigest, Side};
use crate::replay::trace_diff::{DiffKind, Found, TraceDiffError};

/// For a kind whose paths are listed: the frame whose payload is compared
/// (the call frame for arguments, the final result frame for results).
pub(super) fn compared(kind: DiffKind) -> Option<fn(&CallDigest) -> u64> {
    match kind {
        DiffKind::ArgsMismatch => Some(|call| call.position),
        DiffKind::ResultChanged => Some(|call| call.result_position.unwrap_or(0)),
        _ => None,
    }
}

/// The frames of `side` whose payloads the divergences need (`pick`: the
/// call of that side).
pub(super) fn wanted(found: &[Found], pick: fn(&Found) -> Option<usize>, side: &Side) -> HashSet<u64> {
    found.iter().filter_map(|divergence| Some(compared(divergence.kind)?(&side.calls[pick(divergence)?]))).collect()
}

/// The arguments (call frames) and results (result frames) at the
/// positions in `want`.
pub(super) fn read(input: &TraceInput, want: &HashSet<u64>) -> Result<HashMap<u64, Value>, TraceDiffError> {
    let mut values = HashMap::with_capacity(want.len());
    if want.is_empty() {
        return Ok(values);
    }
    let last = want.iter().copied().max().unwrap_or(0);
    for_each_frame(input, |frame| {
        if want.contains(&frame.position) {
            match frame.body {
                Payload::ToolCall(call) => {
                    values.insert(frame.position, call.args);
                }
                Payload::ToolResult(result) => {
                    if let Outcome::Result(value) = result.outcome {
                        values.insert(frame.position, value);
                    }
                }
                _ => {}
            }
        }
        if frame.position >= last { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    })
    .map_err(TraceDiffError::Input)?;
    Ok(values)
}
