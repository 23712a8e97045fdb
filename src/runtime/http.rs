//! The http transport: one request per attempt, built from the tool's URL
//! template, its static headers and the call's arguments.
//!
//! Placeholders are filled percent-encoded; arguments the template does not
//! use go to the query string (GET, DELETE, HEAD) or form the JSON body
//! (POST, PUT, PATCH). Redirects are followed by hand, only to granted
//! targets, and headers built from secrets are dropped whenever the origin
//! changes. Response bodies are read up to `max_output_bytes`.

use std::io::Read;
use std::time::{Duration, Instant};

use reqwest::blocking::{Client, RequestBuilder};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue, LOCATION, RETRY_AFTER};
use reqwest::{Method, StatusCode};
use serde_json::{Map, Value};
use url::Url;

use crate::bundle::capability::{Capability, NetTarget, SecretId};
use crate::bundle::url_template::{UrlTemplate, target_of};
use crate::event::Decision;
use crate::process::cancel::Cancel;
use crate::runtime::call::Call;
use crate::runtime::envelope::{self, Outcome, Stdout};
use crate::runtime::error::{CallError, CallErrorKind};
use crate::runtime::exposure::denied_error;
use crate::runtime::transport::{Attempt, AttemptError, Audit, FailureKind, Plan, Reply};
use crate::secrets::SecretValue;

/// Redirects followed at most.
pub(crate) const MAX_REDIRECTS: usize = 5;
/// How much of an error response body a message quotes.
const BODY_QUOTE_BYTES: usize = 512;
/// Connect timeout (the call's own deadline still applies).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// One header to send.
#[derive(Clone, Debug)]
pub(crate) struct PlannedHeader {
    /// The name.
    pub name: HeaderName,
    /// The value (marked sensitive when built from a secret).
    pub value: HeaderValue,
    /// Whether the value holds a secret (dropped when the origin changes).
    pub carries_secret: bool,
}

/// A request ready to send.
#[derive(Clone, Debug)]
pub(crate) struct HttpPlan {
    /// The method.
    pub method: Method,
    /// The final URL (placeholders filled, query added).
    pub url: Url,
    /// The JSON body, for POST, PUT and PATCH.
    pub body: Option<Value>,
    /// The headers.
    pub headers: Vec<PlannedHeader>,
    /// Host and port of the final URL.
    pub target: NetTarget,
    /// Most response body bytes accepted.
    pub max_output_bytes: u64,
}

/// Why a request could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PlanError {
    /// The arguments cannot fill the URL (a usage error).
    Input(String),
    /// A header value would be unsafe to send (refused by policy).
    Refused(String),
}

/// Why the HTTP client every call shares could not be set up (each attempt
/// of an http tool then fails with it).
#[derive(Debug, thiserror::Error)]
#[error("cannot set up the HTTP client: {0}")]
pub(crate) struct ClientError(#[source] reqwest::Error);

/// The HTTP client every call shares: no redirects, no proxies from the
/// environment (a call goes only where its grant says).
pub(crate) fn client() -> Result<Client, ClientError> {
    Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(CONNECT_TIMEOUT)
        .user_agent(concat!("rlp/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(ClientError)
}

/// Whether `method` sends the unused arguments as a JSON body.
fn has_body(method: &Method) -> bool {
    matches!(*method, Method::POST | Method::PUT | Method::PATCH)
}

fn query_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Replaces each `${secret:<id>}` in `template`, the value of `site` (as
/// messages name it: ``header `Authorization` ``); says whether it used a
/// secret. The error says what is wrong with the template.
pub(crate) fn fill_secrets(
    site: &str,
    template: &str,
    secrets: &[(SecretId, SecretValue)],
) -> Result<(String, bool), String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    let mut used = false;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or_else(|| format!("{site} has an unclosed `${{` placeholder"))?;
        let inner = &after[..end];
        let id = inner
            .strip_prefix("secret:")
            .ok_or_else(|| format!("{site}: `${{{inner}}}` is not a `${{secret:<id>}}` placeholder"))?;
        let (_, value) = secrets
            .iter()
            .find(|(s, _)| s.as_str() == id)
            .ok_or_else(|| format!("{site} uses secret `{id}`, which is not among the tool's secrets"))?;
        out.push_str(value.expose());
        used = true;
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok((out, used))
}

/// Builds the request for one call.
pub(crate) fn plan(
    method: &str,
    template: &UrlTemplate,
    headers: &[(String, String)],
    arguments: &Value,
    secrets: &[(SecretId, SecretValue)],
    max_output_bytes: u64,
) -> Result<HttpPlan, PlanError> {
    let method = Method::from_bytes(method.as_bytes())
        .map_err(|_| PlanError::Input(format!("`{method}` is not an HTTP method")))?;
    let empty = Map::new();
    let args = arguments.as_object().unwrap_or(&empty);
    let mut url = template.render(args).map_err(PlanError::Input)?;
    let used: Vec<&str> = template.placeholders().collect();
    let unused: Map<String, Value> =
        args.iter().filter(|(k, _)| !used.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect();
    let body = if has_body(&method) {
        Some(if arguments.is_object() { Value::Object(unused) } else { arguments.clone() })
    } else {
        if !unused.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (key, value) in &unused {
                pairs.append_pair(key, &query_text(value));
            }
        }
        None
    };
    let target =
        target_of(&url).ok_or_else(|| PlanError::Input(format!("the URL `{}` has no host", template.as_str())))?;
    let mut planned = Vec::with_capacity(headers.len());
    for (name, raw) in headers {
        let (text, carries_secret) =
            fill_secrets(&format!("header `{name}`"), raw, secrets).map_err(PlanError::Refused)?;
        if text.contains(['\r', '\n', '\0']) {
            return Err(PlanError::Refused(format!(
                "header `{name}` would contain CR, LF or NUL after its placeholders were filled; the call is refused"
            )));
        }
        let header_name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| PlanError::Refused(format!("`{name}` is not a valid header name")))?;
        let mut value = HeaderValue::from_str(&text).map_err(|_| {
            PlanError::Refused(format!("header `{name}` holds characters that cannot be sent in a header"))
        })?;
        value.set_sensitive(carries_secret);
        planned.push(PlannedHeader { name: header_name, value, carries_secret });
    }
    Ok(HttpPlan { method, url, body, headers: planned, target, max_output_bytes })
}

impl Call<'_> {
    /// The http transport's plan of the call: the request built from the
    /// URL template, the headers and the arguments; its final URL's target
    /// must be granted too.
    pub(crate) fn plan_http(
        &mut self,
        method: &str,
        template: &UrlTemplate,
        headers: &[(String, String)],
    ) -> Result<HttpPlan, CallError> {
        let tool = self.tool();
        let planned = plan(method, template, headers, &self.request.arguments, &self.secrets, tool.max_output_bytes);
        let plan = match planned {
            Ok(plan) => plan,
            Err(PlanError::Input(why)) => {
                return Err(self.journal.refuse(
                    CallError::new(CallErrorKind::InvalidInput, format!("tool `{}`: {why}", tool.id))
                        .help("pass every argument the URL template names"),
                ));
            }
            Err(PlanError::Refused(why)) => {
                return Err(self.journal.refuse(
                    CallError::new(CallErrorKind::Refused, format!("tool `{}`: {why}", tool.id))
                        .help("fix the header template or the secret's value"),
                ));
            }
        };
        // The grant is checked again on the final URL.
        let cap = Capability::Net(plan.target.clone());
        let policy = self.runtime.policy();
        let (decision, reason) = policy.decide(&cap);
        self.journal.audit(&cap, decision, &format!("final URL: {reason}"));
        if decision == Decision::Deny {
            return Err(self.journal.refuse(denied_error(policy, &tool.id, &[(cap, reason)])));
        }
        Ok(plan)
    }
}

impl Plan for HttpPlan {
    /// Method and URL.
    fn target(&self) -> String {
        format!("{} {}", self.method, self.url)
    }

    fn run(&self, attempt: &Attempt<'_>, audits: &mut Vec<Audit>) -> Result<Reply, AttemptError> {
        let client =
            attempt.runtime.http_client().map_err(|e| AttemptError::new(FailureKind::Transport, e.to_string()))?;
        let policy = attempt.runtime.policy();
        run(client, self, attempt, &|cap: &Capability| policy.effective.allows(cap), audits)
    }
}

fn origin(url: &Url) -> (String, Option<String>, Option<u16>) {
    (url.scheme().to_string(), url.host_str().map(str::to_ascii_lowercase), url.port_or_known_default())
}

fn retry_after_ms(response: &reqwest::blocking::Response) -> Option<u64> {
    let text = response.headers().get(RETRY_AFTER)?.to_str().ok()?;
    text.trim().parse::<u64>().ok().map(|s| s.saturating_mul(1000))
}

/// Sends the request (following granted redirects) and maps the response.
///
/// `allows` says whether a redirect target is granted; each redirect
/// decision is appended to `audits`.
pub(crate) fn run(
    client: &Client,
    plan: &HttpPlan,
    attempt: &Attempt<'_>,
    allows: &dyn Fn(&Capability) -> bool,
    audits: &mut Vec<Audit>,
) -> Result<Reply, AttemptError> {
    let first_origin = origin(&plan.url);
    let mut url = plan.url.clone();
    let mut method = plan.method.clone();
    let mut body = plan.body.clone();
    for _hop in 0..=MAX_REDIRECTS {
        check_cancel(attempt)?;
        let remaining = attempt.deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(timeout(attempt));
        }
        let same_origin = origin(&url) == first_origin;
        let request = build_request(
            client.request(method.clone(), url.clone()).timeout(remaining),
            plan,
            same_origin,
            body.as_ref(),
        )?;
        let response = match request.send() {
            Ok(response) => response,
            Err(e) if e.is_timeout() => return Err(timeout(attempt)),
            Err(e) => {
                let error = AttemptError::new(
                    FailureKind::Transport,
                    attempt.scrubber.scrub_string(&format!(
                        "cannot reach {}: {}",
                        url.host_str().unwrap_or("the host"),
                        error_chain(&e)
                    )),
                );
                return Err(if e.is_connect() { error.transient(None) } else { error });
            }
        };
        let status = response.status();
        if status.is_redirection()
            && let Some(location) = response.headers().get(LOCATION)
        {
            let next = redirect_target(&url, status, location, allows, audits)?;
            if status == StatusCode::SEE_OTHER
                || (matches!(status, StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND) && method == Method::POST)
            {
                if method != Method::HEAD {
                    method = Method::GET;
                }
                body = None;
            }
            url = next;
            continue;
        }
        check_cancel(attempt)?;
        return read_response(response, plan, attempt, status);
    }
    Err(AttemptError::new(FailureKind::Transport, format!("more than {MAX_REDIRECTS} redirects")))
}

/// One hop's request: the plan's headers (those built from secrets only to
/// the first origin), `Accept: application/json` unless the tool set its
/// own, and the JSON body.
fn build_request(
    mut request: RequestBuilder,
    plan: &HttpPlan,
    same_origin: bool,
    body: Option<&Value>,
) -> Result<RequestBuilder, AttemptError> {
    let mut has_accept = false;
    for header in &plan.headers {
        if header.carries_secret && !same_origin {
            continue;
        }
        has_accept |= header.name == ACCEPT;
        request = request.header(header.name.clone(), header.value.clone());
    }
    if !has_accept {
        request = request.header(ACCEPT, "application/json");
    }
    if let Some(body) = body {
        let bytes = serde_json::to_vec(body)
            .map_err(|e| AttemptError::new(FailureKind::Transport, format!("cannot encode the body: {e}")))?;
        request = request.header(CONTENT_TYPE, "application/json").body(bytes);
    }
    Ok(request)
}

/// Where a redirect from `url` leads, once its target is found granted;
/// the decision is appended to `audits` either way.
fn redirect_target(
    url: &Url,
    status: StatusCode,
    location: &HeaderValue,
    allows: &dyn Fn(&Capability) -> bool,
    audits: &mut Vec<Audit>,
) -> Result<Url, AttemptError> {
    let next = location
        .to_str()
        .ok()
        .and_then(|l| url.join(l).ok())
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .ok_or_else(|| {
            AttemptError::new(
                FailureKind::Transport,
                format!("HTTP {status}: the redirect's Location is not an http(s) URL"),
            )
        })?;
    let Some(target) = target_of(&next) else {
        return Err(AttemptError::new(FailureKind::Transport, "the redirect's Location has no host"));
    };
    let capability = Capability::Net(target.clone());
    if !allows(&capability) {
        audits.push(Audit {
            capability: capability.clone(),
            decision: Decision::Deny,
            reason: format!("redirect from {} is not granted; not followed", url.origin().ascii_serialization()),
        });
        let mut error = AttemptError::new(
            FailureKind::Refused,
            format!("HTTP {status}: redirect to {target} not followed: the policy does not grant `{capability}`"),
        )
        .refused();
        error.status = Some(status.as_u16());
        return Err(error);
    }
    audits.push(Audit {
        capability,
        decision: Decision::Allow,
        reason: "redirect target granted by policy".to_string(),
    });
    Ok(next)
}

/// Size of one read of a response body (the cancel is looked at between reads).
const BODY_CHUNK: usize = 8 * 1024;

/// Fails the attempt as cancelled once its call was cancelled (the same
/// failure an exec tool's cancelled run ends with).
fn check_cancel(attempt: &Attempt<'_>) -> Result<(), AttemptError> {
    if attempt.cancel.is_some_and(Cancel::is_cancelled) {
        return Err(AttemptError::new(
            FailureKind::Cancelled,
            format!("the call of `{}` was cancelled; its request was abandoned", attempt.tool),
        ));
    }
    Ok(())
}

/// Reads `body` to its end, or to `limit` bytes and one more; between
/// reads, a cancelled call ends the reading.
fn read_body(mut body: impl Read, limit: u64, attempt: &Attempt<'_>) -> Result<Vec<u8>, ReadFailure> {
    let mut bytes = Vec::new();
    let mut chunk = [0u8; BODY_CHUNK];
    while (bytes.len() as u64) <= limit {
        check_cancel(attempt).map_err(ReadFailure::Cancelled)?;
        let room = usize::try_from(limit.saturating_add(1) - bytes.len() as u64).unwrap_or(usize::MAX);
        match body.read(&mut chunk[..room.min(BODY_CHUNK)]) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadFailure::Io(e)),
        }
    }
    Ok(bytes)
}

/// Why a response body could not be read.
enum ReadFailure {
    /// The call was cancelled.
    Cancelled(AttemptError),
    /// Reading failed.
    Io(std::io::Error),
}

fn timeout(attempt: &Attempt<'_>) -> AttemptError {
    AttemptError::new(
        FailureKind::Timeout,
        format!("tool `{}` timed out after {} ms (timeout_ms)", attempt.tool, attempt.timeout_ms),
    )
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn read_response(
    response: reqwest::blocking::Response,
    plan: &HttpPlan,
    attempt: &Attempt<'_>,
    status: StatusCode,
) -> Result<Reply, AttemptError> {
    let limit = plan.max_output_bytes;
    let too_large = || {
        AttemptError::new(
            FailureKind::OutputTooLarge,
            format!(
                "tool `{}` output too large: the response body exceeds {limit} bytes (max_output_bytes)",
                attempt.tool
            ),
        )
    };
    if response.content_length().is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let retry_after = retry_after_ms(&response);
    let bytes = match read_body(response, limit, attempt) {
        Ok(bytes) => bytes,
        Err(ReadFailure::Cancelled(error)) => return Err(error),
        Err(ReadFailure::Io(e)) => {
            // A body that stalls past the deadline surfaces as a read error.
            let timed_out = e.kind() == std::io::ErrorKind::TimedOut
                || e.get_ref()
                    .and_then(|inner| inner.downcast_ref::<reqwest::Error>())
                    .is_some_and(reqwest::Error::is_timeout)
                || std::time::Instant::now() >= attempt.deadline;
            if timed_out {
                return Err(timeout(attempt));
            }
            return Err(AttemptError::new(
                FailureKind::Transport,
                attempt.scrubber.scrub_string(&format!("cannot read the response: {e}")),
            ));
        }
    };
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    // Every failure of a response carries its status; text that came from
    // the server is scrubbed of the call's secrets.
    let failure = |kind: FailureKind, text: String| {
        let mut error = AttemptError::new(kind, attempt.scrubber.scrub_string(&text));
        error.status = Some(status.as_u16());
        error
    };
    if status.is_success() {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Reply::bare(Value::Null));
        }
        let body: Value = serde_json::from_slice(&bytes).map_err(|e| {
            failure(
                FailureKind::Tool,
                format!(
                    "HTTP {status}: the response body is not JSON ({e}): {}",
                    attempt.scrubber.scrub_head(&bytes, BODY_QUOTE_BYTES)
                ),
            )
        })?;
        return body_reply(body, attempt, status, &failure);
    }
    let excerpt = attempt.scrubber.scrub_head(&bytes, BODY_QUOTE_BYTES);
    let message =
        if excerpt.trim().is_empty() { format!("HTTP {status}") } else { format!("HTTP {status}: {}", excerpt.trim()) };
    if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
        return Err(failure(FailureKind::HttpStatus, message).transient(retry_after));
    }
    Err(failure(FailureKind::HttpStatus, message))
}

/// A 2xx body: an outcome envelope (a result with its usage, or the API's
/// error) or a bare result. An http tool cannot ask questions: there is no
/// way to send it the answers.
fn body_reply(
    body: Value,
    attempt: &Attempt<'_>,
    status: StatusCode,
    failure: &dyn Fn(FailureKind, String) -> AttemptError,
) -> Result<Reply, AttemptError> {
    match envelope::read_value(body) {
        Stdout::Plain(value) => Ok(Reply::bare(value)),
        Stdout::Envelope(Outcome::Success { result, usage }) => Ok(Reply::Result { value: result, usage }),
        Stdout::Envelope(Outcome::Error { message, transient, retry_after_ms }) => {
            let error = failure(FailureKind::Tool, format!("tool `{}` failed: {message}", attempt.tool));
            Err(if transient { error.transient(retry_after_ms) } else { error })
        }
        Stdout::Envelope(Outcome::NeedsInput { .. }) => Err(failure(
            FailureKind::NeedsInput,
            format!(
                "HTTP {status}: tool `{}` asked a question, but only exec tools can be given answers",
                attempt.tool
            ),
        )),
        Stdout::Malformed(why) | Stdout::NotJson(why) => Err(failure(
            FailureKind::Tool,
            format!("HTTP {status}: the response is a malformed outcome envelope: {why}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secrets() -> Vec<(SecretId, SecretValue)> {
        vec![("runloop/api/token".parse().unwrap(), SecretValue::new("tok123"))]
    }

    #[test]
    fn fills_url_query_and_body() {
        let t = UrlTemplate::parse("http://127.0.0.1:9/items/{name}?fixed=1").unwrap();
        let args = json!({"name": "a b", "q": "x&y", "n": 2});
        let get = plan("GET", &t, &[], &args, &[], 10).unwrap();
        assert_eq!(get.url.as_str(), "http://127.0.0.1:9/items/a%20b?fixed=1&q=x%26y&n=2");
        assert_eq!(get.body, None);
        let post = plan("POST", &t, &[], &args, &[], 10).unwrap();
        assert_eq!(post.url.as_str(), "http://127.0.0.1:9/items/a%20b?fixed=1");
        assert_eq!(post.body, Some(json!({"q": "x&y", "n": 2})));
        assert_eq!(post.target.to_string(), "127.0.0.1:9");
        assert!(matches!(plan("GET", &t, &[], &json!({}), &[], 10), Err(PlanError::Input(_))));
    }

    #[test]
    fn headers_take_secrets_and_refuse_injection() {
        let t = UrlTemplate::parse("https://api.example.com/x").unwrap();
        let headers = vec![("Authorization".to_string(), "Bearer ${secret:runloop/api/token}".to_string())];
        let p = plan("GET", &t, &headers, &json!({}), &secrets(), 10).unwrap();
        assert_eq!(p.headers[0].value.to_str().unwrap(), "Bearer tok123");
        assert!(p.headers[0].carries_secret && p.headers[0].value.is_sensitive());
        let evil = vec![("runloop/api/token".parse().unwrap(), SecretValue::new("a\r\nX-Evil: 1"))];
        let err = plan("GET", &t, &headers, &json!({}), &evil, 10).unwrap_err();
        assert!(
            matches!(&err, PlanError::Refused(m) if m.contains("CR, LF or NUL") && !m.contains("X-Evil")),
            "{err:?}"
        );
        let undeclared = vec![("X".to_string(), "${secret:runloop/api/other}".to_string())];
        assert!(matches!(plan("GET", &t, &undeclared, &json!({}), &secrets(), 10), Err(PlanError::Refused(_))));
    }
}
