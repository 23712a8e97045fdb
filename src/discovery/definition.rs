//! The exposed tools as MCP tool definitions: what `tools/list` sends and
//! `rlp.describe_tools` shows, built once (the bundle does not change under
//! a running server).

use serde_json::{Map, Value, json};

use crate::bundle::capability::Capability;
use crate::bundle::tools::{Discoverability, Transport};
use crate::discovery::meta::Reach;
use crate::runtime::Runtime;

/// How a tool's results are answered over MCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ResultShape {
    /// As `structuredContent` (its result schema is an object schema, the
    /// tool's `outputSchema`), and its JSON as the one text block.
    Object,
    /// As `structuredContent` `{"result": …}` (its result schema is not an
    /// object schema), and its JSON as the one text block.
    Wrapped,
    /// A tool of an MCP server without an object result schema: the content
    /// blocks the server answered with, as it sent them; another result (an
    /// outcome envelope's) as its JSON in one text block. No `outputSchema`
    /// is listed, as the server listed none.
    Content,
}

/// One listed tool: its MCP definition, and how its results are answered.
pub(crate) struct Listed {
    /// The tool id.
    pub(crate) id: String,
    /// The MCP definition, as lists send it (its `description` the tool's
    /// `summary` when it has one).
    pub(crate) definition: Value,
    /// The tool's full `description`, when lists send its summary instead.
    pub(crate) full_description: Option<String>,
    /// How its results are answered.
    pub(crate) shape: ResultShape,
    /// The tool's `category`.
    pub(crate) category: Option<String>,
    /// Whether the tool is `core` (listed up front under `--expose core`).
    pub(crate) core: bool,
    /// Whether the tool is long-running (`long_running`): `rlp serve` runs
    /// its calls as tasks for clients that take them.
    pub(crate) long_running: bool,
    /// What its annotations say.
    pub(crate) reach: Reach,
}

impl Listed {
    /// The MCP definition as a description shows it: with the tool's full
    /// `description`.
    pub(crate) fn described(&self) -> Value {
        let mut definition = self.definition.clone();
        if let Some(full) = &self.full_description {
            definition["description"] = Value::String(full.clone());
        }
        definition
    }
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
    // Lists send the summary; a description shows the full text.
    definition.insert("description".into(), json!(tool.summary.as_deref().unwrap_or(&tool.description)));
    let input = if is_object_schema(input) { input.clone() } else { json!({"type": "object"}) };
    definition.insert("inputSchema".into(), input);
    let bridged = matches!(tool.transport, Some(Transport::Mcp { .. }));
    let shape = match (is_object_schema(result), bridged) {
        (true, _) => ResultShape::Object,
        (false, true) => ResultShape::Content,
        (false, false) => ResultShape::Wrapped,
    };
    if shape == ResultShape::Object {
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
        full_description: tool.summary.is_some().then(|| tool.description.clone()),
        definition: Value::Object(definition),
        shape,
        category: tool.category.clone(),
        core: tool.discoverability == Discoverability::Core,
        long_running: tool.long_running,
        reach,
    })
}
