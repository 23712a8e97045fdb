//! The pin of a server's definition of a tool (`definition_blake3`): the
//! BLAKE3 of the RFC 8785 form of its `name`, `description`,
//! `inputSchema`, `outputSchema` and `annotations`, those it has; and the
//! pins of those parts one by one (`definition_parts`), which name what
//! changed.

use serde_json::{Map, Value, json};

use crate::bundle::tools::{Tool, Transport};
use crate::event::canonical::canonical_text;

/// Each part `definition_parts` pins: its key there, its member in a
/// definition, how messages name it.
const PARTS: &[(&str, &str, &str)] = &[
    ("description", "description", "description"),
    ("input_schema", "inputSchema", "input schema"),
    ("output_schema", "outputSchema", "output schema"),
    ("annotations", "annotations", "annotations"),
];

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
fn changed_parts(before: &Value, now: &Value) -> Vec<&'static str> {
    PINNED
        .iter()
        .filter(|(key, _)| before.get(*key).filter(|v| !v.is_null()) != now.get(*key).filter(|v| !v.is_null()))
        .map(|(_, shown)| *shown)
        .collect()
}

/// The digest of one member of a definition (`None` when it has none).
fn member_digest(definition: &Value, member: &str) -> Option<String> {
    let value = definition.get(member).filter(|v| !v.is_null())?;
    Some(blake3::hash(canonical_text(value).as_bytes()).to_hex().to_string())
}

/// The pins of the parts of `definition` (`definition_parts`), those it has.
pub(crate) fn part_digests(definition: &Value) -> Map<String, Value> {
    PARTS
        .iter()
        .filter_map(|(key, member, _)| Some(((*key).to_string(), json!(member_digest(definition, member)?))))
        .collect()
}

/// Whether `text` is the description whose pin `parts` holds.
pub(crate) fn is_pinned_description(parts: &[(String, String)], text: &str) -> bool {
    let digest = member_digest(&json!({"description": text}), "description");
    parts.iter().any(|(key, pinned)| key == "description" && Some(pinned) == digest.as_ref())
}

/// What changed in the server's `definition` of `tool` since it was
/// pinned, in words: by the part pins when tools.json has them, else by
/// comparing with the bundle's own copy.
pub(crate) fn what_changed(tool: &Tool, definition: &Value) -> String {
    let parts = match &tool.transport {
        Some(Transport::Mcp { definition_parts, .. }) => definition_parts.as_slice(),
        _ => &[],
    };
    if !parts.is_empty() {
        let changed: Vec<&str> = PARTS
            .iter()
            .filter(|(key, member, _)| {
                let pinned = parts.iter().find(|(k, _)| k == key).map(|(_, digest)| digest.clone());
                pinned != member_digest(definition, member)
            })
            .map(|(_, _, shown)| *shown)
            .collect();
        return match changed.as_slice() {
            [] => "its name or a part rlp does not pin on its own changed".to_string(),
            parts => format!("its {} changed", parts.join(", ")),
        };
    }
    let copy = json!({
        "name": definition.get("name"),
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "outputSchema": definition.get("outputSchema").and(tool.result_schema.as_ref()),
        "annotations": definition.get("annotations"),
    });
    match changed_parts(&copy, definition).as_slice() {
        [] => "its annotations or another pinned part changed".to_string(),
        parts => format!("it differs from this bundle's copy in: {}", parts.join(", ")),
    }
}

/// How a server's tools differ from what a bundle calls of it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ToolChange<'t> {
    /// The server lists a tool (its name there) no tool of the bundle calls.
    Added(String),
    /// A tool of the bundle calls a tool the server no longer lists.
    Gone(&'t Tool),
    /// The server's definition no longer matches the tool's pin; the parts
    /// that changed, in words.
    Changed(&'t Tool, String),
}

/// How `definitions` (server `server`'s `tools/list`, as JSON) differ from
/// the bundle's `tools` that call it: tools it added, in its order, then
/// the bundle's tools it dropped or changed, in the bundle's order.
pub(crate) fn compare<'t>(server: &str, tools: &'t [Tool], definitions: &[Value]) -> Vec<ToolChange<'t>> {
    let name_of = |d: &Value| d.get("name").and_then(Value::as_str).map(str::to_string);
    let calls: Vec<(&Tool, &str, Option<&str>)> = tools
        .iter()
        .filter_map(|tool| match &tool.transport {
            Some(Transport::Mcp { server: s, tool: name, definition_blake3, .. }) if s == server => {
                Some((tool, name.as_str(), definition_blake3.as_deref()))
            }
            _ => None,
        })
        .collect();
    let mut changes: Vec<ToolChange<'t>> = definitions
        .iter()
        .filter_map(name_of)
        .filter(|name| !calls.iter().any(|(_, called, _)| called == name))
        .map(ToolChange::Added)
        .collect();
    for (tool, name, pin) in calls {
        match (definitions.iter().find(|d| name_of(d).as_deref() == Some(name)), pin) {
            (None, _) => changes.push(ToolChange::Gone(tool)),
            (Some(definition), Some(pin)) if definition_blake3(definition) != pin => {
                changes.push(ToolChange::Changed(tool, what_changed(tool, definition)));
            }
            _ => {}
        }
    }
    changes
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
        let parts = part_digests(&tool);
        assert_eq!(parts.keys().collect::<Vec<_>>(), ["description", "input_schema"]);
        let pinned: Vec<(String, String)> =
            parts.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string())).collect();
        assert!(is_pinned_description(&pinned, "Reads."));
        assert!(!is_pinned_description(&pinned, "Reads all."));
        assert_eq!(definition_blake3(&tool).len(), 64);
    }
}
