//! `rlp tools add`: one new tool into a bundle's tools.json, checked with
//! lint's rules first; grants added to policy.caps on request; digests
//! brought up to date.

use serde_json::{Map, Value};

use crate::authoring::AuthoringError;
use crate::authoring::check::{EntryFinding, check_drafts};
use crate::authoring::edited::Editable;
use crate::authoring::policy_edit::{Needed, PolicyDoc, needed_by_entries};
use crate::authoring::spec::ToolDraft;
use crate::authoring::target::BundleTarget;
use crate::authoring::tools_file::ToolsDoc;

/// What adding a tool did.
#[derive(Debug)]
pub(crate) struct Added {
    /// The new tool's id.
    pub id: String,
    /// Schema files created (bundle paths).
    pub schema_files: Vec<String>,
    /// Grants outcome.
    pub grants: GrantOutcome,
    /// Lint warnings about the new entry (errors refuse it).
    pub warnings: Vec<EntryFinding>,
}

/// Grants the new tools need, as handled.
#[derive(Debug, Default)]
pub(crate) struct GrantOutcome {
    /// Lines added to the policy file (with `--grant`).
    pub added: Vec<String>,
    /// Grants still missing (without `--grant`).
    pub missing: Vec<Needed>,
}

/// Adds `draft` to the bundle; with `grant`, also what it needs to policy.caps.
pub(crate) fn add(target: &BundleTarget, draft: ToolDraft, grant: bool) -> Result<Added, AuthoringError> {
    let mut tools = ToolsDoc::read(&target.dir)?;
    let id = draft.id().to_string();
    if tools.get(&id).is_some() {
        return Err(AuthoringError::usage(format!(
            "{} already has a tool `{id}`; nothing was changed",
            tools.path().display()
        ))
        .with_help("choose another id; to change the existing tool, edit tools.json and run `rlp digest`"));
    }
    let warnings = check_drafts(&target.dir, &[&draft])?;
    tools.add(draft.entry.clone())?;
    let new_files: Vec<(String, Value)> =
        draft.schema_files.into_iter().filter(|(path, _)| !target.dir.join(path).exists()).collect();
    let grants = plan_grants(target, std::slice::from_ref(&draft.entry), grant)?;
    commit(target, &tools, grants.1.as_ref(), &new_files)?;
    Ok(Added { id, schema_files: new_files.into_iter().map(|(p, _)| p).collect(), grants: grants.0, warnings })
}

/// Works out the grants `entries` need: added to a policy document (returned
/// for writing) with `grant`, else listed as missing.
pub(crate) fn plan_grants(
    target: &BundleTarget,
    entries: &[Map<String, Value>],
    grant: bool,
) -> Result<(GrantOutcome, Option<PolicyDoc>), AuthoringError> {
    let mut policy = PolicyDoc::read(&target.caps_path)?;
    let mut outcome = GrantOutcome::default();
    for needed in needed_by_entries(entries.iter()) {
        if grant {
            if policy.grant(&needed)? {
                outcome.added.push(needed.line());
            }
        } else if !policy.policy().allows(&needed.capability) {
            outcome.missing.push(needed);
        }
    }
    let changed = policy.changed();
    Ok((outcome, if grant && changed { Some(policy) } else { None }))
}

/// Writes new schema files, tools.json and the policy (each atomically),
/// then brings the digests up to date.
pub(crate) fn commit(
    target: &BundleTarget,
    tools: &ToolsDoc,
    policy: Option<&PolicyDoc>,
    new_files: &[(String, Value)],
) -> Result<(), AuthoringError> {
    for (path, document) in new_files {
        let full = target.dir.join(path);
        let mut text = serde_json::to_string_pretty(document).unwrap_or_default();
        text.push('\n');
        crate::fsutil::write_atomic(&full, text.as_bytes(), None)
            .map_err(|e| AuthoringError::io("write", &full, &e))?;
    }
    if tools.changed() {
        tools.write()?;
    }
    if let Some(policy) = policy {
        policy.write()?;
    }
    target.redigest()
}
