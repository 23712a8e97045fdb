//! RLP401, RLP402: every capability a tool needs is granted by policy.caps
//! (what an `mcp` tool's server needs is RLP220's, in `servers`).

use crate::bundle::LoadedBundle;
use crate::bundle::capability::{Capability, SecretId};
use crate::bundle::diag::{At, Code, Diagnostics, Finding};
use crate::bundle::pointer::Pointer;
use crate::bundle::policy::{Policy, grant_line};
use crate::bundle::tools::{TOOLS_FILE, Transport};
use crate::bundle::url_template::UrlTemplate;

/// The bundle's policy and its file name, when lint can say what it grants:
/// not without a manifest, nor when the policy file exists but did not parse
/// (that is reported already).
pub(super) fn known_policy(bundle: &LoadedBundle) -> Option<(Policy, &str)> {
    let manifest = bundle.manifest.as_ref()?;
    if bundle.grants.is_none() && bundle.sources.contains_key(&manifest.caps_file) {
        return None;
    }
    Some((bundle.policy(), manifest.caps_file.as_str()))
}

pub(super) fn check(bundle: &LoadedBundle, out: &mut Vec<Finding>) {
    let Some((policy, caps_file)) = known_policy(bundle) else { return };
    let mut diags = Diagnostics::new(bundle.display_path(TOOLS_FILE));
    for tool in bundle.tool_list() {
        // What the tool's server needs is reported once, at the server (RLP220).
        let server_needs = bundle.tools.as_ref().and_then(|f| f.server_of(tool)).map(|s| s.required_capabilities());
        let needer = Needer {
            named: format!("tool `{}`", tool.id),
            declared: &tool.capabilities,
            secrets: &tool.secrets,
            runs_at: tool.at.key("transport").key("kind"),
            url: match &tool.transport {
                Some(Transport::Http { url: Some(url), .. }) => Some(url),
                _ => None,
            },
            url_at: tool.at.key("transport").key("url"),
            at: tool.at.clone(),
        };
        for cap in tool.required_capabilities() {
            if policy.allows(&cap) || server_needs.as_ref().is_some_and(|needs| needs.contains(&cap)) {
                continue;
            }
            let code =
                if matches!(cap, Capability::Secret(_)) { Code::SecretNotGranted } else { Code::CapabilityNotGranted };
            needer.report_ungranted(&cap, code, caps_file, "", &mut diags);
        }
    }
    out.extend(diags.into_findings());
}

/// A tool or a server, as the grants it needs are reported.
pub(super) struct Needer<'a> {
    /// As messages name it: ``tool `mail.send` ``.
    pub named: String,
    /// Its `capabilities`.
    pub declared: &'a [(Pointer, Capability)],
    /// Its `secrets`.
    pub secrets: &'a [(Pointer, SecretId)],
    /// Where it says it runs a command (implying `exec`).
    pub runs_at: Pointer,
    /// The URL implying a `net:` grant, if any.
    pub url: Option<&'a UrlTemplate>,
    /// Where that URL is.
    pub url_at: Pointer,
    /// The entry itself.
    pub at: Pointer,
}

impl Needer<'_> {
    /// Reports that `caps_file` does not grant `cap`, at the place that
    /// needs it; `help_tail` is added to the hint.
    pub(super) fn report_ungranted(
        &self,
        cap: &Capability,
        code: Code,
        caps_file: &str,
        help_tail: &str,
        diags: &mut Diagnostics,
    ) {
        let declared = self.declared.iter().find(|(_, c)| c == cap).map(|(at, _)| at.clone());
        // The URL's own spelling of its host is used only for the grant the
        // URL implies, never for a declared `net:` capability.
        let url = self.url.filter(|_| declared.is_none());
        let (at, why) = match (cap, declared) {
            (_, Some(at)) => (at, "declares"),
            (Capability::Exec, None) => (self.runs_at.clone(), "runs a command and so needs"),
            (Capability::Net(_), None) => (self.url_at.clone(), "calls a URL and so needs"),
            (Capability::Secret(id), None) => {
                let at = self.secrets.iter().find(|(_, s)| s == id).map(|(at, _)| at.clone());
                (at.unwrap_or_else(|| self.at.key("secrets")), "uses the secret and so needs")
            }
            (_, None) => (self.at.clone(), "needs"),
        };
        let shown = match (cap, url) {
            (Capability::Net(_), Some(url)) => format!("net:{}", url.suggested_grant()),
            _ => cap.to_string(),
        };
        diags
            .report(code, At::Value(at), format!("{} {why} `{shown}`, which {caps_file} does not grant", self.named))
            .help(format!(
                "add `{}` under [capabilities] in {caps_file}{help_tail}",
                grant_line(cap, url.map(|u| u.suggested_grant()))
            ));
    }
}
