//! Capability strings, network targets and secret ids.
//!
//! A capability is what a tool needs and a policy grants: `exec`, `time`,
//! `model`, `net:<host>[:<port>]`, `fs:<absolute dir>`, `kb_read[:<domain>]`,
//! `kb_write[:<domain>]`, `secrets:<id>`. Matching rules: hosts exactly (after
//! lower-casing and IDNA), a grant without a port covers every port, fs grants
//! cover whole path components below them.

use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;

/// A host, and optionally a port, that a `net:` capability names.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NetTarget {
    /// Lower-case ASCII host (IDNA-normalised), or an IP literal (`[::1]` for IPv6).
    pub host: String,
    /// A port; `None` in a grant means any port.
    pub port: Option<u16>,
}

impl NetTarget {
    /// Whether this grant covers `wanted` (same host; any port, or the same port).
    pub fn covers(&self, wanted: &NetTarget) -> bool {
        self.host == wanted.host && (self.port.is_none() || self.port == wanted.port)
    }

    /// The narrower of two targets, if they overlap.
    pub fn meet(&self, other: &NetTarget) -> Option<NetTarget> {
        if self.covers(other) {
            Some(other.clone())
        } else if other.covers(self) {
            Some(self.clone())
        } else {
            None
        }
    }
}

impl FromStr for NetTarget {
    type Err = String;

    /// Parses `host` or `host:port` (IPv6 as `[addr]` or `[addr]:port`).
    fn from_str(text: &str) -> Result<Self, String> {
        if text.is_empty() {
            return Err("the host is empty".into());
        }
        if text.contains(['/', '@', '?', '#', ' ']) || text.contains("://") {
            return Err(format!("`{text}` is not a host or host:port (no scheme, path or user part)"));
        }
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            let (addr, after) = rest.split_once(']').ok_or_else(|| format!("`{text}` has an unclosed `[`"))?;
            addr.parse::<std::net::Ipv6Addr>().map_err(|_| format!("`{addr}` is not an IPv6 address"))?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(|| format!("unexpected `{p}` after `]`"))?),
            };
            (format!("[{}]", addr.to_ascii_lowercase()), port)
        } else {
            match text.rsplit_once(':') {
                Some((host, port)) => (normalize_host(host)?, Some(port)),
                None => (normalize_host(text)?, None),
            }
        };
        let port = match port {
            None => None,
            Some(p) => Some(match p.parse::<u16>() {
                Ok(n) if n > 0 => n,
                _ => return Err(format!("`{p}` is not a port (1-65535)")),
            }),
        };
        Ok(NetTarget { host, port })
    }
}

impl fmt::Display for NetTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{port}", self.host),
            None => f.write_str(&self.host),
        }
    }
}

/// Lower-cases and IDNA-normalises a host name; IPv4 literals pass unchanged.
pub fn normalize_host(host: &str) -> Result<String, String> {
    if host.is_empty() {
        return Err("the host is empty".into());
    }
    let ascii = idna::domain_to_ascii_strict(host)
        .or_else(|_| idna::domain_to_ascii(host))
        .map_err(|_| format!("`{host}` is not a valid host name"))?;
    if ascii.is_empty() || ascii.contains([':', '[', ']', '%', '*']) || ascii.starts_with('.') || ascii.ends_with('.') {
        return Err(format!("`{host}` is not a valid host name"));
    }
    Ok(ascii)
}

/// A secret id: `runloop/<scope>/<name>`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SecretId(String);

/// What the two tiers of environment variable names start with.
const ENV_PREFIX: &str = "RUNLOOP_";

/// Whether `part` matches `[a-z0-9]+(_[a-z0-9]+)*`: no `-` or `.`, and no
/// `_` at either end or next to another.
fn is_simple_part(part: &str) -> bool {
    part.split('_').all(|word| !word.is_empty() && word.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
}

impl SecretId {
    /// The id as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The scope and the name (the parts after `runloop/`).
    fn parts(&self) -> (&str, &str) {
        let rest = self.0.strip_prefix("runloop/").unwrap_or(&self.0);
        rest.split_once('/').unwrap_or((rest, ""))
    }

    /// The environment variable the environment provider reads. Distinct ids
    /// always get distinct names:
    ///
    /// - when scope and name each match `[a-z0-9]+(_[a-z0-9]+)*`:
    ///   `RUNLOOP_<SCOPE>__<NAME>` in upper case (`runloop/mail/smtp_api_key`
    ///   → `RUNLOOP_MAIL__SMTP_API_KEY`);
    /// - otherwise `RUNLOOP__` and `scope/name` with a-z upper-cased, digits
    ///   as they are, and `_` `-` `.` `/` written `_U` `_H` `_D` `_S`
    ///   (`runloop/mail/api-key` → `RUNLOOP__MAIL_SAPI_HKEY`).
    pub fn env_var(&self) -> String {
        let (scope, name) = self.parts();
        if is_simple_part(scope) && is_simple_part(name) {
            return format!("{ENV_PREFIX}{}__{}", scope.to_ascii_uppercase(), name.to_ascii_uppercase());
        }
        let mut out = format!("{ENV_PREFIX}_");
        for c in scope.chars().chain(['/']).chain(name.chars()) {
            match c {
                '_' => out.push_str("_U"),
                '-' => out.push_str("_H"),
                '.' => out.push_str("_D"),
                '/' => out.push_str("_S"),
                c => out.push(c.to_ascii_uppercase()),
            }
        }
        out
    }

    /// The name earlier versions read: upper case, every character other
    /// than a letter or digit as `_`. Several ids can share it
    /// (`runloop/mail/api_key`, `runloop/mail/api-key`, `runloop/mail_api/key`).
    pub fn legacy_env_var(&self) -> String {
        self.0.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect()
    }

    /// Whether no other id has this id's [`SecretId::legacy_env_var`]: true
    /// exactly when scope and name are letters and digits only, so the name
    /// holds one `_` after `RUNLOOP_`. Only then is the legacy name still read.
    pub fn legacy_env_var_is_unique(&self) -> bool {
        let (scope, name) = self.parts();
        [scope, name].iter().all(|part| part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
    }
}

impl FromStr for SecretId {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let valid_part = |p: &str| {
            !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_-.".contains(c))
        };
        let mut parts = text.split('/');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some("runloop"), Some(scope), Some(name), None) if valid_part(scope) && valid_part(name) => {
                Ok(SecretId(text.to_string()))
            }
            _ => Err(format!(
                "`{text}` is not a secret id of the form runloop/<scope>/<name> (lower case, digits, _ - .)"
            )),
        }
    }
}

impl fmt::Display for SecretId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks that `text` is an absolute, normalised directory path for an fs grant.
pub fn parse_fs_path(text: &str) -> Result<PathBuf, String> {
    let path = Path::new(text);
    if !path.is_absolute() {
        return Err(format!("`{text}` is not an absolute path"));
    }
    if path.components().any(|c| matches!(c, Component::ParentDir | Component::CurDir)) {
        return Err(format!("`{text}` contains `.` or `..`"));
    }
    Ok(path.components().collect())
}

/// One capability.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Capability {
    /// Run a process.
    Exec,
    /// Read the clock.
    Time,
    /// Call the model.
    Model,
    /// Reach a host (and port).
    Net(NetTarget),
    /// Read and write below a directory.
    Fs(PathBuf),
    /// Read the knowledge base (one domain, or all).
    KbRead(Option<String>),
    /// Write the knowledge base (one domain, or all).
    KbWrite(Option<String>),
    /// Use a secret.
    Secret(SecretId),
}

impl FromStr for Capability {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (family, arg) = match text.split_once(':') {
            Some((family, arg)) => (family, Some(arg)),
            None => (text, None),
        };
        let domain = |arg: Option<&str>| -> Result<Option<String>, String> {
            match arg {
                None => Ok(None),
                Some(d) if is_domain(d) => Ok(Some(d.to_string())),
                Some(d) => Err(format!("`{d}` is not a knowledge-base domain (lower case, digits, _ - .)")),
            }
        };
        let none = |cap: Capability| match arg {
            None => Ok(cap),
            Some(_) => Err(format!("`{family}` takes no argument")),
        };
        match family {
            "exec" => none(Capability::Exec),
            "time" => none(Capability::Time),
            "model" => none(Capability::Model),
            "net" => Ok(Capability::Net(arg.ok_or("`net` needs a host: net:<host>[:<port>]")?.parse()?)),
            "fs" => Ok(Capability::Fs(parse_fs_path(arg.ok_or("`fs` needs a directory: fs:<absolute dir>")?)?)),
            "kb_read" => Ok(Capability::KbRead(domain(arg)?)),
            "kb_write" => Ok(Capability::KbWrite(domain(arg)?)),
            "secrets" => Ok(Capability::Secret(arg.ok_or("`secrets` needs an id: secrets:<id>")?.parse()?)),
            other => Err(format!(
                "unknown capability `{other}`; expected exec, time, model, net:<host>, fs:<dir>, kb_read, kb_write or secrets:<id>"
            )),
        }
    }
}

/// Whether `text` is a knowledge-base domain name.
pub fn is_domain(text: &str) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_-.".contains(c))
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Capability::Exec => f.write_str("exec"),
            Capability::Time => f.write_str("time"),
            Capability::Model => f.write_str("model"),
            Capability::Net(target) => write!(f, "net:{target}"),
            Capability::Fs(path) => write!(f, "fs:{}", path.display()),
            Capability::KbRead(None) => f.write_str("kb_read"),
            Capability::KbRead(Some(d)) => write!(f, "kb_read:{d}"),
            Capability::KbWrite(None) => f.write_str("kb_write"),
            Capability::KbWrite(Some(d)) => write!(f, "kb_write:{d}"),
            Capability::Secret(id) => write!(f, "secrets:{id}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_every_family() {
        for text in [
            "exec",
            "time",
            "model",
            "net:api.example.com",
            "net:localhost:8080",
            "net:[::1]:9",
            "fs:/home/u/work",
            "kb_read",
            "kb_read:drafts",
            "kb_write:x",
            "secrets:runloop/mail/smtp_api_key",
        ] {
            let cap: Capability = text.parse().unwrap();
            assert_eq!(cap.to_string(), text);
        }
        for bad in [
            "net:",
            "net:http://x",
            "fs:rel/dir",
            "fs:/a/../b",
            "secrets:mail/key",
            "exec:now",
            "nope",
            "net:x:0",
            "net:x:99999",
        ] {
            assert!(bad.parse::<Capability>().is_err(), "{bad}");
        }
    }

    #[test]
    fn hosts_are_normalised_and_matched_exactly() {
        let grant: NetTarget = "API.Example.COM".parse().unwrap();
        assert_eq!(grant.host, "api.example.com");
        assert!(grant.covers(&"api.example.com:443".parse().unwrap()));
        assert!(!grant.covers(&"sub.api.example.com".parse().unwrap()));
        let idn: NetTarget = "bücher.example".parse().unwrap();
        assert_eq!(idn.host, "xn--bcher-kva.example");
        let ported: NetTarget = "localhost:8080".parse().unwrap();
        assert!(!ported.covers(&"localhost:8081".parse().unwrap()));
        assert_eq!(grant.meet(&"api.example.com:1".parse().unwrap()).unwrap().port, Some(1));
    }

    #[test]
    fn secret_env_names() {
        for (id, new, legacy, unique) in [
            ("runloop/mail/smtp_api_key", "RUNLOOP_MAIL__SMTP_API_KEY", "RUNLOOP_MAIL_SMTP_API_KEY", false),
            ("runloop/github/token", "RUNLOOP_GITHUB__TOKEN", "RUNLOOP_GITHUB_TOKEN", true),
            ("runloop/mail/api_key", "RUNLOOP_MAIL__API_KEY", "RUNLOOP_MAIL_API_KEY", false),
            ("runloop/mail_api/key", "RUNLOOP_MAIL_API__KEY", "RUNLOOP_MAIL_API_KEY", false),
            ("runloop/mail/api-key", "RUNLOOP__MAIL_SAPI_HKEY", "RUNLOOP_MAIL_API_KEY", false),
            ("runloop/mail/api.key", "RUNLOOP__MAIL_SAPI_DKEY", "RUNLOOP_MAIL_API_KEY", false),
            ("runloop/mail/api__key", "RUNLOOP__MAIL_SAPI_U_UKEY", "RUNLOOP_MAIL_API__KEY", false),
            ("runloop/_x/y_", "RUNLOOP___UX_SY_U", "RUNLOOP__X_Y_", false),
            ("runloop/s3/k9", "RUNLOOP_S3__K9", "RUNLOOP_S3_K9", true),
        ] {
            let id: SecretId = id.parse().unwrap();
            assert_eq!(
                (id.env_var().as_str(), id.legacy_env_var().as_str(), id.legacy_env_var_is_unique()),
                (new, legacy, unique),
                "{id}"
            );
            assert_eq!(decode_env_var(new).as_ref(), Some(&id), "{new}");
        }
    }

    /// The id an environment variable name stands for, if any: the inverse
    /// of [`SecretId::env_var`] (checked by re-encoding, so a name that is
    /// not exactly what `env_var` writes decodes to nothing).
    fn decode_env_var(var: &str) -> Option<SecretId> {
        let rest = var.strip_prefix(ENV_PREFIX)?;
        let text = match rest.strip_prefix('_') {
            Some(escaped) => {
                let mut text = String::new();
                let mut chars = escaped.chars();
                while let Some(c) = chars.next() {
                    text.push(match c {
                        '_' => match chars.next()? {
                            'U' => '_',
                            'H' => '-',
                            'D' => '.',
                            'S' => '/',
                            _ => return None,
                        },
                        c => c.to_ascii_lowercase(),
                    });
                }
                text
            }
            None => {
                let (scope, name) = rest.split_once("__")?;
                format!("{}/{}", scope.to_ascii_lowercase(), name.to_ascii_lowercase())
            }
        };
        let id: SecretId = format!("runloop/{text}").parse().ok()?;
        (id.env_var() == var).then_some(id)
    }

    /// Every id over a small alphabet that holds each special character,
    /// parts up to three characters long: each name decodes back to its
    /// own id, so no two ids share a name (and legacy names are unique
    /// exactly where [`SecretId::legacy_env_var_is_unique`] says so).
    #[test]
    fn secret_env_names_are_injective() {
        let alphabet = ['a', 'z', '0', '9', '_', '-', '.'];
        let mut parts = Vec::new();
        let mut frontier = vec![String::new()];
        for _ in 0..3 {
            frontier = frontier.iter().flat_map(|p| alphabet.iter().map(move |c| format!("{p}{c}"))).collect();
            parts.extend(frontier.iter().cloned());
        }
        let mut names = std::collections::HashMap::new();
        let mut legacy: std::collections::HashMap<String, Vec<SecretId>> = std::collections::HashMap::new();
        for scope in &parts {
            for name in &parts {
                let id: SecretId = format!("runloop/{scope}/{name}").parse().unwrap();
                let var = id.env_var();
                assert!(var.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'), "{var}");
                assert_eq!(decode_env_var(&var).as_ref(), Some(&id), "{var}");
                assert!(names.insert(var, id.clone()).is_none());
                legacy.entry(id.legacy_env_var()).or_default().push(id);
            }
        }
        for ids in legacy.values() {
            for id in ids {
                assert_eq!(id.legacy_env_var_is_unique(), ids.len() == 1, "{id} shares with {ids:?}");
                assert!(!names.contains_key(&id.legacy_env_var()) || !id.legacy_env_var_is_unique());
            }
        }
    }
}
