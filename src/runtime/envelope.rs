//! The outcome envelope an exec tool may print instead of a bare result.
//!
//! ```json
//! {"outcome": "success", "result": …}
//! {"outcome": "error", "message": "…", "transient": true, "retry_after_ms": 500}
//! {"outcome": "needs_input", "question": {"id": "…", "text": "…", "schema": {…}, "default": …}}
//! ```
//!
//! A JSON object whose `outcome` is one of these three words is an envelope
//! (and the exit code is ignored); any other JSON value is a bare result.

use serde_json::Value;

/// What an envelope says.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Outcome {
    /// The call succeeded with this result.
    Success(Value),
    /// The call failed.
    Error {
        /// The tool's message.
        message: String,
        /// Whether a retry may succeed.
        transient: bool,
        /// How long to wait before retrying.
        retry_after_ms: Option<u64>,
    },
    /// The tool asks a question before it can go on.
    NeedsInput {
        /// The question object.
        question: Value,
    },
}

/// How a tool's stdout reads.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Stdout {
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
pub(crate) fn parse(stdout: &[u8]) -> Stdout {
    if stdout.iter().all(u8::is_ascii_whitespace) {
        return Stdout::NotJson("the tool printed nothing on stdout".to_string());
    }
    let value: Value = match serde_json::from_slice(stdout) {
        Ok(value) => value,
        Err(e) => return Stdout::NotJson(format!("stdout is not one JSON value ({e})")),
    };
    let Some(outcome) = value.get("outcome").and_then(Value::as_str) else { return Stdout::Plain(value) };
    match outcome {
        "success" => match value.get("result") {
            Some(result) => Stdout::Envelope(Outcome::Success(result.clone())),
            None => Stdout::Malformed("a `success` envelope needs a `result` field".to_string()),
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
        "needs_input" => match value.get("question") {
            Some(question @ Value::Object(_)) => Stdout::Envelope(Outcome::NeedsInput { question: question.clone() }),
            _ => Stdout::Malformed("a `needs_input` envelope needs a `question` object".to_string()),
        },
        _ => Stdout::Plain(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn recognises_envelopes() {
        assert_eq!(
            parse(br#"{"outcome":"success","result":{"id":7}}"#),
            Stdout::Envelope(Outcome::Success(json!({"id": 7})))
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
            Stdout::Envelope(Outcome::NeedsInput { question: json!({"id": "q", "text": "Which?"}) })
        );
    }

    #[test]
    fn other_values_are_plain_or_refused() {
        assert_eq!(parse(b"  [1,2]\n"), Stdout::Plain(json!([1, 2])));
        assert_eq!(parse(br#"{"outcome":"won"}"#), Stdout::Plain(json!({"outcome": "won"})));
        assert!(matches!(parse(br#"{"outcome":"success"}"#), Stdout::Malformed(_)));
        assert!(matches!(parse(br#"{"outcome":"needs_input","question":1}"#), Stdout::Malformed(_)));
        assert!(matches!(parse(b""), Stdout::NotJson(m) if m.contains("nothing")));
        assert!(matches!(parse(b"{} {}"), Stdout::NotJson(_)));
        assert!(matches!(parse(b"\xff"), Stdout::NotJson(_)));
    }
}
