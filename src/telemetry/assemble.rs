//! Frames grouped into invocations, each handed over once it has ended:
//! live, batch by batch as the runtime records them; after the fact, frame
//! by frame as a trace is read.
//!
//! An invocation ends with its final result (one without `will_retry`).
//! One refused before it ran has no call frame: live, it ends with the
//! batch that recorded it (the runtime records such a call's frames in one
//! batch, when it refuses it); read back, when the trace has been read
//! ([`Assembler::drain`]), with the calls that never got a result.

use std::collections::HashMap;

use uuid::Uuid;

use crate::event::Payload;
use crate::telemetry::span::{Frame, Invocation};

/// Invocations being assembled.
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    open: HashMap<Uuid, Open>,
    /// The order of arrival of the next new invocation.
    next: u64,
    /// Most invocations open at once (live); past it, the oldest is
    /// dropped unfinished. `None`: no bound (a trace read back).
    limit: Option<usize>,
}

/// An invocation that has not ended yet.
#[derive(Debug)]
struct Open {
    /// Its order of arrival.
    order: u64,
    /// Whether its call frame has been seen.
    called: bool,
    invocation: Invocation,
}

impl Assembler {
    /// An assembler that keeps at most `limit` invocations open, dropping
    /// the oldest past it, so memory stays bounded whatever the frames.
    pub(crate) fn bounded(limit: usize) -> Self {
        Assembler { limit: Some(limit.max(1)), ..Assembler::default() }
    }

    /// An assembler without a bound (for one recorded trace).
    pub(crate) fn unbounded() -> Self {
        Assembler::default()
    }

    /// Adds a frame of trace `trace_id` made by `agent`; returns its
    /// invocation when the frame ends it (a final result). A frame of no
    /// invocation (a replay link, a discovery) is ignored.
    pub(crate) fn add(&mut self, trace_id: Uuid, agent: &str, frame: Frame) -> Option<Invocation> {
        let invocation_id = frame.body.invocation_id()?;
        let ends = matches!(&frame.body, Payload::ToolResult(result) if !result.will_retry());
        let called = matches!(frame.body, Payload::ToolCall(_));
        if !self.open.contains_key(&invocation_id) {
            self.make_room();
            let order = self.next;
            self.next += 1;
            let invocation = Invocation { trace_id, invocation_id, agent: agent.to_string(), frames: Vec::new() };
            self.open.insert(invocation_id, Open { order, called: false, invocation });
        }
        let open = self.open.get_mut(&invocation_id)?;
        open.called |= called;
        open.invocation.frames.push(frame);
        if ends { self.open.remove(&invocation_id).map(|open| open.invocation) } else { None }
    }

    /// Ends the invocations among `touched` (those a batch just recorded)
    /// that have no call frame: the runtime records a call refused before
    /// it ran in one batch.
    pub(crate) fn end_batch(&mut self, touched: &[Uuid]) -> Vec<Invocation> {
        let mut ended = Vec::new();
        for id in touched {
            if self.open.get(id).is_some_and(|open| !open.called)
                && let Some(open) = self.open.remove(id)
            {
                ended.push(open.invocation);
            }
        }
        ended
    }

    /// Every invocation still open, oldest first: calls refused before they
    /// ran, and calls that never got a result.
    pub(crate) fn drain(&mut self) -> Vec<Invocation> {
        let mut open: Vec<Open> = self.open.drain().map(|(_, open)| open).collect();
        open.sort_by_key(|open| open.order);
        open.into_iter().map(|open| open.invocation).collect()
    }

    /// Drops the oldest open invocations while the bound is reached.
    fn make_room(&mut self) {
        let Some(limit) = self.limit else { return };
        while self.open.len() >= limit {
            let oldest = self.open.iter().min_by_key(|(_, open)| open.order).map(|(id, _)| *id);
            match oldest {
                Some(id) => self.open.remove(&id),
                None => break,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventKind;
    use serde_json::json;

    const TRACE: Uuid = Uuid::from_u128(1);

    fn frame(invocation: u128, kind: EventKind, payload: serde_json::Value) -> Frame {
        let mut payload = payload;
        payload["invocation_id"] = json!(Uuid::from_u128(invocation));
        Frame { ts_ms: 0, body: Payload::read(kind, payload).unwrap() }
    }

    fn audit(invocation: u128, decision: &str) -> Frame {
        frame(invocation, EventKind::CapAudit, json!({"tool": "t", "capability": "exec", "decision": decision}))
    }

    fn call(invocation: u128) -> Frame {
        frame(invocation, EventKind::ToolCall, json!({"tool": "t", "args": {}}))
    }

    fn result(invocation: u128, will_retry: bool) -> Frame {
        frame(invocation, EventKind::ToolResult, json!({"error": {"message": "m", "will_retry": will_retry}}))
    }

    #[test]
    fn an_invocation_ends_with_its_final_result() {
        let mut assembler = Assembler::bounded(8);
        assert_eq!(assembler.add(TRACE, "a", audit(1, "allow")), None);
        assert_eq!(assembler.add(TRACE, "a", call(1)), None);
        assert_eq!(assembler.end_batch(&[Uuid::from_u128(1)]), vec![]);
        assert_eq!(assembler.add(TRACE, "a", result(1, true)), None);
        let ended = assembler.add(TRACE, "a", result(1, false)).unwrap();
        assert_eq!(ended.frames.len(), 4);
        assert_eq!((ended.invocation_id, ended.agent.as_str()), (Uuid::from_u128(1), "a"));
        assert!(assembler.drain().is_empty());
    }

    #[test]
    fn a_refusal_ends_with_its_batch_live_and_at_the_end_read_back() {
        let mut live = Assembler::bounded(8);
        assert_eq!(live.add(TRACE, "a", audit(2, "deny")), None);
        let ended = live.end_batch(&[Uuid::from_u128(2)]);
        assert_eq!(ended.len(), 1);
        let mut read_back = Assembler::unbounded();
        read_back.add(TRACE, "a", audit(2, "deny"));
        read_back.add(TRACE, "a", call(3));
        read_back.add(TRACE, "a", audit(4, "deny"));
        let left: Vec<Uuid> = read_back.drain().into_iter().map(|i| i.invocation_id).collect();
        assert_eq!(left, [2, 3, 4].map(Uuid::from_u128));
    }

    #[test]
    fn the_oldest_open_invocation_makes_room() {
        let mut assembler = Assembler::bounded(2);
        for invocation in 1..=5 {
            assembler.add(TRACE, "a", call(invocation));
        }
        let left: Vec<Uuid> = assembler.drain().into_iter().map(|i| i.invocation_id).collect();
        assert_eq!(left, [4, 5].map(Uuid::from_u128));
    }
}
