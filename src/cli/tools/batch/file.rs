//! The file of `rlp tools call --batch`: one call a line, every line checked
//! before any call runs.

use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::bundle::value::strip_position;
use crate::cli::exit::CliError;
use crate::cli::tools::call::read_input;
use crate::text::json_kind;

/// Most bytes a batch file may hold.
const MAX_BATCH_BYTES: u64 = 64 << 20;

/// Most calls one batch may make.
const MAX_CALLS: usize = 10_000;

/// A call as a line holds it.
const EXPECTED: &str = "{\"tool\": \"<id>\", \"args\": {…}}";

/// One call of a batch.
#[derive(Debug, PartialEq)]
pub(super) struct BatchCall {
    /// Its line in the file, from 1.
    pub(super) line: usize,
    /// The tool id.
    pub(super) tool: String,
    /// The arguments (an object).
    pub(super) args: Value,
}

/// One line as it must be written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    tool: String,
    #[serde(default)]
    args: Map<String, Value>,
}

/// Reads the batch at `path` (`-`: standard input) and checks every line;
/// blank lines are skipped. Any line that is not a call stops it all (exit
/// 2), naming `FILE:LINE:COLUMN`.
pub(super) fn read(path: &Path) -> Result<Vec<BatchCall>, CliError> {
    let name = if path == Path::new("-") { "<stdin>".to_string() } else { path.display().to_string() };
    let bytes =
        read_input(path, MAX_BATCH_BYTES, "--batch", &format!("the batch {name}")).map_err(|e| match e.help {
            None => e.with_help("pass a JSON Lines file, or - to read the calls from standard input"),
            Some(_) => e,
        })?;
    parse(&bytes, &name)
}

/// The calls of a batch's `bytes`, `name` naming it in errors.
fn parse(bytes: &[u8], name: &str) -> Result<Vec<BatchCall>, CliError> {
    let mut calls = Vec::new();
    for (index, text) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = index + 1;
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if calls.len() == MAX_CALLS {
            return Err(CliError::usage(format!("{name}:{line}: a batch makes at most {MAX_CALLS} calls"))
                .with_help(format!("split the calls into files of at most {MAX_CALLS} lines; no call was made")));
        }
        let parsed = parse_line(text).map_err(|(column, message)| {
            CliError::usage(format!("{name}:{line}:{column}: {message}"))
                .with_help(format!("write one call a line, {EXPECTED} (\"args\" may be left out); no call was made"))
        })?;
        calls.push(BatchCall { line, tool: parsed.tool, args: Value::Object(parsed.args) });
    }
    Ok(calls)
}

/// One non-blank line as a call, or the column where it goes wrong and why.
fn parse_line(text: &[u8]) -> Result<Line, (usize, String)> {
    let start = text.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(0);
    if text.get(start) == Some(&b'{') {
        return serde_json::from_slice(text).map_err(|e| located(&e));
    }
    // Not an object (which serde would also take as a sequence of fields):
    // a syntax error where there is one, else what it is.
    match serde_json::from_slice::<Value>(text) {
        Err(e) => Err(located(&e)),
        Ok(value) => Err((start + 1, format!("expected an object {EXPECTED}, found {}", json_kind(&value)))),
    }
}

/// A JSON error's column, and its message without the position serde_json appends.
fn located(e: &serde_json::Error) -> (usize, String) {
    (e.column(), strip_position(&e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The message of the error `text` makes.
    fn error(text: &str) -> String {
        let e = parse(text.as_bytes(), "b.jsonl").unwrap_err();
        assert_eq!(e.exit, crate::cli::exit::Exit::Usage);
        e.message
    }

    #[test]
    fn reads_calls_and_skips_blank_lines() {
        let calls =
            parse(b"{\"tool\": \"a\"}\n\n  \r\n{\"args\": {\"x\": 1}, \"tool\": \"b\"}\r\n", "b.jsonl").unwrap();
        assert_eq!(
            calls,
            [
                BatchCall { line: 1, tool: "a".into(), args: json!({}) },
                BatchCall { line: 4, tool: "b".into(), args: json!({"x": 1}) },
            ]
        );
        assert!(parse(b"", "b.jsonl").unwrap().is_empty());
    }

    #[test]
    fn names_the_line_and_column_of_what_is_wrong() {
        assert_eq!(error("{\"tool\": \"a\"}\n{\"tool\": \"a\",}"), "b.jsonl:2:14: trailing comma");
        assert_eq!(
            error("  [\"a\", {}]"),
            "b.jsonl:1:3: expected an object {\"tool\": \"<id>\", \"args\": {…}}, found an array"
        );
        assert_eq!(error("nope"), "b.jsonl:1:2: expected ident");
        assert_eq!(error("{\"args\": {}}"), "b.jsonl:1:12: missing field `tool`");
        assert_eq!(error("{\"tool\": 7}"), "b.jsonl:1:10: invalid type: integer `7`, expected a string");
        assert_eq!(error("{\"tool\": \"a\", \"args\": []}"), "b.jsonl:1:22: invalid type: sequence, expected a map");
        assert_eq!(
            error("{\"tool\": \"a\", \"argz\": {}}"),
            "b.jsonl:1:20: unknown field `argz`, expected `tool` or `args`"
        );
        assert_eq!(error("{\"tool\": \"a\"} x"), "b.jsonl:1:15: trailing characters");
    }

    #[test]
    fn bounds_the_number_of_calls() {
        let text = "{\"tool\": \"a\"}\n".repeat(MAX_CALLS + 1);
        assert_eq!(error(&text), format!("b.jsonl:{}: a batch makes at most {MAX_CALLS} calls", MAX_CALLS + 1));
    }
}
