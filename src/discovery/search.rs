//! The discovery search: BM25 over each tool's id, description, category
//! and input property names, ranked deterministically.
//!
//! Ranking is the `bm25` crate's (an embedder fitted to the catalog, an
//! English tokenizer with stemming and stop words, Okapi BM25 scoring).
//! rlp feeds it identifiers as words ([`spaced`]) and weighs the id and
//! category above the description by repeating them; ties, which the crate
//! leaves in hash order, are broken by id.

use bm25::{Embedder, EmbedderBuilder, Language, Scorer};
use serde_json::Value;

use crate::discovery::words::spaced;

/// How many times a tool's id words count against its description's.
const ID_WEIGHT: usize = 2;

/// What the search knows of one tool.
pub(crate) struct Searchable<'a> {
    /// The tool id.
    pub(crate) id: &'a str,
    /// Its description.
    pub(crate) description: &'a str,
    /// Its category.
    pub(crate) category: Option<&'a str>,
    /// Its input schema, whose property names are searched too.
    pub(crate) input_schema: &'a Value,
}

/// A BM25 index over a fixed set of tools.
pub(crate) struct Index {
    embedder: Embedder,
    scorer: Scorer<usize>,
    /// Each tool's id and category, by position.
    tools: Vec<(String, Option<String>)>,
}

/// One result: the position of the tool in the indexed set.
#[derive(Debug, PartialEq)]
pub(crate) struct Hit {
    /// Position in the indexed set.
    pub(crate) position: usize,
    /// BM25 score (higher is better).
    pub(crate) score: f32,
}

/// The searchable text of a tool.
fn text_of(tool: &Searchable<'_>) -> String {
    let id = spaced(tool.id);
    let mut text = vec![id; ID_WEIGHT];
    if let Some(category) = tool.category {
        text.push(spaced(category));
    }
    text.push(tool.description.to_string());
    let mut names = Vec::new();
    property_names(tool.input_schema, 0, &mut names);
    text.extend(names.iter().map(|name| spaced(name)));
    text.join(" ")
}

/// Property names in `schema`, nested objects and array items included
/// (bounded depth: schemas come from the bundle).
fn property_names<'s>(schema: &'s Value, depth: usize, out: &mut Vec<&'s str>) {
    const MAX_DEPTH: usize = 8;
    if depth > MAX_DEPTH {
        return;
    }
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            out.push(name);
            property_names(property, depth + 1, out);
        }
    }
    if let Some(items) = schema.get("items") {
        property_names(items, depth + 1, out);
    }
}

impl Index {
    /// Indexes `tools`; results name them by position.
    pub(crate) fn new(tools: &[Searchable<'_>]) -> Index {
        let texts: Vec<String> = tools.iter().map(text_of).collect();
        let corpus: Vec<&str> = texts.iter().map(String::as_str).collect();
        let embedder = EmbedderBuilder::with_fit_to_corpus(Language::English, &corpus).build();
        let mut scorer = Scorer::new();
        for (position, text) in texts.iter().enumerate() {
            scorer.upsert(&position, embedder.embed(text));
        }
        let tools = tools.iter().map(|t| (t.id.to_string(), t.category.map(str::to_string))).collect();
        Index { embedder, scorer, tools }
    }

    /// The tools matching `query` best first (ties by id), only those in
    /// `category` when one is given (compared without case), at most
    /// `limit`.
    pub(crate) fn search(&self, query: &str, category: Option<&str>, limit: usize) -> Vec<Hit> {
        let embedding = self.embedder.embed(&spaced_query(query));
        let mut hits: Vec<Hit> = self
            .scorer
            .matches(&embedding)
            .into_iter()
            .filter(|m| {
                category.is_none_or(|c| self.tools[m.id].1.as_deref().is_some_and(|t| t.eq_ignore_ascii_case(c)))
            })
            .map(|m| Hit { position: m.id, score: m.score })
            .collect();
        hits.sort_by(|a, b| {
            b.score.total_cmp(&a.score).then_with(|| self.tools[a.position].0.cmp(&self.tools[b.position].0))
        });
        hits.truncate(limit);
        hits
    }
}

/// A query with the identifiers in it spaced like the indexed ids
/// (`create_issue` finds `github.create_issue`).
fn spaced_query(query: &str) -> String {
    query.split_whitespace().map(spaced).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ids(index: &Index, tools: &[Searchable<'_>], query: &str, category: Option<&str>, limit: usize) -> Vec<String> {
        index.search(query, category, limit).iter().map(|hit| tools[hit.position].id.to_string()).collect()
    }

    #[test]
    fn ranks_by_id_description_category_and_property_names_with_ties_by_id() {
        let empty = json!({"type": "object"});
        let with_label = json!({"type": "object", "properties": {"labelName": {"type": "string"}}});
        let tools = [
            Searchable { id: "b.twin", description: "same words here", category: None, input_schema: &empty },
            Searchable { id: "a.twin", description: "same words here", category: None, input_schema: &empty },
            Searchable {
                id: "gh.create_issue",
                description: "Open a ticket",
                category: Some("Issues"),
                input_schema: &empty,
            },
            Searchable {
                id: "gh.tag",
                description: "Mark something",
                category: Some("labels"),
                input_schema: &with_label,
            },
        ];
        let index = Index::new(&tools);
        // Identifier words match plain words, stems match ("issues" → "issue").
        assert_eq!(ids(&index, &tools, "create issues", None, 5), ["gh.create_issue"]);
        // Property names are searched (`labelName` → "label name").
        assert_eq!(ids(&index, &tools, "label", None, 5), ["gh.tag"]);
        // Equal scores come in id order, every time.
        for _ in 0..3 {
            assert_eq!(ids(&index, &tools, "same words", None, 5), ["a.twin", "b.twin"]);
        }
        assert_eq!(ids(&index, &tools, "same words", None, 1), ["a.twin"]);
        // The category filter ignores case; stop words alone match nothing.
        assert_eq!(ids(&index, &tools, "ticket", Some("issues"), 5), ["gh.create_issue"]);
        assert!(ids(&index, &tools, "ticket", Some("labels"), 5).is_empty());
        assert!(ids(&index, &tools, "the of and", None, 5).is_empty());
    }
}
