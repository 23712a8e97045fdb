//! Output conventions: formats, colour, JSON on stdout.

use std::borrow::Cow;
use std::io::{IsTerminal, Write};

use clap::ValueEnum;

/// `--format human|json` for commands that report something.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Readable text.
    Human,
    /// One stable JSON document (or JSON Lines where documented).
    Json,
}

/// `--color auto|always|never`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Default)]
pub enum ColorChoice {
    /// Colour when stderr is a terminal and `NO_COLOR` is unset.
    #[default]
    Auto,
    /// Always colour.
    Always,
    /// Never colour.
    Never,
}

impl ColorChoice {
    /// Whether to colour output written to a stream that is (or is not) a terminal.
    pub fn enabled(self, is_terminal: bool) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }

    /// Whether to colour stderr.
    pub fn stderr(self) -> bool {
        self.enabled(std::io::stderr().is_terminal())
    }

    /// Whether to colour stdout.
    pub fn stdout(self) -> bool {
        self.enabled(std::io::stdout().is_terminal())
    }
}

/// Prints a JSON document (pretty, newline-terminated) to stdout.
pub fn print_json(value: &serde_json::Value) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)
}

/// Prints what a command did: `human` as lines of text, or `json` as one
/// document, as `format` asks.
pub fn report(format: Format, human: &str, json: &serde_json::Value) -> std::io::Result<()> {
    match format {
        Format::Json => print_json(json),
        Format::Human => writeln!(std::io::stdout().lock(), "{human}"),
    }
}

/// Whether standard input is a terminal a person can answer prompts on.
pub fn stdin_is_terminal() -> bool {
    std::io::stdin().is_terminal()
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
