//! What a server's `tools/call` answer means (seed 002, "speculative
//! `Outcome` unwrap"):
//!
//! - exactly one text content that reads as an outcome envelope
//!   ([`crate::runtime::envelope`]) has the envelope's meaning: a result,
//!   an error (transient ones are retried), or questions;
//! - `isError` wins: with it, an envelope's `success` is an error (said so
//!   in the message, which is recorded), and its `error` keeps its
//!   `transient`;
//! - several contents are never unwrapped, whatever one of them holds;
//! - anything else is the server's own answer: its `structuredContent` when
//!   it gave one (with its content blocks beside it, kept for the client and
//!   the ledger), else `{"content": [the content blocks as sent]}`.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::json;

use crate::runtime::envelope::{self, Outcome, Stdout};
use crate::runtime::transport::{AttemptError, FailureKind, Reply};

/// Most characters of a server's error text quoted in a message.
const QUOTED_ERROR: usize = 2048;

/// Refuses an answer of `server` to tool `tool` whose JSON text is longer
/// than `max_output_bytes`, as a longer stdout or response body is: the
/// answer is neither returned nor recorded.
pub(crate) fn within(
    tool: &str,
    server: &str,
    answer: &CallToolResult,
    max_output_bytes: u64,
) -> Result<(), AttemptError> {
    let size = json_size(answer);
    if size <= max_output_bytes {
        return Ok(());
    }
    let shown = if size == u64::MAX { "an answer rlp cannot measure".to_string() } else { format!("{size} bytes") };
    Err(AttemptError::new(
        FailureKind::OutputTooLarge,
        format!(
            "tool `{tool}` output too large: the server `{server}` answered {shown}, more than {max_output_bytes} (max_output_bytes)"
        ),
    ))
}

/// The length of `value`'s JSON text, counted without writing it out;
/// `u64::MAX` for a value that cannot be written as JSON, so a bound on
/// the size holds it back.
pub(crate) fn json_size(value: &impl serde::Serialize) -> u64 {
    let mut counted = Counted(0);
    match serde_json::to_writer(&mut counted, value) {
        Ok(()) => counted.0,
        Err(_) => u64::MAX,
    }
}

/// A writer that only counts what it is given.
struct Counted(u64);

impl std::io::Write for Counted {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len() as u64;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What the answer of `server` to a call of tool `tool` comes to.
pub(crate) fn interpret(tool: &str, server: &str, answer: CallToolResult) -> Result<Reply, AttemptError> {
    let is_error = answer.is_error == Some(true);
    let envelope = match answer.content.as_slice() {
        [ContentBlock::Text(text)] => match envelope::read_value_text(&text.text) {
            Some(Stdout::Envelope(outcome)) => Some(outcome),
            _ => None,
        },
        _ => None,
    };
    match (envelope, is_error) {
        (Some(Outcome::Error { message, transient, retry_after_ms }), _) => {
            let error = AttemptError::new(FailureKind::Tool, format!("tool `{tool}` failed: {message}"));
            Err(if transient { error.transient(retry_after_ms) } else { error })
        }
        (Some(Outcome::Success { result, usage }), false) => Ok(Reply::Result { value: result, usage }),
        (Some(Outcome::NeedsInput { questions }), false) => Ok(Reply::Questions(questions)),
        (Some(outcome), true) => Err(AttemptError::new(
            FailureKind::Tool,
            format!(
                "tool `{tool}` failed: the server `{server}` flagged its answer `isError` while its content is an outcome envelope of `{}`; the MCP flag wins",
                outcome.name()
            ),
        )),
        (None, true) => {
            Err(AttemptError::new(FailureKind::Tool, format!("tool `{tool}` failed: {}", error_text(&answer))))
        }
        (None, false) => Ok(match answer.structured_content {
            Some(structured) => Reply::Structured {
                value: structured,
                content: answer.content.iter().filter_map(|block| serde_json::to_value(block).ok()).collect(),
            },
            None => Reply::bare(json!({ "content": answer.content })),
        }),
    }
}

/// The text of an error answer: its text contents, joined, else a word
/// saying it had none.
fn error_text(answer: &CallToolResult) -> String {
    let texts: Vec<&str> = answer
        .content
        .iter()
        .filter_map(|c| match c {
            ContentBlock::Text(text) => Some(text.text.as_str()),
            _ => None,
        })
        .collect();
    if texts.is_empty() {
        return "the server flagged its answer `isError` with no text".to_string();
    }
    crate::text::ellipsize(&texts.join("\n"), QUOTED_ERROR)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;

    fn answer(texts: &[&str], is_error: bool) -> CallToolResult {
        let content = texts.iter().map(|t| ContentBlock::text(*t)).collect();
        if is_error { CallToolResult::error(content) } else { CallToolResult::success(content) }
    }

    #[test]
    fn an_answer_longer_than_max_output_bytes_is_refused() {
        let answer = answer(&["0123456789"], false);
        let size = serde_json::to_vec(&answer).unwrap().len() as u64;
        assert!(within("t", "s", &answer, size).is_ok());
        let refused = within("t", "s", &answer, size - 1).unwrap_err();
        assert_eq!(refused.kind, FailureKind::OutputTooLarge);
        assert_eq!(
            refused.message,
            format!(
                "tool `t` output too large: the server `s` answered {size} bytes, more than {} (max_output_bytes)",
                size - 1
            )
        );
    }

    #[test]
    fn a_value_that_cannot_be_written_as_json_measures_as_too_large() {
        // A map with non-string keys has no JSON text.
        let keyed: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
        assert_eq!(json_size(&keyed), u64::MAX);
        assert_eq!(json_size(&json!({"a": "bc"})), 10);
    }

    #[test]
    fn unwraps_one_text_envelope() {
        let ok = interpret("t", "s", answer(&[r#"{"outcome":"success","result":{"a":1}}"#], false)).unwrap();
        assert_eq!(ok, Reply::bare(json!({"a": 1})));
        let asked = r#"{"outcome":"needs_input","question":{"id":"q","text":"?"}}"#;
        assert_eq!(
            interpret("t", "s", answer(&[asked], false)).unwrap(),
            Reply::Questions(vec![json!({"id": "q", "text": "?"})])
        );
        let busy = r#"{"outcome":"error","message":"busy","transient":true,"retry_after_ms":5}"#;
        let error = interpret("t", "s", answer(&[busy], false)).unwrap_err();
        assert!(error.transient);
        assert_eq!(error.retry_after_ms, Some(5));
        assert_eq!(error.message, "tool `t` failed: busy");
    }

    #[test]
    fn the_mcp_flag_wins_and_several_contents_are_never_unwrapped() {
        let success = r#"{"outcome":"success","result":{"a":1}}"#;
        let error = interpret("t", "s", answer(&[success], true)).unwrap_err();
        assert_eq!(
            error.message,
            "tool `t` failed: the server `s` flagged its answer `isError` while its content is an outcome envelope of `success`; the MCP flag wins"
        );
        assert!(!error.transient);
        let two = interpret("t", "s", answer(&[success, "more"], false)).unwrap();
        assert_eq!(
            two,
            Reply::bare(json!({"content": [{"type": "text", "text": success}, {"type": "text", "text": "more"}]}))
        );
        let plain = interpret("t", "s", answer(&["it broke"], true)).unwrap_err();
        assert_eq!(plain.message, "tool `t` failed: it broke");
        let mut structured = answer(&["{\"n\":2}"], false);
        structured.structured_content = Some(json!({"n": 2}));
        assert_eq!(
            interpret("t", "s", structured).unwrap(),
            Reply::Structured { value: json!({"n": 2}), content: vec![json!({"type": "text", "text": "{\"n\":2}"})] }
        );
    }
}
