//! The experimental tasks of 2025-11-25, which the SDK (made for
//! 2026-07-28, where tasks are an extension) no longer reads or writes:
//!
//! - incoming, before the SDK parses a message ([`normalize`]): a
//!   `tools/call`'s `task` member moves into its `_meta` ([`TASK_META`]),
//!   and the methods whose 2025-11-25 answers the SDK cannot write
//!   (`tools/call` with a task, `tools/list`, `tasks/get`, `tasks/cancel`)
//!   are renamed to rlp's own ([`CALL`], [`LIST_TOOLS`], [`GET`],
//!   [`CANCEL`]), which the handler answers as custom requests;
//!   `tasks/result` and `tasks/list` are custom requests as they come;
//! - outgoing ([`Advertised`]): the `initialize` result of a 2025-11-25
//!   session declares `capabilities.tasks`.
//!
//! The sessions of 2025-11-25 over HTTP ([`Sessions`]) are held here too,
//! at most `--max-sessions` of them.
//!
//! A request that carries the 2026-07-28 protocol version in its `_meta`
//! is left as it is.

use std::cell::Cell;

use futures_util::Stream;
use rmcp::RoleServer;
use rmcp::model::{CustomResult, ProtocolVersion, ServerJsonRpcMessage, ServerResult};
use rmcp::transport::Transport;
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, LocalSessionManagerError};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId, SessionManager};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};

/// The `_meta` key a `tools/call`'s `task` member is moved to; one the
/// client wrote itself is dropped.
pub(crate) const TASK_META: &str = "dev.runloop/task";
/// `tools/call` with a `task` member, renamed.
pub(crate) const CALL: &str = "dev.runloop/tasks/call";
/// `tools/list` of a 2025-11-25 session, renamed (its tools say whether
/// they run as tasks, which the SDK's tool type cannot).
pub(crate) const LIST_TOOLS: &str = "dev.runloop/tasks/tools-list";
/// `tasks/get` of a 2025-11-25 session, renamed.
pub(crate) const GET: &str = "dev.runloop/tasks/get";
/// `tasks/cancel` of a 2025-11-25 session, renamed.
pub(crate) const CANCEL: &str = "dev.runloop/tasks/cancel";
/// The `_meta` key of a 2026-07-28 request's protocol version.
const PROTOCOL_VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";

/// `message` with the 2025-11-25 task members and methods made readable
/// by the SDK (see the module); `None` when nothing changes (or it is not
/// a JSON object).
pub(crate) fn normalize(message: &[u8]) -> Option<Vec<u8>> {
    // Most messages (every call without a task) are none of these: they
    // are passed on without being parsed twice.
    let mentions = |needle: &str| memchr::memmem::find(message, needle.as_bytes()).is_some();
    if !(mentions("\"task") || mentions(TASK_META) || mentions("tools/list") || mentions("tasks/")) {
        return None;
    }
    let mut value: Value = serde_json::from_slice(message).ok()?;
    let fields = value.as_object_mut()?;
    let method = fields.get("method")?.as_str()?.to_string();
    let params = fields.get("params").and_then(Value::as_object);
    if params.and_then(|p| p.get("_meta")).and_then(|m| m.get(PROTOCOL_VERSION_META)).is_some() {
        return None;
    }
    let renamed = match method.as_str() {
        "tools/call" => {
            let params = fields.get_mut("params")?.as_object_mut()?;
            let task = params.remove("task");
            let meta = params.entry("_meta").or_insert_with(|| json!({}));
            let dropped = meta.as_object_mut().and_then(|m| m.remove(TASK_META)).is_some();
            match task {
                Some(task) => {
                    if let Some(meta) = meta.as_object_mut() {
                        meta.insert(TASK_META.into(), task);
                    }
                    CALL
                }
                None if dropped => "tools/call",
                None => return None,
            }
        }
        "tools/list" => LIST_TOOLS,
        "tasks/get" => GET,
        "tasks/cancel" => CANCEL,
        _ => return None,
    };
    fields.insert("method".into(), json!(renamed));
    serde_json::to_vec(&value).ok()
}

/// `message`, with `capabilities.tasks` declared when it is the
/// `initialize` result of a session before 2026-07-28.
fn advertise(message: ServerJsonRpcMessage) -> ServerJsonRpcMessage {
    let ServerJsonRpcMessage::Response(mut response) = message else { return message };
    let ServerResult::InitializeResult(initialized) = &response.result else {
        return ServerJsonRpcMessage::Response(response);
    };
    if initialized.protocol_version.as_str() >= ProtocolVersion::V_2026_07_28.as_str() {
        return ServerJsonRpcMessage::Response(response);
    }
    let Ok(mut written) = serde_json::to_value(initialized) else { return ServerJsonRpcMessage::Response(response) };
    written.as_object_mut().map(|fields| fields.remove("resultType"));
    if let Some(capabilities) = written.get_mut("capabilities").and_then(Value::as_object_mut) {
        capabilities.insert("tasks".into(), json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}));
    }
    response.result = ServerResult::CustomResult(CustomResult::new(written));
    ServerJsonRpcMessage::Response(response)
}

/// A transport whose `initialize` result declares the tasks of 2025-11-25.
pub(crate) struct Advertised<T>(pub(crate) T);

impl<T: Transport<RoleServer>> Transport<RoleServer> for Advertised<T> {
    type Error = T::Error;

    fn send(&mut self, item: ServerJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.0.send(advertise(item))
    }

    fn receive(&mut self) -> impl Future<Output = Option<rmcp::model::ClientJsonRpcMessage>> + Send {
        self.0.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.0.close()
    }
}

/// The HTTP sessions: the SDK's, each over an [`Advertised`] transport, and
/// at most `max` at once. The cap is kept where sessions are made, whatever
/// the request that asks for one (every `initialize`, whichever revision
/// it names, opens a session), and however many ask at once.
pub(crate) struct Sessions {
    /// The SDK's sessions.
    local: LocalSessionManager,
    /// Most sessions held at once.
    max: usize,
    /// Held while a session is made: the count checked is the one the new
    /// session joins.
    making: tokio::sync::Mutex<()>,
}

impl Sessions {
    /// `local`'s sessions, at most `max` of them.
    pub(crate) fn new(local: LocalSessionManager, max: usize) -> Sessions {
        Sessions { local, max, making: tokio::sync::Mutex::new(()) }
    }
}

/// Why [`Sessions`] did not do what the SDK asked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionsError {
    /// A session was asked for while `max` are held.
    #[error("every session is taken (--max-sessions)")]
    Full,
    /// The SDK's own.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

tokio::task_local! {
    /// Set when [`Sessions::create_session`] refuses a session, within the
    /// handling of the request that asked for it ([`refusing_sessions`]).
    static REFUSED: Cell<bool>;
}

/// Runs `handling` (the SDK's handling of one request) and returns its
/// outcome and whether a session it asked for was refused as past the cap:
/// the SDK answers that refusal with a bare 500, which the caller replaces.
pub(crate) async fn refusing_sessions<F: Future>(handling: F) -> (F::Output, bool) {
    REFUSED
        .scope(Cell::new(false), async move {
            let outcome = handling.await;
            (outcome, REFUSED.with(Cell::get))
        })
        .await
}

impl SessionManager for Sessions {
    type Error = SessionsError;
    type Transport = Advertised<<LocalSessionManager as SessionManager>::Transport>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let _making = self.making.lock().await;
        if self.local.sessions.read().await.len() >= self.max {
            // Outside `refusing_sessions` the SDK's 500 stands.
            let _ = REFUSED.try_with(|refused| refused.set(true));
            return Err(SessionsError::Full);
        }
        let (id, transport) = self.local.create_session().await?;
        Ok((id, Advertised(transport)))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: rmcp::model::ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.local.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.local.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        Ok(self.local.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: rmcp::model::ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.local.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: rmcp::model::ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.local.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.local.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.local.resume(id, last_event_id).await?)
    }
}

/// Standard input with every line [`normalize`]d, for the stdio
/// transport. A line longer than `max_line` is passed on as it comes (the
/// transport drops it).
pub(crate) fn normalized_input(
    input: impl AsyncRead + Unpin + Send + 'static,
    max_line: usize,
) -> tokio::io::DuplexStream {
    let (mut into, out) = tokio::io::duplex(64 << 10);
    tokio::spawn(async move {
        let mut reader = BufReader::new(input);
        let mut line = Vec::new();
        loop {
            line.clear();
            let limit = u64::try_from(max_line).unwrap_or(u64::MAX).saturating_add(1);
            let Ok(read) = (&mut reader).take(limit).read_until(b'\n', &mut line).await else { return };
            if read == 0 {
                return;
            }
            let whole = line.ends_with(b"\n") || (read as u64) < limit;
            if !whole {
                // Too long to read whole: passed on as it comes, to its end.
                if into.write_all(&line).await.is_err() || pass_rest(&mut reader, &mut into).await.is_err() {
                    return;
                }
                continue;
            }
            let text = line.strip_suffix(b"\n").unwrap_or(&line);
            let written = match normalize(text) {
                Some(mut normalized) => {
                    normalized.push(b'\n');
                    into.write_all(&normalized).await
                }
                None => into.write_all(&line).await,
            };
            if written.is_err() {
                return;
            }
        }
    });
    out
}

/// Copies the rest of the current line, up to its newline, in bounded chunks.
async fn pass_rest(
    reader: &mut BufReader<impl AsyncRead + Unpin>,
    into: &mut (impl tokio::io::AsyncWrite + Unpin),
) -> std::io::Result<()> {
    loop {
        let chunk = reader.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(());
        }
        let (length, ended) = match chunk.iter().position(|b| *b == b'\n') {
            Some(at) => (at + 1, true),
            None => (chunk.len(), false),
        };
        into.write_all(&chunk[..length]).await?;
        reader.consume(length);
        if ended {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normalized(message: Value) -> Option<Value> {
        normalize(&serde_json::to_vec(&message).unwrap()).map(|bytes| serde_json::from_slice(&bytes).unwrap())
    }

    #[test]
    fn a_call_without_a_task_passes_untouched() {
        let call =
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "a.b", "arguments": {}}});
        assert_eq!(normalized(call), None);
        let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
        assert_eq!(normalized(ping), None);
    }

    #[test]
    fn a_task_moves_into_meta_and_the_call_is_renamed() {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "a.b", "arguments": {"x": "a task"}, "task": {"ttl": 1000}}});
        let written = normalized(call).unwrap();
        assert_eq!(written["method"], CALL);
        assert_eq!(written["params"]["_meta"][TASK_META], json!({"ttl": 1000}));
        assert_eq!(written["params"].get("task"), None);
        for method in [("tools/list", LIST_TOOLS), ("tasks/get", GET), ("tasks/cancel", CANCEL)] {
            let written = normalized(json!({"jsonrpc": "2.0", "id": 3, "method": method.0, "params": {}})).unwrap();
            assert_eq!(written["method"], method.1);
        }
    }

    #[test]
    fn a_task_meta_a_client_wrote_itself_is_dropped() {
        let forged = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                            "params": {"name": "a.b", "arguments": {}, "_meta": {TASK_META: {"ttl": 5}}}});
        let written = normalized(forged).unwrap();
        assert_eq!(written["method"], "tools/call");
        assert_eq!(written["params"]["_meta"], json!({}));
    }
}
