//! `tools/list`: the exposed tools as MCP tool definitions, built once at
//! start (the bundle does not change under a running server).

use serde_json::{Map, Value, json};

use crate::bundle::capability::Capability;
use crate::runtime::Runtime;

/// One listed tool: its MCP definition, and whether its results are
/// wrapped (`{"result": …}`) because its result schema is not an object.
pub(crate) struct Listed {
    pub(crate) definition: Value,
    pub(crate) wrapped: bool,
}

/// Whether `schema` describes objects only (`"type": "object"`).
fn is_object_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}

/// The exposed tools of `runtime`, sorted by id.
pub(crate) fn list(runtime: &Runtime) -> Vec<Listed> {
    let mut ids: Vec<&String> = runtime.tool_ids().iter().filter(|id| runtime.is_exposed(id)).collect();
    ids.sort();
    ids.into_iter().filter_map(|id| listed(runtime, id)).collect()
}

fn listed(runtime: &Runtime, id: &str) -> Option<Listed> {
    let tool = runtime.tool(id)?;
    let (input, result) = runtime.resolved_schemas(id)?;
    let caps = tool.required_capabilities();
    let writes = caps
        .iter()
        .any(|cap| matches!(cap, Capability::Exec | Capability::Fs(_) | Capability::Net(_) | Capability::KbWrite(_)));
    let open_world = caps.iter().any(|cap| matches!(cap, Capability::Net(_)));
    let mut definition = Map::new();
    definition.insert("name".into(), json!(id));
    definition.insert("description".into(), json!(tool.description));
    let input = if is_object_schema(input) { input.clone() } else { json!({"type": "object"}) };
    definition.insert("inputSchema".into(), input);
    let wrapped = !is_object_schema(result);
    if !wrapped {
        definition.insert("outputSchema".into(), result.clone());
    }
    definition.insert(
        "annotations".into(),
        json!({
            "readOnlyHint": !writes,
            "destructiveHint": tool.needs_confirmation(),
            "openWorldHint": open_world,
        }),
    );
    Some(Listed { definition: Value::Object(definition), wrapped })
}
