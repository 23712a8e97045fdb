//! `oci://HOST[:PORT]/REPO[:TAG|@DIGEST]`: where a bundle lives in a registry.
//!
//! The grammar is the OCI distribution specification's: a repository is one
//! or more `/`-separated lowercase components (`[a-z0-9]+` joined by `.`,
//! `_`, `__` or dashes), a tag is `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`, and a
//! digest is `sha256:` + 64 or `sha512:` + 128 lowercase hex digits. The host
//! is a DNS name or IP address, with an optional port. Nothing is inferred:
//! there is no default registry and no implicit `latest`.

use std::fmt;
use std::net::IpAddr;

use crate::integrity::failure::{Failure, Reason};

/// The scheme every reference starts with.
pub const SCHEME: &str = "oci://";

/// Longest repository name (the distribution specification's bound on the
/// manifest path a registry must accept, less the host).
const MAX_REPOSITORY: usize = 255;

/// What a reference points at inside its repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A tag, which the registry maps to a manifest and may move.
    Tag(String),
    /// A manifest digest, which names exactly one manifest.
    Digest(String),
}

/// A parsed `oci://` reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OciReference {
    /// `HOST[:PORT]`, the host in lowercase.
    pub registry: String,
    /// The repository path, e.g. `agents/mailer`.
    pub repository: String,
    /// The tag or digest, when the reference names one.
    pub target: Option<Target>,
    loopback: bool,
}

impl OciReference {
    /// Parses `text`, which must start with `oci://`.
    pub fn parse(text: &str) -> Result<OciReference, Failure> {
        let bad = |what: String| {
            Failure::new(
                Reason::Usage,
                format!("`{}` is not a registry reference: {what}", shown(&without_userinfo(text))),
            )
            .with_help(
                "write it as oci://HOST[:PORT]/REPOSITORY:TAG, e.g. oci://registry.example.com/agents/mailer:0.1.0",
            )
        };
        let rest = text.strip_prefix(SCHEME).ok_or_else(|| bad("it does not start with oci://".into()))?;
        let (registry, path) =
            rest.split_once('/').ok_or_else(|| bad("it names no repository after the host".into()))?;
        let loopback = parse_registry(registry).map_err(bad)?;
        let (repository, target) = match path.split_once('@') {
            Some((repository, digest)) => {
                check_digest(digest).map_err(bad)?;
                (repository, Some(Target::Digest(digest.to_string())))
            }
            None => match path.rsplit_once(':') {
                Some((repository, tag)) => {
                    check_tag(tag).map_err(bad)?;
                    (repository, Some(Target::Tag(tag.to_string())))
                }
                None => (path, None),
            },
        };
        check_repository(repository).map_err(bad)?;
        Ok(OciReference {
            registry: registry.to_ascii_lowercase(),
            repository: repository.to_string(),
            target,
            loopback,
        })
    }

    /// Whether the registry is on this machine (`localhost`, 127.0.0.0/8,
    /// `::1`): the only place plain HTTP is allowed.
    pub fn is_loopback(&self) -> bool {
        self.loopback
    }

    /// This reference with `tag`, when it names neither a tag nor a digest.
    pub fn or_tag(mut self, tag: impl FnOnce() -> String) -> OciReference {
        if self.target.is_none() {
            self.target = Some(Target::Tag(tag()));
        }
        self
    }

    /// The reference for the OCI client. `None` without a tag or digest.
    pub(crate) fn client_reference(&self) -> Option<oci_client::Reference> {
        let (registry, repository) = (self.registry.clone(), self.repository.clone());
        match self.target.clone()? {
            Target::Tag(tag) => Some(oci_client::Reference::with_tag(registry, repository, tag)),
            Target::Digest(digest) => Some(oci_client::Reference::with_digest(registry, repository, digest)),
        }
    }
}

impl fmt::Display for OciReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)?;
        match &self.target {
            Some(Target::Tag(tag)) => write!(f, ":{tag}"),
            Some(Target::Digest(digest)) => write!(f, "@{digest}"),
            None => Ok(()),
        }
    }
}

/// A tag made of `version` (semver's `+` is not allowed in tags and becomes
/// `_`, as Helm does).
pub fn version_tag(version: &str) -> String {
    version.replace('+', "_")
}

/// `text` with everything before its last `@` (other than a digest's)
/// written `…`: a reference with credentials in it — even a password
/// holding a `/` — is quoted without them.
fn without_userinfo(text: &str) -> std::borrow::Cow<'_, str> {
    let rest = text.strip_prefix(SCHEME).unwrap_or(text);
    match userinfo_end(rest) {
        Some(at) => format!("{SCHEME}…{}", &rest[at..]).into(),
        None => text.into(),
    }
}

/// Where what may be credentials ends in `rest` (the reference after
/// `oci://`): at its last `@` that does not start a digest.
pub fn userinfo_end(rest: &str) -> Option<usize> {
    rest.match_indices('@').map(|(at, _)| at).rfind(|&at| {
        let after = &rest[at + 1..];
        !(after.starts_with("sha256:") || after.starts_with("sha512:"))
    })
}

/// `text` as quoted in messages: control characters replaced, long text cut.
fn shown(text: &str) -> String {
    crate::text::ellipsize(&crate::text::terminal_safe_line(text), 200)
}

/// Checks `HOST[:PORT]`; returns whether the host is a loopback one.
fn parse_registry(registry: &str) -> Result<bool, String> {
    if registry.is_empty() {
        return Err("it names no registry host".into());
    }
    if registry.contains(['@', '?', '#', '\\']) || registry.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("the registry host holds characters a host cannot have (credentials go in ~/.docker/config.json or RLP_REGISTRY_TOKEN, never in the reference)".into());
    }
    let (host, port) = match registry.rsplit_once(':') {
        // A colon inside brackets belongs to an IPv6 address.
        Some((host, port)) if !port.contains(']') => (host, Some(port)),
        _ => (registry, None),
    };
    if let Some(port) = port
        && !matches!(port.parse::<u16>(), Ok(p) if p > 0 && !port.starts_with('0'))
    {
        return Err(format!("the port `{}` is not a number from 1 to 65535", shown(port)));
    }
    let parsed = url::Host::parse(host)
        .map_err(|e| format!("the registry host `{}` is not a host name or IP address ({e})", shown(host)))?;
    // The parser maps what it accepts (IDNA, numeric shorthands such as
    // `127.1`) to another spelling; only the plain one is taken.
    if !parsed.to_string().eq_ignore_ascii_case(host) {
        return Err(format!("the registry `{}` is not written as a plain host[:port]", shown(registry)));
    }
    Ok(match parsed {
        url::Host::Domain(domain) => domain.eq_ignore_ascii_case("localhost"),
        url::Host::Ipv4(ip) => IpAddr::V4(ip).is_loopback(),
        url::Host::Ipv6(ip) => IpAddr::V6(ip).is_loopback(),
    })
}

fn check_repository(repository: &str) -> Result<(), String> {
    if repository.is_empty() {
        return Err("it names no repository after the host".into());
    }
    if repository.len() > MAX_REPOSITORY {
        return Err(format!("the repository name is longer than {MAX_REPOSITORY} characters"));
    }
    for component in repository.split('/') {
        if !is_path_component(component) {
            return Err(format!(
                "the repository component `{}` is not lowercase letters and digits joined by `.`, `_`, `__` or `-`",
                shown(component)
            ));
        }
    }
    Ok(())
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`
fn is_path_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let mut i = 0;
    loop {
        let start = i;
        while i < bytes.len() && alnum(&bytes[i]) {
            i += 1;
        }
        if i == start {
            return false;
        }
        if i == bytes.len() {
            return true;
        }
        let sep = i;
        while i < bytes.len() && !alnum(&bytes[i]) {
            i += 1;
        }
        let separator = &component[sep..i];
        let dashes = separator.bytes().all(|b| b == b'-');
        if !matches!(separator, "." | "_" | "__") && !dashes {
            return false;
        }
    }
}

fn check_tag(tag: &str) -> Result<(), String> {
    let mut bytes = tag.bytes();
    let first_ok = bytes.next().is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_');
    let rest_ok = bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if !first_ok || !rest_ok || tag.len() > 128 {
        return Err(format!(
            "the tag `{}` is not 1 to 128 letters, digits, `_`, `.` or `-` (not starting with `.` or `-`)",
            shown(tag)
        ));
    }
    Ok(())
}

fn check_digest(digest: &str) -> Result<(), String> {
    let hex_len = match digest.split_once(':') {
        Some(("sha256", hex)) => Some((hex, 64)),
        Some(("sha512", hex)) => Some((hex, 128)),
        _ => None,
    };
    match hex_len {
        Some((hex, len))
            if hex.len() == len && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) =>
        {
            Ok(())
        }
        _ => Err(format!(
            "the digest `{}` is not sha256: and 64 lowercase hex digits (or sha512: and 128)",
            shown(digest)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> OciReference {
        OciReference::parse(text).unwrap_or_else(|f| panic!("{text}: {}", f.message))
    }

    fn refused(text: &str) -> String {
        match OciReference::parse(text) {
            Ok(r) => panic!("{text} was accepted as {r:?}"),
            Err(f) => f.message,
        }
    }

    #[test]
    fn references_parse_into_registry_repository_and_target() {
        let r = parsed("oci://Registry.Example.com/agents/mailer:0.1.0");
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.target.clone()),
            ("registry.example.com", "agents/mailer", Some(Target::Tag("0.1.0".into())))
        );
        assert!(!r.is_loopback());
        assert_eq!(r.to_string(), "oci://registry.example.com/agents/mailer:0.1.0");

        let r = parsed("oci://127.0.0.1:5000/mailer");
        assert_eq!((r.registry.as_str(), r.target.clone()), ("127.0.0.1:5000", None));
        assert!(r.is_loopback());
        assert_eq!(r.or_tag(|| version_tag("1.0.0+build.5")).to_string(), "oci://127.0.0.1:5000/mailer:1.0.0_build.5");

        let digest = format!("sha256:{}", "ab".repeat(32));
        let r = parsed(&format!("oci://[::1]:5000/a/b@{digest}"));
        assert_eq!(r.target, Some(Target::Digest(digest)));
        assert!(r.is_loopback());
        assert!(parsed("oci://localhost:5000/x:y").is_loopback());
        assert!(parsed("oci://host/a.b_c__d---e/f:_tag-1.2").target.is_some());
    }

    #[test]
    fn malformed_references_are_refused_with_the_reason() {
        assert!(refused("https://host/repo:tag").contains("does not start with oci://"));
        assert!(refused("oci://host").contains("names no repository"));
        assert!(refused("oci://host/").contains("names no repository"));
        let message = refused("oci://user:pw@host/repo:tag");
        assert!(message.contains("credentials go in") && message.starts_with("`oci://…@host/repo:tag`"), "{message}");
        // A password holding `/` is not taken for the host's end.
        let message = refused("oci://user:pa/ss-w0rd@host/repo:tag");
        assert!(!message.contains("pa/ss") && !message.contains("user"), "{message}");
        let digest = format!("sha256:{}", "ab".repeat(32));
        assert!(refused(&format!("oci://u:p@host/Repo@{digest}")).starts_with("`oci://…@host/Repo@sha256:"));
        assert!(refused("oci://host/Repo:tag").contains("component `Repo`"));
        assert!(refused("oci://host/a//b:tag").contains("component ``"));
        assert!(refused("oci://host/a-:tag").contains("component `a-`"));
        assert!(refused("oci://host/repo:.tag").contains("the tag `.tag`"));
        assert!(refused(&format!("oci://host/repo:{}", "t".repeat(129))).contains("the tag"));
        assert!(refused("oci://host/repo@sha256:abc").contains("the digest"));
        assert!(refused(&format!("oci://host/repo@sha256:{}", "AB".repeat(32))).contains("the digest"));
        assert!(refused("oci://127.1:5000/repo:tag").contains("plain host[:port]"));
        assert!(refused("oci://host:99999/repo:tag").contains("the port `99999`"));
        assert!(refused("oci://host:/repo:tag").contains("the port ``"));
        assert!(refused("oci://[::1/repo:tag").contains("registry host"));
        assert_eq!(parsed("oci://host:443/repo:tag").registry, "host:443");
        assert!(refused(&format!("oci://host/{}:t", "a".repeat(256))).contains("longer than 255"));
        // Control characters are never echoed raw.
        assert!(!refused("oci://host/re\x1b[31mpo:t").contains('\x1b'));
    }
}
