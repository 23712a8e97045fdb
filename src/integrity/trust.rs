//! `$RUNLOOP_HOME/trust-policy.toml`: trust anchors, their rules, revoked keys.
//!
//! ```toml
//! version = 1
//! [anchors.release]
//! key = "ed25519:…"
//! [rules.release]           # what bundles signed by this anchor may request
//! allow_caps = "any"        # or a list of capability strings
//! allow_exec = false        # optional
//! [revoked]
//! keys = ["<key id>"]       # refused everywhere, installed or not
//! ```
//!
//! Parsing is strict: unknown keys, wrong types, a rule without an anchor,
//! two anchors with one key, or another `version` are errors reported as
//! `file:line:col: message`. A missing file is an empty policy.
//!
//! Rule semantics: an anchor without a `[rules.NAME]` table may sign only
//! bundles that request no capability; a rule without `allow_caps` allows no
//! capability. `exec` is decided by `allow_exec` when it is present; when it
//! is absent, by `allow_caps` (`"any"`, or a list naming `exec`).

use std::collections::BTreeSet;
use std::ops::Range;
use std::path::Path;

use toml_edit::{Array, DocumentMut, Item, Table, TableLike, Value};

use crate::bundle::capability::Capability;
use crate::bundle::policy::Policy;
use crate::integrity::failure::{Failure, Reason};
use crate::integrity::keys::{KeyId, PublicKey};

/// The only trust-policy version this rlp reads and writes.
pub const VERSION: i64 = 1;
/// Largest trust-policy file read.
const MAX_POLICY_BYTES: u64 = 16 << 20;

/// What a rule lets bundles request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AllowCaps {
    /// Any capability.
    Any,
    /// Only these (each also covers narrower grants, e.g. `kb_read` covers `kb_read:drafts`).
    Only(Vec<Capability>),
}

/// `[rules.NAME]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// `allow_caps`.
    pub allow_caps: AllowCaps,
    /// `allow_exec`, if written.
    pub allow_exec: Option<bool>,
}

impl Rule {
    /// The rule that allows nothing (an anchor without a rule).
    pub fn nothing() -> Rule {
        Rule { allow_caps: AllowCaps::Only(Vec::new()), allow_exec: None }
    }

    /// Whether bundles may request `exec`.
    pub fn exec_allowed(&self) -> bool {
        match (self.allow_exec, &self.allow_caps) {
            (Some(allowed), _) => allowed,
            (None, AllowCaps::Any) => true,
            (None, AllowCaps::Only(list)) => list.contains(&Capability::Exec),
        }
    }

    /// The rule as a policy.
    pub fn policy(&self) -> Policy {
        let mut policy = match &self.allow_caps {
            AllowCaps::Any => Policy::unrestricted(),
            AllowCaps::Only(list) => Policy::from_capabilities(list),
        };
        policy.exec = self.exec_allowed();
        policy
    }

    /// The first requested capability the rule does not allow.
    pub fn first_denied(&self, requested: &[Capability]) -> Option<Capability> {
        let policy = self.policy();
        requested.iter().find(|cap| !policy.allows(cap)).cloned()
    }

    /// A short description, e.g. `any capability except exec`.
    pub fn describe(&self) -> String {
        let exec = self.exec_allowed();
        match &self.allow_caps {
            AllowCaps::Any if exec => "any capability".into(),
            AllowCaps::Any => "any capability except exec".into(),
            AllowCaps::Only(list) => {
                let mut names: Vec<String> =
                    list.iter().filter(|c| **c != Capability::Exec).map(|c| c.to_string()).collect();
                if exec {
                    names.push("exec".into());
                }
                if names.is_empty() { "no capability".into() } else { names.join(", ") }
            }
        }
    }
}

/// `[anchors.NAME]` with its rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Anchor {
    /// The anchor's name.
    pub name: String,
    /// Its public key.
    pub key: PublicKey,
    /// `[rules.NAME]`, if present.
    pub rule: Option<Rule>,
}

impl Anchor {
    /// The anchor's key id.
    pub fn key_id(&self) -> KeyId {
        self.key.key_id()
    }

    /// The rule in force (none written: nothing allowed).
    pub fn effective_rule(&self) -> Rule {
        self.rule.clone().unwrap_or_else(Rule::nothing)
    }
}

/// A parsed trust policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustPolicy {
    /// Anchors, in file order.
    pub anchors: Vec<Anchor>,
    /// Revoked key ids.
    pub revoked: BTreeSet<KeyId>,
}

/// Whether `name` is a valid anchor name: `^[a-z][a-z0-9_-]*$`.
pub fn is_valid_anchor_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

impl TrustPolicy {
    /// Reads the policy file; a missing file is an empty policy.
    pub fn load(path: &Path) -> Result<TrustPolicy, Failure> {
        match read(path)? {
            Some(text) => TrustPolicy::parse(&text, path),
            None => Ok(TrustPolicy::default()),
        }
    }

    /// Parses policy text; `path` names the file in messages.
    pub fn parse(text: &str, path: &Path) -> Result<TrustPolicy, Failure> {
        Parser { text, path }.parse()
    }

    /// The anchor whose key has this id.
    pub fn anchor_for(&self, id: KeyId) -> Option<&Anchor> {
        self.anchors.iter().find(|a| a.key_id() == id)
    }

    /// The anchor whose public key is `key`: the whole key, where a key id
    /// is only 64 bits of its hash (what trusts a signature).
    pub fn anchor_with_key(&self, key: &PublicKey) -> Option<&Anchor> {
        self.anchors.iter().find(|a| a.key == *key)
    }

    /// The anchor called `name`.
    pub fn anchor_named(&self, name: &str) -> Option<&Anchor> {
        self.anchors.iter().find(|a| a.name == name)
    }

    /// Whether a key id is revoked.
    pub fn is_revoked(&self, id: KeyId) -> bool {
        self.revoked.contains(&id)
    }
}

fn read(path: &Path) -> Result<Option<String>, Failure> {
    let bytes = match crate::fsutil::read_limited(path, MAX_POLICY_BYTES) {
        Ok(bytes) => bytes,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(Failure::read(path, e, Reason::TrustPolicy)),
    };
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| Failure::new(Reason::TrustPolicy, format!("{} is not UTF-8 text", path.display())))
}

struct Parser<'a> {
    text: &'a str,
    path: &'a Path,
}

impl Parser<'_> {
    fn error(&self, span: Option<Range<usize>>, message: impl Into<String>) -> Failure {
        let offset = span.map_or(0, |s| s.start.min(self.text.len()));
        let before = &self.text[..self.text.floor_char_boundary(offset)];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        Failure::new(Reason::TrustPolicy, format!("{}:{line}:{column}: {}", self.path.display(), message.into()))
            .with_help("fix the file by hand, or edit it with `rlp trust add` / `rlp trust revoke`")
    }

    fn table<'t>(&self, item: &'t Item, what: &str) -> Result<&'t dyn TableLike, Failure> {
        item.as_table_like().ok_or_else(|| self.error(item.span(), format!("{what} must be a table")))
    }

    fn only_keys(&self, table: &dyn TableLike, known: &[&str], what: &str) -> Result<(), Failure> {
        for (key, item) in table.iter() {
            if !known.contains(&key) {
                let span = table.get_key_value(key).and_then(|(k, _)| k.span()).or_else(|| item.span());
                let expected =
                    if known.is_empty() { String::new() } else { format!("; expected {}", known.join(", ")) };
                return Err(self.error(span, format!("unknown key `{key}` in {what}{expected}")));
            }
        }
        Ok(())
    }

    fn parse(&self) -> Result<TrustPolicy, Failure> {
        let doc = toml_edit::Document::parse(self.text).map_err(|e| self.error(e.span(), e.message().trim_end()))?;
        let root = doc.as_table();
        self.only_keys(root, &["version", "anchors", "rules", "revoked"], "the trust policy")?;
        match root.get("version") {
            None => return Err(self.error(None, "missing `version = 1` at the top of the file")),
            Some(item) => match item.as_integer() {
                Some(VERSION) => {}
                Some(other) => {
                    return Err(
                        self.error(item.span(), format!("version {other} is not supported; this rlp reads version 1"))
                    );
                }
                None => return Err(self.error(item.span(), "`version` must be the integer 1")),
            },
        }
        let mut policy = TrustPolicy::default();
        if let Some(item) = root.get("anchors") {
            for (name, anchor) in self.table(item, "`anchors`")?.iter() {
                let what = format!("[anchors.{name}]");
                if !is_valid_anchor_name(name) {
                    return Err(
                        self.error(anchor.span(), format!("anchor name `{name}` must match ^[a-z][a-z0-9_-]*$"))
                    );
                }
                let table = self.table(anchor, &what)?;
                self.only_keys(table, &["key"], &what)?;
                let Some(key_item) = table.get("key") else {
                    return Err(self.error(anchor.span(), format!("{what} needs `key = \"ed25519:…\"`")));
                };
                let key = key_item
                    .as_str()
                    .ok_or_else(|| self.error(key_item.span(), format!("{what} `key` must be a string")))
                    .and_then(|text| PublicKey::parse(text).map_err(|why| self.error(key_item.span(), why)))?;
                if let Some(other) = policy.anchors.iter().find(|a: &&Anchor| a.key == key) {
                    return Err(self.error(
                        key_item.span(),
                        format!("anchors `{}` and `{name}` have the same key; keep one", other.name),
                    ));
                }
                policy.anchors.push(Anchor { name: name.to_string(), key, rule: None });
            }
        }
        if let Some(item) = root.get("rules") {
            for (name, rule) in self.table(item, "`rules`")?.iter() {
                let what = format!("[rules.{name}]");
                let table = self.table(rule, &what)?;
                self.only_keys(table, &["allow_caps", "allow_exec"], &what)?;
                let parsed = self.rule(table, &what)?;
                let Some(anchor) = policy.anchors.iter_mut().find(|a| a.name == name) else {
                    return Err(self.error(rule.span(), format!("{what} has no matching [anchors.{name}]")));
                };
                anchor.rule = Some(parsed);
            }
        }
        if let Some(item) = root.get("revoked") {
            let table = self.table(item, "[revoked]")?;
            self.only_keys(table, &["keys"], "[revoked]")?;
            if let Some(keys) = table.get("keys") {
                let array = keys
                    .as_array()
                    .ok_or_else(|| self.error(keys.span(), "[revoked] `keys` must be a list of key ids"))?;
                for value in array.iter() {
                    let id = value
                        .as_str()
                        .ok_or_else(|| {
                            self.error(value.span(), "a revoked key must be a string of 16 lower-case hex digits")
                        })?
                        .parse::<KeyId>()
                        .map_err(|why| self.error(value.span(), why))?;
                    policy.revoked.insert(id);
                }
            }
        }
        Ok(policy)
    }

    fn rule(&self, table: &dyn TableLike, what: &str) -> Result<Rule, Failure> {
        let allow_caps = match table.get("allow_caps") {
            None => AllowCaps::Only(Vec::new()),
            Some(item) => match (item.as_str(), item.as_array()) {
                (Some("any"), _) => AllowCaps::Any,
                (Some(other), _) => {
                    return Err(
                        self.error(item.span(), format!("{what} `allow_caps` is `{other}`; use \"any\" or a list"))
                    );
                }
                (None, Some(array)) => {
                    let mut caps = Vec::new();
                    for value in array.iter() {
                        let text = value.as_str().ok_or_else(|| {
                            self.error(value.span(), format!("{what} `allow_caps` entries must be capability strings"))
                        })?;
                        caps.push(text.parse::<Capability>().map_err(|why| self.error(value.span(), why))?);
                    }
                    AllowCaps::Only(caps)
                }
                (None, None) => {
                    return Err(self.error(item.span(), format!("{what} `allow_caps` must be \"any\" or a list")));
                }
            },
        };
        let allow_exec = match table.get("allow_exec") {
            None => None,
            Some(item) => Some(
                item.as_bool()
                    .ok_or_else(|| self.error(item.span(), format!("{what} `allow_exec` must be true or false")))?,
            ),
        };
        if let (Some(false), AllowCaps::Only(list)) = (allow_exec, &allow_caps)
            && list.contains(&Capability::Exec)
        {
            return Err(self.error(
                table.get("allow_exec").and_then(Item::span),
                format!("{what} lists `exec` in allow_caps but sets allow_exec = false"),
            ));
        }
        Ok(Rule { allow_caps, allow_exec })
    }
}

/// Reads the file for editing: its text (or a new document) after a strict parse.
fn open_for_edit(path: &Path) -> Result<(TrustPolicy, DocumentMut), Failure> {
    match read(path)? {
        Some(text) => {
            let policy = TrustPolicy::parse(&text, path)?;
            let doc = text.parse::<DocumentMut>().map_err(|e| {
                Failure::new(Reason::TrustPolicy, format!("{}: {}", path.display(), e.message().trim_end()))
            })?;
            Ok((policy, doc))
        }
        None => {
            let mut doc = DocumentMut::new();
            doc.insert("version", toml_edit::value(VERSION));
            Ok((TrustPolicy::default(), doc))
        }
    }
}

fn save(path: &Path, doc: &DocumentMut) -> Result<TrustPolicy, Failure> {
    let text = doc.to_string();
    let policy = TrustPolicy::parse(&text, path)?;
    crate::fsutil::write_atomic(path, text.as_bytes(), None).map_err(|e| Failure::io(path, &e))?;
    Ok(policy)
}

fn implicit_table<'d>(doc: &'d mut DocumentMut, key: &str, path: &Path) -> Result<&'d mut Table, Failure> {
    if !doc.contains_key(key) {
        let mut table = Table::new();
        table.set_implicit(true);
        doc.insert(key, Item::Table(table));
    }
    doc.get_mut(key).and_then(Item::as_table_mut).ok_or_else(|| {
        Failure::new(
            Reason::TrustPolicy,
            format!("{}: `{key}` is an inline table; rlp edits only [{key}.NAME] tables", path.display()),
        )
        .with_help(format!("rewrite `{key}` as [{key}.NAME] tables"))
    })
}

/// Adds an anchor and its rule, keeping the rest of the file as written.
pub fn add_anchor(path: &Path, name: &str, key: &PublicKey, rule: &Rule) -> Result<TrustPolicy, Failure> {
    if !is_valid_anchor_name(name) {
        return Err(Failure::new(Reason::Usage, format!("anchor name `{name}` must match ^[a-z][a-z0-9_-]*$"))
            .with_help("use lower-case letters, digits, `-` and `_`, starting with a letter, e.g. `release`"));
    }
    if name.parse::<KeyId>().is_ok() {
        return Err(Failure::new(Reason::Usage, format!("anchor name `{name}` looks like a key id")).with_help(
            "`rlp trust revoke` takes a key id or an anchor name, so the two must not look alike: choose a name such as `release`",
        ));
    }
    let (policy, mut doc) = open_for_edit(path)?;
    let id = key.key_id();
    if policy.is_revoked(id) {
        return Err(Failure::new(
            Reason::Revoked,
            format!("key {id} is revoked in {}; refusing to trust it", path.display()),
        )
        .with_help("remove it from [revoked] by hand if the revocation was a mistake"));
    }
    if policy.anchor_named(name).is_some() {
        return Err(Failure::new(Reason::Usage, format!("anchor `{name}` already exists in {}", path.display()))
            .with_help("choose another --name, or edit the file"));
    }
    if let Some(other) = policy.anchor_for(id) {
        return Err(Failure::new(Reason::Usage, format!("key {id} is already trusted as anchor `{}`", other.name)));
    }
    let mut anchor = Table::new();
    anchor.insert("key", toml_edit::value(key.to_string()));
    implicit_table(&mut doc, "anchors", path)?.insert(name, Item::Table(anchor));
    write_rule(&mut doc, path, name, rule)?;
    save(path, &doc)
}

/// Changes the rule of anchor `name` (`[rules.NAME]`) to what `change`
/// makes of the rule in force, keeping the rest of the file as written.
/// Returns the new policy and the rules before and after.
pub fn change_rule(
    path: &Path,
    name: &str,
    change: impl FnOnce(&Rule) -> Result<Rule, Failure>,
) -> Result<(TrustPolicy, Rule, Rule), Failure> {
    let (policy, mut doc) = open_for_edit(path)?;
    let Some(anchor) = policy.anchor_named(name) else {
        let known: Vec<&str> = policy.anchors.iter().map(|a| a.name.as_str()).collect();
        let help = if known.is_empty() {
            "add the signer first: `rlp trust add KEY.pub --name NAME`".to_string()
        } else {
            format!("anchors in this policy: {}", known.join(", "))
        };
        return Err(Failure::new(Reason::Usage, format!("no anchor `{name}` in {}", path.display())).with_help(help));
    };
    let before = anchor.effective_rule();
    let after = change(&before)?;
    write_rule(&mut doc, path, name, &after)?;
    Ok((save(path, &doc)?, before, after))
}

/// Writes `[rules.NAME]` as `rule` says, in place of what was there.
fn write_rule(doc: &mut DocumentMut, path: &Path, name: &str, rule: &Rule) -> Result<(), Failure> {
    let mut table = Table::new();
    let caps = match &rule.allow_caps {
        AllowCaps::Any => Value::from("any"),
        AllowCaps::Only(list) => Value::Array(list.iter().map(|c| c.to_string()).collect::<Array>()),
    };
    table.insert("allow_caps", Item::Value(caps));
    if let Some(exec) = rule.allow_exec {
        table.insert("allow_exec", toml_edit::value(exec));
    }
    implicit_table(doc, "rules", path)?.insert(name, Item::Table(table));
    Ok(())
}

/// Adds a key id to `[revoked] keys`. Returns the new policy and whether the
/// key was newly revoked (revoking twice changes nothing).
pub fn revoke(path: &Path, id: KeyId) -> Result<(TrustPolicy, bool), Failure> {
    let (policy, mut doc) = open_for_edit(path)?;
    if policy.is_revoked(id) {
        return Ok((policy, false));
    }
    let revoked = implicit_table(&mut doc, "revoked", path)?;
    revoked.set_implicit(false);
    if !revoked.contains_key("keys") {
        revoked.insert("keys", toml_edit::value(Array::new()));
    }
    let keys = revoked.get_mut("keys").and_then(Item::as_array_mut).ok_or_else(|| {
        Failure::new(Reason::TrustPolicy, format!("{}: [revoked] `keys` must be a list", path.display()))
    })?;
    keys.push(id.to_string());
    Ok((save(path, &doc)?, true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::integrity::keys::SecretKey;

    fn key(seed: u8) -> PublicKey {
        SecretKey::from_seed(&[seed; 32]).public()
    }

    #[test]
    fn parses_the_documented_form_and_decides() {
        let text = format!(
            "version = 1\n[anchors.release]\nkey = \"{}\"\n[anchors.dev]\nkey = \"{}\"\n\n[rules.release]\nallow_caps = \"any\"\n[rules.dev]\nallow_caps = [\"kb_read\", \"kb_write\", \"net:localhost\"]\nallow_exec = false\n\n[revoked]\nkeys = [\"{}\"]\n",
            key(1),
            key(2),
            key(3).key_id()
        );
        let policy = TrustPolicy::parse(&text, Path::new("t.toml")).unwrap();
        assert_eq!(policy.anchors.len(), 2);
        assert!(policy.is_revoked(key(3).key_id()));
        let dev = policy.anchor_for(key(2).key_id()).unwrap().effective_rule();
        let net: Capability = "net:localhost:8080".parse().unwrap();
        let kb: Capability = "kb_read:drafts".parse().unwrap();
        assert_eq!(dev.first_denied(&[kb.clone(), net.clone()]), None);
        assert_eq!(dev.first_denied(&[kb, Capability::Exec]), Some(Capability::Exec));
        let release = policy.anchor_named("release").unwrap().effective_rule();
        assert!(release.exec_allowed());
        assert_eq!(release.describe(), "any capability");
    }

    #[test]
    fn errors_name_line_and_column() {
        let bad = [
            ("version = 2\n", "t.toml:1:11: version 2 is not supported"),
            ("version = 1\n[anchors.a]\nkey = \"ed25519:AAAA\"\n", "t.toml:3:7: expected 32 bytes"),
            ("version = 1\n[anchors.a]\nkye = 1\n", "t.toml:3:1: unknown key `kye` in [anchors.a]"),
            ("version = 1\n[rules.x]\nallow_caps = \"any\"\n", "t.toml:2:1: [rules.x] has no matching [anchors.x]"),
            ("version = 1\nversion = 1\n", "t.toml:2:1: "),
            ("[revoked]\n", "t.toml:1:1: missing `version = 1`"),
        ];
        for (text, want) in bad {
            let err = TrustPolicy::parse(text, Path::new("t.toml")).unwrap_err();
            assert!(err.message.starts_with(want), "{text:?}: {}", err.message);
        }
    }

    #[test]
    fn edits_keep_comments_and_revoke_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trust-policy.toml");
        std::fs::write(&path, "# ours\nversion = 1 # keep\n").unwrap();
        let rule = Rule { allow_caps: AllowCaps::Only(vec!["kb_read".parse().unwrap()]), allow_exec: Some(false) };
        add_anchor(&path, "dev", &key(1), &rule).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            format!(
                "# ours\nversion = 1 # keep\n\n[anchors.dev]\nkey = \"{}\"\n\n[rules.dev]\nallow_caps = [\"kb_read\"]\nallow_exec = false\n",
                key(1)
            )
        );
        assert_eq!(add_anchor(&path, "dev", &key(2), &rule).unwrap_err().reason, Reason::Usage);
        let (policy, new) = revoke(&path, key(1).key_id()).unwrap();
        assert!(new && policy.is_revoked(key(1).key_id()));
        assert!(!revoke(&path, key(1).key_id()).unwrap().1);
        assert_eq!(add_anchor(&path, "again", &key(1), &rule).unwrap_err().reason, Reason::Revoked);
    }
}
