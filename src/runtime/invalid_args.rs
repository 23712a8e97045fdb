//! What a call says when its arguments fail the tool's `input_schema`: each
//! error with the offending value (cut short: arguments may be long), the
//! part of the schema it fails, and a corrected `--args` skeleton built from
//! the schema that keeps the values given that were valid.
//!
//! Arguments are checked before any secret is resolved, so they hold no
//! secret value; they are only bounded.

use serde_json::{Map, Value};

use crate::bundle::pointer::escape_key;
use crate::bundle::schema::{QUOTED_ERRORS, error_location, quoted_errors};
use crate::text::ellipsize;

/// Errors read to tell valid values from invalid ones.
const READ_ERRORS: usize = 256;
/// Characters of a value shown.
const SHOWN_VALUE: usize = 80;
/// Characters of one error line.
const SHOWN_ERROR: usize = 240;
/// Levels of nested objects the skeleton fills in.
const SKELETON_DEPTH: usize = 4;
/// The placeholder of a string without an example.
const PLACEHOLDER: &str = "…";

/// Why arguments fail an input schema, for a person to fix them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Explained {
    /// The errors on one line: `<where>: <what>; …`.
    pub errors: String,
    /// Each error's value and schema location, then the skeleton, one a line.
    pub help: String,
}

/// Explains why `arguments` fail `validator` (compiled from `schema`), or
/// `None` when they do not.
pub(crate) fn explain(validator: &jsonschema::Validator, schema: &Value, arguments: &Value) -> Option<Explained> {
    let errors: Vec<jsonschema::ValidationError<'_>> = validator.iter_errors(arguments).take(READ_ERRORS).collect();
    if errors.is_empty() {
        return None;
    }
    let summary = quoted_errors(errors.iter().map(error_line))?;
    let quoted = &errors[..errors.len().min(QUOTED_ERRORS)];
    let mut help: Vec<String> = quoted
        .iter()
        .map(|e| {
            format!(
                "{}: the value {} fails {} of the input_schema",
                error_location(e),
                shown(e.instance()),
                e.schema_path()
            )
        })
        .collect();
    let invalid: Vec<String> = errors.iter().map(|e| e.instance_path().to_string()).collect();
    let fixed = Skeleton { root: schema, invalid: &invalid }.value(schema, Some(arguments), "", 0);
    help.push(format!("fix --args, e.g. --args {}", shell_quote(&fixed.to_string())));
    Some(Explained { errors: summary, help: help.join("\n        ") })
}

/// `<where>: <message>`, with the value in the message cut short.
fn error_line(error: &jsonschema::ValidationError<'_>) -> String {
    let full = error.instance().to_string();
    let message = error.to_string().replacen(&full, &shown(error.instance()), 1);
    ellipsize(&format!("{}: {message}", error_location(error)), SHOWN_ERROR)
}

/// A value as compact JSON, cut to [`SHOWN_VALUE`] characters.
fn shown(value: &Value) -> String {
    ellipsize(&value.to_string(), SHOWN_VALUE)
}

/// `text` in single quotes for a POSIX shell.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Builds a value that fits a schema from the value given.
struct Skeleton<'a> {
    /// The whole schema, for local `$ref`s.
    root: &'a Value,
    /// The JSON Pointers of the values that fail it.
    invalid: &'a [String],
}

impl Skeleton<'_> {
    /// The value at `at` for `schema`: `given` when nothing at or below it
    /// fails, else a placeholder of the schema's type (an object keeps its
    /// valid properties and gets its required ones).
    fn value(&self, schema: &Value, given: Option<&Value>, at: &str, depth: usize) -> Value {
        let schema = self.resolve(schema, 0);
        if let Some(given) = given
            && self.fits(at)
        {
            return bounded(given).unwrap_or_else(|| placeholder(schema));
        }
        if schema_type(schema) != Some("object") {
            return placeholder(schema);
        }
        if depth >= SKELETON_DEPTH {
            return Value::Object(Map::new());
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        let given = given.and_then(Value::as_object);
        let mut out = Map::new();
        for name in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            let property = properties.and_then(|p| p.get(name)).unwrap_or(&Value::Bool(true));
            let path = format!("{at}/{}", escape_key(name));
            out.insert(name.to_string(), self.value(property, given.and_then(|g| g.get(name)), &path, depth + 1));
        }
        let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
        for (name, value) in given.into_iter().flatten() {
            let declared = properties.is_some_and(|p| p.contains_key(name));
            let path = format!("{at}/{}", escape_key(name));
            if !out.contains_key(name)
                && (declared || !closed)
                && self.fits(&path)
                && let Some(kept) = bounded(value)
            {
                out.insert(name.clone(), kept);
            }
        }
        Value::Object(out)
    }

    /// Whether no error is about the value at `at` or anything below it.
    fn fits(&self, at: &str) -> bool {
        !self.invalid.iter().any(|path| path == at || path.strip_prefix(at).is_some_and(|rest| rest.starts_with('/')))
    }

    /// `schema` with a local `$ref` (`#/…`) followed, a few levels at most;
    /// `anyOf`/`oneOf`/`allOf` stand for their first branch.
    fn resolve<'s>(&'s self, schema: &'s Value, hops: usize) -> &'s Value {
        if hops > SKELETON_DEPTH {
            return schema;
        }
        if let Some(pointer) = schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#'))
            && let Some(target) = self.root.pointer(pointer)
        {
            return self.resolve(target, hops + 1);
        }
        for key in ["anyOf", "oneOf", "allOf"] {
            if schema_type(schema).is_none()
                && let Some(first) = schema.get(key).and_then(Value::as_array).and_then(|b| b.first())
            {
                return self.resolve(first, hops + 1);
            }
        }
        schema
    }
}

/// A given value as the skeleton keeps it: a long string cut short, and
/// `None` for a long array or object.
fn bounded(value: &Value) -> Option<Value> {
    match value {
        Value::String(text) => Some(Value::String(ellipsize(text, SHOWN_VALUE))),
        Value::Array(_) | Value::Object(_) if value.to_string().chars().count() > SHOWN_VALUE => None,
        other => Some(other.clone()),
    }
}

/// The schema's type: `type` (its first non-null one when it is a list),
/// else `object` when it has `properties` or `required`.
fn schema_type(schema: &Value) -> Option<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => Some(t),
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).find(|t| *t != "null"),
        _ if schema.get("properties").is_some() || schema.get("required").is_some() => Some("object"),
        _ => None,
    }
}

/// A value for a schema with nothing given: its `const`, first `enum`
/// value, `default` or first example, else one of its type (a string
/// `"…"`, a number its `minimum` or 0, `false`, `[]`, `{}`).
fn placeholder(schema: &Value) -> Value {
    let first = |key: &str| schema.get(key).and_then(Value::as_array).and_then(|v| v.first()).cloned();
    if let Some(value) = schema.get("const").cloned().or_else(|| first("enum")) {
        return value;
    }
    if let Some(value) = schema.get("default").cloned().or_else(|| first("examples")) {
        return value;
    }
    match schema_type(schema) {
        Some("integer" | "number") => schema.get("minimum").cloned().unwrap_or(Value::from(0)),
        Some("boolean") => Value::Bool(false),
        Some("array") => Value::Array(Vec::new()),
        Some("object") => Value::Object(Map::new()),
        Some("null") => Value::Null,
        _ => Value::String(PLACEHOLDER.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn explained(schema: Value, arguments: Value) -> Explained {
        let validator = jsonschema::draft202012::new(&schema).unwrap();
        explain(&validator, &schema, &arguments).unwrap()
    }

    fn skeleton_line(e: &Explained) -> &str {
        e.help.lines().last().unwrap().trim()
    }

    #[test]
    fn fills_required_properties_by_type_and_keeps_valid_values() {
        let schema = json!({
            "type": "object",
            "required": ["to", "count", "urgent", "tags", "mode", "meta", "size"],
            "properties": {
                "to": {"type": "string"}, "count": {"type": "integer", "minimum": 1},
                "urgent": {"type": "boolean"}, "tags": {"type": "array"},
                "mode": {"enum": ["fast", "slow"]}, "size": {"type": "number"},
                "meta": {"type": "object", "required": ["id"], "properties": {"id": {"$ref": "#/$defs/id"}}},
                "note": {"type": "string"}
            },
            "$defs": {"id": {"type": "string", "default": "x-1"}},
            "additionalProperties": false
        });
        let e = explained(schema, json!({"to": "a@b.c", "count": "two", "note": "hi", "extra": 1}));
        assert_eq!(
            skeleton_line(&e),
            r#"fix --args, e.g. --args '{"to":"a@b.c","count":1,"urgent":false,"tags":[],"mode":"fast","meta":{"id":"x-1"},"size":0,"note":"hi"}'"#
        );
    }

    #[test]
    fn cuts_long_values_short_and_quotes_for_the_shell() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}});
        let long = "x".repeat(500);
        let e = explained(schema, json!({"n": long, "s": "it's"}));
        assert!(
            e.errors.starts_with(r#"/n: "xxx"#) && e.errors.ends_with(r#"x… is not of type "integer""#),
            "{}",
            e.errors
        );
        assert!(e.errors.chars().count() < 120, "{}", e.errors);
        assert_eq!(skeleton_line(&e), r#"fix --args, e.g. --args '{"s":"it'\''s"}'"#);
    }

    #[test]
    fn stops_at_a_bounded_depth() {
        let schema = json!({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "required": ["next"], "properties": {"next": {"$ref": "#/$defs/node"}}}}});
        let e = explained(schema, json!({}));
        assert_eq!(skeleton_line(&e), r#"fix --args, e.g. --args '{"next":{"next":{"next":{"next":{}}}}}'"#);
    }
}
