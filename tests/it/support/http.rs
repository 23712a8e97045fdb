//! A small HTTP/1.1 server on 127.0.0.1 for the http transport to call.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A request as the server read it.
#[derive(Clone, Debug)]
pub struct Request {
    /// The request line, e.g. `GET /x HTTP/1.1`.
    pub line: String,
    /// Each header as sent, name and value trimmed.
    pub headers: Vec<(String, String)>,
    /// The body, as long as `Content-Length` said.
    pub body: Vec<u8>,
}

impl Request {
    /// The value of header `name` (any case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The path of the request line.
    pub fn path(&self) -> &str {
        self.line.split(' ').nth(1).unwrap_or_default()
    }
}

/// What the server answers.
pub struct Reply {
    /// The status code (the reason phrase sent is always `X`).
    pub status: u16,
    /// Headers besides `Content-Length` and `Connection: close`.
    pub headers: Vec<(String, String)>,
    /// The body, sent as it is.
    pub body: String,
}

/// A reply with status `status` and the JSON text `body`.
pub fn reply(status: u16, body: &str) -> Reply {
    Reply { status, headers: vec![("Content-Type".into(), "application/json".into())], body: body.into() }
}

/// A redirect with status `status` to `location`.
pub fn redirect(status: u16, location: &str) -> Reply {
    Reply { status, headers: vec![("Location".into(), location.into())], body: String::new() }
}

type Handler = Arc<dyn Fn(&Request) -> Reply + Send + Sync>;

/// A thread accepting connections on a free 127.0.0.1 port, handing each
/// to `each`, until dropped: the accept loop and stop of the tests' servers.
pub struct Acceptor {
    /// The port it listens on.
    pub port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Acceptor {
    /// Starts accepting; `each` gets every connection, on the accepting thread.
    pub fn start(mut each: impl FnMut(TcpStream) + Send + 'static) -> Acceptor {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    each(stream);
                }
            })
        };
        Acceptor { port, stop, thread: Some(thread) }
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A one-connection-at-a-time server that answers each request with what
/// its handler makes of it, records every request and closes each
/// connection after one reply. Dropping it stops it.
pub struct Server {
    /// The port it listens on.
    pub port: u16,
    requests: Arc<Mutex<Vec<Request>>>,
    connections: Arc<AtomicUsize>,
    _acceptor: Acceptor,
}

impl Server {
    /// Starts serving on a free port, each request answered by `handler`.
    pub fn start(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Server {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let handler: Handler = Arc::new(handler);
        let acceptor = {
            let (requests, connections) = (requests.clone(), connections.clone());
            Acceptor::start(move |stream| {
                connections.fetch_add(1, Ordering::SeqCst);
                serve(stream, &handler, &requests);
            })
        };
        Server { port: acceptor.port, requests, connections, _acceptor: acceptor }
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// How many connections were accepted.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// Reads one request, records it, then replies: the record is in place
/// before the client can see the reply, so a test never races it.
fn serve(stream: TcpStream, handler: &Handler, requests: &Mutex<Vec<Request>>) -> Option<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let request = read_request(&mut reader, usize::MAX)?;
    let answer = handler(&request);
    requests.lock().unwrap().push(request);
    let mut out = stream;
    let mut text =
        format!("HTTP/1.1 {} X\r\nContent-Length: {}\r\nConnection: close\r\n", answer.status, answer.body.len());
    for (k, v) in &answer.headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(&answer.body);
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    Some(())
}

/// Reads one HTTP/1.1 request from `reader`: `None` at the end of the
/// connection, on a malformed request, or when its body passes `max_body`.
pub fn read_request(reader: &mut BufReader<TcpStream>, max_body: usize) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let line = line.trim_end().to_string();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (k, v) = header.split_once(':')?;
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    let request = Request { line, headers, body: Vec::new() };
    let length: usize = request.header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    if length > max_body {
        return None;
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Request { body, ..request })
}
