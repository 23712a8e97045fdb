//! Structural differences between two JSON values, as JSON Pointer paths
//! (RFC 6901): what was added, removed or changed.
//!
//! Object members are compared by key (in sorted key order, so the list does
//! not depend on how either side ordered its keys); arrays element by element,
//! with extra elements reported as added or removed at their index. Numbers
//! are equal when they denote the same value (`1` and `1.0`). A call's result
//! is compared together with the content blocks an MCP server sent beside it
//! ([`result_diff`]).

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;

use crate::event::placeholder::is_placeholder;

/// What happened at a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeOp {
    /// Present only in the replayed value.
    Added,
    /// Present only in the recorded value.
    Removed,
    /// Present in both, with different values.
    Changed,
}

impl ChangeOp {
    /// `added`, `removed` or `changed`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeOp::Added => "added",
            ChangeOp::Removed => "removed",
            ChangeOp::Changed => "changed",
        }
    }
}

/// One difference.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    /// What happened.
    pub op: ChangeOp,
    /// JSON Pointer of the value (`""` is the whole value).
    pub path: String,
    /// The recorded value (absent for `added`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded: Option<Value>,
    /// The replayed value (absent for `removed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replayed: Option<Value>,
}

/// The differences found, the first `limit` of them listed.
#[derive(Clone, Debug, PartialEq, Default)]
pub(crate) struct Diff {
    /// The differences, in document order.
    pub changes: Vec<Change>,
    /// How many more were found beyond the limit.
    pub more: u64,
}

impl Diff {
    /// Whether the two values are equal.
    pub(crate) fn is_empty(&self) -> bool {
        self.changes.is_empty() && self.more == 0
    }
}

/// Whether a change is only a placeholder of a redacted export on one side
/// (which stands for any value).
pub(crate) fn is_placeholder_change(change: &Change) -> bool {
    let placeholder = |value: &Option<Value>| matches!(value, Some(Value::String(text)) if is_placeholder(text));
    placeholder(&change.recorded) || placeholder(&change.replayed)
}

/// Appends one reference token to a JSON Pointer (`~` → `~0`, `/` → `~1`).
pub(crate) fn push_token(path: &mut String, token: &str) {
    path.push('/');
    for c in token.chars() {
        match c {
            '~' => path.push_str("~0"),
            '/' => path.push_str("~1"),
            c => path.push(c),
        }
    }
}

/// Whether two JSON values are equal (numbers by value).
pub(crate) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                x == y
            } else if let (Some(x), Some(y)) = (x.as_u64(), y.as_u64()) {
                x == y
            } else {
                x.as_f64() == y.as_f64()
            }
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

struct Collector {
    diff: Diff,
    limit: usize,
}

impl Collector {
    fn push(&mut self, op: ChangeOp, path: &str, recorded: Option<&Value>, replayed: Option<&Value>) {
        if self.diff.changes.len() < self.limit {
            self.diff.changes.push(Change {
                op,
                path: path.to_string(),
                recorded: recorded.cloned(),
                replayed: replayed.cloned(),
            });
        } else {
            self.diff.more += 1;
        }
    }

    fn walk(&mut self, path: &mut String, recorded: &Value, replayed: &Value) {
        match (recorded, replayed) {
            (Value::Object(a), Value::Object(b)) => {
                let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
                for key in keys {
                    self.walk_at(path, key, a.get(key), b.get(key));
                }
            }
            (Value::Array(a), Value::Array(b)) => {
                for i in 0..a.len().max(b.len()) {
                    self.walk_at(path, &i.to_string(), a.get(i), b.get(i));
                }
            }
            (x, y) if !json_equal(x, y) => self.push(ChangeOp::Changed, path, Some(x), Some(y)),
            _ => {}
        }
    }

    /// Compares what each side holds at `path` + `/token` (absent on one
    /// side: added or removed).
    fn walk_at(&mut self, path: &mut String, token: &str, recorded: Option<&Value>, replayed: Option<&Value>) {
        let len = path.len();
        push_token(path, token);
        match (recorded, replayed) {
            (Some(x), Some(y)) => self.walk(path, x, y),
            (Some(x), None) => self.push(ChangeOp::Removed, path, Some(x), None),
            (None, Some(y)) => self.push(ChangeOp::Added, path, None, Some(y)),
            (None, None) => {}
        }
        path.truncate(len);
    }
}

/// The differences from `recorded` to `replayed`, at most `limit` listed.
pub(crate) fn diff(recorded: &Value, replayed: &Value, limit: usize) -> Diff {
    let mut collector = Collector { diff: Diff::default(), limit };
    collector.walk(&mut String::new(), recorded, replayed);
    collector.diff
}

/// A successful call's answer as its caller got it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Answer<'a> {
    /// The result.
    pub result: &'a Value,
    /// The content blocks an MCP server (or a hook) gave beside it.
    pub content: Option<&'a [Value]>,
    /// The notes of after-call hooks.
    pub annotations: &'a [String],
}

impl<'a> Answer<'a> {
    /// A result with content blocks and no notes.
    pub(crate) fn of(result: &'a Value, content: Option<&'a [Value]>) -> Self {
        Answer { result, content, annotations: &[] }
    }
}

/// The differences between two answers of a call: the result's paths as
/// [`diff`] gives them, then the content's under `/content`, then the
/// hooks' notes under `/annotations`; at most `limit` listed in all.
pub(crate) fn result_diff(recorded: Answer<'_>, replayed: Answer<'_>, limit: usize) -> Diff {
    let mut collector = Collector { diff: Diff::default(), limit };
    let mut path = String::new();
    collector.walk(&mut path, recorded.result, replayed.result);
    let blocks = |content: Option<&[Value]>| content.map(|blocks| Value::Array(blocks.to_vec()));
    collector.walk_at(&mut path, "content", blocks(recorded.content).as_ref(), blocks(replayed.content).as_ref());
    let notes = |notes: &[String]| (!notes.is_empty()).then(|| serde_json::json!(notes));
    collector.walk_at(
        &mut path,
        "annotations",
        notes(recorded.annotations).as_ref(),
        notes(replayed.annotations).as_ref(),
    );
    collector.diff
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(d: &Diff) -> Vec<String> {
        d.changes.iter().map(|c| format!("{} {}", c.op.as_str(), c.path)).collect()
    }

    #[test]
    fn reports_added_removed_and_changed_paths() {
        let recorded = json!({"temp": 21, "city": "Oslo", "tags": ["a", "b"], "a/b": {"~x": 1}, "gone": true});
        let replayed = json!({"tags": ["a", "c", "d"], "temp": 21.0, "city": "Bergen", "a/b": {"~x": 2}, "new": null});
        let d = diff(&recorded, &replayed, 10);
        assert_eq!(
            paths(&d),
            ["changed /a~1b/~0x", "changed /city", "removed /gone", "added /new", "changed /tags/1", "added /tags/2"]
        );
        assert_eq!(d.changes[1].recorded, Some(json!("Oslo")));
        assert_eq!(d.changes[1].replayed, Some(json!("Bergen")));
        assert!(diff(&recorded, &recorded, 10).is_empty());
        assert_eq!(paths(&diff(&json!(1), &json!("1"), 10)), ["changed "]);
        let limited = diff(&recorded, &replayed, 2);
        assert_eq!((limited.changes.len(), limited.more), (2, 4));
    }

    #[test]
    fn content_blocks_are_compared_under_content_after_the_result() {
        let text = |t: &str| json!({"type": "text", "text": t});
        let (old, new) = ([text("a"), text("b")], [text("a"), text("c"), text("d")]);
        let (one, two) = (json!({"n": 1}), json!({"n": 2}));
        let d = result_diff(Answer::of(&one, Some(&old)), Answer::of(&two, Some(&new)), 10);
        assert_eq!(paths(&d), ["changed /n", "changed /content/1/text", "added /content/2"]);
        assert!(result_diff(Answer::of(&one, Some(&old)), Answer::of(&one, Some(&old)), 10).is_empty());
        let gone = result_diff(Answer::of(&one, Some(&old)), Answer::of(&one, None), 10);
        assert_eq!(paths(&gone), ["removed /content"]);
        assert_eq!(gone.changes[0].recorded, Some(json!([text("a"), text("b")])));
        assert_eq!(paths(&result_diff(Answer::of(&one, None), Answer::of(&one, Some(&new)), 10)), ["added /content"]);
        let limited = result_diff(Answer::of(&one, Some(&old)), Answer::of(&two, Some(&new)), 1);
        assert_eq!((limited.changes.len(), limited.more), (1, 2));
        let noted = ["redacted".to_string()];
        let annotated = Answer { annotations: &noted, ..Answer::of(&one, None) };
        assert_eq!(paths(&result_diff(Answer::of(&one, None), annotated, 10)), ["added /annotations"]);
    }

    #[test]
    fn numbers_compare_by_value() {
        assert!(json_equal(&json!(1), &json!(1.0)));
        assert!(json_equal(&json!({"a": [1, 2]}), &json!({"a": [1.0, 2]})));
        assert!(!json_equal(&json!(u64::MAX), &json!(-1)));
        assert!(!json_equal(&json!({"a": 1}), &json!({"b": 1})));
    }
}
