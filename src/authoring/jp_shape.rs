//! Seed 000's own shape of a `schema` answer (JP RFD D07): each tool as
//! `{name, summary, description, parameters}`, where `parameters` maps each
//! parameter's name to its JSON-Schema-like config (`type`, `summary`,
//! `description`, `default`, `enum`, `items`, …) and a parameter without a
//! `default` is required. [`to_entry`] reads one into a tools.json entry:
//!
//! - `name` is the `id`;
//! - `summary` is the `description` (what the model is sent; the seed's
//!   longer `description` follows it after a blank line);
//! - `parameters` is the `input_schema`: an object schema with one property
//!   per parameter (its `summary` as its `description`), `required` for each
//!   without a `default`, and no other properties;
//! - the seed states no result: the `result_schema` is `{}` (any JSON), as
//!   for an MCP tool without an `outputSchema`.
//!
//! An entry that has an `id` is rlp's own shape and is left as it is.

use serde_json::{Map, Value, json};

/// `entry` as a tools.json entry: mapped from the seed's shape when it has
/// a `name` and no `id`; else as it is.
pub(crate) fn to_entry(entry: Map<String, Value>) -> Map<String, Value> {
    if entry.contains_key("id") || !entry.get("name").is_some_and(Value::is_string) {
        return entry;
    }
    let mut mapped = Map::new();
    let text = |key: &str| entry.get(key).and_then(Value::as_str).map(str::trim).filter(|t| !t.is_empty());
    mapped.insert("id".into(), entry["name"].clone());
    let description = match (text("summary"), text("description")) {
        (Some(summary), Some(details)) if summary != details => format!("{summary}\n\n{details}"),
        (Some(one), _) | (None, Some(one)) => one.to_string(),
        (None, None) => String::new(),
    };
    if !description.is_empty() {
        mapped.insert("description".into(), Value::String(description));
    }
    if let Some(parameters) = entry.get("parameters") {
        mapped.insert("input_schema".into(), input_schema(parameters));
    }
    mapped.insert("result_schema".into(), entry.get("result_schema").cloned().unwrap_or_else(|| json!({})));
    // Anything else the binary states (rlp's own fields) is kept.
    for (key, value) in entry {
        if !matches!(key.as_str(), "name" | "summary" | "description" | "parameters") {
            mapped.entry(key).or_insert(value);
        }
    }
    mapped
}

/// The input schema of the seed's `parameters` map (a JSON Schema object
/// as given is taken as it is).
fn input_schema(parameters: &Value) -> Value {
    let Some(parameters) = parameters.as_object() else { return parameters.clone() };
    if parameters.get("type").is_some_and(|t| t == "object") {
        return Value::Object(parameters.clone());
    }
    let mut properties = Map::new();
    let mut required = Vec::new();
    for (name, config) in parameters {
        let mut schema = config.as_object().cloned().unwrap_or_default();
        if let Some(summary) = schema.remove("summary") {
            schema.entry("description").or_insert(summary);
        }
        if !schema.contains_key("default") {
            required.push(Value::String(name.clone()));
        }
        properties.insert(name.clone(), Value::Object(schema));
    }
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn the_seeds_shape_becomes_a_tools_json_entry() {
        let seed = map(json!({
            "name": "cargo_check",
            "summary": "Run cargo check for the given package.",
            "description": "Longer description with details...",
            "parameters": {
                "package": {"type": "string", "summary": "Package to check."},
                "release": {"type": "boolean", "default": false, "description": "Check in release mode."}
            }
        }));
        assert_eq!(
            Value::Object(to_entry(seed)),
            json!({
                "id": "cargo_check",
                "description": "Run cargo check for the given package.\n\nLonger description with details...",
                "input_schema": {
                    "type": "object",
                    "properties": {
                        "package": {"type": "string", "description": "Package to check."},
                        "release": {"type": "boolean", "default": false, "description": "Check in release mode."}
                    },
                    "required": ["package"],
                    "additionalProperties": false
                },
                "result_schema": {}
            })
        );
    }

    #[test]
    fn rlps_own_shape_and_full_schemas_are_kept() {
        let own = map(json!({"id": "a.b", "name": "x", "description": "d"}));
        assert_eq!(to_entry(own.clone()), own);
        let full = map(json!({"name": "t", "summary": "s", "parameters": {"type": "object", "properties": {}}}));
        assert_eq!(
            Value::Object(to_entry(full)),
            json!({"id": "t", "description": "s", "input_schema": {"type": "object", "properties": {}}, "result_schema": {}})
        );
    }
}
