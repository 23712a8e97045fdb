//! The bundle data model: manifest, policy, tools, schemas and files.
//!
//! [`load`] reads a bundle folder into typed parts and never fails: every
//! problem becomes a [`Finding`] that points at a file, line and column. This
//! module knows nothing of terminals, processes, networks or databases.

pub mod call_pointer;
pub mod capability;
pub mod command;
pub mod diag;
pub mod inventory;
pub mod manifest;
pub(crate) mod pointer;
pub mod policy;
pub(crate) mod reader;
pub mod registry;
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
use crate::bundle::registry::{Registries, SharedFile};
use crate::bundle::schema::{RefKind, SCHEMA_SCHEME, classify_ref, find_refs, is_valid_schema_id, mapped_path};
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
    /// Every `schema:<id>` the bundle references but does not hold, by id,
    /// with what the shared registries have for it.
    pub shared: BTreeMap<String, Shared>,
    /// The shared registries searched.
    pub registries: Registries,
}

/// A `schema:<id>` the bundle does not hold, as the registries answer it.
#[derive(Clone, Debug, PartialEq)]
pub struct Shared {
    /// The file that wins, with its content or why it cannot be read.
    pub found: Option<(PathBuf, Result<SharedFile, String>)>,
    /// The same id in later registries, unused.
    pub shadowed: Vec<PathBuf>,
    /// The parsed document (`None` when not found, unreadable or not JSON).
    pub document: Option<Value>,
    /// How the file compares with the manifest's pin.
    pub pin: PinState,
}

/// How a registry file compares with `[shared_schemas."<id>"]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PinState {
    /// Not found, or not readable: nothing to compare.
    NoFile,
    /// The pin matches the file: the schema may be used.
    Matches,
    /// The manifest has no pin for the id.
    Unpinned,
    /// The file's size or digest differs from the pin.
    Changed {
        /// The pinned digest.
        expected: manifest::Digest,
        /// The file's digest.
        found: manifest::Digest,
    },
}

impl Shared {
    /// The document, when it may be used: found, parsed and matching its pin.
    pub fn usable(&self) -> Option<&Value> {
        self.document.as_ref().filter(|_| self.pin == PinState::Matches)
    }
}

/// Where a `schema:<id>` reference resolves for one tool (or for a schema
/// file of the bundle): the one answer every reader of schemas uses.
#[derive(Clone, Debug)]
pub enum Resolved<'a> {
    /// `schema:<id>` is not a schema id (`/`, `..`, odd characters).
    InvalidId(&'a str),
    /// A file of the bundle: the tool's `schema_refs` target (`mapped`) or
    /// `schemas/<id>.json`; `document` when it parsed.
    Bundle {
        /// The bundle path.
        path: &'a str,
        /// Whether the tool's `schema_refs` named the path.
        mapped: bool,
        /// The parsed document.
        document: Option<&'a Value>,
    },
    /// Not in the bundle: what the shared registries have.
    Shared(&'a str, &'a Shared),
    /// In neither the bundle nor a registry (`path` is where the bundle would hold it).
    Missing(String),
}

impl<'a> Resolved<'a> {
    /// The document to validate with, if there is one that may be used.
    pub fn usable(&self) -> Option<&'a Value> {
        match self {
            Resolved::Bundle { document, .. } => *document,
            Resolved::Shared(_, shared) => shared.usable(),
            Resolved::InvalidId(_) | Resolved::Missing(_) => None,
        }
    }
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

    /// Where `reference` (`schema:<id>`) resolves for `tool` (`None`: in a
    /// schema file of the bundle): the tool's `schema_refs`, then the
    /// bundle's `schemas/<id>.json`, then the shared registries.
    pub fn locate_schema<'a>(&'a self, tool: Option<&'a Tool>, reference: &'a str) -> Resolved<'a> {
        if let Some(path) = mapped_path(tool, reference) {
            return Resolved::Bundle { path, mapped: true, document: self.schemas.get(path) };
        }
        let id = reference.strip_prefix(SCHEMA_SCHEME).unwrap_or(reference);
        if !is_valid_schema_id(id) {
            return Resolved::InvalidId(id);
        }
        let path = format!("schemas/{id}.json");
        if let Some(entry) = self.inventory.get(&path) {
            return Resolved::Bundle { path: &entry.path, mapped: false, document: self.schemas.get(&path) };
        }
        match self.shared.get_key_value(id) {
            Some((id, shared)) => Resolved::Shared(id, shared),
            None => Resolved::Missing(path),
        }
    }

    /// The schema documents `tool` can reference, keyed `schema:<id>`:
    /// every `schemas/<id>.json`, the shared schemas that match their pins,
    /// and the tool's `schema_refs`, each as [`LoadedBundle::locate_schema`]
    /// resolves it.
    pub fn schema_documents(&self, tool: Option<&Tool>) -> Arc<HashMap<String, Value>> {
        let ids = self
            .schemas
            .keys()
            .filter_map(|path| path.strip_prefix("schemas/")?.strip_suffix(".json"))
            .chain(self.shared.keys().map(String::as_str))
            .map(|id| format!("{SCHEMA_SCHEME}{id}"))
            .chain(tool.map_or(&[][..], |t| &t.schema_refs).iter().map(|(reference, _)| reference.clone()));
        let documents = ids
            .filter_map(|reference| {
                let document = self.locate_schema(tool, &reference).usable()?.clone();
                Some((reference, document))
            })
            .collect();
        Arc::new(documents)
    }

    /// The schema a tool's top-level schema value stands for: itself, or the
    /// document its `{"$ref": "schema:<id>[#fragment]"}` names.
    pub fn resolve_schema<'a>(&'a self, tool: &'a Tool, schema: &'a Value) -> Option<&'a Value> {
        let Some(target) = schema.get("$ref").and_then(Value::as_str) else { return Some(schema) };
        match schema::classify_ref(target) {
            schema::RefKind::Bundle { reference, fragment } => {
                let document = self.locate_schema(Some(tool), reference).usable()?;
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

/// Reads a bundle folder, with no shared schema registry.
pub fn load(dir: &Path) -> LoadedBundle {
    load_with(dir, &Registries::default())
}

/// Reads a bundle folder; a `schema:<id>` it does not hold is looked up in
/// `registries`.
pub fn load_with(dir: &Path, registries: &Registries) -> LoadedBundle {
    let mut bundle = LoadedBundle {
        dir: dir.to_path_buf(),
        manifest: None,
        grants: None,
        tools: None,
        schemas: BTreeMap::new(),
        sources: BTreeMap::new(),
        inventory: Inventory::default(),
        findings: Vec::new(),
        shared: BTreeMap::new(),
        registries: registries.clone(),
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
    if manifest::caps_file_problem(&caps_file).is_none()
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
    load_shared(&mut bundle);
    bundle
}

/// The `schema:<id>` references of `schema` that fall outside the bundle
/// for `tool`: not mapped by its `schema_refs`, no `schemas/<id>.json`.
fn outside_ids(bundle: &LoadedBundle, tool: Option<&Tool>, schema: &Value, out: &mut Vec<String>) {
    let mut sites = Vec::new();
    find_refs(schema, &pointer::Pointer::root(), &mut sites);
    for site in sites {
        if let RefKind::Bundle { reference, .. } = classify_ref(&site.target)
            && let Resolved::Missing(_) = bundle.locate_schema(tool, reference)
        {
            out.push(reference.strip_prefix(SCHEMA_SCHEME).unwrap_or(reference).to_string());
        }
    }
}

/// Looks up, in the shared registries, every `schema:<id>` that the
/// bundle's schemas (and the shared schemas they lead to) reference and
/// the bundle does not hold, and compares each file found with its pin.
fn load_shared(bundle: &mut LoadedBundle) {
    let mut pending = Vec::new();
    for tool in bundle.tool_list() {
        for schema in [&tool.input_schema, &tool.result_schema, &tool.options_schema].into_iter().flatten() {
            outside_ids(bundle, Some(tool), schema, &mut pending);
        }
    }
    for document in bundle.schemas.values() {
        outside_ids(bundle, None, document, &mut pending);
    }
    while let Some(id) = pending.pop() {
        if bundle.shared.contains_key(&id) {
            continue;
        }
        let lookup = bundle.registries.lookup(&id);
        let mut shared =
            Shared { found: lookup.found, shadowed: lookup.shadowed, document: None, pin: PinState::NoFile };
        if let Some((path, Ok(file))) = &shared.found {
            let mut diags = Diagnostics::new(path.clone());
            let source = SourceFile::new(path.clone(), file.text.clone(), Syntax::Json);
            shared.document = value::parse_json(&source, &mut diags);
            bundle.sources.insert(path.display().to_string(), source);
            bundle.findings.extend(diags.into_findings());
            let pin = bundle.manifest.as_ref().and_then(|m| m.shared_pin(&id));
            shared.pin = match pin.and_then(|p| p.blake3.map(|digest| (digest, p.size))) {
                None => PinState::Unpinned,
                Some((digest, size)) if digest == file.digest && size.is_none_or(|s| s == file.size) => {
                    PinState::Matches
                }
                Some((expected, _)) => PinState::Changed { expected, found: file.digest },
            };
        }
        let document = shared.document.clone();
        bundle.shared.insert(id, shared);
        if let Some(document) = &document {
            outside_ids(bundle, None, document, &mut pending);
        }
    }
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
