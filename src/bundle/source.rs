//! Source files and the map from pointers to byte ranges.
//!
//! A [`SourceFile`] keeps the text it was loaded from. Turning a [`Pointer`]
//! into a position is done on demand: JSON files build their span index only
//! when a finding needs one, TOML files carry the index their parser produced.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use jsonc_parser::ast::Value as JsonNode;
use jsonc_parser::common::Ranged;

use crate::bundle::diag::At;
use crate::bundle::pointer::Pointer;

/// Byte ranges of one value: its key (when it sits in an object) and itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spans {
    /// The key's range, quotes included; `None` for array elements and the root.
    pub key: Option<Range<usize>>,
    /// The value's range.
    pub value: Range<usize>,
}

/// Pointer → spans for every value of a document.
pub type SpanIndex = HashMap<Pointer, Spans>;

/// The syntax a source file is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syntax {
    /// JSON (tools.json, schemas).
    Json,
    /// TOML (manifest.toml, policy.caps).
    Toml,
}

/// A 1-based line and column (columns count characters, as rustc does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    /// Line number, from 1.
    pub line: usize,
    /// Column number in characters, from 1.
    pub column: usize,
}

/// One file's text, kept so findings can quote it.
#[derive(Debug)]
pub struct SourceFile {
    path: PathBuf,
    text: String,
    syntax: Syntax,
    spans: OnceLock<SpanIndex>,
    lines: OnceLock<Vec<Line>>,
}

impl SourceFile {
    /// A file whose spans are computed on first use (JSON).
    pub fn new(path: impl Into<PathBuf>, text: String, syntax: Syntax) -> Self {
        Self { path: path.into(), text, syntax, spans: OnceLock::new(), lines: OnceLock::new() }
    }

    /// A file whose parser already produced its span index (TOML).
    pub fn with_spans(path: impl Into<PathBuf>, text: String, syntax: Syntax, spans: SpanIndex) -> Self {
        let file = Self::new(path, text, syntax);
        let _ = file.spans.set(spans);
        file
    }

    /// The path as the user named it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The whole text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The file's syntax.
    pub fn syntax(&self) -> Syntax {
        self.syntax
    }

    /// The byte range a finding points at, if it can be found.
    pub fn locate(&self, at: &At) -> Option<Range<usize>> {
        match at {
            At::File => None,
            At::Span(range) => Some(clamp(range.clone(), self.text.len())),
            At::Value(pointer) => self.find(pointer).map(|s| s.value.clone()),
            // An element without a key (the root, an array item) is marked at
            // its first character rather than across its whole extent.
            At::Key(pointer) => self.find(pointer).map(|s| s.key.clone().unwrap_or(s.value.start..s.value.start + 1)),
        }
    }

    /// The spans of the nearest value at or above `pointer` that exists.
    fn find(&self, pointer: &Pointer) -> Option<&Spans> {
        let index = self.spans.get_or_init(|| match self.syntax {
            Syntax::Json => json_span_index(&self.text),
            Syntax::Toml => SpanIndex::new(),
        });
        let mut current = Some(pointer.clone());
        while let Some(p) = current {
            if let Some(spans) = index.get(&p) {
                return Some(spans);
            }
            current = p.parent();
        }
        None
    }

    /// Line and column of a byte offset.
    ///
    /// Lines are found by binary search in an index built once per file, so
    /// placing many findings costs no more than reading the file once.
    pub fn position(&self, offset: usize) -> Position {
        let offset = floor_char_boundary(&self.text, offset.min(self.text.len()));
        let lines = self.lines();
        let number = lines.partition_point(|line| line.start <= offset);
        let line = &lines[number - 1];
        let before = &self.text[line.start..offset];
        let column = if line.ascii { before.len() } else { before.chars().count() } + 1;
        Position { line: number, column }
    }

    /// The byte offset of a 1-based line and (byte) column, clamped to the text.
    pub fn offset_of(&self, line: usize, byte_column: usize) -> usize {
        let line_start = self.lines().get(line.saturating_sub(1)).map_or(self.text.len(), |l| l.start);
        floor_char_boundary(&self.text, (line_start + byte_column.saturating_sub(1)).min(self.text.len()))
    }

    /// Every line of the text, in order.
    fn lines(&self) -> &[Line] {
        self.lines.get_or_init(|| {
            let ends = self.text.match_indices('\n').map(|(i, _)| i + 1).chain(std::iter::once(self.text.len()));
            let mut start = 0;
            ends.map(|end| {
                let line = Line { start, ascii: self.text[start..end].is_ascii() };
                start = end;
                line
            })
            .collect()
        })
    }
}

/// Where a line starts, and whether its columns are plain byte counts.
#[derive(Debug)]
struct Line {
    /// Byte offset of its first character.
    start: usize,
    /// Whether it is all ASCII (a column is then its byte offset plus one,
    /// even on a minified line millions of characters long).
    ascii: bool,
}

fn clamp(range: Range<usize>, len: usize) -> Range<usize> {
    range.start.min(len)..range.end.min(len).max(range.start.min(len))
}

fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    while offset > 0 && !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// Parses JSON leniently enough to locate values, and indexes every value.
///
/// Used only to place findings; the strict parse in `value` decides validity.
pub fn json_span_index(text: &str) -> SpanIndex {
    let mut index = SpanIndex::new();
    let options = jsonc_parser::ParseOptions::default();
    if let Ok(result) = jsonc_parser::parse_to_ast(text, &Default::default(), &options)
        && let Some(root) = &result.value
    {
        index_json(root, Pointer::root(), None, &mut index);
    }
    index
}

fn index_json(node: &JsonNode<'_>, at: Pointer, key: Option<Range<usize>>, index: &mut SpanIndex) {
    let range = node.range();
    match node {
        JsonNode::Object(object) => {
            for prop in &object.properties {
                let name = prop.name.as_str().to_string();
                let key_range = prop.name.range();
                // The first occurrence wins, as it is the one a reader sees
                // first; duplicates are reported by the strict parser.
                let child = at.key(name);
                if !index.contains_key(&child) {
                    index_json(&prop.value, child, Some(key_range.start..key_range.end), index);
                }
            }
        }
        JsonNode::Array(array) => {
            for (i, element) in array.elements.iter().enumerate() {
                index_json(element, at.index(i), None, index);
            }
        }
        _ => {}
    }
    index.insert(at, Spans { key, value: range.start..range.end });
}

/// Byte ranges of every duplicated key in a JSON text (second and later
/// occurrences), for precise duplicate-key findings.
pub fn json_duplicate_keys(text: &str) -> Vec<(String, Range<usize>)> {
    fn walk(node: &JsonNode<'_>, out: &mut Vec<(String, Range<usize>)>) {
        match node {
            JsonNode::Object(object) => {
                let mut seen = std::collections::HashSet::new();
                for prop in &object.properties {
                    let name = prop.name.as_str();
                    if !seen.insert(name) {
                        let r = prop.name.range();
                        out.push((name.to_string(), r.start..r.end));
                    }
                    walk(&prop.value, out);
                }
            }
            JsonNode::Array(array) => array.elements.iter().for_each(|e| walk(e, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Ok(result) = jsonc_parser::parse_to_ast(text, &Default::default(), &Default::default())
        && let Some(root) = &result.value
    {
        walk(root, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locates_json_values_and_keys() {
        let text = "{\n  \"tools\": [\n    {\"id\": \"a b\"}\n  ]\n}\n".to_string();
        let file = SourceFile::new("t.json", text, Syntax::Json);
        let pointer = Pointer::root().key("tools").index(0).key("id");
        let value = file.locate(&At::Value(pointer.clone())).unwrap();
        assert_eq!(file.position(value.start), Position { line: 3, column: 12 });
        let key = file.locate(&At::Key(pointer)).unwrap();
        assert_eq!(file.position(key.start), Position { line: 3, column: 6 });
        // A pointer below an existing value falls back to that value.
        let deeper = Pointer::root().key("tools").index(0).key("missing");
        assert_eq!(file.position(file.locate(&At::Value(deeper)).unwrap().start).line, 3);
    }

    #[test]
    fn positions_count_characters() {
        let file = SourceFile::new("x", "é\nab€c".to_string(), Syntax::Json);
        assert_eq!(file.position(6), Position { line: 2, column: 3 });
        assert_eq!(file.offset_of(2, 3), 5);
    }

    #[test]
    fn positions_at_the_ends_of_the_text() {
        let empty = SourceFile::new("x", String::new(), Syntax::Json);
        assert_eq!(empty.position(0), Position { line: 1, column: 1 });
        let file = SourceFile::new("x", "ab\n".to_string(), Syntax::Json);
        assert_eq!(file.position(3), Position { line: 2, column: 1 });
        assert_eq!(file.position(99), Position { line: 2, column: 1 });
        assert_eq!(file.offset_of(9, 1), 3);
    }
}
