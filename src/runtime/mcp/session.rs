//! Sessions with MCP servers: one per server for the life of a runtime
//! ([`Bridge`]), started at the first call of one of its tools, shared by
//! every call after it (concurrent ones too), and started again at the next
//! call once it died or was retired (a timed-out or cancelled call retires
//! it). A stdio server runs as a [`ServerProcess`] (sandboxed, its own
//! process group, a private folder); an HTTP server is reached with the
//! official SDK's Streamable HTTP client.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use rmcp::service::{RoleClient, RunningService, ServiceExt};
use rmcp::transport::async_rw::TransportAdapterAsyncRW;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport};
use serde_json::Value;

use crate::event::ServerRecord;
use crate::process::server::{ServerPipes, ServerProcess};
use crate::runtime::mcp::client::{BridgeClient, Inflight};
use crate::runtime::mcp::ordered::Ordered;

/// How long a stopping stdio server may take to exit once its stdin is
/// closed, before it is killed with everything it started.
const STOP_GRACE: Duration = Duration::from_millis(500);

/// The client side of one session.
type Service = RunningService<RoleClient, BridgeClient>;

/// The sessions of one runtime, by server name, and the I/O threads they
/// run on (made at the first call of an `mcp` tool).
#[derive(Default)]
pub(crate) struct Bridge {
    io: OnceLock<Result<Io, String>>,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    /// Where the servers' notifications that belong to no call go.
    notices: Notices,
}

/// The listener of the notifications of a bridge's servers that belong to
/// no call (`rlp serve` passes them on to its clients); they are dropped
/// while none listens.
#[derive(Clone, Debug, Default)]
pub(crate) struct Notices(Arc<Mutex<Option<tokio::sync::mpsc::UnboundedSender<ServerNotice>>>>);

impl Notices {
    /// Hands `notice` to the listener, if there is one.
    pub(crate) fn send(&self, notice: ServerNotice) {
        if let Some(listener) = self.0.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
            let _ = listener.send(notice);
        }
    }
}

/// A notification of a server that belongs to no call.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ServerNotice {
    /// The server's name.
    pub server: String,
    /// What it said.
    pub kind: NoticeKind,
}

/// What a server's notification says.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum NoticeKind {
    /// `notifications/resources/updated`: the resource at this URI changed.
    ResourceUpdated(String),
    /// `notifications/resources/list_changed`.
    ResourcesChanged,
    /// `notifications/prompts/list_changed`.
    PromptsChanged,
    /// `notifications/tools/list_changed`.
    ToolsChanged,
    /// `notifications/message` sent while no call waits on the server.
    Log {
        /// Its level (`debug` … `emergency`).
        level: String,
        /// The logger that sent it, when it says.
        logger: Option<String>,
        /// What it says (as sent: scrubbed and bounded when passed on).
        data: Value,
    },
}

/// The session with one server, if one was started; held while one starts.
type Slot = Mutex<Option<Arc<Session>>>;

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge").finish_non_exhaustive()
    }
}

/// How a session is started: the server reached, and what rlp offers it.
pub(crate) enum Connect {
    /// A started stdio server and the protocol's pipes.
    Stdio(Box<ServerProcess>, ServerPipes),
    /// A Streamable HTTP endpoint and its filled headers.
    Http {
        /// The URL.
        url: String,
        /// The headers, secrets filled in.
        headers: Vec<(String, String)>,
    },
}

impl Bridge {
    /// The I/O runtime's handle, made on first use.
    pub(crate) fn handle(&self) -> Result<tokio::runtime::Handle, String> {
        let io = self.io.get_or_init(Io::start);
        io.as_ref().map(|io| io.handle.clone()).map_err(Clone::clone)
    }

    /// The session with `server` if one runs and is usable (waiting, if a
    /// call is starting it, until it is started).
    pub(crate) fn running(&self, server: &str) -> Option<Arc<Session>> {
        let slot = Arc::clone(self.slots.lock().unwrap_or_else(PoisonError::into_inner).get(server)?);
        let session = slot.lock().unwrap_or_else(PoisonError::into_inner);
        session.as_ref().filter(|s| s.is_usable()).map(Arc::clone)
    }

    /// The receiver of the notifications of this bridge's servers that
    /// belong to no call, from now on (one listener: a new one replaces it).
    pub(crate) fn listen(&self) -> tokio::sync::mpsc::UnboundedReceiver<ServerNotice> {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        *self.notices.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(sender);
        receiver
    }

    /// The live session with `server`, or a new one from `connect` (called
    /// with the server's slot held, so one call starts it and the others
    /// wait for it), which also says how the server is started; `roots`
    /// answer the server's `roots/list`.
    pub(crate) fn session(
        &self,
        server: &str,
        connect: impl FnOnce() -> Result<(Connect, Started), String>,
        roots: Vec<String>,
        startup: Duration,
    ) -> Result<Arc<Session>, String> {
        let slot_arc = {
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(slots.entry(server.to_string()).or_default())
        };
        let mut slot = slot_arc.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(session) = slot.as_ref().filter(|s| s.is_usable()) {
            return Ok(Arc::clone(session));
        }
        *slot = None;
        let handle = self.handle()?;
        let (connect, started) = connect()?;
        let notices = self.notices.clone();
        let client = |inflight, tools_changed| BridgeClient {
            server: server.to_string(),
            roots,
            inflight,
            tools_changed,
            notices,
        };
        let session = Arc::new(Session::start(server, handle, connect, started, client, startup)?);
        let _ = session.slot.set(Arc::downgrade(&slot_arc));
        *slot = Some(Arc::clone(&session));
        Ok(session)
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        // Sessions stop first (their processes with them), then the I/O
        // threads, without waiting on them: this may run in async code.
        self.slots.lock().unwrap_or_else(PoisonError::into_inner).clear();
        if let Some(Ok(io)) = self.io.take() {
            let _ = io.stop.send(());
        }
    }
}

/// The I/O runtime of the sessions: one thread that drives every session's
/// transport and runs the tasks the SDK spawns, in the order they were
/// spawned (a server's notifications are handled in the order it sent
/// them), until the bridge is dropped.
struct Io {
    handle: tokio::runtime::Handle,
    stop: tokio::sync::oneshot::Sender<()>,
}

impl Io {
    fn start() -> Result<Io, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the MCP client's I/O runtime: {e}"))?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("rlp-mcp".into())
            .spawn(move || {
                runtime.block_on(async {
                    let _ = stopped.await;
                });
            })
            .map_err(|e| format!("cannot start the MCP client's I/O thread: {e}"))?;
        Ok(Io { handle, stop })
    }
}

/// One session with one server.
pub(crate) struct Session {
    /// The server's name (its key in `servers`).
    pub(crate) server: String,
    service: Option<Arc<Service>>,
    process: Mutex<Option<ServerProcess>>,
    /// Who the server said it is, recorded on each call frame.
    pub(crate) record: ServerRecord,
    /// The calls waiting on it.
    pub(crate) inflight: Arc<Inflight>,
    tools_changed: Arc<AtomicBool>,
    definitions: Mutex<Option<Arc<Definitions>>>,
    retired: AtomicBool,
    /// Why rlp stopped reading the server, if it did ([`Ordered`]).
    stopped: Arc<OnceLock<String>>,
    handle: tokio::runtime::Handle,
    /// The bridge's slot that holds it, emptied when it is retired.
    slot: OnceLock<std::sync::Weak<Slot>>,
    /// How its server was started (its sandbox, its command as written),
    /// for the frames of the calls that use it once it runs.
    pub(crate) started: Started,
}

/// How a server was started: its sandbox and command as each call frame
/// records them (both `None` for an HTTP server), and the scrubber of the
/// secrets it was given.
#[derive(Clone, Debug, Default)]
pub(crate) struct Started {
    /// The sandbox it runs in.
    pub(crate) sandbox: Option<crate::event::SandboxRecord>,
    /// Its command as tools.json writes it, and as resolved.
    pub(crate) command: Option<crate::event::CommandRecord>,
    /// Scrubs the values of the secrets in its env, arguments or headers
    /// from what it says outside a call.
    pub(crate) scrubber: crate::runtime::scrub::Scrubber,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("server", &self.server).field("record", &self.record).finish_non_exhaustive()
    }
}

impl Session {
    /// Connects and does the handshake within `startup`.
    fn start(
        server: &str,
        handle: tokio::runtime::Handle,
        connect: Connect,
        started: Started,
        client: impl FnOnce(Arc<Inflight>, Arc<AtomicBool>) -> BridgeClient,
        startup: Duration,
    ) -> Result<Session, String> {
        let inflight = Arc::new(Inflight::default());
        let tools_changed = Arc::new(AtomicBool::new(false));
        let stopped = Arc::new(OnceLock::new());
        let client = client(Arc::clone(&inflight), Arc::clone(&tools_changed));
        let reading = Arc::clone(&stopped);
        let (service, process) = match connect {
            Connect::Stdio(process, pipes) => {
                let started = handle.block_on(async move {
                    let read = tokio::net::unix::pipe::Receiver::from_owned_fd(pipes.stdout)
                        .map_err(|e| format!("cannot read the server's stdout: {e}"))?;
                    let write = tokio::net::unix::pipe::Sender::from_owned_fd(pipes.stdin)
                        .map_err(|e| format!("cannot write the server's stdin: {e}"))?;
                    let transport =
                        IntoTransport::<RoleClient, std::io::Error, TransportAdapterAsyncRW>::into_transport((
                            read, write,
                        ));
                    let listener = client.listener();
                    handshake(client.serve(Ordered::new(transport, listener, reading)), startup).await
                });
                match started {
                    Ok(service) => (service, Some(*process)),
                    Err(why) => {
                        let said = process.stderr_tail();
                        process.stop(STOP_GRACE);
                        return Err(with_stderr(why, &said));
                    }
                }
            }
            Connect::Http { url, headers } => {
                install_crypto_provider();
                let mut custom = HashMap::new();
                for (name, value) in headers {
                    let name = http::HeaderName::from_bytes(name.as_bytes())
                        .map_err(|e| format!("header `{name}` is not a header name: {e}"))?;
                    let value = http::HeaderValue::from_str(&value)
                        .map_err(|_| format!("header `{name}` is not a valid header value"))?;
                    custom.insert(name, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
                let service = handle.block_on(async move {
                    let transport = StreamableHttpClientTransport::from_config(config);
                    let listener = client.listener();
                    handshake(client.serve(Ordered::new(transport, listener, reading)), startup).await
                })?;
                (service, None)
            }
        };
        let record = server_record(&service);
        Ok(Session {
            server: server.to_string(),
            service: Some(Arc::new(service)),
            process: Mutex::new(process),
            record,
            inflight,
            tools_changed,
            definitions: Mutex::new(None),
            retired: AtomicBool::new(false),
            stopped,
            started,
            handle,
            slot: OnceLock::new(),
        })
    }

    /// The client side, shared by the calls.
    pub(crate) fn service(&self) -> Arc<Service> {
        Arc::clone(self.service.as_ref().expect("a session has its service until it drops"))
    }

    /// Whether the server said at the handshake that it offers `what`
    /// (`resources`, `prompts`, `completions`: a member of its capabilities).
    pub(crate) fn offers(&self, what: &str) -> bool {
        let info = self.service.as_ref().and_then(|s| s.peer_info().and_then(|i| serde_json::to_value(&*i).ok()));
        info.is_some_and(|info| info.pointer(&format!("/capabilities/{what}")).is_some())
    }

    /// Why rlp stopped reading the server, if it did: the calls waiting on
    /// it fail with this.
    pub(crate) fn stopped_reading(&self) -> Option<&str> {
        self.stopped.get().map(String::as_str)
    }

    /// The I/O runtime the session runs on.
    pub(crate) fn handle(&self) -> &tokio::runtime::Handle {
        &self.handle
    }

    /// Takes it out of service: the next call starts a new session; this
    /// one stops once the calls that hold it end.
    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::SeqCst);
        let Some(slot) = self.slot.get().and_then(std::sync::Weak::upgrade) else { return };
        let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.as_ref().is_some_and(|held| std::ptr::eq(Arc::as_ptr(held), self)) {
            // Dropped here only if no call holds it; else by the last one.
            let retired = slot.take();
            drop(slot);
            drop(retired);
        }
    }

    /// Whether the next call may use it: not retired, and its server alive.
    fn is_usable(&self) -> bool {
        !self.retired.load(Ordering::SeqCst)
            && !self.service.as_ref().is_some_and(|s| s.is_closed())
            && !self.has_exited()
    }

    /// Whether its stdio server has exited.
    pub(crate) fn has_exited(&self) -> bool {
        let mut process = self.process.lock().unwrap_or_else(PoisonError::into_inner);
        process.as_mut().is_some_and(ServerProcess::has_exited)
    }

    /// Whether its stdio server exits within `grace` (the end of its
    /// pipes reaches rlp a moment before its exit does).
    pub(crate) fn exits_within(&self, grace: Duration) -> bool {
        let deadline = std::time::Instant::now() + grace;
        loop {
            if self.has_exited() {
                return true;
            }
            if !self.is_stdio() || std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The end of what its stdio server wrote on stderr (empty for HTTP).
    pub(crate) fn stderr_tail(&self) -> String {
        let process = self.process.lock().unwrap_or_else(PoisonError::into_inner);
        process.as_ref().map(ServerProcess::stderr_tail).unwrap_or_default()
    }

    /// Whether it runs a process of its own (stdio).
    pub(crate) fn is_stdio(&self) -> bool {
        self.process.lock().unwrap_or_else(PoisonError::into_inner).is_some()
    }

    /// The server's definitions of its tools (`tools/list`, every page), by
    /// name, each with its pin: listed once, and again after the server said
    /// the list changed.
    pub(crate) fn definitions(&self, deadline: Duration) -> Result<Arc<Definitions>, String> {
        let mut definitions = self.definitions.lock().unwrap_or_else(PoisonError::into_inner);
        let changed = self.tools_changed.swap(false, Ordering::SeqCst);
        if let Some(known) = definitions.as_ref().filter(|_| !changed) {
            return Ok(Arc::clone(known));
        }
        let service = self.service();
        let listed = self.handle.block_on(async move {
            match tokio::time::timeout(deadline, service.peer().list_all_tools()).await {
                Ok(Ok(tools)) => Ok(tools),
                Ok(Err(e)) => Err(format!("tools/list failed: {e}")),
                Err(_) => Err(format!("tools/list got no answer within {} ms", deadline.as_millis())),
            }
        })?;
        let by_name: Definitions = listed
            .into_iter()
            .filter_map(|tool| {
                let definition = serde_json::to_value(&tool).ok()?;
                let pin = super::pin::definition_blake3(&definition);
                Some((tool.name.to_string(), Listed { definition, pin }))
            })
            .collect();
        let by_name = Arc::new(by_name);
        *definitions = Some(Arc::clone(&by_name));
        Ok(by_name)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Dropping the client closes the transport (a stdio server's stdin);
        // the server then gets a grace to exit.
        drop(self.service.take());
        if let Some(process) = self.process.get_mut().unwrap_or_else(PoisonError::into_inner).take() {
            process.stop(STOP_GRACE);
        }
    }
}

/// A server's tools as it lists them, by name.
pub(crate) type Definitions = HashMap<String, Listed>;

/// One tool as its server lists it.
#[derive(Debug)]
pub(crate) struct Listed {
    /// Its definition (`Tool` as JSON).
    pub(crate) definition: Value,
    /// Its `definition_blake3`, computed once per listing.
    pub(crate) pin: String,
}

/// The MCP handshake, bounded by `startup`.
async fn handshake<E: std::fmt::Display>(
    serving: impl Future<Output = Result<Service, E>>,
    startup: Duration,
) -> Result<Service, String> {
    match tokio::time::timeout(startup, serving).await {
        Ok(Ok(service)) => Ok(service),
        Ok(Err(e)) => Err(format!("the MCP handshake failed: {e}")),
        Err(_) => Err(format!(
            "the server did not finish the MCP handshake within {} ms (startup_timeout_ms)",
            startup.as_millis()
        )),
    }
}

/// `why`, with what the server wrote on stderr.
pub(crate) fn with_stderr(why: String, said: &str) -> String {
    if said.is_empty() { why } else { format!("{why}; its stderr: {said}") }
}

/// Most characters of each field of a [`ServerRecord`]: every call frame
/// carries the record, and the server chooses what it says.
const SERVER_RECORD_CHARS: usize = 256;

/// Who the server says it is: name, version and protocol revision, each
/// cut to [`SERVER_RECORD_CHARS`].
fn server_record(service: &Service) -> ServerRecord {
    let info = service.peer_info().and_then(|info| serde_json::to_value(&*info).ok()).unwrap_or(Value::Null);
    let text = |pointer: &str| {
        info.pointer(pointer).and_then(Value::as_str).map(|text| crate::text::ellipsize(text, SERVER_RECORD_CHARS))
    };
    ServerRecord {
        name: text("/serverInfo/name").unwrap_or_default(),
        version: text("/serverInfo/version"),
        protocol: text("/protocolVersion"),
    }
}

/// Makes ring the process's TLS provider, once, for the HTTP client of the
/// SDK (as for every other TLS client of rlp).
fn install_crypto_provider() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
