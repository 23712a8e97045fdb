//! RLP401, RLP402: every capability a tool needs is granted by policy.caps.

use crate::bundle::LoadedBundle;
use crate::bundle::capability::Capability;
use crate::bundle::diag::{At, Code, Diagnostics, Finding};
use crate::bundle::policy::grant_line;
use crate::bundle::tools::{TOOLS_FILE, Transport};

pub(super) fn check(bundle: &LoadedBundle, out: &mut Vec<Finding>) {
    let Some(manifest) = &bundle.manifest else { return };
    if bundle.grants.is_none() && bundle.sources.contains_key(&manifest.caps_file) {
        // The policy file exists but did not parse: that is reported already,
        // and nothing can be said about what it grants.
        return;
    }
    let policy = bundle.policy();
    let caps_file = &manifest.caps_file;
    let mut diags = Diagnostics::new(bundle.display_path(TOOLS_FILE));
    for tool in bundle.tool_list() {
        for cap in tool.required_capabilities() {
            if policy.allows(&cap) {
                continue;
            }
            let declared = tool.capabilities.iter().find(|(_, c)| *c == cap).map(|(at, _)| at.clone());
            // The URL's own spelling of its host is used only for the grant the
            // URL implies, never for a declared `net:` capability.
            let url = match &tool.transport {
                Some(Transport::Http { url: Some(url), .. }) if declared.is_none() => Some(url),
                _ => None,
            };
            let (at, why) = match (&cap, declared) {
                (_, Some(at)) => (at, "declares"),
                (Capability::Exec, None) => (tool.at.key("transport").key("kind"), "runs a command and so needs"),
                (Capability::Net(_), None) => (tool.at.key("transport").key("url"), "calls a URL and so needs"),
                (Capability::Secret(id), None) => {
                    let at = tool.secrets.iter().find(|(_, s)| s == id).map(|(at, _)| at.clone());
                    (at.unwrap_or_else(|| tool.at.key("secrets")), "uses the secret and so needs")
                }
                (_, None) => (tool.at.clone(), "needs"),
            };
            let shown = match (&cap, url) {
                (Capability::Net(_), Some(url)) => format!("net:{}", url.suggested_grant()),
                _ => cap.to_string(),
            };
            let code =
                if matches!(cap, Capability::Secret(_)) { Code::SecretNotGranted } else { Code::CapabilityNotGranted };
            diags
                .report(
                    code,
                    At::Value(at),
                    format!("tool `{}` {why} `{shown}`, which {caps_file} does not grant", tool.id),
                )
                .help(format!(
                    "add `{}` under [capabilities] in {caps_file}",
                    grant_line(&cap, url.map(|u| u.suggested_grant()))
                ));
        }
    }
    out.extend(diags.into_findings());
}
