//! Replaying a recorded trace against a bundle, streaming.
//!
//! The trace is walked once, in order; the only state kept is the table of
//! calls waiting for their final result ([`PendingCalls`]), so memory does not
//! grow with the length of the trace. Every finding goes to a [`ReplaySink`]
//! as soon as it is known.
//!
//! - **strict** ([`Mode::Strict`]): nothing runs. At each call frame the tool
//!   must exist (`missing_tool`) and the recorded arguments must validate
//!   against today's `input_schema` (`args_mismatch`); at the call's final
//!   result frame, a recorded result must validate against today's
//!   `result_schema` (`schema_mismatch`, also for a call whose arguments
//!   diverged). The recorded outcome is the replayed output.
//! - **live** ([`Mode::Live`]): at each call's final recorded result, the call
//!   runs again through an [`Executor`] (the full runtime), unless the tool is
//!   missing or the arguments no longer validate; the new outcome is compared
//!   with the recorded one (`result_changed`, with JSON Pointer paths; the
//!   content blocks a bridged MCP server sent beside a structured result are
//!   part of the outcome, compared under `/content`).
//!
//! In both modes a tool whose schema's BLAKE3 differs from the one the call
//! or result frame recorded is `schema_changed`, even when the data still
//! validates. Live, the answers recorded for a call (`tool.answer`) are
//! given to it again, and a question the recording does not answer is
//! `unanswered_question`.
//!
//! In both modes a result without a waiting call, a second call for an
//! invocation still waiting, and a call left without a final result at the end
//! are `invalid_trace`. Retried attempts (`error.will_retry`) are counted; the
//! last attempt is the call's outcome.
//!
//! Exchanges with bridged servers (`resource.*`, `prompt.*`,
//! `completion.complete`, `server.changed`: [`crate::replay::exchange`])
//! belong to no call. In both modes they are counted by kind and checked
//! (a request with exactly one of a response and an error, a notification
//! without a response; else `invalid_trace`), and never run again.
//!
//! Order of the report: calls are listed when their final result is read
//! (then calls without a result, by position); divergences in the order of the
//! frame that reveals them, then those found at the end of the trace, by
//! position. Nothing in a strict report depends on time or randomness.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use serde::Serialize;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::{Exit, Reportable};
use crate::event::frame::TraceFrame;
use crate::event::{EventKind, Outcome, Payload, ServerExchangePayload};
use crate::ledger::pending::PendingCalls;
use crate::ledger::query::{InputError, TraceInput, for_each_frame};
use crate::replay::contract::{Check, Contract};
use crate::replay::diff::{Answer, Change, ChangeOp, diff, result_diff};
use crate::replay::divergence::{Divergence, DivergenceKind};
use crate::replay::exchange;
use crate::replay::hooked::HookView;
use crate::text::plural;

/// Changes listed per `result_changed`; the rest are counted.
pub(crate) const MAX_LISTED_CHANGES: usize = 50;

/// How the calls are replayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Mode {
    /// Nothing runs; recorded results are returned.
    Strict,
    /// Every call runs again through the runtime.
    Live,
}

impl Mode {
    /// `strict` or `live`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Mode::Strict => "strict",
            Mode::Live => "live",
        }
    }
}

/// What the report starts with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ReplayHeader {
    /// The mode.
    pub mode: Mode,
    /// The recorded trace.
    pub trace_id: Uuid,
    /// The agent named by the trace's first frame.
    pub agent: String,
    /// The bundle replayed against: its agent name.
    pub bundle: String,
    /// The bundle's version.
    pub bundle_version: Option<String>,
    /// Live: the trace the new calls are recorded in.
    pub new_trace_id: Option<Uuid>,
}

/// How a call came out of the replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CallStatus {
    /// Replayed without divergence; the output is a result.
    Ok,
    /// Replayed without divergence; the output is an error (as recorded).
    Error,
    /// At least one divergence concerns the call.
    Diverged,
    /// The call has no final result in the trace.
    NoResult,
}

impl CallStatus {
    /// The stable name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CallStatus::Ok => "ok",
            CallStatus::Error => "error",
            CallStatus::Diverged => "diverged",
            CallStatus::NoResult => "no_result",
        }
    }
}

/// A call's outcome, with the content blocks a bridged MCP server sent
/// beside a structured result (as the ledger records them: binary data past
/// a bound by digest, [`crate::runtime::mcp::content`]).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CallOutput {
    /// The result or the error.
    pub outcome: Outcome,
    /// The content blocks, when the server sent them beside its result.
    pub content: Option<Vec<Value>>,
    /// The notes after-call hooks added for the caller.
    pub annotations: Vec<String>,
}

impl CallOutput {
    /// An outcome without content blocks.
    pub(crate) fn bare(outcome: Outcome) -> Self {
        CallOutput { outcome, content: None, annotations: Vec::new() }
    }

    /// The answer of `result`, this output's result, with its content and notes.
    fn answer<'a>(&'a self, result: &'a Value) -> Answer<'a> {
        Answer { result, content: self.content.as_deref(), annotations: &self.annotations }
    }

    /// `{"result": …, "content"?: […], "annotations"?: […]}` or
    /// `{"error": …}`, the members of the result frame.
    pub(crate) fn to_json(&self) -> Value {
        let mut members = self.outcome.to_json();
        if let Some(content) = &self.content {
            members["content"] = Value::Array(content.clone());
        }
        if !self.annotations.is_empty() {
            members["annotations"] = serde_json::json!(self.annotations);
        }
        members
    }
}

/// One replayed call.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CallReplay {
    /// Position of the call frame.
    pub position: u64,
    /// Position of its final result frame.
    pub result_position: Option<u64>,
    /// The recorded invocation id.
    pub invocation_id: Uuid,
    /// The tool id.
    pub tool: String,
    /// Attempts recorded.
    pub attempts: u64,
    /// How it came out.
    pub status: CallStatus,
    /// The recorded outcome.
    pub recorded: Option<CallOutput>,
    /// The replayed output: the recorded outcome (strict) or the new one
    /// (live; `None` when the call was not run).
    pub output: Option<CallOutput>,
    /// The kinds of the divergences that concern the call.
    pub divergences: Vec<DivergenceKind>,
}

/// The totals at the end of a replay.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize)]
pub(crate) struct Summary {
    /// Frames read.
    pub frames: u64,
    /// Calls replayed, each listed once: `ok + errors + diverged + no_result`
    /// (a second call frame for an invocation still waiting is an
    /// `invalid_trace`, not another call).
    pub calls: u64,
    /// Calls replayed with a result and no divergence.
    pub ok: u64,
    /// Calls replayed with an error (as recorded) and no divergence.
    pub errors: u64,
    /// Calls with at least one divergence.
    pub diverged: u64,
    /// Calls without a final result.
    pub no_result: u64,
    /// Divergences in all.
    pub divergences: u64,
    /// Divergences by kind (only kinds that occurred).
    pub by_kind: BTreeMap<&'static str, u64>,
    /// Exchanges with bridged servers read (never run again).
    pub exchanges: u64,
    /// Exchanges by frame kind (only kinds that occurred).
    pub exchanges_by_kind: BTreeMap<&'static str, u64>,
}

impl Summary {
    /// Whether nothing diverged.
    pub(crate) fn is_clean(&self) -> bool {
        self.divergences == 0
    }
}

/// Where the findings of a replay go (a report renderer, a test).
pub(crate) trait ReplaySink {
    /// Called once, at the first frame.
    fn start(&mut self, header: &ReplayHeader) -> std::io::Result<()>;
    /// A call is done.
    fn call(&mut self, call: &CallReplay) -> std::io::Result<()>;
    /// A divergence was found.
    fn divergence(&mut self, divergence: &Divergence) -> std::io::Result<()>;
    /// The end.
    fn finish(&mut self, summary: &Summary) -> std::io::Result<()>;
}

/// Why a replay stopped before the end.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReplayError {
    /// The trace could not be read (exit 2).
    #[error(transparent)]
    Input(#[from] InputError),
    /// The report could not be written.
    #[error("cannot write the report: {0}")]
    Write(std::io::Error),
    /// Live: a call was refused by policy or not confirmed (exit 3).
    #[error("frame #{position}: {message}")]
    Refused {
        /// The call frame.
        position: u64,
        /// What happened.
        message: String,
        /// What to do.
        help: Option<String>,
    },
    /// Live: the runtime could not run or record a call.
    #[error("frame #{position}: {message}")]
    Failed {
        /// The call frame.
        position: u64,
        /// What happened.
        message: String,
        /// What to do.
        help: Option<String>,
    },
}

/// A live call refused is exit 3; a trace that cannot be read, exit 2; a
/// call that could not run or be recorded, or a report that cannot be
/// written, exit 1.
impl Reportable for ReplayError {
    fn class(&self) -> Exit {
        match self {
            ReplayError::Input(e) => e.class(),
            ReplayError::Write(_) | ReplayError::Failed { .. } => Exit::Problems,
            ReplayError::Refused { .. } => Exit::Refused,
        }
    }

    fn message(&self) -> String {
        match self {
            ReplayError::Input(e) => e.message(),
            ReplayError::Write(_) => self.to_string(),
            ReplayError::Refused { position, message, .. } | ReplayError::Failed { position, message, .. } => {
                format!("replay stopped at frame #{position}: {message}")
            }
        }
    }

    fn help(&self) -> Option<String> {
        match self {
            ReplayError::Input(e) => e.help(),
            ReplayError::Write(_) => None,
            ReplayError::Refused { help, .. } => {
                Some(help.clone().unwrap_or_else(|| "pass --yes to approve calls that need confirmation".into()))
            }
            ReplayError::Failed { help, .. } => help.clone(),
        }
    }
}

/// Runs recorded calls again (live mode).
pub(crate) trait Executor {
    /// Called once before the first call, with the recorded trace's id.
    fn begin(&mut self, recorded_trace: Uuid, agent: &str) -> Result<(), ReplayError>;
    /// Runs one call with the answers recorded for it; the outcome of the
    /// tool (a tool failure is an `Outcome::Error`, not an `Err`).
    /// `position` is the call frame's.
    fn execute(&mut self, position: u64, call: &RecordedCall<'_>) -> Result<Fresh, ReplayError>;
    /// The trace the new calls are recorded in.
    fn new_trace_id(&self) -> Option<Uuid>;
}

/// A recorded call to run again.
#[derive(Debug)]
pub(crate) struct RecordedCall<'a> {
    /// The tool id.
    pub tool: &'a str,
    /// The recorded arguments.
    pub args: &'a Value,
    /// Every answer recorded for the call, by question id.
    pub answers: &'a Map<String, Value>,
}

/// What running a call again gave.
#[derive(Debug)]
pub(crate) enum Fresh {
    /// It ran to an outcome.
    Ran(CallOutput),
    /// It asked a question the recording does not answer (the message says which).
    Unanswered(String),
}

struct PendingCall {
    tool: String,
    args: Value,
    /// The answers recorded for the call so far.
    answers: Map<String, Value>,
    /// What its after-call hooks did to its result.
    hooks: HookView,
    attempts: u64,
    /// The call cannot be replayed (missing tool, invalid arguments).
    blocked: bool,
    divergences: Vec<DivergenceKind>,
}

/// The replay of one trace; feed it frames in order, then [`Replayer::finish`].
pub(crate) struct Replayer<'a> {
    mode: Mode,
    contract: &'a Contract,
    executor: Option<&'a mut dyn Executor>,
    sink: &'a mut dyn ReplaySink,
    pending: PendingCalls<PendingCall>,
    summary: Summary,
    started: bool,
}

fn write(result: std::io::Result<()>) -> Result<(), ReplayError> {
    result.map_err(ReplayError::Write)
}

/// Strips the runtime's " (after N attempts)" from an error message, so a
/// recorded attempt's message compares with the call's final message.
fn core_message(message: &str) -> &str {
    match message.rfind(" (after ") {
        Some(cut) if message.ends_with(" attempts)") => &message[..cut],
        _ => message,
    }
}

impl<'a> Replayer<'a> {
    /// A strict replay against `contract`.
    pub(crate) fn strict(contract: &'a Contract, sink: &'a mut dyn ReplaySink) -> Self {
        Self::new(Mode::Strict, contract, None, sink)
    }

    /// A live replay: calls run through `executor`.
    pub(crate) fn live(contract: &'a Contract, executor: &'a mut dyn Executor, sink: &'a mut dyn ReplaySink) -> Self {
        Self::new(Mode::Live, contract, Some(executor), sink)
    }

    fn new(
        mode: Mode,
        contract: &'a Contract,
        executor: Option<&'a mut dyn Executor>,
        sink: &'a mut dyn ReplaySink,
    ) -> Self {
        Replayer {
            mode,
            contract,
            executor,
            sink,
            pending: PendingCalls::new(),
            summary: Summary::default(),
            started: false,
        }
    }

    fn diverge(&mut self, divergence: Divergence) -> Result<(), ReplayError> {
        self.summary.divergences += 1;
        *self.summary.by_kind.entry(divergence.kind.as_str()).or_insert(0) += 1;
        write(self.sink.divergence(&divergence))
    }

    fn start(&mut self, frame: &TraceFrame) -> Result<(), ReplayError> {
        self.started = true;
        if let Some(executor) = self.executor.as_deref_mut() {
            executor.begin(frame.provenance.trace_id, &frame.provenance.agent)?;
        }
        let header = ReplayHeader {
            mode: self.mode,
            trace_id: frame.provenance.trace_id,
            agent: frame.provenance.agent.clone(),
            bundle: self.contract.agent().to_string(),
            bundle_version: self.contract.version().map(str::to_string),
            new_trace_id: self.executor.as_deref().and_then(|e| e.new_trace_id()),
        };
        write(self.sink.start(&header))
    }

    /// Takes the next frame of the trace.
    pub(crate) fn frame(&mut self, frame: TraceFrame) -> Result<(), ReplayError> {
        if !self.started {
            self.start(&frame)?;
        }
        self.summary.frames += 1;
        let position = frame.position;
        if let Some(exchange) = frame.body.exchange() {
            return self.exchange(position, frame.body.kind(), exchange);
        }
        match frame.body {
            Payload::ToolCall(call) => {
                let id = call.invocation_id;
                if let Some(earlier) = self.pending.get(&id).map(|p| p.position) {
                    return self.diverge(
                        Divergence::at(
                            DivergenceKind::InvalidTrace,
                            position,
                            format!(
                                "a second {} for invocation {id} while the call at #{earlier} is still waiting for \
                                 its result",
                                EventKind::ToolCall
                            ),
                        )
                        .call(Some(id), Some(&call.tool)),
                    );
                }
                let mut found = Vec::new();
                match self.contract.check_args(&call.tool, &call.args) {
                    Check::Valid => {}
                    Check::MissingTool => found.push(
                        Divergence::at(
                            DivergenceKind::MissingTool,
                            position,
                            format!("the bundle has no tool `{}`", call.tool),
                        )
                        .call(Some(id), Some(&call.tool)),
                    ),
                    Check::Invalid(errors) => found.push(
                        Divergence::at(
                            DivergenceKind::ArgsMismatch,
                            position,
                            format!("the recorded arguments no longer match the input_schema of `{}`", call.tool),
                        )
                        .call(Some(id), Some(&call.tool))
                        .details(errors),
                    ),
                }
                if let Some((today, _)) = self.contract.schema_hashes(&call.tool)
                    && !call.input_schema_blake3.is_empty()
                    && call.input_schema_blake3 != today
                {
                    found.push(schema_changed(
                        position,
                        id,
                        &call.tool,
                        "input_schema",
                        &call.input_schema_blake3,
                        today,
                    ));
                }
                let pending = PendingCall {
                    blocked: found.iter().any(|d| d.kind != DivergenceKind::SchemaChanged),
                    divergences: found.iter().map(|d| d.kind).collect(),
                    tool: call.tool,
                    args: call.args,
                    answers: Map::new(),
                    hooks: HookView::default(),
                    attempts: 0,
                };
                // Registered first: the invocation id is not waiting (checked above).
                let _ = self.pending.open(id, position, pending);
                self.summary.calls += 1;
                for divergence in found {
                    self.diverge(divergence)?;
                }
                Ok(())
            }
            Payload::ToolResult(result) => {
                let id = result.invocation_id;
                let Some(waiting) = self.pending.get_mut(&id) else {
                    return self.diverge(
                        Divergence::at(
                            DivergenceKind::InvalidTrace,
                            position,
                            format!(
                                "a {} for invocation {id} with no {} waiting for it: a result without its call",
                                EventKind::ToolResult,
                                EventKind::ToolCall
                            ),
                        )
                        .call(Some(id), None),
                    );
                };
                waiting.data.attempts += 1;
                if result.will_retry() {
                    return Ok(());
                }
                let Some(mut closed) = self.pending.close(&id) else { return Ok(()) };
                if let Some((_, today)) = self.contract.schema_hashes(&closed.data.tool)
                    && !result.result_schema_blake3.is_empty()
                    && result.result_schema_blake3 != today
                {
                    let divergence = schema_changed(
                        position,
                        id,
                        &closed.data.tool,
                        "result_schema",
                        &result.result_schema_blake3,
                        today,
                    );
                    closed.data.divergences.push(divergence.kind);
                    self.diverge(divergence)?;
                }
                let recorded = CallOutput { outcome: result.outcome, content: result.content, annotations: Vec::new() };
                let recorded = std::mem::take(&mut closed.data.hooks).apply(recorded);
                self.final_result(closed.position, position, id, closed.data, recorded)
            }
            Payload::ToolAnswer(answer) => {
                if let Some(waiting) = self.pending.get_mut(&answer.invocation_id) {
                    waiting.data.answers.extend(answer.answers.into_iter().map(|a| (a.id, a.value)));
                }
                Ok(())
            }
            Payload::ToolHook(hook) => {
                if let Some(waiting) = self.pending.get_mut(&hook.invocation_id) {
                    waiting.data.hooks.add(hook);
                }
                Ok(())
            }
            // Only calls, their answers and their results are replayed.
            _ => Ok(()),
        }
    }

    /// An exchange with a bridged server (frame `kind` at `position`):
    /// counted and checked, never run again.
    fn exchange(
        &mut self,
        position: u64,
        kind: EventKind,
        exchange: &ServerExchangePayload,
    ) -> Result<(), ReplayError> {
        self.summary.exchanges += 1;
        *self.summary.exchanges_by_kind.entry(kind.as_str()).or_insert(0) += 1;
        match exchange::problem(kind, exchange) {
            Some(message) => self.diverge(Divergence::at(DivergenceKind::InvalidTrace, position, message)),
            None => Ok(()),
        }
    }

    fn final_result(
        &mut self,
        call_position: u64,
        position: u64,
        id: Uuid,
        mut call: PendingCall,
        recorded: CallOutput,
    ) -> Result<(), ReplayError> {
        let output = match self.mode {
            Mode::Strict => {
                // Checked even when the arguments no longer validate: every divergence is reported.
                if let Outcome::Result(value) = &recorded.outcome
                    && let Check::Invalid(errors) = self.contract.check_result(&call.tool, value)
                {
                    call.divergences.push(DivergenceKind::SchemaMismatch);
                    self.diverge(
                        Divergence::at(
                            DivergenceKind::SchemaMismatch,
                            position,
                            format!("the recorded result no longer matches the result_schema of `{}`", call.tool),
                        )
                        .call(Some(id), Some(&call.tool))
                        .details(errors),
                    )?;
                }
                Some(recorded.clone())
            }
            Mode::Live if call.blocked => None,
            Mode::Live => {
                let Some(executor) = self.executor.as_deref_mut() else { return Ok(()) };
                let recorded_call = RecordedCall { tool: &call.tool, args: &call.args, answers: &call.answers };
                match executor.execute(call_position, &recorded_call)? {
                    Fresh::Ran(fresh) => {
                        if let Some(divergence) = compare(&recorded, &fresh, position, id, &call.tool) {
                            call.divergences.push(DivergenceKind::ResultChanged);
                            self.diverge(divergence)?;
                        }
                        Some(fresh)
                    }
                    Fresh::Unanswered(message) => {
                        call.divergences.push(DivergenceKind::UnansweredQuestion);
                        self.diverge(
                            Divergence::at(DivergenceKind::UnansweredQuestion, call_position, message)
                                .call(Some(id), Some(&call.tool)),
                        )?;
                        None
                    }
                }
            }
        };
        let status = match (output.as_ref().map(|o| &o.outcome), call.divergences.is_empty()) {
            (_, false) => CallStatus::Diverged,
            (Some(Outcome::Result(_)), true) => CallStatus::Ok,
            (Some(Outcome::Error(_)), true) => CallStatus::Error,
            (None, true) => CallStatus::Diverged,
        };
        match status {
            CallStatus::Ok => self.summary.ok += 1,
            CallStatus::Error => self.summary.errors += 1,
            CallStatus::Diverged => self.summary.diverged += 1,
            CallStatus::NoResult => self.summary.no_result += 1,
        }
        let replay = CallReplay {
            position: call_position,
            result_position: Some(position),
            invocation_id: id,
            tool: call.tool,
            attempts: call.attempts,
            status,
            recorded: Some(recorded),
            output,
            divergences: call.divergences,
        };
        write(self.sink.call(&replay))
    }

    /// Reports the calls left without a result, then the totals.
    pub(crate) fn finish(mut self) -> Result<Summary, ReplayError> {
        let left = std::mem::take(&mut self.pending).into_sorted();
        for (id, pending) in left {
            let call = pending.data;
            let mut kinds = call.divergences.clone();
            kinds.push(DivergenceKind::InvalidTrace);
            self.summary.no_result += 1;
            self.diverge(
                Divergence::at(
                    DivergenceKind::InvalidTrace,
                    pending.position,
                    format!(
                        "the {} has no final {}: the call was interrupted, or the trace is cut short",
                        EventKind::ToolCall,
                        EventKind::ToolResult
                    ),
                )
                .call(Some(id), Some(&call.tool)),
            )?;
            let replay = CallReplay {
                position: pending.position,
                result_position: None,
                invocation_id: id,
                tool: call.tool,
                attempts: call.attempts,
                status: CallStatus::NoResult,
                recorded: None,
                output: None,
                divergences: kinds,
            };
            write(self.sink.call(&replay))?;
        }
        write(self.sink.finish(&self.summary))?;
        Ok(self.summary)
    }
}

/// `schema_changed`: the tool's `which` schema hashes to `today`, not to
/// what the frame at `position` recorded.
fn schema_changed(position: u64, id: Uuid, tool: &str, which: &str, recorded: &str, today: &str) -> Divergence {
    Divergence::at(
        DivergenceKind::SchemaChanged,
        position,
        format!("the {which} of `{tool}` changed since the recording"),
    )
    .call(Some(id), Some(tool))
    .details(vec![format!("recorded BLAKE3 {recorded}"), format!("today's BLAKE3 {today}")])
}

/// `result_changed` when the fresh outcome (with its content blocks)
/// differs from the recorded one.
fn compare(recorded: &CallOutput, fresh: &CallOutput, position: u64, id: Uuid, tool: &str) -> Option<Divergence> {
    let base =
        |message: String| Divergence::at(DivergenceKind::ResultChanged, position, message).call(Some(id), Some(tool));
    match (&recorded.outcome, &fresh.outcome) {
        (Outcome::Result(old), Outcome::Result(new)) => {
            let found = result_diff(recorded.answer(old), fresh.answer(new), MAX_LISTED_CHANGES);
            if found.is_empty() {
                return None;
            }
            let count = found.changes.len() as u64 + found.more;
            let paths: Vec<&str> = found.changes.iter().take(5).map(|c| c.path.as_str()).collect();
            let shown = paths.iter().map(|p| if p.is_empty() { "(root)" } else { p }).collect::<Vec<_>>().join(", ");
            let mut divergence = base(format!(
                "the result of `{tool}` changed ({}: {shown}{})",
                plural(count, "change"),
                if count > 5 { ", …" } else { "" }
            ));
            divergence.changes = found.changes;
            divergence.more_changes = found.more;
            Some(divergence)
        }
        (Outcome::Error(old), Outcome::Error(new)) => {
            if core_message(&old.error.message) == core_message(&new.error.message) {
                return None;
            }
            let mut divergence = base(format!("`{tool}` still fails, with another message: {}", new.error.message));
            divergence.changes = vec![Change {
                op: ChangeOp::Changed,
                path: "/error/message".into(),
                recorded: Some(Value::String(old.error.message.clone())),
                replayed: Some(Value::String(new.error.message.clone())),
            }];
            Some(divergence)
        }
        (Outcome::Result(_), Outcome::Error(new)) => {
            let mut divergence = base(format!("`{tool}` succeeded when recorded and now fails: {}", new.error.message));
            divergence.changes = diff(&recorded.to_json(), &fresh.to_json(), MAX_LISTED_CHANGES).changes;
            Some(divergence)
        }
        (Outcome::Error(old), Outcome::Result(_)) => {
            let mut divergence =
                base(format!("`{tool}` failed when recorded ({}) and now succeeds", old.error.message));
            divergence.changes = diff(&recorded.to_json(), &fresh.to_json(), MAX_LISTED_CHANGES).changes;
            Some(divergence)
        }
    }
}

/// Replays the trace read from `input` into `sink` (strict when `executor`
/// is `None`, live otherwise); `on_frame` is told of each frame read (a
/// progress line).
pub(crate) fn replay(
    input: &TraceInput,
    contract: &Contract,
    executor: Option<&mut dyn Executor>,
    sink: &mut dyn ReplaySink,
    on_frame: &mut dyn FnMut(),
) -> Result<Summary, ReplayError> {
    let mut replayer = match executor {
        Some(executor) => Replayer::live(contract, executor, sink),
        None => Replayer::strict(contract, sink),
    };
    let mut failure = None;
    for_each_frame(input, |frame| {
        on_frame();
        match replayer.frame(frame) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                failure = Some(e);
                ControlFlow::Break(())
            }
        }
    })?;
    if let Some(failure) = failure {
        return Err(failure);
    }
    replayer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::exchange::tests::exchange;
    use crate::replay::source::tests::{bridged_result, call, exchange_at};
    use serde_json::json;

    /// What a replay reported.
    #[derive(Default)]
    struct Collected {
        calls: Vec<CallReplay>,
        divergences: Vec<Divergence>,
    }

    impl ReplaySink for Collected {
        fn start(&mut self, _: &ReplayHeader) -> std::io::Result<()> {
            Ok(())
        }

        fn call(&mut self, call: &CallReplay) -> std::io::Result<()> {
            self.calls.push(call.clone());
            Ok(())
        }

        fn divergence(&mut self, divergence: &Divergence) -> std::io::Result<()> {
            self.divergences.push(divergence.clone());
            Ok(())
        }

        fn finish(&mut self, _: &Summary) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// An executor that must not be asked to run anything.
    struct RunsNothing;

    impl Executor for RunsNothing {
        fn begin(&mut self, _: Uuid, _: &str) -> Result<(), ReplayError> {
            Ok(())
        }

        fn execute(&mut self, position: u64, _: &RecordedCall<'_>) -> Result<Fresh, ReplayError> {
            panic!("frame #{position} was run again")
        }

        fn new_trace_id(&self) -> Option<Uuid> {
            None
        }
    }

    /// Replays `frames` (live: through [`RunsNothing`]) against a bundle without tools.
    fn replayed(frames: Vec<TraceFrame>, mode: Mode) -> (Summary, Collected) {
        let contract = Contract::without_tools("a");
        let (mut sink, mut executor) = (Collected::default(), RunsNothing);
        let mut replayer = match mode {
            Mode::Strict => Replayer::strict(&contract, &mut sink),
            Mode::Live => Replayer::live(&contract, &mut executor, &mut sink),
        };
        for frame in frames {
            replayer.frame(frame).unwrap();
        }
        (replayer.finish().unwrap(), sink)
    }

    fn text(text: &str) -> Value {
        json!({"type": "text", "text": text})
    }

    #[test]
    fn exchanges_are_counted_and_checked_and_never_run_again() {
        let frames = || {
            let read = |uri: &str, response| exchange("files", "resources/read", json!({ "uri": uri }), response, None);
            vec![
                exchange_at(1, EventKind::ResourceRead, read("f:a", Some(json!({"contents": []})))),
                exchange_at(2, EventKind::PromptGet, exchange("p", "prompts/get", json!({}), None, Some("no prompt"))),
                exchange_at(3, EventKind::ResourceRead, read("f:b", None)),
                exchange_at(
                    4,
                    EventKind::ServerChanged,
                    exchange("files", "notifications/resources/list_changed", json!({}), None, None),
                ),
            ]
        };
        for mode in [Mode::Strict, Mode::Live] {
            let (summary, sink) = replayed(frames(), mode);
            assert_eq!((summary.frames, summary.calls, summary.exchanges), (4, 0, 4));
            let by_kind = BTreeMap::from([("prompt.get", 1), ("resource.read", 2), ("server.changed", 1)]);
            assert_eq!(summary.exchanges_by_kind, by_kind);
            assert_eq!(summary.by_kind, BTreeMap::from([("invalid_trace", 1)]));
            let found = &sink.divergences[0];
            assert_eq!(
                (found.kind, found.position, found.tool.as_deref()),
                (DivergenceKind::InvalidTrace, Some(3), None)
            );
            assert_eq!(
                found.message,
                "the resource.read frame (`resources/read` of server `files`) has neither a response nor an error"
            );
        }
    }

    #[test]
    fn strict_replay_returns_the_recorded_content_blocks() {
        let blocks = vec![text("a picture"), json!({"type": "image", "mimeType": "image/png", "data": "iVBO"})];
        let frames =
            vec![call(1, 1, "shot", json!({})), bridged_result(2, 1, json!({"ok": true}), Some(blocks.clone()))];
        let (_, sink) = replayed(frames, Mode::Strict);
        let output = sink.calls[0].output.as_ref().unwrap();
        assert_eq!(output.content.as_ref(), Some(&blocks));
        assert_eq!(output.to_json(), json!({"result": {"ok": true}, "content": blocks}));
        assert_eq!(sink.calls[0].recorded.as_ref(), Some(output));
        assert_eq!(CallOutput::bare(Outcome::Result(json!(1))).to_json(), json!({"result": 1}));
    }

    #[test]
    fn live_replay_compares_the_content_blocks_beside_a_result() {
        let recorded = CallOutput {
            outcome: Outcome::Result(json!({"n": 1})),
            content: Some(vec![text("a")]),
            annotations: Vec::new(),
        };
        assert_eq!(compare(&recorded, &recorded.clone(), 2, Uuid::nil(), "shot"), None);
        let fresh = CallOutput { content: Some(vec![text("b")]), ..recorded.clone() };
        let found = compare(&recorded, &fresh, 2, Uuid::nil(), "shot").unwrap();
        assert_eq!(found.kind, DivergenceKind::ResultChanged);
        assert_eq!(found.message, "the result of `shot` changed (1 change: /content/0/text)");
        assert_eq!(
            (found.changes[0].recorded.clone(), found.changes[0].replayed.clone()),
            (Some(json!("a")), Some(json!("b")))
        );
        let failed = CallOutput::bare(Outcome::Error(crate::event::RecordedError::from_message("down".into())));
        let paths: Vec<String> =
            compare(&recorded, &failed, 2, Uuid::nil(), "shot").unwrap().changes.into_iter().map(|c| c.path).collect();
        assert_eq!(paths, ["/content", "/error", "/result"]);
    }
}
