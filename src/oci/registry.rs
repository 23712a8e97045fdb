//! One registry, spoken to through `oci-client` on a current-thread tokio
//! runtime of its own, behind a synchronous interface.
//!
//! - HTTPS always, with certificates verified against the Mozilla roots;
//!   plain HTTP only when asked (`--plain-http`) and only for a registry on
//!   this machine.
//! - Connections time out after 30 s and reads after 60 s of silence: a
//!   stalled registry costs a minute, not forever.
//! - A blob is written as it arrives and hashed on the way; the client
//!   refuses it when its digest differs from the manifest's (or from the
//!   registry's `Docker-Content-Digest`), and rlp stops reading at the
//!   declared size.
//! - The client crate unwraps some values taken from registry answers (a
//!   `Location` header, a token); a panic there is caught and reported as
//!   an answer rlp cannot use, never a crash.
//! - Basic credentials meet a token service only through rlp: it asks the
//!   registry for its challenge once, checks the token service that
//!   challenge names and exchanges the credentials there itself, and the
//!   client gets the token alone. A later answer naming another service
//!   cannot draw the credentials there: the client does not hold them.
//!   Limit: a registry whose challenge takes the credentials themselves
//!   (`Basic`) gets them through the client, which asks again, and the
//!   client would follow a token service named in that second answer.

use std::future::Future;
use std::io::{self, Write};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::FutureExt;
use oci_client::RegistryOperation;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor};
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;
use zeroize::Zeroizing;

use crate::integrity::failure::{Failure, Reason};
use crate::oci::artifact;
use crate::oci::credentials::{self, Credentials};
use crate::oci::reference::OciReference;
use crate::pack::Progress;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest a manifest may take to arrive whole.
const MANIFEST_DEADLINE: Duration = Duration::from_secs(60);
/// Who every request to a registry or its token service says it is from.
const USER_AGENT: &str = concat!("rlp/", env!("CARGO_PKG_VERSION"));
/// Largest answer of a token service read (a token is at most 16 KiB).
const MAX_TOKEN_ANSWER_BYTES: usize = 64 << 10;

/// A connection to the registry of one reference.
pub(crate) struct Registry<'a> {
    client: oci_client::Client,
    runtime: tokio::runtime::Runtime,
    credentials: &'a Credentials,
    reference: &'a OciReference,
    plain_http: bool,
}

impl<'a> Registry<'a> {
    /// A client for `reference`'s registry. `plain_http` is refused unless
    /// the registry is on this machine.
    pub(crate) fn new(
        reference: &'a OciReference,
        credentials: &'a Credentials,
        plain_http: bool,
    ) -> Result<Registry<'a>, Failure> {
        if plain_http && !reference.is_loopback() {
            return Err(Failure::new(
                Reason::Usage,
                format!("--plain-http is allowed only for a registry on this machine, not {}", reference.registry),
            )
            .with_help(
                "serve the registry over HTTPS; plain HTTP would carry the bundle and any credentials in clear",
            ));
        }
        let mut config = ClientConfig {
            protocol: if plain_http { ClientProtocol::Http } else { ClientProtocol::Https },
            connect_timeout: Some(CONNECT_TIMEOUT),
            read_timeout: Some(READ_TIMEOUT),
            // One request per blob: no chunked upload round trips.
            use_monolithic_push: true,
            user_agent: USER_AGENT,
            ..ClientConfig::default()
        };
        if plain_http {
            // A registry on this machine is reached directly: a proxy from
            // the environment would carry plain HTTP (and credentials) off it.
            // A proxy set here turns the environment's off, and the loopback
            // hosts (the only ones plain HTTP may reach) bypass it.
            config.http_proxy = Some("http://127.0.0.1:9".to_string());
            config.no_proxy = Some("localhost,127.0.0.0/8,::1".to_string());
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Failure::new(Reason::Unreadable, format!("cannot start the registry client: {e}")))?;
        let client = runtime.block_on(async { oci_client::Client::try_from(config) }).map_err(|e| {
            Failure::new(Reason::Unreadable, format!("cannot start the registry client: {}", shown_error(&e)))
        })?;
        Ok(Registry { client, runtime, credentials, reference, plain_http })
    }

    /// Pushes the archive `data` (whose digest is `layer_digest`) and the
    /// config blob, then `manifest`, byte for byte.
    pub(crate) fn push(&self, data: &[u8], layer_digest: &str, manifest: Vec<u8>) -> Result<(), Failure> {
        let reference = self.client_reference()?;
        let auth = self.client_auth(RegistryOperation::Push)?;
        let config_digest = artifact::sha256_digest(artifact::CONFIG_BYTES);
        let manifest_type = http::HeaderValue::from_static(OCI_IMAGE_MEDIA_TYPE);
        self.run(async {
            self.client.store_auth_if_needed(reference.resolve_registry(), &auth).await;
            self.client.push_blob(&reference, data, layer_digest).await?;
            self.client.push_blob(&reference, artifact::CONFIG_BYTES, &config_digest).await?;
            self.client.push_manifest_raw(&reference, manifest, manifest_type).await?;
            Ok(())
        })
    }

    /// The raw manifest the reference names, and its digest.
    pub(crate) fn manifest(&self) -> Result<(Vec<u8>, String), Failure> {
        let reference = self.client_reference()?;
        let auth = self.client_auth(RegistryOperation::Pull)?;
        // The client reads a manifest whole: a deadline bounds what an
        // answer that never ends can cost.
        let fetch = self.client.pull_manifest_raw(&reference, &auth, &[OCI_IMAGE_MEDIA_TYPE]);
        let bounded = async {
            tokio::time::timeout(MANIFEST_DEADLINE, fetch).await.unwrap_or_else(|_| {
                Err(OciDistributionError::GenericError(Some(format!(
                    "no complete manifest within {} s",
                    MANIFEST_DEADLINE.as_secs()
                ))))
            })
        };
        self.run(bounded)
    }

    /// Streams the blob `layer` (of `size` bytes) into `out`, checking its digest.
    pub(crate) fn blob(
        &self,
        layer: &OciDescriptor,
        size: u64,
        out: &mut dyn Write,
        progress: &dyn Progress,
    ) -> Result<(), Failure> {
        let reference = self.client_reference()?;
        progress.start(size);
        let mut sink = Bounded { out, written: 0, size, overflowed: false, progress };
        let result = self.run(self.client.pull_blob(&reference, layer, &mut sink));
        progress.finish();
        if sink.overflowed {
            return Err(Failure::new(
                Reason::Digest,
                format!("{} sent more than the {size} bytes its manifest declares for the bundle", self.reference),
            )
            .with_help("the registry's copy was altered or the registry misbehaves; nothing was kept"));
        }
        result?;
        if sink.written != size {
            return Err(Failure::new(
                Reason::Digest,
                format!("{} sent {} bytes of the {size} its manifest declares", self.reference, sink.written),
            ));
        }
        Ok(())
    }

    /// What the client authenticates with for `operation`. For basic
    /// credentials rlp asks for the registry's challenge once and answers
    /// it: no challenge, nothing; one the registry answers itself, the
    /// credentials; a `Bearer` one, a token rlp fetches from the token
    /// service that very challenge names, once checked.
    fn client_auth(&self, operation: RegistryOperation) -> Result<RegistryAuth, Failure> {
        let Credentials::Basic { user, password, .. } = self.credentials else {
            return Ok(self.credentials.client_auth());
        };
        self.runtime.block_on(async {
            let http = self.http_client()?;
            match self.challenge(&http).await? {
                Challenge::None => Ok(RegistryAuth::Anonymous),
                Challenge::Direct => Ok(self.credentials.client_auth()),
                Challenge::Token { realm, service } => {
                    let realm = self.checked_realm(&realm)?;
                    let token =
                        self.token(&http, realm, service.as_deref(), operation, (user, password.as_str())).await?;
                    Ok(RegistryAuth::Bearer(token.to_string()))
                }
            }
        })
    }

    /// rlp's own client for the registry and its token service: the OCI
    /// client's identity and timeouts, direct with `--plain-http`, and no
    /// redirect followed (one would carry the credentials elsewhere).
    fn http_client(&self) -> Result<reqwest::Client, Failure> {
        let mut builder = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(READ_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none());
        if self.plain_http {
            builder = builder.no_proxy();
        }
        builder.build().map_err(|e| {
            Failure::new(Reason::Unreadable, format!("cannot start the registry client: {}", shown_error(&e)))
        })
    }

    /// What the registry's `GET /v2/` asks for.
    async fn challenge(&self, http: &reqwest::Client) -> Result<Challenge, Failure> {
        let scheme = if self.plain_http { "http" } else { "https" };
        let url = format!("{scheme}://{}/v2/", self.reference.registry);
        let response = http.get(&url).send().await.map_err(|e| self.failure(&e.into()))?;
        let headers = response.headers().get_all(reqwest::header::WWW_AUTHENTICATE);
        Ok(Challenge::of(&headers.iter().filter_map(|h| h.to_str().ok()).collect::<Vec<_>>()))
    }

    /// `realm` as the address of a token service basic credentials may go
    /// to: refused unless HTTPS, or plain HTTP on this machine when the
    /// registry is reached so.
    fn checked_realm(&self, realm: &str) -> Result<url::Url, Failure> {
        match url::Url::parse(realm) {
            Ok(url) if self.is_safe_realm(&url) => Ok(url),
            _ => Err(Failure::new(
                Reason::Unreadable,
                format!(
                    "the registry {} sends credentials to a token service that is not HTTPS (`{}`); rlp does not send them there",
                    self.reference.registry,
                    shown(realm)
                ),
            )
            .with_help(
                "fix the registry's token service address, or use RLP_REGISTRY_TOKEN with a token issued for the registry",
            )),
        }
    }

    /// Whether basic credentials may go to the token service at `realm`.
    fn is_safe_realm(&self, realm: &url::Url) -> bool {
        match realm.scheme() {
            "https" => true,
            "http" if self.plain_http => {
                let host = format!(
                    "{}{}",
                    realm.host_str().unwrap_or_default(),
                    realm.port().map(|p| format!(":{p}")).unwrap_or_default()
                );
                OciReference::parse(&format!("{}{host}/x", crate::oci::reference::SCHEME))
                    .is_ok_and(|r| r.is_loopback())
            }
            _ => false,
        }
    }

    /// A token for `operation` on the repository, from the token service at
    /// `realm` (for `service`), in exchange for the basic credentials.
    async fn token(
        &self,
        http: &reqwest::Client,
        realm: url::Url,
        service: Option<&str>,
        operation: RegistryOperation,
        (user, password): (&str, &str),
    ) -> Result<Zeroizing<String>, Failure> {
        let actions = match operation {
            RegistryOperation::Pull => "pull",
            RegistryOperation::Push => "pull,push",
        };
        let scope = format!("repository:{}:{actions}", self.reference.repository);
        let mut query = vec![("scope", scope.as_str())];
        query.extend(service.map(|service| ("service", service)));
        let fetch = http.get(realm).query(&query).basic_auth(user, Some(password)).send();
        let response =
            fetch.await.map_err(|e| self.token_failure(format!("cannot be reached: {}", request_error(&e))))?;
        match response.status().as_u16() {
            200 => {}
            401 | 403 => return Err(self.refused()),
            code => return Err(self.token_failure(format!("answered HTTP {code}"))),
        }
        let unusable = || self.token_failure("sent no token rlp can use".to_string());
        let body = capped_body(response, MAX_TOKEN_ANSWER_BYTES).await.ok().flatten().ok_or_else(unusable)?;
        let answer: TokenAnswer = serde_json::from_slice(&body).map_err(|_| unusable())?;
        let token = answer.token.as_ref().or(answer.access_token.as_ref()).ok_or_else(unusable)?;
        if token.len() > credentials::MAX_TOKEN_BYTES || !credentials::is_header_safe(token) {
            return Err(unusable());
        }
        Ok(Zeroizing::new(token.clone()))
    }

    /// A failure of the registry's token service: `what` it did.
    fn token_failure(&self, what: String) -> Failure {
        Failure::new(
            Reason::Unreadable,
            format!("the token service of the registry {} {what}", self.reference.registry),
        )
        .with_help("check that the registry is up; or use RLP_REGISTRY_TOKEN with a token issued for the registry")
    }

    fn client_reference(&self) -> Result<oci_client::Reference, Failure> {
        self.reference.client_reference().ok_or_else(|| {
            Failure::new(Reason::Usage, format!("{} names neither a tag nor a digest", self.reference))
                .with_help(format!("add one: {}:TAG or {}@sha256:…", self.reference, self.reference))
        })
    }

    /// Runs `work` to completion, turning its errors (and a panic of the
    /// client on a malformed answer) into failures.
    fn run<T>(&self, work: impl Future<Output = Result<T, OciDistributionError>>) -> Result<T, Failure> {
        let caught = self.runtime.block_on(quietly(std::panic::AssertUnwindSafe(work).catch_unwind()));
        match caught {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(self.failure(&e)),
            Err(_) => Err(Failure::new(
                Reason::Unreadable,
                format!("the registry {} sent an answer rlp cannot use", self.reference.registry),
            )
            .with_help("check that the address names an OCI registry")),
        }
    }

    /// The registry asked for credentials, or refused the ones given.
    fn refused(&self) -> Failure {
        let what = match self.credentials {
            Credentials::Anonymous => "asks for credentials, and none were found".to_string(),
            given => format!("refused {} (or their rights)", given.source()),
        };
        Failure::new(Reason::Unreadable, format!("{}: the registry {what}", self.reference)).with_help(format!(
            "log in (basic credentials under `auths` in ~/.docker/config.json, e.g. by `docker login {}`), or set {}",
            self.reference.registry,
            crate::oci::credentials::TOKEN_VAR
        ))
    }

    /// What an error of the client means for the user.
    fn failure(&self, error: &OciDistributionError) -> Failure {
        let at = &self.reference;
        match error {
            // "Invalid digest. Expected …, got …": the layer, or the
            // registry's Docker-Content-Digest, differs from what was received.
            OciDistributionError::DigestError(e) => Failure::new(
                Reason::Digest,
                format!("{at}: the bundle's bytes do not match their digest ({})", shown_error(e)),
            )
            .with_help("the registry's copy was altered or damaged; nothing was kept"),
            OciDistributionError::AuthenticationFailure(_)
            | OciDistributionError::UnauthorizedError { .. }
            | OciDistributionError::ServerError { code: 401 | 403, .. } => self.refused(),
            OciDistributionError::ImageManifestNotFoundError(_) => {
                Failure::new(Reason::Unreadable, format!("{at} does not exist in the registry"))
                    .with_help("check the repository and tag")
            }
            OciDistributionError::RegistryError { envelope, .. } => {
                let codes: Vec<_> = envelope.errors.iter().map(|e| &e.code).collect();
                let denied = codes.iter().any(|c| matches!(c, OciErrorCode::Denied | OciErrorCode::Unauthorized));
                let unknown = codes.iter().any(|c| {
                    matches!(c, OciErrorCode::ManifestUnknown | OciErrorCode::NameUnknown | OciErrorCode::BlobUnknown)
                });
                let messages = envelope.errors.iter().map(|e| shown(&e.message)).collect::<Vec<_>>().join("; ");
                let failure = Failure::new(Reason::Unreadable, format!("{at}: the registry answered: {messages}"));
                if denied {
                    self.refused()
                } else if unknown {
                    failure.with_help("check the repository and tag")
                } else {
                    failure
                }
            }
            OciDistributionError::ServerError { code, message, .. } => {
                Failure::new(Reason::Unreadable, format!("{at}: the registry answered HTTP {code}: {}", shown(message)))
            }
            // A blob's error status comes as a request error.
            OciDistributionError::RequestError(e) => match e.status().map(|s| s.as_u16()) {
                Some(401 | 403) => self.refused(),
                Some(404) => Failure::new(Reason::Unreadable, format!("{at}: the registry has no such blob"))
                    .with_help("the artifact is incomplete in the registry; push the bundle again"),
                Some(code) => Failure::new(Reason::Unreadable, format!("{at}: the registry answered HTTP {code}")),
                None => {
                    let failure = Failure::new(
                        Reason::Unreadable,
                        format!("cannot reach the registry {}: {}", at.registry, request_error(e)),
                    );
                    if !self.plain_http && at.is_loopback() {
                        failure.with_help(
                            "is it running? A registry on this machine that speaks plain HTTP needs --plain-http",
                        )
                    } else {
                        failure.with_help("check the address and that the registry is up")
                    }
                }
            },
            e => Failure::new(Reason::Unreadable, format!("{at}: {}", shown_error(e))),
        }
    }
}

/// Runs `work` with the panic message silenced: a panic inside the client
/// is reported as a failure, not as a crash on standard error.
async fn quietly<F: Future>(work: F) -> F::Output {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let output = work.await;
    std::panic::set_hook(previous);
    output
}

/// What a registry's challenge asks for.
#[derive(Debug, PartialEq)]
enum Challenge {
    /// Nothing: no credentials are sent.
    None,
    /// The credentials, sent to the registry itself.
    Direct,
    /// A token from the service at `realm`, for `service`.
    Token { realm: String, service: Option<String> },
}

impl Challenge {
    /// What the `WWW-Authenticate` values `headers` ask for: a `Bearer`
    /// challenge among them is taken first (as Docker's client does), any
    /// other asks for the credentials directly.
    fn of(headers: &[&str]) -> Challenge {
        let bearer = headers.iter().flat_map(|header| challenges(header)).find(|(scheme, _)| scheme == "bearer");
        match bearer {
            Some((_, params)) => {
                let param = |name: &str| params.iter().find(|(n, _)| n == name).map(|(_, value)| value.clone());
                Challenge::Token { realm: param("realm").unwrap_or_default(), service: param("service") }
            }
            None if headers.is_empty() => Challenge::None,
            None => Challenge::Direct,
        }
    }
}

/// The challenges of a `WWW-Authenticate` value, each a scheme (lowercase)
/// with its `name=value` parameters (names lowercase, values unquoted).
fn challenges(header: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut found: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for item in split_outside_quotes(header) {
        let item = item.trim();
        // `scheme [name=value]` starts a challenge, `name=value` goes on.
        let (scheme, param) = match item.split_once([' ', '\t']) {
            Some((word, rest)) if !word.contains('=') && !rest.trim_start().starts_with('=') => {
                (word, rest.trim_start())
            }
            _ if !item.contains('=') => (item, ""),
            _ => ("", item),
        };
        if !scheme.is_empty() {
            found.push((scheme.to_ascii_lowercase(), Vec::new()));
        }
        if let (Some((_, params)), Some((name, value))) = (found.last_mut(), param.split_once('=')) {
            params.push((name.trim().to_ascii_lowercase(), unquoted(value.trim())));
        }
    }
    found
}

/// `text` cut at the commas outside quoted strings.
fn split_outside_quotes(text: &str) -> Vec<&str> {
    let (mut items, mut start, mut quoted, mut escaped) = (Vec::new(), 0, false, false);
    for (at, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                items.push(&text[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    items.push(&text[start..]);
    items
}

/// A parameter's value without its quotes and escapes.
fn unquoted(value: &str) -> String {
    let Some(quoted) = value.strip_prefix('"') else { return value.to_string() };
    let mut chars = quoted.chars();
    let mut out = String::new();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            '"' => break,
            c => out.push(c),
        }
    }
    out
}

/// A token service's answer: the token under either name the
/// specifications give it.
#[derive(Deserialize, zeroize::Zeroize, zeroize::ZeroizeOnDrop)]
struct TokenAnswer {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    access_token: Option<String>,
}

/// The body of `response`; `None` when it passes `max` bytes.
async fn capped_body(mut response: reqwest::Response, max: usize) -> reqwest::Result<Option<Zeroizing<Vec<u8>>>> {
    let mut body = Zeroizing::new(Vec::new());
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > max {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

/// What went wrong with a request, without its URL: a redirect may have
/// led to a URL whose query is a credential (a signed storage link).
fn request_error(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        return "no answer in time".to_string();
    }
    let mut causes = Vec::new();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        causes.push(cause.to_string());
        source = cause.source();
    }
    match causes.is_empty() {
        true => "the request failed".to_string(),
        false => shown(&causes.join(": ")),
    }
}

/// An error's text with its sources, made safe to print and cut to size.
fn shown_error(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    shown(&text)
}

fn shown(text: &str) -> String {
    crate::text::ellipsize(&crate::text::terminal_safe_line(text.trim()), 300)
}

/// The blob's destination: stops at the declared size and reports progress.
struct Bounded<'a> {
    out: &'a mut dyn Write,
    written: u64,
    size: u64,
    overflowed: bool,
    progress: &'a dyn Progress,
}

impl tokio::io::AsyncWrite for Bounded<'_> {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.written + buf.len() as u64 > this.size {
            this.overflowed = true;
            return Poll::Ready(Err(io::Error::other("more bytes than declared")));
        }
        // The destination is a local file: writing it in place is brief.
        this.out.write_all(buf)?;
        this.written += buf.len() as u64;
        this.progress.advance(buf.len() as u64);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.get_mut().out.flush())
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::Challenge;

    fn token(realm: &str, service: Option<&str>) -> Challenge {
        Challenge::Token { realm: realm.to_string(), service: service.map(str::to_string) }
    }

    #[test]
    fn a_bearer_challenge_names_the_token_service_and_others_ask_for_the_credentials() {
        assert_eq!(
            Challenge::of(&[r#"Bearer realm="https://auth.example.com/token",service="registry""#]),
            token("https://auth.example.com/token", Some("registry"))
        );
        assert_eq!(Challenge::of(&[r#"bearer service="r",REALM="http://x/t""#]), token("http://x/t", Some("r")));
        assert_eq!(Challenge::of(&["Bearer realm=http://x/t,service=r"]), token("http://x/t", Some("r")));
        assert_eq!(Challenge::of(&[r#"Bearer realm = "http://x/t""#]), token("http://x/t", None));
        // Bearer is taken wherever it stands; commas and quotes inside a
        // quoted value belong to it.
        assert_eq!(
            Challenge::of(&[r#"Basic realm="a, b", Bearer realm="http://evil.example/token""#]),
            token("http://evil.example/token", None)
        );
        assert_eq!(
            Challenge::of(&[r#"Basic realm="registry""#, r#"Bearer realm="https://t/\"q\"",service="s""#]),
            token(r#"https://t/"q""#, Some("s"))
        );
        assert_eq!(Challenge::of(&["Bearer"]), token("", None));
        assert_eq!(Challenge::of(&[r#"Basic realm="registry""#]), Challenge::Direct);
        assert_eq!(Challenge::of(&["Negotiate"]), Challenge::Direct);
        assert_eq!(Challenge::of(&[]), Challenge::None);
    }
}
