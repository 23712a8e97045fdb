//! A small exec tool for rlp bundles, and a template for writing your own.
//!
//! rlp runs it as `greet_tool <blob path> [args…]`. The blob is a JSON file:
//! `{"v": 1, "action": "run" | "schema", "tool": {"id", "arguments", …}, …}`.
//!
//! - `"action": "schema"`: print `{"tools": [...]}`, the tools.json entries
//!   this binary serves (without `transport`: `rlp tools import` fills it in).
//! - `"action": "run"`: run `tool.id` with `tool.arguments` and print the
//!   result as one JSON value, or an outcome envelope
//!   `{"outcome": "error", "message": "…"}` for a failure.
//!
//! Tools: `demo.greet` (`{"name": "Ada"}` → `{"greeting": "Hello, Ada!"}`) and
//! `demo.word_count` (`{"text": "a b c"}` → `{"words": 3}`).
//!
//! Build with `cargo build --example greet_tool`; the binary is
//! `target/debug/examples/greet_tool`.

// An example program: it prints what it finds and runs what it measures.
#![allow(unreachable_pub, clippy::print_stdout, clippy::print_stderr, clippy::disallowed_methods)]

use std::process::ExitCode;

use serde_json::{Value, json};

/// The tools this binary serves, as tools.json entries.
fn definitions() -> Value {
    json!({
        "tools": [
            {
                "id": "demo.greet",
                "description": "Greets someone by name.",
                "input_schema": {
                    "type": "object",
                    "properties": {"name": {"type": "string", "minLength": 1}},
                    "required": ["name"],
                    "additionalProperties": false
                },
                "result_schema": {
                    "type": "object",
                    "properties": {"greeting": {"type": "string"}},
                    "required": ["greeting"]
                }
            },
            {
                "id": "demo.word_count",
                "description": "Counts the words of a text.",
                "input_schema": {
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"],
                    "additionalProperties": false
                },
                "result_schema": {
                    "type": "object",
                    "properties": {"words": {"type": "integer", "minimum": 0}},
                    "required": ["words"]
                }
            }
        ]
    })
}

/// Runs one tool call.
fn run(tool: &str, arguments: &Value) -> Result<Value, String> {
    let text = |key: &str| {
        arguments.get(key).and_then(Value::as_str).ok_or_else(|| format!("argument `{key}` must be a string"))
    };
    match tool {
        "demo.greet" => Ok(json!({"greeting": format!("Hello, {}!", text("name")?)})),
        "demo.word_count" => Ok(json!({"words": text("text")?.split_whitespace().count()})),
        other => Err(format!("unknown tool `{other}`")),
    }
}

fn answer(blob: &Value) -> Result<Value, String> {
    match blob.get("action").and_then(Value::as_str) {
        Some("schema") => Ok(definitions()),
        Some("run") => {
            let tool = blob.pointer("/tool/id").and_then(Value::as_str).ok_or("the blob names no tool")?;
            let arguments = blob.pointer("/tool/arguments").cloned().unwrap_or_else(|| json!({}));
            run(tool, &arguments)
        }
        Some(other) => Err(format!("unsupported action `{other}`")),
        None => Err("the blob has no `action`".into()),
    }
}

fn main() -> ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: greet_tool <blob.json>");
        return ExitCode::from(2);
    };
    let blob: Value = match std::fs::read(&path)
        .map_err(|e| e.to_string())
        .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| format!("the blob is not JSON: {e}")))
    {
        Ok(blob) => blob,
        Err(why) => {
            eprintln!("greet_tool: {why}");
            return ExitCode::from(2);
        }
    };
    match answer(&blob) {
        Ok(result) => {
            println!("{result}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            println!("{}", json!({"outcome": "error", "message": message}));
            ExitCode::from(1)
        }
    }
}
