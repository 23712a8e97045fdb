//! The first pass of `rlp trace diff`: one compact digest per call and per
//! exchange with a bridged server of a trace, read streaming.
//!
//! A call is its `tool.call` frame and its final `tool.result` (a result
//! with `error.will_retry` is an attempt that was retried; the last attempt
//! is the call's outcome). Only what the comparison needs is kept: the tool,
//! a 16-byte BLAKE3 of the arguments and of the result (with the content
//! blocks a bridged MCP server sent beside it) in RFC 8785 canonical form (so
//! key order and number spelling do not matter), the error kind, and where
//! the call is (positions, invocation id). An exchange
//! ([`crate::replay::exchange`]) is its frame kind, server, method, and
//! BLAKE3 of its request and of its answer (response or error). Ids,
//! timestamps, durations and hashes are not compared: they differ between
//! any two runs.

use std::collections::HashMap;
use std::ops::ControlFlow;

use serde_json::Value;
use uuid::Uuid;

use crate::event::canonical::canonical_text;
use crate::event::placeholder::holds_placeholder;
use crate::event::{EventKind, Outcome, Payload, ServerExchangePayload};
use crate::ledger::pending::PendingCalls;
use crate::ledger::query::{TraceInput, for_each_frame};
use crate::replay::exchange;
use crate::replay::trace_diff::TraceDiffError;

/// A 16-byte BLAKE3 of a value's canonical JSON.
pub(crate) type Digest = [u8; 16];

/// The digest of a JSON value.
pub(crate) fn digest(value: &Value) -> Digest {
    truncated(blake3::hash(canonical_text(value).as_bytes()))
}

/// The digest of a result with the content blocks sent beside it: that of
/// the result alone when there are none; else of the result's canonical
/// text, a NUL (which canonical JSON never holds) and the blocks'.
fn result_digest(value: &Value, content: Option<&[Value]>) -> Digest {
    let Some(blocks) = content else { return digest(value) };
    let mut hasher = blake3::Hasher::new();
    hasher.update(canonical_text(value).as_bytes());
    hasher.update(b"\0");
    for block in blocks {
        hasher.update(canonical_text(block).as_bytes());
        hasher.update(b",");
    }
    truncated(hasher.finalize())
}

/// The first 16 bytes of a hash.
fn truncated(hash: blake3::Hash) -> Digest {
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
    /// Whether the arguments hold a placeholder of a redacted export (so
    /// digests alone cannot tell them equal).
    pub redacted: bool,
    /// The final outcome.
    pub outcome: OutcomeDigest,
}

/// One exchange with a bridged server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ExchangeDigest {
    /// Position of the frame.
    pub position: u64,
    /// The frame's kind (`resource.read`, …).
    pub kind: EventKind,
    /// The server (an index into [`Side::names`]).
    pub server: u32,
    /// The MCP method (an index into [`Side::names`]).
    pub method: u32,
    /// Digest of the request's params.
    pub request: Digest,
    /// Digest of the answer ([`exchange::answer`]).
    pub answer: Digest,
}

/// One side of a diff: where it was read from, its calls in call order and
/// its exchanges in trace order.
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
    /// The exchanges with bridged servers, by position.
    pub exchanges: Vec<ExchangeDigest>,
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
    pending: PendingCalls<(u32, Digest, bool)>,
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
        if let Some(exchange) = body.exchange() {
            return self.exchange(position, body.kind(), exchange);
        }
        match body {
            Payload::ToolCall(call) => {
                let tool = self.intern(&call.tool);
                self.pending
                    .open(call.invocation_id, position, (tool, digest(&call.args), holds_placeholder(&call.args)))
                    .map_err(|earlier| {
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
                    Outcome::Result(value) => OutcomeDigest::Result(result_digest(value, result.content.as_deref())),
                    Outcome::Error(error) => OutcomeDigest::Error(self.intern(&error.error.kind)),
                };
                if let Some(call) = self.pending.close(&result.invocation_id) {
                    self.push(result.invocation_id, call.position, call.data, Some(position), outcome);
                }
                Ok(())
            }
            // Only calls, their results and exchanges are compared.
            _ => Ok(()),
        }
    }

    /// Takes in an exchange frame of `kind`; a malformed one is an error message.
    fn exchange(&mut self, position: u64, kind: EventKind, exchange: &ServerExchangePayload) -> Result<(), String> {
        if let Some(problem) = exchange::problem(kind, exchange) {
            return Err(problem);
        }
        let (server, method) = (self.intern(&exchange.server), self.intern(&exchange.method));
        self.side.exchanges.push(ExchangeDigest {
            position,
            kind,
            server,
            method,
            request: digest(&exchange.request),
            answer: digest(&exchange::answer(exchange)),
        });
        Ok(())
    }

    fn push(
        &mut self,
        id: Uuid,
        position: u64,
        (tool, args, redacted): (u32, Digest, bool),
        result: Option<u64>,
        outcome: OutcomeDigest,
    ) {
        let call = CallDigest { position, result_position: result, invocation_id: id, tool, args, redacted, outcome };
        self.side.calls.push(call);
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
        exchanges: Vec::new(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_result_digest_covers_its_content_blocks() {
        let (result, blocks) = (json!({"n": 1}), [json!({"type": "text", "text": "a"})]);
        assert_eq!(result_digest(&result, None), digest(&result));
        assert_ne!(result_digest(&result, Some(&blocks)), digest(&result));
        assert_ne!(result_digest(&result, Some(&blocks)), result_digest(&result, Some(&[])));
        let reordered = [json!({"text": "a", "type": "text"})];
        assert_eq!(result_digest(&json!({"n": 1.0}), Some(&reordered)), result_digest(&result, Some(&blocks)));
        assert_ne!(
            result_digest(&result, Some(&[json!({"type": "text", "text": "b"})])),
            result_digest(&result, Some(&blocks))
        );
    }
}
