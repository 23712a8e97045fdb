//! Per-call overhead of the runtime, measured in one run (see bench/call.sh).
//!
//! - exec: a trivial tool spawned directly (spawn + read stdout + wait) vs the
//!   same tool through `Runtime::call` (no-op recorder, ledger on tmpfs,
//!   ledger on disk) and through the `rlp tools call` binary;
//! - http: a plain reqwest GET to a local keep-alive server vs the same request
//!   through the runtime;
//! - the sandbox: the same exec tool with the sandbox off, sandboxed, and
//!   sandboxed with a net grant (which adds the connect supervisor); and
//!   the time per TCP connect of a tool with a net grant (this program run
//!   as the tool: `bench_call <blob> --connect-client PORT N`), supervised
//!   and with the sandbox off;
//! - the ledger: frames per second with one durable transaction per frame, and
//!   the machine's fsync floor (write + fdatasync of a small file) in the same
//!   folder.
//!
//! With `--otel` (see bench/otel.sh) it measures span export instead: the
//! same in-process calls (exec and http) with spans off and on, sent to a
//! live receiver on loopback, and the span recorder alone on one call's
//! frames.
//!
//! Usage: `bench_call [--iterations N] [--rlp PATH] [--disk DIR] [--tmpfs DIR] [--otel]`.
//! Prints a Markdown report on stdout.

// An example program: it prints what it finds and runs what it measures.
#![allow(unreachable_pub, clippy::print_stdout, clippy::print_stderr, clippy::disallowed_methods)]

use std::cell::Cell;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

use rlp::event::{EventKind, Provenance, Record, Recorder, now_ms};
use rlp::home::Home;
use rlp::ledger::{LedgerStore, SqliteLedger as Ledger};
use rlp::runtime::recorder::NullRecorder;
use rlp::runtime::{CallRequest, Runtime, RuntimeOptions};
use rlp::sandbox::SandboxMode;
use rlp::telemetry::{Settings, SpanRecorder, Warn};
use serde_json::json;

/// Connects the client tool makes per round.
const CONNECTS: u32 = 2000;

/// Spans the keep-alive server was sent as OTLP exports (`--otel`).
static SPANS_RECEIVED: AtomicUsize = AtomicUsize::new(0);

struct Args {
    iterations: usize,
    rlp: Option<PathBuf>,
    disk: PathBuf,
    tmpfs: PathBuf,
    /// Measure span export (bench/otel.sh) instead.
    otel: bool,
}

/// As an exec tool (`<blob> --connect-client PORT N`): connects N times to
/// 127.0.0.1:PORT (connect, then close) and prints `{"us_per_connect": µs}`.
fn connect_client(port: &str, connects: &str) {
    let port: u16 = port.parse().expect("port");
    let connects: u32 = connects.parse().expect("count");
    let start = Instant::now();
    for _ in 0..connects {
        drop(TcpStream::connect(("127.0.0.1", port)).expect("connect"));
    }
    let us = start.elapsed().as_secs_f64() * 1e6 / f64::from(connects);
    println!("{}", json!({ "us_per_connect": us }));
}

fn parse_args() -> Args {
    let mut args =
        Args { iterations: 300, rlp: None, disk: std::env::temp_dir(), tmpfs: PathBuf::from("/dev/shm"), otel: false };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--otel" {
            args.otel = true;
            continue;
        }
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--iterations" => args.iterations = value.parse().expect("--iterations takes a number"),
            "--rlp" => args.rlp = Some(PathBuf::from(value)),
            "--disk" => args.disk = PathBuf::from(value),
            "--tmpfs" => args.tmpfs = PathBuf::from(value),
            other => panic!("unknown flag {other}"),
        }
    }
    args
}

/// Timings of one series, in microseconds: wall time per sample, and CPU
/// time (user + system, of this process and its reaped children) in total.
struct Series {
    samples: Vec<f64>,
    cpu_us: f64,
}

/// CPU time used so far by this process (all threads) and its reaped children, in µs.
fn cpu_us() -> f64 {
    let used = |who| {
        // SAFETY: getrusage fills a zeroed rusage owned by this frame.
        let usage = unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            libc::getrusage(who, &mut usage);
            usage
        };
        let tv = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
        tv(usage.ru_utime) + tv(usage.ru_stime)
    };
    used(libc::RUSAGE_SELF) + used(libc::RUSAGE_CHILDREN)
}

impl Series {
    fn measure(iterations: usize, mut f: impl FnMut()) -> Series {
        for _ in 0..(iterations / 10).max(3) {
            f();
        }
        let samples = (0..iterations)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        Series { samples, cpu_us: f64::NAN }
    }

    fn median(&self) -> f64 {
        let mut sorted = self.samples.clone();
        sorted.sort_by(f64::total_cmp);
        sorted[sorted.len() / 2]
    }

    fn mean(&self) -> f64 {
        self.samples.iter().sum::<f64>() / self.samples.len() as f64
    }

    fn cpu_per_call(&self) -> f64 {
        self.cpu_us / self.samples.len() as f64
    }

    /// This series of runs that each made `calls` calls, per call.
    fn per_call_of(self, calls: usize) -> Series {
        let calls = calls as f64;
        Series { samples: self.samples.iter().map(|s| s / calls).collect(), cpu_us: self.cpu_us / calls }
    }
}

/// Calls in each `rlp tools call --batch` process measured.
const BATCH_SIZES: [usize; 2] = [10, 100];

/// The series of `rlp` processes, interleaved with the raw spawn.
struct CliSeries {
    raw: Series,
    /// An empty program (`/bin/true`) spawned the same way: the least any
    /// process costs to start and end on this machine.
    empty: Series,
    tmpfs: Series,
    disk: Series,
    signed: Series,
    /// `--batch` runs of [`BATCH_SIZES`] calls, per call.
    batches: [Series; 2],
}

/// Runs each closure once per round, `iterations` rounds (after a warm-up),
/// timing each separately.
fn interleaved(iterations: usize, fs: &mut [&mut dyn FnMut()]) -> Vec<Series> {
    for _ in 0..(iterations / 10).max(3) {
        fs.iter_mut().for_each(|f| f());
    }
    let mut series: Vec<Series> =
        fs.iter().map(|_| Series { samples: Vec::with_capacity(iterations), cpu_us: 0.0 }).collect();
    for _ in 0..iterations {
        for (f, s) in fs.iter_mut().zip(series.iter_mut()) {
            let cpu = cpu_us();
            let t = Instant::now();
            f();
            s.samples.push(t.elapsed().as_secs_f64() * 1e6);
            s.cpu_us += cpu_us() - cpu;
        }
    }
    series
}

/// A program that does nothing but exit, spawned as [`raw_spawn`] spawns the tool.
const EMPTY_PROGRAM: &str = "/bin/true";

/// Spawns the tool (or any program) directly, reads its output and waits: the baseline.
fn raw_spawn(script: &Path) {
    let mut child = Command::new(script).stdin(Stdio::null()).stdout(Stdio::piped()).spawn().unwrap();
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    child.wait().unwrap();
}

fn write_script(dir: &Path) -> PathBuf {
    let path = dir.join("trivial_tool.sh");
    std::fs::write(&path, "#!/bin/sh\necho '{\"ok\":true}'\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// tools.json entries: one trivial exec tool running `script`.
fn exec_tools(script: &Path) -> serde_json::Value {
    json!([{
        "id": "ok", "description": "trivial", "transport": {"kind": "exec", "command": script.display().to_string()},
        "input_schema": {"type": "object"}, "result_schema": {"type": "object"}, "requires_confirmation": false,
    }])
}

/// Writes bundle `<root>/<name>` with `tools` and `caps`; `rlp digest`'s
/// library call fills in the manifest's sizes and digests.
fn write_bundle(root: &Path, name: &str, tools: serde_json::Value, caps: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let tools_text = serde_json::to_string_pretty(&json!({"version": 1, "tools": tools})).unwrap();
    std::fs::write(dir.join("tools.json"), tools_text).unwrap();
    std::fs::write(dir.join("policy.caps"), caps).unwrap();
    let manifest = format!(
        "[agent]\nname = \"{name}\"\nversion = \"0.1.0\"\n\n[artifacts.tools]\npath = \"tools.json\"\nversion = 1\n\n\
         [artifacts.caps]\npath = \"policy.caps\"\n"
    );
    std::fs::write(dir.join("manifest.toml"), manifest).unwrap();
    rlp::integrity::digest::write(&dir, &Default::default()).unwrap();
    dir
}

/// `bundle` installed (as `agent install` leaves it) under `home`, signed by
/// a trust anchor whose rule allows `exec`: every call checks it against
/// the trust policy.
fn install_signed(home: &Path, name: &str, tools: serde_json::Value) -> PathBuf {
    use rlp::integrity::{keys::SecretKey, signature::sign_bundle, trust};
    let home = Home::new(home);
    let bundle = write_bundle(&home.agents_dir(), name, tools, "[capabilities]\nexec = true\n");
    let key = SecretKey::generate().unwrap();
    sign_bundle(&bundle, &key, &Default::default()).unwrap();
    let rule = trust::Rule { allow_caps: trust::AllowCaps::Only(Vec::new()), allow_exec: Some(true) };
    trust::add_anchor(&home.trust_policy_file(), "bench", &key.public(), &rule).unwrap();
    bundle
}

/// A keep-alive HTTP/1.1 server answering `{"ok":true}` to everything.
fn start_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // A deep accept queue: a connect the queue has no room for is dropped
    // and retried a second later, which would swamp the per-connect series.
    // SAFETY: listen only takes the listener's descriptor, which is live.
    assert_eq!(unsafe { libc::listen(std::os::fd::AsRawFd::as_raw_fd(&listener), 4096) }, 0, "listen");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve(stream));
        }
    });
    port
}

fn serve(stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut writer = match stream.try_clone() {
        Ok(w) => w,
        Err(_) => return,
    };
    let mut reader = BufReader::new(stream);
    loop {
        let mut length = 0usize;
        let mut request_line = String::new();
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" && !request_line.is_empty() {
                break;
            }
            if request_line.is_empty() {
                request_line = line.clone();
            }
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if request_line.starts_with("POST /v1/traces ") {
            SPANS_RECEIVED.fetch_add(spans_in(&body), Ordering::SeqCst);
        }
        let reply = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}";
        if writer.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

fn runtime(bundle: &Path, home: &Path, recorder: Arc<dyn Recorder>) -> Runtime {
    runtime_in(bundle, home, recorder, SandboxMode::BestEffort)
}

fn runtime_in(bundle: &Path, home: &Path, recorder: Arc<dyn Recorder>, sandbox: SandboxMode) -> Runtime {
    let mut options = RuntimeOptions::new(Home::new(home), recorder);
    options.config.confirm_external_actions.value = false;
    options.config.sandbox.value = sandbox;
    Runtime::load(bundle, options).expect("the bench bundle loads")
}

fn fsync_floor(dir: &Path, iterations: usize) -> Series {
    let path = dir.join("fsync-probe");
    let mut file = std::fs::OpenOptions::new().create(true).write(true).truncate(true).open(&path).unwrap();
    let series = Series::measure(iterations, || {
        file.write_all(&[7u8; 128]).unwrap();
        file.sync_data().unwrap();
    });
    let _ = std::fs::remove_file(&path);
    series
}

fn frames(ledger: &Ledger, iterations: usize) -> Series {
    let provenance = Provenance { trace_id: uuid::Uuid::now_v7(), msg_id: uuid::Uuid::now_v7(), agent: "bench".into() };
    Series::measure(iterations, || {
        let record = Record {
            ts_ms: now_ms(),
            actor: "runtime".into(),
            kind: EventKind::ToolCall,
            scope: "bench".into(),
            payload: json!({"v": 1, "tool": "ok", "args": {"n": 1}}),
            provenance: Provenance { msg_id: uuid::Uuid::now_v7(), ..provenance.clone() },
        };
        ledger.append(&[record]).unwrap();
    })
}

fn row(out: &mut String, name: &str, s: &Series) {
    let cpu = if s.cpu_us.is_nan() { "–".to_string() } else { format!("{:.0}", s.cpu_per_call()) };
    out.push_str(&format!("| {name} | {:.0} | {:.0} | {cpu} |\n", s.median(), s.mean()));
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    if let [_, _blob, flag, port, connects] = &argv[..]
        && flag == "--connect-client"
    {
        return connect_client(port, connects);
    }
    let args = parse_args();
    if args.otel {
        print!("{}", span_export(&args));
        let _ = std::io::stdout().flush();
        return;
    }
    let n = args.iterations;
    let disk = tempfile::tempdir_in(&args.disk).unwrap();
    let tmpfs = tempfile::tempdir_in(&args.tmpfs).unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let script = write_script(disk.path());
    let port = start_server();

    let exec = exec_tools(&script);
    let exec_bundle = write_bundle(disk.path(), "bench_exec", exec.clone(), "[capabilities]\nexec = true\n");
    let mut net_exec = exec.clone();
    net_exec[0]["capabilities"] = json!([format!("net:127.0.0.1:{port}")]);
    let client = std::env::current_exe().unwrap();
    let connects = CONNECTS.to_string();
    net_exec.as_array_mut().unwrap().push(json!({
        "id": "connect", "description": "connects in a loop",
        "transport": {"kind": "exec", "command": client.display().to_string(), "args": ["--connect-client", port.to_string(), connects]},
        "capabilities": [format!("net:127.0.0.1:{port}")],
        "input_schema": {"type": "object"}, "result_schema": {"type": "object"}, "requires_confirmation": false,
    }));
    let net_bundle = write_bundle(
        disk.path(),
        "bench_net",
        net_exec,
        &format!("[capabilities]\nexec = true\nnet = [\"127.0.0.1:{port}\"]\n"),
    );
    let signed_bundle = install_signed(disk.path(), "bench_signed", exec);
    let http_bundle = write_http_bundle(disk.path(), port);
    let _ = rlp::process::become_subreaper();

    // exec: the series run interleaved, so load from elsewhere on the machine
    // affects each of them alike.
    let request = CallRequest::new("ok", json!({}));
    let null_exec = runtime(&exec_bundle, disk.path(), Arc::new(NullRecorder));
    let off_exec = runtime_in(&exec_bundle, disk.path(), Arc::new(NullRecorder), SandboxMode::Off);
    let supervised_exec = runtime(&net_bundle, disk.path(), Arc::new(NullRecorder));
    let unsupervised_exec = runtime_in(&net_bundle, disk.path(), Arc::new(NullRecorder), SandboxMode::Off);
    let signed_exec = runtime(&signed_bundle, disk.path(), Arc::new(NullRecorder));
    let tmpfs_ledger = Arc::new(Ledger::open(&tmpfs.path().join("exec/events.sqlite")).unwrap());
    let tmpfs_exec = runtime(&exec_bundle, disk.path(), tmpfs_ledger);
    let disk_ledger = Arc::new(Ledger::open(&disk.path().join("exec/events.sqlite")).unwrap());
    let disk_exec = runtime(&exec_bundle, disk.path(), disk_ledger);
    let mut exec_series = interleaved(
        n,
        &mut [
            &mut || raw_spawn(&script),
            &mut || {
                null_exec.call(&request).unwrap();
            },
            &mut || {
                signed_exec.call(&request).unwrap();
            },
            &mut || {
                tmpfs_exec.call(&request).unwrap();
            },
            &mut || {
                disk_exec.call(&request).unwrap();
            },
            &mut || {
                off_exec.call(&request).unwrap();
            },
            &mut || {
                supervised_exec.call(&request).unwrap();
            },
        ],
    )
    .into_iter();
    let (raw_exec, rt_null, rt_signed, rt_tmpfs, rt_disk, rt_off, rt_net) = (
        exec_series.next().unwrap(),
        exec_series.next().unwrap(),
        exec_series.next().unwrap(),
        exec_series.next().unwrap(),
        exec_series.next().unwrap(),
        exec_series.next().unwrap(),
        exec_series.next().unwrap(),
    );
    // Per connect: the client tool, supervised and not, each twice, interleaved.
    let connect = CallRequest::new("connect", json!({}));
    let per_connect = |rt: &Runtime| rt.call(&connect).unwrap().result["us_per_connect"].as_f64().unwrap();
    let connect_rounds: Vec<(f64, f64)> =
        (0..2).map(|_| (per_connect(&unsupervised_exec), per_connect(&supervised_exec))).collect();
    let cli = args.rlp.as_ref().map(|rlp| {
        let cli_n = (n / 3).max(20);
        let rlp_call = |home: &Path, bundle: &Path| {
            let mut command = Command::new(rlp);
            command
                .arg("--home")
                .arg(home)
                .args(["tools", "call"])
                .arg(bundle)
                .env("RUNLOOP_SYSTEM_CONFIG", disk.path().join("none.toml"))
                .stdout(Stdio::null());
            command
        };
        let succeed = |mut command: Command| assert!(command.status().unwrap().success());
        let run_bundle = |home: &Path, bundle: &Path| {
            let mut command = rlp_call(home, bundle);
            command.arg("ok");
            succeed(command);
        };
        let batches: Vec<PathBuf> = BATCH_SIZES
            .iter()
            .map(|&size| {
                let path = disk.path().join(format!("batch-{size}.jsonl"));
                std::fs::write(&path, "{\"tool\": \"ok\", \"args\": {}}\n".repeat(size)).unwrap();
                path
            })
            .collect();
        let run_batch = |home: &Path, bundle: &Path, batch: &Path| {
            let mut command = rlp_call(home, bundle);
            command.arg("--batch").arg(batch).args(["--jobs", "1"]);
            succeed(command);
        };
        let tmpfs_home = tmpfs.path().join("cli-home");
        let disk_home = disk.path().join("cli-home");
        let signed_home = install_signed(&tmpfs.path().join("signed-home"), "bench_signed", exec_tools(&script));
        let signed_home_dir = signed_home.parent().and_then(Path::parent).unwrap().to_path_buf();
        let mut series = interleaved(
            cli_n,
            &mut [
                &mut || raw_spawn(&script),
                &mut || raw_spawn(Path::new(EMPTY_PROGRAM)),
                &mut || run_bundle(&tmpfs_home, &exec_bundle),
                &mut || run_bundle(&disk_home, &exec_bundle),
                &mut || run_bundle(&signed_home_dir, &signed_home),
                &mut || run_batch(&tmpfs_home, &exec_bundle, &batches[0]),
                &mut || run_batch(&tmpfs_home, &exec_bundle, &batches[1]),
            ],
        )
        .into_iter();
        let mut next = || series.next().unwrap();
        CliSeries {
            raw: next(),
            empty: next(),
            tmpfs: next(),
            disk: next(),
            signed: next(),
            batches: BATCH_SIZES.map(|size| next().per_call_of(size)),
        }
    });

    // http, interleaved likewise.
    let client = reqwest::blocking::Client::builder().no_proxy().build().unwrap();
    let url = format!("http://127.0.0.1:{port}/ok");
    let http_n = n * 3;
    let get = CallRequest::new("get", json!({}));
    let null_http = runtime(&http_bundle, disk.path(), Arc::new(NullRecorder));
    let http_ledger = Arc::new(Ledger::open(&tmpfs.path().join("http/events.sqlite")).unwrap());
    let tmpfs_http = runtime(&http_bundle, disk.path(), http_ledger);
    let mut http_series = interleaved(
        http_n,
        &mut [
            &mut || {
                let response = client.get(&url).header("accept", "application/json").send().unwrap();
                let body = response.bytes().unwrap();
                let _: serde_json::Value = serde_json::from_slice(&body).unwrap();
            },
            &mut || {
                null_http.call(&get).unwrap();
            },
            &mut || {
                tmpfs_http.call(&get).unwrap();
            },
        ],
    )
    .into_iter();
    let (raw_http, http_null, http_tmpfs) =
        (http_series.next().unwrap(), http_series.next().unwrap(), http_series.next().unwrap());

    // ledger and fsync
    let frame_ledger = Ledger::open(&disk.path().join("frames/events.sqlite")).unwrap();
    let frames_disk = frames(&frame_ledger, n);
    let frame_tmpfs = Ledger::open(&tmpfs.path().join("frames/events.sqlite")).unwrap();
    let frames_tmpfs = frames(&frame_tmpfs, n);
    let fsync = fsync_floor(disk.path(), n);

    let mut out = String::new();
    out.push_str(&format!("Iterations: {n} per exec series, {http_n} per http series; times in µs.\n\n"));
    out.push_str("| series | median µs | mean µs | CPU µs per call |\n|---|---:|---:|---:|\n");
    row(&mut out, "exec: raw spawn + wait of the tool", &raw_exec);
    row(&mut out, "exec: `Runtime::call`, no-op recorder, sandbox off", &rt_off);
    row(&mut out, "exec: `Runtime::call`, no-op recorder (sandboxed, no net grant)", &rt_null);
    row(&mut out, "exec: `Runtime::call`, no-op recorder, sandboxed with a net grant (connect supervisor)", &rt_net);
    row(&mut out, "exec: `Runtime::call`, installed signed bundle (trust checked), no-op recorder", &rt_signed);
    row(&mut out, "exec: `Runtime::call`, ledger on tmpfs", &rt_tmpfs);
    row(&mut out, "exec: `Runtime::call`, ledger on disk", &rt_disk);
    if let Some(cli) = &cli {
        row(&mut out, "exec: raw spawn + wait (interleaved with the CLI runs)", &cli.raw);
        row(
            &mut out,
            &format!("exec: an empty program (`{EMPTY_PROGRAM}`), spawn + wait (interleaved likewise)"),
            &cli.empty,
        );
        row(&mut out, "exec: `rlp tools call` process, ledger on tmpfs", &cli.tmpfs);
        row(&mut out, "exec: `rlp tools call` process, ledger on disk", &cli.disk);
        row(&mut out, "exec: `rlp tools call` process, installed signed bundle, ledger on tmpfs", &cli.signed);
        for (size, batch) in BATCH_SIZES.iter().zip(&cli.batches) {
            let name = format!(
                "exec: `rlp tools call --batch` process of {size} calls, `--jobs 1`, ledger on tmpfs, per call"
            );
            row(&mut out, &name, batch);
        }
    }
    row(&mut out, "http: raw reqwest GET", &raw_http);
    row(&mut out, "http: `Runtime::call`, no-op recorder", &http_null);
    row(&mut out, "http: `Runtime::call`, ledger on tmpfs", &http_tmpfs);
    row(&mut out, "ledger: one frame per transaction, disk", &frames_disk);
    row(&mut out, "ledger: one frame per transaction, tmpfs", &frames_tmpfs);
    row(&mut out, "fsync floor: write 128 B + fdatasync, disk", &fsync);

    let over =
        |a: &Series, b: &Series| format!("{:.0} | {:.0}", a.median() - b.median(), a.cpu_per_call() - b.cpu_per_call());
    let ratio = |a: &Series, b: &Series| a.median() / b.median();
    out.push_str("\n| overhead | wall µs per call (medians) | CPU µs per call | wall ratio |\n|---|---:|---:|---:|\n");
    out.push_str(&format!(
        "| exec in-process, no-op recorder, over raw spawn | {} | {:.2}× |\n",
        over(&rt_null, &raw_exec),
        ratio(&rt_null, &raw_exec)
    ));
    out.push_str(&format!(
        "| sandbox (Landlock + seccomp, no net grant) over sandbox off, no-op recorder | {} | {:.2}× |\n",
        over(&rt_null, &rt_off),
        ratio(&rt_null, &rt_off)
    ));
    out.push_str(&format!(
        "| sandbox with a net grant (adds the connect supervisor) over sandbox off, no-op recorder | {} | {:.2}× |\n",
        over(&rt_net, &rt_off),
        ratio(&rt_net, &rt_off)
    ));
    out.push_str(&format!(
        "| exec in-process, installed signed bundle (trust checked), no-op recorder, over raw spawn | {} | {:.2}× |\n",
        over(&rt_signed, &raw_exec),
        ratio(&rt_signed, &raw_exec)
    ));
    out.push_str(&format!(
        "| exec in-process, ledger on tmpfs, over raw spawn | {} | {:.2}× |\n",
        over(&rt_tmpfs, &raw_exec),
        ratio(&rt_tmpfs, &raw_exec)
    ));
    out.push_str(&format!(
        "| exec in-process, ledger on disk, over raw spawn | {} | {:.2}× |\n",
        over(&rt_disk, &raw_exec),
        ratio(&rt_disk, &raw_exec)
    ));
    if let Some(cli) = &cli {
        out.push_str(&format!(
            "| exec CLI process, installed signed bundle, ledger on tmpfs, over the unsigned working folder | {} | {:.2}× |\n",
            over(&cli.signed, &cli.tmpfs),
            ratio(&cli.signed, &cli.tmpfs)
        ));
        out.push_str(&format!(
            "| exec CLI process, ledger on tmpfs, over raw spawn | {} | {:.2}× |\n",
            over(&cli.tmpfs, &cli.raw),
            ratio(&cli.tmpfs, &cli.raw)
        ));
        // No process per call can cost less than starting one plus the call
        // itself made in-process; each part as a ratio to the raw spawn
        // measured in its own interleaved series.
        let floor = ratio(&cli.empty, &cli.raw) + ratio(&rt_tmpfs, &raw_exec);
        out.push_str(&format!(
            "| least a process per call could cost (an empty program's spawn + the in-process call, ledger on tmpfs), over raw spawn | {:.0} | – | {floor:.2}× |\n",
            (floor - 1.0) * cli.raw.median()
        ));
        out.push_str(&format!(
            "| exec CLI process, ledger on disk, over raw spawn | {} | {:.2}× |\n",
            over(&cli.disk, &cli.raw),
            ratio(&cli.disk, &cli.raw)
        ));
        for (size, batch) in BATCH_SIZES.iter().zip(&cli.batches) {
            out.push_str(&format!(
                "| exec CLI batch of {size} calls (`--jobs 1`), ledger on tmpfs, per call, over raw spawn | {} | {:.2}× |\n",
                over(batch, &cli.raw),
                ratio(batch, &cli.raw)
            ));
        }
    }
    out.push_str(&format!(
        "| http in-process, no-op recorder, over raw reqwest | {} | {:.2}× |\n",
        over(&http_null, &raw_http),
        ratio(&http_null, &raw_http)
    ));
    out.push_str(&format!(
        "| http in-process, ledger on tmpfs, over raw reqwest | {} | {:.2}× |\n",
        over(&http_tmpfs, &raw_http),
        ratio(&http_tmpfs, &raw_http)
    ));
    out.push_str(&format!(
        "\n| a tool's TCP connect to 127.0.0.1 ({CONNECTS} per round, timed in the tool) | sandbox off µs | sandboxed, net grant (supervised) µs | supervisor overhead µs |\n|---|---:|---:|---:|\n"
    ));
    for (round, (off, supervised)) in connect_rounds.iter().enumerate() {
        out.push_str(&format!("| round {} | {off:.1} | {supervised:.1} | {:.1} |\n", round + 1, supervised - off));
    }
    out.push_str(&format!(
        "\nLedger: {:.0} frames/s on disk (one durable transaction per frame), {:.0} frames/s on tmpfs; \
         fsync floor {:.0} µs ({:.0} fdatasyncs/s). A call writes two transactions (call frame, result frame).\n\n",
        1e6 / frames_disk.median(),
        1e6 / frames_tmpfs.median(),
        fsync.median(),
        1e6 / fsync.median()
    ));
    out.push_str(
        "CPU µs per call: user + system time of the benchmark process (all threads) and of the processes it \
         reaped (the tool, the `rlp` process), so it does not depend on how busy the machine is; wall times do.\n",
    );
    print!("{out}");
    let _ = std::io::stdout().flush();
}

/// The spans an OTLP export body holds (0 when it does not decode).
fn spans_in(body: &[u8]) -> usize {
    ExportTraceServiceRequest::decode(body)
        .map(|request| request.resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum())
        .unwrap_or(0)
}

/// The span recorder in front of `inner`, sending to the receiver on `port`.
fn with_spans(inner: Arc<dyn Recorder>, port: u16) -> Arc<dyn Recorder> {
    let endpoint = format!("http://127.0.0.1:{port}");
    let settings = Settings::live(|name| (name == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| endpoint.clone()));
    let settings = settings.settings.expect("spans on");
    let warn: Warn = Arc::new(|line: &str| eprintln!("warning: {line}"));
    Arc::new(SpanRecorder::start(inner, &settings, warn).expect("the span pipeline starts"))
}

/// The frames the runtime records for one successful call of `ok`, in
/// its two batches (the call with its audit, then the result).
fn call_frames() -> [Vec<Record>; 2] {
    let (trace, invocation) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
    let record = |kind, payload| Record::now(kind, "runtime", "bench", trace, payload);
    [
        vec![
            record(
                EventKind::CapAudit,
                json!({"v": 1, "tool": "ok", "capability": "exec", "decision": "allow", "reason": "granted", "invocation_id": invocation}),
            ),
            record(EventKind::ToolCall, json!({"v": 1, "tool": "ok", "args": {"n": 1}, "invocation_id": invocation})),
        ],
        vec![record(
            EventKind::ToolResult,
            json!({"v": 1, "tool": "ok", "result": {"ok": true}, "attempt": 1, "duration_ms": 2, "invocation_id": invocation}),
        )],
    ]
}

/// A bundle with one http tool, `get`, calling the local server on `port`.
fn write_http_bundle(dir: &Path, port: u16) -> PathBuf {
    let http = json!([{
        "id": "get", "description": "trivial", "transport": {"kind": "http", "method": "GET", "url": format!("http://127.0.0.1:{port}/ok")},
        "input_schema": {"type": "object"}, "result_schema": {"type": "object"}, "requires_confirmation": false,
    }]);
    write_bundle(dir, "bench_http", http, &format!("[capabilities]\nnet = [\"127.0.0.1:{port}\"]\n"))
}

/// Span export (bench/otel.sh): in-process calls with spans off and on —
/// exec and http tools, no-op recorder behind — each pair interleaved, the
/// spans sent to a live keep-alive receiver on loopback; and one call's
/// frames through the span recorder alone.
fn span_export(args: &Args) -> String {
    let n = args.iterations;
    let disk = tempfile::tempdir_in(&args.disk).unwrap();
    let script = write_script(disk.path());
    let port = start_server();
    let exec_bundle = write_bundle(disk.path(), "bench_exec", exec_tools(&script), "[capabilities]\nexec = true\n");
    let http_bundle = write_http_bundle(disk.path(), port);
    let _ = rlp::process::become_subreaper();

    let sent = Cell::new(0usize);
    // The same call, spans off and on, interleaved: (off, on).
    let off_on = |bundle: &Path, request: CallRequest, iterations: usize| {
        let plain = runtime(bundle, disk.path(), Arc::new(NullRecorder));
        let traced = runtime(bundle, disk.path(), with_spans(Arc::new(NullRecorder), port));
        let mut series = interleaved(
            iterations,
            &mut [
                &mut || {
                    plain.call(&request).unwrap();
                },
                &mut || {
                    traced.call(&request).unwrap();
                    sent.set(sent.get() + 1);
                },
            ],
        )
        .into_iter();
        (series.next().unwrap(), series.next().unwrap())
    };
    let (exec_off, exec_on) = off_on(&exec_bundle, CallRequest::new("ok", json!({})), n);
    let (http_off, http_on) = off_on(&http_bundle, CallRequest::new("get", json!({})), n * 3);
    let http_n = n * 3;

    let frames_n = n * 10;
    let null: Arc<dyn Recorder> = Arc::new(NullRecorder);
    let spans = with_spans(Arc::new(NullRecorder), port);
    let record_call = |recorder: &Arc<dyn Recorder>| {
        for batch in call_frames() {
            recorder.record(&batch).unwrap();
        }
    };
    let mut recorders = interleaved(
        frames_n,
        &mut [&mut || record_call(&null), &mut || {
            record_call(&spans);
            sent.set(sent.get() + 1);
        }],
    )
    .into_iter();
    let (frames_off, frames_on) = (recorders.next().unwrap(), recorders.next().unwrap());
    // Dropped, a span recorder sends what it holds (waiting 2 s at most); the
    // runtimes of the calls above were dropped with their series.
    drop(spans);

    let mut out = String::new();
    out.push_str(&format!(
        "Iterations: {n} per exec series, {http_n} per http series, {frames_n} per recorder series; times in µs.\n\n"
    ));
    out.push_str("| series | median µs | mean µs | CPU µs per call |\n|---|---:|---:|---:|\n");
    row(&mut out, "exec: `Runtime::call`, no-op recorder, spans off", &exec_off);
    row(&mut out, "exec: `Runtime::call`, no-op recorder, spans on", &exec_on);
    row(&mut out, "http: `Runtime::call`, no-op recorder, spans off", &http_off);
    row(&mut out, "http: `Runtime::call`, no-op recorder, spans on", &http_on);
    row(&mut out, "one call's frames (audit + call, result): no-op recorder", &frames_off);
    row(&mut out, "one call's frames (audit + call, result): span recorder", &frames_on);
    let over = |on: &Series, off: &Series| {
        format!(
            "{:.1} | {:.1} | {:.1}",
            on.median() - off.median(),
            on.mean() - off.mean(),
            on.cpu_per_call() - off.cpu_per_call()
        )
    };
    out.push_str(
        "\n| span export, per call | wall µs (medians) | wall µs (means) | CPU µs (all threads) |\n|---|---:|---:|---:|\n",
    );
    out.push_str(&format!("| exec call, spans on over off | {} |\n", over(&exec_on, &exec_off)));
    out.push_str(&format!("| http call, spans on over off | {} |\n", over(&http_on, &http_off)));
    out.push_str(&format!("| the span recorder alone, over a no-op recorder | {} |\n", over(&frames_on, &frames_off)));
    out.push_str(&format!(
        "\nSpans: {} made, {} received by the receiver (the rest dropped by a full queue).\n",
        sent.get(),
        SPANS_RECEIVED.load(Ordering::SeqCst)
    ));
    out
}
