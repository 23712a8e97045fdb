//! The MCP server handler: `tools/list` and `tools/call` over the runtime,
//! and under `--expose core` the meta-tools that search, describe and call
//! the tools not listed.
//!
//! One handler serves one session (2025-11-25: stdio, or one Streamable
//! HTTP session) or one stateless request (2026-07-28); what they share —
//! the runtime, the tool list, the call limit, the parked calls — is in
//! [`Shared`].

use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams, CompleteResult, CustomRequest,
    CustomResult, GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult, Implementation,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, TaskStatus, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use uuid::Uuid;

use crate::discovery::definition::ResultShape;
use crate::discovery::meta::{Discovery, MetaCall};
use crate::discovery::{self, Catalog, Expose, meta};
use crate::event::ToolDiscoverPayload;
use crate::runtime::asking::answer::AnswerSource;
use crate::runtime::asking::confirm::Confirmer;
use crate::runtime::mcp::forward::Relay;
use crate::runtime::{CallContext, CallRequest, Cancel, ProgressSink, Runtime, Sampler};
use crate::serve::asking::{
    Asker, McpAnswerer, McpConfirmer, NoAsker, RoundTripAsker, SessionAsker, SessionSampler, Turn,
};
use crate::serve::bridged::{self, Bridged, List, Origin, notices};
use crate::serve::calls::{Event, Job, Pending, complete, follow, forward_notifications};
use crate::serve::http::client_gone;
use crate::serve::inbound::{given_context, named_trace, traceparent};
use crate::serve::logging::LogThreshold;
use crate::serve::parked::Parked;
use crate::serve::tasks::{self, NewTask, Owner, Task, TaskAsker, Tasks, legacy, wire};
use std::time::Duration;

/// What every session and request of one server shares.
pub(crate) struct Shared {
    pub(crate) runtime: Arc<Runtime>,
    /// The exposed tools, their definitions and their search.
    pub(crate) catalog: Catalog,
    /// Which tools `tools/list` offers.
    pub(crate) expose: Expose,
    /// `--activate`: discoverable tools join a session's list once described.
    pub(crate) activate: bool,
    /// What `tools/list` answers, built once.
    pub(crate) listed: ListToolsResult,
    /// The trace of calls that name none and belong to no session.
    pub(crate) run_trace: Uuid,
    /// `--yes`: calls that need confirmation are approved without asking.
    pub(crate) yes: bool,
    /// At most `--max-calls` calls run at once.
    pub(crate) calls: Arc<Semaphore>,
    pub(crate) parked: Parked,
    pub(crate) handle: tokio::runtime::Handle,
    /// The bridged servers whose resources and prompts are offered.
    pub(crate) bridged: Bridged,
    /// The calls run as tasks.
    pub(crate) tasks: Tasks,
    /// `--task-after`: how long a call of a client that takes tasks
    /// (2026-07-28) is answered in before it goes on as a task.
    pub(crate) task_after: Duration,
}

impl Shared {
    /// Everything a server over `runtime` shares.
    /// Fails only if a tool definition is not one the SDK can send.
    pub(crate) fn new(
        runtime: Arc<Runtime>,
        options: &crate::serve::ServeOptions,
    ) -> Result<Shared, serde_json::Error> {
        let catalog = Catalog::of(&runtime);
        let listed = catalog.tools_list(options.expose)?;
        Ok(Shared {
            catalog,
            expose: options.expose,
            activate: options.activate,
            listed,
            run_trace: options.run_trace,
            yes: options.yes,
            calls: Arc::new(Semaphore::new(options.max_calls.max(1))),
            parked: Parked::default(),
            handle: tokio::runtime::Handle::current(),
            bridged: Bridged::of(&runtime),
            tasks: Tasks::default(),
            task_after: options.task_after,
            runtime,
        })
    }
}

/// The handler of one session (or one stateless request).
#[derive(Clone)]
pub(crate) struct Handler {
    shared: Arc<Shared>,
    /// The session's trace (2025-11-25), made at its first call.
    session_trace: Arc<OnceLock<Uuid>>,
    /// The least severe log message the session's client wants.
    log_threshold: Arc<LogThreshold>,
    /// Tells this session from the others.
    key: Uuid,
    /// One form at a time is open with this session's client.
    turn: Turn,
    /// The discoverable tools this session described (`--activate`).
    activated: Arc<Mutex<std::collections::BTreeSet<String>>>,
}

impl Handler {
    /// A handler whose session records into a trace of its own.
    pub(crate) fn new(shared: Arc<Shared>) -> Handler {
        Handler {
            shared,
            session_trace: Arc::new(OnceLock::new()),
            log_threshold: Arc::default(),
            key: Uuid::now_v7(),
            turn: Turn::default(),
            activated: Arc::default(),
        }
    }

    /// A handler whose one session records into the server-run trace (stdio).
    pub(crate) fn in_run_trace(shared: Arc<Shared>) -> Handler {
        let session_trace = OnceLock::from(shared.run_trace);
        Handler {
            shared,
            session_trace: Arc::new(session_trace),
            log_threshold: Arc::default(),
            key: Uuid::now_v7(),
            turn: Turn::default(),
            activated: Arc::default(),
        }
    }

    /// The trace a call goes into: the one its `_meta` names; else its
    /// session's (2025-11-25); else the server-run trace.
    fn trace_of(&self, context: &RequestContext<RoleServer>, round_trips: bool) -> Result<Uuid, ErrorData> {
        if let Some(named) = named_trace(&context.meta).map_err(|why| ErrorData::invalid_params(why, None))? {
            return Ok(named);
        }
        if round_trips {
            return Ok(self.shared.run_trace);
        }
        Ok(self.session_trace())
    }

    /// The session's trace, made when first needed.
    fn session_trace(&self) -> Uuid {
        *self.session_trace.get_or_init(|| {
            let trace = Uuid::now_v7();
            crate::notice::note(&format!("rlp serve: session trace {trace}"));
            trace
        })
    }

    /// This session as the bridged servers' notifications reach it.
    fn listener(&self, peer: rmcp::service::Peer<RoleServer>) -> notices::Session {
        notices::Session {
            key: self.key,
            peer,
            trace: self.session_trace(),
            log_threshold: Arc::clone(&self.log_threshold),
        }
    }

    /// Where a request for a bridged server's resources or prompts comes
    /// from: its trace, and the client as it answers what the server asks
    /// meanwhile (over a 2025-11-25 session; a stateless request has no
    /// channel for it, so the server's questions are declined).
    fn origin(&self, context: &RequestContext<RoleServer>) -> Result<Origin, ErrorData> {
        let trace = self.trace_of(context, round_trips(context))?;
        // A bundle with no server to offer declares no resources, prompts
        // or completions, and answers none of their methods.
        if !self.shared.bridged.any() {
            return Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                "this bundle offers no resources, prompts or completions: its tools live in no MCP server",
                None,
            ));
        }
        let elicits = context.client_capabilities().is_some_and(|caps| caps.elicitation.is_some());
        let answerer = (elicits && !round_trips(context)).then(|| {
            let asker = SessionAsker {
                peer: context.peer.clone(),
                handle: self.shared.handle.clone(),
                cancelled: context.ct.clone(),
                turn: Arc::clone(&self.turn),
            };
            Arc::new(McpAnswerer(Arc::new(asker))) as Arc<dyn crate::runtime::asking::answer::Answerer>
        });
        Ok(Origin { trace, relay: Relay { answerer, sampler: self.sampler(context) } })
    }

    /// Who asks the client for this request, and whether it asks by round
    /// trips (2026-07-28). The sender half of the answers channel goes to
    /// the follower.
    /// A call run as a task stops waiting for an answer when the task is
    /// cancelled (`stop`), not when the request that made it ends.
    fn asker(
        &self,
        context: &RequestContext<RoleServer>,
        events: &tokio::sync::mpsc::UnboundedSender<Event>,
        stop: Option<tokio_util::sync::CancellationToken>,
    ) -> (Arc<dyn Asker>, Option<mpsc::Sender<rmcp::model::InputResponses>>) {
        let elicits = context.client_capabilities().is_some_and(|caps| caps.elicitation.is_some());
        if !elicits {
            return (Arc::new(NoAsker), None);
        }
        if round_trips(context) {
            let (sender, receiver) = mpsc::channel();
            let asker =
                RoundTripAsker { events: events.clone(), answers: Mutex::new(receiver), rounds: Default::default() };
            return (Arc::new(asker), Some(sender));
        }
        let asker = SessionAsker {
            peer: context.peer.clone(),
            handle: self.shared.handle.clone(),
            cancelled: stop.unwrap_or_else(|| context.ct.clone()),
            turn: Arc::clone(&self.turn),
        };
        (Arc::new(asker), None)
    }

    /// Who relays a bridged server's sampling requests: the client, over the
    /// session, when it says it samples.
    fn sampler(&self, context: &RequestContext<RoleServer>) -> Option<Arc<dyn Sampler>> {
        let samples = context.client_capabilities().is_some_and(|caps| caps.sampling.is_some());
        samples.then(|| {
            Arc::new(SessionSampler {
                peer: context.peer.clone(),
                handle: self.shared.handle.clone(),
                cancelled: context.ct.clone(),
            }) as Arc<dyn Sampler>
        })
    }

    /// Whether `tool` may be called by name: always, unless `--activate`
    /// keeps a discoverable tool back until the session described it.
    fn is_active(&self, tool: &str) -> bool {
        if !self.shared.activate || self.shared.catalog.get(tool).is_some_and(|t| t.core) {
            return true;
        }
        self.activated.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(tool)
    }

    /// Activates the tools a description showed (`--activate`), and tells the
    /// client its list changed when one joined it.
    async fn activate(&self, described: &[String], peer: &rmcp::service::Peer<RoleServer>) {
        if !self.shared.activate {
            return;
        }
        let joined = {
            let mut activated = self.activated.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let catalog = &self.shared.catalog;
            let new: Vec<&String> = described.iter().filter(|id| catalog.get(id).is_some_and(|t| !t.core)).collect();
            // Every new one is inserted (no short circuit).
            new.into_iter().filter(|id| activated.insert((*id).clone())).count() > 0
        };
        if joined {
            let _ = peer.notify_tool_list_changed().await;
        }
    }

    /// Starts a new call of `params` (named directly, or through
    /// `rlp.call_tool`: `by_meta_tool`) and follows it.
    async fn start(
        &self,
        params: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        by_meta_tool: bool,
    ) -> Result<CallToolResponse, ErrorData> {
        let cancel = new_cancel()?;
        let (pending, job) = self.launch(params, &context, by_meta_tool, cancel, None)?;
        job.start(Arc::clone(&self.shared.calls)).await?;
        // A session's response stream that drops is resumable (Last-Event-ID):
        // only a stateless request's call ends with its connection.
        let gone = if round_trips(&context) { client_gone(&context.extensions) } else { None };
        follow(pending, &self.shared.parked, &context.ct, gone.as_ref()).await
    }

    /// Prepares a call of `params`: what follows it, and the job that runs
    /// it once a call slot is free. For a call run as `task`, questions go
    /// through the task and the call is tagged with its id.
    fn launch(
        &self,
        params: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        by_meta_tool: bool,
        cancel: Cancel,
        task: Option<&Arc<Task>>,
    ) -> Result<(Pending, Job), ErrorData> {
        let runtime = &self.shared.runtime;
        let tool = params.name.to_string();
        if runtime.tool(&tool).is_none() {
            let hint = match self.shared.expose {
                Expose::Core => format!("find tools with `{}`", meta::SEARCH),
                Expose::All => {
                    let known: Vec<&str> = self.shared.catalog.tools().iter().map(|t| t.id.as_str()).collect();
                    format!("the tools are: {}", if known.is_empty() { "none".into() } else { known.join(", ") })
                }
            };
            return Err(ErrorData::invalid_params(format!("unknown tool `{tool}`; {hint}"), None));
        }
        if !by_meta_tool && !self.is_active(&tool) {
            return Err(ErrorData::invalid_params(
                format!(
                    "tool `{tool}` is not active in this session: describe it first with `{}` (or call it with `{}`)",
                    meta::DESCRIBE,
                    meta::CALL
                ),
                None,
            ));
        }
        let round_trips = round_trips(context);
        let mut request = CallRequest::new(tool.clone(), Value::Object(params.arguments.unwrap_or_default()));
        request.trace_id = Some(self.trace_of(context, round_trips)?);
        request.answer_source = AnswerSource::Mcp;
        request.traceparent = traceparent(&context.meta);
        // A caller's own tool context (seed 002) brings answers and options,
        // checked as `--answer` and `--option` are.
        (request.answers, request.options) =
            given_context(&context.meta).map_err(|why| ErrorData::invalid_params(why, None))?;
        let (events, receiver) = tokio::sync::mpsc::unbounded_channel();
        let (mut asker, answers) = self.asker(context, &events, task.map(|t| t.stop.clone()));
        if let Some(task) = task {
            request.tags.push(format!("{}{}", tasks::TAG_PREFIX, task.id));
            if !round_trips {
                asker = Arc::new(TaskAsker { inner: asker, task: Arc::clone(task) });
            }
        }
        let confirmer: Option<Arc<dyn Confirmer>> =
            if self.shared.yes { None } else { Some(Arc::new(McpConfirmer(Arc::clone(&asker)))) };
        let (notifier, notifications) = forward_notifications(Arc::clone(&self.log_threshold));
        notifications.follow(context.peer.clone(), context.meta.get_progress_token());
        let call_context = CallContext {
            confirmer,
            answerer: Some(Arc::new(McpAnswerer(asker))),
            cancel: Some(cancel.clone()),
            progress: Some(Arc::new(notifier) as Arc<dyn ProgressSink>),
            sampler: self.sampler(context),
        };
        let shape = self.shared.catalog.get(&tool).map_or(ResultShape::Wrapped, |t| t.shape);
        let pending = Pending { events: receiver, answers, cancel, shape, notifications };
        let job = Job { runtime: Arc::clone(runtime), request, context: call_context, events };
        Ok((pending, job))
    }

    /// Resumes the call parked under `state` with the client's answers.
    async fn resume(
        &self,
        state: &str,
        params: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let pending = self.shared.parked.take(state).ok_or_else(|| {
            ErrorData::invalid_params(
                "unknown or expired `requestState`: the call it continued has ended; call the tool again",
                None,
            )
        })?;
        // What the call says from here on goes to this request.
        pending.notifications.follow(context.peer.clone(), context.meta.get_progress_token());
        if let Some(answers) = &pending.answers {
            let _ = answers.send(params.input_responses.unwrap_or_default());
        }
        let gone = client_gone(&context.extensions);
        follow(pending, &self.shared.parked, &context.ct, gone.as_ref()).await
    }
}

impl Handler {
    /// Answers `rlp.search_tools` or `rlp.describe_tools` (`discovery`), and
    /// records what the client was shown before answering.
    async fn discover(
        &self,
        discovery: Discovery,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let trace = self.trace_of(context, round_trips(context))?;
        let shared = Arc::clone(&self.shared);
        let (structured, frame): (Value, ToolDiscoverPayload) = match discovery {
            Discovery::Search(request) => {
                let found = shared.catalog.search(&request).map_err(|why| invalid(meta::SEARCH, &why))?;
                let frame = discovery::search_frame(&request, &found);
                (json!({"tools": found.iter().map(|t| discovery::found_json(t)).collect::<Vec<_>>()}), frame)
            }
            Discovery::Describe(ids) => {
                let (described, unknown) =
                    shared.catalog.describe(&ids).map_err(|why| invalid(meta::DESCRIBE, &why))?;
                let shown: Vec<String> = described.iter().map(|t| t.id.clone()).collect();
                self.activate(&shown, &context.peer).await;
                let frame = discovery::describe_frame(&described, &unknown);
                let definitions: Vec<Value> = described.iter().map(|t| t.described()).collect();
                (json!({"tools": definitions, "unknown": unknown}), frame)
            }
        };
        // A discovery waits for a call slot like a call: the ledger writes
        // of a flood of searches queue behind --max-calls.
        let permit = Arc::clone(&shared.calls)
            .acquire_owned()
            .await
            .map_err(|_| ErrorData::internal_error("the server is shutting down", None))?;
        let recorded = tokio::task::spawn_blocking(move || {
            let recorded = shared.runtime.record_frame(trace, crate::event::EventKind::ToolDiscover, &frame);
            drop(permit);
            recorded
        })
        .await
        .map_err(|e| ErrorData::internal_error(format!("cannot record the discovery: {e}"), None))?;
        recorded.map_err(|e| ErrorData::internal_error(format!("cannot record the discovery: {e}"), None))?;
        complete(structured, json!({"dev.runloop/discover": {"trace_id": trace}}))
    }
}

/// A `tools/call` as the handler reads it: a call, or a discovery of
/// `--expose core`'s meta-tools.
enum Read {
    Call(CallToolRequestParams, bool),
    Discover(Discovery),
}

impl Handler {
    /// Reads `params`: a meta-tool of `--expose core` names the call it
    /// makes (`rlp.call_tool`), or is a discovery.
    fn read(&self, mut params: CallToolRequestParams) -> Result<Read, ErrorData> {
        if self.shared.expose == Expose::Core
            && let Some(read) = meta::read(&params.name, &mut params.arguments)
        {
            return match read.map_err(|why| ErrorData::invalid_params(why, None))? {
                MetaCall::Call(id, arguments) => {
                    params.name = id.into();
                    params.arguments = Some(arguments);
                    Ok(Read::Call(params, true))
                }
                MetaCall::Discover(discovery) => Ok(Read::Discover(discovery)),
            };
        }
        Ok(Read::Call(params, false))
    }

    /// Whose the tasks of this request are: its session's (2025-11-25), or
    /// none (a stateless request of 2026-07-28, found by id alone).
    fn owner(&self, context: &RequestContext<RoleServer>) -> Owner {
        if round_trips(context) { None } else { Some(self.key) }
    }

    /// Starts `params` as a task: the task, already running.
    fn start_task(
        &self,
        params: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        by_meta_tool: bool,
        ttl_ms: Option<u64>,
    ) -> Result<Result<Arc<Task>, tasks::Refused>, ErrorData> {
        let cancel = new_cancel()?;
        let listener = (!round_trips(context)).then(|| context.peer.clone());
        let owner = self.owner(context);
        let task = match self.shared.tasks.create(NewTask { owner, ttl_ms, cancel: cancel.clone(), listener }) {
            Ok(task) => task,
            Err(refused) => return Ok(Err(refused)),
        };
        let (pending, job) = match self.launch(params, context, by_meta_tool, cancel, Some(&task)) {
            Ok(launched) => launched,
            Err(error) => {
                self.shared.tasks.forget(&task.id);
                return Err(error);
            }
        };
        tasks::run(Arc::clone(&task), pending);
        let calls = Arc::clone(&self.shared.calls);
        tokio::spawn(async move {
            // A job that cannot start drops its events: the task fails.
            let _ = job.start(calls).await;
        });
        Ok(Ok(task))
    }

    /// A `tools/call` of a client that takes tasks (2026-07-28): a
    /// long-running tool's call is a task at once; another's is answered
    /// if it ends within `--task-after`, else it goes on as a task (as it
    /// does at once when it asks the client something).
    async fn call_maybe_as_task(
        &self,
        params: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        by_meta_tool: bool,
    ) -> Result<CallToolResponse, ErrorData> {
        let long_running = self.shared.catalog.get(&params.name).is_some_and(|t| t.long_running);
        let task = match self.start_task(params.clone(), &context, by_meta_tool, None)? {
            Ok(task) => task,
            // No room for one more task: the call is answered when it ends.
            Err(_) => return self.start(params, context, by_meta_tool).await,
        };
        if !long_running && !self.shared.task_after.is_zero() {
            let _ = tokio::time::timeout(self.shared.task_after, task.settled()).await;
            let state = task.state();
            if state.status.is_terminal() && state.status != TaskStatus::Cancelled {
                task.ended().await;
                self.shared.tasks.forget(&task.id);
                let outcome = task
                    .state()
                    .outcome
                    .unwrap_or_else(|| Err(ErrorData::internal_error("the call ended without an outcome", None)))?;
                return from_json::<rmcp::model::CallToolResult>(outcome).map(CallToolResponse::Complete);
            }
        }
        Ok(CallToolResponse::Task(wire::created(&task)?))
    }

    /// `tools/call` with a `task` (2025-11-25): the task, answered at once.
    async fn legacy_call(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<Value, ErrorData> {
        let mut params: CallToolRequestParams = serde_json::from_value(request.params.unwrap_or_default())
            .map_err(|e| ErrorData::invalid_params(format!("invalid `tools/call` params: {e}"), None))?;
        params.meta = None;
        let ttl_ms =
            task_ttl(context.meta.get(legacy::TASK_META)).map_err(|why| ErrorData::invalid_params(why, None))?;
        let (params, by_meta_tool) = match self.read(params)? {
            Read::Call(params, by_meta_tool) => (params, by_meta_tool),
            Read::Discover(_) => {
                return Err(ErrorData::new(
                    rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                    "the discovery meta-tools do not run as tasks (their execution.taskSupport is forbidden)",
                    None,
                ));
            }
        };
        match self.start_task(params, &context, by_meta_tool, ttl_ms)? {
            Ok(task) => Ok(wire::legacy_created(&task)),
            Err(tasks::Refused::Full) => Err(ErrorData::internal_error(
                format!(
                    "too many tasks are kept (at most {} per session, {} in all): wait for some to end or expire",
                    tasks::MAX_TASKS_PER_OWNER,
                    tasks::MAX_TASKS
                ),
                None,
            )),
            Err(tasks::Refused::NoRandomness) => {
                Err(ErrorData::internal_error("cannot make a task id: no randomness", None))
            }
        }
    }

    /// `tools/list` of a 2025-11-25 session: each tool says it may run as a
    /// task (`execution.taskSupport`), but the discovery meta-tools.
    async fn legacy_list_tools(&self, context: RequestContext<RoleServer>) -> Result<Value, ErrorData> {
        let listed = self.list_tools(None, context).await?;
        let mut written = serde_json::to_value(listed)
            .map_err(|e| ErrorData::internal_error(format!("cannot list the tools: {e}"), None))?;
        written.as_object_mut().map(|fields| fields.remove("resultType"));
        for tool in written.get_mut("tools").and_then(Value::as_array_mut).into_iter().flatten() {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
            if name != meta::SEARCH && name != meta::DESCRIBE {
                tool["execution"] = json!({"taskSupport": "optional"});
            }
        }
        Ok(written)
    }

    /// The 2025-11-25 task methods (`tasks/get`, `tasks/result`,
    /// `tasks/list`, `tasks/cancel`), for the session's own tasks.
    async fn legacy_tasks(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<Value, ErrorData> {
        if round_trips(&context) {
            return Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                format!("{} is a method of 2025-11-25 tasks", request.method),
                None,
            ));
        }
        let owner = self.owner(&context);
        let params = request.params.unwrap_or_default();
        let task_id = || {
            params
                .get("taskId")
                .and_then(Value::as_str)
                .ok_or_else(|| ErrorData::invalid_params("`taskId` is required", None))
        };
        match request.method.as_str() {
            legacy::GET => {
                let task = self.shared.tasks.get(task_id()?, owner)?;
                Ok(wire::legacy_task(&task))
            }
            "tasks/result" => {
                let task = self.shared.tasks.get(task_id()?, owner)?;
                let state = tokio::select! {
                    state = task.terminal() => state,
                    () = context.ct.cancelled() => return Err(ErrorData::internal_error("the request was cancelled", None)),
                };
                wire::legacy_result(&task, state)
            }
            "tasks/list" => {
                wire::legacy_list(&self.shared.tasks.of(owner), params.get("cursor").and_then(Value::as_str))
            }
            legacy::CANCEL => {
                let task = self.shared.tasks.get(task_id()?, owner)?;
                cancel(&task).await?;
                Ok(wire::legacy_task(&task))
            }
            _ => unreachable_method(&request.method),
        }
    }
}

/// Cancels `task` and waits (a bounded while) until its call is recorded
/// as cancelled; an error for a task already terminal.
async fn cancel(task: &Task) -> Result<(), ErrorData> {
    task.cancel("The task was cancelled by request.").map_err(|status| {
        let status = serde_json::to_value(status).unwrap_or_default();
        ErrorData::invalid_params(format!("Cannot cancel task: already in terminal status {status}"), None)
    })?;
    let _ = tokio::time::timeout(CANCEL_WAIT, task.ended()).await;
    Ok(())
}

/// How long `tasks/cancel` waits for the cancelled call to be recorded.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// The error for a method no handler answers.
fn unreachable_method<T>(method: &str) -> Result<T, ErrorData> {
    Err(ErrorData::new(rmcp::model::ErrorCode::METHOD_NOT_FOUND, method.to_string(), None))
}

/// Whether the request declares the tasks extension (2026-07-28).
fn takes_tasks(context: &RequestContext<RoleServer>) -> bool {
    round_trips(context) && context.client_capabilities().is_some_and(|caps| caps.supports_tasks())
}

impl Handler {
    /// `resources/subscribe` (`on`) or `resources/unsubscribe` of `uri`,
    /// passed to its server; this session then hears of its updates, or
    /// no longer.
    async fn subscription(&self, uri: &str, context: RequestContext<RoleServer>, on: bool) -> Result<(), ErrorData> {
        let origin = self.origin(&context)?;
        let method = if on { "resources/subscribe" } else { "resources/unsubscribe" };
        let server = bridged::route(&self.shared, &origin, uri).await?;
        let listeners = &self.shared.bridged.listeners;
        // The session listens before the server is asked: a server may say
        // the resource changed as it answers.
        if on {
            listeners.subscribe(server, uri, self.listener(context.peer.clone()), true);
        }
        match bridged::resource_at(&self.shared, &origin, server, method, uri).await {
            Ok(_) if !on => listeners.subscribe(server, uri, self.listener(context.peer), false),
            Ok(_) => {}
            Err(error) => {
                if on {
                    listeners.subscribe(server, uri, self.listener(context.peer), false);
                }
                return Err(error);
            }
        }
        Ok(())
    }
}

/// A server's answer (JSON) as the SDK's type, marked as a complete result
/// (`resultType`, which 2026-07-28 clients require and a server of an
/// earlier revision does not write).
fn from_json<T: serde::de::DeserializeOwned>(mut answer: Value) -> Result<T, ErrorData> {
    if let Some(fields) = answer.as_object_mut() {
        fields.entry("resultType").or_insert_with(|| json!("complete"));
    }
    serde_json::from_value(answer)
        .map_err(|e| ErrorData::internal_error(format!("the server's answer is not valid: {e}"), None))
}

/// A -32602 error for invalid meta-tool arguments.
fn invalid(tool: &str, why: &str) -> ErrorData {
    ErrorData::invalid_params(format!("invalid arguments for `{tool}`: {why}"), None)
}

/// Whether the request speaks 2026-07-28 or later (questions by round trips).
fn round_trips(context: &RequestContext<RoleServer>) -> bool {
    context.protocol_version().is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

impl ServerHandler for Handler {
    #[allow(deprecated, reason = "logging is deprecated by SEP-2577 and what servers in use today send")]
    fn get_info(&self) -> ServerConfig {
        let runtime = &self.shared.runtime;
        let mut info = ServerConfig::default();
        info.capabilities = if self.shared.bridged.any() {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_logging()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_resources_list_changed()
                .enable_prompts()
                .enable_prompts_list_changed()
                .enable_completions()
                .build()
        } else if self.shared.activate {
            ServerCapabilities::builder().enable_tools().enable_tool_list_changed().enable_logging().build()
        } else {
            ServerCapabilities::builder().enable_tools().enable_logging().build()
        };
        // Tool calls may run as tasks (2026-07-28 extension; 2025-11-25
        // sessions are told in their `initialize` result: tasks::legacy).
        info.capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .insert(rmcp::model::TASKS_EXTENSION_ID.to_string(), serde_json::Map::new());
        info.server_info = Implementation::new(
            format!("rlp-{}", runtime.agent()),
            runtime.version().unwrap_or(env!("CARGO_PKG_VERSION")).to_string(),
        );
        info.instructions = Some(format!(
            "The tools of agent bundle `{}`, run by rlp within the bundle's policy; every call is recorded.",
            runtime.agent()
        ));
        info
    }

    /// The client's log level: the log messages of bridged servers below it
    /// are not passed on.
    #[allow(deprecated, reason = "logging is deprecated by SEP-2577 and what servers in use today send")]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let level = serde_json::to_value(request.level).map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        self.log_threshold.set(level.as_str().unwrap_or("info"));
        Ok(())
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        if self.shared.bridged.any() {
            self.shared.bridged.listeners.join(self.listener(context.peer));
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let items = bridged::list(&self.shared, &self.origin(&context)?, List::Resources).await?;
        from_json(json!({ "resources": items }))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let items = bridged::list(&self.shared, &self.origin(&context)?, List::Templates).await?;
        from_json(json!({ "resourceTemplates": items }))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let origin = self.origin(&context)?;
        let server = bridged::route(&self.shared, &origin, &request.uri).await?;
        let answer = bridged::resource_at(&self.shared, &origin, server, "resources/read", &request.uri).await?;
        Ok(ReadResourceResponse::Complete(from_json(answer)?))
    }

    #[allow(deprecated, reason = "resources/subscribe is what clients of 2025-11-25 send")]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscription(&request.uri, context, true).await
    }

    #[allow(deprecated, reason = "resources/unsubscribe is what clients of 2025-11-25 send")]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscription(&request.uri, context, false).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let items = bridged::list(&self.shared, &self.origin(&context)?, List::Prompts).await?;
        from_json(json!({ "prompts": items }))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let origin = self.origin(&context)?;
        let arguments = request.arguments.map(|a| serde_json::to_value(a).unwrap_or_default());
        let answer = bridged::prompt(&self.shared, &origin, &request.name, arguments).await?;
        Ok(GetPromptResponse::Complete(from_json(answer)?))
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let origin = self.origin(&context)?;
        let request = serde_json::to_value(&request).map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        from_json(bridged::complete(&self.shared, &origin, request).await?)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let activated = self.activated.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        if activated.is_empty() {
            return Ok(self.shared.listed.clone());
        }
        // The session's described tools join the core ones and the meta-tools.
        let mut listed = self.shared.listed.clone();
        for definition in self.shared.catalog.definitions_of(&activated) {
            let tool = serde_json::from_value(definition.clone())
                .map_err(|e| ErrorData::internal_error(format!("cannot list the tools: {e}"), None))?;
            listed.tools.push(tool);
        }
        Ok(listed)
    }

    async fn call_tool(
        &self,
        params: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(state) = params.request_state.clone() {
            return self.resume(&state, params, context).await;
        }
        let (params, by_meta_tool) = match self.read(params)? {
            Read::Call(params, by_meta_tool) => (params, by_meta_tool),
            Read::Discover(discovery) => return self.discover(discovery, &context).await,
        };
        if takes_tasks(&context) {
            return self.call_maybe_as_task(params, context, by_meta_tool).await;
        }
        self.start(params, context, by_meta_tool).await
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        let answer = match request.method.as_str() {
            legacy::CALL => self.legacy_call(request, context).await,
            legacy::LIST_TOOLS => self.legacy_list_tools(context).await,
            legacy::GET | legacy::CANCEL | "tasks/result" | "tasks/list" => self.legacy_tasks(request, context).await,
            other => unreachable_method(other),
        };
        answer.map(CustomResult::new)
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let task = self.shared.tasks.get(&request.task_id, self.owner(&context))?;
        wire::got(&task)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared.tasks.get(&request.task_id, self.owner(&context))?.answer(request.input_responses);
        Ok(())
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let task = self.shared.tasks.get(&request.task_id, self.owner(&context))?;
        // Cancelling a task that already ended is acknowledged: it stays as it ended.
        if !task.state().status.is_terminal() {
            cancel(&task).await?;
        }
        Ok(())
    }
}

/// The cancellation of a call about to start.
fn new_cancel() -> Result<Cancel, ErrorData> {
    Cancel::new().map_err(|e| ErrorData::internal_error(format!("cannot start the call: {e}"), None))
}

/// The `ttl` a 2025-11-25 `tools/call` asks of its task (`task`: an object,
/// its `ttl` absent or a whole number of milliseconds).
fn task_ttl(task: Option<&Value>) -> Result<Option<u64>, String> {
    let Some(Value::Object(task)) = task else { return Err("`task` must be an object, e.g. {\"ttl\": 60000}".into()) };
    match task.get("ttl") {
        None | Some(Value::Null) => Ok(None),
        Some(ttl) => ttl
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("`task.ttl` must be a whole number of milliseconds, not {ttl}")),
    }
}
