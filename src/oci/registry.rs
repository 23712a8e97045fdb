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

use std::future::Future;
use std::io::{self, Write};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::FutureExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor};
use oci_client::secrets::RegistryAuth;

use crate::integrity::failure::{Failure, Reason};
use crate::oci::artifact;
use crate::oci::credentials::Credentials;
use crate::oci::reference::OciReference;
use crate::pack::Progress;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest a manifest may take to arrive whole.
const MANIFEST_DEADLINE: Duration = Duration::from_secs(60);

/// A connection to the registry of one reference.
pub(crate) struct Registry<'a> {
    client: oci_client::Client,
    runtime: tokio::runtime::Runtime,
    auth: RegistryAuth,
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
            user_agent: concat!("rlp/", env!("CARGO_PKG_VERSION")),
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
        Ok(Registry { client, runtime, auth: credentials.client_auth(), credentials, reference, plain_http })
    }

    /// Pushes the archive `data` (whose digest is `layer_digest`) and the
    /// config blob, then `manifest`, byte for byte.
    pub(crate) fn push(&self, data: &[u8], layer_digest: &str, manifest: Vec<u8>) -> Result<(), Failure> {
        let reference = self.client_reference()?;
        self.check_token_service()?;
        let config_digest = artifact::sha256_digest(artifact::CONFIG_BYTES);
        let manifest_type = http::HeaderValue::from_static(OCI_IMAGE_MEDIA_TYPE);
        self.run(async {
            self.client.store_auth_if_needed(reference.resolve_registry(), &self.auth).await;
            self.client.push_blob(&reference, data, layer_digest).await?;
            self.client.push_blob(&reference, artifact::CONFIG_BYTES, &config_digest).await?;
            self.client.push_manifest_raw(&reference, manifest, manifest_type).await?;
            Ok(())
        })
    }

    /// The raw manifest the reference names, and its digest.
    pub(crate) fn manifest(&self) -> Result<(Vec<u8>, String), Failure> {
        let reference = self.client_reference()?;
        self.check_token_service()?;
        // The client reads a manifest whole: a deadline bounds what an
        // answer that never ends can cost.
        let fetch = self.client.pull_manifest_raw(&reference, &self.auth, &[OCI_IMAGE_MEDIA_TYPE]);
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

    /// Refuses to go on when basic credentials would be sent to a token
    /// service in plain HTTP: the registry's challenge names where the
    /// client sends them to exchange for a token.
    fn check_token_service(&self) -> Result<(), Failure> {
        if !matches!(self.credentials, Credentials::Basic { .. }) {
            return Ok(());
        }
        let scheme = if self.plain_http { "http" } else { "https" };
        let url = format!("{scheme}://{}/v2/", self.reference.registry);
        let mut builder = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(READ_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none());
        if self.plain_http {
            builder = builder.no_proxy();
        }
        let challenge = self.runtime.block_on(async {
            let response = builder.build().ok()?.get(&url).send().await.ok()?;
            let header = response.headers().get(reqwest::header::WWW_AUTHENTICATE)?.to_str().ok()?.to_string();
            Some(header)
        });
        // Unreachable now, the call itself will say so; no challenge or a
        // basic one alone: credentials go to the registry alone. Otherwise
        // every realm the header names must be safe, whichever challenge
        // the client picks.
        let realms = challenge.as_deref().map(token_realms).unwrap_or_default();
        let Some(realm) = realms.into_iter().find(|realm| !self.is_safe_realm(realm)) else { return Ok(()) };
        Err(Failure::new(
            Reason::Unreadable,
            format!(
                "the registry {} sends credentials to a token service that is not HTTPS (`{}`); rlp does not send them there",
                self.reference.registry,
                shown(realm)
            ),
        )
        .with_help("fix the registry's token service address, or use RLP_REGISTRY_TOKEN with a token issued for the registry"))
    }

    /// Whether basic credentials may go to the token service at `realm`:
    /// HTTPS, or plain HTTP on this machine when the registry is reached so
    /// (a basic challenge's realm, a name, is no address at all).
    fn is_safe_realm(&self, realm: &str) -> bool {
        match url::Url::parse(realm) {
            // Not an address: the client cannot send anything there.
            Err(_) => true,
            Ok(realm) if realm.scheme() == "https" => true,
            Ok(realm) if realm.scheme() == "http" && self.plain_http => {
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

/// The realms of a `WWW-Authenticate` header that offers a `Bearer`
/// challenge (any of its challenges may be the one a client picks), quoted
/// (`realm="…"`) or not; none when it offers only other schemes.
fn token_realms(header: &str) -> Vec<&str> {
    let lower = header.to_ascii_lowercase();
    if !lower.contains("bearer") {
        return Vec::new();
    }
    lower
        .match_indices("realm=")
        .map(|(at, found)| {
            let value = &header[at + found.len()..];
            match value.strip_prefix('"') {
                Some(quoted) => quoted.split('"').next().unwrap_or_default(),
                None => value.split([',', ' ', '\t']).next().unwrap_or_default(),
            }
        })
        .collect()
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
    use super::token_realms;

    #[test]
    fn every_realm_of_a_header_offering_bearer_is_read() {
        assert_eq!(
            token_realms(r#"Bearer realm="https://auth.example.com/token",service="registry""#),
            ["https://auth.example.com/token"]
        );
        assert_eq!(token_realms(r#"bearer service="r",REALM="http://x/t""#), ["http://x/t"]);
        assert!(token_realms(r#"Basic realm="registry""#).is_empty());
        // A client may pick the second challenge: its realm is read too.
        assert_eq!(
            token_realms(r#"Basic realm="registry", Bearer realm="http://evil.example/token""#),
            ["registry", "http://evil.example/token"]
        );
        assert_eq!(token_realms("Bearer realm=http://x/t,service=r"), ["http://x/t"]);
        assert_eq!(token_realms(r#"Bearer realm="unterminated"#), ["unterminated"]);
    }
}
