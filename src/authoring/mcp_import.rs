//! `rlp tools import --mcp` and `--mcp-config`: put MCP servers under a
//! bundle's policy.
//!
//! Each server is written to `servers` in tools.json, started (a stdio
//! server in the kernel sandbox with the grants given) and asked for its
//! tools (every page of `tools/list`); each tool becomes an entry with id
//! `<server>.<tool>` (lower-cased, other characters made `_`; `--bare-ids`:
//! `<tool>` alone, for a host that calls the server's tools by name), its
//! description, `input_schema`, `result_schema` from `outputSchema` (else
//! `{}`: content blocks, or what an outcome envelope says), `requires_confirmation` from its
//! annotations (false under `readOnlyHint`, else `destructiveHint`, which
//! MCP defaults to true), `category` the server's name (for `--expose
//! core`), the server's capabilities and secrets, and the pin of its
//! definition. Re-import merges as `--exec` import does: the server wins for
//! the transport (with the pin) and the schemas, tools.json for the
//! author's fields; tools the server no longer lists are kept and reported.

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::authoring::AuthoringError;
use crate::authoring::add::{GrantOutcome, commit, plan_grants};
use crate::authoring::import::{Fields, merge};
use crate::authoring::target::BundleTarget;
use crate::authoring::tools_file::{Change, ToolsDoc};
use crate::bundle::capability::SecretId;
use crate::bundle::diag::{Diagnostics, Severity};
use crate::bundle::tools::{MAX_MCP_TOOL_NAME, ToolsFile, is_valid_mcp_tool_name};
use crate::event::ServerRecord;
use crate::runtime::mcp::{list_tools, pin};
use crate::sandbox::SandboxMode;
use crate::secrets::{Resolution, SecretResolver, SecretValue};

/// One server to import: its name and its `servers` entry.
#[derive(Clone, Debug)]
pub(crate) struct McpSource {
    /// The server's name (a key of `servers`, the prefix of its tools' ids).
    pub name: String,
    /// Its entry, as tools.json writes it.
    pub entry: Map<String, Value>,
    /// Whether its tools' ids are their names on the server alone, without
    /// the `<server>.` prefix.
    pub bare_ids: bool,
}

/// What importing one server did.
#[derive(Debug)]
pub(crate) struct ServerImported {
    /// The server's name.
    pub name: String,
    /// Who it said it is.
    pub record: ServerRecord,
    /// Each of its tools, with what happened to it.
    pub changes: Vec<(String, Change, Fields)>,
    /// Its tools in tools.json that it no longer lists (kept).
    pub gone: Vec<String>,
    /// Names it listed that no tool of a bundle can have (left out).
    pub unnamed: Vec<String>,
}

/// What an import did.
#[derive(Debug)]
pub(crate) struct McpImported {
    /// Per server.
    pub servers: Vec<ServerImported>,
    /// Grants outcome.
    pub grants: GrantOutcome,
}

/// Imports `sources` into the bundle (all of them, or nothing is written).
pub(crate) fn import_mcp(
    target: &BundleTarget,
    sources: &[McpSource],
    grant: bool,
    replace: bool,
    mode: SandboxMode,
    secrets: &dyn SecretResolver,
) -> Result<McpImported, AuthoringError> {
    let mut tools = ToolsDoc::read(&target.dir)?;
    let root = target.dir.canonicalize().unwrap_or_else(|_| target.dir.clone());
    let mut servers = Vec::new();
    let mut merged = Vec::new();
    let mut produced: Vec<(String, String)> = Vec::new();
    for source in sources {
        let entry = match (tools.server(&source.name), source.entry.is_empty()) {
            (Some(old), _) => merge(old, source.entry.clone(), true).0,
            (None, false) => source.entry.clone(),
            (None, true) => {
                return Err(AuthoringError::usage(format!(
                    "tools.json declares no server `{}`: give it as `-- COMMAND [ARGS…]` or --url URL",
                    source.name
                ))
                .with_help(format!(
                    "e.g. rlp tools import {} --mcp {} -- /usr/bin/python3 -m mcp_server_time",
                    target.dir.display(),
                    source.name
                )));
            }
        };
        let server = read_server(&source.name, &entry)?;
        let values = resolve_secrets(&server.secrets.iter().map(|(_, id)| id.clone()).collect::<Vec<_>>(), secrets)?;
        let (record, definitions) = list_tools(&server, &root, mode, &values).map_err(|why| {
            AuthoringError::failed(format!(
                "cannot list the tools of the MCP server `{}`: {why}; {} is unchanged",
                source.name,
                target.dir.display()
            ))
            .with_help("check the command or URL by hand; a stdio server runs sandboxed: grant what it reads with --cap fs:<dir> (and net:<host> for what it downloads)")
        })?;
        refuse_secrets(&source.name, &record, &definitions, &values, &target.dir)?;
        tools.set_server(&source.name, entry.clone());
        let declared = declared_needs(&entry);
        let mut changes = Vec::new();
        let mut listed = Vec::new();
        let mut unnamed = Vec::new();
        for definition in &definitions {
            let name = definition.get("name").and_then(Value::as_str).unwrap_or_default();
            if !is_valid_mcp_tool_name(name) {
                unnamed.push(crate::text::ellipsize(name, MAX_MCP_TOOL_NAME));
                continue;
            }
            let fresh = tool_entry(&source.name, source.bare_ids, definition, &declared);
            let id = fresh.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
            if let Some(other) = produced.iter().find(|(made, _)| *made == id).map(|(_, from)| from) {
                return Err(AuthoringError::usage(format!(
                    "the tool id `{id}` would be given twice (servers `{other}` and `{}`); {} is unchanged",
                    source.name,
                    target.dir.display()
                ))
                .with_help(
                    "import these servers without --bare-ids, so each tool's id starts with its server's name",
                ));
            }
            produced.push((id.clone(), source.name.clone()));
            listed.push(id.clone());
            let (entry, fields) = match tools.get(&id) {
                Some(old) => merge_tool(old, fresh, replace),
                None => (fresh, Fields::default()),
            };
            changes.push((id.clone(), tools.upsert(entry), fields));
            if let Some(now) = tools.get(&id) {
                merged.push(now.clone());
            }
        }
        let gone = tools
            .entries()
            .filter(|e| e.get("transport").and_then(|t| t.get("server")).and_then(Value::as_str) == Some(&source.name))
            .filter_map(|e| e.get("id").and_then(Value::as_str))
            .filter(|id| !listed.iter().any(|l| l == id))
            .map(str::to_string)
            .collect();
        servers.push(ServerImported { name: source.name.clone(), record, changes, gone, unnamed });
    }
    let (grants, policy) = plan_grants(target, &merged, grant)?;
    commit(target, &tools, policy.as_ref(), &[])?;
    Ok(McpImported { servers, grants })
}

/// Merges a server's `fresh` entry for a tool into its `old` one, as
/// `--exec` import does ([`merge`]), except for the description: one the
/// author did not edit (it is still the one pinned in `definition_parts`)
/// follows the server.
fn merge_tool(old: &Map<String, Value>, fresh: Map<String, Value>, replace: bool) -> (Map<String, Value>, Fields) {
    let pinned: Vec<(String, String)> = old
        .get("transport")
        .and_then(|t| t.get("definition_parts"))
        .and_then(Value::as_object)
        .map(|parts| parts.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
        .unwrap_or_default();
    let unedited =
        old.get("description").and_then(Value::as_str).is_some_and(|d| pin::is_pinned_description(&pinned, d));
    let order: Vec<String> = fresh.keys().cloned().collect();
    let description = fresh.get("description").cloned();
    let (mut merged, mut fields) = merge(old, fresh, replace);
    if let (true, Some(description)) = (unedited, description)
        && fields.kept.iter().any(|k| k == "description")
    {
        merged.insert("description".into(), description);
        fields.kept.retain(|k| k != "description");
        fields.updated = order.into_iter().filter(|k| k == "description" || fields.updated.contains(k)).collect();
    }
    (merged, fields)
}

/// Reads a server entry the way the bundle reader does; an error names what
/// is wrong with it.
fn read_server(name: &str, entry: &Map<String, Value>) -> Result<crate::bundle::servers::Server, AuthoringError> {
    let document = json!({"version": 1, "servers": {name: entry}, "tools": []});
    let mut diags = Diagnostics::new(crate::bundle::tools::TOOLS_FILE);
    let file = ToolsFile::from_value(&document, &mut diags);
    let errors: Vec<String> =
        diags.into_findings().into_iter().filter(|f| f.severity == Severity::Error).map(|f| f.message).collect();
    if !errors.is_empty() {
        return Err(AuthoringError::usage(format!("the server `{name}` cannot be written: {}", errors.join("; ")))
            .with_help("fix the flags (or the host configuration) that describe it; nothing was written"));
    }
    file.and_then(|f| f.servers.into_iter().next())
        .ok_or_else(|| AuthoringError::usage(format!("the server `{name}` cannot be read back")))
}

/// The values of the server's secrets, for its env or headers while it is
/// asked.
fn resolve_secrets(
    ids: &[SecretId],
    secrets: &dyn SecretResolver,
) -> Result<Vec<(SecretId, SecretValue)>, AuthoringError> {
    ids.iter()
        .map(|id| match secrets.resolve(id) {
            Ok(Resolution::Found { value, .. }) => Ok((id.clone(), value)),
            Ok(Resolution::Missing { why, how }) => {
                Err(AuthoringError::failed(format!("the server needs secret `{id}`: {why}")).with_help(how))
            }
            Err(e) => Err(AuthoringError::failed(e.message).with_help(e.help)),
        })
        .collect()
}

/// Refuses an import where what the server said of itself or its tools
/// holds the value of one of the secrets it was given (any spelling the
/// runtime scrubs): tools.json is committed, signed and packed, and the
/// summary is printed, so a secret written there is out for good. Names
/// the tool (or the server's own record), never the value.
fn refuse_secrets(
    server: &str,
    record: &ServerRecord,
    definitions: &[Value],
    values: &[(SecretId, SecretValue)],
    bundle: &Path,
) -> Result<(), AuthoringError> {
    let scrubber = crate::runtime::scrub::Scrubber::new(values.iter().map(|(_, value)| value));
    if scrubber.is_empty() {
        return Ok(());
    }
    let holds = |text: &str| matches!(scrubber.scrub(text), std::borrow::Cow::Owned(_));
    let said_of_itself = [Some(&record.name), record.version.as_ref(), record.protocol.as_ref()];
    let named = if said_of_itself.into_iter().flatten().any(|text| holds(text)) {
        Some("its serverInfo".to_string())
    } else {
        definitions.iter().find(|definition| holds(&definition.to_string())).map(|definition| {
            let name = definition.get("name").and_then(Value::as_str).unwrap_or_default();
            format!("its definition of `{}`", crate::text::terminal_safe_line(name))
        })
    };
    match named {
        None => Ok(()),
        Some(named) => Err(AuthoringError::failed(format!(
            "the MCP server `{server}` put the value of a secret it was given in {named}; rlp writes no secret into tools.json, and {} is unchanged",
            bundle.display()
        ))
        .with_help("the server echoes its environment or headers into what it lists: fix the server, or import it without that secret")),
    }
}

/// What each tool of a server declares: the server's capabilities (with
/// what its transport implies) and its secrets.
fn declared_needs(entry: &Map<String, Value>) -> (Vec<Value>, Vec<Value>) {
    let mut capabilities: Vec<Value> = entry.get("capabilities").and_then(Value::as_array).cloned().unwrap_or_default();
    let implied = if entry.contains_key("url") {
        entry
            .get("url")
            .and_then(Value::as_str)
            .and_then(|url| url::Url::parse(url).ok())
            .and_then(|url| Some(format!("net:{}:{}", url.host_str()?, url.port_or_known_default()?)))
    } else {
        Some("exec".to_string())
    };
    if let Some(implied) = implied.map(Value::String)
        && !capabilities.contains(&implied)
    {
        capabilities.insert(0, implied);
    }
    let secrets = entry.get("secrets").and_then(Value::as_array).cloned().unwrap_or_default();
    (capabilities, secrets)
}

/// The tools.json entry of one tool a server lists.
fn tool_entry(
    server: &str,
    bare_ids: bool,
    definition: &Value,
    (capabilities, secrets): &(Vec<Value>, Vec<Value>),
) -> Map<String, Value> {
    let name = definition.get("name").and_then(Value::as_str).unwrap_or_default();
    let description = definition
        .get("description")
        .and_then(Value::as_str)
        .filter(|d| !d.trim().is_empty())
        .or_else(|| definition.get("title").and_then(Value::as_str))
        .map_or_else(|| format!("The tool `{name}` of the MCP server `{server}`."), str::to_string);
    let annotations = definition.get("annotations");
    let hint = |key: &str| annotations.and_then(|a| a.get(key)).and_then(Value::as_bool);
    let confirm = hint("readOnlyHint") != Some(true) && hint("destructiveHint").unwrap_or(true);
    // Without an `outputSchema` the result is the content blocks, or what an
    // outcome envelope among them says: anything.
    let result_schema = definition.get("outputSchema").map_or_else(|| json!({}), as_bundle_schema);
    let mut entry = Map::new();
    let id = if bare_ids { id_part(name) } else { format!("{server}.{}", id_part(name)) };
    entry.insert("id".into(), json!(id));
    entry.insert("description".into(), json!(description));
    entry.insert("category".into(), json!(server));
    entry.insert("capabilities".into(), Value::Array(capabilities.clone()));
    if !secrets.is_empty() {
        entry.insert("secrets".into(), Value::Array(secrets.clone()));
    }
    entry.insert(
        "transport".into(),
        json!({
            "kind": "mcp",
            "server": server,
            "tool": name,
            "definition_blake3": pin::definition_blake3(definition),
            "definition_parts": pin::part_digests(definition),
        }),
    );
    let input_schema = definition.get("inputSchema").map_or_else(|| json!({"type": "object"}), as_bundle_schema);
    entry.insert("input_schema".into(), input_schema);
    entry.insert("result_schema".into(), result_schema);
    entry.insert("requires_confirmation".into(), json!(confirm));
    entry
}

/// A server's schema as a bundle holds it: schemas of tools.json are JSON
/// Schema 2020-12, so the `$schema` of an older draft (what most SDKs
/// generate, draft-07) is dropped; the keywords such schemas use read the
/// same in 2020-12. The pin covers the server's definition as it was.
fn as_bundle_schema(schema: &Value) -> Value {
    let mut schema = schema.clone();
    if let Value::Object(map) = &mut schema
        && map.get("$schema").and_then(Value::as_str).is_some_and(|s| !s.contains("2020-12"))
    {
        map.remove("$schema");
    }
    schema
}

/// A server's tool name as the last part of a tool id: lower-case letters,
/// digits and `_`, starting with a letter.
fn id_part(name: &str) -> String {
    let mut part: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    if !part.starts_with(|c: char| c.is_ascii_lowercase()) {
        part.insert(0, 't');
    }
    part
}

/// The absolute path of `program` as the user's shell would find it
/// (`rlp tools import --mcp NAME -- npx …`): rlp never searches PATH at
/// run time, so the import writes where it is now.
pub(crate) fn resolve_program(program: &str, path: Option<&std::ffi::OsStr>) -> Option<std::path::PathBuf> {
    if Path::new(program).is_absolute() {
        return Some(program.into());
    }
    if program.contains('/') {
        return std::fs::canonicalize(program).ok();
    }
    std::env::split_paths(path?).map(|dir| dir.join(program)).find(|candidate| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(candidate).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_get_ids_confirmation_and_pins_from_their_definitions() {
        let definition =
            json!({"name": "read-File", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}});
        let entry = tool_entry("files", false, &definition, &(vec![json!("exec")], vec![]));
        assert_eq!(entry["id"], json!("files.read_file"));
        assert_eq!(entry["requires_confirmation"], json!(false));
        assert_eq!(entry["category"], json!("files"));
        assert_eq!(entry["transport"]["definition_blake3"], json!(pin::definition_blake3(&definition)));
        assert_eq!(entry["transport"]["definition_parts"], json!(pin::part_digests(&definition)));
        let plain = tool_entry("files", false, &json!({"name": "9x", "inputSchema": {}}), &(vec![], vec![]));
        let bare =
            tool_entry("files", true, &json!({"name": "test_simple_text", "inputSchema": {}}), &(vec![], vec![]));
        assert_eq!(bare["id"], json!("test_simple_text"));
        assert_eq!((plain["id"].clone(), plain["requires_confirmation"].clone()), (json!("files.t9x"), json!(true)));
        assert_eq!(plain["description"], json!("The tool `9x` of the MCP server `files`."));
    }
}
