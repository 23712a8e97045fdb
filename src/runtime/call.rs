//! One call through the pipeline (see the [`crate::runtime`] overview): a
//! [`Call`] owns what the call brings and what its steps find out, with its
//! frames ([`Journal`]); each step is a method of it, in the module of its
//! step (exposure, validation, budget, options, secrets, the transports,
//! asking, attempts).

use std::sync::LazyLock;
use std::time::Instant;

use serde::Serialize;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::bundle::capability::SecretId;
use crate::bundle::tools::Tool;
use crate::event::traceparent::is_traceparent;
use crate::event::{EventKind, PAYLOAD_VERSION, ReplayMark, ToolCallPayload, Usage};
use crate::runtime::asking::answer::AnswerSource;
use crate::runtime::asking::rounds::Questioning;
use crate::runtime::context::CallContext;
use crate::runtime::error::{CallError, CallErrorKind};
use crate::runtime::hooks::Annotation;
use crate::runtime::journal::{Journal, call_tags, check_tags};
use crate::runtime::scrub::Scrubber;
use crate::runtime::transport::Plan;
use crate::runtime::{Prepared, Runtime};
use crate::secrets::SecretValue;

/// The context of a call that brings nothing of its own.
pub(crate) static NO_CONTEXT: CallContext =
    CallContext { confirmer: None, answerer: None, cancel: None, progress: None, sampler: None };

/// The options of a tool that takes none.
static NO_OPTIONS: LazyLock<Map<String, Value>> = LazyLock::new(Map::new);

/// One call to make.
#[derive(Clone, Debug, PartialEq)]
pub struct CallRequest {
    /// The tool id.
    pub tool: String,
    /// The arguments.
    pub arguments: Value,
    /// The trace to add the call to; a new UUIDv7 when `None`.
    pub trace_id: Option<Uuid>,
    /// Answers given up front to questions the tool may ask, by question
    /// id; used before the runtime's [`crate::runtime::asking::answer::Answerer`].
    pub answers: Map<String, Value>,
    /// Where those answers come from. From [`AnswerSource::Flag`], a string
    /// is read as the question's type wants (`--answer count=3` answers an
    /// integer question with 3).
    pub answer_source: AnswerSource,
    /// Options given for this call (`--option`), over those of the config.
    pub options: Map<String, Value>,
    /// Tags given for this call (`--tag`), recorded after the tool's own.
    pub tags: Vec<String>,
    /// The W3C `traceparent` of the caller's trace (MCP `_meta`), recorded
    /// on the call and result frames; one that is not well formed is not
    /// recorded.
    pub traceparent: Option<String>,
}

impl CallRequest {
    /// A call of `tool` with `arguments` in a new trace, with nothing else given.
    pub fn new(tool: impl Into<String>, arguments: Value) -> Self {
        CallRequest {
            tool: tool.into(),
            arguments,
            trace_id: None,
            answers: Map::new(),
            answer_source: AnswerSource::Flag,
            options: Map::new(),
            tags: Vec::new(),
            traceparent: None,
        }
    }
}

/// A successful call.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CallOutcome {
    /// The tool id.
    pub tool: String,
    /// The invocation id (in every event of the call).
    pub invocation_id: Uuid,
    /// The trace id.
    pub trace_id: Uuid,
    /// The result (valid against `result_schema`, secret values scrubbed).
    pub result: Value,
    /// What the call consumed, when the tool said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The content blocks an MCP server sent beside a structured result, as
    /// sent (scrubbed); `None` for other tools and answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
    /// The notes after-call hooks added for the caller
    /// ([`crate::runtime::hooks`]), in the order the hooks ran.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub annotations: Vec<Annotation>,
    /// Attempts made.
    pub attempts: u32,
    /// Wall time of the whole call in milliseconds.
    pub duration_ms: u64,
}

/// Checks the tags given for a call (`--tag`), as every call does first: a
/// command that makes many calls with the same tags checks them once.
pub(crate) fn check_call_tags(tags: &[String]) -> Result<(), CallError> {
    check_tags(tags).map_err(|why| {
        CallError::new(CallErrorKind::InvalidInput, why)
            .help("give tags as KEY=VALUE or a plain word, e.g. --tag team=mail")
    })
}

/// One call on its way through the pipeline: what it brings, what its steps
/// have found out so far, and its frames.
pub(crate) struct Call<'r> {
    pub(crate) runtime: &'r Runtime,
    /// What the call brings besides its request.
    pub(crate) context: &'r CallContext,
    pub(crate) request: &'r CallRequest,
    /// The tool called, with its compiled schemas.
    pub(crate) prepared: &'r Prepared,
    /// The call's frames, recorded as the steps go.
    pub(crate) journal: Journal<'r>,
    /// The merged, validated options (step 2); `None` when the tool takes none.
    pub(crate) options: Option<Map<String, Value>>,
    /// The tool's resolved secrets (step 3).
    pub(crate) secrets: Vec<(SecretId, SecretValue)>,
    /// The questions the tool asked so far, and their answers.
    pub(crate) questions: Questioning,
    /// The model completions its MCP server asked for so far.
    pub(crate) samples: u32,
    /// What answered the call under a replay (recorded on its call frame).
    pub(crate) replay: Option<ReplayMark>,
    started: Instant,
}

impl<'r> Call<'r> {
    /// Step 0: a call of a tool the bundle has, of a bundle the trust
    /// policy admits (a refusal is recorded).
    pub(crate) fn open(
        runtime: &'r Runtime,
        request: &'r CallRequest,
        context: &'r CallContext,
    ) -> Result<Call<'r>, CallError> {
        let started = Instant::now();
        check_call_tags(&request.tags)?;
        let mut journal = Journal::new(&*runtime.options().recorder, runtime.agent(), &request.tool, request.trace_id);
        journal.traceparent = request.traceparent.clone().filter(|t| is_traceparent(t));
        journal.tags = call_tags(runtime.tool(&request.tool), &request.tags);
        runtime.gate().admit(runtime.agent(), &mut journal)?;
        let prepared = runtime.prepared(&request.tool).ok_or_else(|| {
            let known = if runtime.tool_ids().is_empty() { "none".to_string() } else { runtime.tool_ids().join(", ") };
            CallError::new(
                CallErrorKind::UnknownTool,
                format!("bundle `{}` has no tool `{}`", runtime.agent(), request.tool),
            )
            .help(format!("the tools are: {known}"))
        })?;
        Ok(Call {
            runtime,
            context,
            request,
            prepared,
            journal,
            options: None,
            secrets: Vec::new(),
            questions: Questioning::default(),
            samples: 0,
            replay: None,
            started,
        })
    }

    /// The tool called.
    pub(crate) fn tool(&self) -> &'r Tool {
        &self.prepared.tool
    }

    /// Steps 1 to 7 (or, under a replay, what the recording answers).
    pub(crate) fn run(mut self) -> Result<CallOutcome, CallError> {
        // 1. Expose.
        self.expose()?;
        // 2. Validate the input (and its depth: what cannot be read back is
        // not recorded), the budget and the options.
        self.check_arguments()?;
        self.check_budget()?;
        self.options = self.options_of()?;
        // Under a replay, the recording answers (no secrets needed).
        if let Some(plan) = self.recorded_plan() {
            return self.execute(&plan);
        }
        // 3. Resolve secrets: from here on, their values are scrubbed.
        self.secrets = self.resolve_secrets()?;
        self.journal.scrubber = Scrubber::new(self.secrets.iter().map(|(_, v)| v));
        // Build the request (exec: the command; http: URL, headers) before
        // asking anyone, then go on with it.
        self.dispatch()
    }

    /// Steps 4 to 7 with the transport's plan.
    pub(crate) fn execute(mut self, plan: &impl Plan) -> Result<CallOutcome, CallError> {
        let shown_args = self.journal.scrubber.scrubbed(&self.request.arguments);
        // 4. Confirm (nothing to confirm of what a recording answers).
        if !plan.recorded() {
            self.confirm(plan, &shown_args)?;
        }
        // 5. Record the call, then execute.
        self.record_call(plan, shown_args)?;
        self.attempts(plan)
    }

    /// Step 5: the call frame, made durable before the tool runs.
    fn record_call(&mut self, plan: &impl Plan, shown_args: Value) -> Result<(), CallError> {
        let prepared = self.prepared;
        let journal = &mut self.journal;
        let call = ToolCallPayload {
            v: PAYLOAD_VERSION,
            tool: prepared.tool.id.clone(),
            args: shown_args,
            invocation_id: journal.invocation_id,
            input_schema: prepared.input_schema.reference.clone(),
            input_schema_blake3: prepared.input_schema.blake3.clone(),
            tags: journal.tags.clone(),
            options: self.options.as_ref().map(|o| Value::Object(o.clone())),
            sandbox: plan.sandbox().cloned().map(Box::new),
            traceparent: journal.traceparent.clone(),
            command: plan.command_record(),
            server: plan.server_record().map(Box::new),
            replay: self.replay.clone().map(Box::new),
        };
        journal.push(EventKind::ToolCall, "runtime".into(), call);
        let (invocation_id, trace_id) = (journal.invocation_id, journal.trace_id);
        journal.flush().map_err(|e| e.of_call(invocation_id, trace_id))
    }

    /// The options handed to the tool (`{}` when it takes none).
    pub(crate) fn options_given(&self) -> &Map<String, Value> {
        self.options.as_ref().unwrap_or(&NO_OPTIONS)
    }

    /// What a successful call hands back.
    pub(crate) fn outcome(&self, result: Value, usage: Option<Usage>, attempts: u32) -> CallOutcome {
        CallOutcome {
            tool: self.tool().id.clone(),
            invocation_id: self.journal.invocation_id,
            trace_id: self.journal.trace_id,
            result,
            usage,
            content: None,
            annotations: Vec::new(),
            attempts,
            duration_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        }
    }
}
