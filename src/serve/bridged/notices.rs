//! A bridged server's notifications that belong to no call, passed on to
//! the clients of `rlp serve` and recorded:
//!
//! - `notifications/resources/updated` goes to each session that
//!   subscribed to the resource, recorded (`resource.updated`) in its trace;
//! - `notifications/resources/list_changed` and `…/prompts/list_changed` go
//!   to every session, after what was listed of that server is forgotten;
//! - `notifications/tools/list_changed`: the server's tools are listed
//!   again and compared with the bundle's pins (a list that did not change
//!   against them is let be). A tool it added is not
//!   callable (rlp serves tools.json's tools only) until `rlp tools import`
//!   takes it in; a tool it changed is refused until then. Either is told
//!   on stderr and to every session as a `warning` log message (logger
//!   `rlp`), and every session gets `notifications/tools/list_changed`.
//!
//! Each is recorded (`server.changed`, with what changed for tools) in the
//! server-run trace. A log message a server sends while no call waits on
//! it goes to every session whose level it passes (scrubbed, bounded as
//! during a call), unrecorded like the log messages of calls.

use std::sync::{Arc, Mutex, PoisonError};

use rmcp::RoleServer;
use rmcp::service::Peer;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::event::{EventKind, PAYLOAD_VERSION, ServerExchangePayload};
use crate::runtime::mcp::session::{NoticeKind, ServerNotice};
use crate::serve::bridged::{List, record};
use crate::serve::handler::Shared;
use crate::serve::logging::LogThreshold;

/// Most sessions told of list changes, and most subscriptions kept: a
/// bound on what clients can make rlp hold.
const MAX_LISTENERS: usize = 4096;

/// One session that hears of list changes.
#[derive(Clone, Debug)]
pub(crate) struct Session {
    /// Tells this session from the others.
    pub(crate) key: Uuid,
    /// Its client.
    pub(crate) peer: Peer<RoleServer>,
    /// Its trace.
    pub(crate) trace: Uuid,
    /// The least severe log message its client wants.
    pub(crate) log_threshold: Arc<LogThreshold>,
}

/// One subscription to a resource.
#[derive(Clone, Debug)]
struct Subscription {
    server: usize,
    uri: String,
    session: Session,
}

/// The sessions told of list changes and the subscriptions to resources.
#[derive(Debug, Default)]
pub(crate) struct Listeners {
    sessions: Mutex<Vec<Session>>,
    subscriptions: Mutex<Vec<Subscription>>,
}

impl Listeners {
    /// Tells `session` of list changes from now on.
    pub(crate) fn join(&self, session: Session) {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.retain(|s| !s.peer.is_transport_closed() && s.key != session.key);
        if sessions.len() < MAX_LISTENERS {
            sessions.push(session);
        }
    }

    /// Subscribes (or, `on` false, unsubscribes) `session` to resource
    /// `uri` of server `server`.
    pub(crate) fn subscribe(&self, server: usize, uri: &str, session: Session, on: bool) {
        let mut subscriptions = self.subscriptions.lock().unwrap_or_else(PoisonError::into_inner);
        let same = |s: &Subscription| s.server == server && s.uri == uri && s.session.key == session.key;
        subscriptions.retain(|s| !s.session.peer.is_transport_closed() && !same(s));
        if on && subscriptions.len() < MAX_LISTENERS {
            subscriptions.push(Subscription { server, uri: uri.to_string(), session });
        }
    }

    /// The live sessions.
    fn sessions(&self) -> Vec<Session> {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.retain(|s| !s.peer.is_transport_closed());
        sessions.clone()
    }

    /// The live sessions subscribed to `uri` of `server`.
    fn subscribed(&self, server: usize, uri: &str) -> Vec<Session> {
        let mut subscriptions = self.subscriptions.lock().unwrap_or_else(PoisonError::into_inner);
        subscriptions.retain(|s| !s.session.peer.is_transport_closed());
        subscriptions.iter().filter(|s| s.server == server && s.uri == uri).map(|s| s.session.clone()).collect()
    }
}

/// Passes on the bridged servers' notifications until the server stops.
pub(crate) fn start(shared: &Arc<Shared>) {
    if !shared.bridged.any() {
        return;
    }
    let mut notices = shared.runtime.bridge().listen();
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        while let Some(notice) = notices.recv().await {
            pass_on(&shared, notice).await;
        }
    });
}

/// Passes on and records one notification.
async fn pass_on(shared: &Arc<Shared>, notice: ServerNotice) {
    let bridged = &shared.bridged;
    let Some(index) = bridged.index(&notice.server) else { return };
    let (method, request, response) = match notice.kind {
        NoticeKind::ResourceUpdated(uri) => {
            for session in bridged.listeners.subscribed(index, &uri) {
                let params = rmcp::model::ResourceUpdatedNotificationParam::new(uri.clone());
                let _ = session.peer.notify_resource_updated(params).await;
                let frame =
                    notice_frame(&notice.server, "notifications/resources/updated", json!({ "uri": uri }), None);
                report(record(shared, session.trace, EventKind::ResourceUpdated, frame).await);
            }
            return;
        }
        NoticeKind::ResourcesChanged => {
            bridged.forget(index, &[List::Resources, List::Templates]);
            for session in bridged.listeners.sessions() {
                let _ = session.peer.notify_resource_list_changed().await;
            }
            ("notifications/resources/list_changed", json!({}), None)
        }
        NoticeKind::PromptsChanged => {
            bridged.forget(index, &[List::Prompts]);
            for session in bridged.listeners.sessions() {
                let _ = session.peer.notify_prompt_list_changed().await;
            }
            ("notifications/prompts/list_changed", json!({}), None)
        }
        NoticeKind::Log { level, logger, data } => {
            let scrubber = shared.runtime.bridge().running(&notice.server).map(|s| s.started.scrubber.clone());
            let data = crate::runtime::mcp::log_data(&data, &scrubber.unwrap_or_default());
            let params = json!({"level": level, "logger": logger, "data": data});
            log_to_sessions(shared, &level, params).await;
            return;
        }
        NoticeKind::ToolsChanged => {
            let changes = tool_changes(shared, &notice.server).await;
            // A server that lists the same tools again (some say their list
            // changed as they start) changed nothing rlp serves.
            let none = ["added", "removed", "changed"]
                .iter()
                .all(|member| changes.get(member).and_then(Value::as_array).is_some_and(Vec::is_empty));
            if none {
                return;
            }
            tell_tool_changes(shared, &notice.server, &changes).await;
            ("notifications/tools/list_changed", json!({}), Some(changes))
        }
    };
    let frame = notice_frame(&notice.server, method, request, response);
    report(record(shared, shared.run_trace, EventKind::ServerChanged, frame).await);
}

/// How the server's tools now differ from the bundle's pins (or why that
/// is not known).
async fn tool_changes(shared: &Arc<Shared>, server: &str) -> Value {
    let runtime = Arc::clone(&shared.runtime);
    let server = server.to_string();
    let changes = tokio::task::spawn_blocking(move || runtime.server_tool_changes(&server)).await;
    match changes {
        Ok(Ok(changes)) => changes,
        Ok(Err(why)) => json!({ "error": why }),
        Err(e) => json!({ "error": e.to_string() }),
    }
}

/// Tells stderr and every session of tools a server added, changed or
/// dropped.
async fn tell_tool_changes(shared: &Arc<Shared>, server: &str, changes: &Value) {
    let names = |member: &str, key: Option<&str>| -> Vec<String> {
        let items = changes.get(member).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        items
            .iter()
            .filter_map(|v| key.map_or(Some(v), |k| v.get(k)))
            .filter_map(Value::as_str)
            // The server names them: escaped, so no client's terminal is driven.
            .map(|name| crate::text::terminal_safe_line(name).into_owned())
            .collect()
    };
    let told: Vec<String> = [
        ("added", None, "not callable until imported"),
        ("changed", Some("tool"), "refused until re-imported"),
        ("removed", None, "refused until re-imported"),
    ]
    .into_iter()
    .filter_map(|(member, key, fate)| {
        let tools = names(member, key);
        (!tools.is_empty()).then(|| format!("{member} {} ({fate})", tools.join(", ")))
    })
    .collect();
    if told.is_empty() {
        return;
    }
    let message = format!(
        "MCP server `{server}` {}: review with `rlp lint --check-tools`, then `rlp tools import {} --mcp {server}`",
        told.join("; "),
        shared.runtime.root().display()
    );
    crate::notice::note(&format!("rlp serve: {message}"));
    log_to_sessions(shared, "warning", json!({"level": "warning", "logger": "rlp", "data": message})).await;
    for session in shared.bridged.listeners.sessions() {
        let _ = session.peer.notify_tool_list_changed().await;
    }
}

/// Sends a log message (`params` of `notifications/message`, at `level`)
/// to every session whose client wants that level.
#[allow(deprecated, reason = "logging is deprecated by SEP-2577 and what clients in use today read")]
async fn log_to_sessions(shared: &Arc<Shared>, level: &str, params: Value) {
    let Ok(params) = serde_json::from_value::<rmcp::model::LoggingMessageNotificationParam>(params) else { return };
    for session in shared.bridged.listeners.sessions() {
        if session.log_threshold.passes(level) {
            let _ = session.peer.notify_logging_message(params.clone()).await;
        }
    }
}

/// The frame of a notification.
fn notice_frame(server: &str, method: &str, request: Value, response: Option<Value>) -> ServerExchangePayload {
    ServerExchangePayload {
        v: PAYLOAD_VERSION,
        server: server.to_string(),
        method: method.to_string(),
        request,
        response,
        error: None,
        asked: Vec::new(),
        duration_ms: None,
    }
}

/// A notification that could not be recorded is told on stderr.
fn report(recorded: Result<(), rmcp::ErrorData>) {
    if let Err(e) = recorded {
        crate::notice::note(&format!("rlp serve: {}", e.message));
    }
}
