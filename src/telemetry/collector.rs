//! The HTTP client spans are sent with: rlp's own reqwest (blocking, rustls)
//! behind the exporter's `HttpClient` trait, so one HTTP and TLS stack
//! serves the runtime and the exporter. It follows no redirect, uses no
//! proxy from the environment, gives up after the exporter's timeout, and
//! keeps the last reason a request failed — without the URL, which may
//! carry a credential — for the one warning or error that names it.

use std::io::Read;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use opentelemetry_http::{HttpClient, HttpError};

/// Most bytes of a collector's answer read (its partial-success message).
const MAX_ANSWER_BYTES: u64 = 64 * 1024;

/// A client for one collector.
#[derive(Clone, Debug)]
pub(crate) struct Collector {
    client: reqwest::blocking::Client,
    timeout: Duration,
    failure: Arc<Mutex<Option<String>>>,
}

impl Collector {
    /// A client whose requests give up after `timeout`.
    pub(crate) fn new(timeout: Duration) -> Result<Collector, String> {
        let client = reqwest::blocking::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()
            .map_err(|e| format!("cannot make the HTTP client for spans: {}", e.without_url()))?;
        Ok(Collector { client, timeout, failure: Arc::new(Mutex::new(None)) })
    }

    /// Why the last request that failed did (and forgets it).
    pub(crate) fn take_failure(&self) -> Option<String> {
        self.failure.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    fn failed(&self, why: String) {
        *self.failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(why);
    }

    /// Why `error` happened, in words without its URL.
    fn reason(&self, error: reqwest::Error) -> String {
        if error.is_timeout() {
            return format!("no answer within {} ms", self.timeout.as_millis());
        }
        let error = error.without_url();
        let mut deepest: &dyn std::error::Error = &error;
        while let Some(source) = deepest.source() {
            deepest = source;
        }
        deepest.to_string()
    }
}

#[async_trait::async_trait]
impl HttpClient for Collector {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let request = reqwest::blocking::Request::try_from(request).map_err(|e| {
            let why = self.reason(e);
            self.failed(why.clone());
            why
        })?;
        let mut response = self.client.execute(request).map_err(|e| {
            let why = self.reason(e);
            self.failed(why.clone());
            why
        })?;
        let status = response.status();
        let mut body = Vec::new();
        // What the collector says beyond the limit is not needed.
        let _ = response.by_ref().take(MAX_ANSWER_BYTES).read_to_end(&mut body);
        if !status.is_success() {
            self.failed(format!("the collector answered HTTP {status}"));
        }
        let mut answer = Response::new(Bytes::from(body));
        *answer.status_mut() = status;
        *answer.headers_mut() = std::mem::take(response.headers_mut());
        Ok(answer)
    }
}
