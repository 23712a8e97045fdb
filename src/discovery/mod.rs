//! Deferred tool discovery (docs/discovery.md): a bundle's exposed tools as
//! MCP definitions, and the search and description behind
//! `rlp serve --expose core`, `rlp tools search` and
//! `rlp tools list --format mcp`.
//!
//! - [`definition`]: each exposed tool as an MCP tool definition;
//! - [`meta`]: the meta-tools `rlp.search_tools`, `rlp.describe_tools` and
//!   `rlp.call_tool`;
//! - `search`: the BM25 index; `words`: identifiers as words.
//!
//! Discovery never widens what may run: a tool found here is called
//! through the same pipeline as a listed one.

pub(crate) mod definition;
pub(crate) mod meta;
mod search;
mod words;

use std::sync::OnceLock;

use rmcp::model::{ListToolsResult, Tool};
use serde_json::{Value, json};

use crate::bundle::tools::is_valid_tool_id;
use crate::discovery::definition::Listed;
use crate::discovery::meta::{Reach, SearchRequest};
use crate::discovery::search::{Index, Searchable};
use crate::event::{PAYLOAD_VERSION, ToolDiscoverPayload};
use crate::runtime::Runtime;
use crate::text::ellipsize;

/// Which tools `tools/list` offers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Expose {
    /// Every exposed tool.
    #[default]
    All,
    /// The `core` tools and the three meta-tools that find and call the rest.
    Core,
}

/// Longest id a description may ask for that names no tool of the bundle
/// (it is recorded among the `unknown` ids).
const MAX_UNKNOWN_ID_CHARS: usize = 128;

/// A bundle's exposed tools, searchable.
pub(crate) struct Catalog {
    /// Sorted by id.
    tools: Vec<Listed>,
    /// Built at the first search (`--expose all` never searches).
    index: OnceLock<Index>,
    /// The tools' categories, sorted, each once.
    categories: Vec<String>,
    /// The meta-tools' definitions.
    meta: [Value; 3],
}

impl Catalog {
    /// The exposed tools of `runtime`.
    pub(crate) fn of(runtime: &Runtime) -> Catalog {
        let tools = definition::list(runtime);
        let mut categories: Vec<String> = tools.iter().filter_map(|t| t.category.clone()).collect();
        categories.sort();
        categories.dedup();
        let reachable = tools.iter().filter(|t| !t.core);
        let reach = Reach {
            read_only: reachable.clone().all(|t| t.reach.read_only),
            destructive: reachable.clone().any(|t| t.reach.destructive),
            open_world: reachable.clone().any(|t| t.reach.open_world),
        };
        let meta = meta::definitions(&categories, &reach);
        Catalog { tools, index: OnceLock::new(), categories, meta }
    }

    /// The search index, built on first use.
    fn index(&self) -> &Index {
        self.index.get_or_init(|| {
            let searchable: Vec<Searchable<'_>> =
                self.tools
                    .iter()
                    .map(|t| Searchable {
                        id: &t.id,
                        // The full text is searched, whatever lists show.
                        description: t.full_description.as_deref().unwrap_or_else(|| {
                            t.definition.get("description").and_then(Value::as_str).unwrap_or_default()
                        }),
                        category: t.category.as_deref(),
                        input_schema: t.definition.get("inputSchema").unwrap_or(&Value::Null),
                    })
                    .collect();
            Index::new(&searchable)
        })
    }

    /// The tool `id`, if exposed.
    pub(crate) fn get(&self, id: &str) -> Option<&Listed> {
        self.tools.binary_search_by(|t| t.id.as_str().cmp(id)).ok().map(|i| &self.tools[i])
    }

    /// Every exposed tool, sorted by id.
    pub(crate) fn tools(&self) -> &[Listed] {
        &self.tools
    }

    /// The definitions `tools/list` sends under `expose`: every exposed
    /// tool, or the core ones followed by the meta-tools.
    /// The definitions of `ids` (exposed tools only), sorted by id.
    pub(crate) fn definitions_of<'c>(
        &'c self,
        ids: &'c std::collections::BTreeSet<String>,
    ) -> impl Iterator<Item = &'c Value> {
        ids.iter().filter_map(|id| self.get(id)).map(|t| &t.definition)
    }

    pub(crate) fn listed(&self, expose: Expose) -> Vec<&Value> {
        match expose {
            Expose::All => self.tools.iter().map(|t| &t.definition).collect(),
            Expose::Core => {
                self.tools.iter().filter(|t| t.core).map(|t| &t.definition).chain(self.meta.iter()).collect()
            }
        }
    }

    /// The tools that best match `request`, best first; an error for a
    /// category no tool has (the search's schema lists them).
    pub(crate) fn search(&self, request: &SearchRequest) -> Result<Vec<&Listed>, String> {
        if let Some(category) = &request.category
            && !self.categories.iter().any(|known| known.eq_ignore_ascii_case(category))
        {
            let known = if self.categories.is_empty() { "none".to_string() } else { self.categories.join(", ") };
            return Err(format!("no tool has the category `{}`; the categories are: {known}", ellipsize(category, 64)));
        }
        let Some(query) = &request.query else {
            // A category's list, by id.
            let category = request.category.as_deref().unwrap_or_default();
            let of = |t: &&Listed| t.category.as_deref().is_some_and(|c| c.eq_ignore_ascii_case(category));
            return Ok(self.tools.iter().filter(of).take(request.limit).collect());
        };
        let hits = self.index().search(query, request.category.as_deref(), request.limit);
        Ok(hits.into_iter().map(|hit| &self.tools[hit.position]).collect())
    }

    /// The exposed tools of `ids`, and the ids that name none; an error for
    /// an id that could name no tool (not of the tool id form, or long).
    pub(crate) fn describe(&self, ids: &[String]) -> Result<(Vec<&Listed>, Vec<String>), String> {
        let mut found = Vec::new();
        let mut unknown = Vec::new();
        for id in ids {
            match self.get(id) {
                Some(tool) => found.push(tool),
                None if is_valid_tool_id(id) && id.chars().count() <= MAX_UNKNOWN_ID_CHARS => unknown.push(id.clone()),
                None => return Err(format!("`{}` is not a tool id", ellipsize(id, 64).escape_debug())),
            }
        }
        Ok((found, unknown))
    }

    /// The `tools/list` result under `expose`, in the SDK's type.
    pub(crate) fn tools_list(&self, expose: Expose) -> Result<ListToolsResult, serde_json::Error> {
        let tools: Vec<Tool> =
            self.listed(expose).into_iter().map(|d| serde_json::from_value(d.clone())).collect::<Result<_, _>>()?;
        Ok(ListToolsResult::with_all_items(tools))
    }
}

/// One search result as the client sees it: `{id, description, category}`.
pub(crate) fn found_json(tool: &Listed) -> Value {
    json!({
        "id": tool.id,
        "description": tool.definition.get("description").cloned().unwrap_or(Value::Null),
        "category": tool.category,
    })
}

/// The frame recording a search and what it returned.
pub(crate) fn search_frame(request: &SearchRequest, found: &[&Listed]) -> ToolDiscoverPayload {
    ToolDiscoverPayload {
        v: PAYLOAD_VERSION,
        action: "search".into(),
        query: request.query.clone(),
        category: request.category.clone(),
        limit: Some(request.limit as u64),
        ids: found.iter().map(|t| t.id.clone()).collect(),
        unknown: Vec::new(),
    }
}

/// The frame recording a description and what it showed.
pub(crate) fn describe_frame(described: &[&Listed], unknown: &[String]) -> ToolDiscoverPayload {
    ToolDiscoverPayload {
        v: PAYLOAD_VERSION,
        action: "describe".into(),
        query: None,
        category: None,
        limit: None,
        ids: described.iter().map(|t| t.id.clone()).collect(),
        unknown: unknown.to_vec(),
    }
}
