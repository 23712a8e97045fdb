//! Exposure: what a runtime lets a model see and call. The operator's lists
//! of the agent's tools (`[agents.<agent>.tools] allow`/`deny` in
//! config.toml, `rlp serve --tools`) decide first, then the effective policy
//! (bundle ∩ operator override) decides each capability a tool needs; each
//! decision has its reason. `tools/list`, the search and description of
//! `--expose core`, `rlp tools list` and every call ask here.

use std::path::{Path, PathBuf};

use crate::bundle::capability::Capability;
use crate::bundle::diag::Diagnostics;
use crate::bundle::policy::{Grant, Grants, Policy, Scope, grant_line};
use crate::bundle::source::Position;
use crate::bundle::value::load_toml;
use crate::config::Source;
use crate::config::tool_list::{Patterns, ToolList, place};
use crate::event::Decision;
use crate::runtime::Runtime;
use crate::runtime::call::Call;
use crate::runtime::error::{CallError, CallErrorKind};

/// The policy a runtime enforces, and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EffectivePolicy {
    /// The bundle's own policy.caps.
    pub bundle: Policy,
    /// The operator override file, when one exists.
    pub override_file: Option<PathBuf>,
    /// bundle ∩ override.
    pub effective: Policy,
}

impl EffectivePolicy {
    /// A policy with no override.
    pub fn new(bundle: Policy) -> Self {
        EffectivePolicy { effective: bundle.clone(), bundle, override_file: None }
    }

    /// Decides one capability, saying why.
    pub fn decide(&self, cap: &Capability) -> (Decision, String) {
        if self.effective.allows(cap) {
            let reason = match &self.override_file {
                Some(path) => format!("granted by policy.caps, not revoked by {}", path.display()),
                None => "granted by policy.caps".to_string(),
            };
            return (Decision::Allow, reason);
        }
        if !self.bundle.allows(cap) {
            return (Decision::Deny, "policy.caps does not grant it".to_string());
        }
        let path =
            self.override_file.as_deref().map_or_else(|| "the operator override".into(), |p| p.display().to_string());
        (Decision::Deny, format!("revoked by the operator override {path}"))
    }
}

/// The `capability` of the audit frame of the operator's lists' decision.
pub(crate) const LIST_AUDIT: &str = "tool";

/// What the operator's lists say of one tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListDecision<'l> {
    /// Allowed or denied.
    pub decision: Decision,
    /// Why, naming the list's file or flag.
    pub reason: String,
    /// The list that denies it.
    pub denied_by: Option<&'l Patterns>,
}

/// What the operator's `list` says of tool `id`: `None` when no list is
/// set (the policy alone decides). A deny pattern of any layer wins; else
/// the tool must match a pattern of every allow list.
pub fn decide_listed<'l>(list: &'l ToolList, id: &str) -> Option<ListDecision<'l>> {
    if list.is_empty() {
        return None;
    }
    let denied =
        |reason: String, by: &'l Patterns| ListDecision { decision: Decision::Deny, reason, denied_by: Some(by) };
    for deny in &list.deny {
        if let Some(pattern) = deny.matching(id) {
            return Some(denied(format!("denied by the operator's list {} (\"{pattern}\")", deny.place()), deny));
        }
    }
    if let Some(allow) = list.allow.iter().find(|allow| allow.matching(id).is_none()) {
        return Some(denied(format!("not allowed by the operator's list {}", allow.place()), allow));
    }
    let verb = if list.allow.is_empty() { "not denied" } else { "allowed" };
    Some(ListDecision {
        decision: Decision::Allow,
        reason: format!("{verb} by the operator's list {}", list.places()),
        denied_by: None,
    })
}

/// What to do about a tool `list` denies: where the list is changed.
fn list_help(list: &Patterns, agent: &str, id: &str) -> String {
    match &list.source {
        Source::Flag(flag) => {
            format!("serve with a {flag} pattern that matches it (e.g. {flag} {id}), or without {flag}")
        }
        Source::SystemConfig(path) | Source::SystemPolicy(path) => format!(
            "the system config {} lists the tools of `{agent}` under [agents.{agent}.tools]; only its administrator can change that",
            path.display()
        ),
        source => format!("change `allow`/`deny` under [agents.{agent}.tools] {}", place(source)),
    }
}

impl Runtime {
    /// Whether tool `id` is exposed: the operator's lists let it through
    /// and the effective policy grants every capability it needs.
    pub fn is_exposed(&self, id: &str) -> bool {
        let listed = decide_listed(self.tool_list(), id).is_none_or(|d| d.decision == Decision::Allow);
        listed
            && self.tool(id).is_some_and(|t| {
                t.required_capabilities().iter().all(|c: &Capability| self.policy().effective.allows(c))
            })
    }
}

impl Call<'_> {
    /// Step 1: the operator's lists let the tool through and every
    /// capability it needs is granted, each decision an audit frame. A
    /// granted secret the tool lists in `secrets` is audited when it is
    /// resolved (step 3), naming the provider.
    pub(crate) fn expose(&mut self) -> Result<(), CallError> {
        let tool = self.tool();
        if let Some(listed) = decide_listed(self.runtime.tool_list(), &tool.id) {
            self.journal.audit_named(LIST_AUDIT, listed.decision, &listed.reason);
            if let Some(list) = listed.denied_by {
                let message = format!("tool `{}` is not exposed: {}", tool.id, listed.reason);
                let help = list_help(list, self.runtime.agent(), &tool.id);
                return Err(self.journal.refuse(CallError::new(CallErrorKind::Refused, message).help(help)));
            }
        }
        let policy = self.runtime.policy();
        let mut denied = Vec::new();
        for cap in tool.required_capabilities() {
            let (decision, reason) = policy.decide(&cap);
            let resolved_later = matches!(&cap, Capability::Secret(id) if tool.secrets.iter().any(|(_, s)| s == id));
            if decision == Decision::Allow && resolved_later {
                self.journal.unresolved_secrets.push((cap, reason));
                continue;
            }
            self.journal.audit(&cap, decision, &reason);
            if decision == Decision::Deny {
                denied.push((cap, reason));
            }
        }
        if !denied.is_empty() {
            return Err(self.journal.refuse(denied_error(policy, &tool.id, &denied)));
        }
        Ok(())
    }
}

/// The refusal of a call of `tool` that needs what `policy` does not
/// grant (each capability with the policy's reason), saying where to grant it.
pub(crate) fn denied_error(policy: &EffectivePolicy, tool: &str, denied: &[(Capability, String)]) -> CallError {
    let listed: Vec<String> = denied.iter().map(|(cap, reason)| format!("`{cap}` ({reason})")).collect();
    let message = format!("tool `{tool}` is not exposed: it needs {}", listed.join(", "));
    let help = if denied.iter().all(|(cap, _)| !policy.bundle.allows(cap)) {
        let lines: Vec<String> = denied.iter().map(|(cap, _)| grant_line(cap, None)).collect();
        format!("grant it under [capabilities] in policy.caps ({}), then run `rlp digest`", lines.join("; "))
    } else {
        "the operator override revokes it; edit or remove the override file to allow the call".to_string()
    };
    CallError::new(CallErrorKind::Refused, message).help(help)
}

/// Reads an override file's text and intersects it with the bundle policy.
///
/// Returns the effective policy and warnings for override entries that
/// reach beyond what the bundle grants (only their overlap applies).
///
/// Fails closed: every finding is an error, warnings included — an unknown
/// table or key (`[Capabilities]`, `exec = false` outside `[capabilities]`)
/// would otherwise be ignored, and the revocation the operator wrote would
/// silently not happen. The error names the file, line and column.
pub fn apply_override(bundle: Policy, path: &Path, text: &str) -> Result<(EffectivePolicy, Vec<String>), String> {
    let mut diags = Diagnostics::new(path);
    let (source, value) = load_toml(path.to_path_buf(), text.to_string(), &mut diags);
    let grants = value.map(|v| Grants::from_value(&v, &mut diags));
    if let Some(finding) = diags.into_findings().into_iter().next() {
        let position = source.locate(&finding.at).map_or(Position { line: 1, column: 1 }, |s| source.position(s.start));
        let help = finding.help.map(|h| format!(" ({h})")).unwrap_or_default();
        return Err(format!("{}:{}:{}: {}{help}", path.display(), position.line, position.column, finding.message));
    }
    let grants = grants.unwrap_or_default();
    let warnings = beyond_bundle(&bundle, &grants)
        .into_iter()
        .map(|entry| {
            format!(
                "{}: `{entry}` reaches beyond the bundle's policy.caps; an override can only narrow, so only what the bundle grants of it applies",
                path.display()
            )
        })
        .collect();
    let effective = bundle.intersect(&Policy::from_override(&grants));
    Ok((EffectivePolicy { bundle, override_file: Some(path.to_path_buf()), effective }, warnings))
}

/// The override entries not covered by the bundle's own grants.
pub fn beyond_bundle(bundle: &Policy, grants: &Grants) -> Vec<String> {
    let mut out = Vec::new();
    fn listed<T: Grant>(out: &mut Vec<String>, key: &str, scope: &Scope<T>, items: &[T], show: impl Fn(&T) -> String) {
        for item in items {
            if !scope.allows(item) {
                out.push(format!("{key} = [\"{}\"]", show(item)));
            }
        }
    }
    if let Some(fs) = &grants.fs {
        listed(&mut out, "fs", &bundle.fs, fs, |p| p.display().to_string());
    }
    if let Some(net) = &grants.net {
        listed(&mut out, "net", &bundle.net, net, |t| t.to_string());
    }
    if let Some(secrets) = &grants.secrets {
        listed(&mut out, "secrets", &bundle.secrets, secrets, |s| s.to_string());
    }
    for (key, wanted, has) in
        [("time", grants.time, bundle.time), ("model", grants.model, bundle.model), ("exec", grants.exec, bundle.exec)]
    {
        if wanted == Some(true) && !has {
            out.push(format!("{key} = true"));
        }
    }
    for (key, wanted, scope) in
        [("kb_read", &grants.kb_read, &bundle.kb_read), ("kb_write", &grants.kb_write, &bundle.kb_write)]
    {
        match wanted {
            Some(Scope::Any) if *scope != Scope::Any => out.push(format!("{key} = true")),
            Some(Scope::Only(domains)) => listed(&mut out, key, scope, domains, String::clone),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(text: &str) -> Policy {
        Policy::from_bundle(&crate::bundle::parse_policy(text).0.unwrap())
    }

    #[test]
    fn override_revokes_and_warns_about_additions() {
        let b = bundle("[capabilities]\nexec = true\nnet = [\"api.x:443\"]\nkb_read = [\"a\"]\n");
        let path = Path::new("/h/caps/overrides/m.toml");
        let (policy, warnings) = apply_override(
            b,
            path,
            "[capabilities]\nexec = false\nnet = [\"api.x\", \"evil.example\"]\nmodel = true\nkb_read = true\n",
        )
        .unwrap();
        assert_eq!(
            warnings,
            [
                "/h/caps/overrides/m.toml: `net = [\"api.x\"]` reaches beyond the bundle's policy.caps; an override can only narrow, so only what the bundle grants of it applies",
                "/h/caps/overrides/m.toml: `net = [\"evil.example\"]` reaches beyond the bundle's policy.caps; an override can only narrow, so only what the bundle grants of it applies",
                "/h/caps/overrides/m.toml: `model = true` reaches beyond the bundle's policy.caps; an override can only narrow, so only what the bundle grants of it applies",
                "/h/caps/overrides/m.toml: `kb_read = true` reaches beyond the bundle's policy.caps; an override can only narrow, so only what the bundle grants of it applies",
            ]
        );
        assert!(!policy.effective.model);
        assert!(policy.effective.allows(&"net:api.x:443".parse().unwrap()));
        assert!(!policy.effective.allows(&"net:evil.example:443".parse().unwrap()));
        let (decision, reason) = policy.decide(&Capability::Exec);
        assert_eq!(decision, Decision::Deny);
        assert_eq!(reason, "revoked by the operator override /h/caps/overrides/m.toml");
        assert_eq!(policy.decide(&Capability::Time), (Decision::Deny, "policy.caps does not grant it".into()));
        let (decision, reason) = policy.decide(&"kb_read:a".parse().unwrap());
        assert_eq!(decision, Decision::Allow);
        assert!(reason.starts_with("granted by policy.caps, not revoked by"));
    }

    #[test]
    fn bad_override_is_an_error() {
        let err = apply_override(Policy::empty(), Path::new("/o.toml"), "[capabilities]\nnet = [\"http://x\"]\n")
            .unwrap_err();
        assert!(err.starts_with("/o.toml:2:8: invalid `net` grant"), "{err}");
    }

    #[test]
    fn an_override_with_unknown_keys_or_tables_fails_closed() {
        let b = bundle("[capabilities]\nexec = true\n");
        let path = Path::new("/o.toml");
        for (text, at) in [
            ("exec = false\n", "/o.toml:1:1: "),
            ("[Capabilities]\nexec = false\n", "/o.toml:1:2: "),
            ("[capability]\nexec = false\n", "/o.toml:1:2: "),
            ("[capabilities]\nexec = false\nexecute = false\n", "/o.toml:3:1: "),
        ] {
            let err = apply_override(b.clone(), path, text).unwrap_err();
            assert!(err.starts_with(at), "{text:?}: {err}");
            assert!(err.contains("unknown key"), "{text:?}: {err}");
        }
    }

    #[test]
    fn the_operators_lists_deny_first_then_every_allow_list_must_match() {
        use crate::config::tool_list::Patterns;
        let patterns = |texts: &[&str], source: Source| Patterns {
            patterns: texts.iter().map(|t| t.parse().unwrap()).collect(),
            source,
        };
        let system = || Source::SystemConfig("/etc/s.toml".into());
        let list = ToolList {
            allow: vec![
                patterns(&["issues.*", "repos.get"], system()),
                patterns(&["issues.list", "issues.delete"], Source::Flag("--tools".into())),
            ],
            deny: vec![patterns(&["*.delete"], Source::UserConfig("/h/c.toml".into()))],
        };
        let decide = |id: &str| decide_listed(&list, id).map(|d| (d.decision, d.reason));
        assert_eq!(
            decide("issues.list"),
            Some((Decision::Allow, "allowed by the operator's list in /etc/s.toml, of --tools, in /h/c.toml".into()))
        );
        assert_eq!(
            decide("issues.delete"),
            Some((Decision::Deny, "denied by the operator's list in /h/c.toml (\"*.delete\")".into()))
        );
        assert_eq!(
            decide("pulls.list"),
            Some((Decision::Deny, "not allowed by the operator's list in /etc/s.toml".into()))
        );
        assert_eq!(decide("repos.get"), Some((Decision::Deny, "not allowed by the operator's list of --tools".into())));
        let denying = ToolList { allow: Vec::new(), deny: list.deny.clone() };
        assert_eq!(
            decide_listed(&denying, "repos.get").map(|d| d.reason),
            Some("not denied by the operator's list in /h/c.toml".into())
        );
        assert_eq!(decide_listed(&ToolList::default(), "repos.get"), None);
        // Where each list is changed.
        assert_eq!(
            list_help(&list.allow[1], "github", "repos.get"),
            "serve with a --tools pattern that matches it (e.g. --tools repos.get), or without --tools"
        );
        assert_eq!(
            list_help(&list.allow[0], "github", "pulls.list"),
            "the system config /etc/s.toml lists the tools of `github` under [agents.github.tools]; only its administrator can change that"
        );
        assert_eq!(
            list_help(&list.deny[0], "github", "issues.delete"),
            "change `allow`/`deny` under [agents.github.tools] in /h/c.toml"
        );
    }
}
