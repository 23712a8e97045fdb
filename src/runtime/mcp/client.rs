//! rlp as the MCP client of a server ([`BridgeClient`]): what it says of
//! itself at the handshake, and how it answers what the server asks during
//! a call.
//!
//! `roots/list` is answered here, with the server's `fs:` grants.
//! Progress and log messages go to the call waiting on the server as the
//! transport receives them ([`Listener`], [`super::ordered::Ordered`]); log
//! messages sent while none waits, and the server's other notifications, go
//! to the bridge's listener: [`super::session::Notices`].
//! Elicitation and sampling belong to a call: they go to the thread of the
//! call that is waiting on the server ([`Inflight::route`]), which records
//! them and asks whoever answers the call's questions, and the answer comes
//! back here. A request that reaches no call is declined (elicitation) or
//! refused (sampling).
//!
//! Roots and sampling are deprecated by SEP-2577 (2026-07-28), and still
//! what the servers in use today ask for: rlp answers both.
#![allow(deprecated)]

use std::sync::{Arc, Mutex, PoisonError};

use rmcp::handler::client::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, ElicitationAction, ErrorData, Implementation, ListRootsResult, LoggingMessageNotificationParam,
    ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::session::{NoticeKind, ServerNotice};

/// What a server asks during a call, handed to the call's thread.
#[derive(Debug)]
pub(crate) enum ServerAsk {
    /// `elicitation/create`: its params as JSON.
    Elicit(Value),
    /// `sampling/createMessage`: its params as JSON.
    Sample(Value),
}

/// The call's answer to a [`ServerAsk`].
#[derive(Debug)]
pub(crate) enum ServerAnswer {
    /// The `ElicitResult` as JSON.
    Elicit(Value),
    /// The `CreateMessageResult` as JSON, or why sampling was refused.
    Sample(Result<Value, String>),
}

/// What reaches a waiting call from its server's session.
#[derive(Debug)]
pub(crate) enum Step {
    /// The server asks something; answer through `reply`.
    Asked {
        /// The question.
        ask: ServerAsk,
        /// Where the answer goes.
        reply: oneshot::Sender<ServerAnswer>,
    },
    /// The server reported progress on the call.
    Progress {
        /// How far.
        progress: f64,
        /// Out of how much, when it says.
        total: Option<f64>,
        /// What it says.
        message: Option<String>,
    },
    /// The server sent a log message (`notifications/message`).
    Log {
        /// Its level, as the protocol names it (`debug` … `emergency`).
        level: String,
        /// The logger that sent it, when it says.
        logger: Option<String>,
        /// What it says.
        data: Value,
    },
    /// The call's answer, or why there is none.
    Done(Result<rmcp::model::CallToolResult, String>),
    /// The answer to a request other than a call (as JSON), or the error.
    Replied(Result<Value, super::forward::ServerError>),
}

tokio::task_local! {
    /// The key of the call whose request a task carries: a server request
    /// handled while that request is driven (input-required rounds) goes to
    /// that call.
    pub(crate) static CALL: u64;
}

/// The calls waiting on one session, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Inflight {
    calls: Mutex<Vec<(u64, std::sync::mpsc::Sender<Step>)>>,
    next: Mutex<u64>,
}

impl Inflight {
    /// Registers a waiting call; it is removed when the guard drops.
    pub(crate) fn register(self: &Arc<Self>, sender: std::sync::mpsc::Sender<Step>) -> Registration {
        let key = {
            let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
            *next += 1;
            *next
        };
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).push((key, sender));
        Registration { inflight: Arc::clone(self), key }
    }

    /// Where a server request goes: the call whose request the current
    /// task drives, else the oldest waiting call (a stdio server's request
    /// names no call; with calls in parallel, the oldest is asked).
    pub(crate) fn route(&self) -> Option<std::sync::mpsc::Sender<Step>> {
        let calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        let current = CALL.try_with(|key| *key).ok();
        let by_task = current.and_then(|key| calls.iter().find(|(k, _)| *k == key));
        by_task.or_else(|| calls.first()).map(|(_, sender)| sender.clone())
    }
}

/// A call's place in [`Inflight`], left when dropped.
#[derive(Debug)]
pub(crate) struct Registration {
    inflight: Arc<Inflight>,
    key: u64,
}

impl Registration {
    /// The call's key (for [`CALL`]).
    pub(crate) fn key(&self) -> u64 {
        self.key
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.inflight.calls.lock().unwrap_or_else(PoisonError::into_inner).retain(|(k, _)| *k != self.key);
    }
}

/// rlp's side of one session with a server.
#[derive(Debug)]
pub(crate) struct BridgeClient {
    /// The server's name.
    pub(crate) server: String,
    /// Where its notifications that belong to no call go.
    pub(crate) notices: super::session::Notices,
    /// The `file://` URIs of the server's `fs:` grants.
    pub(crate) roots: Vec<String>,
    /// The calls waiting on the session.
    pub(crate) inflight: Arc<Inflight>,
    /// Set when the server says its list of tools changed.
    pub(crate) tools_changed: Arc<std::sync::atomic::AtomicBool>,
}

impl BridgeClient {
    /// Passes on a notification of the server that belongs to no call.
    fn notice(&self, kind: NoticeKind) {
        self.notices.send(ServerNotice { server: self.server.clone(), kind });
    }

    /// What hears the session's progress and log messages as they arrive
    /// ([`super::ordered::Ordered`]).
    pub(crate) fn listener(&self) -> Listener {
        Listener { server: self.server.clone(), notices: self.notices.clone(), inflight: Arc::clone(&self.inflight) }
    }

    /// Hands `ask` to the call it belongs to and waits for its answer;
    /// `None` when no call takes it.
    async fn ask_call(&self, ask: ServerAsk) -> Option<ServerAnswer> {
        let sender = self.inflight.route()?;
        let (reply, answer) = oneshot::channel();
        sender.send(Step::Asked { ask, reply }).ok()?;
        answer.await.ok()
    }
}

/// Hands a server's progress and log messages to the call waiting on its
/// session; a log message sent while none waits goes to every client.
#[derive(Debug)]
pub(crate) struct Listener {
    server: String,
    notices: super::session::Notices,
    inflight: Arc<Inflight>,
}

impl Listener {
    /// The server reported progress.
    pub(crate) fn progress(&self, params: &ProgressNotificationParam) {
        if let Some(sender) = self.inflight.route() {
            let (progress, total, message) = (params.progress, params.total, params.message.clone());
            let _ = sender.send(Step::Progress { progress, total, message });
        }
    }

    /// The server sent a log message.
    pub(crate) fn log(&self, params: &LoggingMessageNotificationParam) {
        let level = serde_json::to_value(params.level).ok().and_then(|l| l.as_str().map(str::to_string));
        let level = level.unwrap_or_else(|| "info".into());
        let (logger, data) = (params.logger.clone(), params.data.clone());
        match self.inflight.route() {
            Some(sender) => {
                let _ = sender.send(Step::Log { level, logger, data });
            }
            None => self
                .notices
                .send(ServerNotice { server: self.server.clone(), kind: NoticeKind::Log { level, logger, data } }),
        }
    }
}

impl ClientHandler for BridgeClient {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.roots = serde_json::from_value(json!({"listChanged": false})).ok();
        capabilities.sampling = serde_json::from_value(json!({})).ok();
        capabilities.elicitation = serde_json::from_value(json!({"form": {}})).ok();
        ClientConfig::new(capabilities, Implementation::new("rlp", env!("CARGO_PKG_VERSION")))
    }

    async fn list_roots(&self, _context: RequestContext<RoleClient>) -> Result<ListRootsResult, ErrorData> {
        let roots: Vec<Value> = self.roots.iter().map(|uri| json!({"uri": uri})).collect();
        serde_json::from_value(json!({ "roots": roots })).map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let params = serde_json::to_value(&request).unwrap_or(Value::Null);
        let declined = ElicitResult::new(ElicitationAction::Decline);
        match self.ask_call(ServerAsk::Elicit(params)).await {
            Some(ServerAnswer::Elicit(answer)) => Ok(serde_json::from_value(answer).unwrap_or(declined)),
            _ => Ok(declined),
        }
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let params = serde_json::to_value(&params).unwrap_or(Value::Null);
        match self.ask_call(ServerAsk::Sample(params)).await {
            Some(ServerAnswer::Sample(Ok(answer))) => serde_json::from_value(answer)
                .map_err(|e| ErrorData::internal_error(format!("the client's sampling answer is not one: {e}"), None)),
            Some(ServerAnswer::Sample(Err(why))) => Err(ErrorData::invalid_request(why, None)),
            _ => Err(ErrorData::invalid_request("sampling is refused: no call of rlp is waiting on this server", None)),
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.store(true, std::sync::atomic::Ordering::SeqCst);
        self.notice(NoticeKind::ToolsChanged);
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.notice(NoticeKind::ResourceUpdated(params.uri));
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notice(NoticeKind::ResourcesChanged);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notice(NoticeKind::PromptsChanged);
    }
}
