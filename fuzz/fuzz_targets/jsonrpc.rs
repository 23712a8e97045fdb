//! Fuzzes what `rlp serve` reads of each incoming message before anything
//! runs: `rlp::serve::inbound::read_message` (the MCP SDK's parse of one
//! JSON-RPC message, then what the handler reads of a `tools/call`) on
//! arbitrary bytes. Nothing may panic, the same bytes always read the same,
//! and what is read must agree with a plain JSON reading of the bytes:
//!
//! - an accepted message is a JSON object;
//! - a `tools/call` read is a request of that method whose `params.name`
//!   is the tool read and whose `params.arguments` holds as many entries as
//!   were read;
//! - a trace id is read only from a `_meta` `dev.runloop/trace_id` string,
//!   progress only with a `_meta` `progressToken`, a resumption only with a
//!   `requestState`;
//! - a meta-tool's arguments (`rlp.search_tools`, `rlp.describe_tools`,
//!   `rlp.call_tool`) are read by the readers `--expose core` uses, and
//!   only those tools' are.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rlp::serve::inbound::read_message;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let read = read_message(data);
    assert_eq!(read, read_message(data), "the same bytes read differently");
    let Ok(read) = read else { return };
    let message: Value = serde_json::from_slice(data).expect("an accepted message is JSON");
    assert!(message.is_object(), "an accepted message is an object: {message}");
    let Some(call) = read else { return };
    assert_eq!(message["method"], "tools/call", "{message}");
    let params = &message["params"];
    assert_eq!(params["name"].as_str(), Some(call.tool.as_str()), "{message}");
    assert_eq!(params["arguments"].as_object().map_or(0, |a| a.len()), call.arguments, "{message}");
    let meta = &params["_meta"];
    if let Some(trace_id) = call.trace_id {
        let named = meta["dev.runloop/trace_id"].as_str().expect("a trace id is read from a string");
        let digits: String = named.chars().filter(char::is_ascii_hexdigit).collect();
        assert!(digits.to_ascii_lowercase().contains(&trace_id.simple().to_string()), "{named} read as {trace_id}");
    }
    assert!(!call.progress || !meta["progressToken"].is_null(), "{message}");
    assert!(!call.resumes || !params["requestState"].is_null(), "{message}");
    let meta_tool = ["rlp.search_tools", "rlp.describe_tools", "rlp.call_tool"].contains(&call.tool.as_str());
    assert_eq!(call.meta_arguments.is_some(), meta_tool, "{message}");
});
