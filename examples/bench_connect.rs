//! Per-connect overhead of the sandbox's connect supervisor.
//!
//! Runs this program again as a client that makes N TCP connects (connect,
//! then close) to a local server on 127.0.0.1, once plainly and once under
//! the supervised seccomp filter with a supervisor allowing the server's
//! port, and prints the mean time per connect of each, measured inside the
//! client around its connect loop.
//!
//! Usage: `bench_connect [--connects N]` (default 2000).

use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::thread;
use std::time::Instant;

use rlp::bundle::capability::NetTarget;
use rlp::sandbox::net::{Allowlist, Supervisor};
use rlp::sandbox::seccomp::{Filter, NetFilter, recv_fd, send_fd};

/// The client: `--client PORT N` connects N times and prints the µs per connect.
fn client(port: u16, connects: u32) {
    let start = Instant::now();
    for _ in 0..connects {
        drop(TcpStream::connect(("127.0.0.1", port)).expect("connect"));
    }
    println!("{:.1}", start.elapsed().as_secs_f64() * 1e6 / f64::from(connects));
}

/// A `socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC)`.
fn seqpacket_pair() -> (OwnedFd, OwnedFd) {
    let mut fds = [-1; 2];
    // SAFETY: socketpair writes two descriptors into `fds`.
    let result =
        unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) };
    assert_eq!(result, 0, "socketpair: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors are new and owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// Runs the client, under the supervised filter when `supervised`, and
/// returns the µs per connect it measured.
fn run(port: u16, connects: u32, supervised: bool) -> String {
    let mut command = Command::new(std::env::current_exe().expect("current exe"));
    command.args(["--client", &port.to_string(), &connects.to_string()]).stdout(Stdio::piped());
    let (ours, theirs) = seqpacket_pair();
    if supervised {
        let filter = Filter::build(NetFilter::Supervised).expect("no syscall table for this architecture");
        let child_end = theirs.try_clone().expect("dup");
        // SAFETY: the closure runs in the forked child and makes only
        // async-signal-safe calls: prctl, the filter's install, send_fd, close.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(listener) = filter.install()? {
                    send_fd(child_end.as_fd(), listener)?;
                    libc::close(listener);
                }
                Ok(())
            });
        }
    }
    let child = command.spawn().expect("spawn the client");
    drop(command);
    drop(theirs);
    let supervisor = supervised.then(|| {
        let listener = recv_fd(ours.as_fd()).expect("the filter's listener");
        let grant: NetTarget = format!("127.0.0.1:{port}").parse().expect("grant");
        Supervisor::start(listener, Allowlist::new(&[grant])).expect("start the supervisor")
    });
    let output = child.wait_with_output().expect("wait for the client");
    assert!(output.status.success(), "the client failed");
    if let Some(supervisor) = supervisor {
        let report = supervisor.finish();
        assert_eq!(report.allowed, connects);
    }
    String::from_utf8(output.stdout).expect("UTF-8").trim().to_owned()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let connects = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["--client", port, connects] => return client(port.parse().expect("port"), connects.parse().expect("count")),
        ["--connects", n] => n.parse().expect("--connects N"),
        [] => 2000,
        _ => {
            eprintln!("usage: bench_connect [--connects N]");
            std::process::exit(2);
        }
    };
    let server = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = server.local_addr().expect("address").port();
    // A deep accept queue: a connect the queue has no room for is dropped
    // and retried a second later, which would swamp the measure.
    // SAFETY: listen only takes the listener's descriptor, which is live.
    assert_eq!(unsafe { libc::listen(server.as_raw_fd(), 4096) }, 0, "listen");
    thread::spawn(move || {
        for stream in server.incoming() {
            drop(stream);
        }
    });
    println!("| path | µs per connect ({connects} connects, 127.0.0.1) |");
    println!("|---|---|");
    // Each path twice, interleaved, so a busy moment shows.
    for supervised in [false, true, false, true] {
        println!("| {} | {} |", if supervised { "supervised" } else { "plain" }, run(port, connects, supervised));
    }
}
