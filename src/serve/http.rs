//! The Streamable HTTP transport at `/mcp`, behind two checks of rlp's own:
//! a bearer token (when the server has one; compared in constant time) and
//! a loopback `Origin` (DNS rebinding). Request bodies are bounded in size
//! ([`MAX_MESSAGE_BYTES`]) and in time ([`BODY_WAIT`]), headers by
//! [`HEADER_WAIT`], connections by [`MAX_CONNECTIONS`], sessions by
//! [`Sessions`]; `Host` is checked by the SDK on loopback binds.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_service::Service;

use crate::serve::MAX_MESSAGE_BYTES;
use crate::serve::handler::{Handler, Shared};
use crate::serve::tasks::legacy::{Sessions, normalize, refusing_sessions};

/// The endpoint's path.
pub const ENDPOINT: &str = "/mcp";
/// Longest a client may take to send a request's headers, and longest a
/// kept-alive connection waits for its next request; the connection is
/// closed after that (a client that opens connections and sends nothing
/// holds none for long).
const HEADER_WAIT: Duration = Duration::from_secs(10);
/// Longest a client may take to send a request's whole body, once its
/// headers are in; past it the request is answered 408 and the connection
/// closed (a client that sends headers and then nothing, or a byte now and
/// then, holds no connection for long). 4 MiB, the largest body, takes it
/// at about 140 KB/s.
const BODY_WAIT: Duration = Duration::from_secs(30);
/// Most connections served at once; further clients wait in the listen
/// backlog until one closes (every connection holds a descriptor and a task).
const MAX_CONNECTIONS: usize = 512;
/// How long accepting pauses after a failed accept (out of descriptors):
/// the loop never spins.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// What the HTTP transport is started with.
pub(crate) struct HttpSettings {
    /// The bound listener.
    pub(crate) listener: std::net::TcpListener,
    /// The bearer token every request must carry, if any.
    pub(crate) token: Option<String>,
    /// Most sessions held at once.
    pub(crate) max_sessions: usize,
}

/// Events of one response stream kept for a client that reconnects with
/// `Last-Event-ID`: older ones are dropped (the latest, the response
/// itself among them, are kept).
const RESUMABLE_EVENTS: usize = 64;
/// How long a finished response stream stays resumable.
const RESUMABLE_FOR: Duration = Duration::from_secs(60);
/// How long a client waits, when the sessions are all taken, before it
/// tries again.
const SESSIONS_FULL_RETRY: &str = "5";

type Reply = Response<BoxBody<Bytes, Infallible>>;

/// Cancelled when the client of one HTTP request goes away (its response,
/// streamed or not, is dropped): a call a stateless request (2026-07-28)
/// made is cancelled; a session's stream stays resumable instead.
#[derive(Clone, Debug)]
pub(crate) struct ClientGone(pub(crate) CancellationToken);

/// The client of `request` as the handler finds it (`None` over stdio).
pub(crate) fn client_gone(extensions: &rmcp::model::Extensions) -> Option<CancellationToken> {
    extensions.get::<http::request::Parts>()?.extensions.get::<ClientGone>().map(|gone| gone.0.clone())
}

fn refuse(status: StatusCode, message: &str) -> Reply {
    let mut reply = Response::new(Full::new(Bytes::from(format!("{message}\n"))).boxed());
    *reply.status_mut() = status;
    if status == StatusCode::UNAUTHORIZED
        && let Ok(value) = hyper::header::HeaderValue::from_str("Bearer")
    {
        reply.headers_mut().insert(hyper::header::WWW_AUTHENTICATE, value);
    }
    reply
}

/// Whether the `Origin` header names a loopback host (`localhost`,
/// `127.0.0.0/8`, `[::1]`), whatever its scheme and port.
pub(crate) fn is_loopback_origin(origin: &str) -> bool {
    let Ok(url) = url::Url::parse(origin) else { return false };
    match url.host() {
        Some(url::Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Whether `header` is `Bearer <token>`, compared in constant time (as
/// BLAKE3 digests, whose equality is constant-time).
fn bearer_matches(header: Option<&str>, token: &str) -> bool {
    let given = header.and_then(|h| h.strip_prefix("Bearer ")).unwrap_or("");
    blake3::hash(given.as_bytes()) == blake3::hash(token.as_bytes())
}

/// rlp's checks, before the SDK sees the request: the refusal's status and
/// message, if it is refused.
fn check(request: &Request<Incoming>, token: Option<&str>) -> Result<(), (StatusCode, &'static str)> {
    if let Some(token) = token {
        let header = request.headers().get(hyper::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        if !bearer_matches(header, token) {
            return Err((StatusCode::UNAUTHORIZED, "a bearer token is required (Authorization: Bearer …)"));
        }
    }
    if let Some(origin) = request.headers().get(hyper::header::ORIGIN) {
        let loopback = origin.to_str().is_ok_and(is_loopback_origin);
        if !loopback {
            return Err((StatusCode::FORBIDDEN, "requests from a non-loopback Origin are refused"));
        }
    }
    if request.uri().path() != ENDPOINT {
        return Err((StatusCode::NOT_FOUND, "the MCP endpoint is /mcp"));
    }
    Ok(())
}

/// The answer to a client whose session [`Sessions`] refused as past the
/// cap: 503, with when to try again.
fn sessions_full(max_sessions: usize) -> Reply {
    let mut reply = refuse(
        StatusCode::SERVICE_UNAVAILABLE,
        &format!(
            "rlp serve holds its most sessions ({max_sessions}, --max-sessions); end one (DELETE /mcp with its Mcp-Session-Id) or try again later"
        ),
    );
    reply
        .headers_mut()
        .insert(hyper::header::RETRY_AFTER, hyper::header::HeaderValue::from_static(SESSIONS_FULL_RETRY));
    reply
}

/// `request` with its JSON-RPC message read whole (at most
/// [`MAX_MESSAGE_BYTES`]: 413 beyond; within `wait`, [`BODY_WAIT`] but in
/// tests: 408 past it) and [`normalize`]d: the tasks of 2025-11-25 made
/// readable by the SDK.
async fn normalized<B>(request: Request<B>, wait: Duration) -> Result<Request<Full<Bytes>>, Reply>
where
    B: hyper::body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (parts, body) = request.into_parts();
    let limited = http_body_util::Limited::new(body, MAX_MESSAGE_BYTES);
    let bytes = match tokio::time::timeout(wait, limited.collect()).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(_)) => {
            return Err(refuse(StatusCode::PAYLOAD_TOO_LARGE, "the request body is too large or was cut short"));
        }
        Err(_) => {
            let message = format!("the request body did not arrive in full within {wait:?}");
            let mut reply = refuse(StatusCode::REQUEST_TIMEOUT, &message);
            // The rest of the body is not read: the connection ends here.
            reply.headers_mut().insert(hyper::header::CONNECTION, hyper::header::HeaderValue::from_static("close"));
            return Err(reply);
        }
    };
    let bytes = if parts.method == hyper::Method::POST { normalize(&bytes).map_or(bytes, Bytes::from) } else { bytes };
    Ok(Request::from_parts(parts, Full::new(bytes)))
}

/// Serves until `stop` is cancelled.
pub(crate) async fn serve(shared: Arc<Shared>, settings: HttpSettings, stop: CancellationToken) -> std::io::Result<()> {
    settings.listener.set_nonblocking(true)?;
    let bound = settings.listener.local_addr()?.ip();
    let listener = TcpListener::from_std(settings.listener)?;
    let mut config = StreamableHttpServerConfig::default()
        .with_max_request_body_bytes(MAX_MESSAGE_BYTES)
        .with_cancellation_token(stop.child_token());
    if bound.is_loopback() {
        // Besides the SDK's `localhost`, `127.0.0.1` and `::1`: the address
        // bound, which its clients name (e.g. 127.0.0.2).
        config.allowed_hosts.push(bound.to_string());
    } else {
        // Any Host may reach a non-loopback bind; the bearer token guards it.
        config = config.disable_allowed_hosts();
    }
    let mut local = LocalSessionManager::default();
    local.session_config.channel_capacity = RESUMABLE_EVENTS;
    local.session_config.completed_cache_ttl = RESUMABLE_FOR;
    let max_sessions = settings.max_sessions;
    let sessions = Arc::new(Sessions::new(local, max_sessions));
    let service = StreamableHttpService::new(move || Ok(Handler::new(Arc::clone(&shared))), sessions, config);
    let token: Option<Arc<str>> = settings.token.map(Into::into);
    let connections = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let slot = tokio::select! {
            slot = Arc::clone(&connections).acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => return Ok(()),
            },
            () = stop.cancelled() => return Ok(()),
        };
        let (stream, _peer): (_, SocketAddr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(_) => {
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                    continue;
                }
            },
            () = stop.cancelled() => return Ok(()),
        };
        // A response's headers and its first event go out as two small
        // writes: with Nagle's algorithm the second waits for the client's
        // delayed acknowledgement of the first (about 40 ms).
        let _ = stream.set_nodelay(true);
        let service = service.clone();
        let token = token.clone();
        let connection = hyper::service::service_fn(move |mut request: Request<Incoming>| {
            let mut service = service.clone();
            let refused = check(&request, token.as_deref()).err();
            let gone = CancellationToken::new();
            request.extensions_mut().insert(ClientGone(gone.clone()));
            async move {
                match refused {
                    Some((status, message)) => Ok::<_, Infallible>(refuse(status, message)),
                    None => {
                        let request = match normalized(request, BODY_WAIT).await {
                            Ok(request) => request,
                            Err(reply) => return Ok(reply),
                        };
                        let (reply, full) = refusing_sessions(service.call(request)).await;
                        if full {
                            return Ok(sessions_full(max_sessions));
                        }
                        let reply = reply?;
                        // The guard cancels `gone` when hyper drops the body:
                        // at its end, or when the client went away.
                        let guard = gone.drop_guard();
                        Ok(reply.map(move |body| {
                            body.map_frame(move |frame| {
                                let _held = &guard;
                                frame
                            })
                            .boxed()
                        }))
                    }
                }
            }
        });
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_WAIT)
                .serve_connection(TokioIo::new(stream), connection)
                .await;
            drop(slot);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_origins_pass() {
        for origin in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "https://127.8.0.1:9",
            "http://[::1]:8931",
            "http://LOCALHOST",
        ] {
            assert!(is_loopback_origin(origin), "{origin}");
        }
        for origin in
            ["http://evil.example", "null", "http://localhost.evil.example", "http://10.0.0.1", "file:///x", ""]
        {
            assert!(!is_loopback_origin(origin), "{origin}");
        }
    }

    #[tokio::test]
    async fn a_body_that_does_not_arrive_in_full_in_time_is_answered_408() {
        type Frames = futures_util::stream::BoxStream<'static, Result<hyper::body::Frame<Bytes>, Infallible>>;
        const WAIT: Duration = Duration::from_millis(200);
        // Nothing after the headers, and a byte every 50 ms for ever: each
        // byte comes well within the wait, the body never in full.
        let silent: Frames = Box::pin(futures_util::stream::pending());
        let trickled: Frames = Box::pin(futures_util::stream::unfold((), |()| async {
            tokio::time::sleep(WAIT / 4).await;
            Some((Ok(hyper::body::Frame::data(Bytes::from_static(b" "))), ()))
        }));
        for frames in [silent, trickled] {
            let request = Request::post(ENDPOINT).body(http_body_util::StreamBody::new(frames)).unwrap();
            let read = tokio::time::timeout(WAIT * 10, normalized(request, WAIT)).await;
            let reply = read.expect("the body is still being read").expect_err("the body was read");
            assert_eq!(reply.status(), StatusCode::REQUEST_TIMEOUT);
            assert_eq!(reply.headers()[hyper::header::CONNECTION], "close");
            let message = reply.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(message, "the request body did not arrive in full within 200ms\n");
        }
    }

    #[test]
    fn the_bearer_must_match_exactly() {
        assert!(bearer_matches(Some("Bearer s3cret"), "s3cret"));
        for header in [None, Some("Bearer s3cre"), Some("bearer s3cret"), Some("s3cret"), Some("Bearer s3cret ")] {
            assert!(!bearer_matches(header, "s3cret"), "{header:?}");
        }
    }
}
