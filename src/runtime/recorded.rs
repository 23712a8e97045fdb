//! Calls answered from a recording instead of run (`rlp serve --replay`,
//! `rlp tools call --replay`): the [`Recording`] a runtime is given looks
//! each call up, and the call goes through the pipeline as any other —
//! exposure, input validation, budget, options, the tool's questions asked
//! again, result validation, after-call hooks, recording — except that no
//! secret is resolved, no one is asked to confirm, nothing is retried, and
//! the transport is the recorded call (`RecordedPlan`). The call frame
//! says what answered it ([`ReplayMark`]).
//!
//! What matches a call to a recorded one is the recording's business
//! (`crate::replay::serving`); the runtime only knows its answer.

use serde_json::Value;

use crate::event::canonical::canonical_text;
use crate::event::{Outcome, RecordedAnswer, ReplayMark, Usage};
use crate::runtime::call::Call;
use crate::runtime::transport::{Attempt, AttemptError, Audit, FailureKind, Plan, Reply};

/// Where a runtime looks calls up instead of running them.
pub trait Recording: Send + Sync {
    /// What answers a call of `tool` with `arguments` (validated).
    fn lookup(&self, tool: &str, arguments: &Value) -> Lookup;
}

/// What a [`Recording`] says of one call.
#[derive(Clone, Debug, PartialEq)]
pub enum Lookup {
    /// The recorded call that answers it.
    Recorded(Box<RecordedCall>),
    /// No recording answers it: it runs for real (`--fallback live`),
    /// its call frame marked so.
    Live(ReplayMark),
    /// No recording answers it: it fails with this message, which names
    /// the closest recorded call and how it differs.
    Unmatched {
        /// The mark of its call frame.
        mark: ReplayMark,
        /// Why, in one or more sentences.
        message: String,
    },
}

/// A recorded call, as a replay answers with it: what the tool asked and
/// was answered, and what it returned (before the operator's after-call
/// hooks, which run again).
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedCall {
    /// The mark of the new call frame (`recording`, naming the invocation).
    pub mark: ReplayMark,
    /// The rounds of questions, in order.
    pub rounds: Vec<RecordedRound>,
    /// The tool's final outcome.
    pub outcome: Outcome,
    /// What it consumed, when it said.
    pub usage: Option<Usage>,
    /// The content blocks a bridged MCP server sent beside its structured
    /// result, as recorded.
    pub content: Option<Vec<Value>>,
}

/// One round of a tool's questions and the answers it got.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedRound {
    /// The questions, as recorded.
    pub questions: Vec<Value>,
    /// The answers, as recorded.
    pub answers: Vec<RecordedAnswer>,
}

/// The transport of a call under a replay: attempt *n* asks the *n*-th
/// round's recorded questions again (the answers of the round before must
/// be the recorded ones), and the attempt after the last round returns the
/// recorded outcome. A call no recording answers fails at its one attempt,
/// saying why.
pub(crate) struct RecordedPlan {
    answer: Result<Box<RecordedCall>, String>,
}

impl RecordedPlan {
    /// The first recorded answer of `round` the caller answered otherwise.
    fn differing_answer(round: &RecordedRound, given: &serde_json::Map<String, Value>) -> Option<String> {
        round.answers.iter().find_map(|recorded| {
            let given = given.get(&recorded.id);
            let same = given.is_some_and(|value| canonical_text(value) == canonical_text(&recorded.value));
            (!same).then(|| {
                let given = given.map_or_else(|| "none".to_string(), |v| format!("`{}`", canonical_text(v)));
                format!(
                    "the answer to question `{}` is not the recorded one: recorded `{}`, given {given}",
                    recorded.id,
                    canonical_text(&recorded.value)
                )
            })
        })
    }

    /// The recorded outcome as the attempt's reply.
    fn outcome(call: &RecordedCall) -> Result<Reply, AttemptError> {
        match (&call.outcome, &call.content) {
            (Outcome::Result(value), Some(content)) => {
                Ok(Reply::Structured { value: value.clone(), content: content.clone() })
            }
            (Outcome::Result(value), None) => Ok(Reply::Result { value: value.clone(), usage: call.usage }),
            (Outcome::Error(recorded), _) => {
                let error = &recorded.error;
                let kind = FailureKind::parse(&error.kind);
                Err(AttemptError {
                    kind,
                    message: error.message.clone(),
                    transient: error.transient,
                    retry_after_ms: error.retry_after_ms,
                    status: error.status,
                    refused: kind == FailureKind::Refused,
                })
            }
        }
    }
}

impl Plan for RecordedPlan {
    fn target(&self) -> String {
        match &self.answer {
            Ok(call) => {
                format!("the recording of trace {} at #{}", call.mark.trace_id, call.mark.position.unwrap_or_default())
            }
            Err(_) => "no recording".to_string(),
        }
    }

    fn recorded(&self) -> bool {
        true
    }

    fn run(&self, attempt: &Attempt<'_>, _audits: &mut Vec<Audit>) -> Result<Reply, AttemptError> {
        let call = self.answer.as_ref().map_err(|why| AttemptError::new(FailureKind::NotRecorded, why.clone()))?;
        let round = usize::try_from(attempt.number.saturating_sub(1)).unwrap_or(usize::MAX);
        let answered = round.checked_sub(1).and_then(|previous| call.rounds.get(previous));
        if let Some(message) = answered.and_then(|previous| Self::differing_answer(previous, attempt.answers)) {
            return Err(AttemptError::new(FailureKind::NotRecorded, message));
        }
        match call.rounds.get(round) {
            Some(asked) => Ok(Reply::Questions(asked.questions.clone())),
            None => Self::outcome(call),
        }
    }
}

impl Call<'_> {
    /// With a recording to answer from: the plan that answers the call
    /// from it (or fails it, when nothing matches); `None` when the call
    /// runs for real, its frame marked when that is the recording's
    /// fallback.
    pub(crate) fn recorded_plan(&mut self) -> Option<RecordedPlan> {
        let recording = self.runtime.recording()?;
        let (mark, answer) = match recording.lookup(&self.request.tool, &self.request.arguments) {
            Lookup::Recorded(call) => (call.mark.clone(), Ok(call)),
            Lookup::Unmatched { mark, message } => (mark, Err(message)),
            Lookup::Live(mark) => {
                self.replay = Some(mark);
                return None;
            }
        };
        self.replay = Some(mark);
        Some(RecordedPlan { answer })
    }
}
