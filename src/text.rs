//! Small text helpers shared by every report: wording, and text from
//! outside rlp made safe for a terminal.

use std::borrow::Cow;

/// `1 word` or `n words`, for any count.
pub fn plural(n: impl std::fmt::Display, word: &str) -> String {
    let n = n.to_string();
    if n == "1" { format!("1 {word}") } else { format!("{n} {word}s") }
}

/// Text that came from outside rlp (a tool's output, a server's body, an
/// imported trace), made safe to print on a terminal: control characters
/// other than newline and tab — escape sequences that could clear the screen,
/// retitle the window or fake output — are written as `\u{1b}`.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut safe = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            safe.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            safe.push(c);
        }
    }
    Cow::Owned(safe)
}

/// [`terminal_safe`] for text that must stay on one line (a table cell, a
/// lint message, a file name): newlines and tabs are escaped too.
pub fn terminal_safe_line(text: &str) -> Cow<'_, str> {
    if !text.contains(['\n', '\t']) {
        return terminal_safe(text);
    }
    Cow::Owned(terminal_safe(&text.replace('\n', "\\u{a}").replace('\t', "\\u{9}")).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_plain_text_is_borrowed() {
        assert!(matches!(terminal_safe("plain\ttext\n"), Cow::Borrowed(_)));
        assert_eq!(terminal_safe("a\x1b[2Jb\x07\u{9b}c\r"), "a\\u{1b}[2Jb\\u{7}\\u{9b}c\\u{d}");
    }

    #[test]
    fn one_line_text_escapes_newlines_and_tabs_too() {
        assert!(matches!(terminal_safe_line("plain text"), Cow::Borrowed(_)));
        assert_eq!(terminal_safe_line("a\nb\tc\x1b"), "a\\u{a}b\\u{9}c\\u{1b}");
    }
}
