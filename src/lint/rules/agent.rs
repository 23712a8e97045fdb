//! RLP101–RLP105: the `[agent]` table.

use crate::bundle::LoadedBundle;
use crate::bundle::diag::{At, Code, Diagnostics, Finding};
use crate::bundle::manifest::{EntryKind, MANIFEST_FILE, NAME_PATTERN, is_valid_name};
use crate::bundle::pointer::Pointer;

pub(super) fn check(bundle: &LoadedBundle, out: &mut Vec<Finding>) {
    let Some(manifest) = &bundle.manifest else { return };
    let mut diags = Diagnostics::new(bundle.display_path(MANIFEST_FILE));
    let agent = Pointer::root().key("agent");
    if let Some(name) = &manifest.name {
        if !is_valid_name(name) {
            diags
                .report(
                    Code::AgentNameInvalid,
                    At::Value(agent.key("name")),
                    format!("agent name `{name}` does not match {NAME_PATTERN}"),
                )
                .help("use lower-case letters, digits and `_`, starting with a letter");
        } else if let Some(folder) = bundle.folder_name()
            && folder != *name
        {
            diags
                .report(
                    Code::AgentNameMismatch,
                    At::Value(agent.key("name")),
                    format!("agent name `{name}` differs from the folder name `{folder}`"),
                )
                .help(format!("rename the folder to `{name}`, or set `name = \"{folder}\"`"));
        }
    }
    if let Some(version) = &manifest.version
        && let Err(e) = semver::Version::parse(version)
    {
        diags
            .report(
                Code::AgentVersionInvalid,
                At::Value(agent.key("version")),
                format!("version `{version}` is not SemVer: {e}"),
            )
            .help("write MAJOR.MINOR.PATCH, e.g. `0.1.0`");
    }
    if let Some(description) = &manifest.description
        && description.trim().contains(['\n', '\r'])
    {
        diags
            .report(
                Code::AgentDescriptionMultiline,
                At::Value(agent.key("description")),
                "the agent description spans more than one line",
            )
            .help("write one line saying what the agent does; longer text belongs in README.md");
    }
    let entry_key = manifest.entry.as_ref().and_then(|e| e.at.segments().last().cloned());
    match (manifest.kind, &manifest.entry) {
        (Some(kind), None) => {
            diags
                .report(
                    Code::AgentEntryInvalid,
                    At::Value(agent.key("kind")),
                    format!("kind needs `{}` in [agent]", kind.entry_key()),
                )
                .help(format!("add `{} = {{ path = \"bin/…\", blake3 = \"…\" }}`, or remove `kind`", kind.entry_key()));
        }
        (kind, Some(entry)) => {
            let expected = kind.map(EntryKind::entry_key);
            let actual = match &entry_key {
                Some(crate::bundle::pointer::Segment::Key(k)) => k.as_str(),
                _ => "",
            };
            if expected != Some(actual) {
                let message = match kind {
                    None => format!("`{actual}` is set but [agent] has no `kind`"),
                    Some(kind) => format!("kind needs `{}`, but the manifest has `{actual}`", kind.entry_key()),
                };
                diags.report(Code::AgentEntryInvalid, At::Key(entry.at.clone()), message).help(
                    "use `kind = \"wasm32-wasip1\"` with `entry_wasm`, or `kind = \"native-shim\"` with `entry_native`",
                );
            }
        }
        (None, None) => {}
    }
    out.extend(diags.into_findings());
}
