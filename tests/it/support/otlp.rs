//! An OpenTelemetry collector's OTLP/HTTP receiver on 127.0.0.1, small: it
//! accepts `POST /v1/traces` (keep-alive HTTP/1.1, one thread a
//! connection), decodes each body as an `ExportTraceServiceRequest` with
//! the protocol's own message definitions, answers 200, and keeps every
//! body as it came and every span; a test waits for N spans with a
//! deadline. Also: a port nobody listens on, and a socket that accepts
//! connections and never answers.

use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

use super::http::{Acceptor, Request, read_request};
use serde_json::{Map, Value, json};

use super::HANG_GUARD;

/// Largest body the receiver reads.
const MAX_BODY: usize = 64 << 20;

/// A span as received, with the resource it came with.
#[derive(Clone, Debug)]
pub struct Received {
    /// The span.
    pub span: Span,
    /// The resource's attributes.
    pub resource: Map<String, Value>,
}

impl Received {
    /// The span's attributes as JSON (strings, numbers, booleans, arrays).
    pub fn attributes(&self) -> Map<String, Value> {
        attributes(&self.span.attributes)
    }

    /// The span's events: each `{"name": …, "attributes": {…}}`.
    pub fn events(&self) -> Vec<Value> {
        self.span.events.iter().map(|e| json!({"name": e.name, "attributes": attributes(&e.attributes)})).collect()
    }

    /// The span's status: `(code, message)` (0 unset, 1 ok, 2 error).
    pub fn status(&self) -> (i32, String) {
        self.span.status.as_ref().map(|s| (s.code, s.message.clone())).unwrap_or_default()
    }

    /// Trace id, span id and parent span id, in hex.
    pub fn ids(&self) -> (String, String, String) {
        (hex(&self.span.trace_id), hex(&self.span.span_id), hex(&self.span.parent_span_id))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Attributes as a JSON object.
pub fn attributes(kvs: &[KeyValue]) -> Map<String, Value> {
    kvs.iter().map(|kv| (kv.key.clone(), kv.value.as_ref().map_or(Value::Null, value))).collect()
}

fn value(any: &AnyValue) -> Value {
    match &any.value {
        Some(any_value::Value::StringValue(s)) => json!(s),
        Some(any_value::Value::BoolValue(b)) => json!(b),
        Some(any_value::Value::IntValue(i)) => json!(i),
        Some(any_value::Value::DoubleValue(d)) => json!(d),
        Some(any_value::Value::ArrayValue(array)) => Value::Array(array.values.iter().map(value).collect()),
        other => json!(format!("{other:?}")),
    }
}

#[derive(Default)]
struct State {
    bodies: Vec<Vec<u8>>,
    spans: Vec<Received>,
    /// Requests that were not a POST of a decodable body to /v1/traces.
    rejected: Vec<String>,
}

/// The receiver; dropping it stops it.
pub struct Receiver {
    /// The port it listens on.
    pub port: u16,
    state: Arc<(Mutex<State>, Condvar)>,
    _acceptor: Acceptor,
}

impl Receiver {
    /// Starts receiving on a free port.
    pub fn start() -> Receiver {
        let state = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let acceptor = {
            let state = state.clone();
            Acceptor::start(move |stream| {
                let state = state.clone();
                std::thread::spawn(move || serve(stream, &state));
            })
        };
        Receiver { port: acceptor.port, state, _acceptor: acceptor }
    }

    /// Its base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` takes it.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every body received so far, as it came.
    pub fn bodies(&self) -> Vec<Vec<u8>> {
        self.state.0.lock().unwrap().bodies.clone()
    }

    /// Waits until `n` spans have arrived (at most [`HANG_GUARD`]) and
    /// returns every span received; fails when they do not come, or when
    /// a request could not be read as an export.
    pub fn wait_for(&self, n: usize) -> Vec<Received> {
        let deadline = Instant::now() + HANG_GUARD;
        let (lock, arrived) = &*self.state;
        let mut state = lock.lock().unwrap();
        while state.spans.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "{} of {n} spans arrived within {HANG_GUARD:?}", state.spans.len());
            state = arrived.wait_timeout(state, left).unwrap().0;
        }
        assert!(state.rejected.is_empty(), "requests the receiver could not read: {:?}", state.rejected);
        state.spans.clone()
    }
}

/// Serves the requests of one connection until it closes.
fn serve(stream: TcpStream, state: &(Mutex<State>, Condvar)) -> Option<()> {
    stream.set_read_timeout(Some(HANG_GUARD)).ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut out = stream;
    // Keep-alive: requests one after another until the client closes.
    while let Some(Request { line, body, .. }) = read_request(&mut reader, MAX_BODY) {
        let export = line.starts_with("POST /v1/traces ").then(|| ExportTraceServiceRequest::decode(&body[..]).ok());
        {
            let (lock, arrived) = state;
            let mut state = lock.lock().unwrap();
            match export.flatten() {
                Some(request) => {
                    for resource_spans in request.resource_spans {
                        let resource = resource_spans.resource.map(|r| attributes(&r.attributes)).unwrap_or_default();
                        for scope in resource_spans.scope_spans {
                            state.spans.extend(
                                scope.spans.into_iter().map(|span| Received { span, resource: resource.clone() }),
                            );
                        }
                    }
                }
                None => state.rejected.push(line.trim_end().to_string()),
            }
            state.bodies.push(body);
            arrived.notify_all();
        }
        let answer = "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n";
        out.write_all(answer.as_bytes()).ok()?;
    }
    Some(())
}

/// A socket that accepts connections (the kernel completes them) and never
/// reads or answers: a collector that hangs.
pub struct Blackhole {
    /// Its port.
    pub port: u16,
    _listener: TcpListener,
}

impl Blackhole {
    /// Binds it on a free port.
    pub fn start() -> Blackhole {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        Blackhole { port: listener.local_addr().unwrap().port(), _listener: listener }
    }

    /// Its base URL.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// The base URL of a port nobody listens on (bound, then let go).
pub fn dead_endpoint() -> String {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    format!("http://127.0.0.1:{port}")
}
