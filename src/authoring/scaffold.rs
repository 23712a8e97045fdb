//! `rlp agent scaffold`: a new bundle folder from an [`AgentPlan`].
//!
//! The bundle is built complete in a private folder next to the target
//! (`<root>/.rlp-scaffold-<id>/<name>/`): templates filled in, tools and their
//! schema files written, policy.caps granting what the plan and the tools
//! need, digests filled in, lint run. Only then is it renamed into place; with
//! `force`, the old folder is moved aside first and removed after the new one
//! is in place (and moved back if that fails). An interrupted scaffold leaves
//! the old folder, or nothing.

use std::path::{Path, PathBuf};

use crate::authoring::AuthoringError;
use crate::authoring::check::check_drafts;
use crate::authoring::edited::Editable;
use crate::authoring::example;
use crate::authoring::policy_edit::{Needed, PolicyDoc, needed_by_entries};
use crate::authoring::spec::{ToolDefinition, ToolDraft, TransportSpec};
use crate::authoring::templates;
use crate::authoring::tools_file::ToolsDoc;
use crate::bundle::capability::{Capability, SecretId};
use crate::bundle::diag::Severity;
use crate::bundle::manifest::MANIFEST_FILE;
use crate::lint::BundleReport;

/// Everything a new bundle is made from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AgentPlan {
    /// The agent (and folder) name.
    pub name: String,
    /// `[agent].description`.
    pub description: String,
    /// The model id, recorded in README.md and as a manifest comment.
    pub model: Option<String>,
    /// The secret that authenticates the model.
    pub model_secret: Option<SecretId>,
    /// Grants asked for directly (fs, net, kb, exec, time).
    pub grants: Vec<Needed>,
    /// The tools, in order.
    pub tools: Vec<ToolDefinition>,
    /// The script of the example tool (`--example`), written to
    /// [`example::SCRIPT_FILE`]; its entry is one of `tools`.
    pub example_script: Option<String>,
}

impl AgentPlan {
    /// A plan with defaults: description `<name> agent`, nothing else.
    pub(crate) fn new(name: &str) -> Self {
        AgentPlan {
            name: name.to_string(),
            description: default_description(name),
            model: None,
            model_secret: None,
            grants: Vec::new(),
            tools: Vec::new(),
            example_script: None,
        }
    }

    /// Every grant policy.caps gets: the plan's, the model's, then what the
    /// tools need, in that order and without repeats.
    pub(crate) fn all_grants(&self, drafts: &[ToolDraft]) -> Vec<Needed> {
        let mut out: Vec<Needed> = self.grants.clone();
        if self.model.is_some() {
            out.push(Needed { capability: crate::bundle::capability::Capability::Model, net_hint: None });
        }
        if let Some(secret) = &self.model_secret {
            out.push(Needed {
                capability: crate::bundle::capability::Capability::Secret(secret.clone()),
                net_hint: None,
            });
        }
        out.extend(needed_by_entries(drafts.iter().map(|d| &d.entry)));
        let mut unique: Vec<Needed> = Vec::new();
        for needed in out {
            if !unique.contains(&needed) {
                unique.push(needed);
            }
        }
        unique
    }

    /// An exec tool of a spec (the wizard's, `--tool`'s) that declares no
    /// `fs:` (or no `net:`) capability gets the folders (hosts) the agent is
    /// granted, so that its sandbox lets it reach what the agent may: the
    /// documented default that keeps fresh output clean under
    /// `rlp lint --deny-warnings` (RLP215). A tool that declares its own keeps
    /// them; entries written as JSON are taken as they are. One that gets a
    /// `net:` grant this way asks for confirmation, as network tools do.
    fn with_agent_grants(&self, tool: ToolDefinition) -> ToolDefinition {
        let ToolDefinition::Spec(mut spec) = tool else { return tool };
        if !matches!(spec.transport, TransportSpec::Exec { .. }) {
            return ToolDefinition::Spec(spec);
        }
        let kinds: [fn(&Capability) -> bool; 2] =
            [|c| matches!(c, Capability::Fs(_)), |c| matches!(c, Capability::Net(_))];
        for is_kind in kinds {
            if !spec.capabilities.iter().any(is_kind) {
                let inherited = self.grants.iter().map(|g| &g.capability).filter(|c| is_kind(c)).cloned();
                spec.capabilities.extend(inherited.collect::<Vec<_>>());
            }
        }
        // A tool that reaches the network asks before it runs, as any does by default.
        spec.confirm |= spec.capabilities.iter().any(|c| matches!(c, Capability::Net(_)));
        ToolDefinition::Spec(spec)
    }

    /// The tool entries and schema files, checked with lint's rules (an error
    /// refuses the plan).
    pub(crate) fn drafts(&self) -> Result<Vec<ToolDraft>, AuthoringError> {
        let mut drafts: Vec<ToolDraft> = Vec::new();
        for tool in &self.tools {
            let planned: Vec<String> =
                drafts.iter().flat_map(|d| d.schema_files.iter().map(|(p, _)| p.clone())).collect();
            let exists = |id: &str| planned.iter().any(|p| *p == format!("schemas/{id}.json"));
            let draft = self.with_agent_grants(tool.clone()).into_draft(&exists);
            if drafts.iter().any(|d| d.id() == draft.id()) {
                return Err(AuthoringError::usage(format!("two tools have the id `{}`", draft.id()))
                    .with_help("give each tool its own id"));
            }
            drafts.push(draft);
        }
        Ok(drafts)
    }
}

/// The default description.
pub(crate) fn default_description(name: &str) -> String {
    format!("{name} agent")
}

/// A scaffolded bundle.
#[derive(Debug)]
pub(crate) struct Scaffolded {
    /// The bundle folder.
    pub dir: PathBuf,
    /// Its files, manifest first, then in path order.
    pub files: Vec<String>,
    /// Whether an existing folder was replaced.
    pub replaced: bool,
    /// Lint of the bundle in place.
    pub report: BundleReport,
}

/// Builds the bundle for `plan` in `<root>/<name>/`.
pub(crate) fn scaffold(plan: &AgentPlan, root: &Path, force: bool) -> Result<Scaffolded, AuthoringError> {
    crate::authoring::validate::agent_name(&plan.name).map_err(AuthoringError::usage)?;
    let target = root.join(&plan.name);
    let replaced = check_target(&target, force)?;
    let drafts = plan.drafts()?;
    let created = missing_folders(root);
    let staging = root.join(format!(".rlp-scaffold-{}", uuid::Uuid::now_v7().simple()));
    let result = std::fs::create_dir_all(root)
        .map_err(|e| AuthoringError::io("create", root, &e))
        .and_then(|()| std::fs::create_dir(&staging).map_err(|e| AuthoringError::io("create", &staging, &e)))
        .and_then(|()| build_and_swap(plan, &drafts, &staging, &target, replaced));
    let _ = std::fs::remove_dir_all(&staging);
    if result.is_err() {
        // Only folders this call created, and only while empty.
        for dir in &created {
            let _ = std::fs::remove_dir(dir);
        }
    }
    result?;
    let _ = crate::fsutil::sync_dir(root);
    let report = crate::lint::lint_bundle(&target, &Default::default());
    let mut files = vec![MANIFEST_FILE.to_string()];
    files.extend(report.bundle.inventory.files.iter().map(|f| f.path.clone()));
    Ok(Scaffolded { dir: target, files, replaced, report })
}

/// The folders of `dir` and its ancestors that do not exist yet, deepest
/// first: what `create_dir_all(dir)` would create.
fn missing_folders(dir: &Path) -> Vec<PathBuf> {
    dir.ancestors()
        .filter(|d| !d.as_os_str().is_empty())
        .take_while(|d| std::fs::symlink_metadata(d).is_err())
        .map(Path::to_path_buf)
        .collect()
}

/// Refuses an existing target unless `force` and it is a bundle (or empty
/// folder); returns whether it exists.
fn check_target(target: &Path, force: bool) -> Result<bool, AuthoringError> {
    let meta = match std::fs::symlink_metadata(target) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(AuthoringError::io("inspect", target, &e)),
    };
    if !force {
        return Err(AuthoringError::usage(format!("{} already exists; nothing was changed", target.display()))
            .with_help("pass --force to replace it, or choose another name or --root"));
    }
    let is_bundle = meta.is_dir() && target.join(MANIFEST_FILE).is_file();
    let is_empty = meta.is_dir() && std::fs::read_dir(target).is_ok_and(|mut d| d.next().is_none());
    if !is_bundle && !is_empty {
        return Err(AuthoringError::usage(format!(
            "{} exists and is not a bundle folder (no manifest.toml); --force only replaces bundles",
            target.display()
        ))
        .with_help("move it away, or choose another name or --root"));
    }
    Ok(true)
}

fn build_and_swap(
    plan: &AgentPlan,
    drafts: &[ToolDraft],
    staging: &Path,
    target: &Path,
    replace: bool,
) -> Result<(), AuthoringError> {
    let bundle = staging.join(&plan.name);
    std::fs::create_dir(&bundle).map_err(|e| AuthoringError::io("create", &bundle, &e))?;
    let refs: Vec<&ToolDraft> = drafts.iter().collect();
    check_drafts(&bundle, &refs)?;
    write_files(plan, drafts, &bundle, target)?;
    crate::integrity::digest::write(&bundle, &Default::default())
        .map_err(|e| AuthoringError::failed(format!("digest: {e}")))?;
    let report = crate::lint::lint_bundle(&bundle, &Default::default());
    if report.count(Severity::Error) > 0 {
        let text = crate::lint::render::human(std::slice::from_ref(&report), false);
        return Err(AuthoringError::failed(format!(
            "the new bundle does not lint clean; nothing was written:\n{text}"
        )));
    }
    if replace {
        // The new bundle and the old swap places in one step (the old one
        // goes with the staging folder), so a stop at any moment leaves
        // one of them in place; where the file system cannot swap, the old
        // one is moved aside first, and back if the new one cannot go in.
        match crate::fsutil::exchange(&bundle, target) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
                let previous = staging.join("previous");
                std::fs::rename(target, &previous).map_err(|e| AuthoringError::io("move aside", target, &e))?;
                if let Err(e) = std::fs::rename(&bundle, target) {
                    let _ = std::fs::rename(&previous, target);
                    return Err(AuthoringError::io("move into place", target, &e));
                }
            }
            Err(e) => return Err(AuthoringError::io("move into place", target, &e)),
        }
    } else {
        std::fs::rename(&bundle, target).map_err(|e| AuthoringError::io("move into place", target, &e))?;
    }
    Ok(())
}

fn write_files(plan: &AgentPlan, drafts: &[ToolDraft], bundle: &Path, target: &Path) -> Result<(), AuthoringError> {
    let dir = target.display().to_string();
    let write_mode = |relative: &str, text: &str, mode: Option<u32>| {
        let path = bundle.join(relative);
        crate::fsutil::write_atomic(&path, text.as_bytes(), mode).map_err(|e| AuthoringError::io("write", &path, &e))
    };
    let write = |relative: &str, text: &str| write_mode(relative, text, None);
    let description = toml_edit::Value::from(plan.description.as_str()).to_string();
    let model_comment = match (&plan.model, &plan.model_secret) {
        (Some(model), Some(secret)) => {
            format!("# model: {model} (secret {secret}); recorded in README.md, the manifest has no model key\n")
        }
        (Some(model), None) => format!("# model: {model}; recorded in README.md, the manifest has no model key\n"),
        _ => String::new(),
    };
    let vars =
        [("name", plan.name.as_str()), ("description", description.trim()), ("model_comment", model_comment.as_str())];
    write(MANIFEST_FILE, &templates::fill(templates::MANIFEST, &vars))?;

    let mut policy = PolicyDoc::from_text(&bundle.join("policy.caps"), &templates::fill(templates::POLICY, &vars))?;
    for needed in plan.all_grants(drafts) {
        policy.grant(&needed)?;
    }
    policy.write()?;

    write("tools.json", templates::TOOLS)?;
    let mut tools = ToolsDoc::read(bundle)?;
    for draft in drafts {
        tools.add(draft.entry.clone())?;
        for (path, document) in &draft.schema_files {
            let mut text = serde_json::to_string_pretty(document).unwrap_or_default();
            text.push('\n');
            write(path, &text)?;
        }
    }
    if tools.changed() {
        tools.write()?;
    }

    let model = plan.model.as_deref().map_or("none chosen".to_string(), |m| format!("`{m}`"));
    let model_secret = plan.model_secret.as_ref().map_or("none".to_string(), |s| format!("`{s}`"));
    let tool_lines = if drafts.is_empty() {
        "None yet: add one with `rlp tools add` (see below), or import a binary's own definitions with `rlp tools import`.".to_string()
    } else {
        drafts.iter().map(readme_tool_line).collect::<Vec<_>>().join("\n")
    };
    let readme_vars = [
        ("name", plan.name.as_str()),
        ("dir", dir.as_str()),
        ("description", plan.description.as_str()),
        ("model", model.as_str()),
        ("model_secret", model_secret.as_str()),
        ("tools", tool_lines.as_str()),
    ];
    write("README.md", &templates::fill(templates::README, &readme_vars))?;
    match &plan.example_script {
        Some(script) => write_mode(example::SCRIPT_FILE, script, Some(0o755))?,
        None => write("bin/.gitkeep", "")?,
    }
    Ok(())
}

/// `- `id`: description (exec `/cmd`)`.
fn readme_tool_line(draft: &ToolDraft) -> String {
    let entry = &draft.entry;
    let description = entry.get("description").and_then(serde_json::Value::as_str).unwrap_or_default();
    let transport = entry.get("transport");
    let how = match transport.and_then(|t| t.get("kind")).and_then(serde_json::Value::as_str) {
        Some("exec") => {
            format!("exec `{}`", transport.and_then(|t| t.get("command")).and_then(|c| c.as_str()).unwrap_or_default())
        }
        Some("http") => format!(
            "http {} `{}`",
            transport.and_then(|t| t.get("method")).and_then(|c| c.as_str()).unwrap_or_default(),
            transport.and_then(|t| t.get("url")).and_then(|c| c.as_str()).unwrap_or_default()
        ),
        _ => "no transport".to_string(),
    };
    format!("- `{}`: {description} ({how})", draft.id())
}
