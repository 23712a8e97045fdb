//! Confirmation and questions over MCP: the runtime's [`Confirmer`] and
//! [`Answerer`] for one served call, asking the client that made it.
//!
//! How the client is asked depends on the protocol revision it speaks:
//! an `elicitation/create` request on the session (2025-11-25,
//! [`SessionAsker`]), or an `InputRequiredResult` that ends the request and
//! is answered by the client's retry (2026-07-28, [`RoundTripAsker`], with
//! the call parked meanwhile: [`crate::serve::parked`]). A client that can
//! do neither is not asked ([`NoAsker`]): confirmation is refused and
//! questions stay open, each with a message saying what to do.

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, InputRequest, InputRequests, InputResponses};
use rmcp::service::Peer;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::runtime::asking::answer::{AnswerRequest, AnswerSource, Answerer, GivenAnswer};
use crate::runtime::asking::confirm::{ConfirmRequest, Confirmation, Confirmer};
use crate::runtime::context::Sampler;
use crate::serve::calls::Event;

/// How long a call waits for the client to answer a form (either revision).
pub(crate) const ANSWER_WAIT: Duration = Duration::from_secs(600);
/// The key of the one input request a round asks.
const INPUT_KEY: &str = "rlp";
/// The property of the confirmation form.
const APPROVE: &str = "approve";

/// Puts one form to the client: its answer, or `None` when it cannot be
/// asked or did not answer.
pub(crate) trait Asker: Send + Sync {
    /// Asks with `form` (`elicitation/create` params, mode `form`).
    fn ask(&self, form: Value) -> Option<ElicitResult>;
}

/// A client that cannot be asked.
pub(crate) struct NoAsker;

impl Asker for NoAsker {
    fn ask(&self, _form: Value) -> Option<ElicitResult> {
        None
    }
}

/// Asks over the session with an `elicitation/create` request (2025-11-25),
/// from the call's blocking thread.
pub(crate) struct SessionAsker {
    pub(crate) peer: Peer<RoleServer>,
    pub(crate) handle: tokio::runtime::Handle,
    /// The request's cancellation: a cancelled call stops waiting.
    pub(crate) cancelled: CancellationToken,
    /// The session's turn to ask: one form at a time is open with a client
    /// (its user answers one prompt after another, as at a terminal).
    pub(crate) turn: Turn,
}

/// Whose turn it is to ask one session's client: held while a form is open.
pub(crate) type Turn = Arc<tokio::sync::Mutex<()>>;

impl Asker for SessionAsker {
    fn ask(&self, form: Value) -> Option<ElicitResult> {
        let params: ElicitRequestParams = serde_json::from_value(form).ok()?;
        // A client that never answers is not waited for past ANSWER_WAIT:
        // the call then goes on unanswered (not approved). A call waiting
        // for its turn waits as long as the forms before it are open.
        self.handle.block_on(async {
            let asked = async {
                let _turn = self.turn.lock().await;
                tokio::time::timeout(ANSWER_WAIT, self.peer.create_elicitation(params)).await.ok().and_then(Result::ok)
            };
            tokio::select! {
                answer = asked => answer,
                () = self.cancelled.cancelled() => None,
            }
        })
    }
}

/// Asks by ending the request with an `InputRequiredResult` (2026-07-28):
/// the form goes to the request's follower as [`Event::Input`], and the
/// client's retry brings the answer back here.
pub(crate) struct RoundTripAsker {
    pub(crate) events: UnboundedSender<Event>,
    pub(crate) answers: Mutex<Receiver<InputResponses>>,
    /// The rounds asked so far: each round's key is new (`rlp`, `rlp-2`, …),
    /// as a task's input requests must be.
    pub(crate) rounds: std::sync::atomic::AtomicU32,
}

impl Asker for RoundTripAsker {
    fn ask(&self, form: Value) -> Option<ElicitResult> {
        let request: InputRequest =
            serde_json::from_value(json!({"method": "elicitation/create", "params": form})).ok()?;
        let round = self.rounds.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let key = if round == 1 { INPUT_KEY.to_string() } else { format!("{INPUT_KEY}-{round}") };
        let requests: InputRequests = [(key.clone(), request)].into_iter().collect();
        self.events.send(Event::Input(requests)).ok()?;
        let answers = self.answers.lock().ok()?;
        let mut responses = match answers.recv_timeout(ANSWER_WAIT) {
            Ok(responses) => responses,
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return None,
        };
        serde_json::from_value(responses.remove(&key)?).ok()
    }
}

/// The accepted content of an answer, if it was accepted.
fn accepted(answer: Option<ElicitResult>) -> Result<Map<String, Value>, &'static str> {
    match answer {
        None => Err("the MCP client could not be asked (it does not support elicitation) or did not answer"),
        Some(ElicitResult { action: ElicitationAction::Accept, content, .. }) => {
            Ok(content.and_then(|c| c.as_object().cloned()).unwrap_or_default())
        }
        Some(ElicitResult { action: ElicitationAction::Decline, .. }) => Err("declined over MCP"),
        Some(_) => Err("cancelled over MCP"),
    }
}

/// Confirms served calls by asking the client.
pub(crate) struct McpConfirmer(pub(crate) Arc<dyn Asker>);

/// The confirmation form of one call.
fn confirmation_form(request: &ConfirmRequest<'_>) -> Value {
    let arguments = crate::runtime::asking::confirm::shown_arguments(request.arguments);
    json!({
        "mode": "form",
        "message": format!(
            "Allow `{}` to run?\n{}\narguments: {arguments}\ntarget: {}\ninvocation: {}",
            request.tool, request.description, request.target, request.invocation_id
        ),
        "requestedSchema": {
            "type": "object",
            "properties": {
                APPROVE: {
                    "type": "boolean",
                    "title": format!("Run {}", request.tool),
                    "description": "true runs the tool once with these arguments",
                },
            },
            "required": [APPROVE],
        },
    })
}

impl Confirmer for McpConfirmer {
    fn confirm(&self, request: &ConfirmRequest<'_>) -> Confirmation {
        match accepted(self.0.ask(confirmation_form(request))) {
            Ok(content) if content.get(APPROVE) == Some(&Value::Bool(true)) => {
                Confirmation { approved: true, by: "operator".into(), how: "mcp".into() }
            }
            Ok(_) => Confirmation { approved: false, by: "operator".into(), how: "mcp: not approved".into() },
            Err(why) => Confirmation { approved: false, by: "operator".into(), how: format!("mcp: {why}") },
        }
    }

    fn refusal_help(&self) -> Option<String> {
        Some(
            "approve the call when the client asks; a client without elicitation cannot be asked: start the server \
             with `rlp serve --yes`, or set `requires_confirmation: false` on the tool in tools.json"
                .into(),
        )
    }
}

/// Answers served calls' questions by asking the client.
pub(crate) struct McpAnswerer(pub(crate) Arc<dyn Asker>);

/// The form of one round of questions: one property per question.
fn questions_form(request: &AnswerRequest<'_>) -> Value {
    let mut properties = Map::new();
    for question in request.questions {
        let mut schema = match question.raw.get("schema") {
            Some(Value::Object(schema)) => schema.clone(),
            _ => Map::from_iter([("type".to_string(), json!("string"))]),
        };
        schema.entry("title").or_insert_with(|| json!(question.text));
        if let Some(default) = &question.default {
            schema.entry("default").or_insert_with(|| default.clone());
        }
        properties.insert(question.id.clone(), Value::Object(schema));
    }
    let required: Vec<&str> = request.questions.iter().map(|q| q.id.as_str()).collect();
    json!({
        "mode": "form",
        "message": format!("`{}` asks:\n{}", request.tool, request.questions.iter().map(|q| format!("- {}", q.text)).collect::<Vec<_>>().join("\n")),
        "requestedSchema": {"type": "object", "properties": properties, "required": required},
    })
}

impl Answerer for McpAnswerer {
    fn answer(&self, request: &AnswerRequest<'_>) -> Vec<GivenAnswer> {
        let Ok(content) = accepted(self.0.ask(questions_form(request))) else { return Vec::new() };
        request
            .questions
            .iter()
            .filter_map(|q| content.get(&q.id).map(|value| (q, value)))
            .map(|(q, value)| GivenAnswer { id: q.id.clone(), value: value.clone(), source: AnswerSource::Mcp })
            .collect()
    }

    fn unanswered_help(&self) -> Option<String> {
        Some(
            "answer the questions when the client asks; this client could not be asked (it does not support \
             elicitation), so use one that does"
                .into(),
        )
    }

    /// A bridged server's form goes to the client as the server wrote it
    /// (titled and multi-select enums, defaults, URL mode included).
    fn elicit(&self, form: &Value) -> Option<Value> {
        serde_json::to_value(self.0.ask(form.clone())?).ok()
    }
}

/// Relays the model completions a bridged MCP server asks for during a call
/// (`sampling/createMessage`) to the client that made the call, over the
/// session, from the call's blocking thread.
pub(crate) struct SessionSampler {
    pub(crate) peer: Peer<RoleServer>,
    pub(crate) handle: tokio::runtime::Handle,
    /// The request's cancellation: a cancelled call stops waiting.
    pub(crate) cancelled: CancellationToken,
}

#[allow(deprecated, reason = "sampling is deprecated by SEP-2577 and what servers in use today ask for")]
impl Sampler for SessionSampler {
    fn sample(&self, request: &Value) -> Result<Value, String> {
        let params: rmcp::model::CreateMessageRequestParams = serde_json::from_value(request.clone())
            .map_err(|e| format!("the server's sampling request is not one: {e}"))?;
        let answer = self.handle.block_on(async {
            tokio::select! {
                answer = tokio::time::timeout(ANSWER_WAIT, self.peer.create_message(params)) => match answer {
                    Ok(Ok(result)) => Ok(result),
                    Ok(Err(e)) => Err(format!("the client did not sample: {e}")),
                    Err(_) => Err(format!("the client did not answer the sampling request within {} s", ANSWER_WAIT.as_secs())),
                },
                () = self.cancelled.cancelled() => Err("the call was cancelled".to_string()),
            }
        })?;
        serde_json::to_value(answer).map_err(|e| e.to_string())
    }
}
