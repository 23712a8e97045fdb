//! The placeholders of a redacted export (`<redacted:N>`, written by
//! `rlp trace export --redact`): a value of a shared trace replaced by the
//! number of the value, the same value by the same number throughout the
//! trace. Replay and `rlp trace diff` read a placeholder as "any value",
//! and a replayed result is not checked against its `result_schema` where
//! one stands.

use serde_json::Value;

/// What every placeholder starts with: `<redacted:` then the number of the
/// value (in order of first appearance in the trace), then `>`.
const PLACEHOLDER_PREFIX: &str = "<redacted:";

/// Whether `text` is a placeholder a redacted export wrote.
pub fn is_placeholder(text: &str) -> bool {
    text.strip_prefix(PLACEHOLDER_PREFIX)
        .and_then(|rest| rest.strip_suffix('>'))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The placeholder of the `number`th value redacted.
pub fn placeholder(number: u64) -> String {
    format!("{PLACEHOLDER_PREFIX}{number}>")
}

/// Whether `value` is or holds a placeholder.
pub fn holds_placeholder(value: &Value) -> bool {
    match value {
        Value::String(text) => is_placeholder(text),
        Value::Array(items) => items.iter().any(holds_placeholder),
        Value::Object(members) => members.values().any(holds_placeholder),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn placeholders_are_numbered_and_recognised() {
        assert_eq!(placeholder(3), "<redacted:3>");
        assert!(is_placeholder(&placeholder(12)));
        for text in ["<redacted:>", "<redacted:1", "redacted:1>", "<redacted:x>", "<redacted:1> ", ""] {
            assert!(!is_placeholder(text), "{text:?}");
        }
    }

    #[test]
    fn a_placeholder_is_found_at_any_depth() {
        assert!(holds_placeholder(&json!({"a": [1, {"b": "<redacted:2>"}]})));
        assert!(!holds_placeholder(&json!({"<redacted:1>": "x", "n": 1})));
    }
}
