//! `rlp serve` acknowledges a call only once its frames are durable: a
//! server killed with SIGKILL in the middle of concurrent calls has every
//! acknowledged call's frames in its ledger, and the chain still verifies.
//! Driven with raw JSON-RPC lines over stdio (the MCP client tests are in
//! `serve`).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use serde_json::{Value, json};

use crate::support::{TestDir, bundle, ledger};

/// Calls sent at once.
const CALLS: usize = 16;
/// Responses read before the server is killed.
const READ_BEFORE_KILL: usize = 6;

fn line(message: &Value) -> String {
    format!("{message}\n")
}

#[test]
fn a_killed_server_loses_no_acknowledged_frame() {
    let td = TestDir::new();
    let tool = bundle::runtime_tool("echo", "echo_blob.sh", &[]);
    let dir = td.bundle("durable", json!([tool]), "[capabilities]\nexec = true\n");
    let mut server = td
        .command()
        .args(["serve", dir.to_str().unwrap(), "--max-calls", "4"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = server.stdin.take().unwrap();
    let mut stdout = BufReader::new(server.stdout.take().unwrap());
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "kill-test", "version": "1"}}});
    stdin.write_all(line(&initialize).as_bytes()).unwrap();
    let mut reply = String::new();
    stdout.read_line(&mut reply).unwrap();
    assert!(reply.contains("\"protocolVersion\":\"2025-11-25\""), "{reply}");
    let mut batch = line(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    for id in 1..=CALLS {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"n": id}}});
        batch.push_str(&line(&call));
    }
    stdin.write_all(batch.as_bytes()).unwrap();
    let mut acknowledged = BTreeSet::new();
    while acknowledged.len() < READ_BEFORE_KILL {
        reply.clear();
        assert!(stdout.read_line(&mut reply).unwrap() > 0, "the server ended early");
        let message: Value = serde_json::from_str(&reply).unwrap();
        let meta = &message["result"]["_meta"]["dev.runloop/call"];
        assert_eq!(meta["outcome"], "ok", "{message}");
        acknowledged.insert(meta["invocation_id"].as_str().unwrap().to_string());
    }
    server.kill().unwrap();
    server.wait().unwrap();

    let events = ledger::events(&td.ledger_path());
    let recorded = |kind: &str| -> BTreeSet<String> {
        events
            .iter()
            .filter(|e| e.kind == kind)
            .map(|e| ledger::payload(e)["invocation_id"].as_str().unwrap().to_string())
            .collect()
    };
    let (calls, results) = (recorded("tool.call"), recorded("tool.result"));
    for invocation in &acknowledged {
        assert!(calls.contains(invocation) && results.contains(invocation), "{invocation} was acknowledged, not kept");
    }
    let (out, _) = td.expect(0, &["trace", "verify"]);
    assert!(out.contains("every hash, chain, head and checkpoint checks out"), "{out}");
}
