//! `policy.caps`: the capabilities a bundle is granted, and how grants combine.
//!
//! The same file schema serves the bundle's policy and operator overrides; the
//! difference is what a missing key means (bundle: not granted; override: not
//! restricted). [`Policy`] is the effective result, built by intersection:
//! effective = bundle ∩ override ∩ signer's trust rule.

use std::path::PathBuf;

use serde_json::Value;

use crate::bundle::capability::{Capability, NetTarget, SecretId, fs_covers, is_domain, parse_fs_path};
use crate::bundle::diag::{At, Code, Diagnostics};
use crate::bundle::pointer::Pointer;
use crate::bundle::reader::{Fields, type_name};

/// What a policy allows within one capability family.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope<T> {
    /// Everything in the family.
    Any,
    /// Only these entries (empty: nothing).
    Only(Vec<T>),
}

/// Grant entries that can contain one another.
pub trait Grant: Clone + PartialEq {
    /// Whether this grant covers `wanted`.
    fn covers(&self, wanted: &Self) -> bool;
}

impl Grant for NetTarget {
    fn covers(&self, wanted: &Self) -> bool {
        NetTarget::covers(self, wanted)
    }
}

impl Grant for PathBuf {
    fn covers(&self, wanted: &Self) -> bool {
        fs_covers(self, wanted)
    }
}

impl Grant for String {
    fn covers(&self, wanted: &Self) -> bool {
        self == wanted
    }
}

impl Grant for SecretId {
    fn covers(&self, wanted: &Self) -> bool {
        self == wanted
    }
}

impl<T: Grant> Scope<T> {
    /// Nothing granted.
    pub fn none() -> Self {
        Scope::Only(Vec::new())
    }

    /// Whether `wanted` is covered.
    pub fn allows(&self, wanted: &T) -> bool {
        match self {
            Scope::Any => true,
            Scope::Only(grants) => grants.iter().any(|g| g.covers(wanted)),
        }
    }

    /// What both scopes allow: each pair of grants contributes the narrower one.
    pub fn intersect(&self, other: &Self) -> Self {
        match (self, other) {
            (Scope::Any, x) | (x, Scope::Any) => x.clone(),
            (Scope::Only(a), Scope::Only(b)) => {
                let mut out: Vec<T> = Vec::new();
                for x in a {
                    for y in b {
                        let narrower = if x.covers(y) {
                            Some(y)
                        } else if y.covers(x) {
                            Some(x)
                        } else {
                            None
                        };
                        if let Some(g) = narrower
                            && !out.contains(g)
                        {
                            out.push(g.clone());
                        }
                    }
                }
                Scope::Only(out)
            }
        }
    }

    /// Whether nothing at all is granted.
    pub fn is_empty(&self) -> bool {
        matches!(self, Scope::Only(v) if v.is_empty())
    }
}

/// One policy file as written: every key optional.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grants {
    /// `fs`: absolute directories, or `~/…` ones kept as written.
    pub fs: Option<Vec<PathBuf>>,
    /// `net`: hosts and host:ports.
    pub net: Option<Vec<NetTarget>>,
    /// `time`.
    pub time: Option<bool>,
    /// `kb_read`: true (all) or a list of domains.
    pub kb_read: Option<Scope<String>>,
    /// `kb_write`: true (all) or a list of domains.
    pub kb_write: Option<Scope<String>>,
    /// `secrets`: secret ids.
    pub secrets: Option<Vec<SecretId>>,
    /// `model`.
    pub model: Option<bool>,
    /// `exec`.
    pub exec: Option<bool>,
}

/// The keys of `[capabilities]`.
pub const CAPABILITY_KEYS: &[&str] = &["fs", "net", "time", "kb_read", "kb_write", "secrets", "model", "exec"];

impl Grants {
    /// Reads a policy file's tree (`[capabilities]` table), reporting problems.
    pub fn from_value(root: &Value, diags: &mut Diagnostics) -> Grants {
        let mut grants = Grants::default();
        let Some(top) = Fields::of(root, Pointer::root(), "the policy file", &["capabilities"], diags) else {
            return grants;
        };
        top.finish(diags);
        let Some(caps) = top.table("capabilities", "[capabilities]", CAPABILITY_KEYS, false, diags) else {
            return grants;
        };
        caps.finish(diags);
        grants.fs = list(&caps, "fs", diags, parse_fs_path);
        grants.net = list(&caps, "net", diags, |s| s.parse());
        grants.secrets = list(&caps, "secrets", diags, |s| s.parse());
        grants.time = caps.boolean("time", diags);
        grants.model = caps.boolean("model", diags);
        grants.exec = caps.boolean("exec", diags);
        grants.kb_read = domains(&caps, "kb_read", diags);
        grants.kb_write = domains(&caps, "kb_write", diags);
        grants
    }
}

fn list<T>(
    caps: &Fields<'_>,
    key: &str,
    diags: &mut Diagnostics,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Option<Vec<T>> {
    caps.get(key)?;
    let items = caps
        .strings(key, diags)
        .into_iter()
        .filter_map(|(at, text)| match parse(text) {
            Ok(item) => Some(item),
            Err(why) => {
                diags.report(Code::PolicyValueInvalid, At::Value(at), format!("invalid `{key}` grant: {why}"));
                None
            }
        })
        .collect();
    Some(items)
}

fn domains(caps: &Fields<'_>, key: &str, diags: &mut Diagnostics) -> Option<Scope<String>> {
    match caps.get(key)? {
        Value::Bool(true) => Some(Scope::Any),
        Value::Bool(false) => Some(Scope::none()),
        Value::Array(_) => list(caps, key, diags, |d| {
            if is_domain(d) {
                Ok(d.to_string())
            } else {
                Err(format!("`{d}` is not a domain name (lower case, digits, _ - .)"))
            }
        })
        .map(Scope::Only),
        other => {
            diags.report(
                Code::WrongType,
                At::Value(caps.at(key)),
                format!("`{key}` must be true, false or a list of domains, found {}", type_name(other)),
            );
            None
        }
    }
}

/// An effective policy: what is granted, family by family.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Directories.
    pub fs: Scope<PathBuf>,
    /// Hosts.
    pub net: Scope<NetTarget>,
    /// Knowledge-base read domains.
    pub kb_read: Scope<String>,
    /// Knowledge-base write domains.
    pub kb_write: Scope<String>,
    /// Secret ids.
    pub secrets: Scope<SecretId>,
    /// The clock.
    pub time: bool,
    /// The model.
    pub model: bool,
    /// Running processes.
    pub exec: bool,
}

impl Policy {
    /// Nothing granted.
    pub fn empty() -> Self {
        Policy {
            fs: Scope::none(),
            net: Scope::none(),
            kb_read: Scope::none(),
            kb_write: Scope::none(),
            secrets: Scope::none(),
            time: false,
            model: false,
            exec: false,
        }
    }

    /// Everything granted (the identity of intersection).
    pub fn unrestricted() -> Self {
        Policy {
            fs: Scope::Any,
            net: Scope::Any,
            kb_read: Scope::Any,
            kb_write: Scope::Any,
            secrets: Scope::Any,
            time: true,
            model: true,
            exec: true,
        }
    }

    /// A bundle's own policy: a missing key grants nothing.
    pub fn from_bundle(grants: &Grants) -> Self {
        Self::from_grants(grants, &Policy::empty())
    }

    /// An override as a policy: a missing key restricts nothing.
    pub fn from_override(grants: &Grants) -> Self {
        Self::from_grants(grants, &Policy::unrestricted())
    }

    fn from_grants(g: &Grants, missing: &Policy) -> Self {
        Policy {
            fs: g.fs.clone().map_or(missing.fs.clone(), Scope::Only),
            net: g.net.clone().map_or(missing.net.clone(), Scope::Only),
            kb_read: g.kb_read.clone().unwrap_or(missing.kb_read.clone()),
            kb_write: g.kb_write.clone().unwrap_or(missing.kb_write.clone()),
            secrets: g.secrets.clone().map_or(missing.secrets.clone(), Scope::Only),
            time: g.time.unwrap_or(missing.time),
            model: g.model.unwrap_or(missing.model),
            exec: g.exec.unwrap_or(missing.exec),
        }
    }

    /// A policy that grants exactly the listed capabilities (a trust rule's `allow_caps`).
    pub fn from_capabilities<'a>(caps: impl IntoIterator<Item = &'a Capability>) -> Self {
        let mut policy = Policy::empty();
        fn add<T: Grant>(scope: &mut Scope<T>, item: Option<T>) {
            match (scope, item) {
                (scope, None) => *scope = Scope::Any,
                (Scope::Only(list), Some(item)) => list.push(item),
                (Scope::Any, Some(_)) => {}
            }
        }
        for cap in caps {
            match cap {
                Capability::Exec => policy.exec = true,
                Capability::Time => policy.time = true,
                Capability::Model => policy.model = true,
                Capability::Net(t) => add(&mut policy.net, Some(t.clone())),
                Capability::Fs(p) => add(&mut policy.fs, Some(p.clone())),
                Capability::KbRead(d) => add(&mut policy.kb_read, d.clone()),
                Capability::KbWrite(d) => add(&mut policy.kb_write, d.clone()),
                Capability::Secret(s) => add(&mut policy.secrets, Some(s.clone())),
            }
        }
        policy
    }

    /// What both policies grant.
    pub fn intersect(&self, other: &Policy) -> Policy {
        Policy {
            fs: self.fs.intersect(&other.fs),
            net: self.net.intersect(&other.net),
            kb_read: self.kb_read.intersect(&other.kb_read),
            kb_write: self.kb_write.intersect(&other.kb_write),
            secrets: self.secrets.intersect(&other.secrets),
            time: self.time && other.time,
            model: self.model && other.model,
            exec: self.exec && other.exec,
        }
    }

    /// Whether one capability is granted.
    pub fn allows(&self, cap: &Capability) -> bool {
        let domain = |scope: &Scope<String>, d: &Option<String>| match d {
            Some(d) => scope.allows(d),
            None => *scope == Scope::Any,
        };
        match cap {
            Capability::Exec => self.exec,
            Capability::Time => self.time,
            Capability::Model => self.model,
            Capability::Net(t) => self.net.allows(t),
            Capability::Fs(p) => self.fs.allows(p),
            Capability::KbRead(d) => domain(&self.kb_read, d),
            Capability::KbWrite(d) => domain(&self.kb_write, d),
            Capability::Secret(s) => self.secrets.allows(s),
        }
    }

    /// Every grant as a capability string (an `Any` family as its bare form,
    /// e.g. `kb_read`; an unrestricted fs, net or secrets family as `fs:/`,
    /// and so on is not listable and is skipped).
    pub fn capabilities(&self) -> Vec<Capability> {
        let mut out = Vec::new();
        let flags = [(self.exec, Capability::Exec), (self.time, Capability::Time), (self.model, Capability::Model)];
        out.extend(flags.into_iter().filter(|(on, _)| *on).map(|(_, c)| c));
        if let Scope::Only(list) = &self.fs {
            out.extend(list.iter().cloned().map(Capability::Fs));
        }
        if let Scope::Only(list) = &self.net {
            out.extend(list.iter().cloned().map(Capability::Net));
        }
        for (scope, make) in [
            (&self.kb_read, Capability::KbRead as fn(Option<String>) -> Capability),
            (&self.kb_write, Capability::KbWrite),
        ] {
            match scope {
                Scope::Any => out.push(make(None)),
                Scope::Only(list) => out.extend(list.iter().cloned().map(|d| make(Some(d)))),
            }
        }
        if let Scope::Only(list) = &self.secrets {
            out.extend(list.iter().cloned().map(Capability::Secret));
        }
        out
    }
}

/// The policy.caps line that grants `cap`, e.g. `net = ["api.example.com"]`.
///
/// `net_hint` overrides how a network grant is written (a URL's host without
/// its default port).
pub fn grant_line(cap: &Capability, net_hint: Option<&str>) -> String {
    match cap {
        Capability::Exec => "exec = true".into(),
        Capability::Time => "time = true".into(),
        Capability::Model => "model = true".into(),
        Capability::Net(target) => format!("net = [\"{}\"]", net_hint.map_or(target.to_string(), str::to_string)),
        Capability::Fs(path) => format!("fs = [\"{}\"]", path.display()),
        Capability::KbRead(None) => "kb_read = true".into(),
        Capability::KbRead(Some(d)) => format!("kb_read = [\"{d}\"]"),
        Capability::KbWrite(None) => "kb_write = true".into(),
        Capability::KbWrite(Some(d)) => format!("kb_write = [\"{d}\"]"),
        Capability::Secret(id) => format!("secrets = [\"{id}\"]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(toml: &str) -> Grants {
        let mut diags = Diagnostics::new("policy.caps");
        let (value, _) = crate::bundle::value::parse_toml(toml, &mut diags).unwrap();
        let grants = Grants::from_value(&value, &mut diags);
        assert!(diags.into_findings().is_empty());
        grants
    }

    #[test]
    fn override_only_revokes() {
        let bundle = Policy::from_bundle(&grants(
            "[capabilities]\nnet = [\"api.x\", \"localhost:8080\"]\nexec = true\nkb_read = true\nfs = [\"/home/u\"]\n",
        ));
        let over = Policy::from_override(&grants(
            "[capabilities]\nnet = [\"api.x:443\", \"evil.example\"]\nfs = [\"/home/u/work\"]\n",
        ));
        let effective = bundle.intersect(&over);
        assert!(effective.exec, "absent key in an override restricts nothing");
        assert!(effective.allows(&"net:api.x:443".parse().unwrap()));
        assert!(!effective.allows(&"net:api.x:80".parse().unwrap()));
        assert!(!effective.allows(&"net:localhost:8080".parse().unwrap()));
        assert!(!effective.allows(&"net:evil.example".parse().unwrap()), "an override cannot add");
        assert!(effective.allows(&"fs:/home/u/work/notes".parse().unwrap()));
        assert!(!effective.allows(&"fs:/home/u/workshop".parse().unwrap()));
        assert!(effective.allows(&"kb_read:any".parse().unwrap()));
    }

    #[test]
    fn trust_rule_limits_families() {
        let bundle =
            Policy::from_bundle(&grants("[capabilities]\nkb_read = [\"a\"]\nexec = true\nnet = [\"localhost\"]\n"));
        let caps: Vec<Capability> = ["kb_read", "net:localhost"].iter().map(|c| c.parse().unwrap()).collect();
        let rule = Policy::from_capabilities(&caps);
        let effective = bundle.intersect(&rule);
        assert!(!effective.exec);
        assert!(effective.allows(&"kb_read:a".parse().unwrap()));
        assert_eq!(bundle.capabilities().len(), 3);
        assert!(bundle.capabilities().iter().all(|c| c != &Capability::Exec || !rule.allows(c)));
    }
}
