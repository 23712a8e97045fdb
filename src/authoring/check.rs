//! Checks would-be tool entries with lint's own rules before anything is
//! written: the entries (and the schema files they bring) are staged in a
//! private temporary bundle next to copies of the bundle's schemas, the
//! staged bundle is linted, and the findings about the new entries are kept.
//! Grants (RLP4xx) are left to the caller, which adds them or says what to add.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::authoring::AuthoringError;
use crate::authoring::spec::ToolDraft;
use crate::bundle::diag::{At, Code, Severity};
use crate::bundle::manifest::{MANIFEST_FILE, is_valid_artifact_path};
use crate::bundle::pointer::Segment;
use crate::bundle::tools::TOOLS_FILE;

/// Codes that do not concern a tool entry on its own.
const IGNORED: &[Code] = &[
    Code::CapabilityNotGranted,
    Code::SecretNotGranted,
    Code::AgentNameMismatch,
    Code::ArtifactMissing,
    Code::ArtifactUnlisted,
    Code::ArtifactSizeMismatch,
    Code::ArtifactDigestMismatch,
    Code::ArtifactPlaceholderDigest,
    // The staged copy has no program files; the bundle's own lint checks them.
    Code::BundleProgramInvalid,
    Code::CommandInsideBundle,
];

/// A finding about a staged entry, as one printable line (plus help).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EntryFinding {
    /// Error or warning.
    pub severity: Severity,
    /// The rule.
    pub code: Code,
    /// The id of the draft it is about, where it is about one.
    pub tool: Option<String>,
    /// `tool `<id>`, transport/url: message`.
    pub text: String,
    /// How to fix it.
    pub help: Option<String>,
}

impl std::fmt::Display for EntryFinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}[{}] {}", self.severity.as_str(), self.code, self.text)?;
        if let Some(help) = &self.help {
            write!(f, "\n    help: {help}")?;
        }
        Ok(())
    }
}

/// Lints `drafts` as if they were the only tools of the bundle at
/// `bundle_dir` (whose `schemas/` are visible to them). Returns every finding
/// about the drafts and the schema files they create.
pub(crate) fn lint_drafts(bundle_dir: &Path, drafts: &[&ToolDraft]) -> Result<Vec<EntryFinding>, AuthoringError> {
    let stage = tempfile::Builder::new()
        .prefix("rlp-check-")
        .tempdir()
        .map_err(|e| AuthoringError::usage(format!("cannot create a temporary folder: {e}")))?;
    let root = stage.path().join("bundle");
    let write = |relative: &str, bytes: &[u8]| -> Result<PathBuf, AuthoringError> {
        let path = root.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| AuthoringError::io("create", parent, &e))?;
        }
        crate::fsutil::write_atomic(&path, bytes, None).map_err(|e| AuthoringError::io("write", &path, &e))?;
        Ok(path)
    };
    write(MANIFEST_FILE, b"[agent]\nname = \"bundle\"\nversion = \"0.1.0\"\n")?;
    let entries: Vec<Value> = drafts.iter().map(|d| Value::Object(d.entry.clone())).collect();
    let tools = serde_json::to_string_pretty(&json!({"version": 1, "tools": entries}))
        .map_err(|e| AuthoringError::usage(format!("cannot serialise the tool: {e}")))?;
    write(TOOLS_FILE, tools.as_bytes())?;
    for path in existing_schema_files(bundle_dir, drafts) {
        let source = bundle_dir.join(&path);
        let regular = std::fs::symlink_metadata(&source).is_ok_and(|m| m.is_file());
        if regular && let Ok(bytes) = crate::fsutil::read_limited(&source, crate::bundle::MAX_TEXT_FILE_BYTES) {
            write(&path, &bytes)?;
        }
    }
    let mut new_files = Vec::new();
    for draft in drafts {
        for (path, document) in &draft.schema_files {
            let text = serde_json::to_string_pretty(document).unwrap_or_default();
            new_files.push(write(path, text.as_bytes())?);
        }
    }
    let report = crate::lint::lint_bundle(&root, &Default::default());
    let tools_path = root.join(TOOLS_FILE);
    Ok(report
        .findings
        .into_iter()
        .map(|l| l.finding)
        .filter(|f| !IGNORED.contains(&f.code))
        .filter(|f| f.file == tools_path || new_files.contains(&f.file))
        .map(|f| {
            let (place, draft) = if f.file == tools_path {
                (describe_place(&f.at, drafts), draft_index(&f.at).and_then(|i| drafts.get(i)))
            } else {
                let path = f.file.strip_prefix(&root).unwrap_or(&f.file).display().to_string();
                let draft = drafts.iter().find(|d| d.schema_files.iter().any(|(p, _)| *p == path));
                (path, draft)
            };
            EntryFinding {
                severity: f.severity,
                code: f.code,
                tool: draft.map(|d| d.id().to_string()),
                text: format!("{place}: {}", f.message),
                help: f.help,
            }
        })
        .collect())
}

/// Like [`lint_drafts`], but an error finding refuses the drafts: the
/// result is the warnings, or an input error listing every finding.
pub(crate) fn check_drafts(bundle_dir: &Path, drafts: &[&ToolDraft]) -> Result<Vec<EntryFinding>, AuthoringError> {
    let findings = lint_drafts(bundle_dir, drafts)?;
    if findings.iter().any(|f| f.severity == Severity::Error) {
        let failing = |d: &&&ToolDraft| {
            findings.iter().any(|f| f.severity == Severity::Error && f.tool.as_deref() == Some(d.id()))
        };
        let named: Vec<&&ToolDraft> = drafts.iter().filter(failing).collect();
        let named = if named.is_empty() { drafts.iter().collect() } else { named };
        let ids: Vec<String> = named.iter().map(|d| format!("`{}`", d.id())).collect();
        let lines: Vec<String> = findings.iter().map(|f| format!("  {f}")).collect();
        return Err(AuthoringError::usage(format!(
            "the {} {} would not pass lint:\n{}",
            if ids.len() == 1 { "tool" } else { "tools" },
            ids.join(", "),
            lines.join("\n")
        ))
        .with_help("fix the values named above; nothing was written"));
    }
    Ok(findings)
}

/// The index of the draft a pointer into the staged tools.json is in.
fn draft_index(at: &At) -> Option<usize> {
    match at {
        At::Value(p) | At::Key(p) => match p.segments() {
            [Segment::Key(tools), Segment::Index(i), ..] if tools == "tools" => Some(*i),
            _ => None,
        },
        At::File | At::Span(_) => None,
    }
}

/// `tool `<id>`, transport/url` for a pointer into the staged tools.json.
fn describe_place(at: &At, drafts: &[&ToolDraft]) -> String {
    let pointer = match at {
        At::Value(p) | At::Key(p) => p,
        At::File | At::Span(_) => return TOOLS_FILE.to_string(),
    };
    match pointer.segments() {
        [Segment::Key(tools), Segment::Index(i), rest @ ..] if tools == "tools" => {
            let id = drafts.get(*i).map_or("?", |d| d.id());
            let rest: Vec<String> = rest
                .iter()
                .map(|s| match s {
                    Segment::Key(k) => k.clone(),
                    Segment::Index(i) => i.to_string(),
                })
                .collect();
            if rest.is_empty() { format!("tool `{id}`") } else { format!("tool `{id}`, {}", rest.join("/")) }
        }
        _ => format!("{TOOLS_FILE} {pointer}"),
    }
}

/// The bundle's schema files the drafts may reference: every
/// `schemas/*.json` and each `schema_refs` target.
fn existing_schema_files(bundle_dir: &Path, drafts: &[&ToolDraft]) -> Vec<String> {
    let mut paths: Vec<String> = std::fs::read_dir(bundle_dir.join("schemas"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().to_str().map(|n| format!("schemas/{n}")))
        .filter(|p| p.ends_with(".json") && is_valid_artifact_path(p))
        .collect();
    for draft in drafts {
        if let Some(Value::Object(refs)) = draft.entry.get("schema_refs") {
            for target in refs.values().filter_map(Value::as_str) {
                if is_valid_artifact_path(target) && !paths.iter().any(|p| p == target) {
                    paths.push(target.to_string());
                }
            }
        }
    }
    paths
}
