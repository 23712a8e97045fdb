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

use serde_json::{Value, json};

use crate::discovery::definition::Listed;
use crate::discovery::meta::{Reach, SearchRequest};
use crate::discovery::search::{Index, Searchable};
use crate::event::{PAYLOAD_VERSION, ToolDiscoverPayload};
use crate::runtime::Runtime;

/// Which tools `tools/list` offers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Expose {
    /// Every exposed tool.
    #[default]
    All,
    /// The `core` tools and the three meta-tools that find and call the rest.
    Core,
}

/// A bundle's exposed tools, searchable.
pub(crate) struct Catalog {
    /// Sorted by id.
    tools: Vec<Listed>,
    index: Index,
    /// The meta-tools' definitions.
    meta: [Value; 3],
}

impl Catalog {
    /// The exposed tools of `runtime`.
    pub(crate) fn of(runtime: &Runtime) -> Catalog {
        let tools = definition::list(runtime);
        let searchable: Vec<Searchable<'_>> = tools
            .iter()
            .map(|t| Searchable {
                id: &t.id,
                description: t.definition.get("description").and_then(Value::as_str).unwrap_or_default(),
                category: t.category.as_deref(),
                input_schema: t.definition.get("inputSchema").unwrap_or(&Value::Null),
            })
            .collect();
        let index = Index::new(&searchable);
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
        Catalog { tools, index, meta }
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
    pub(crate) fn listed(&self, expose: Expose) -> Vec<&Value> {
        match expose {
            Expose::All => self.tools.iter().map(|t| &t.definition).collect(),
            Expose::Core => {
                self.tools.iter().filter(|t| t.core).map(|t| &t.definition).chain(self.meta.iter()).collect()
            }
        }
    }

    /// The tools that best match `request`, best first.
    pub(crate) fn search(&self, request: &SearchRequest) -> Vec<&Listed> {
        self.index
            .search(&request.query, request.category.as_deref(), request.limit)
            .into_iter()
            .map(|hit| &self.tools[hit.position])
            .collect()
    }

    /// The definitions of `ids` (those exposed), and the ids that name no
    /// exposed tool.
    pub(crate) fn describe<'c>(&'c self, ids: &[String]) -> (Vec<&'c Value>, Vec<String>) {
        let mut found = Vec::new();
        let mut unknown = Vec::new();
        for id in ids {
            match self.get(id) {
                Some(tool) => found.push(&tool.definition),
                None => unknown.push(id.clone()),
            }
        }
        (found, unknown)
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
        query: Some(request.query.clone()),
        category: request.category.clone(),
        limit: Some(request.limit as u64),
        ids: found.iter().map(|t| t.id.clone()).collect(),
        unknown: Vec::new(),
    }
}

/// The frame recording a description and what it showed.
pub(crate) fn describe_frame(described: &[&Value], unknown: &[String]) -> ToolDiscoverPayload {
    ToolDiscoverPayload {
        v: PAYLOAD_VERSION,
        action: "describe".into(),
        query: None,
        category: None,
        limit: None,
        ids: described.iter().filter_map(|d| d.get("name").and_then(Value::as_str).map(str::to_string)).collect(),
        unknown: unknown.to_vec(),
    }
}
