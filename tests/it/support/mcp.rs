//! `rlp serve` driven by the official MCP Python SDK: its virtualenv (made
//! once by `tests/mcp/setup.sh`), the client driver `tests/mcp/drive.py`, a
//! served HTTP endpoint, and raw requests for what a client library would
//! not send.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Value, json};

use super::files::repo;
use super::output;
use super::{HANG_GUARD, TestDir};

/// The prefix of the stderr line naming the trace of a server run.
const TRACE_LINE: &str = "rlp serve: trace ";

/// The prefix of the stderr line naming the HTTP endpoint.
const LISTENING_LINE: &str = "rlp serve: listening on ";

/// The python of the SDK's virtualenv, made by the first caller of any test
/// process (setup.sh locks out the other processes). A venv that cannot be
/// made fails the test: these tests are never skipped.
pub fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| super::process::venv_python("tests/mcp/setup.sh", "mcp-venv", "the serve tests"))
}

/// Runs the MCP client `script` (a path in the repository) on `python` with
/// `request` as its stdin, killed past the hang guard; returns its output.
pub fn run_client(python: &Path, script: &str, request: &Value) -> Output {
    let mut child = Command::new(python)
        .arg(repo(script))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(request.to_string().as_bytes()).unwrap();
    wait_bounded(child)
}

/// Runs the client driver on `scenario` (see `tests/mcp/drive.py`) and
/// returns its report, which must be complete.
pub fn drive(scenario: &Value) -> Value {
    let out = run_client(python(), "tests/mcp/drive.py", scenario);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("the driver printed no report ({e})\n{}", output::text(&out)));
    if let Some(fatal) = report.get("fatal") {
        let server =
            scenario["transport"]["stderr"].as_str().map(|path| std::fs::read_to_string(path).unwrap_or_default());
        panic!(
            "the driver failed\n{}\n--- driver stderr\n{}--- server stderr\n{}",
            fatal.as_str().unwrap_or_default(),
            output::stderr(&out),
            server.unwrap_or_else(|| "(see the test's HttpServe)".into())
        );
    }
    assert!(out.status.success(), "the driver failed\n{}", output::text(&out));
    report
}

/// Waits for `child`, killing it past the hang guard.
fn wait_bounded(child: Child) -> Output {
    let pid = child.id();
    let (done, finished) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let out = child.wait_with_output();
        let _ = done.send(());
        out
    });
    if finished.recv_timeout(HANG_GUARD).is_err() {
        super::process::signal(pid as i32, libc::SIGKILL);
        panic!("the MCP client hung for {HANG_GUARD:?}");
    }
    waiter.join().unwrap().unwrap()
}

/// `rlp --home <home> serve <bundle> <args…>` as the test folder runs rlp.
fn serve_command(td: &TestDir, bundle: &Path, args: &[&str]) -> Command {
    let mut command = td.command();
    command.arg("serve").arg(bundle).args(args);
    command
}

/// The driver's stdio transport: it starts `rlp serve <bundle> <args…>` in
/// the test folder with its clean environment, stderr to `<testdir>/serve.stderr`
/// (see [`stdio_trace`]).
pub fn stdio(td: &TestDir, bundle: &Path, args: &[&str]) -> Value {
    let command = serve_command(td, bundle, args);
    let env: serde_json::Map<String, Value> =
        command.get_envs().filter_map(|(k, v)| Some((k.to_str()?.to_string(), json!(v?.to_str()?)))).collect();
    json!({
        "kind": "stdio",
        "command": command.get_program().to_str().unwrap(),
        "args": command.get_args().map(|a| a.to_str().unwrap()).collect::<Vec<_>>(),
        "env": env,
        "cwd": td.path().to_str().unwrap(),
        "stderr": td.join("serve.stderr").to_str().unwrap(),
    })
}

/// The trace a stdio server run announced on its stderr.
pub fn stdio_trace(td: &TestDir) -> String {
    let text = super::files::read(&td.join("serve.stderr"));
    trace_of(&text).unwrap_or_else(|| panic!("no trace line on the server's stderr:\n{text}"))
}

/// The id of the first `rlp serve: trace <id>` line of `stderr`.
fn trace_of(stderr: &str) -> Option<String> {
    stderr.lines().find_map(|line| line.strip_prefix(TRACE_LINE)).map(str::to_string)
}

/// A scenario for the driver: `transport`, connect `mode`, the elicitation
/// script (`None`: the client does not support elicitation), and `steps`.
pub fn scenario(transport: Value, mode: &str, elicitation: Option<Value>, steps: Value) -> Value {
    json!({"transport": transport, "mode": mode, "elicitation": elicitation, "steps": steps})
}

/// A `call` step of the driver.
pub fn call(tool: &str, arguments: Value) -> Value {
    json!({"op": "call", "tool": tool, "arguments": arguments})
}

/// `rlp serve --http` running in the test folder; killed when dropped.
pub struct HttpServe {
    child: Child,
    /// The endpoint it announced, `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    /// The server-run trace it announced.
    pub trace: String,
    stderr: Arc<Mutex<String>>,
}

impl HttpServe {
    /// Starts `rlp serve <bundle> --http 127.0.0.1:0 <args…>` and waits for
    /// its trace and listening lines.
    pub fn start(td: &TestDir, bundle: &Path, args: &[&str]) -> HttpServe {
        let mut command = serve_command(td, bundle, &["--http", "127.0.0.1:0"]);
        command.args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = command.spawn().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let lines = collect_lines(BufReader::new(child.stderr.take().unwrap()), stderr.clone());
        let mut server = HttpServe { child, url: String::new(), trace: String::new(), stderr };
        while server.url.is_empty() || server.trace.is_empty() {
            let line = lines
                .recv_timeout(HANG_GUARD)
                .unwrap_or_else(|_| panic!("rlp serve --http announced no endpoint:\n{}", server.stderr()));
            if let Some(url) = line.strip_prefix(LISTENING_LINE) {
                server.url = url.to_string();
            } else if let Some(trace) = trace_of(&line) {
                server.trace = trace;
            }
        }
        server
    }

    /// Its stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The driver's HTTP transport to it, with bearer `token` if given.
    pub fn transport(&self, token: Option<&str>) -> Value {
        json!({"kind": "http", "url": self.url, "token": token})
    }

    /// The `host:port` it listens on.
    pub fn address(&self) -> &str {
        self.url.trim_start_matches("http://").trim_end_matches("/mcp")
    }
}

impl Drop for HttpServe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads `reader` line by line on a thread, appending each line to `all` and
/// sending it on the returned channel.
fn collect_lines(reader: impl BufRead + Send + 'static, all: Arc<Mutex<String>>) -> Receiver<String> {
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        for line in reader.lines() {
            let Ok(line) = line else { break };
            all.lock().unwrap().push_str(&format!("{line}\n"));
            let _ = send.send(line);
        }
    });
    receive
}

/// A JSON-RPC `initialize` request (2025-11-25) with id `id`.
pub fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
}

/// POSTs `body` to `/mcp` at `address` with `headers` besides the content
/// ones, as a client library would not (no bearer, a foreign `Origin`);
/// returns the status code and the body.
pub fn post(address: &str, headers: &[(&str, &str)], body: &Value) -> (u16, String) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(HANG_GUARD)).unwrap();
    let body = body.to_string();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{response}"));
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}
