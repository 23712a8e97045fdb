//! The outcome envelope a tool may print (exec) or answer with (http)
//! instead of a bare result.
//!
//! ```json
//! {"outcome": "success", "result": …, "usage": {"tokens": 812, "usd": 0.0031}}
//! {"outcome": "error", "message": "…", "transient": true, "retry_after_ms": 500}
//! {"outcome": "needs_input", "questions": [{"id": "…", "text": "…", "schema": {…}, "default": …}]}
//! ```
//!
//! A JSON object whose `outcome` is one of these three words is an envelope
//! (and an exec tool's exit code is ignored); any other JSON value is a bare
//! result. `needs_input` takes a `questions` array or a single `question`.

use serde_json::Value;

use crate::bundle::value::MAX_SAFE_INTEGER;
use crate::event::Usage;

/// What an envelope says.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The call succeeded with this result.
    Success {
        /// The result.
        result: Value,
        /// What the call consumed, when the tool says.
        usage: Option<Usage>,
    },
    /// The call failed.
    Error {
        /// The tool's message.
        message: String,
        /// Whether a retry may succeed.
        transient: bool,
        /// How long to wait before retrying.
        retry_after_ms: Option<u64>,
    },
    /// The tool asks questions before it can go on (the question objects,
    /// checked later by [`crate::runtime::questions`]).
    NeedsInput {
        /// The question objects, at least one.
        questions: Vec<Value>,
    },
}

/// How a tool's stdout reads.
#[derive(Clone, Debug, PartialEq)]
pub enum Stdout {
    /// An outcome envelope.
    Envelope(Outcome),
    /// One JSON value that is not an envelope.
    Plain(Value),
    /// An object that claims to be an envelope but lacks a required field.
    Malformed(String),
    /// Nothing, or not one JSON value.
    NotJson(String),
}

/// Reads a tool's stdout.
pub fn parse(stdout: &[u8]) -> Stdout {
    if stdout.iter().all(u8::is_ascii_whitespace) {
        return Stdout::NotJson("the tool printed nothing on stdout".to_string());
    }
    let value: Value = match serde_json::from_slice(stdout) {
        Ok(value) => value,
        Err(e) => return Stdout::NotJson(format!("stdout is not one JSON value ({e})")),
    };
    read_value(value)
}

/// Reads a text that may hold one JSON value (an MCP text content); `None`
/// when it is not JSON.
pub fn read_value_text(text: &str) -> Option<Stdout> {
    serde_json::from_str(text).ok().map(read_value)
}

impl Outcome {
    /// The envelope's `outcome` word.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Success { .. } => "success",
            Outcome::Error { .. } => "error",
            Outcome::NeedsInput { .. } => "needs_input",
        }
    }
}

/// Reads one JSON value as an envelope, or as a bare result.
pub fn read_value(value: Value) -> Stdout {
    let Some(outcome) = value.get("outcome").and_then(Value::as_str) else { return Stdout::Plain(value) };
    match outcome {
        "success" => match (value.get("result"), value.get("usage").map(read_usage)) {
            (None, _) => Stdout::Malformed("a `success` envelope needs a `result` field".to_string()),
            (Some(_), Some(Err(why))) => Stdout::Malformed(format!("the envelope's `usage` {why}")),
            (Some(result), usage) => {
                Stdout::Envelope(Outcome::Success { result: result.clone(), usage: usage.and_then(Result::ok) })
            }
        },
        "error" => {
            let message = match value.get("message") {
                Some(Value::String(m)) => m.clone(),
                Some(other) => other.to_string(),
                None => "the tool reported an error without a message".to_string(),
            };
            let transient = value.get("transient").and_then(Value::as_bool).unwrap_or(false);
            let retry_after_ms = value.get("retry_after_ms").and_then(Value::as_u64);
            Stdout::Envelope(Outcome::Error { message, transient, retry_after_ms })
        }
        "needs_input" => match (value.get("questions"), value.get("question")) {
            (Some(Value::Array(questions)), None) if !questions.is_empty() => {
                Stdout::Envelope(Outcome::NeedsInput { questions: questions.clone() })
            }
            (None, Some(question @ Value::Object(_))) => {
                Stdout::Envelope(Outcome::NeedsInput { questions: vec![question.clone()] })
            }
            _ => Stdout::Malformed(
                "a `needs_input` envelope needs a non-empty `questions` array or one `question` object".to_string(),
            ),
        },
        _ => Stdout::Plain(value),
    }
}

/// Reads `usage`: an object with an integer `tokens` from 0 to 2^53−1
/// (what every JSON reader, the ledger's canonical form included, keeps
/// exact) and a non-negative finite `usd`, both optional; the error says
/// what is wrong.
fn read_usage(value: &Value) -> Result<Usage, String> {
    let Value::Object(members) = value else { return Err("is not an object".to_string()) };
    let tokens = match members.get("tokens") {
        None | Some(Value::Null) => None,
        Some(tokens) => Some(
            tokens
                .as_u64()
                .filter(|t| *t <= MAX_SAFE_INTEGER as u64)
                .ok_or("`tokens` is not an integer from 0 to 2^53−1")?,
        ),
    };
    let usd = match members.get("usd") {
        None | Some(Value::Null) => None,
        Some(usd) => {
            Some(usd.as_f64().filter(|d| d.is_finite() && *d >= 0.0).ok_or("`usd` is not a non-negative number")?)
        }
    };
    Ok(Usage { tokens, usd })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn recognises_envelopes() {
        assert_eq!(
            parse(br#"{"outcome":"success","result":{"id":7}}"#),
            Stdout::Envelope(Outcome::Success { result: json!({"id": 7}), usage: None })
        );
        assert_eq!(
            parse(br#"{"outcome":"success","result":1,"usage":{"tokens":600,"usd":0.5}}"#),
            Stdout::Envelope(Outcome::Success {
                result: json!(1),
                usage: Some(Usage { tokens: Some(600), usd: Some(0.5) })
            })
        );
        assert_eq!(
            parse(br#"{"outcome":"error","message":"busy","transient":true,"retry_after_ms":500}"#),
            Stdout::Envelope(Outcome::Error { message: "busy".into(), transient: true, retry_after_ms: Some(500) })
        );
        assert_eq!(
            parse(br#"{"outcome":"error","message":"no"}"#),
            Stdout::Envelope(Outcome::Error { message: "no".into(), transient: false, retry_after_ms: None })
        );
        assert_eq!(
            parse(br#"{"outcome":"needs_input","question":{"id":"q","text":"Which?"}}"#),
            Stdout::Envelope(Outcome::NeedsInput { questions: vec![json!({"id": "q", "text": "Which?"})] })
        );
        assert_eq!(
            parse(br#"{"outcome":"needs_input","questions":[{"id":"a"},{"id":"b"}]}"#),
            Stdout::Envelope(Outcome::NeedsInput { questions: vec![json!({"id": "a"}), json!({"id": "b"})] })
        );
    }

    #[test]
    fn other_values_are_plain_or_refused() {
        assert_eq!(parse(b"  [1,2]\n"), Stdout::Plain(json!([1, 2])));
        assert_eq!(parse(br#"{"outcome":"won"}"#), Stdout::Plain(json!({"outcome": "won"})));
        assert!(matches!(parse(br#"{"outcome":"success"}"#), Stdout::Malformed(_)));
        assert!(matches!(parse(br#"{"outcome":"needs_input","question":1}"#), Stdout::Malformed(_)));
        assert!(matches!(parse(br#"{"outcome":"needs_input","questions":[]}"#), Stdout::Malformed(_)));
        assert_eq!(
            parse(br#"{"outcome":"success","result":1,"usage":{"tokens":-1}}"#),
            Stdout::Malformed("the envelope's `usage` `tokens` is not an integer from 0 to 2^53−1".into())
        );
        assert!(matches!(
            parse(br#"{"outcome":"success","result":1,"usage":{"tokens":9007199254740992}}"#),
            Stdout::Malformed(_)
        ));
        assert!(matches!(parse(br#"{"outcome":"success","result":1,"usage":3}"#), Stdout::Malformed(_)));
        assert!(matches!(parse(b""), Stdout::NotJson(m) if m.contains("nothing")));
        assert!(matches!(parse(b"{} {}"), Stdout::NotJson(_)));
        assert!(matches!(parse(b"\xff"), Stdout::NotJson(_)));
    }
}
