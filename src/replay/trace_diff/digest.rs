//! The first pass of `rlp trace diff`: one compact digest per call of a
//! trace, read streaming.
//!
//! A call is its `tool.call` frame and its final `tool.result` (a result
//! with `error.will_retry` is an attempt that was retried; the last attempt
//! is the call's outcome). Only what the comparison needs is kept: the tool,
//! a 16-byte BLAKE3 of the arguments and of the result in RFC 8785 canonical
//! form (so key order and number spelling do not matter), the error kind,
//! and where the call is (positions, invocation id). Ids, timestamps,
//! durations and hashes are not compared: they differ between any two runs.

use std::collections::HashMap;
use std::ops::ControlFlow;

use serde_json::Value;
use uuid::Uuid;

use crate::event::canonical::canonical_text;
use crate::event::{EventKind, Outcome, Payload};
use crate::ledger::pending::PendingCalls;
use crate::ledger::query::{TraceInput, for_each_frame};
use crate::replay::trace_diff::TraceDiffError;

/// A 16-byte BLAKE3 of a value's canonical JSON.
pub(crate) type Digest = [u8; 16];

/// The digest of a JSON value.
pub(crate) fn digest(value: &Value) -> Digest {
    let hash = blake3::hash(canonical_text(value).as_bytes());
    let mut out = [0u8; 16];
    out.copy_from_slice(&hash.as_bytes()[..16]);
    out
}

/// How a call ended, as compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OutcomeDigest {
    /// A result, by digest.
    Result(Digest),
    /// An error, by kind (an index into [`Side::names`]).
    Error(u32),
    /// No final result in the trace.
    NoResult,
}

/// One call of a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CallDigest {
    /// Position of the call frame.
    pub position: u64,
    /// Position of the final result frame.
    pub result_position: Option<u64>,
    /// The invocation id.
    pub invocation_id: Uuid,
    /// The tool id (an index into [`Side::names`]).
    pub tool: u32,
    /// Digest of the arguments.
    pub args: Digest,
    /// The final outcome.
    pub outcome: OutcomeDigest,
}

/// One side of a diff: where it was read from and its calls in call order.
#[derive(Debug)]
pub(crate) struct Side {
    /// The input as given (a file path or `trace <id>`).
    pub label: String,
    /// The trace id of the first frame.
    pub trace_id: Uuid,
    /// The agent of the first frame.
    pub agent: String,
    /// Frames read.
    pub frames: u64,
    /// Tool ids and error kinds, interned.
    pub names: Vec<String>,
    /// The calls, by call frame position.
    pub calls: Vec<CallDigest>,
}

impl Side {
    /// The interned string `index`.
    pub(crate) fn name(&self, index: u32) -> &str {
        &self.names[index as usize]
    }
}

struct Loader {
    side: Side,
    interned: HashMap<String, u32>,
    pending: PendingCalls<(u32, Digest)>,
}

impl Loader {
    fn intern(&mut self, name: &str) -> u32 {
        if let Some(&index) = self.interned.get(name) {
            return index;
        }
        let index = self.side.names.len() as u32;
        self.side.names.push(name.to_string());
        self.interned.insert(name.to_string(), index);
        index
    }

    /// Takes in one frame; a frame that makes the trace inconsistent is an
    /// error message.
    fn frame(&mut self, position: u64, body: Payload) -> Result<(), String> {
        match body {
            Payload::ToolCall(call) => {
                let tool = self.intern(&call.tool);
                self.pending.open(call.invocation_id, position, (tool, digest(&call.args))).map_err(|earlier| {
                    format!(
                        "a second {} for invocation {} while the call at #{earlier} is still waiting",
                        EventKind::ToolCall,
                        call.invocation_id
                    )
                })
            }
            Payload::ToolResult(result) => {
                if self.pending.get(&result.invocation_id).is_none() {
                    return Err(format!(
                        "a {} for invocation {} with no {} waiting for it",
                        EventKind::ToolResult,
                        result.invocation_id,
                        EventKind::ToolCall
                    ));
                }
                if result.will_retry() {
                    return Ok(());
                }
                let outcome = match &result.outcome {
                    Outcome::Result(value) => OutcomeDigest::Result(digest(value)),
                    Outcome::Error(error) => OutcomeDigest::Error(self.intern(&error.error.kind)),
                };
                if let Some(call) = self.pending.close(&result.invocation_id) {
                    self.push(result.invocation_id, call.position, call.data, Some(position), outcome);
                }
                Ok(())
            }
            // Only calls and their results are compared.
            _ => Ok(()),
        }
    }

    fn push(
        &mut self,
        id: Uuid,
        position: u64,
        (tool, args): (u32, Digest),
        result: Option<u64>,
        outcome: OutcomeDigest,
    ) {
        self.side.calls.push(CallDigest { position, result_position: result, invocation_id: id, tool, args, outcome });
    }

    fn finish(mut self) -> Side {
        for (id, call) in std::mem::take(&mut self.pending).into_sorted() {
            self.push(id, call.position, call.data, None, OutcomeDigest::NoResult);
        }
        // Calls were pushed at their final result; compare in call order.
        self.side.calls.sort_by_key(|call| call.position);
        self.side
    }
}

/// Reads the calls of `input`.
pub(crate) fn load(input: &TraceInput) -> Result<Side, TraceDiffError> {
    let side = Side {
        label: input.to_string(),
        trace_id: Uuid::nil(),
        agent: String::new(),
        frames: 0,
        names: Vec::new(),
        calls: Vec::new(),
    };
    let mut loader = Loader { side, interned: HashMap::new(), pending: PendingCalls::new() };
    let mut failure = None;
    let frames = for_each_frame(input, |frame| {
        if frame.position == 1 {
            loader.side.trace_id = frame.provenance.trace_id;
            loader.side.agent = frame.provenance.agent.clone();
        }
        let position = frame.position;
        match loader.frame(position, frame.body) {
            Ok(()) => ControlFlow::Continue(()),
            Err(message) => {
                failure = Some(TraceDiffError::Inconsistent { input: input.to_string(), position, message });
                ControlFlow::Break(())
            }
        }
    })
    .map_err(TraceDiffError::Input)?;
    if let Some(failure) = failure {
        return Err(failure);
    }
    loader.side.frames = frames;
    Ok(loader.finish())
}
