//! Registry credentials: `RLP_REGISTRY_TOKEN` for the registry named by
//! `RLP_REGISTRY_TOKEN_HOST`, else the user's Docker configuration
//! (`$DOCKER_CONFIG/config.json`, default `~/.docker/config.json`), else
//! none. A token is never sent to another registry than the one it is for:
//! a reference taken from elsewhere cannot collect it.
//!
//! From the Docker configuration only basic credentials are read: an
//! `auths` entry with `auth` (base64 of `user:password`) or `username` and
//! `password`. An entry kept in a credential helper (`credsStore`,
//! `credHelpers`) or holding only an identity token is not used, and rlp
//! says so rather than going on anonymously in silence. Values are never
//! printed: [`Credentials`]' `Debug` shows only where they came from.

use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine;
use serde::Deserialize;
use zeroize::Zeroizing;

use crate::integrity::failure::{Failure, Reason};

/// The variable holding a bearer token for the registry.
pub(crate) const TOKEN_VAR: &str = "RLP_REGISTRY_TOKEN";
/// The variable naming the registry (`HOST[:PORT]`) the token is for.
pub(crate) const TOKEN_HOST_VAR: &str = "RLP_REGISTRY_TOKEN_HOST";
/// Longest token sent (registries' tokens, JWTs included, are a few KiB).
pub(crate) const MAX_TOKEN_BYTES: usize = 16 << 10;
/// Largest Docker configuration file read.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// How rlp authenticates to a registry.
pub(crate) enum Credentials {
    /// No credentials.
    Anonymous,
    /// `Authorization: Bearer` with the token from [`TOKEN_VAR`].
    Token(Zeroizing<String>),
    /// Basic credentials from the Docker configuration file.
    Basic { user: String, password: Zeroizing<String>, file: PathBuf },
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source())
    }
}

impl Credentials {
    /// Where the credentials come from, for messages (never the values).
    pub(crate) fn source(&self) -> String {
        match self {
            Credentials::Anonymous => "no credentials".to_string(),
            Credentials::Token(_) => format!("the token in {TOKEN_VAR}"),
            Credentials::Basic { user, file, .. } => {
                format!("user `{}` from {}", crate::text::terminal_safe_line(user), file.display())
            }
        }
    }

    /// The form the OCI client takes.
    pub(crate) fn client_auth(&self) -> oci_client::secrets::RegistryAuth {
        use oci_client::secrets::RegistryAuth;
        match self {
            Credentials::Anonymous => RegistryAuth::Anonymous,
            Credentials::Token(token) => RegistryAuth::Bearer(token.to_string()),
            Credentials::Basic { user, password, .. } => RegistryAuth::Basic(user.clone(), password.to_string()),
        }
    }
}

/// Whether `token` can go into an HTTP header: visible ASCII, not empty.
pub(crate) fn is_header_safe(token: &str) -> bool {
    !token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic())
}

/// Credentials, and a warning when some were found that rlp cannot use.
pub(crate) type Found = (Credentials, Option<String>);

/// The credentials for `registry` (`HOST[:PORT]`).
pub(crate) fn for_registry(registry: &str) -> Result<Found, Failure> {
    if let Some(token) = std::env::var_os(TOKEN_VAR) {
        let token = Zeroizing::new(token.into_string().unwrap_or_default());
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Failure::new(Reason::Usage, format!("{TOKEN_VAR} is longer than {MAX_TOKEN_BYTES} bytes"))
                .with_help(format!("set {TOKEN_VAR} to the registry token alone")));
        }
        // The token goes into an HTTP header: visible ASCII only.
        if !is_header_safe(&token) {
            return Err(Failure::new(
                Reason::Usage,
                format!("{TOKEN_VAR} is empty or holds characters a token cannot have"),
            )
            .with_help(format!("set {TOKEN_VAR} to the registry token alone (visible ASCII, no spaces or newlines)")));
        }
        let Some(host) = std::env::var(TOKEN_HOST_VAR).ok().filter(|h| !h.is_empty()) else {
            return Err(Failure::new(
                Reason::Usage,
                format!(
                    "{TOKEN_VAR} is set but {TOKEN_HOST_VAR} is not: rlp sends a token only to the registry it is for"
                ),
            )
            .with_help(format!("set {TOKEN_HOST_VAR}=HOST[:PORT], the registry the token was issued for")));
        };
        if host.eq_ignore_ascii_case(registry) {
            return Ok((Credentials::Token(token), None));
        }
    }
    match docker_config_file() {
        Some(file) => from_docker_config(&file, registry),
        None => Ok((Credentials::Anonymous, None)),
    }
}

/// `$DOCKER_CONFIG/config.json`, else `$HOME/.docker/config.json`.
fn docker_config_file() -> Option<PathBuf> {
    match std::env::var_os("DOCKER_CONFIG") {
        Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir).join("config.json")),
        _ => std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(|home| PathBuf::from(home).join(".docker/config.json")),
    }
}

/// The parts of Docker's config.json rlp reads.
#[derive(Deserialize, Default)]
struct DockerConfig {
    #[serde(default)]
    auths: std::collections::BTreeMap<String, AuthEntry>,
    #[serde(default, rename = "credsStore")]
    creds_store: Option<String>,
    #[serde(default, rename = "credHelpers")]
    cred_helpers: std::collections::BTreeMap<String, String>,
}

#[derive(Deserialize, Default, zeroize::Zeroize, zeroize::ZeroizeOnDrop)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
}

fn from_docker_config(file: &Path, registry: &str) -> Result<Found, Failure> {
    let text = match crate::fsutil::read_regular(file, MAX_CONFIG_BYTES) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => Zeroizing::new(text),
            Err(e) => {
                drop(Zeroizing::new(e.into_bytes()));
                return Err(Failure::new(Reason::Usage, format!("{}: not UTF-8 text", file.display()))
                    .with_help(format!("fix the file, or set {TOKEN_VAR} (the file is then not read)")));
            }
        },
        Err(e) if e.is_not_found() => return Ok((Credentials::Anonymous, None)),
        Err(e) => return Err(Failure::read(file, e, Reason::Unreadable)),
    };
    let config: DockerConfig = serde_json::from_str(&text).map_err(|e| {
        // serde_json's messages may quote a value (a password among them):
        // only the position and the kind of error are shown.
        let what = match e.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Io => "not valid JSON",
            serde_json::error::Category::Eof => "JSON that ends too early",
            serde_json::error::Category::Data => "a value of the wrong type for a Docker configuration",
        };
        Failure::new(Reason::Usage, format!("{}:{}:{}: {what}", file.display(), e.line(), e.column()))
            .with_help(format!("fix the file, or set {TOKEN_VAR} (the file is then not read)"))
    })?;
    let entry = config.auths.iter().find(|(key, _)| same_registry(key, registry)).map(|(_, entry)| entry);
    let helper = config
        .cred_helpers
        .iter()
        .find(|(key, _)| same_registry(key, registry))
        .map(|(_, helper)| helper)
        .or(config.creds_store.as_ref());
    let basic = match entry {
        Some(entry) => basic_credentials(entry).map_err(|what| {
            Failure::new(Reason::Usage, format!("{}: the entry for {registry} under `auths` {what}", file.display()))
                .with_help(format!("log in again (e.g. `docker login {registry}`), or set {TOKEN_VAR}"))
        })?,
        None => None,
    };
    if let Some((user, password)) = basic {
        return Ok((Credentials::Basic { user, password, file: file.to_path_buf() }, None));
    }
    let unused = if entry.and_then(|e| e.identitytoken.as_ref()).is_some() {
        Some(format!(
            "{} holds an identity token for {registry}, which rlp does not exchange; going on without credentials (set {TOKEN_VAR} to use a token)",
            file.display()
        ))
    } else {
        helper.map(|helper| {
            format!(
                "{} keeps the credentials for {registry} in the credential helper `{}`, which rlp does not run; going on without credentials (set {TOKEN_VAR}, or store basic credentials under `auths`)",
                file.display(),
                crate::text::terminal_safe_line(helper)
            )
        })
    };
    Ok((Credentials::Anonymous, unused))
}

/// The user and password of an `auths` entry, if it holds basic credentials.
fn basic_credentials(entry: &AuthEntry) -> Result<Option<(String, Zeroizing<String>)>, &'static str> {
    if let Some(auth) = entry.auth.as_ref().filter(|a| !a.is_empty()) {
        let decoded = Zeroizing::new(
            base64::engine::general_purpose::STANDARD
                .decode(auth.trim())
                .map_err(|_| "has an `auth` that is not base64")?,
        );
        let text = std::str::from_utf8(&decoded).map_err(|_| "has an `auth` that is not UTF-8 text")?;
        let (user, password) = text.split_once(':').ok_or("has an `auth` that is not `user:password`")?;
        return Ok(Some((user.to_string(), Zeroizing::new(password.to_string()))));
    }
    match (&entry.username, &entry.password) {
        (Some(user), Some(password)) if !user.is_empty() => Ok(Some((user.clone(), Zeroizing::new(password.clone())))),
        _ => Ok(None),
    }
}

/// Whether an `auths` key (`host[:port]`, maybe with a scheme and a path,
/// as `docker login` writes them) names `registry`.
fn same_registry(key: &str, registry: &str) -> bool {
    let key = key.strip_prefix("https://").or_else(|| key.strip_prefix("http://")).unwrap_or(key);
    let host = key.split('/').next().unwrap_or(key);
    let docker_hub = |h: &str| matches!(h, "docker.io" | "index.docker.io" | "registry-1.docker.io");
    host.eq_ignore_ascii_case(registry) || (docker_hub(&host.to_ascii_lowercase()) && docker_hub(registry))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dir: &Path, text: &str) -> PathBuf {
        let file = dir.join("config.json");
        std::fs::write(&file, text).unwrap();
        file
    }

    #[test]
    fn basic_credentials_are_read_from_auth_or_username_and_password() {
        let dir = tempfile::tempdir().unwrap();
        let file = config(
            dir.path(),
            r#"{"auths": {"https://reg.example.com:5000/v1/": {"auth": "YWxpY2U6czNjcjN0OndpdGg6Y29sb25z"},
                          "other.example.com": {"username": "bob", "password": "pw"}}}"#,
        );
        let (Credentials::Basic { user, password, .. }, None) =
            from_docker_config(&file, "reg.example.com:5000").unwrap()
        else {
            panic!("no basic credentials")
        };
        assert_eq!((user.as_str(), password.as_str()), ("alice", "s3cr3t:with:colons"));
        let (creds, _) = from_docker_config(&file, "other.example.com").unwrap();
        assert_eq!(format!("{creds:?}"), format!("user `bob` from {}", file.display()));
        assert!(matches!(from_docker_config(&file, "reg.example.com").unwrap(), (Credentials::Anonymous, None)));
        assert!(matches!(
            from_docker_config(&dir.path().join("missing.json"), "reg.example.com").unwrap(),
            (Credentials::Anonymous, None)
        ));
    }

    #[test]
    fn docker_hub_keys_match_each_other() {
        assert!(same_registry("https://index.docker.io/v1/", "docker.io"));
        assert!(same_registry("registry-1.docker.io", "index.docker.io"));
        assert!(!same_registry("docker.io.evil.example", "docker.io"));
        assert!(!same_registry("reg.example.com", "reg.example.com:5000"));
    }

    #[test]
    fn a_configuration_that_is_no_regular_file_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("config.json");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let failure = from_docker_config(&fifo, "r").unwrap_err();
        assert!(failure.message.ends_with("config.json: not a regular file"), "{}", failure.message);
        std::fs::remove_file(&fifo).unwrap();
        std::fs::create_dir(&fifo).unwrap();
        assert!(from_docker_config(&fifo, "r").unwrap_err().message.ends_with("not a regular file"));
    }

    #[test]
    fn credentials_rlp_cannot_use_are_named_in_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let file = config(dir.path(), r#"{"auths": {"r": {}}, "credsStore": "desktop"}"#);
        let (creds, warning) = from_docker_config(&file, "r").unwrap();
        assert!(matches!(creds, Credentials::Anonymous));
        assert!(warning.unwrap().contains("in the credential helper `desktop`, which rlp does not run"));
    }

    #[test]
    fn broken_files_and_entries_are_named_without_their_values() {
        let dir = tempfile::tempdir().unwrap();
        let file = config(dir.path(), "{\"auths\": {\"r\": {\"auth\": \"c2VjcmV0LXZhbHVl\"}}}\n");
        let failure = from_docker_config(&file, "r").unwrap_err();
        assert!(failure.message.ends_with("the entry for r under `auths` has an `auth` that is not `user:password`"));
        assert!(!failure.message.contains("secret-value") && !failure.message.contains("c2VjcmV0"));

        let file = config(dir.path(), "{\"auths\": {\"r\": {\"auth\": \"s3cret!\"}}");
        let failure = from_docker_config(&file, "r").unwrap_err();
        assert!(failure.message.ends_with("config.json:1:36: JSON that ends too early"), "{}", failure.message);
        let file = config(dir.path(), "{\"auths\": {\"r\": {\"username\": \"u\", \"password\": 42}}}");
        let failure = from_docker_config(&file, "r").unwrap_err();
        assert!(failure.message.contains("a value of the wrong type"), "{}", failure.message);
        let file = config(dir.path(), "{\"auths\": \"s3cret-in-the-wrong-place\"}");
        let failure = from_docker_config(&file, "r").unwrap_err();
        assert!(!failure.message.contains("s3cret"), "{}", failure.message);
    }
}
