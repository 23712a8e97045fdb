//! What the ledger benchmarks append: a small call frame.

use rlp::event::{EventKind, Provenance, Record, now_ms};
use serde_json::json;

/// Call frame number `n` of trace `trace`.
pub fn frame(trace: uuid::Uuid, n: u64) -> Record {
    Record {
        ts_ms: now_ms(),
        actor: "runtime".into(),
        kind: EventKind::ToolCall,
        scope: "bench".into(),
        payload: json!({"v": 1, "tool": "ok", "args": {"n": n}, "invocation_id": uuid::Uuid::now_v7()}),
        provenance: Provenance { trace_id: trace, msg_id: uuid::Uuid::now_v7(), agent: "bench".into() },
    }
}
