//! Exchanges with bridged servers: the frames of what passed between a
//! client of `rlp serve` and a bridged MCP server besides tool calls
//! (`resource.*`, `prompt.*`, `completion.complete`, `server.changed`;
//! payload [`ServerExchangePayload`]). They belong to no call.
//!
//! Replay checks and counts them but never runs them again; `rlp trace
//! diff` compares them. An exchange is one of two shapes:
//!
//! - a **request** (`resources/list`, `resources/read`, `prompts/get`, …):
//!   exactly one of `response` and `error`;
//! - a **notification** (`resource.updated`, `server.changed`, or any method
//!   under `notifications/`): no `error`, and no `response` — except that a
//!   `server.changed` of tools carries in `response` what rlp found changed
//!   (`{added, removed, changed}`).

use serde_json::{Map, Value};

use crate::event::{EventKind, ServerExchangePayload};

/// Whether a frame of `kind` for `method` records a notification (which
/// gets no answer).
pub(crate) fn is_notification(kind: EventKind, method: &str) -> bool {
    matches!(kind, EventKind::ResourceUpdated | EventKind::ServerChanged) || method.starts_with("notifications/")
}

/// What is wrong with an exchange frame of `kind`, in one sentence, if
/// anything (see the module documentation).
pub(crate) fn problem(kind: EventKind, exchange: &ServerExchangePayload) -> Option<String> {
    let what = format!("the {kind} frame (`{}` of server `{}`)", exchange.method, exchange.server);
    let (response, error) = (exchange.response.is_some(), exchange.error.is_some());
    if is_notification(kind, &exchange.method) {
        let findings = kind == EventKind::ServerChanged;
        return match (response && !findings, error) {
            (true, _) => Some(format!("{what} records a notification, which gets no response, but has one")),
            (_, true) => Some(format!("{what} records a notification, which gets no error, but has one")),
            _ => None,
        };
    }
    match (response, error) {
        (true, true) => Some(format!("{what} has both a response and an error")),
        (false, false) => Some(format!("{what} has neither a response nor an error")),
        _ => None,
    }
}

/// The answer of an exchange as compared: `{"response": …}` or
/// `{"error": "…"}` (`{}` for a notification), the members of its payload.
pub(crate) fn answer(exchange: &ServerExchangePayload) -> Value {
    let mut members = Map::new();
    if let Some(response) = &exchange.response {
        members.insert("response".into(), response.clone());
    }
    if let Some(error) = &exchange.error {
        members.insert("error".into(), Value::String(error.clone()));
    }
    Value::Object(members)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::event::PAYLOAD_VERSION;
    use serde_json::json;

    /// An exchange of `server` for `method`.
    pub(crate) fn exchange(
        server: &str,
        method: &str,
        request: Value,
        response: Option<Value>,
        error: Option<&str>,
    ) -> ServerExchangePayload {
        ServerExchangePayload {
            v: PAYLOAD_VERSION,
            server: server.into(),
            method: method.into(),
            request,
            response,
            error: error.map(str::to_string),
            asked: Vec::new(),
            duration_ms: Some(3),
        }
    }

    #[test]
    fn a_request_has_one_answer_and_a_notification_none_but_what_rlp_found() {
        let read = |response, error| exchange("files", "resources/read", json!({"uri": "f:a"}), response, error);
        assert_eq!(problem(EventKind::ResourceRead, &read(Some(json!({"contents": []})), None)), None);
        assert_eq!(problem(EventKind::ResourceRead, &read(None, Some("gone"))), None);
        assert_eq!(
            problem(EventKind::ResourceRead, &read(Some(json!({})), Some("gone"))).as_deref(),
            Some("the resource.read frame (`resources/read` of server `files`) has both a response and an error")
        );
        assert_eq!(
            problem(EventKind::PromptList, &exchange("p", "prompts/list", json!({}), None, None)).as_deref(),
            Some("the prompt.list frame (`prompts/list` of server `p`) has neither a response nor an error")
        );
        let updated = exchange("files", "notifications/resources/updated", json!({"uri": "f:a"}), None, None);
        assert_eq!(problem(EventKind::ResourceUpdated, &updated), None);
        // What rlp found changed in a server's tools rides on server.changed.
        let found = json!({"added": ["new_tool"], "removed": [], "changed": []});
        let changed = exchange("files", "notifications/tools/list_changed", json!({}), Some(found), None);
        assert_eq!(problem(EventKind::ServerChanged, &changed), None);
        let failed = exchange("files", "notifications/resources/updated", json!({"uri": "f:a"}), None, Some("x"));
        assert!(problem(EventKind::ResourceUpdated, &failed).unwrap().contains("gets no error, but has one"));
        let answered = exchange("files", "notifications/resources/updated", json!({}), Some(json!({})), None);
        assert!(problem(EventKind::ResourceUpdated, &answered).unwrap().contains("gets no response, but has one"));
        // A method under `notifications/` is a notification whatever the kind.
        let odd = exchange("files", "notifications/cancelled", json!({}), Some(json!({})), None);
        assert!(problem(EventKind::CompletionComplete, &odd).is_some());
    }

    #[test]
    fn the_answer_is_the_response_or_the_error() {
        let ok = exchange("s", "prompts/get", json!({"name": "a"}), Some(json!({"messages": []})), None);
        assert_eq!(answer(&ok), json!({"response": {"messages": []}}));
        let failed = exchange("s", "prompts/get", json!({"name": "a"}), None, Some("no such prompt"));
        assert_eq!(answer(&failed), json!({"error": "no such prompt"}));
        assert_eq!(answer(&exchange("s", "notifications/prompts/list_changed", json!({}), None, None)), json!({}));
    }
}
