//! What a finished process printed.

use std::process::Output;

use serde_json::Value;

/// The exit code, or -1 for a process a signal ended.
pub fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

/// Stdout, which must be UTF-8.
pub fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap_or_else(|e| panic!("stdout is not UTF-8 ({e}): {out:?}"))
}

/// Stderr, invalid UTF-8 replaced.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Stdout as a JSON document.
pub fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// The status and both streams, for an assertion's message.
pub fn text(out: &Output) -> String {
    format!("status {:?}\n--- stdout\n{}--- stderr\n{}", out.status, String::from_utf8_lossy(&out.stdout), stderr(out))
}

/// Asserts that `text` holds `needle`, showing both if not.
#[track_caller]
pub fn assert_contains(text: &str, needle: &str) {
    assert!(text.contains(needle), "expected {needle:?} in:\n{text}");
}
