//! Editing policy.caps: add grants under `[capabilities]` with toml_edit,
//! keeping the author's comments, order and layout.

use std::path::{Path, PathBuf};

use serde_json::Map;
use toml_edit::{Array, DocumentMut, Item, Table, Value};

use crate::authoring::AuthoringError;
use crate::authoring::edited::Editable;
use crate::bundle::capability::Capability;
use crate::bundle::policy::{Policy, grant_line};
use crate::bundle::tools::{Tool, Transport};

/// A policy file open for editing.
#[derive(Clone, Debug)]
pub(crate) struct PolicyDoc {
    path: PathBuf,
    doc: DocumentMut,
    original: Option<String>,
}

/// One grant a tool needs, with the form a net grant should be written in
/// (a URL's host, with its port only when the URL names one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Needed {
    /// The capability.
    pub capability: Capability,
    /// For `net`, the host (or host:port) to write.
    pub net_hint: Option<String>,
}

impl Needed {
    /// The policy.caps line that grants it.
    pub(crate) fn line(&self) -> String {
        grant_line(&self.capability, self.net_hint.as_deref())
    }

    /// The capability as the user should read it (`net:<hint>`).
    pub(crate) fn shown(&self) -> String {
        match (&self.capability, &self.net_hint) {
            (Capability::Net(_), Some(hint)) => format!("net:{hint}"),
            (cap, _) => cap.to_string(),
        }
    }
}

/// Every grant a loaded tool needs (declared and implied), in the tool's order.
pub(crate) fn needed_by(tool: &Tool) -> Vec<Needed> {
    let hint = match &tool.transport {
        Some(Transport::Http { url: Some(url), .. }) => Some(url.suggested_grant().to_string()),
        _ => None,
    };
    tool.required_capabilities()
        .into_iter()
        .map(|capability| {
            let net_hint = match &capability {
                Capability::Net(target) if hint.is_some() && Some(target) == url_target(tool) => hint.clone(),
                _ => None,
            };
            Needed { capability, net_hint }
        })
        .collect()
}

fn url_target(tool: &Tool) -> Option<&crate::bundle::capability::NetTarget> {
    match &tool.transport {
        Some(Transport::Http { url: Some(url), .. }) => Some(url.target()),
        _ => None,
    }
}

/// Every grant the given tools.json entries need, without repeats.
pub(crate) fn needed_by_entries<'a>(
    entries: impl IntoIterator<Item = &'a Map<String, serde_json::Value>>,
) -> Vec<Needed> {
    let tools: Vec<serde_json::Value> = entries.into_iter().map(|e| serde_json::Value::Object(e.clone())).collect();
    let text = serde_json::json!({"version": 1, "tools": tools}).to_string();
    let (file, _) = crate::bundle::parse_tools(&text);
    let mut out: Vec<Needed> = Vec::new();
    for tool in file.iter().flat_map(|f| f.tools.iter()) {
        for needed in needed_by(tool) {
            if !out.contains(&needed) {
                out.push(needed);
            }
        }
    }
    out
}

impl PolicyDoc {
    /// Parses policy text (the file need not exist yet).
    pub(crate) fn from_text(path: &Path, text: &str) -> Result<PolicyDoc, AuthoringError> {
        let doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
            AuthoringError::usage(format!("{} is not valid TOML: {e}", path.display()))
                .with_help("fix the file first; `rlp lint` shows where")
        })?;
        Ok(PolicyDoc { path: path.to_path_buf(), doc, original: Some(text.to_string()) })
    }

    /// Reads a policy file; a missing one starts as an empty `[capabilities]` table.
    pub(crate) fn read(path: &Path) -> Result<PolicyDoc, AuthoringError> {
        match crate::fsutil::read_text_limited(path, crate::bundle::MAX_TEXT_FILE_BYTES) {
            Ok(text) => Self::from_text(path, &text),
            Err(e) if e.is_not_found() => {
                let mut doc = Self::from_text(path, "[capabilities]\n")?;
                doc.original = None;
                Ok(doc)
            }
            Err(e) => Err(AuthoringError::read(path, e)),
        }
    }

    /// What the file grants now.
    pub(crate) fn policy(&self) -> Policy {
        let (grants, _) = crate::bundle::parse_policy(&self.doc.to_string());
        grants.as_ref().map_or_else(Policy::empty, Policy::from_bundle)
    }

    /// Adds a grant unless the policy already allows it; returns whether the
    /// file changed.
    pub(crate) fn grant(&mut self, needed: &Needed) -> Result<bool, AuthoringError> {
        if self.policy().allows(&needed.capability) {
            return Ok(false);
        }
        let path = self.path.clone();
        let caps = self.capabilities_table()?;
        let shape = |key: &str| {
            AuthoringError::usage(format!(
                "{}: `{key}` under [capabilities] has an unexpected type; cannot add `{}`",
                path.display(),
                needed.line()
            ))
        };
        match &needed.capability {
            Capability::Exec => set_true(caps, "exec"),
            Capability::Time => set_true(caps, "time"),
            Capability::Model => set_true(caps, "model"),
            Capability::KbRead(None) => set_true(caps, "kb_read"),
            Capability::KbWrite(None) => set_true(caps, "kb_write"),
            Capability::Net(target) => {
                let host = needed.net_hint.clone().unwrap_or_else(|| target.to_string());
                push(caps, "net", &host).map_err(|_| shape("net"))?;
            }
            Capability::Fs(dir) => push(caps, "fs", &dir.display().to_string()).map_err(|_| shape("fs"))?,
            Capability::Secret(id) => push(caps, "secrets", id.as_str()).map_err(|_| shape("secrets"))?,
            Capability::KbRead(Some(domain)) => push(caps, "kb_read", domain).map_err(|_| shape("kb_read"))?,
            Capability::KbWrite(Some(domain)) => push(caps, "kb_write", domain).map_err(|_| shape("kb_write"))?,
        }
        Ok(true)
    }

    fn capabilities_table(&mut self) -> Result<&mut Table, AuthoringError> {
        if !self.doc.contains_key("capabilities") {
            self.doc.insert("capabilities", Item::Table(Table::new()));
        }
        let path = self.path.display().to_string();
        self.doc
            .get_mut("capabilities")
            .and_then(Item::as_table_mut)
            .ok_or_else(|| AuthoringError::usage(format!("{path}: `capabilities` is not a table")))
    }
}

impl Editable for PolicyDoc {
    fn path(&self) -> &Path {
        &self.path
    }

    fn original(&self) -> Option<&str> {
        self.original.as_deref()
    }

    fn render(&self) -> String {
        let mut text = self.doc.to_string();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text
    }
}

/// Sets `key = true`, keeping an existing value's comments.
fn set_true(table: &mut Table, key: &str) {
    match table.get_mut(key) {
        Some(Item::Value(old)) => {
            let decor = old.decor().clone();
            *old = Value::from(true);
            *old.decor_mut() = decor;
        }
        _ => {
            table.insert(key, toml_edit::value(true));
        }
    }
}

/// Appends `item` to the list `key` (creating it; a `false` becomes a list).
fn push(table: &mut Table, key: &str, item: &str) -> Result<(), ()> {
    match table.get_mut(key) {
        None => {
            let mut array = Array::new();
            array.push(item);
            table.insert(key, toml_edit::value(array));
            Ok(())
        }
        Some(Item::Value(Value::Array(array))) => {
            if !array.iter().any(|v| v.as_str() == Some(item)) {
                array.push(item);
            }
            Ok(())
        }
        Some(Item::Value(old @ Value::Boolean(_))) => {
            let decor = old.decor().clone();
            let mut array = Array::new();
            array.push(item);
            *old = Value::Array(array);
            *old.decor_mut() = decor;
            Ok(())
        }
        Some(_) => Err(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need(text: &str, hint: Option<&str>) -> Needed {
        Needed { capability: text.parse().unwrap(), net_hint: hint.map(str::to_string) }
    }

    #[test]
    fn adds_grants_keeping_comments() {
        let text = "# who may do what\n[capabilities]\nnet = [\"a.example\"]   # hosts\nexec = false # not yet\n";
        let mut doc = PolicyDoc::from_text(Path::new("policy.caps"), text).unwrap();
        assert!(doc.grant(&need("net:api.x:443", Some("api.x"))).unwrap());
        assert!(!doc.grant(&need("net:api.x:443", Some("api.x"))).unwrap(), "already granted");
        assert!(doc.grant(&need("exec", None)).unwrap());
        assert!(doc.grant(&need("secrets:runloop/m/k", None)).unwrap());
        assert!(doc.grant(&need("kb_read:drafts", None)).unwrap());
        assert_eq!(
            doc.to_text(),
            "# who may do what\n[capabilities]\nnet = [\"a.example\", \"api.x\"]   # hosts\nexec = true # not yet\nsecrets = [\"runloop/m/k\"]\nkb_read = [\"drafts\"]\n"
        );
        let (_, findings) = crate::bundle::parse_policy(&doc.to_text());
        assert!(findings.is_empty());
    }
}
