//! Questions during a call (docs/runtime.md "Questions"): a tool that
//! answers `needs_input` gets its questions recorded (`tool.inquiry`),
//! answered — from the answers the call brought, else by the runtime's
//! [`Answerer`] — recorded (`tool.answer`), and is run again with every
//! answer so far, at most [`MAX_ROUNDS`] times.

use serde_json::{Map, Value, json};

use crate::bundle::value::{MAX_DATA_DEPTH, json_depth};
use crate::event::{EventKind, PAYLOAD_VERSION, RecordedAnswer, ToolAnswerPayload, ToolInquiryPayload};
use crate::runtime::asking::answer::{AnswerRequest, AnswerSource, Answerer, GivenAnswer};
use crate::runtime::asking::questions::{Question, looks_secret, read_questions};
use crate::runtime::call::Call;
use crate::runtime::error::CallErrorKind;
use crate::runtime::transport::{AttemptError, FailureKind};

/// Characters of a refused answer quoted in the error.
const SHOWN_ANSWER: usize = 80;
/// Most rounds of questions one call answers.
pub(crate) const MAX_ROUNDS: u32 = 8;
/// What to do about questions that are not well formed.
const FIX_ENVELOPE: &str = "fix the tool's `needs_input` envelope (docs/runtime.md, \"Questions\")";

/// The questions of one call so far.
#[derive(Debug, Default)]
pub(crate) struct Questioning {
    /// Every answer so far (what the tool gets in `tool.answers`).
    pub(crate) answers: Map<String, Value>,
    /// Rounds answered.
    rounds: u32,
}

/// Why questions end a call: the attempt's error (recorded as its result,
/// kind `needs_input`), how the call fails and what to do.
pub(crate) struct Stop {
    /// The attempt's error.
    pub(crate) error: AttemptError,
    /// The class of the call's failure.
    pub(crate) kind: CallErrorKind,
    /// What to do.
    pub(crate) help: String,
}

impl Stop {
    fn new(kind: CallErrorKind, message: String, help: impl Into<String>) -> Stop {
        let mut error = AttemptError::new(FailureKind::NeedsInput, message);
        error.refused = kind == CallErrorKind::Refused;
        Stop { error, kind, help: help.into() }
    }
}

/// How a question reads in a message: `` `id` ("text", a string) ``.
fn shown(question: &Question) -> String {
    format!("`{}` (\"{}\", {})", question.id, question.text, question.expected())
}

impl<'r> Call<'r> {
    /// Who answers this call's questions: its context's answerer, else the runtime's.
    fn answerer(&self) -> &'r dyn Answerer {
        self.context.answerer.as_deref().unwrap_or(&*self.runtime.options().answerer)
    }

    /// Records the questions of attempt `attempt`, gets and records their
    /// answers. A [`Stop`] ends the call.
    pub(crate) fn ask(&mut self, asked: &[Value], attempt: u32) -> Result<(), Stop> {
        let questions = self.record_inquiry(asked, attempt)?;
        let answers = self.answers_to(&questions)?;
        self.record_answers(&questions, &answers, attempt)
    }

    /// The questions of one round, recorded as they were asked (scrubbed)
    /// and checked.
    fn record_inquiry(&mut self, asked: &[Value], attempt: u32) -> Result<Vec<Question>, Stop> {
        let asked = self.push_inquiry(asked, attempt)?;
        let tool = self.tool();
        let questions = read_questions(&asked).map_err(|why| {
            Stop::new(CallErrorKind::Tool, format!("tool `{}` asked an invalid question: {why}", tool.id), FIX_ENVELOPE)
        })?;
        if let Some(secret) = questions.iter().find(|q| looks_secret(&q.id)) {
            return Err(asked_for_secret(&tool.id, &secret.id));
        }
        Ok(questions)
    }

    /// Records the questions of one round as they were asked (scrubbed),
    /// unless they nest too deep or the call has had its rounds; returns them.
    fn push_inquiry(&mut self, asked: &[Value], attempt: u32) -> Result<Vec<Value>, Stop> {
        let tool = self.tool();
        // What cannot be read back is not recorded (as for results): the
        // questions array and what it holds.
        let depth = 1 + asked.iter().map(json_depth).max().unwrap_or(0);
        if depth > MAX_DATA_DEPTH {
            return Err(Stop::new(
                CallErrorKind::Tool,
                format!(
                    "tool `{}` asked questions that nest arrays and objects {depth} levels deep; rlp records at most {MAX_DATA_DEPTH}",
                    tool.id
                ),
                FIX_ENVELOPE,
            ));
        }
        // The tool holds the call's secrets: whatever it asks is scrubbed of
        // them before anyone sees it (the prompt, error messages, the frame).
        let asked: Vec<Value> = asked.iter().map(|q| self.journal.scrubber.scrubbed(q)).collect();
        let inquiry = ToolInquiryPayload {
            v: PAYLOAD_VERSION,
            invocation_id: self.journal.invocation_id,
            tool: tool.id.clone(),
            attempt: attempt.into(),
            questions: asked.clone(),
            tags: self.journal.tags.clone(),
        };
        self.journal.push(EventKind::ToolInquiry, format!("tool:{}", tool.id), inquiry);
        if self.questions.rounds >= MAX_ROUNDS {
            return Err(Stop::new(
                CallErrorKind::Tool,
                format!(
                    "tool `{}` asked questions {} times; rlp answers at most {MAX_ROUNDS} rounds",
                    tool.id,
                    self.questions.rounds + 1
                ),
                "fix the tool: it keeps asking after every question is answered",
            ));
        }
        Ok(asked)
    }

    /// Puts an MCP server's elicitation `form` (scrubbed) to the call's
    /// answerer as it is, when the answerer takes forms (an MCP client
    /// under `rlp serve`) and the call brought no answers of its own:
    /// recorded as one round, its fields as the questions (`asked`) and
    /// the accepted content as the answers. `None` when the form is for
    /// the questions flow instead; a field that looks like a secret, or a
    /// form past the call's rounds, is declined unasked.
    pub(crate) fn relay_form(&mut self, form: &Value, asked: &[Value], attempt: u32) -> Option<Value> {
        if !self.request.answers.is_empty() {
            return None;
        }
        let form = self.journal.scrubber.scrubbed(form);
        // A call past its rounds is declined before anyone is asked (the
        // SDK reads a form into the flat schema elicitation allows, so none
        // nests deeper than the ledger records).
        if self.questions.rounds >= MAX_ROUNDS
            || asked.iter().any(|q| q.get("id").and_then(Value::as_str).is_some_and(looks_secret))
        {
            return Some(json!({"action": "decline"}));
        }
        let answer = self.answerer().elicit(&form)?;
        if self.push_inquiry(asked, attempt).is_err() {
            return Some(json!({"action": "decline"}));
        }
        let content = match answer.get("action").and_then(Value::as_str) {
            Some("accept") => answer.get("content").and_then(Value::as_object).cloned().unwrap_or_default(),
            _ => return Some(answer),
        };
        let recorded = content
            .iter()
            .map(|(id, value)| RecordedAnswer {
                id: id.clone(),
                value: value.clone(),
                source: AnswerSource::Mcp.as_str().to_string(),
            })
            .collect();
        match self.push_answers(recorded, attempt) {
            Ok(()) => Some(answer),
            Err(_) => Some(json!({"action": "decline"})),
        }
    }

    /// An answer to every question: those the call brought, then the
    /// answerer's; each checked against its question.
    fn answers_to(&self, questions: &[Question]) -> Result<Vec<GivenAnswer>, Stop> {
        let tool = self.tool();
        let (given, source) = (&self.request.answers, self.request.answer_source);
        let mut answers = Vec::with_capacity(questions.len());
        for question in questions {
            if let Some(value) = given.get(&question.id) {
                let value = match (source, value) {
                    (AnswerSource::Flag, Value::String(text)) => question.read_text(text),
                    (_, value) => value.clone(),
                };
                answers.push(GivenAnswer { id: question.id.clone(), value, source });
            }
        }
        let unanswered = |answers: &[GivenAnswer]| -> Vec<&Question> {
            questions.iter().filter(|q| !answers.iter().any(|a| a.id == q.id)).collect()
        };
        let open = unanswered(&answers);
        let answerer = self.answerer();
        if !open.is_empty() {
            let request = AnswerRequest {
                tool: &tool.id,
                description: &tool.description,
                invocation_id: self.journal.invocation_id,
                questions: &open,
            };
            let mut given = answerer.answer(&request);
            given.retain(|a| open.iter().any(|q| q.id == a.id));
            answers.extend(given);
        }
        let still_open = unanswered(&answers);
        if !still_open.is_empty() {
            let flags: Vec<String> = still_open.iter().map(|q| format!("--answer {}=VALUE", q.id)).collect();
            let listed: Vec<String> = still_open.iter().map(|q| shown(q)).collect();
            return Err(Stop::new(
                CallErrorKind::Unanswered,
                format!(
                    "tool `{}` asks {} that no one answered: {}",
                    tool.id,
                    if still_open.len() == 1 { "a question" } else { "questions" },
                    listed.join(", ")
                ),
                answerer
                    .unanswered_help()
                    .unwrap_or_else(|| format!("answer with {}, or call from a terminal to be asked", flags.join(" "))),
            ));
        }
        check_answers(questions, &answers)?;
        Ok(answers)
    }

    /// Records the answers of attempt `attempt` (in the order of the
    /// questions) and keeps them for the next attempts.
    fn record_answers(&mut self, questions: &[Question], answers: &[GivenAnswer], attempt: u32) -> Result<(), Stop> {
        let recorded: Vec<RecordedAnswer> = questions
            .iter()
            .filter_map(|q| answers.iter().find(|a| a.id == q.id))
            .map(|a| RecordedAnswer { id: a.id.clone(), value: a.value.clone(), source: a.source.as_str().to_string() })
            .collect();
        self.push_answers(recorded, attempt)
    }

    /// Records the answers of one round and keeps them for the next attempts.
    fn push_answers(&mut self, recorded: Vec<RecordedAnswer>, attempt: u32) -> Result<(), Stop> {
        for answer in &recorded {
            self.questions.answers.insert(answer.id.clone(), answer.value.clone());
        }
        let frame = ToolAnswerPayload {
            v: PAYLOAD_VERSION,
            invocation_id: self.journal.invocation_id,
            tool: self.tool().id.clone(),
            attempt: attempt.into(),
            answers: recorded,
            tags: self.journal.tags.clone(),
        };
        self.journal.push(EventKind::ToolAnswer, "operator".into(), frame);
        self.questions.rounds += 1;
        self.journal.flush().map_err(|e| Stop {
            error: AttemptError::new(FailureKind::Transport, e.message),
            kind: e.kind,
            help: e.help.unwrap_or_default(),
        })
    }
}

/// The refusal of a question whose id looks like a secret.
fn asked_for_secret(tool: &str, id: &str) -> Stop {
    Stop::new(
        CallErrorKind::Refused,
        format!(
            "tool `{tool}` asked for `{id}`, which looks like a secret; secrets come from the secret resolver, never from answers"
        ),
        "give the tool the value as a secret (`secrets` in tools.json), never as an answer",
    )
}

/// Each answer fits its question.
fn check_answers(questions: &[Question], answers: &[GivenAnswer]) -> Result<(), Stop> {
    for answer in answers {
        let question = questions.iter().find(|q| q.id == answer.id).expect("every answer is to a question asked");
        if let Err(why) = question.check(&answer.value) {
            return Err(Stop::new(
                CallErrorKind::InvalidInput,
                format!(
                    "the answer to `{}` ({}, from {}) does not fit: {why}",
                    question.id,
                    crate::text::ellipsize(&answer.value.to_string(), SHOWN_ANSWER),
                    answer.source.as_str()
                ),
                format!("answer `{}` with {}", question.id, question.expected()),
            ));
        }
    }
    Ok(())
}
