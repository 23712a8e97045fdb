//! The exposed tools as MCP tool definitions: what `tools/list` sends and
//! `rlp.describe_tools` shows, built once (the bundle does not change under
//! a running server).

use serde_json::{Map, Value, json};

use crate::bundle::capability::Capability;
use crate::bundle::tools::Discoverability;
use crate::discovery::meta::Reach;
use crate::runtime::Runtime;

/// One listed tool: its MCP definition, and whether its results are
/// wrapped (`{"result": …}`) because its result schema is not an object.
pub(crate) struct Listed {
    /// The tool id.
    pub(crate) id: String,
    /// The MCP definition.
    pub(crate) definition: Value,
    /// Whether results are wrapped.
    pub(crate) wrapped: bool,
    /// The tool's `category`.
    pub(crate) category: Option<String>,
    /// Whether the tool is `core` (listed up front under `--expose core`).
    pub(crate) core: bool,
    /// What its annotations say.
    pub(crate) reach: Reach,
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
    let reach = Reach { read_only: !writes, destructive: tool.needs_confirmation(), open_world };
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
            "readOnlyHint": reach.read_only,
            "destructiveHint": reach.destructive,
            "openWorldHint": reach.open_world,
        }),
    );
    Some(Listed {
        id: id.to_string(),
        definition: Value::Object(definition),
        wrapped,
        category: tool.category.clone(),
        core: tool.discoverability == Discoverability::Core,
        reach,
    })
}
