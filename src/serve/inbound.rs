//! What rlp reads of one incoming message, shared by the handler and the
//! fuzz target `jsonrpc` (which drives [`read_message`] with arbitrary
//! bytes): the `_meta` trace id and `traceparent` ([`named_trace`],
//! [`traceparent`]), and for the meta-tools of `--expose core` their
//! arguments ([`crate::discovery::meta`]).

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, GetMeta, JsonRpcMessage, RequestMetaObject as Meta};
use serde_json::Value;
use uuid::Uuid;

use crate::discovery::meta;

/// The `_meta` key a client names its trace with (2026-07-28).
pub const TRACE_META: &str = "dev.runloop/trace_id";
/// The `_meta` key of the W3C trace context.
const TRACEPARENT_META: &str = "traceparent";
/// The `_meta` keys of a caller's tool context (seed 002: rlp's, then JP's),
/// whose `answers` and `options` a call takes.
const TOOL_CONTEXT_META: [&str; 2] = ["dev.runloop/tool", "computer.jp/tool"];

/// The answers and options a call is given in its `_meta` tool context.
pub(crate) type GivenContext = (serde_json::Map<String, Value>, serde_json::Map<String, Value>);

/// The `answers` and `options` of the tool context a request's `_meta`
/// carries (`dev.runloop/tool`, else seed 002's `computer.jp/tool`); empty
/// when it carries none, an error naming the member that is not an object.
pub(crate) fn given_context(meta: &Meta) -> Result<GivenContext, String> {
    let Some((key, context)) = TOOL_CONTEXT_META.iter().find_map(|key| meta.get(*key).map(|c| (*key, c))) else {
        return Ok(Default::default());
    };
    let Value::Object(context) = context else { return Err(format!("`_meta` `{key}` must be an object")) };
    let member = |name: &str| match context.get(name) {
        None | Some(Value::Null) => Ok(serde_json::Map::new()),
        Some(Value::Object(map)) => Ok(map.clone()),
        Some(_) => Err(format!("`_meta` `{key}` `{name}` must be an object")),
    };
    Ok((member("answers")?, member("options")?))
}

/// The trace a request's `_meta` names: none, or an error when it is not a
/// UUID string (the value quoted, cut short).
pub(crate) fn named_trace(meta: &Meta) -> Result<Option<Uuid>, String> {
    let Some(named) = meta.get(TRACE_META) else { return Ok(None) };
    named.as_str().and_then(|text| Uuid::parse_str(text).ok()).map(Some).ok_or_else(|| {
        let quoted = crate::text::ellipsize(&named.to_string(), 80);
        format!("`_meta` `{TRACE_META}` must be a UUID string, not {quoted}")
    })
}

/// The `traceparent` a request's `_meta` carries, if a string (the runtime
/// records it only in its W3C form).
pub(crate) fn traceparent(meta: &Meta) -> Option<String> {
    meta.get(TRACEPARENT_META).and_then(Value::as_str).map(str::to_string)
}

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
    /// Whether its `_meta` tool context (answers, options), if any, reads.
    pub context_reads: bool,
    /// For a meta-tool of `--expose core`, whether its arguments are valid.
    pub meta_arguments: Option<bool>,
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
    let mut arguments = params.arguments;
    let argument_count = arguments.as_ref().map_or(0, serde_json::Map::len);
    Ok(Some(InboundCall {
        tool: params.name.to_string(),
        arguments: argument_count,
        trace_id: named_trace(&meta).ok().flatten(),
        traceparent_recorded: traceparent(&meta).is_some_and(|t| crate::event::traceparent::is_traceparent(&t)),
        progress: meta.get_progress_token().is_some(),
        resumes: params.request_state.is_some(),
        context_reads: given_context(&meta).is_ok(),
        meta_arguments: meta::read(&params.name, &mut arguments).map(|read| read.is_ok()),
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
        assert!(read.trace_id.is_some() && read.context_reads);
        assert_eq!(read.meta_arguments, None);
        let jp = br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t",
            "_meta":{"computer.jp/tool":{"name":"t","answers":"yes"}}}}"#;
        assert!(!read_message(jp).unwrap().unwrap().context_reads);
        let search = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"rlp.search_tools",
            "arguments":{"query":7}}}"#;
        assert_eq!(read_message(search).unwrap().unwrap().meta_arguments, Some(false));
        assert_eq!(read_message(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#), Ok(None));
        assert!(read_message(b"{").is_err());
        let malformed = read_message(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}"#);
        assert!(!matches!(malformed, Ok(Some(_))), "{malformed:?}");
    }
}
