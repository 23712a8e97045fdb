//! Answers to the questions tools ask: the trait through which a person
//! (a terminal prompt, an MCP client) answers them.
//!
//! The library never touches a terminal: the CLI passes in an [`Answerer`]
//! that prompts when it can; answers given up front (`--answer`, a recorded
//! trace) travel with the [`crate::runtime::CallRequest`] and are used
//! first.

use serde_json::Value;
use uuid::Uuid;

use crate::runtime::asking::questions::Question;

/// Where an answer came from, as the `tool.answer` frame records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerSource {
    /// `--answer ID=VALUE`.
    Flag,
    /// A prompt on the terminal.
    Terminal,
    /// An MCP client (elicitation).
    Mcp,
    /// A recorded trace being replayed.
    Replay,
}

impl AnswerSource {
    /// `flag`, `terminal`, `mcp` or `replay`.
    pub fn as_str(self) -> &'static str {
        match self {
            AnswerSource::Flag => "flag",
            AnswerSource::Terminal => "terminal",
            AnswerSource::Mcp => "mcp",
            AnswerSource::Replay => "replay",
        }
    }
}

/// What an answerer is asked: the questions still open in one round.
#[derive(Debug)]
pub struct AnswerRequest<'a> {
    /// The tool id.
    pub tool: &'a str,
    /// The tool's description.
    pub description: &'a str,
    /// The invocation id.
    pub invocation_id: Uuid,
    /// The questions without an answer yet, in the tool's order.
    pub questions: &'a [&'a Question],
}

/// One answer.
#[derive(Clone, Debug, PartialEq)]
pub struct GivenAnswer {
    /// The question id.
    pub id: String,
    /// The answer (checked again by the runtime against the question).
    pub value: Value,
    /// Where it came from.
    pub source: AnswerSource,
}

/// Answers questions. Must be callable from several threads.
pub trait Answerer: Send + Sync {
    /// Answers what it can of `request` (possibly nothing: the runtime
    /// then fails the call, naming the questions left open).
    fn answer(&self, request: &AnswerRequest<'_>) -> Vec<GivenAnswer>;

    /// What to tell the caller when questions were left open; `None` for
    /// the command line's advice (`--answer`).
    fn unanswered_help(&self) -> Option<String> {
        None
    }

    /// Puts an MCP server's `elicitation/create` params to whoever answers,
    /// as they are, and returns the `ElicitResult` (as JSON). `None` when
    /// this answerer takes no forms (the form's fields are then asked as
    /// questions) or could not ask.
    fn elicit(&self, _form: &Value) -> Option<Value> {
        None
    }
}

/// Answers nothing: there is nobody to ask.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoAnswerer;

impl Answerer for NoAnswerer {
    fn answer(&self, _request: &AnswerRequest<'_>) -> Vec<GivenAnswer> {
        Vec::new()
    }
}
