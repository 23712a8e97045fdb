//! The three meta-tools of `--expose core` (docs/discovery.md): their MCP
//! definitions, and the reading of their arguments.

use serde_json::{Map, Value, json};

use crate::text::json_kind;

/// Finds tools by what they do.
pub(crate) const SEARCH: &str = "rlp.search_tools";
/// Shows tools' full definitions.
pub(crate) const DESCRIBE: &str = "rlp.describe_tools";
/// Calls a tool found by search.
pub(crate) const CALL: &str = "rlp.call_tool";

/// Results a search returns unless asked for another number.
pub(crate) const DEFAULT_LIMIT: usize = 5;
/// Most results one search returns.
pub(crate) const MAX_LIMIT: usize = 50;
/// Most tools one description shows.
pub(crate) const MAX_DESCRIBED: usize = 20;
/// Longest query, in characters.
const MAX_QUERY_CHARS: usize = 500;

/// What a search asks.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SearchRequest {
    /// Words of what the tool should do; none to list a category's tools.
    pub query: Option<String>,
    /// Only tools of this category.
    pub category: Option<String>,
    /// At most this many results.
    pub limit: usize,
}

impl SearchRequest {
    /// A search for `query` (trimmed; not empty, at most [`MAX_QUERY_CHARS`]
    /// characters) — or, without one, the list of `category`'s tools —, at
    /// most `limit` results (1 to [`MAX_LIMIT`]); `names` name the two in
    /// errors (`` `query` `` and `` `limit` ``, or `QUERY` and `--limit`).
    pub(crate) fn new(
        query: Option<&str>,
        category: Option<String>,
        limit: u64,
        names: [&str; 2],
    ) -> Result<Self, String> {
        let [query_name, limit_name] = names;
        let limit = usize::try_from(limit)
            .ok()
            .filter(|n| (1..=MAX_LIMIT).contains(n))
            .ok_or_else(|| format!("{limit_name} must be an integer from 1 to {MAX_LIMIT}, not {limit}"))?;
        let Some(query) = query.map(str::trim) else {
            if category.is_none() {
                return Err(format!(
                    "{query_name} is required: say what the tool should do, or give a category to list its tools"
                ));
            }
            return Ok(SearchRequest { query: None, category, limit });
        };
        if query.is_empty() {
            return Err(format!("{query_name} is empty: say what the tool should do"));
        }
        if query.chars().count() > MAX_QUERY_CHARS {
            return Err(format!("{query_name} is longer than {MAX_QUERY_CHARS} characters"));
        }
        Ok(SearchRequest { query: Some(query.to_string()), category, limit })
    }
}

/// What the three meta-tools say of the tools behind them, so their
/// annotations hold for any tool they may reach.
pub(crate) struct Reach {
    /// Every tool reachable is read-only.
    pub(crate) read_only: bool,
    /// Some tool reachable needs confirmation.
    pub(crate) destructive: bool,
    /// Some tool reachable reaches the network.
    pub(crate) open_world: bool,
}

/// The MCP definitions of the meta-tools; `categories` are named in the
/// search's description and schema (sorted, each once).
pub(crate) fn definitions(categories: &[String], reach: &Reach) -> [Value; 3] {
    let mut category = json!({"type": "string", "description": "only tools of this category"});
    let mut search_description = "Find tools of this server that are not listed: the best matches for the query \
         (id, description, category), best first; or, with a category and no query, every tool of the category. \
         Describe a tool (rlp.describe_tools) to see its schemas, then call it with rlp.call_tool."
        .to_string();
    if !categories.is_empty() {
        category["enum"] = json!(categories);
        search_description.push_str(&format!(" Categories: {}.", categories.join(", ")));
    }
    let read_only = json!({"readOnlyHint": true, "destructiveHint": false, "openWorldHint": false});
    [
        json!({
            "name": SEARCH,
            "description": search_description,
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS,
                              "description": "what the tool should do, in a few words (leave it out to list a category)"},
                    "category": category,
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                              "description": "at most this many tools (5 for a query, 50 for a category's list)"},
                },
                "additionalProperties": false,
            },
            "outputSchema": {
                "type": "object",
                "properties": {"tools": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "description": {"type": "string"},
                        "category": {"type": ["string", "null"]},
                    },
                    "required": ["id", "description", "category"],
                }}},
                "required": ["tools"],
            },
            "annotations": read_only,
        }),
        json!({
            "name": DESCRIBE,
            "description": "The full definitions (input and output schemas) of tools found by rlp.search_tools.",
            "inputSchema": {
                "type": "object",
                "properties": {"ids": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                                       "maxItems": MAX_DESCRIBED, "description": "tool ids from a search"}},
                "required": ["ids"],
                "additionalProperties": false,
            },
            "outputSchema": {
                "type": "object",
                "properties": {
                    "tools": {"type": "array", "items": {"type": "object"}},
                    "unknown": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["tools", "unknown"],
            },
            "annotations": read_only,
        }),
        json!({
            "name": CALL,
            "description": "Call a tool found by rlp.search_tools with arguments that match its input schema \
                 (rlp.describe_tools shows it). The tool runs with every check a listed tool gets.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "the tool's id"},
                    "arguments": {"type": "object", "description": "the tool's arguments"},
                },
                "required": ["id"],
                "additionalProperties": false,
            },
            "annotations": {
                "readOnlyHint": reach.read_only,
                "destructiveHint": reach.destructive,
                "openWorldHint": reach.open_world,
            },
        }),
    ]
}

/// The arguments of a meta-tool, with no keys but `allowed`.
fn only(arguments: &Map<String, Value>, tool: &str, allowed: &[&str]) -> Result<(), String> {
    match arguments.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => Err(format!("`{tool}` takes no argument `{key}` (it takes {})", allowed.join(", "))),
        None => Ok(()),
    }
}

/// A call of a meta-tool, its arguments read.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum MetaCall {
    /// `rlp.search_tools` or `rlp.describe_tools`.
    Discover(Discovery),
    /// `rlp.call_tool`: the tool to call and its arguments.
    Call(String, Map<String, Value>),
}

/// What a client asks to be shown of the catalog.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Discovery {
    /// `rlp.search_tools`.
    Search(SearchRequest),
    /// `rlp.describe_tools`: the ids, each once, in order.
    Describe(Vec<String>),
}

/// Reads a call of `tool` (the one dispatch of the meta-tools): `None` when
/// `tool` is no meta-tool (its `arguments` are left in place), else the
/// arguments taken and read, or the -32602 reason naming the tool.
pub(crate) fn read(tool: &str, arguments: &mut Option<Map<String, Value>>) -> Option<Result<MetaCall, String>> {
    let read = match tool {
        SEARCH => search_request(arguments.as_ref().unwrap_or(&Map::new()))
            .map(|request| MetaCall::Discover(Discovery::Search(request))),
        DESCRIBE => describe_ids(arguments.as_ref().unwrap_or(&Map::new()))
            .map(|ids| MetaCall::Discover(Discovery::Describe(ids))),
        CALL => call_target(arguments.take().unwrap_or_default()).map(|(id, inner)| MetaCall::Call(id, inner)),
        _ => return None,
    };
    Some(read.map_err(|why| format!("invalid arguments for `{tool}`: {why}")))
}

/// Reads `rlp.search_tools` arguments; the error says what is wrong.
pub(crate) fn search_request(arguments: &Map<String, Value>) -> Result<SearchRequest, String> {
    only(arguments, SEARCH, &["query", "category", "limit"])?;
    let query = match arguments.get("query") {
        Some(Value::String(query)) => Some(query.as_str()),
        None | Some(Value::Null) => None,
        Some(other) => return Err(format!("`query` must be a string, not {}", json_kind(other))),
    };
    let category = match arguments.get("category") {
        None | Some(Value::Null) => None,
        Some(Value::String(category)) => Some(category.clone()),
        Some(other) => return Err(format!("`category` must be a string, not {}", json_kind(other))),
    };
    let limit = match arguments.get("limit") {
        None | Some(Value::Null) => default_limit(query.is_some()) as u64,
        Some(value) => {
            value.as_u64().ok_or_else(|| format!("`limit` must be an integer from 1 to {MAX_LIMIT}, not {value}"))?
        }
    };
    SearchRequest::new(query, category, limit, ["`query`", "`limit`"])
}

/// The most results unless asked for another number: [`DEFAULT_LIMIT`] for
/// a query, [`MAX_LIMIT`] for a category's list.
pub(crate) fn default_limit(query: bool) -> usize {
    if query { DEFAULT_LIMIT } else { MAX_LIMIT }
}

/// Reads `rlp.describe_tools` arguments: the ids, each once, in order.
pub(crate) fn describe_ids(arguments: &Map<String, Value>) -> Result<Vec<String>, String> {
    only(arguments, DESCRIBE, &["ids"])?;
    let ids = match arguments.get("ids") {
        Some(Value::Array(ids)) => ids,
        Some(other) => return Err(format!("`ids` must be an array of tool ids, not {}", json_kind(other))),
        None => return Err("`ids` is required: name the tools to describe".into()),
    };
    if ids.is_empty() || ids.len() > MAX_DESCRIBED {
        return Err(format!("`ids` must name 1 to {MAX_DESCRIBED} tools, not {}", ids.len()));
    }
    let mut out: Vec<String> = Vec::with_capacity(ids.len());
    for id in ids {
        let id = id.as_str().ok_or_else(|| format!("`ids` must hold strings, not {}", json_kind(id)))?;
        if !out.iter().any(|seen| seen == id) {
            out.push(id.to_string());
        }
    }
    Ok(out)
}

/// Reads `rlp.call_tool` arguments: the tool id and its arguments.
pub(crate) fn call_target(mut arguments: Map<String, Value>) -> Result<(String, Map<String, Value>), String> {
    only(&arguments, CALL, &["id", "arguments"])?;
    let id = match arguments.remove("id") {
        Some(Value::String(id)) => id,
        Some(other) => return Err(format!("`id` must be a tool id string, not {}", json_kind(&other))),
        None => return Err("`id` is required: name the tool to call".into()),
    };
    let inner = match arguments.remove("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(inner)) => inner,
        Some(other) => return Err(format!("`arguments` must be an object, not {}", json_kind(&other))),
    };
    Ok((id, inner))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn reads_search_arguments_and_names_what_is_wrong() {
        assert_eq!(
            search_request(&args(json!({"query": " create an issue "}))).unwrap(),
            SearchRequest { query: Some("create an issue".into()), category: None, limit: DEFAULT_LIMIT }
        );
        assert_eq!(
            search_request(&args(json!({"query": "x", "category": "github", "limit": 3}))).unwrap(),
            SearchRequest { query: Some("x".into()), category: Some("github".into()), limit: 3 }
        );
        assert_eq!(
            search_request(&args(json!({"category": "github"}))).unwrap(),
            SearchRequest { query: None, category: Some("github".into()), limit: MAX_LIMIT }
        );
        let error = |value| search_request(&args(value)).unwrap_err();
        assert_eq!(
            error(json!({})),
            "`query` is required: say what the tool should do, or give a category to list its tools"
        );
        assert_eq!(error(json!({"query": "  "})), "`query` is empty: say what the tool should do");
        assert_eq!(error(json!({"query": 1})), "`query` must be a string, not a number");
        assert_eq!(error(json!({"query": "x", "limit": 0})), "`limit` must be an integer from 1 to 50, not 0");
        assert_eq!(error(json!({"query": "x", "limit": 2.5})), "`limit` must be an integer from 1 to 50, not 2.5");
        assert_eq!(
            error(json!({"query": "x", "k": 1})),
            "`rlp.search_tools` takes no argument `k` (it takes query, category, limit)"
        );
        assert_eq!(error(json!({"query": "x".repeat(501)})), "`query` is longer than 500 characters");
    }

    #[test]
    fn reads_describe_and_call_arguments() {
        assert_eq!(describe_ids(&args(json!({"ids": ["a", "b", "a"]}))).unwrap(), ["a", "b"]);
        assert_eq!(describe_ids(&args(json!({"ids": []}))).unwrap_err(), "`ids` must name 1 to 20 tools, not 0");
        assert_eq!(describe_ids(&args(json!({"ids": [1]}))).unwrap_err(), "`ids` must hold strings, not a number");
        assert_eq!(call_target(args(json!({"id": "a"}))).unwrap(), ("a".to_string(), Map::new()));
        assert_eq!(
            call_target(args(json!({"id": "a", "arguments": {"x": 1}}))).unwrap(),
            ("a".to_string(), args(json!({"x": 1})))
        );
        assert_eq!(
            call_target(args(json!({"id": "a", "arguments": [1]}))).unwrap_err(),
            "`arguments` must be an object, not an array"
        );
        assert_eq!(call_target(args(json!({}))).unwrap_err(), "`id` is required: name the tool to call");
    }
}
