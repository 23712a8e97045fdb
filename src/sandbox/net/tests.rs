use std::io::Write;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use super::supervisor::MAX_CONNECT_WORKERS;
use super::*;
use crate::sandbox::seccomp::sandboxed::python;
use crate::sandbox::seccomp::{Filter, NetFilter};

/// A TCP server on 127.0.0.1 that greets every connection with `hello <port>`.
fn greeter() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.write_all(format!("hello {port}").as_bytes());
        }
    });
    port
}

/// Runs `script` (after a prelude defining `fetch(family, address)`, which
/// prints what the server said or the error) under a supervisor allowing
/// `grants`, in `dir`; returns its output and the supervisor's report.
fn supervised(grants: &[&str], script: &str, dir: &Path) -> (String, NetReport) {
    let prelude = r#"
import errno, select, socket
def fetch(family, address):
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.connect(address)
        print(s.recv(100).decode())
    except OSError as e:
        print(errno.errorcode[e.errno])
    s.close()
"#;
    let grants: Vec<_> = grants.iter().map(|grant| grant.parse().unwrap()).collect();
    let mut sandboxed = python(Filter::build(NetFilter::Supervised).unwrap(), &format!("{prelude}{script}"), dir);
    let supervisor = Supervisor::start(sandboxed.listener.take().unwrap(), Allowlist::new(&grants)).unwrap();
    let out = sandboxed.stdout();
    (out, supervisor.finish())
}

#[test]
fn only_the_granted_port_is_reached() {
    let (granted, other) = (greeter(), greeter());
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "fetch(socket.AF_INET, ('127.0.0.1', {granted}))\nfetch(socket.AF_INET, ('127.0.0.1', {other}))\nfetch(socket.AF_INET6, ('::ffff:127.0.0.1', {other}))\n"
    );
    let (out, report) = supervised(&[&format!("127.0.0.1:{granted}")], &script, dir.path());
    assert_eq!(out, format!("hello {granted}\nEACCES\nEACCES\n"));
    assert_eq!(report, NetReport { allowed: 1, refused: vec![format!("127.0.0.1:{other}")] });
}

#[test]
fn a_non_blocking_connect_is_in_progress_then_connected() {
    let port = greeter();
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "s = socket.socket()
s.setblocking(False)
print(errno.errorcode[s.connect_ex(('127.0.0.1', {port}))])
select.select([], [s], [])
print(s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))
s.setblocking(True)
print(s.recv(100).decode())
"
    );
    let (out, report) = supervised(&[&format!("127.0.0.1:{port}")], &script, dir.path());
    assert_eq!(out, format!("EINPROGRESS\n0\nhello {port}\n"));
    assert_eq!(report, NetReport { allowed: 1, refused: vec![] });
}

/// A connect from a thread that does not lead its process is answered too.
#[test]
fn a_connect_from_another_thread_is_answered() {
    let port = greeter();
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "import threading\nt = threading.Thread(target=fetch, args=(socket.AF_INET, ('127.0.0.1', {port})))\nt.start()\nt.join()\n"
    );
    let (out, report) = supervised(&[&format!("127.0.0.1:{port}")], &script, dir.path());
    assert_eq!(out, format!("hello {port}\n"));
    assert_eq!(report, NetReport { allowed: 1, refused: vec![] });
}

#[test]
fn a_localhost_grant_without_a_port_reaches_every_port() {
    let (first, second) = (greeter(), greeter());
    let dir = tempfile::tempdir().unwrap();
    let script =
        format!("fetch(socket.AF_INET, ('127.0.0.1', {first}))\nfetch(socket.AF_INET, ('127.0.0.1', {second}))\n");
    let (out, report) = supervised(&["localhost"], &script, dir.path());
    assert_eq!(out, format!("hello {first}\nhello {second}\n"));
    assert_eq!(report, NetReport { allowed: 2, refused: vec![] });
}

#[test]
fn unix_sockets_are_refused_by_path_and_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let listener = UnixListener::bind(dir.path().join("s.sock")).unwrap();
    let path = dir.path().join("s.sock");
    let script = format!(
        "fetch(socket.AF_UNIX, 's.sock')\nfetch(socket.AF_UNIX, '{}')\nfetch(socket.AF_UNIX, '\\0rlp-abstract')\n",
        path.display()
    );
    let (out, report) = supervised(&[], &script, dir.path());
    assert_eq!(out, "EACCES\nEACCES\nEACCES\n");
    assert_eq!(report, NetReport::default());
    drop(listener);
}

/// A listener on 127.0.0.1 that never accepts, with no room in its accept
/// queue: once one connection waits there, the kernel drops every further
/// SYN, and a blocking connect to it hangs.
fn unanswering() -> TcpListener {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    // SAFETY: listen on a live socket; a second listen only sets the backlog.
    assert_eq!(unsafe { libc::listen(listener.as_raw_fd(), 0) }, 0);
    listener
}

/// How many of this process's threads connect for tools.
fn connect_workers() -> usize {
    let name = |task: &std::fs::DirEntry| std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
    std::fs::read_dir("/proc/self/task").unwrap().flatten().filter(|task| name(task) == "rlp-net-connect\n").count()
}

/// A tool that makes three times the bound of blocking connects at once,
/// to a port that never answers, gets at most [`MAX_CONNECT_WORKERS`]
/// threads of rlp's; the other connects wait unread.
#[test]
fn blocking_connects_past_the_bound_wait_for_a_worker() {
    let listener = unanswering();
    let port = listener.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "import os, socket, threading, time
def hang():
    try:
        socket.socket().connect(('127.0.0.1', {port}))
    except OSError:
        pass
for _ in range({}):
    threading.Thread(target=hang, daemon=True).start()
while not os.path.exists('done'):
    time.sleep(0.05)
print('done', flush=True)
os._exit(0)
",
        3 * MAX_CONNECT_WORKERS
    );
    let grants = ["127.0.0.1".parse().unwrap()];
    let mut sandboxed = python(Filter::build(NetFilter::Supervised).unwrap(), &script, dir.path());
    let supervisor = Supervisor::start(sandboxed.listener.take().unwrap(), Allowlist::new(&grants)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while connect_workers() < MAX_CONNECT_WORKERS && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    // Settled: the fewest seen over a while (other tests' workers come and go).
    thread::sleep(Duration::from_millis(300));
    let settled = (0..5)
        .map(|_| {
            thread::sleep(Duration::from_millis(50));
            connect_workers()
        })
        .min();
    std::fs::write(dir.path().join("done"), "").unwrap();
    let out = sandboxed.stdout();
    let report = supervisor.finish();
    drop(listener);
    assert_eq!(settled, Some(MAX_CONNECT_WORKERS));
    assert_eq!(out, "done\n");
    assert!(report.refused.is_empty(), "{report:?}");
}
