//! The pin of a server's definition of a tool (`definition_blake3`): the
//! BLAKE3 of the RFC 8785 form of its `name`, `description`,
//! `inputSchema`, `outputSchema` and `annotations`, those it has.

use serde_json::{Map, Value};

use crate::event::canonical::canonical_text;

/// The members of a definition the pin covers, each with how messages name
/// it.
pub(crate) const PINNED: &[(&str, &str)] = &[
    ("name", "name"),
    ("description", "description"),
    ("inputSchema", "input schema"),
    ("outputSchema", "output schema"),
    ("annotations", "annotations"),
];

/// The part of `definition` (a tool of `tools/list`, as JSON) that the pin
/// covers.
pub(crate) fn pinned_form(definition: &Value) -> Value {
    let mut kept = Map::new();
    for (key, _) in PINNED {
        if let Some(value) = definition.get(*key).filter(|v| !v.is_null()) {
            kept.insert((*key).to_string(), value.clone());
        }
    }
    Value::Object(kept)
}

/// The pin of `definition`: 64 lower-case hex digits.
pub(crate) fn definition_blake3(definition: &Value) -> String {
    blake3::hash(canonical_text(&pinned_form(definition)).as_bytes()).to_hex().to_string()
}

/// How messages name the members in which `now` differs from `before`
/// (both definitions as JSON), in [`PINNED`] order.
pub(crate) fn changed_parts(before: &Value, now: &Value) -> Vec<&'static str> {
    PINNED
        .iter()
        .filter(|(key, _)| before.get(*key).filter(|v| !v.is_null()) != now.get(*key).filter(|v| !v.is_null()))
        .map(|(_, shown)| *shown)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_pin_covers_the_definition_and_not_the_rest() {
        let tool = json!({"name": "read", "description": "Reads.", "inputSchema": {"type": "object"}, "title": "R"});
        let same =
            json!({"name": "read", "description": "Reads.", "inputSchema": {"type": "object"}, "_meta": {"x": 1}});
        assert_eq!(definition_blake3(&tool), definition_blake3(&same));
        let changed = json!({"name": "read", "description": "Reads all.", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}});
        assert_ne!(definition_blake3(&tool), definition_blake3(&changed));
        assert_eq!(changed_parts(&tool, &changed), vec!["description", "annotations"]);
        assert_eq!(definition_blake3(&tool).len(), 64);
    }
}
