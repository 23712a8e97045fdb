//! Questions during a call (docs/runtime.md "Questions"): a tool that
//! answers `needs_input` gets its questions recorded (`tool.inquiry`),
//! answered — from the answers the call brought, else by the runtime's
//! [`Answerer`] — recorded (`tool.answer`), and is run again with every
//! answer so far, at most [`MAX_ROUNDS`] times.

use serde_json::{Map, Value};

use crate::bundle::value::{MAX_DATA_DEPTH, json_depth};
use crate::event::{EventKind, PAYLOAD_VERSION, RecordedAnswer, ToolAnswerPayload, ToolInquiryPayload};
use crate::runtime::answer::{AnswerRequest, AnswerSource, GivenAnswer};
use crate::runtime::call::CallRequest;
use crate::runtime::journal::Journal;
use crate::runtime::questions::{Question, looks_secret, read_questions};
use crate::runtime::transport::{AttemptError, FailureKind};
use crate::runtime::{Prepared, Runtime};

/// Characters of a refused answer quoted in the error.
const SHOWN_ANSWER: usize = 80;
/// Most rounds of questions one call answers.
pub(crate) const MAX_ROUNDS: u32 = 8;

/// The questions of one call so far.
pub(crate) struct Questioning<'a> {
    /// Answers the call brought, not yet used.
    given: &'a Map<String, Value>,
    /// Where those come from.
    given_source: AnswerSource,
    /// Every answer so far (what the tool gets in `tool.answers`).
    pub(crate) answers: Map<String, Value>,
    /// Rounds answered.
    rounds: u32,
    /// Set when the call ends because questions had no answer (exit 2).
    pub(crate) unanswered: bool,
    /// Set when an answer did not fit its question (exit 2).
    pub(crate) bad_answer: bool,
    /// What to do, for the error that ends a call on questions.
    pub(crate) help: String,
}

impl<'a> Questioning<'a> {
    /// Nothing asked yet; `request` brings answers up front.
    pub(crate) fn new(request: &'a CallRequest) -> Self {
        Questioning {
            given: &request.answers,
            given_source: request.answer_source,
            answers: Map::new(),
            rounds: 0,
            unanswered: false,
            bad_answer: false,
            help: String::new(),
        }
    }
}

/// How a question reads in a message: `` `id` ("text", a string) ``.
fn shown(question: &Question) -> String {
    format!("`{}` (\"{}\", {})", question.id, question.text, question.expected())
}

impl Runtime {
    /// Records the questions of attempt `attempt`, gets and records their
    /// answers. `Err` ends the call: the error is recorded as the attempt's
    /// result (kind `needs_input`), and [`Questioning`] says how it ends.
    pub(crate) fn ask(
        &self,
        prepared: &Prepared,
        asked: &[Value],
        state: &mut Questioning<'_>,
        journal: &mut Journal<'_>,
        attempt: u32,
    ) -> Result<(), AttemptError> {
        let tool = &prepared.tool;
        let fail = |message: String| AttemptError::new(FailureKind::NeedsInput, message);
        // What cannot be read back is not recorded (as for results).
        let depth = json_depth(&Value::Array(asked.to_vec()));
        if depth > MAX_DATA_DEPTH {
            state.help = "fix the tool's `needs_input` envelope (docs/runtime.md, \"Questions\")".to_string();
            return Err(fail(format!(
                "tool `{}` asked questions that nest arrays and objects {depth} levels deep; rlp records at most {MAX_DATA_DEPTH}",
                tool.id
            )));
        }
        // The tool holds the call's secrets: whatever it asks is scrubbed of
        // them before anyone sees it (the prompt, error messages, the frame).
        let asked: Vec<Value> = asked.iter().map(|q| journal.scrubber.scrubbed(q)).collect();
        let inquiry = ToolInquiryPayload {
            v: PAYLOAD_VERSION,
            invocation_id: journal.invocation_id,
            tool: tool.id.clone(),
            attempt: attempt.into(),
            questions: asked.clone(),
            tags: journal.tags.clone(),
        };
        journal.push(EventKind::ToolInquiry, format!("tool:{}", tool.id), inquiry);
        if state.rounds >= MAX_ROUNDS {
            state.help = "fix the tool: it keeps asking after every question is answered".to_string();
            return Err(fail(format!(
                "tool `{}` asked questions {} times; rlp answers at most {MAX_ROUNDS} rounds",
                tool.id,
                state.rounds + 1
            )));
        }
        let questions = read_questions(&asked).map_err(|why| {
            state.help = "fix the tool's `needs_input` envelope (docs/runtime.md, \"Questions\")".to_string();
            fail(format!("tool `{}` asked an invalid question: {why}", tool.id))
        })?;
        if let Some(secret) = questions.iter().find(|q| looks_secret(&q.id)) {
            state.help =
                "give the tool the value as a secret (`secrets` in tools.json), never as an answer".to_string();
            return Err(fail(format!(
                "tool `{}` asked for `{}`, which looks like a secret; secrets come from the secret resolver, never from answers",
                tool.id, secret.id
            ))
            .refused());
        }
        let mut answers = Vec::with_capacity(questions.len());
        for question in &questions {
            if let Some(value) = state.given.get(&question.id) {
                let value = match (state.given_source, value) {
                    (AnswerSource::Flag, Value::String(text)) => question.read_text(text),
                    (_, value) => value.clone(),
                };
                answers.push(GivenAnswer { id: question.id.clone(), value, source: state.given_source });
            }
        }
        let open: Vec<&Question> = questions.iter().filter(|q| !answers.iter().any(|a| a.id == q.id)).collect();
        if !open.is_empty() {
            let request = AnswerRequest {
                tool: &tool.id,
                description: &tool.description,
                invocation_id: journal.invocation_id,
                questions: &open,
            };
            let mut given = self.options().answerer.answer(&request);
            given.retain(|a| open.iter().any(|q| q.id == a.id));
            answers.extend(given);
        }
        let still_open: Vec<&Question> = questions.iter().filter(|q| !answers.iter().any(|a| a.id == q.id)).collect();
        if !still_open.is_empty() {
            state.unanswered = true;
            let flags: Vec<String> = still_open.iter().map(|q| format!("--answer {}=VALUE", q.id)).collect();
            state.help = format!("answer with {}, or call from a terminal to be asked", flags.join(" "));
            let listed: Vec<String> = still_open.iter().map(|q| shown(q)).collect();
            return Err(fail(format!(
                "tool `{}` asks {} that no one answered: {}",
                tool.id,
                if still_open.len() == 1 { "a question" } else { "questions" },
                listed.join(", ")
            )));
        }
        for answer in &answers {
            let question = questions.iter().find(|q| q.id == answer.id).expect("every answer is to a question asked");
            if let Err(why) = question.check(&answer.value) {
                state.bad_answer = true;
                state.help = format!("answer `{}` with {}", question.id, question.expected());
                return Err(fail(format!(
                    "the answer to `{}` ({}, from {}) does not fit: {why}",
                    question.id,
                    crate::text::ellipsize(&answer.value.to_string(), SHOWN_ANSWER),
                    answer.source.as_str()
                )));
            }
        }
        let recorded: Vec<RecordedAnswer> = questions
            .iter()
            .filter_map(|q| answers.iter().find(|a| a.id == q.id))
            .map(|a| RecordedAnswer { id: a.id.clone(), value: a.value.clone(), source: a.source.as_str().to_string() })
            .collect();
        for answer in &recorded {
            state.answers.insert(answer.id.clone(), answer.value.clone());
        }
        let frame = ToolAnswerPayload {
            v: PAYLOAD_VERSION,
            invocation_id: journal.invocation_id,
            tool: tool.id.clone(),
            attempt: attempt.into(),
            answers: recorded,
            tags: journal.tags.clone(),
        };
        journal.push(EventKind::ToolAnswer, "operator".into(), frame);
        state.rounds += 1;
        journal.flush().map_err(|e| AttemptError::new(FailureKind::Transport, e.message))
    }
}
