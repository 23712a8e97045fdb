//! Requests for a bridged server besides tool calls (`resources/*`,
//! `prompts/*`, `completion/complete`), sent as a client of `rlp serve`
//! made them (names already the server's own) over the session its tool
//! calls share ([`Runtime::server_session`]). Lists are answered whole:
//! every page of the server's, in one answer. Answers are scrubbed of the
//! server's secrets.

use std::time::Duration;

use rmcp::model::{ClientRequest, ServerResult};
use rmcp::service::ServiceError;
use serde_json::{Value, json};

use crate::runtime::Runtime;
use crate::runtime::mcp::session::Session;

/// Longest a server may take to answer one request (each page of a list).
pub(crate) const ANSWER_WITHIN: Duration = Duration::from_secs(60);
/// Most pages of one list read from a server.
const MAX_PAGES: usize = 100;
/// The list methods, each with the member its items are in.
const LISTS: [(&str, &str); 3] =
    [("resources/list", "resources"), ("resources/templates/list", "resourceTemplates"), ("prompts/list", "prompts")];

/// Why a server gave no answer: its own JSON-RPC error, or why it could
/// not be asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServerError {
    /// The server's JSON-RPC error code, when the server answered with one.
    pub code: Option<i32>,
    /// What went wrong (scrubbed).
    pub message: String,
}

impl ServerError {
    /// A failure with no answer from the server.
    fn unanswered(message: String) -> ServerError {
        ServerError { code: None, message }
    }
}

impl Runtime {
    /// Whether the exposed server `server` (started if need be) offers
    /// `what` (`resources`, `prompts`, `completions`), as it said at the
    /// handshake.
    pub(crate) fn server_offers(&self, server: &str, what: &str) -> Result<bool, ServerError> {
        Ok(self.server_session(server).map_err(ServerError::unanswered)?.offers(what))
    }

    /// Sends `method` with `params` to the exposed server `server` (started
    /// if need be) and returns its answer as JSON: every page, for a list.
    pub(crate) fn ask_server(&self, server: &str, method: &str, params: Value) -> Result<Value, ServerError> {
        let session = self.server_session(server).map_err(ServerError::unanswered)?;
        let scrubber = &session.started.scrubber;
        let answer = match LISTS.iter().find(|(list, _)| *list == method) {
            Some((_, items)) => every_page(&session, method, items),
            None => session.request(method, params),
        };
        match answer {
            Ok(answer) => Ok(scrubber.scrubbed(&answer)),
            Err(error) => Err(ServerError { code: error.code, message: scrubber.scrub_string(&error.message) }),
        }
    }
}

/// Every page of list `method`, its items (in member `items`) in one answer.
fn every_page(session: &Session, method: &str, items: &str) -> Result<Value, ServerError> {
    let mut all = Vec::new();
    let mut cursor: Option<Value> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor.take().map_or_else(|| json!({}), |cursor| json!({ "cursor": cursor }));
        let mut page = session.request(method, params)?;
        if let Some(Value::Array(found)) = page.get_mut(items).map(Value::take) {
            all.extend(found);
        }
        match page.get("nextCursor") {
            Some(next @ Value::String(_)) => cursor = Some(next.clone()),
            _ => return Ok(json!({ items: all })),
        }
    }
    Err(ServerError::unanswered(format!(
        "the server's {method} went on past {MAX_PAGES} pages; rlp reads no more"
    )))
}

impl Session {
    /// Sends one request and waits for its answer, at most [`ANSWER_WITHIN`].
    pub(crate) fn request(&self, method: &str, params: Value) -> Result<Value, ServerError> {
        let request: ClientRequest = serde_json::from_value(json!({"method": method, "params": params}))
            .map_err(|e| ServerError::unanswered(format!("not a valid {method} request: {e}")))?;
        let service = self.service();
        let answered = self.handle().block_on(async move {
            tokio::time::timeout(ANSWER_WITHIN, service.send_request(request)).await
        });
        match answered {
            Ok(Ok(result)) => Ok(answer_json(&result)),
            Ok(Err(ServiceError::McpError(error))) => {
                Err(ServerError { code: Some(error.code.0), message: error.message.to_string() })
            }
            Ok(Err(e)) => Err(ServerError::unanswered(format!("the server `{}` did not answer {method}: {e}", self.server))),
            Err(_) => Err(ServerError::unanswered(format!(
                "the server `{}` did not answer {method} within {} s",
                self.server,
                ANSWER_WITHIN.as_secs()
            ))),
        }
    }
}

/// A server's answer as JSON.
fn answer_json(result: &ServerResult) -> Value {
    serde_json::to_value(result).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_forwarded_method_reads_as_a_client_request() {
        for (method, params) in [
            ("resources/list", json!({})),
            ("resources/templates/list", json!({"cursor": "2"})),
            ("resources/read", json!({"uri": "test://static-text"})),
            ("resources/subscribe", json!({"uri": "test://watched"})),
            ("resources/unsubscribe", json!({"uri": "test://watched"})),
            ("prompts/list", json!({})),
            ("prompts/get", json!({"name": "p", "arguments": {"a": "b"}})),
            (
                "completion/complete",
                json!({"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": "x"}}),
            ),
        ] {
            let request: Result<ClientRequest, _> =
                serde_json::from_value(json!({"method": method, "params": params}));
            assert!(request.is_ok(), "{method}: {request:?}");
        }
    }
}
