//! Capability strings, network targets and secret ids.
//!
//! A capability is what a tool needs and a policy grants: `exec`, `time`,
//! `model`, `net:<host>[:<port>]`, `fs:<absolute dir or ~/dir>`,
//! `kb_read[:<domain>]`, `kb_write[:<domain>]`, `secrets:<id>`. Matching
//! rules: hosts exactly (after lower-casing and IDNA), a grant without a port
//! covers every port, fs grants cover whole path components below them (a
//! `~/…` path is kept as written and expanded by [`expand_home`] only where a
//! grant is decided or a sandbox rule is built).

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

    /// Whether the host is this machine's loopback: `localhost`, an address
    /// of 127.0.0.0/8, or `[::1]`.
    pub fn is_loopback(&self) -> bool {
        let bare = self.host.trim_start_matches('[').trim_end_matches(']');
        self.host == "localhost" || bare.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
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

/// A secret id: `runloop/<scope>/<name>`, or the dotted form of upstream
/// Runloop (`mail.smtp.key`, see [`is_dotted_id`]).
///
/// Parsing ([`FromStr`]) is the only way to make one, and the one check of
/// every id rlp reads (tools.json, policy.caps, the command line, the
/// store): no `/`-separated part is empty, `.` or `..`, and none comes before
/// `runloop`. So a provider may put an id into a command (`pass show {id}`)
/// or use it as a key as it is: it never names a folder above its own.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SecretId(String);

/// What the two tiers of environment variable names start with.
const ENV_PREFIX: &str = "RUNLOOP_";

/// Whether `part` matches `[a-z0-9]+(_[a-z0-9]+)*`: no `-` or `.`, and no
/// `_` at either end or next to another.
fn is_simple_part(part: &str) -> bool {
    part.split('_').all(|word| !word.is_empty() && word.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
}

/// Whether `text` is a dotted secret id: two or more segments joined by `.`,
/// each `[a-z][a-z0-9]*(_[a-z0-9]+)*` (a letter first, no `_` at the end or
/// next to another), the first segment neither `runloop` nor starting with
/// `runloop_` (variable names under `RUNLOOP_` belong to `runloop/…` ids and
/// to rlp's settings). So `MAIL__SMTP__KEY` style names never collide.
pub fn is_dotted_id(text: &str) -> bool {
    let mut segments = text.split('.');
    let first = segments.next().unwrap_or_default();
    let segment = |s: &str| s.bytes().next().is_some_and(|b| b.is_ascii_lowercase()) && is_simple_part(s);
    text.contains('.')
        && segment(first)
        && segments.all(segment)
        && first != "runloop"
        && !first.starts_with("runloop_")
}

impl SecretId {
    /// The id as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The scope and the name (the parts after `runloop/`); `None` for a
    /// dotted id.
    fn parts(&self) -> Option<(&str, &str)> {
        self.0.strip_prefix("runloop/")?.split_once('/')
    }

    /// The environment variable the environment provider reads. Distinct ids
    /// always get distinct names:
    ///
    /// - when scope and name each match `[a-z0-9]+(_[a-z0-9]+)*`:
    ///   `RUNLOOP_<SCOPE>__<NAME>` in upper case (`runloop/mail/smtp_api_key`
    ///   → `RUNLOOP_MAIL__SMTP_API_KEY`);
    /// - otherwise `RUNLOOP__` and `scope/name` with a-z upper-cased, digits
    ///   as they are, and `_` `-` `.` `/` written `_U` `_H` `_D` `_S`
    ///   (`runloop/mail/api-key` → `RUNLOOP__MAIL_SAPI_HKEY`);
    /// - a dotted id: its segments in upper case joined by `__`
    ///   (`mail.smtp.key` → `MAIL__SMTP__KEY`), as scope and name are above.
    pub fn env_var(&self) -> String {
        let Some((scope, name)) = self.parts() else {
            return self.0.split('.').map(str::to_ascii_uppercase).collect::<Vec<_>>().join("__");
        };
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

    /// The name earlier versions read for a `runloop/…` id: upper case,
    /// every character other than a letter or digit as `_`. Several ids can
    /// share it (`runloop/mail/api_key`, `runloop/mail/api-key`,
    /// `runloop/mail_api/key`). Dotted ids are newer and have none.
    pub fn legacy_env_var(&self) -> Option<String> {
        self.parts()?;
        Some(self.0.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect())
    }

    /// Whether no other id has this id's [`SecretId::legacy_env_var`]: true
    /// exactly when scope and name are letters and digits only, so the name
    /// holds one `_` after `RUNLOOP_`. Only then is the legacy name still read.
    pub fn legacy_env_var_is_unique(&self) -> bool {
        self.parts().is_some_and(|(scope, name)| {
            [scope, name].iter().all(|part| part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
        })
    }
}

impl FromStr for SecretId {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if let Some(step) = text.split('/').find(|part| matches!(*part, "." | "..")) {
            return Err(format!(
                "`{text}` has a `{step}` part: a secret id is not a path, and a provider that reads it as one \
                 (`pass show {{id}}`) would look outside its store"
            ));
        }
        let valid_part = |p: &str| {
            !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_-.".contains(c))
        };
        let mut parts = text.split('/');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some("runloop"), Some(scope), Some(name), None) if valid_part(scope) && valid_part(name) => {
                Ok(SecretId(text.to_string()))
            }
            (Some(dotted), None, _, _) if is_dotted_id(dotted) => Ok(SecretId(text.to_string())),
            _ => Err(format!(
                "`{text}` is not a secret id of the form runloop/<scope>/<name> (lower case, digits, _ - .) \
                 or <segment>.<segment>… (each a lower-case letter, then lower case, digits and single `_`)"
            )),
        }
    }
}

impl fmt::Display for SecretId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The first component of a path below the running user's home (`~/…`).
const HOME_MARK: &str = "~";

/// Checks that `text` is a directory path for an fs grant: absolute, or
/// `~/<dir>` (below the running user's home, kept as written), without `.`
/// or `..` components and with no other `~`. Returns it normalised (no
/// repeated or trailing `/`).
pub fn parse_fs_path(text: &str) -> Result<PathBuf, String> {
    let rest = match text.strip_prefix(HOME_MARK) {
        Some(rest) if rest.starts_with('/') => rest,
        Some(_) => {
            return Err(format!(
                "`{text}`: only `~/<dir>` (below your own home) is supported, not `~` alone or `~user`"
            ));
        }
        None if !Path::new(text).is_absolute() => {
            return Err(format!("`{text}` is not an absolute path (or `~/<dir>`)"));
        }
        None => text,
    };
    if rest.contains('~') {
        return Err(format!("`{text}` holds a `~` after its start; `~` may only begin a path, as `~/<dir>`"));
    }
    let path = Path::new(rest);
    if path.components().any(|c| matches!(c, Component::ParentDir | Component::CurDir)) {
        return Err(format!("`{text}` contains `.` or `..`"));
    }
    if text.starts_with(HOME_MARK) && path.components().all(|c| c == Component::RootDir) {
        return Err(format!("`{text}` names no folder below the home directory; write `~/<dir>`"));
    }
    let start = text.starts_with(HOME_MARK).then(|| Component::Normal(HOME_MARK.as_ref()));
    Ok(start.into_iter().chain(path.components().filter(|c| start.is_none() || *c != Component::RootDir)).collect())
}

/// The running user's home directory, for `~/…` grants: `$HOME`, which must
/// be an absolute path without `.`, `..` or `~` (a relative or empty home is
/// never used).
fn home_dir() -> Result<PathBuf, String> {
    let home = std::env::var_os("HOME").unwrap_or_default();
    let text = home.to_str().ok_or("HOME is not UTF-8")?;
    match parse_fs_path(text) {
        Ok(path) if !text.starts_with(HOME_MARK) => Ok(path),
        _ => Err(format!("HOME (`{text}`) is not an absolute path; `~/…` grants need it set to your home folder")),
    }
}

/// Whether `path` (as [`parse_fs_path`] returns it) is written `~/…`.
fn is_home_relative(path: &Path) -> bool {
    path.components().next() == Some(Component::Normal(HOME_MARK.as_ref()))
}

/// The absolute directory an fs path stands for: a `~/…` path below
/// [`home_dir`], any other path as it is. The one place `~` is expanded.
pub fn expand_home(path: &Path) -> Result<PathBuf, String> {
    match path.strip_prefix(HOME_MARK) {
        Ok(rest) if is_home_relative(path) => Ok(home_dir()?.join(rest)),
        _ => Ok(path.to_path_buf()),
    }
}

/// Whether fs grant `grant` covers `wanted`, whole path components, both
/// expanded first ([`expand_home`]): where no home can be had, a `~/…` path
/// covers nothing and nothing covers it.
pub fn fs_covers(grant: &Path, wanted: &Path) -> bool {
    match (expand_home(grant), expand_home(wanted)) {
        (Ok(grant), Ok(wanted)) => wanted.starts_with(grant),
        _ => false,
    }
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
            "fs" => Ok(Capability::Fs(parse_fs_path(
                arg.ok_or("`fs` needs a directory: fs:<absolute dir> or fs:~/<dir>")?,
            )?)),
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
            "secrets:mail.smtp.key",
            "fs:~/.config/tmux",
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
            "secrets:mail",
            "secrets:Mail.key",
            "secrets:mail..key",
            "secrets:mail.key_",
            "secrets:mail.smtp__key",
            "secrets:mail.9key",
            "secrets:runloop.key",
            "secrets:runloop_x.key",
            "fs:~",
            "fs:~/",
            "fs:~user/x",
            "fs:~/a/~/b",
            "fs:/a/~b",
            "fs:~/../etc",
            "exec:now",
            "nope",
            "net:x:0",
            "net:x:99999",
        ] {
            assert!(bad.parse::<Capability>().is_err(), "{bad}");
        }
    }

    /// `.`, `..` and empty parts, and anything before `runloop/`, are
    /// refused, so no id steps out of the folder a provider reads it in.
    #[test]
    fn secret_ids_with_path_steps_are_refused() {
        for bad in [
            "runloop/../x",
            "runloop/./x",
            "runloop/a/..",
            "runloop/a/.",
            "runloop/../..",
            "../x",
            "a/..",
            "a/./b",
            "runloop/a/./b",
            "runloop//b",
            "runloop/a//b",
            "runloop/a/",
            "/runloop/a/b",
            "./runloop/a/b",
            "",
        ] {
            assert!(bad.parse::<SecretId>().is_err(), "{bad}");
        }
        let why = "runloop/../x".parse::<SecretId>().unwrap_err();
        assert!(why.starts_with("`runloop/../x` has a `..` part"), "{why}");
        for good in ["runloop/a.b/c..d", "runloop/.../x", "runloop/.env/x.", "mail.smtp.key"] {
            assert_eq!(good.parse::<SecretId>().map(|id| id.to_string()), Ok(good.to_string()));
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
                (id.env_var().as_str(), id.legacy_env_var().unwrap().as_str(), id.legacy_env_var_is_unique()),
                (new, legacy, unique),
                "{id}"
            );
            assert_eq!(decode_env_var(new).as_ref(), Some(&id), "{new}");
        }
    }

    #[test]
    fn home_paths_are_kept_as_written_and_expanded_against_home() {
        assert_eq!(parse_fs_path("~//.config/tmux/").unwrap(), Path::new("~/.config/tmux"));
        assert_eq!(parse_fs_path("/a//b/").unwrap(), Path::new("/a/b"));
        let home = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute());
        let wanted = Path::new("~/.config/tmux/x");
        assert_eq!(expand_home(wanted).ok(), home.as_ref().map(|h| h.join(".config/tmux/x")));
        assert!(!fs_covers(Path::new("~/.conf"), wanted), "whole components");
        assert_eq!(fs_covers(Path::new("~/.config"), wanted), home.is_some());
        assert_eq!(expand_home(Path::new("/abs")).unwrap(), Path::new("/abs"));
    }

    /// Dotted ids get `__`-joined names, distinct from each other and from
    /// every `runloop/…` name (which start `RUNLOOP_`), and no legacy name.
    #[test]
    fn dotted_secret_env_names_are_injective() {
        let id: SecretId = "mail.smtp.key".parse().unwrap();
        assert_eq!(
            (id.env_var().as_str(), id.legacy_env_var(), id.legacy_env_var_is_unique()),
            ("MAIL__SMTP__KEY", None, false)
        );
        let words = ["a", "b1", "a_b", "ab"];
        let mut ids = Vec::new();
        for a in words {
            for b in words {
                ids.push(format!("{a}.{b}"));
                ids.extend(words.iter().map(|c| format!("{a}.{b}.{c}")));
            }
        }
        ids.extend(["runloopx.a".to_string(), "x_runloop.a".to_string()]);
        let mut names = std::collections::HashSet::new();
        for text in &ids {
            let var = text.parse::<SecretId>().unwrap().env_var();
            assert!(!var.starts_with(ENV_PREFIX), "{var}");
            assert!(names.insert(var), "{text}");
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
        // Not ids (see `secret_ids_with_path_steps_are_refused`).
        parts.retain(|part| part != "." && part != "..");
        let mut names = std::collections::HashMap::new();
        let mut legacy: std::collections::HashMap<String, Vec<SecretId>> = std::collections::HashMap::new();
        for scope in &parts {
            for name in &parts {
                let id: SecretId = format!("runloop/{scope}/{name}").parse().unwrap();
                let var = id.env_var();
                assert!(var.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'), "{var}");
                assert_eq!(decode_env_var(&var).as_ref(), Some(&id), "{var}");
                assert!(names.insert(var, id.clone()).is_none());
                legacy.entry(id.legacy_env_var().unwrap()).or_default().push(id);
            }
        }
        for ids in legacy.values() {
            for id in ids {
                assert_eq!(id.legacy_env_var_is_unique(), ids.len() == 1, "{id} shares with {ids:?}");
                assert!(!names.contains_key(&id.legacy_env_var().unwrap()) || !id.legacy_env_var_is_unique());
            }
        }
    }
}
