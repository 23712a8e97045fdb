//! Redaction of a trace for sharing: chosen fields of calls' arguments and
//! results replaced by stable placeholders (`<redacted:N>`), the same value
//! by the same placeholder throughout a trace, so that a replay can match a
//! call on them.

/// What every placeholder starts with: `<redacted:` then the number of the
/// value (in order of first appearance in the trace), then `>`.
pub const PLACEHOLDER_PREFIX: &str = "<redacted:";

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_and_recognised() {
        assert_eq!(placeholder(3), "<redacted:3>");
        assert!(is_placeholder(&placeholder(12)));
        for text in ["<redacted:>", "<redacted:1", "redacted:1>", "<redacted:x>", "<redacted:1> ", ""] {
            assert!(!is_placeholder(text), "{text:?}");
        }
    }
}
