use std::io::Write;
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::thread;

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
