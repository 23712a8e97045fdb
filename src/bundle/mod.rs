//! The bundle data model: manifest, policy, tools, schemas and files.
//!
//! [`load`] reads a bundle folder into typed parts and never fails: every
//! problem becomes a [`Finding`] that points at a file, line and column. This
//! module knows nothing of terminals, processes, networks or databases.

pub mod capability;
pub mod command;
pub mod diag;
pub mod inventory;
pub mod manifest;
pub(crate) mod pointer;
pub mod policy;
pub(crate) mod reader;
pub(crate) mod schema;
pub mod servers;
pub mod source;
pub mod tools;
pub(crate) mod url_template;
pub(crate) mod value;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::bundle::diag::{At, Code, Diagnostics, Finding};
use crate::bundle::inventory::Inventory;
use crate::bundle::manifest::{MANIFEST_FILE, Manifest};
use crate::bundle::policy::{Grants, Policy};
use crate::bundle::schema::SCHEMA_SCHEME;
use crate::bundle::source::{SourceFile, Syntax};
use crate::bundle::tools::{TOOLS_FILE, Tool, ToolsFile};

/// Largest bundle text file read (manifest, policy, tools.json, schemas).
pub const MAX_TEXT_FILE_BYTES: u64 = 256 << 20;

/// A bundle as read from disk, with every problem found while reading.
#[derive(Debug)]
pub struct LoadedBundle {
    /// The folder, as the user named it.
    pub dir: PathBuf,
    /// manifest.toml, if it parsed.
    pub manifest: Option<Manifest>,
    /// The bundle's policy file, if it parsed.
    pub grants: Option<Grants>,
    /// tools.json, if it parsed (absent file: no tools).
    pub tools: Option<ToolsFile>,
    /// Parsed schema documents, by bundle path.
    pub schemas: BTreeMap<String, Value>,
    /// The text of every file read, by bundle path, for quoting in findings.
    pub sources: BTreeMap<String, SourceFile>,
    /// The files in the folder.
    pub inventory: Inventory,
    /// Problems found while reading.
    pub findings: Vec<Finding>,
}

impl LoadedBundle {
    /// The path of a bundle file as shown to the user.
    pub fn display_path(&self, relative: &str) -> PathBuf {
        self.dir.join(relative)
    }

    /// The folder's own name.
    pub fn folder_name(&self) -> Option<String> {
        let canonical = self.dir.canonicalize().ok();
        canonical.as_deref().unwrap_or(&self.dir).file_name().map(|n| n.to_string_lossy().into_owned())
    }

    /// The bundle's own policy (nothing granted where the file is missing).
    pub fn policy(&self) -> Policy {
        self.grants.as_ref().map(Policy::from_bundle).unwrap_or_else(Policy::empty)
    }

    /// The tools, or none.
    pub fn tool_list(&self) -> &[Tool] {
        self.tools.as_ref().map_or(&[], |t| &t.tools)
    }

    /// The schema documents `tool` can reference, keyed `schema:<id>`:
    /// every `schemas/<id>.json`, overridden by the tool's `schema_refs`.
    pub fn schema_documents(&self, tool: Option<&Tool>) -> Arc<HashMap<String, Value>> {
        let mut documents: HashMap<String, Value> = self
            .schemas
            .iter()
            .filter_map(|(path, value)| {
                let id = path.strip_prefix("schemas/")?.strip_suffix(".json")?;
                Some((format!("{SCHEMA_SCHEME}{id}"), value.clone()))
            })
            .collect();
        for (reference, path) in tool.map_or(&[][..], |t| &t.schema_refs) {
            if let Some(value) = self.schemas.get(path) {
                documents.insert(reference.clone(), value.clone());
            }
        }
        Arc::new(documents)
    }

    /// The schema a tool's top-level schema value stands for: itself, or the
    /// bundle document its `{"$ref": "schema:<id>[#fragment]"}` names.
    pub fn resolve_schema<'a>(&'a self, tool: &Tool, schema: &'a Value) -> Option<&'a Value> {
        let Some(target) = schema.get("$ref").and_then(Value::as_str) else { return Some(schema) };
        match schema::classify_ref(target) {
            schema::RefKind::Bundle { reference, fragment } => {
                let document = self.schemas.get(&schema::schema_path(Some(tool), reference))?;
                match fragment {
                    Some(f) if !f.is_empty() => document.pointer(f),
                    _ => Some(document),
                }
            }
            schema::RefKind::Local("") => Some(schema),
            _ => None,
        }
    }

    /// Whether reading found an error (not just warnings).
    pub fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.severity == diag::Severity::Error)
    }
}

/// Parses manifest text on its own (no files are read), returning what
/// loaded and every finding. Used by fuzzing and by tools that edit text.
pub fn parse_manifest(text: &str) -> (Option<Manifest>, Vec<Finding>) {
    let mut diags = Diagnostics::new(MANIFEST_FILE);
    let manifest = value::parse_toml(text, &mut diags).and_then(|(v, _)| Manifest::from_value(&v, &mut diags));
    (manifest, diags.into_findings())
}

/// Parses policy.caps text on its own.
pub fn parse_policy(text: &str) -> (Option<Grants>, Vec<Finding>) {
    let mut diags = Diagnostics::new("policy.caps");
    let grants = value::parse_toml(text, &mut diags).map(|(v, _)| Grants::from_value(&v, &mut diags));
    (grants, diags.into_findings())
}

/// Parses tools.json text on its own.
pub fn parse_tools(text: &str) -> (Option<ToolsFile>, Vec<Finding>) {
    let mut diags = Diagnostics::new(TOOLS_FILE);
    let source = SourceFile::new(TOOLS_FILE, text.to_string(), Syntax::Json);
    let tools = value::parse_json(&source, &mut diags).and_then(|v| ToolsFile::from_value(&v, &mut diags));
    (tools, diags.into_findings())
}

/// Reads one text file of the bundle; a missing file is `None` without a
/// finding when `optional`.
fn read_text(dir: &Path, relative: &str, optional: bool, diags: &mut Diagnostics) -> Option<String> {
    let path = dir.join(relative);
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && optional => return None,
        Err(e) => {
            diags.report(Code::Unreadable, At::File, format!("cannot read {relative}: {e}"));
            return None;
        }
    };
    if !meta.file_type().is_file() {
        // Reported once, by the inventory check.
        return None;
    }
    if meta.len() > MAX_TEXT_FILE_BYTES {
        diags.report(
            Code::Unreadable,
            At::File,
            format!("{relative} is {} bytes; bundle text files are limited to {MAX_TEXT_FILE_BYTES}", meta.len()),
        );
        return None;
    }
    // Bounded too: the file may grow between the check and the read.
    match crate::fsutil::read_limited(&path, MAX_TEXT_FILE_BYTES).map(String::from_utf8) {
        Ok(Ok(text)) => Some(text),
        Ok(Err(e)) => {
            let offset = e.utf8_error().valid_up_to();
            diags
                .report(
                    Code::Unreadable,
                    At::File,
                    format!("{relative} is not UTF-8 (invalid byte at offset {offset})"),
                )
                .help("save the file as UTF-8");
            None
        }
        Err(crate::fsutil::ReadError::Io(e)) => {
            diags.report(Code::Unreadable, At::File, format!("cannot read {relative}: {e}"));
            None
        }
        Err(e @ crate::fsutil::ReadError::TooLarge { .. }) => {
            diags.report(Code::Unreadable, At::File, e.to_string());
            None
        }
    }
}

/// Reads a bundle folder.
pub fn load(dir: &Path) -> LoadedBundle {
    let mut bundle = LoadedBundle {
        dir: dir.to_path_buf(),
        manifest: None,
        grants: None,
        tools: None,
        schemas: BTreeMap::new(),
        sources: BTreeMap::new(),
        inventory: Inventory::default(),
        findings: Vec::new(),
    };
    let mut top = Diagnostics::new(dir.to_path_buf());
    match Inventory::scan(dir) {
        Ok(inventory) => bundle.inventory = inventory,
        Err(e) => {
            top.report(Code::Unreadable, At::File, format!("cannot read the folder: {e}"));
        }
    }
    bundle.findings.extend(top.into_findings());

    let mut diags = Diagnostics::new(dir.join(MANIFEST_FILE));
    if let Some(text) = read_text(dir, MANIFEST_FILE, false, &mut diags) {
        let (source, value) = value::load_toml(dir.join(MANIFEST_FILE), text, &mut diags);
        bundle.manifest = value.and_then(|v| Manifest::from_value(&v, &mut diags));
        bundle.sources.insert(MANIFEST_FILE.to_string(), source);
    }
    bundle.findings.extend(diags.into_findings());

    let caps_file = bundle.manifest.as_ref().map_or("policy.caps".to_string(), |m| m.caps_file.clone());
    let mut diags = Diagnostics::new(dir.join(&caps_file));
    if manifest::is_valid_artifact_path(&caps_file)
        && let Some(text) = read_text(dir, &caps_file, true, &mut diags)
    {
        let (source, value) = value::load_toml(dir.join(&caps_file), text, &mut diags);
        bundle.grants = value.map(|v| Grants::from_value(&v, &mut diags));
        bundle.sources.insert(caps_file, source);
    }
    bundle.findings.extend(diags.into_findings());

    let mut diags = Diagnostics::new(dir.join(TOOLS_FILE));
    if let Some(text) = read_text(dir, TOOLS_FILE, true, &mut diags) {
        let source = SourceFile::new(dir.join(TOOLS_FILE), text, Syntax::Json);
        bundle.tools = value::parse_json(&source, &mut diags).and_then(|v| ToolsFile::from_value(&v, &mut diags));
        bundle.sources.insert(TOOLS_FILE.to_string(), source);
    }
    bundle.findings.extend(diags.into_findings());

    load_schemas(&mut bundle);
    bundle
}

/// Parses every `schemas/*.json` file and every `schema_refs` target.
fn load_schemas(bundle: &mut LoadedBundle) {
    let mut paths: Vec<String> = bundle
        .inventory
        .files
        .iter()
        .filter(|f| f.path.starts_with("schemas/") && f.path.ends_with(".json"))
        .map(|f| f.path.clone())
        .collect();
    for tool in bundle.tool_list() {
        for (_, path) in &tool.schema_refs {
            if schema::target_problem(path, &bundle.inventory).is_none() && !paths.contains(path) {
                paths.push(path.clone());
            }
        }
    }
    for path in paths {
        let mut diags = Diagnostics::new(bundle.dir.join(&path));
        if let Some(text) = read_text(&bundle.dir, &path, false, &mut diags) {
            let source = SourceFile::new(bundle.dir.join(&path), text, Syntax::Json);
            if let Some(value) = value::parse_json(&source, &mut diags) {
                bundle.schemas.insert(path.clone(), value);
            }
            bundle.sources.insert(path, source);
        }
        bundle.findings.extend(diags.into_findings());
    }
}
