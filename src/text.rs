//! Small text helpers shared by every report: wording, shortening, times,
//! and text from outside rlp made safe for a terminal.

use std::borrow::Cow;

/// `1 word` or `n words`, for any count.
pub(crate) fn plural(n: impl std::fmt::Display, word: &str) -> String {
    let n = n.to_string();
    if n == "1" { format!("1 {word}") } else { format!("{n} {word}s") }
}

/// Shortens `text` to at most `max` characters, marking the cut with `…`.
pub(crate) fn ellipsize(text: &str, max: usize) -> String {
    match text.char_indices().nth(max.saturating_sub(1)) {
        Some((cut, _)) if text.chars().count() > max => format!("{}…", &text[..cut]),
        _ => text.to_string(),
    }
}

/// `2025-11-24T16:00:00.000Z` for milliseconds since the Unix epoch (UTC).
pub(crate) fn format_ts(ts_ms: i64) -> String {
    let secs = ts_ms.div_euclid(1000);
    let millis = ts_ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z", rem / 3600, (rem % 3600) / 60, rem % 60)
}

/// Whether `c` changes how the text around it is shown: a control
/// character other than newline and tab (escape sequences could clear the
/// screen, retitle the window or fake output), a bidirectional embedding,
/// override, isolate or mark (text that reads in another order than its
/// characters'), or a Unicode line or paragraph separator.
fn shows_otherwise(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}

/// Text that came from outside rlp (a tool's output, a server's body, an
/// imported trace), made safe to print on a terminal: every character that
/// [shows otherwise](shows_otherwise) is written as its code, `\u{1b}`.
pub(crate) fn terminal_safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(shows_otherwise) {
        return Cow::Borrowed(text);
    }
    let mut safe = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if shows_otherwise(c) {
            safe.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            safe.push(c);
        }
    }
    Cow::Owned(safe)
}

/// [`terminal_safe`] for text that must stay on one line (a table cell, a
/// lint message, a file name): newlines and tabs are escaped too.
pub(crate) fn terminal_safe_line(text: &str) -> Cow<'_, str> {
    if !text.contains(['\n', '\t']) {
        return terminal_safe(text);
    }
    Cow::Owned(terminal_safe(&text.replace('\n', "\\u{a}").replace('\t', "\\u{9}")).into_owned())
}

/// What kind of JSON value `value` is, as a message names it: `null`,
/// `a boolean`, `a number`, `a string`, `an array`, `an object`.
pub(crate) fn json_kind(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_plain_text_is_borrowed() {
        assert!(matches!(terminal_safe("plain\ttext\n"), Cow::Borrowed(_)));
        assert_eq!(terminal_safe("a\x1b[2Jb\x07\u{9b}c\r"), "a\\u{1b}[2Jb\\u{7}\\u{9b}c\\u{d}");
        // Text that would read in another order, or break the line.
        assert_eq!(terminal_safe("ok\u{202e}txt.exe\u{2066}x\u{2028}y"), "ok\\u{202e}txt.exe\\u{2066}x\\u{2028}y");
        assert!(matches!(terminal_safe("naïve → ✓"), Cow::Borrowed(_)));
    }

    #[test]
    fn formats_times_and_shortens_text() {
        assert_eq!(format_ts(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_ts(1_764_000_000_123), "2025-11-24T16:00:00.123Z");
        assert_eq!(format_ts(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(format_ts(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(ellipsize("abcdef", 4), "abc…");
        assert_eq!(ellipsize("abcd", 4), "abcd");
        assert_eq!(ellipsize("ééééé", 3), "éé…");
    }

    #[test]
    fn one_line_text_escapes_newlines_and_tabs_too() {
        assert!(matches!(terminal_safe_line("plain text"), Cow::Borrowed(_)));
        assert_eq!(terminal_safe_line("a\nb\tc\x1b"), "a\\u{a}b\\u{9}c\\u{1b}");
    }
}
