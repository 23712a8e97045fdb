//! Requests for a bridged server besides tool calls (`resources/*`,
//! `prompts/*`, `completion/complete`), sent as a client of `rlp serve`
//! made them (names already the server's own) over the session its tool
//! calls share ([`Runtime::server_session`]). Lists are answered whole:
//! every page of the server's, in one answer. Answers are scrubbed of the
//! server's secrets.
//!
//! What a server asks while it answers ([`Relay`]) goes to the client of
//! `rlp serve` as a call's questions do: an elicitation's form as written
//! (declined unasked when a field looks like a secret), sampling when the
//! client samples, each at most [`MAX_ASKS`] times a request; else
//! declined or refused. Each is kept ([`Answered::asked`]) for the
//! exchange's frame.

use std::sync::Arc;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use rmcp::model::{ClientRequest, ServerResult};
use rmcp::service::ServiceError;
use serde_json::{Value, json};

use crate::runtime::Runtime;
use crate::runtime::asking::answer::Answerer;
use crate::runtime::asking::questions::looks_secret;
use crate::runtime::context::Sampler;
use crate::runtime::mcp::client::{CALL, ServerAnswer, ServerAsk, Step};
use crate::runtime::mcp::relayed_sampling;
use crate::runtime::mcp::session::Session;
use crate::runtime::scrub::Scrubber;

/// Most elicitations, and most samplings, a server may have relayed while
/// it answers one request.
const MAX_ASKS: usize = 8;

/// Who answers what a server asks while it answers a request: the client
/// of `rlp serve` that made it, when it takes forms or samples.
#[derive(Clone, Default)]
pub(crate) struct Relay {
    /// Takes elicitation forms as they are.
    pub(crate) answerer: Option<Arc<dyn Answerer>>,
    /// Relays sampling.
    pub(crate) sampler: Option<Arc<dyn Sampler>>,
}

/// A server's answer to one request, and what it asked meanwhile.
#[derive(Debug)]
pub(crate) struct Answered {
    /// The answer (every page, for a list), scrubbed.
    pub(crate) answer: Result<Value, ServerError>,
    /// Each question the server asked: `{method, request, response | error}`, scrubbed.
    pub(crate) asked: Vec<Value>,
}

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
    /// if need be) and returns its answer as JSON (every page, for a list),
    /// what it asks meanwhile answered by `relay`.
    pub(crate) fn ask_server(&self, server: &str, method: &str, params: Value, relay: &Relay) -> Answered {
        let session = match self.server_session(server) {
            Ok(session) => session,
            Err(why) => return Answered { answer: Err(ServerError::unanswered(why)), asked: Vec::new() },
        };
        let mut exchange = Exchange { session: &session, relay, asked: Vec::new() };
        let answer = match LISTS.iter().find(|(list, _)| *list == method) {
            Some((_, items)) => exchange.every_page(method, items),
            None => exchange.request(method, params),
        };
        let scrubber = &session.started.scrubber;
        let answer = match answer {
            Ok(answer) => Ok(scrubber.scrubbed(&answer)),
            Err(error) => Err(ServerError { code: error.code, message: scrubber.scrub_string(&error.message) }),
        };
        Answered { answer, asked: exchange.asked }
    }
}

/// One request of a client to a server, with what the server asks meanwhile.
struct Exchange<'e> {
    session: &'e Session,
    relay: &'e Relay,
    asked: Vec<Value>,
}

impl Exchange<'_> {
    /// Every page of list `method`, its items (in member `items`) in one answer.
    fn every_page(&mut self, method: &str, items: &str) -> Result<Value, ServerError> {
        let mut all = Vec::new();
        let mut cursor: Option<Value> = None;
        for _ in 0..MAX_PAGES {
            let params = cursor.take().map_or_else(|| json!({}), |cursor| json!({ "cursor": cursor }));
            let mut page = self.request(method, params)?;
            if let Some(Value::Array(found)) = page.get_mut(items).map(Value::take) {
                all.extend(found);
            }
            match page.get("nextCursor") {
                Some(next @ Value::String(_)) => cursor = Some(next.clone()),
                _ => return Ok(json!({ items: all })),
            }
        }
        Err(ServerError::unanswered(format!("the server's {method} went on past {MAX_PAGES} pages; rlp reads no more")))
    }

    /// Sends one request and waits for its answer, at most [`ANSWER_WITHIN`],
    /// answering what the server asks meanwhile.
    fn request(&mut self, method: &str, params: Value) -> Result<Value, ServerError> {
        let request: ClientRequest = serde_json::from_value(json!({"method": method, "params": params}))
            .map_err(|e| ServerError::unanswered(format!("not a valid {method} request: {e}")))?;
        let session = self.session;
        let (sender, steps) = std::sync::mpsc::channel();
        let registration = session.inflight.register(sender.clone());
        let service = session.service();
        let stop = tokio_util::sync::CancellationToken::new();
        let stopped = stop.clone();
        let server = session.server.clone();
        session.handle().spawn(CALL.scope(registration.key(), async move {
            let answer = tokio::select! {
                answer = service.send_request(request) => answer,
                () = stopped.cancelled() => return,
            };
            let _ =
                sender.send(Step::Replied(answer.map(|result| answer_json(&result)).map_err(|e| error_of(&server, e))));
        }));
        let _stop_on_return = stop.drop_guard();
        let deadline = Instant::now() + ANSWER_WITHIN;
        loop {
            match steps.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(Step::Replied(answer)) => return answer,
                Ok(Step::Asked { ask, reply }) => {
                    let _ = reply.send(self.answer(ask));
                }
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    return Err(ServerError::unanswered(format!(
                        "the server `{}` did not answer {method} within {} s",
                        session.server,
                        ANSWER_WITHIN.as_secs()
                    )));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(ServerError::unanswered(format!("the server `{}` went away", session.server)));
                }
            }
        }
    }

    /// The answer to what the server asks, kept for the record.
    fn answer(&mut self, ask: ServerAsk) -> ServerAnswer {
        let scrubber: &Scrubber = &self.session.started.scrubber;
        let count = |method: &str| self.asked.iter().filter(|a| a["method"] == method).count();
        let (method, request, answer) = match ask {
            ServerAsk::Elicit(form) => {
                let form = scrubber.scrubbed(&form);
                let secret = form
                    .pointer("/requestedSchema/properties")
                    .and_then(Value::as_object)
                    .is_some_and(|fields| fields.keys().any(|id| looks_secret(id)));
                let relayed = (count("elicitation/create") < MAX_ASKS && !secret)
                    .then(|| self.relay.answerer.as_ref().and_then(|answerer| answerer.elicit(&form)))
                    .flatten();
                let answer = relayed.unwrap_or_else(|| json!({"action": "decline"}));
                ("elicitation/create", form, ServerAnswer::Elicit(answer))
            }
            ServerAsk::Sample(params) => {
                let params = scrubber.scrubbed(&params);
                let answer = match (&self.relay.sampler, count("sampling/createMessage") < MAX_ASKS) {
                    (Some(sampler), true) => sampler.sample(&relayed_sampling(&params)),
                    (Some(_), false) => Err(format!("sampling is refused past {MAX_ASKS} completions a request")),
                    (None, _) => Err("sampling is refused: rlp's client does not sample".to_string()),
                };
                ("sampling/createMessage", params, ServerAnswer::Sample(answer))
            }
        };
        let mut kept = json!({"method": method, "request": request});
        match &answer {
            ServerAnswer::Elicit(value) | ServerAnswer::Sample(Ok(value)) => {
                kept["response"] = scrubber.scrubbed(value)
            }
            ServerAnswer::Sample(Err(why)) => kept["error"] = Value::String(why.clone()),
        }
        self.asked.push(kept);
        answer
    }
}

/// A failed request as a [`ServerError`].
fn error_of(server: &str, error: ServiceError) -> ServerError {
    match error {
        ServiceError::McpError(error) => ServerError { code: Some(error.code.0), message: error.message.to_string() },
        e => ServerError::unanswered(format!("the server `{server}` did not answer: {e}")),
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
    fn a_sampling_request_reaches_the_client_without_its_include_context() {
        let asked = json!({"messages": [], "maxTokens": 10, "includeContext": "allServers", "systemPrompt": "s"});
        assert_eq!(relayed_sampling(&asked), json!({"messages": [], "maxTokens": 10, "systemPrompt": "s"}));
    }

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
            let request: Result<ClientRequest, _> = serde_json::from_value(json!({"method": method, "params": params}));
            assert!(request.is_ok(), "{method}: {request:?}");
        }
    }
}
