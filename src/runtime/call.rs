//! One call through the pipeline (see the [`crate::runtime`] overview).

use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::bundle::capability::{Capability, SecretId};
use crate::bundle::policy::grant_line;
use crate::bundle::tools::{Tool, Transport};
use crate::bundle::value::{MAX_DATA_DEPTH, json_depth};
use crate::error::{Exit, Reportable};
use crate::event::traceparent::is_traceparent;
use crate::event::{
    Decision, EventKind, Outcome, PAYLOAD_VERSION, ToolCallPayload, ToolConfirmPayload, ToolResultPayload, Usage,
    now_ms,
};
use crate::integrity::verify::Signer;
use crate::runtime::answer::AnswerSource;
use crate::runtime::ask::Questioning;
use crate::runtime::confirm::{ConfirmRequest, Confirmation, Confirmer};
use crate::runtime::context::{CallContext, Progress};
use crate::runtime::exec::{ExecPlan, check_command};
use crate::runtime::http::{self, HttpPlan, PlanError};
use crate::runtime::invalid_args::explain;
use crate::runtime::journal::{Journal, call_tags, check_tags};
use crate::runtime::scrub::Scrubber;
use crate::runtime::transport::{Attempt, AttemptError, FailureKind, Reply};
use crate::runtime::trust_gate::{Admission, Checked};
use crate::runtime::{Prepared, Runtime};
use crate::sandbox::{Grants, SandboxPlan};
use crate::secrets::{Resolution, SecretValue};

/// First retry delay; doubles with each attempt.
const BACKOFF_BASE_MS: u64 = 200;
/// Longest wait between attempts, whatever the tool asks for.
const BACKOFF_MAX_MS: u64 = 30_000;
/// The `capability` of the audit frame that records a call refused because
/// the sandbox is required and the kernel cannot confine the tool.
pub(crate) const SANDBOX_CAPABILITY: &str = "sandbox";
/// The `capability` of the audit frame ([`crate::event::EventKind::CapAudit`]) that records the trust gate's decision.
pub(crate) const TRUST_AUDIT: &str = "trust";

/// The context of a call that brings nothing of its own.
static NO_CONTEXT: CallContext = CallContext { confirmer: None, answerer: None, cancel: None, progress: None };

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
    /// id; used before the runtime's [`crate::runtime::answer::Answerer`].
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
    /// Attempts made.
    pub attempts: u32,
    /// Wall time of the whole call in milliseconds.
    pub duration_ms: u64,
}

/// How a call failed; the CLI maps each kind to an exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallErrorKind {
    /// No tool with that id (exit 2).
    UnknownTool,
    /// The arguments, options or answers do not fit the tool (exit 2).
    InvalidInput,
    /// The tool asked questions nobody answered (exit 2: pass `--answer`).
    Unanswered,
    /// Refused by policy: capability, secret, confirmation, unsafe header (exit 3).
    Refused,
    /// The tool ran and failed, or its result is invalid (exit 1).
    Tool,
    /// The ledger could not record the call (exit 1).
    Recording,
    /// The caller cancelled the call (exit 1).
    Cancelled,
}

impl CallErrorKind {
    /// The exit-code class of docs/cli.md.
    pub fn class(self) -> Exit {
        match self {
            CallErrorKind::UnknownTool | CallErrorKind::InvalidInput | CallErrorKind::Unanswered => Exit::Usage,
            CallErrorKind::Refused => Exit::Refused,
            CallErrorKind::Tool | CallErrorKind::Recording | CallErrorKind::Cancelled => Exit::Problems,
        }
    }
}

/// A failed call. Messages never contain secret values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallError {
    /// The class.
    pub kind: CallErrorKind,
    /// What went wrong.
    pub message: String,
    /// What to do.
    pub help: Option<String>,
    /// The invocation id, once one was assigned.
    pub invocation_id: Option<Uuid>,
    /// The trace the call was recorded in, once it was recorded.
    pub trace_id: Option<Uuid>,
    /// Attempts made (0 when the call was refused before the tool ran).
    pub attempts: u32,
    /// A tool that ran but whose outcome could not be recorded (kind
    /// [`CallErrorKind::Recording`]): its result, or its error as
    /// `{"error": message}`, scrubbed — so that nobody re-runs a side effect
    /// blindly.
    pub unrecorded: Option<Box<Value>>,
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CallError {}

impl Reportable for CallError {
    fn class(&self) -> Exit {
        self.kind.class()
    }

    fn help(&self) -> Option<String> {
        self.help.clone()
    }
}

impl CallError {
    pub(crate) fn new(kind: CallErrorKind, message: impl Into<String>) -> Self {
        CallError {
            kind,
            message: message.into(),
            help: None,
            invocation_id: None,
            trace_id: None,
            attempts: 0,
            unrecorded: None,
        }
    }

    pub(crate) fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

pub(crate) enum Plan {
    Exec(ExecPlan),
    Http(HttpPlan),
}

/// What each attempt of a call runs with.
#[derive(Clone, Copy)]
struct RunInputs<'a> {
    plan: &'a Plan,
    request: &'a CallRequest,
    secrets: &'a [(SecretId, SecretValue)],
    /// Every answer so far.
    answers: &'a Map<String, Value>,
    /// The merged, validated options.
    options: &'a Map<String, Value>,
}

pub(crate) fn schema_errors(validator: &jsonschema::Validator, value: &Value) -> Option<String> {
    crate::bundle::schema::quoted_errors(crate::bundle::schema::error_lines(validator, value))
}

impl<'r> Journal<'r> {
    /// Who confirms this call: its context's confirmer, else the runtime's.
    pub(crate) fn confirmer(&self) -> &'r dyn Confirmer {
        self.context.confirmer.as_deref().unwrap_or(&*self.runtime.options().confirmer)
    }
}

/// Checks the tags given for a call (`--tag`), as every call does first: a
/// command that makes many calls with the same tags checks them once.
pub(crate) fn check_call_tags(tags: &[String]) -> Result<(), CallError> {
    check_tags(tags).map_err(|why| {
        CallError::new(CallErrorKind::InvalidInput, why)
            .help("give tags as KEY=VALUE or a plain word, e.g. --tag team=mail")
    })
}

fn backoff_ms(attempt: u32, retry_after_ms: Option<u64>) -> u64 {
    let exponential = BACKOFF_BASE_MS.saturating_mul(1u64 << attempt.saturating_sub(1).min(16));
    retry_after_ms.unwrap_or(exponential).min(BACKOFF_MAX_MS)
}

impl Runtime {
    /// Runs one call through the whole pipeline, confirmed and answered by
    /// the runtime's own confirmer and answerer.
    pub fn call(&self, request: &CallRequest) -> Result<CallOutcome, CallError> {
        self.call_in(request, &NO_CONTEXT)
    }

    /// Runs one call through the whole pipeline with what `context` brings
    /// (its confirmer and answerer, cancellation, progress).
    pub fn call_in(&self, request: &CallRequest, context: &CallContext) -> Result<CallOutcome, CallError> {
        let started = Instant::now();
        check_call_tags(&request.tags)?;
        let mut journal = self.journal(&request.tool, request.trace_id, context);
        journal.traceparent = request.traceparent.clone().filter(|t| is_traceparent(t));
        journal.tags = call_tags(self.tool(&request.tool), &request.tags);
        // 0. Trust: the bundle as it is now, against the trust policy as it is now.
        self.admit(&mut journal)?;
        let prepared = self.prepared(&request.tool).ok_or_else(|| {
            let known = if self.tool_ids().is_empty() { "none".to_string() } else { self.tool_ids().join(", ") };
            CallError::new(
                CallErrorKind::UnknownTool,
                format!("bundle `{}` has no tool `{}`", self.agent(), request.tool),
            )
            .help(format!("the tools are: {known}"))
        })?;
        let tool = &prepared.tool;

        // 1. Expose. A granted secret the tool lists in `secrets` is audited
        // when it is resolved (step 3), naming the provider.
        let mut denied = Vec::new();
        for cap in tool.required_capabilities() {
            let (decision, reason) = self.policy().decide(&cap);
            let resolved_later = matches!(&cap, Capability::Secret(id) if tool.secrets.iter().any(|(_, s)| s == id));
            if decision == Decision::Allow && resolved_later {
                journal.unresolved_secrets.push((cap, reason));
                continue;
            }
            journal.audit(&cap, decision, &reason);
            if decision == Decision::Deny {
                denied.push((cap, reason));
            }
        }
        if !denied.is_empty() {
            return Err(journal.refuse(self.denied_error(&tool.id, &denied)));
        }

        // 2. Validate the input (and its depth: what cannot be read back is
        // not recorded), the budget and the options.
        self.check_arguments(prepared, &request.arguments, &mut journal)?;
        self.check_budget(tool, request.trace_id.is_none(), &mut journal)?;
        let options = self.options_of(prepared, &request.options, &mut journal)?;

        // 3. Resolve secrets.
        let secrets = self.resolve_secrets(prepared, &mut journal)?;
        journal.scrubber = Scrubber::new(secrets.iter().map(|(_, v)| v));
        let shown_args = journal.scrubber.scrubbed(&request.arguments);

        // Build the request (exec: the command; http: URL, headers) before asking anyone.
        let plan = self.plan(prepared, &request.arguments, &secrets, &mut journal)?;

        // 4. Confirm.
        self.confirm(prepared, &plan, &shown_args, &mut journal)?;

        // 5. Record the call, then execute.
        let call = ToolCallPayload {
            v: PAYLOAD_VERSION,
            tool: tool.id.clone(),
            args: shown_args,
            invocation_id: journal.invocation_id,
            input_schema: prepared.input_schema.reference.clone(),
            input_schema_blake3: prepared.input_schema.blake3.clone(),
            tags: journal.tags.clone(),
            options: options.as_ref().map(|o| Value::Object(o.clone())),
            sandbox: match &plan {
                Plan::Exec(exec) => Some(exec.sandbox.record().clone()),
                Plan::Http(_) => None,
            },
            traceparent: journal.traceparent.clone(),
        };
        journal.push(EventKind::ToolCall, "runtime".into(), call);
        journal.flush().map_err(|mut e| {
            e.invocation_id = Some(journal.invocation_id);
            e.trace_id = Some(journal.trace_id);
            e
        })?;

        let options = options.unwrap_or_default();
        let max_attempts = tool.max_attempts.max(1);
        let mut questions = Questioning::new(request);
        let (mut attempt, mut tries) = (1, 1);
        loop {
            let attempt_started = Instant::now();
            let run =
                RunInputs { plan: &plan, request, secrets: &secrets, answers: &questions.answers, options: &options };
            // Set when questions end the call (it says how the call fails).
            let mut stop = None;
            let of = max_attempts;
            context.report(Progress::AttemptStarted { attempt, of });
            let reply = if context.is_cancelled() {
                Err(AttemptError::new(
                    FailureKind::Cancelled,
                    format!("the call of `{}` was cancelled before attempt {attempt} started", tool.id),
                ))
            } else {
                self.attempt(prepared, &run, &mut journal, attempt)
            };
            context.report(Progress::AttemptEnded { attempt, of, ok: reply.is_ok() });
            let outcome = match reply {
                Ok(Reply::Questions(asked)) => {
                    match self.ask(prepared, &asked, &mut questions, &mut journal, attempt) {
                        Ok(()) => {
                            attempt += 1;
                            continue;
                        }
                        Err(ended) => Err(stop.insert(ended).error.clone()),
                    }
                }
                Ok(Reply::Result { value, usage }) => Ok((value, usage)),
                Err(e) => Err(e),
            };
            // 6. Validate the result.
            let outcome = outcome.and_then(|(result, usage)| self.check_result(prepared, &journal, result, usage));
            let duration_ms = u64::try_from(attempt_started.elapsed().as_millis()).unwrap_or(u64::MAX);
            let will_retry = matches!(&outcome, Err(e) if e.transient) && tries < max_attempts;
            let (recorded, usage) = match &outcome {
                Ok((result, usage)) => (Outcome::Result(journal.scrubber.scrubbed(result)), *usage),
                Err(e) => (Outcome::Error(e.to_frame(will_retry)), None),
            };
            let result = match &recorded {
                Outcome::Result(result) => result.clone(),
                Outcome::Error(_) => Value::Null,
            };
            // 7. Record the result, then hand it back.
            let frame = ToolResultPayload {
                v: PAYLOAD_VERSION,
                invocation_id: journal.invocation_id,
                tool: tool.id.clone(),
                outcome: recorded,
                attempt: attempt.into(),
                duration_ms: Some(duration_ms),
                result_schema: prepared.result_schema.reference.clone(),
                result_schema_blake3: prepared.result_schema.blake3.clone(),
                usage,
                tags: journal.tags.clone(),
                traceparent: journal.traceparent.clone(),
            };
            journal.push(EventKind::ToolResult, format!("tool:{}", tool.id), frame);
            if let Err(failure) = journal.flush() {
                let shown = match &outcome {
                    Ok(_) => result.clone(),
                    Err(e) => serde_json::json!({"error": e.message}),
                };
                let mut error = self.unrecorded_error(&journal, failure, shown);
                error.attempts = attempt;
                return Err(error);
            }
            match outcome {
                Ok((_, usage)) => {
                    return Ok(CallOutcome {
                        tool: tool.id.clone(),
                        invocation_id: journal.invocation_id,
                        trace_id: journal.trace_id,
                        result,
                        usage,
                        attempts: attempt,
                        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    });
                }
                Err(e) if will_retry => {
                    // A cancel ends the pause; the next turn records the call as cancelled.
                    let pause = Duration::from_millis(backoff_ms(tries, e.retry_after_ms));
                    match &context.cancel {
                        Some(cancel) => {
                            cancel.wait_timeout(pause);
                        }
                        None => std::thread::sleep(pause),
                    }
                    attempt += 1;
                    tries += 1;
                }
                Err(e) => {
                    let mut error = match stop {
                        Some(stop) => {
                            CallError::new(stop.kind, journal.scrubber.scrub_string(&e.message)).help(stop.help)
                        }
                        None => self.failed_error(&journal, &e, attempt),
                    };
                    error.invocation_id = Some(journal.invocation_id);
                    error.trace_id = Some(journal.trace_id);
                    error.attempts = attempt;
                    return Err(error);
                }
            }
        }
    }

    /// The error of a call whose last attempt failed (scrubbed here too,
    /// whichever transport wrote it).
    fn failed_error(&self, journal: &Journal<'_>, e: &AttemptError, attempt: u32) -> CallError {
        let kind = match e.kind {
            FailureKind::Cancelled => CallErrorKind::Cancelled,
            _ if e.refused => CallErrorKind::Refused,
            _ => CallErrorKind::Tool,
        };
        let mut error = CallError::new(kind, journal.scrubber.scrub_string(&e.message));
        if attempt > 1 && e.kind != FailureKind::NeedsInput {
            error.message.push_str(&format!(" (after {attempt} attempts)"));
        }
        error.help = Some(match e.kind {
            FailureKind::NeedsInput => "an http tool cannot be asked again with answers; make it an exec tool, or have the API take the value as an argument".into(),
            FailureKind::Timeout => {
                "the tool took longer than its timeout_ms; raise it in tools.json if the work needs longer".into()
            }
            FailureKind::OutputTooLarge => {
                "the tool's output exceeds max_output_bytes; raise it in tools.json or make the output smaller".into()
            }
            FailureKind::InvalidResult => "fix the tool, or its result_schema in tools.json".into(),
            FailureKind::Cancelled => "the caller cancelled the call; call again to run it".into(),
            FailureKind::Refused => {
                "grant the redirect target in policy.caps, or point the tool at the final URL".into()
            }
            _ if e.transient => {
                "the tool says the failure is transient; retry later, or set retry.max_attempts in tools.json".into()
            }
            _ => format!("see the tool's message; the call is recorded under invocation {}", journal.invocation_id),
        });
        error
    }

    /// Step 2: the arguments fit the tool's `input_schema` and can be
    /// recorded.
    fn check_arguments(
        &self,
        prepared: &Prepared,
        arguments: &Value,
        journal: &mut Journal<'_>,
    ) -> Result<(), CallError> {
        let tool = &prepared.tool;
        let depth = json_depth(arguments);
        if depth > MAX_DATA_DEPTH {
            return Err(journal.refuse(
                CallError::new(
                    CallErrorKind::InvalidInput,
                    format!(
                        "the arguments of `{}` nest arrays and objects {depth} levels deep; rlp accepts at most {MAX_DATA_DEPTH}",
                        tool.id
                    ),
                )
                .help("flatten the arguments"),
            ));
        }
        if let Some(why) = explain(&prepared.input, &prepared.input_schema.resolved, arguments) {
            return Err(journal.refuse(
                CallError::new(
                    CallErrorKind::InvalidInput,
                    format!("the arguments do not match the input_schema of `{}`: {}", tool.id, why.errors),
                )
                .help(why.help),
            ));
        }
        Ok(())
    }

    /// Step 6: the result fits the tool's `result_schema` and can be recorded.
    fn check_result(
        &self,
        prepared: &Prepared,
        journal: &Journal<'_>,
        result: Value,
        usage: Option<Usage>,
    ) -> Result<(Value, Option<Usage>), AttemptError> {
        let tool = &prepared.tool;
        match schema_errors(&prepared.result, &result) {
            None if json_depth(&result) > MAX_DATA_DEPTH => Err(AttemptError::new(
                FailureKind::InvalidResult,
                format!(
                    "the result of `{}` nests arrays and objects {} levels deep; rlp records at most {MAX_DATA_DEPTH}",
                    tool.id,
                    json_depth(&result)
                ),
            )),
            None => Ok((result, usage)),
            Some(errors) => Err(AttemptError::new(
                FailureKind::InvalidResult,
                journal
                    .scrubber
                    .scrub_string(&format!("the result of `{}` does not match its result_schema: {errors}", tool.id)),
            )),
        }
    }

    /// Checks the bundle against the trust policy before anything of a
    /// recorded trace runs again (live replay); a refusal is recorded in
    /// `trace_id` as a deny audit frame for tool `*`.
    pub fn check_trust(&self, trace_id: Uuid) -> Result<(), CallError> {
        let mut journal = self.journal("*", Some(trace_id), &NO_CONTEXT);
        self.admit(&mut journal)
    }

    fn journal<'r>(&'r self, tool: &'r str, trace_id: Option<Uuid>, context: &'r CallContext) -> Journal<'r> {
        Journal {
            runtime: self,
            context,
            traceparent: None,
            tool,
            trace_id: trace_id.unwrap_or_else(Uuid::now_v7),
            invocation_id: Uuid::now_v7(),
            pending: Vec::new(),
            scrubber: Scrubber::default(),
            tags: Vec::new(),
            unresolved_secrets: Vec::new(),
        }
    }

    /// Step 0: the trust gate. A verified bundle's allow event is recorded
    /// with the call; a refusal is recorded at once.
    fn admit(&self, journal: &mut Journal<'_>) -> Result<(), CallError> {
        match self.gate().check() {
            Ok(Admission::Unchecked) => Ok(()),
            Ok(Admission::Verified { checked, signer }) => {
                let what = match checked {
                    Checked::Installed => "installed bundle verified",
                    Checked::Signed => "signed bundle verified",
                };
                let by = match signer {
                    Some(Signer { key_id, anchor: Some(anchor) }) => {
                        format!("signed by trust anchor `{anchor}` (key {key_id}), within its rule")
                    }
                    Some(Signer { key_id, anchor: None }) => format!("signed by key {key_id}"),
                    None => "unsigned (installed with --allow-unsigned)".to_string(),
                };
                journal.audit_named(TRUST_AUDIT, Decision::Allow, &format!("{what}: {by}"));
                Ok(())
            }
            Err(failure) => {
                journal.audit_named(TRUST_AUDIT, Decision::Deny, &failure.message);
                let error = CallError::new(
                    CallErrorKind::Refused,
                    format!("bundle `{}` is refused by the trust policy: {}", self.agent(), failure.message),
                );
                Err(journal.refuse(match failure.help {
                    Some(help) => error.help(help),
                    None => error,
                }))
            }
        }
    }

    /// The error of a tool that ran but whose outcome the ledger refused:
    /// it says so, and carries the outcome and the ids.
    fn unrecorded_error(&self, journal: &Journal<'_>, failure: CallError, outcome: Value) -> CallError {
        let mut error = CallError::new(
            CallErrorKind::Recording,
            format!("tool `{}` ran, but its result was not recorded: {}", journal.tool, failure.message),
        )
        .help(format!(
            "the result is printed above; the call is invocation {} in trace {}. Calling again runs the tool again \
             (and repeats what it did); free disk space or fix the ledger first",
            journal.invocation_id, journal.trace_id
        ));
        error.invocation_id = Some(journal.invocation_id);
        error.trace_id = Some(journal.trace_id);
        error.unrecorded = Some(Box::new(outcome));
        error
    }

    fn denied_error(&self, tool: &str, denied: &[(Capability, String)]) -> CallError {
        let listed: Vec<String> = denied.iter().map(|(cap, reason)| format!("`{cap}` ({reason})")).collect();
        let message = format!("tool `{tool}` is not exposed: it needs {}", listed.join(", "));
        let help = if denied.iter().all(|(cap, _)| !self.policy().bundle.allows(cap)) {
            let lines: Vec<String> = denied.iter().map(|(cap, _)| grant_line(cap, None)).collect();
            format!("grant it under [capabilities] in policy.caps ({}), then run `rlp digest`", lines.join("; "))
        } else {
            "the operator override revokes it; edit or remove the override file to allow the call".to_string()
        };
        CallError::new(CallErrorKind::Refused, message).help(help)
    }

    /// Step 3: every secret of the tool, each audited with the provider
    /// that gave it; a missing one, or a provider that fails, refuses the call.
    fn resolve_secrets(
        &self,
        prepared: &Prepared,
        journal: &mut Journal<'_>,
    ) -> Result<Vec<(SecretId, SecretValue)>, CallError> {
        let resolver = &self.options().secrets;
        let mut values = Vec::new();
        let mut missing = Vec::new();
        let mut help = Vec::new();
        let granted = std::mem::take(&mut journal.unresolved_secrets);
        for (_, id) in &prepared.tool.secrets {
            let cap = Capability::Secret(id.clone());
            let shown = cap.to_string();
            match resolver.resolve(id) {
                Ok(Resolution::Found { value, provider }) => {
                    let policy = granted.iter().find(|(c, _)| *c == cap).map_or("granted", |(_, reason)| reason);
                    let reason = format!("{policy}; the value came from the `{provider}` provider");
                    journal.audit_provided(&shown, Decision::Allow, &reason, Some(provider));
                    values.push((id.clone(), value));
                }
                Ok(Resolution::Missing { why, how }) => {
                    journal.audit(&cap, Decision::Deny, &format!("the secret is not available ({why})"));
                    missing.push(format!("`{id}` ({why})"));
                    help.push(format!("{how} (secret `{id}`)"));
                }
                Err(e) => {
                    journal.audit_provided(&shown, Decision::Deny, &e.message, Some(e.provider));
                    missing.push(format!("`{id}` ({})", e.message));
                    help.push(e.help);
                }
            }
        }
        if missing.is_empty() {
            return Ok(values);
        }
        Err(journal.refuse(
            CallError::new(
                CallErrorKind::Refused,
                format!("tool `{}` needs secrets that are not available: {}", prepared.tool.id, missing.join(", ")),
            )
            .help(format!("{}, then call again", help.join("; "))),
        ))
    }

    fn plan(
        &self,
        prepared: &Prepared,
        arguments: &Value,
        secrets: &[(SecretId, SecretValue)],
        journal: &mut Journal<'_>,
    ) -> Result<Plan, CallError> {
        let tool = &prepared.tool;
        match &tool.transport {
            Some(Transport::Exec { command, args }) => {
                let command = check_command(command).map_err(|why| {
                    journal.refuse(
                        CallError::new(CallErrorKind::Tool, format!("tool `{}` cannot run: {why}", tool.id))
                            .help("install the tool's binary at that path, or fix `transport.command` in tools.json"),
                    )
                })?;
                let sandbox = self.sandbox(tool, &command, journal)?;
                Ok(Plan::Exec(ExecPlan {
                    command,
                    args: args.clone(),
                    max_output_bytes: tool.max_output_bytes,
                    sandbox,
                }))
            }
            Some(Transport::Http { method, url: Some(template), headers }) => {
                let plan = match http::plan(method, template, headers, arguments, secrets, tool.max_output_bytes) {
                    Ok(plan) => plan,
                    Err(PlanError::Input(why)) => {
                        return Err(journal.refuse(
                            CallError::new(CallErrorKind::InvalidInput, format!("tool `{}`: {why}", tool.id))
                                .help("pass every argument the URL template names"),
                        ));
                    }
                    Err(PlanError::Refused(why)) => {
                        return Err(journal.refuse(
                            CallError::new(CallErrorKind::Refused, format!("tool `{}`: {why}", tool.id))
                                .help("fix the header template or the secret's value"),
                        ));
                    }
                };
                // The grant is checked again on the final URL.
                let cap = Capability::Net(plan.target.clone());
                let (decision, reason) = self.policy().decide(&cap);
                journal.audit(&cap, decision, &format!("final URL: {reason}"));
                if decision == Decision::Deny {
                    return Err(journal.refuse(self.denied_error(&tool.id, &[(cap, reason)])));
                }
                Ok(Plan::Http(plan))
            }
            _ => Err(journal.refuse(
                CallError::new(CallErrorKind::Tool, format!("tool `{}` has no usable transport", tool.id))
                    .help("fix `transport` in tools.json"),
            )),
        }
    }

    /// The kernel sandbox of an exec tool: what it declares of `fs` and
    /// `net` (every declared capability is granted by now), under
    /// `runtime.sandbox`. Under `required`, a kernel that cannot confine the
    /// tool refuses the call, and the refusal is recorded.
    fn sandbox(&self, tool: &Tool, command: &Path, journal: &mut Journal<'_>) -> Result<SandboxPlan, CallError> {
        let grants = Grants::of(tool, command, self.root());
        let setting = &self.options().config.sandbox;
        let plan = SandboxPlan::new(setting.value, &grants);
        if let Some(why) = plan.linked_grant() {
            journal.audit_named(SANDBOX_CAPABILITY, Decision::Deny, why);
            return Err(journal.refuse(
                CallError::new(CallErrorKind::Refused, format!("tool `{}` cannot run: {why}", tool.id)).help(
                    "grant and declare the folder the link leads to (fs:<real path>) in policy.caps and tools.json, or remove the link",
                ),
            ));
        }
        let Some(why) = plan.refusal() else { return Ok(plan) };
        journal.audit_named(SANDBOX_CAPABILITY, Decision::Deny, &why);
        Err(journal.refuse(
            CallError::new(
                CallErrorKind::Refused,
                format!(
                    "tool `{}` cannot run: the sandbox is required ({}) and this kernel cannot confine it: {why}",
                    tool.id,
                    setting.source.shown("runtime")
                ),
            )
            .help("run on a kernel with Landlock and seccomp (Linux 5.13 or later), or set [runtime] sandbox = \"best-effort\" in config.toml (docs/sandbox.md)"),
        ))
    }

    fn confirm(
        &self,
        prepared: &Prepared,
        plan: &Plan,
        shown_args: &Value,
        journal: &mut Journal<'_>,
    ) -> Result<(), CallError> {
        let tool = &prepared.tool;
        if !tool.needs_confirmation() {
            return Ok(());
        }
        let config = &self.options().config;
        let setting = &config.confirm_external_actions;
        let answer = if setting.value {
            let target = match plan {
                Plan::Exec(p) => p.target(),
                Plan::Http(p) => p.target_text(),
            };
            let target = journal.scrubber.scrub_string(&target);
            journal.confirmer().confirm(&ConfirmRequest {
                tool: &tool.id,
                description: &tool.description,
                arguments: shown_args,
                target: &target,
                invocation_id: journal.invocation_id,
            })
        } else {
            Confirmation {
                approved: true,
                by: "config".into(),
                how: format!(
                    "not asked: security.confirm_external_actions = false ({})",
                    setting.source.shown("security")
                ),
            }
        };
        let payload = ToolConfirmPayload {
            v: PAYLOAD_VERSION,
            tool: tool.id.clone(),
            invocation_id: journal.invocation_id,
            approved: answer.approved,
            by: answer.by.clone(),
            how: answer.how.clone(),
            tags: journal.tags.clone(),
        };
        journal.push(EventKind::ToolConfirm, answer.by.clone(), payload);
        if answer.approved {
            return Ok(());
        }
        let help = match (journal.confirmer().refusal_help(), &config.confirm_required_by) {
            (Some(help), _) => help,
            (None, Some(path)) => format!("pass --yes to approve the call ({} requires confirmation)", path.display()),
            (None, None) => {
                "pass --yes to approve the call, or set security.confirm_external_actions = false".to_string()
            }
        };
        Err(journal.refuse(
            CallError::new(
                CallErrorKind::Refused,
                format!("tool `{}` requires confirmation and the call was not approved: {}", tool.id, answer.how),
            )
            .help(help),
        ))
    }

    fn attempt(
        &self,
        prepared: &Prepared,
        run: &RunInputs<'_>,
        journal: &mut Journal<'_>,
        number: u32,
    ) -> Result<Reply, AttemptError> {
        let RunInputs { plan, request, secrets, answers, options } = *run;
        let tool = &prepared.tool;
        let timeout = Duration::from_millis(tool.timeout_ms);
        let deadline_ms = now_ms().saturating_add(i64::try_from(tool.timeout_ms).unwrap_or(i64::MAX));
        let scrubber = journal.scrubber.clone();
        let attempt = Attempt {
            tool: &tool.id,
            invocation_id: journal.invocation_id,
            trace_id: journal.trace_id,
            number,
            arguments: &request.arguments,
            answers,
            options,
            deadline: Instant::now() + timeout,
            timeout_ms: tool.timeout_ms,
            deadline_ms,
            root: self.root(),
            secrets,
            scrubber: &scrubber,
            cancel: journal.context.cancel.as_ref(),
        };
        match plan {
            Plan::Exec(plan) => crate::runtime::exec::run(plan, &attempt),
            Plan::Http(plan) => {
                let client = self.http_client().map_err(|e| AttemptError::new(FailureKind::Transport, e))?;
                let policy = self.policy();
                let allows = |cap: &Capability| policy.effective.allows(cap);
                let mut audits = Vec::new();
                let outcome = http::run(client, plan, &attempt, &allows, &mut audits);
                for audit in audits {
                    journal.audit(&audit.capability, audit.decision, &audit.reason);
                }
                outcome
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_honours_retry_after() {
        assert_eq!(backoff_ms(1, None), 200);
        assert_eq!(backoff_ms(3, None), 800);
        assert_eq!(backoff_ms(2, Some(50)), 50);
        assert_eq!(backoff_ms(40, None), BACKOFF_MAX_MS);
        assert_eq!(backoff_ms(1, Some(u64::MAX)), BACKOFF_MAX_MS);
    }

    #[test]
    fn exit_codes() {
        assert_eq!(CallErrorKind::Refused.class().code(), 3);
        assert_eq!(CallErrorKind::InvalidInput.class().code(), 2);
        assert_eq!(CallErrorKind::UnknownTool.class().code(), 2);
        assert_eq!(CallErrorKind::Tool.class().code(), 1);
    }
}
