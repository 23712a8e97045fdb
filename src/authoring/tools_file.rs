//! Editing tools.json: add a tool, or add-or-update tools by id.
//!
//! The file is read with serde_json (key order kept) and written back pretty
//! printed with two-space indentation and a final newline, atomically.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::authoring::AuthoringError;
use crate::authoring::edited::Editable;
use crate::bundle::tools::TOOLS_FILE;
use crate::bundle::value;

/// What an upsert did to one tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// The id was new.
    Added,
    /// The id existed and its entry changed.
    Updated,
    /// The id existed with the same entry.
    Unchanged,
}

impl Change {
    /// `added`, `updated` or `unchanged`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Updated => "updated",
            Change::Unchanged => "unchanged",
        }
    }
}

/// A bundle's tools.json, open for editing.
#[derive(Clone, Debug)]
pub(crate) struct ToolsDoc {
    path: PathBuf,
    /// The top-level object; its `tools` value is replaced by `tools` when written.
    root: Map<String, Value>,
    tools: Vec<Value>,
    original: Option<String>,
}

impl ToolsDoc {
    /// A new, empty document (version 1, no tools) for `bundle_dir`.
    pub(crate) fn empty(bundle_dir: &Path) -> ToolsDoc {
        let mut root = Map::new();
        root.insert("version".into(), json!(1));
        root.insert("tools".into(), json!([]));
        ToolsDoc { path: bundle_dir.join(TOOLS_FILE), root, tools: Vec::new(), original: None }
    }

    /// Reads `<bundle>/tools.json` (a missing file is an empty document).
    pub(crate) fn read(bundle_dir: &Path) -> Result<ToolsDoc, AuthoringError> {
        let path = bundle_dir.join(TOOLS_FILE);
        let text = match crate::fsutil::read_text_limited(&path, crate::bundle::MAX_TEXT_FILE_BYTES) {
            Ok(text) => text,
            Err(e) if e.is_not_found() => return Ok(ToolsDoc::empty(bundle_dir)),
            Err(e) => return Err(AuthoringError::read(&path, e)),
        };
        let fix = format!("fix it first; `rlp lint {}` shows where", bundle_dir.display());
        if let Some(problem) = value::bom_problem(&text) {
            return Err(AuthoringError::usage(format!("{} cannot be edited: {problem}", path.display()))
                .with_help(value::bom_help(&path)));
        }
        let value = value::parse_json_text(&text).map_err(|e| {
            AuthoringError::usage(format!("{} cannot be edited: {}", path.display(), value::json_error_message(&e)))
                .with_help(fix.clone())
        })?;
        let Value::Object(mut root) = value else {
            return Err(AuthoringError::usage(format!("{} is not a JSON object", path.display())).with_help(fix));
        };
        match root.get("version").and_then(Value::as_u64) {
            Some(1) => {}
            other => {
                let shown = other.map_or("missing".to_string(), |v| v.to_string());
                return Err(AuthoringError::usage(format!(
                    "{}: version {shown} is not supported; this rlp edits version 1",
                    path.display()
                ))
                .with_help("write `\"version\": 1`, or use an rlp that reads this version"));
            }
        }
        let tools = match root.get_mut("tools") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => std::mem::take(items),
            Some(_) => {
                return Err(AuthoringError::usage(format!("{}: `tools` is not a list", path.display())).with_help(fix));
            }
        };
        Ok(ToolsDoc { path, root, tools, original: Some(text) })
    }

    /// The entries, in file order.
    pub(crate) fn entries(&self) -> impl Iterator<Item = &Map<String, Value>> {
        self.tools.iter().filter_map(Value::as_object)
    }

    /// The entry with this id.
    pub(crate) fn get(&self, id: &str) -> Option<&Map<String, Value>> {
        self.entries().find(|e| e.get("id").and_then(Value::as_str) == Some(id))
    }

    /// The entry of server `name` in `servers`.
    pub(crate) fn server(&self, name: &str) -> Option<&Map<String, Value>> {
        self.root.get("servers")?.get(name)?.as_object()
    }

    /// Sets the entry of server `name` in `servers` (made, before `tools`,
    /// when the file has none).
    pub(crate) fn set_server(&mut self, name: &str, entry: Map<String, Value>) {
        if !matches!(self.root.get("servers"), Some(Value::Object(_))) {
            let mut root = Map::new();
            for (key, value) in std::mem::take(&mut self.root) {
                if key == "tools" {
                    root.insert("servers".into(), json!({}));
                }
                root.insert(key, value);
            }
            root.entry("servers").or_insert_with(|| json!({}));
            self.root = root;
        }
        if let Some(Value::Object(servers)) = self.root.get_mut("servers") {
            servers.insert(name.to_string(), Value::Object(entry));
        }
    }

    /// Appends a new entry; refuses an id that is already used.
    pub(crate) fn add(&mut self, entry: Map<String, Value>) -> Result<(), AuthoringError> {
        let id = entry.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
        if self.get(&id).is_some() {
            return Err(AuthoringError::usage(format!("{} already has a tool `{id}`", self.path.display()))
                .with_help("choose another id, or edit the existing entry"));
        }
        self.tools.push(Value::Object(entry));
        Ok(())
    }

    /// Adds `entry`, or merges it into the entry with the same id: its fields
    /// replace the old ones, fields it does not have are kept.
    pub(crate) fn upsert(&mut self, entry: Map<String, Value>) -> Change {
        let id = entry.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
        let slot = self.tools.iter_mut().find(|v| v.get("id").and_then(Value::as_str) == Some(id.as_str()));
        match slot {
            Some(Value::Object(old)) => {
                let mut merged = old.clone();
                for (key, value) in entry {
                    merged.insert(key, value);
                }
                if merged == *old {
                    Change::Unchanged
                } else {
                    *old = merged;
                    Change::Updated
                }
            }
            _ => {
                self.tools.push(Value::Object(entry));
                Change::Added
            }
        }
    }
}

impl Editable for ToolsDoc {
    fn path(&self) -> &Path {
        &self.path
    }

    fn original(&self) -> Option<&str> {
        self.original.as_deref()
    }

    /// Pretty, two-space indent, final newline.
    fn render(&self) -> String {
        let mut root = self.root.clone();
        root.insert("tools".into(), Value::Array(self.tools.clone()));
        let mut text = serde_json::to_string_pretty(&Value::Object(root)).unwrap_or_default();
        text.push('\n');
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upsert_merges_by_id() {
        let dir = tempfile::tempdir().unwrap();
        let mut doc = ToolsDoc::empty(dir.path());
        let entry = |desc: &str| json!({"id": "a", "description": desc}).as_object().unwrap().clone();
        assert_eq!(doc.upsert(entry("one")), Change::Added);
        assert_eq!(doc.upsert(entry("one")), Change::Unchanged);
        doc.tools[0]["requires_confirmation"] = json!(true);
        assert_eq!(doc.upsert(entry("two")), Change::Updated);
        assert_eq!(doc.get("a").unwrap()["requires_confirmation"], json!(true), "local fields are kept");
        assert!(doc.add(entry("x")).unwrap_err().message.contains("already has a tool `a`"));
        assert!(doc.to_text().starts_with("{\n  \"version\": 1,\n  \"tools\": [\n    {\n"));
    }
}
