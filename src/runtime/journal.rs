//! One call's frames: collected as the call goes, scrubbed of its secret
//! values, and handed to the recorder in batches.

use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use crate::bundle::capability::Capability;
use crate::bundle::tools::Tool;
use crate::event::{CapAuditPayload, Decision, EventKind, PAYLOAD_VERSION, Record, Recorder};
use crate::runtime::error::{CallError, CallErrorKind};
use crate::runtime::scrub::Scrubber;

/// Most tags one call may be given (`--tag`).
pub(crate) const MAX_CALL_TAGS: usize = 32;

/// The tags of a call: the tool's `observability.tags`, then those given
/// for the call, each once.
pub(crate) fn call_tags(tool: Option<&Tool>, given: &[String]) -> Vec<String> {
    let mut tags: Vec<String> = Vec::new();
    for tag in tool.map(|t| t.tags.as_slice()).unwrap_or_default().iter().chain(given) {
        if !tags.contains(tag) {
            tags.push(tag.clone());
        }
    }
    tags
}

/// Collects one call's events and hands them to the recorder in batches.
pub(crate) struct Journal<'r> {
    /// Where the frames go.
    recorder: &'r dyn Recorder,
    /// The agent, in every frame's provenance.
    agent: &'r str,
    /// The caller's well-formed `traceparent`, recorded on the call and
    /// result frames.
    pub(crate) traceparent: Option<String>,
    pub(crate) tool: &'r str,
    pub(crate) trace_id: Uuid,
    pub(crate) invocation_id: Uuid,
    pub(crate) pending: Vec<Record>,
    pub(crate) scrubber: Scrubber,
    /// The call's tags, on every frame ([`call_tags`]).
    pub(crate) tags: Vec<String>,
    /// Granted `secrets:` capabilities and the policy's reason, not yet
    /// audited: their allow event names the provider that gives the value
    /// once the secret is resolved, or is written without one when the
    /// call is refused before that.
    pub(crate) unresolved_secrets: Vec<(Capability, String)>,
}

impl<'r> Journal<'r> {
    /// An empty journal of a call of `tool` in `trace_id` (a new trace when `None`).
    pub(crate) fn new(recorder: &'r dyn Recorder, agent: &'r str, tool: &'r str, trace_id: Option<Uuid>) -> Self {
        Journal {
            recorder,
            agent,
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

    pub(crate) fn push(&mut self, kind: EventKind, actor: String, payload: impl Serialize) {
        let mut payload = serde_json::to_value(payload).unwrap_or(Value::Null);
        self.scrubber.scrub_payload(&mut payload);
        self.pending.push(Record::now(kind, &actor, self.agent, self.trace_id, payload));
    }

    pub(crate) fn audit(&mut self, capability: &Capability, decision: Decision, reason: &str) {
        self.audit_named(&capability.to_string(), decision, reason);
    }

    /// An audit event about something other than a capability string
    /// (`trust`: the bundle's standing with the trust policy).
    pub(crate) fn audit_named(&mut self, capability: &str, decision: Decision, reason: &str) {
        self.audit_provided(capability, decision, reason, None);
    }

    /// An audit event naming the secret provider that answered or failed.
    pub(crate) fn audit_provided(
        &mut self,
        capability: &str,
        decision: Decision,
        reason: &str,
        provider: Option<&str>,
    ) {
        let payload = CapAuditPayload {
            v: PAYLOAD_VERSION,
            tool: self.tool.to_string(),
            capability: capability.to_string(),
            decision,
            reason: reason.to_string(),
            provider: provider.map(str::to_string),
            invocation_id: self.invocation_id,
            tags: self.tags.clone(),
        };
        self.push(EventKind::CapAudit, "runtime".into(), payload);
    }

    /// Makes everything pending durable.
    pub(crate) fn flush(&mut self) -> Result<(), CallError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.pending);
        self.recorder.record(&batch).map_err(|e| {
            let help = e.help().unwrap_or(
                "check that the ledger named above can be written (a file: its folder and free space; PostgreSQL: \
                 the server and the user's INSERT right)",
            );
            CallError::new(
                CallErrorKind::Recording,
                self.scrubber.scrub_string(&format!("cannot record the call of `{}`: {e}", self.tool)),
            )
            .help(help)
            .caused_by(e)
        })
    }

    /// Records what is pending, then returns `error` (noting a recording failure in it).
    pub(crate) fn refuse(&mut self, mut error: CallError) -> CallError {
        for (capability, reason) in std::mem::take(&mut self.unresolved_secrets) {
            self.audit(&capability, Decision::Allow, &reason);
        }
        if let Err(recording) = self.flush() {
            error.message.push_str(&format!(" (and the decision could not be recorded: {})", recording.message));
        }
        error.message = self.scrubber.scrub_string(&error.message);
        error.of_call(self.invocation_id, self.trace_id)
    }
}

/// Longest tag a call may be given.
const MAX_TAG_LEN: usize = 128;

/// Checks the tags given for a call: at most [`MAX_CALL_TAGS`], each
/// non-empty, at most [`MAX_TAG_LEN`] bytes, with no control character.
pub(crate) fn check_tags(given: &[String]) -> Result<(), String> {
    if given.len() > MAX_CALL_TAGS {
        return Err(format!("{} tags given; a call takes at most {MAX_CALL_TAGS}", given.len()));
    }
    for tag in given {
        if tag.is_empty() || tag.len() > MAX_TAG_LEN || tag.chars().any(char::is_control) {
            return Err(format!(
                "the tag `{}` is not a tag (1 to {MAX_TAG_LEN} bytes, no control characters)",
                crate::text::terminal_safe_line(&crate::text::ellipsize(tag, 40))
            ));
        }
    }
    Ok(())
}
