//! RLP214: two secret ids that earlier versions of rlp read from one
//! environment variable. Ids are taken in reading order — the tools'
//! `secrets`, then the policy's grant — and each pair is reported once, at
//! the first place the second id appears.

use std::collections::{HashMap, HashSet};

use crate::bundle::LoadedBundle;
use crate::bundle::capability::SecretId;
use crate::bundle::diag::{At, Code, Diagnostics, Finding};
use crate::bundle::pointer::Pointer;
use crate::bundle::tools::TOOLS_FILE;
use crate::bundle::value::parse_toml;
use serde_json::Value;

pub(super) fn check(bundle: &LoadedBundle, out: &mut Vec<Finding>) {
    let listed: Vec<(Pointer, SecretId)> = bundle.tool_list().iter().flat_map(|tool| tool.secrets.clone()).collect();
    let mut files = vec![(TOOLS_FILE, listed)];
    if let Some(manifest) = &bundle.manifest {
        files.push((manifest.caps_file.as_str(), granted_ids(bundle, &manifest.caps_file)));
    }
    let mut seen = HashSet::new();
    let mut first_by_legacy: HashMap<String, SecretId> = HashMap::new();
    for (file, ids) in files {
        let mut diags = Diagnostics::new(bundle.display_path(file));
        for (at, id) in ids {
            if !seen.insert(id.clone()) {
                continue;
            }
            let Some(legacy) = id.legacy_env_var() else { continue };
            let Some(first) = first_by_legacy.get(&legacy) else {
                first_by_legacy.insert(legacy, id);
                continue;
            };
            diags
                .report(
                    Code::SecretEnvNameShared,
                    At::Value(at),
                    format!(
                        "secrets `{first}` and `{id}` were both read from {legacy}; they are now read from {} and {}",
                        first.env_var(),
                        id.env_var()
                    ),
                )
                .help(format!("set each secret in its own variable; {legacy} is no longer read for either"));
        }
        out.extend(diags.into_findings());
    }
}

/// The valid ids of the policy file's `secrets` grant, each with its pointer
/// (the grants as loaded keep the ids only).
fn granted_ids(bundle: &LoadedBundle, caps_file: &str) -> Vec<(Pointer, SecretId)> {
    let Some(source) = bundle.sources.get(caps_file) else { return Vec::new() };
    // The file was parsed once already and its problems reported; these go nowhere.
    let mut ignored = Diagnostics::new(source.path());
    let Some((root, _)) = parse_toml(source.text(), &mut ignored) else { return Vec::new() };
    let at = Pointer::root().key("capabilities").key("secrets");
    let Some(Value::Array(items)) = root.pointer("/capabilities/secrets") else { return Vec::new() };
    items.iter().enumerate().filter_map(|(i, item)| Some((at.index(i), item.as_str()?.parse().ok()?))).collect()
}
