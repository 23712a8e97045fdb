//! What RFC 8785 canonicalisation costs per frame, and why rlp writes it
//! itself: the frames of the replay benchmark's trace (bench/replay_trace.py:
//! a call and a result per tool call) are parsed as import and file replay
//! parse them, then their payload and provenance are canonicalised by rlp's
//! writer (`rlp::event::canonical`) and by a general RFC 8785 serializer (the
//! `serde_json_canonicalizer` crate), which must give the same text.
//!
//! Usage: `bench_canonical [FRAMES]` (default 400000), built with
//! `--release`. Prints a Markdown table of the median of 5 rounds.

// An example program: it prints what it finds and runs what it measures.
#![allow(unreachable_pub, clippy::print_stdout, clippy::print_stderr, clippy::disallowed_methods)]

use std::time::Instant;

use rlp::event::canonical::canonical_text;
use serde_json::{Value, json};

const ROUNDS: usize = 5;

fn frames(count: u64) -> Vec<String> {
    let trace = "0197b0ff-0000-7000-8000-000000000001";
    let tools = ["bench.echo", "bench.sum", "bench.lookup", "bench.store"];
    (0..count)
        .map(|position| {
            let call = position / 2;
            let invocation = format!("0197b000-0000-7000-8000-{call:012x}");
            let tool = tools[(call % 4) as usize];
            let payload = if position % 2 == 0 {
                json!({"v": 1, "tool": tool, "args": {"n": call, "text": format!("item-{call}")},
                       "invocation_id": invocation, "input_schema": "inline",
                       "input_schema_blake3": "0".repeat(64), "tags": ["bench"]})
            } else {
                json!({"v": 1, "invocation_id": invocation, "attempt": 1, "duration_ms": 3,
                       "result": {"ok": true, "n": call, "echo": format!("item-{call}")}})
            };
            let provenance =
                json!({"agent": "bench", "msg_id": format!("0197b001-0000-7000-8000-{position:012x}"), "trace_id": trace});
            json!({"id": position + 1, "ts_ms": 1_764_000_000_000u64 + position, "actor": "runtime",
                   "kind": "frame", "scope": "bench", "payload": payload, "provenance": provenance})
            .to_string()
        })
        .collect()
}

/// Microseconds per frame of `work` over every line, the median of the rounds.
fn per_frame(lines: &[String], work: impl Fn(&Value) -> usize) -> f64 {
    let mut rounds: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            let mut bytes = 0;
            for line in lines {
                let frame: Value = serde_json::from_str(line).unwrap_or(Value::Null);
                bytes += work(&frame);
            }
            std::hint::black_box(bytes);
            started.elapsed().as_secs_f64() * 1e6 / lines.len() as f64
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[ROUNDS / 2]
}

fn main() {
    let count = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(400_000);
    let lines = frames(count);
    let library = |value: &Value| serde_json_canonicalizer::to_string(value).unwrap_or_default();
    for line in &lines {
        let frame: Value = serde_json::from_str(line).unwrap_or(Value::Null);
        for part in [&frame["payload"], &frame["provenance"]] {
            assert_eq!(canonical_text(part), library(part), "the two writers differ on {part}");
        }
    }
    let parse = per_frame(&lines, |_| 0);
    let ours = per_frame(&lines, |f| canonical_text(&f["payload"]).len() + canonical_text(&f["provenance"]).len());
    let general = per_frame(&lines, |f| library(&f["payload"]).len() + library(&f["provenance"]).len());
    println!("| per frame ({count} frames, median of {ROUNDS} rounds) | µs |");
    println!("|---|---:|");
    println!("| parse the line (serde_json) | {parse:.2} |");
    println!("| canonicalise payload + provenance: rlp's writer | {:.2} |", ours - parse);
    println!("| canonicalise payload + provenance: serde_json_canonicalizer | {:.2} |", general - parse);
}
