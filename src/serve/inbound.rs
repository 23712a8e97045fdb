//! The checks one incoming message goes through before anything runs,
//! without a peer: the SDK's parse of a JSON-RPC message, and for a
//! `tools/call` what the handler reads of it (tool name, arguments,
//! `_meta` trace id, `traceparent`, progress token, `requestState`). The
//! fuzz target `jsonrpc` drives it with arbitrary bytes.

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, GetMeta, JsonRpcMessage};
use serde_json::Value;

use crate::serve::handler::TRACE_META;

/// What a `tools/call` message asks for, as the handler would read it.
#[derive(Debug, PartialEq)]
pub struct InboundCall {
    /// The tool name.
    pub tool: String,
    /// The number of arguments.
    pub arguments: usize,
    /// The trace named in `_meta`, if it is a UUID.
    pub trace_id: Option<uuid::Uuid>,
    /// Whether the `traceparent` is one rlp records.
    pub traceparent_recorded: bool,
    /// Whether progress was asked for.
    pub progress: bool,
    /// Whether it resumes a parked call.
    pub resumes: bool,
}

/// Parses one message; `Ok(None)` for a valid message that is not a
/// `tools/call`, `Err` with the parse error otherwise.
pub fn read_message(bytes: &[u8]) -> Result<Option<InboundCall>, String> {
    let message: ClientJsonRpcMessage = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let JsonRpcMessage::Request(request) = message else { return Ok(None) };
    // The SDK moves a request's `_meta` out of its params into its extensions.
    let meta = request.request.get_meta().clone();
    let ClientRequest::CallToolRequest(call) = request.request else { return Ok(None) };
    let params = call.params;
    Ok(Some(InboundCall {
        tool: params.name.to_string(),
        arguments: params.arguments.map_or(0, |a| a.len()),
        trace_id: meta.get(TRACE_META).and_then(Value::as_str).and_then(|t| uuid::Uuid::parse_str(t).ok()),
        traceparent_recorded: meta
            .get("traceparent")
            .and_then(Value::as_str)
            .is_some_and(crate::runtime::call::is_traceparent),
        progress: meta.get_progress_token().is_some(),
        resumes: params.request_state.is_some(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_tools_call_and_refuses_garbage() {
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":1},
            "_meta":{"progressToken":7,"dev.runloop/trace_id":"0192f0c1-0000-7000-8000-000000000001",
            "traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}"#;
        let read = read_message(call).unwrap().unwrap();
        assert_eq!(read.tool, "t");
        assert_eq!(read.arguments, 1);
        assert!(read.progress && read.traceparent_recorded && !read.resumes, "{read:?}");
        assert!(read.trace_id.is_some());
        assert_eq!(read_message(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#), Ok(None));
        assert!(read_message(b"{").is_err());
        let malformed = read_message(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}"#);
        assert!(!matches!(malformed, Ok(Some(_))), "{malformed:?}");
    }
}
