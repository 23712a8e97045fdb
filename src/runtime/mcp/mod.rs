//! The mcp transport: a tool that lives in an MCP server (docs/bridge.md).
//!
//! The call's plan ([`Call::plan_mcp`]) gets the session with the tool's
//! server ([`session::Bridge`]: started at the first call — a stdio server
//! in the kernel sandbox with the server's grants —, then shared), and
//! checks the server's definition of the tool against its pin before
//! anyone is asked to confirm. Each attempt sends `tools/call` with the
//! seed-002 tool context in `_meta` and waits for the answer on the call's
//! thread ([`Waiting`]), which also takes what the server asks meanwhile:
//! an elicitation is answered as the call's questions are (recorded as
//! `tool.inquiry` / `tool.answer`), sampling is relayed to the call's
//! [`crate::runtime::context::Sampler`] or refused (recorded as
//! `tool.sample`), progress is passed on. At the deadline, or when the call
//! is cancelled, the request is cancelled (`notifications/cancelled`) and
//! a stdio server is retired: stopped, with everything it started, once no
//! call holds it. The answer is read by [`reply::interpret`].

pub(crate) mod access;
pub(crate) mod client;
pub(crate) mod content;
pub(crate) mod forward;
pub(crate) mod launch;
pub(crate) mod ordered;
pub(crate) mod pin;
pub(crate) mod reply;
pub(crate) mod session;

use std::sync::Arc;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use serde_json::{Map, Value, json};

use crate::bundle::command::{self as bundle_command, BUNDLE_DIR};
use crate::bundle::servers::{Server, ServerTransport};
use crate::event::{
    CommandRecord, Decision, EventKind, PAYLOAD_VERSION, SandboxRecord, ServerRecord, ToolSamplePayload,
};
use crate::process::cancel::Cancel;
use crate::runtime::asking::rounds::Stop;
use crate::runtime::call::Call;
use crate::runtime::context::{Progress, ProgressSink};
use crate::runtime::error::{CallError, CallErrorKind};
use crate::runtime::exec::check_command;
use crate::runtime::mcp::client::{CALL, Registration, ServerAnswer, ServerAsk, Step};
use crate::runtime::mcp::launch::Prepared;
use crate::runtime::mcp::session::{Session, Started, with_stderr};
use crate::runtime::scrub::Scrubber;
use crate::runtime::transport::{Attempt, AttemptError, Audit, FailureKind, Plan, Reply};
use crate::sandbox::Grants;

/// How long a server whose connection ended is given to show that it
/// exited (its pipes close a moment before its exit is seen).
const EXIT_GRACE: Duration = Duration::from_millis(500);
/// The largest log message of a server passed on (its data as JSON).
const MAX_LOG_BYTES: u64 = 16 * 1024;
/// Most model completions a server may have relayed during one call.
const MAX_SAMPLES: u32 = 8;
/// How often a waiting call looks at its cancellation.
const CANCEL_TICK: Duration = Duration::from_millis(20);
/// The `_meta` keys of the tool context (seed 002): rlp's, then the seed's.
const META_KEYS: [(&str, &str); 2] =
    [("dev.runloop/tool", "dev.runloop/context"), ("computer.jp/tool", "computer.jp/context")];

/// A checked mcp transport: the session with the server and the tool's
/// name there.
#[derive(Debug)]
pub(crate) struct McpPlan {
    session: Arc<Session>,
    /// The tool's name on the server.
    tool: String,
    /// The stdio server's sandbox (none for HTTP).
    sandbox: Option<SandboxRecord>,
    /// The stdio server's command, where tools.json names it with `${bundle}`.
    command: Option<CommandRecord>,
    /// The tool's `max_output_bytes`: the largest answer accepted.
    max_output_bytes: u64,
}

impl Call<'_> {
    /// The mcp transport's plan of the call: the session with `server`
    /// (started if need be) and the pin checked.
    pub(crate) fn plan_mcp(&mut self, server: &str, name: &str, pin: Option<&str>) -> Result<McpPlan, CallError> {
        let tool = self.tool();
        let declared = self.runtime.server(server).ok_or_else(|| {
            self.journal.refuse(
                CallError::new(
                    CallErrorKind::Tool,
                    format!("tool `{}` names server `{server}`, which tools.json does not declare", tool.id),
                )
                .help("declare the server under `servers` in tools.json"),
            )
        })?;
        let startup = launch::startup(declared);
        let max_output_bytes = tool.max_output_bytes;
        // A running server was planned, confined and started by an earlier
        // call: nothing about it is worked out again.
        if let Some(session) = self.runtime.bridge().running(server) {
            let Started { sandbox, command, .. } = session.started.clone();
            self.check_pin(&session, name, pin, startup)?;
            return Ok(McpPlan { session, tool: name.to_string(), sandbox, command, max_output_bytes });
        }
        let mut sandbox = None;
        let mut command = None;
        let connect = match &declared.transport {
            Some(ServerTransport::Stdio { programs, args, env }) => {
                let (program, written) = self.server_program(declared, programs)?;
                let plan = self.confine(&Grants::of_server(declared, &program, self.runtime.root()))?;
                sandbox = Some(plan.record().clone());
                command = written.map(|written| CommandRecord { written, resolved: program.display().to_string() });
                Prepared::Stdio { program, args, env, plan: Box::new(plan) }
            }
            Some(ServerTransport::Http { url: Some(url), headers }) => {
                Prepared::Http { url: url.as_str().to_string(), headers }
            }
            _ => {
                return Err(self.journal.refuse(
                    CallError::new(CallErrorKind::Tool, format!("server `{server}` has no usable `command` or `url`"))
                        .help("fix the server in tools.json"),
                ));
            }
        };
        let roots = launch::roots(declared);
        let root = self.runtime.root().to_path_buf();
        let secrets = &self.secrets;
        let scrubber = &self.journal.scrubber;
        let started = self.runtime.bridge().session(
            server,
            || {
                let started =
                    Started { sandbox: sandbox.clone(), command: command.clone(), scrubber: scrubber.clone() };
                connect.connect(&root, secrets).map(|connected| (connected, started))
            },
            roots,
            startup,
        );
        let session = started.map_err(|why| {
            let why = self.journal.scrubber.scrub_string(&why);
            self.journal.refuse(
                CallError::new(
                    CallErrorKind::Tool,
                    format!("tool `{}`: cannot start the MCP server `{server}`: {why}", tool.id),
                )
                .help("check the server's `command` or `url` in tools.json, and try it by hand"),
            )
        })?;
        self.check_pin(&session, name, pin, startup)?;
        Ok(McpPlan { session, tool: name.to_string(), sandbox, command, max_output_bytes })
    }

    /// The program of a stdio server on this platform, checked, with the
    /// form tools.json writes it in when that names the bundle.
    fn server_program(
        &mut self,
        server: &Server,
        programs: &bundle_command::Programs,
    ) -> Result<(std::path::PathBuf, Option<String>), CallError> {
        let here = bundle_command::this_platform();
        let Some(command) = programs.for_platform(&here) else {
            return Err(self.journal.refuse(
                CallError::new(
                    CallErrorKind::Tool,
                    format!("server `{}` carries no program for this platform ({here})", server.name),
                )
                .help(format!("add `\"{here}\"` to the server's `platforms` in tools.json")),
            ));
        };
        let written = command.contains(BUNDLE_DIR).then(|| command.to_string());
        let resolved = bundle_command::resolve(command, self.runtime.root());
        let program = check_command(&resolved).map_err(|why| {
            self.journal.refuse(
                CallError::new(CallErrorKind::Tool, format!("server `{}` cannot start: {why}", server.name))
                    .help("install the server's program at that path, or fix the server's `command` in tools.json"),
            )
        })?;
        Ok((program, written))
    }

    /// Refuses (exit 3, a deny audit) a call whose tool the server now
    /// defines otherwise than its pin says.
    fn check_pin(
        &mut self,
        session: &Session,
        name: &str,
        pin: Option<&str>,
        within: Duration,
    ) -> Result<(), CallError> {
        let tool = self.tool();
        let definitions = session.definitions(within).map_err(|why| {
            self.journal.refuse(CallError::new(
                CallErrorKind::Tool,
                format!("tool `{}`: the MCP server `{}` did not list its tools: {why}", tool.id, session.server),
            ))
        })?;
        let capability = format!("mcp:{}/{name}", session.server);
        let Some(listed) = definitions.get(name) else {
            let reason = format!("the server `{}` no longer lists a tool `{name}`", session.server);
            self.journal.audit_named(&capability, Decision::Deny, &reason);
            return Err(self.journal.refuse(
                CallError::new(CallErrorKind::Refused, format!("tool `{}` refused: {reason}", tool.id)).help(format!(
                    "see what changed with `rlp lint --check-tools`, then re-import with `rlp tools import --mcp {}`",
                    session.server
                )),
            ));
        };
        let Some(pin) = pin else { return Ok(()) };
        let now = &listed.pin;
        if now == pin {
            return Ok(());
        }
        let named = pin::what_changed(tool, &listed.definition);
        let reason = format!(
            "the server `{}` changed its definition of `{name}` since it was pinned (definition_blake3 {}…, now {}…); {named}",
            session.server,
            &pin[..12],
            &now[..12]
        );
        self.journal.audit_named(&capability, Decision::Deny, &reason);
        Err(self.journal.refuse(
            CallError::new(CallErrorKind::Refused, format!("tool `{}` refused: {reason}", tool.id)).help(format!(
                "review the change (`rlp lint --check-tools`), then re-import with `rlp tools import {} --mcp {}` to accept it",
                self.runtime.root().display(),
                session.server
            )),
        ))
    }
}

impl Plan for McpPlan {
    /// `mcp <server> <tool>`.
    fn target(&self) -> String {
        format!("mcp server `{}`, tool `{}`", self.session.server, self.tool)
    }

    fn sandbox(&self) -> Option<&SandboxRecord> {
        self.sandbox.as_ref()
    }

    fn command_record(&self) -> Option<CommandRecord> {
        self.command.clone()
    }

    fn server_record(&self) -> Option<ServerRecord> {
        Some(self.session.record.clone())
    }

    fn run(&self, attempt: &Attempt<'_>, _audits: &mut Vec<Audit>) -> Result<Reply, AttemptError> {
        let mut params = CallToolRequestParams::new(self.tool.clone());
        params.arguments = attempt.arguments.as_object().cloned();
        let mut meta = tool_context(attempt);
        if let Some(traceparent) = attempt.traceparent {
            meta.insert("traceparent".into(), Value::String(traceparent.to_string()));
        }
        if !meta.is_empty() {
            params.meta = serde_json::from_value(Value::Object(meta)).ok();
        }
        let (sender, events) = std::sync::mpsc::channel();
        let registration = self.session.inflight.register(sender.clone());
        let stop = tokio_util::sync::CancellationToken::new();
        let service = self.session.service();
        let stopped = stop.clone();
        let key = registration.key();
        self.session.handle().spawn(CALL.scope(key, async move {
            let answer = tokio::select! {
                answer = service.call_tool(params) => answer.map_err(|e| e.to_string()),
                () = stopped.cancelled() => Err("the request was cancelled".to_string()),
            };
            let _ = sender.send(Step::Done(answer));
        }));
        Waiting {
            session: Arc::clone(&self.session),
            events,
            stop,
            _registration: registration,
            deadline: attempt.deadline,
            timeout_ms: attempt.timeout_ms,
            max_output_bytes: self.max_output_bytes,
            cancel: attempt.cancel.cloned(),
            progress: attempt.progress.cloned(),
            attempt: attempt.number,
            tool: attempt.tool.to_string(),
            scrubber: attempt.scrubber.clone(),
        }
        .wait()
    }
}

/// The tool context of seed 002, under rlp's keys and the seed's; empty
/// when the call has neither answers nor options, as the seed says.
fn tool_context(attempt: &Attempt<'_>) -> Map<String, Value> {
    let mut meta = Map::new();
    if attempt.answers.is_empty() && attempt.options.is_empty() {
        return meta;
    }
    let tool = json!({
        "name": attempt.tool,
        "arguments": attempt.arguments,
        "answers": attempt.answers,
        "options": attempt.options,
    });
    let context = json!({
        "action": "run",
        "root": attempt.runtime.root().display().to_string(),
        "trace_id": attempt.trace_id.to_string(),
        "invocation_id": attempt.invocation_id.to_string(),
    });
    for (tool_key, context_key) in META_KEYS {
        meta.insert(tool_key.into(), tool.clone());
        meta.insert(context_key.into(), context.clone());
    }
    meta
}

/// A call waiting on its server, on the call's thread.
struct Waiting {
    session: Arc<Session>,
    events: std::sync::mpsc::Receiver<Step>,
    stop: tokio_util::sync::CancellationToken,
    _registration: Registration,
    deadline: Instant,
    timeout_ms: u64,
    max_output_bytes: u64,
    cancel: Option<Cancel>,
    progress: Option<Arc<dyn ProgressSink>>,
    attempt: u32,
    tool: String,
    scrubber: Scrubber,
}

impl Waiting {
    /// Waits for the answer, the server's next question, the deadline or
    /// the cancellation.
    fn wait(self) -> Result<Reply, AttemptError> {
        loop {
            if self.cancel.as_ref().is_some_and(Cancel::is_cancelled) {
                let fate = self.abandon();
                return Err(AttemptError::new(
                    FailureKind::Cancelled,
                    format!(
                        "the call of `{}` was cancelled; the server was told (notifications/cancelled){fate}",
                        self.tool
                    ),
                ));
            }
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let fate = self.abandon();
                return Err(AttemptError::new(
                    FailureKind::Timeout,
                    format!(
                        "tool `{}` timed out after {} ms (timeout_ms); the server `{}` was told (notifications/cancelled){fate}",
                        self.tool, self.timeout_ms, self.session.server
                    ),
                ));
            }
            match self.events.recv_timeout(left.min(CANCEL_TICK)) {
                Ok(Step::Done(Ok(answer))) => {
                    reply::within(&self.tool, &self.session.server, &answer, self.max_output_bytes)?;
                    return reply::interpret(&self.tool, &self.session.server, answer);
                }
                Ok(Step::Done(Err(why))) => return Err(self.failed(&why)),
                // Replies go to the registration of the request they answer.
                Ok(Step::Replied(_)) => {}
                Ok(Step::Progress { progress, total, message }) => self.report(progress, total, message),
                Ok(Step::Log { level, logger, data }) => self.log(level, logger, &data),
                Ok(Step::Asked { ask, reply }) => {
                    return Ok(Reply::Asks(Box::new(Conversation { ask, reply, waiting: self })));
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Err(self.failed("the MCP client stopped")),
            }
        }
    }

    /// Passes on a log message of the server (scrubbed); one past
    /// [`MAX_LOG_BYTES`] is passed on as a line that says so.
    fn log(&self, level: String, logger: Option<String>, data: &Value) {
        if let Some(sink) = &self.progress {
            let logger = logger.map(|l| self.scrubber.scrub_string(&l));
            let data = log_data(data, &self.scrubber);
            sink.progress(Progress::Logged { level, logger, data });
        }
    }

    /// Passes on the progress the server reported (its message scrubbed).
    fn report(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        if let Some(sink) = &self.progress {
            let message = message.map(|m| self.scrubber.scrub_string(&m));
            sink.progress(Progress::Reported { attempt: self.attempt, progress, total, message });
        }
    }

    /// Cancels the request; retires a stdio server, which stops once no
    /// call holds it. Says what became of the server.
    fn abandon(&self) -> String {
        self.stop.cancel();
        if !self.session.is_stdio() {
            return String::new();
        }
        self.session.retire();
        "; the server process is stopped with everything it started, and started again at the next call".into()
    }

    /// The error of a request that got no answer.
    fn failed(&self, why: &str) -> AttemptError {
        let server = &self.session.server;
        let message = if let Some(stopped) = self.session.stopped_reading() {
            self.session.retire();
            format!(
                "tool `{}` failed: the MCP server `{server}` {stopped}; the server process is stopped with everything it started, and started again at the next call",
                self.tool
            )
        } else if self.session.exits_within(EXIT_GRACE) {
            self.session.retire();
            with_stderr(
                format!(
                    "tool `{}` failed: the MCP server `{server}` exited during the call ({why}); it is started again at the next call",
                    self.tool
                ),
                &self.session.stderr_tail(),
            )
        } else {
            format!("tool `{}` failed: the MCP server `{server}` gave no answer: {why}", self.tool)
        };
        AttemptError::new(FailureKind::Transport, self.scrubber.scrub_string(&message))
    }
}

/// A server's question during a call, and the call waiting on it; answered
/// by the call ([`Call::answer_server`]), after which the call waits again.
pub(crate) struct Conversation {
    ask: ServerAsk,
    reply: tokio::sync::oneshot::Sender<ServerAnswer>,
    waiting: Waiting,
}

impl std::fmt::Debug for Conversation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conversation").field("ask", &self.ask).finish_non_exhaustive()
    }
}

/// Two conversations are never equal: each is one live exchange.
impl PartialEq for Conversation {
    fn eq(&self, _other: &Self) -> bool {
        false
    }
}

impl Conversation {
    /// Hands the server `answer`, and waits on for the call's answer.
    pub(crate) fn answer(self, answer: ServerAnswer) -> Result<Reply, AttemptError> {
        let _ = self.reply.send(answer);
        self.waiting.wait()
    }
}

impl Call<'_> {
    /// Answers what a server asks during attempt `attempt`: an elicitation
    /// as the call's questions, sampling by the call's sampler (refused
    /// without one); both recorded.
    pub(crate) fn answer_server(&mut self, conversation: &Conversation, attempt: u32) -> ServerAnswer {
        match &conversation.ask {
            ServerAsk::Elicit(params) => ServerAnswer::Elicit(self.elicited(params, attempt)),
            ServerAsk::Sample(params) => ServerAnswer::Sample(self.sampled(params, attempt)),
        }
    }

    /// The answer to an elicitation: the form as it is to an answerer that
    /// takes forms (an MCP client under `rlp serve`), else its fields asked
    /// as questions; recorded either way. `accept` with the answers, else
    /// `decline`.
    fn elicited(&mut self, params: &Value, attempt: u32) -> Value {
        let message = params.get("message").and_then(Value::as_str).unwrap_or_default();
        let empty = Map::new();
        let properties = params.pointer("/requestedSchema/properties").and_then(Value::as_object).unwrap_or(&empty);
        let questions: Vec<Value> = properties
            .iter()
            .map(|(id, schema)| {
                let label = schema.get("title").or_else(|| schema.get("description")).and_then(Value::as_str);
                let text = match label {
                    Some(label) if !message.is_empty() => format!("{message} ({label})"),
                    Some(label) => label.to_string(),
                    None => message.to_string(),
                };
                let mut question = json!({"id": id, "text": text, "schema": schema});
                if let Some(default) = schema.get("default") {
                    question["default"] = default.clone();
                }
                question
            })
            .collect();
        if let Some(answer) = self.relay_form(params, &questions, attempt) {
            return answer;
        }
        if questions.is_empty() {
            return json!({"action": "decline"});
        }
        match self.ask(&questions, attempt) {
            Ok(()) => {
                let content: Map<String, Value> = properties
                    .keys()
                    .filter_map(|id| Some((id.clone(), self.questions.answers.get(id)?.clone())))
                    .collect();
                json!({"action": "accept", "content": content})
            }
            Err(Stop { .. }) => json!({"action": "decline"}),
        }
    }

    /// The answer to a sampling request: relayed to the call's sampler (at
    /// most [`MAX_SAMPLES`] a call), or refused; recorded as `tool.sample`.
    fn sampled(&mut self, params: &Value, attempt: u32) -> Result<Value, String> {
        self.samples += 1;
        let answer = match &self.context.sampler {
            // Each completion may cost the client's user: a server that keeps
            // asking is refused before the client is asked again.
            Some(_) if self.samples > MAX_SAMPLES => Err(format!(
                "sampling is refused: the server asked for more than {MAX_SAMPLES} completions during one call"
            )),
            Some(sampler) => sampler.sample(&relayed_sampling(params)),
            None => Err("sampling is refused: `rlp tools call` has no model to ask; call the tool through `rlp serve`, whose client may sample".to_string()),
        };
        let frame = ToolSamplePayload {
            v: PAYLOAD_VERSION,
            invocation_id: self.journal.invocation_id,
            tool: self.tool().id.clone(),
            attempt: attempt.into(),
            request: params.clone(),
            relayed: self.context.sampler.is_some(),
            response: answer.as_ref().ok().cloned(),
            error: answer.as_ref().err().cloned(),
            tags: self.journal.tags.clone(),
        };
        let actor = format!("tool:{}", self.tool().id);
        self.journal.push(EventKind::ToolSample, actor, frame);
        answer
    }
}

/// What of a server's sampling request reaches the client: all of it but
/// `includeContext`. rlp offers servers sampling without `context`, and
/// puts many servers behind one; a server asking the host to include the
/// context of "this server" or "all servers" would reach what the others
/// exchanged.
pub(crate) fn relayed_sampling(params: &Value) -> Value {
    let mut params = params.clone();
    if let Some(fields) = params.as_object_mut() {
        fields.remove("includeContext");
    }
    params
}

/// The data of a server's log message as passed on: scrubbed, or, past
/// [`MAX_LOG_BYTES`], a line that says it was left out.
pub(crate) fn log_data(data: &Value, scrubber: &Scrubber) -> Value {
    let size = reply::json_size(data);
    if size > MAX_LOG_BYTES {
        return Value::String(format!(
            "rlp: a log message of {size} bytes from the server was left out (over {} KiB)",
            MAX_LOG_BYTES / 1024
        ));
    }
    scrubber.scrubbed(data)
}

/// What a server said at the handshake and the definitions of its tools
/// (every page of `tools/list`), asked outside any call: by `rlp tools
/// import --mcp` and `rlp lint --check-tools`. A stdio server runs in the
/// kernel sandbox with the server's grants under `mode`, and is stopped
/// once it answered.
pub(crate) fn list_tools(
    server: &Server,
    root: &std::path::Path,
    mode: crate::sandbox::SandboxMode,
    secrets: &[(crate::bundle::capability::SecretId, crate::secrets::SecretValue)],
) -> Result<(ServerRecord, Vec<Value>), String> {
    let prepared = launch::prepare(server, root, mode)?;
    let bridge = session::Bridge::default();
    let startup = launch::startup(server);
    let session = bridge.session(
        &server.name,
        || prepared.connect(root, secrets).map(|connected| (connected, Started::default())),
        Vec::new(),
        startup,
    )?;
    let mut definitions: Vec<Value> = session.definitions(startup)?.values().map(|l| l.definition.clone()).collect();
    definitions.sort_by(|a, b| a.get("name").and_then(Value::as_str).cmp(&b.get("name").and_then(Value::as_str)));
    Ok((session.record.clone(), definitions))
}
