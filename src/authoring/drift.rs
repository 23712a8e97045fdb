//! `rlp lint --check-tools`: ask each exec binary of a bundle for its own
//! definitions (the `schema` action), and each MCP server for its tools
//! (`tools/list`), and report where tools.json differs.
//!
//! For a server, drift is a tool it lists that no tool of the bundle calls,
//! a tool of the bundle it no longer lists, and a definition that no longer
//! matches its pin (`definition_blake3`), with the parts that differ from
//! the bundle's copy.
//!
//! Binaries are asked once per distinct command and arguments. A binary that
//! does not answer the action (missing, not executable, not supporting it) is
//! not an error, but it is reported as not checked, so nobody takes its
//! silence for agreement.
//! A field is drift when a new `rlp tools import` would write it
//! ([`crate::authoring::import::merge`]): a field the binary owns that differs,
//! or one the binary states that tools.json lacks. Fields an author adds or
//! edits in tools.json (`description`, `requires_confirmation`, tags, …) are
//! never drift.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::authoring::import::{Limits, Source, describe, merge};
use crate::authoring::tools_file::ToolsDoc;
use crate::bundle::command;
use crate::bundle::diag::Diagnostics;
use crate::bundle::tools::{TOOLS_FILE, ToolsFile};
use crate::runtime::mcp::list_tools;
use crate::runtime::mcp::pin::{self, ToolChange};
use crate::sandbox::SandboxMode;
use crate::text::terminal_safe_line;

/// How a bundle's tool and its binary's answer differ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DriftKind {
    /// The binary describes a tool tools.json does not have.
    MissingFromBundle,
    /// tools.json has a tool (run by this binary) the binary no longer describes.
    MissingFromBinary,
    /// A field differs.
    FieldDiffers(String),
    /// An MCP server's definition of the tool no longer matches its pin
    /// (with the parts that differ from the bundle's copy).
    PinChanged(String),
}

/// One difference between tools.json and a binary's `schema` answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Drift {
    /// The tool id.
    pub tool: String,
    /// Who was asked: a binary's path, or ``MCP server `name` ``.
    pub source: String,
    /// What differs.
    pub kind: DriftKind,
}

impl fmt::Display for Drift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let command = &self.source;
        match &self.kind {
            DriftKind::MissingFromBundle => {
                write!(f, "tool `{}` is described by {command} but not in tools.json", self.tool)
            }
            DriftKind::MissingFromBinary => {
                write!(f, "tool `{}` runs {command}, which no longer describes it", self.tool)
            }
            DriftKind::FieldDiffers(field) => {
                write!(f, "tool `{}`: `{field}` differs from what {command} describes", self.tool)
            }
            DriftKind::PinChanged(parts) => write!(
                f,
                "tool `{}`: {command} changed its definition since it was pinned ({parts}); calls are refused until it is re-imported",
                self.tool
            ),
        }
    }
}

/// A binary that gave no usable `schema` answer, or an MCP server that was
/// not asked or did not list its tools: its tools were not checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Unchecked {
    /// Who was asked: a binary's path, or ``MCP server `name` ``.
    pub source: String,
    /// Why its answer could not be used.
    pub why: String,
    /// Whether it is an MCP server (else a binary).
    pub server: bool,
}

/// What `--check-tools` found in one bundle.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ToolCheck {
    /// Each difference between tools.json and the binaries' answers.
    pub drifts: Vec<Drift>,
    /// Each binary that could not be asked.
    pub unchecked: Vec<Unchecked>,
}

/// Asks every exec binary of the bundle; reports each difference and each
/// binary that gave no usable answer.
pub(crate) fn check(bundle_dir: &Path, sandbox: SandboxMode) -> ToolCheck {
    let mut report = ToolCheck::default();
    let Ok(tools) = ToolsDoc::read(bundle_dir) else { return report };
    let root = bundle_dir.canonicalize().unwrap_or_else(|_| bundle_dir.to_path_buf());
    let mut sources: Vec<(PathBuf, Vec<String>)> = Vec::new();
    for entry in tools.entries() {
        if let Some(source) = exec_source(entry, &root)
            && !sources.contains(&source)
        {
            sources.push(source);
        }
    }
    let out = &mut report.drifts;
    for (command, args) in sources {
        let source = Source { command: command.clone(), args: args.clone(), limits: Limits::default(), sandbox };
        let described = match describe(&source, bundle_dir) {
            Ok(described) => described,
            Err(why) => {
                report.unchecked.push(Unchecked { source: command.display().to_string(), why, server: false });
                continue;
            }
        };
        for answer in &described {
            let id = answer.get("id").and_then(Value::as_str).unwrap_or_default();
            match tools.get(id) {
                None => out.push(Drift {
                    tool: id.to_string(),
                    source: command.display().to_string(),
                    kind: DriftKind::MissingFromBundle,
                }),
                Some(entry) => {
                    for field in merge(entry, answer.clone(), false).1.updated {
                        out.push(Drift {
                            tool: id.to_string(),
                            source: command.display().to_string(),
                            kind: DriftKind::FieldDiffers(field),
                        });
                    }
                }
            }
        }
        for entry in tools.entries() {
            let id = entry.get("id").and_then(Value::as_str).unwrap_or_default();
            let runs_it = exec_source(entry, &root).is_some_and(|s| s == (command.clone(), args.clone()));
            if runs_it && !described.iter().any(|a| a.get("id").and_then(Value::as_str) == Some(id)) {
                out.push(Drift {
                    tool: id.to_string(),
                    source: command.display().to_string(),
                    kind: DriftKind::MissingFromBinary,
                });
            }
        }
    }
    check_servers(bundle_dir, &root, sandbox, &mut report);
    report
}

/// Asks each MCP server of the bundle for its tools and compares them with
/// the pins of the bundle's tools. A server whose env or headers need a
/// secret is not started here (no secret is resolved by lint): it is
/// reported as not checked.
fn check_servers(bundle_dir: &Path, root: &Path, sandbox: SandboxMode, report: &mut ToolCheck) {
    let Ok(text) = crate::fsutil::read_text_limited(&bundle_dir.join(TOOLS_FILE), crate::bundle::MAX_TEXT_FILE_BYTES)
    else {
        return;
    };
    let Ok(document) = serde_json::from_str::<Value>(&text) else { return };
    let mut diags = Diagnostics::new(TOOLS_FILE);
    let Some(file) = ToolsFile::from_value(&document, &mut diags) else { return };
    for server in &file.servers {
        let source = format!("MCP server `{}`", server.name);
        if !server.secrets.is_empty() {
            let why = "it needs secrets, which lint does not resolve; `rlp tools import --mcp` checks it".to_string();
            report.unchecked.push(Unchecked { source, why, server: true });
            continue;
        }
        let definitions = match list_tools(server, root, sandbox, &[]) {
            Ok((_, definitions)) => definitions,
            Err(why) => {
                report.unchecked.push(Unchecked { source, why, server: true });
                continue;
            }
        };
        for change in pin::compare(&server.name, &file.tools, &definitions) {
            let (tool, kind) = match change {
                ToolChange::Added(name) => (format!("{}.{name}", server.name), DriftKind::MissingFromBundle),
                ToolChange::Gone(tool) => (tool.id.clone(), DriftKind::MissingFromBinary),
                ToolChange::Changed(tool, named) => (tool.id.clone(), DriftKind::PinChanged(named)),
            };
            report.drifts.push(Drift { tool, source: source.clone(), kind });
        }
    }
}

/// The command and arguments of an exec entry of the bundle at `root`
/// (canonical), `${bundle}` resolved, when the command is absolute then.
pub(crate) fn exec_source(entry: &Map<String, Value>, root: &Path) -> Option<(PathBuf, Vec<String>)> {
    let transport = entry.get("transport")?;
    if transport.get("kind").and_then(Value::as_str) != Some("exec") {
        return None;
    }
    let command = transport.get("command").and_then(Value::as_str).map(|c| command::resolve(c, root))?;
    let args = transport
        .get("args")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(|arg| command::resolve(arg, root)).collect())
        .unwrap_or_default();
    command.starts_with('/').then(|| (PathBuf::from(command), args))
}

/// The report of one bundle: a `drift:` line per difference, then a `note:`
/// line per binary not checked (empty when there is neither). Everything is
/// escaped for a terminal: ids, paths and reasons come from the bundle and
/// the binaries.
pub(crate) fn render(bundle_dir: &Path, check: &ToolCheck) -> String {
    let bundle = bundle_dir.display();
    let drifts = check.drifts.iter().map(|d| format!("drift: {bundle}: {d}"));
    let unchecked = check.unchecked.iter().map(|u| format!("note: {bundle}: {} was not checked: {}", u.source, u.why));
    drifts.chain(unchecked).map(|line| format!("{}\n", terminal_safe_line(&line))).collect()
}
