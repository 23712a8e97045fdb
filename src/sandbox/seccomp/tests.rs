use std::ffi::c_long;

use libc::{
    BPF_ABS, BPF_ALU, BPF_AND, BPF_JA, BPF_JEQ, BPF_JGE, BPF_JMP, BPF_JSET, BPF_K, BPF_LD, BPF_RET, BPF_W,
    SECCOMP_RET_ALLOW, SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_USER_NOTIF,
};

use super::program::{ARCH, errno};
use super::sandboxed::python;
use super::*;

/// Runs `filter` on a call the way the kernel does, on the fields it reads.
fn decide(filter: &Filter, arch: u32, nr: c_long, args: [u64; 6]) -> u32 {
    let mut data = [0u8; 64];
    data[0..4].copy_from_slice(&(nr as u32).to_ne_bytes());
    data[4..8].copy_from_slice(&arch.to_ne_bytes());
    for (index, arg) in args.iter().enumerate() {
        data[16 + 8 * index..24 + 8 * index].copy_from_slice(&arg.to_ne_bytes());
    }
    let (mut pc, mut acc) = (0usize, 0u32);
    loop {
        let insn = filter.program[pc];
        pc += 1;
        let code = u32::from(insn.code);
        match code {
            c if c == BPF_LD | BPF_W | BPF_ABS => {
                let at = insn.k as usize;
                acc = u32::from_ne_bytes(data[at..at + 4].try_into().unwrap());
            }
            c if c == BPF_ALU | BPF_AND | BPF_K => acc &= insn.k,
            c if c == BPF_JMP | BPF_JA => pc += insn.k as usize,
            c if c == BPF_JMP | BPF_JEQ | BPF_K
                || c == BPF_JMP | BPF_JSET | BPF_K
                || c == BPF_JMP | BPF_JGE | BPF_K =>
            {
                let taken = match c & !(BPF_JMP | BPF_K) {
                    BPF_JSET => acc & insn.k != 0,
                    BPF_JGE => acc >= insn.k,
                    _ => acc == insn.k,
                };
                pc += usize::from(if taken { insn.jt } else { insn.jf });
            }
            c if c == BPF_RET | BPF_K => return insn.k,
            other => panic!("unexpected instruction {other:#x}"),
        }
    }
}

/// `decide` on this machine's architecture.
fn on_arch(filter: &Filter, nr: c_long, args: [u64; 6]) -> u32 {
    decide(filter, ARCH.unwrap().0, nr, args)
}

/// Arguments from the first few.
fn args(first: &[u64]) -> [u64; 6] {
    let mut all = [0; 6];
    all[..first.len()].copy_from_slice(first);
    all
}

#[test]
fn a_foreign_architecture_is_killed_and_x32_calls_refused() {
    let filter = Filter::build(NetFilter::Denied).unwrap();
    assert_eq!(decide(&filter, 0x4000_0003, libc::SYS_read, args(&[])), SECCOMP_RET_KILL_PROCESS);
    assert_eq!(on_arch(&filter, libc::SYS_read, args(&[])), SECCOMP_RET_ALLOW);
    if ARCH.unwrap().1 {
        assert_eq!(on_arch(&filter, 0x4000_0000 | libc::SYS_socket, args(&[2, 1, 0])), errno(libc::EACCES));
    }
}

#[test]
fn sockets_denied_keep_unix_and_netlink_only_and_connect_nothing() {
    let filter = Filter::build(NetFilter::Denied).unwrap();
    let socket = |family: i32, kind: i32, protocol: i32| {
        on_arch(&filter, libc::SYS_socket, args(&[family as u64, kind as u64, protocol as u64]))
    };
    assert_eq!(socket(libc::AF_UNIX, libc::SOCK_STREAM, 0), SECCOMP_RET_ALLOW);
    assert_eq!(socket(libc::AF_NETLINK, libc::SOCK_RAW, 0), SECCOMP_RET_ALLOW);
    assert_eq!(socket(libc::AF_INET, libc::SOCK_STREAM, 0), errno(libc::EACCES));
    assert_eq!(socket(libc::AF_INET6, libc::SOCK_STREAM, 0), errno(libc::EACCES));
    // Only Unix sockets could connect, and they may not.
    assert_eq!(on_arch(&filter, libc::SYS_connect, args(&[3])), errno(libc::EACCES));
    assert_eq!(on_arch(&filter, libc::SYS_socketpair, args(&[libc::AF_INET as u64])), errno(libc::EACCES));
    assert_eq!(on_arch(&filter, libc::SYS_socketpair, args(&[libc::AF_UNIX as u64])), SECCOMP_RET_ALLOW);
}

#[test]
fn sockets_supervised_add_tcp_only() {
    let filter = Filter::build(NetFilter::Supervised).unwrap();
    let socket = |family: u64, kind: i32, protocol: i32| {
        on_arch(&filter, libc::SYS_socket, args(&[family, kind as u64, protocol as u64]))
    };
    let inet = libc::AF_INET as u64;
    assert_eq!(socket(inet, libc::SOCK_STREAM, 0), SECCOMP_RET_ALLOW);
    assert_eq!(socket(libc::AF_INET6 as u64, libc::SOCK_STREAM, libc::IPPROTO_TCP), SECCOMP_RET_ALLOW);
    assert_eq!(socket(inet, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0), SECCOMP_RET_ALLOW);
    // Only the low 32 bits count: the argument is an int.
    assert_eq!(socket(0xffff_ffff_0000_0000 | inet, libc::SOCK_STREAM, 0), SECCOMP_RET_ALLOW);
    assert_eq!(socket(inet, libc::SOCK_DGRAM, 0), errno(libc::EACCES));
    assert_eq!(socket(inet, libc::SOCK_RAW, libc::IPPROTO_TCP), errno(libc::EACCES));
    assert_eq!(socket(inet, libc::SOCK_STREAM, libc::IPPROTO_UDP), errno(libc::EACCES));
    assert_eq!(socket(libc::AF_PACKET as u64, libc::SOCK_STREAM, 0), errno(libc::EACCES));
    assert_eq!(socket(libc::AF_VSOCK as u64, libc::SOCK_STREAM, 0), errno(libc::EACCES));
    assert_eq!(on_arch(&filter, libc::SYS_connect, args(&[3])), SECCOMP_RET_USER_NOTIF);
}

#[test]
fn tcp_fast_open_is_refused_when_supervised() {
    let filter = Filter::build(NetFilter::Supervised).unwrap();
    let fast_open = (libc::MSG_FASTOPEN | libc::MSG_NOSIGNAL) as u64;
    let eopnotsupp = errno(libc::EOPNOTSUPP);
    assert_eq!(on_arch(&filter, libc::SYS_sendto, args(&[3, 0, 0, fast_open])), eopnotsupp);
    assert_eq!(on_arch(&filter, libc::SYS_sendmsg, args(&[3, 0, fast_open])), eopnotsupp);
    assert_eq!(on_arch(&filter, libc::SYS_sendmmsg, args(&[3, 0, 1, fast_open])), eopnotsupp);
    assert_eq!(on_arch(&filter, libc::SYS_sendto, args(&[3, 0, 0, libc::MSG_NOSIGNAL as u64])), SECCOMP_RET_ALLOW);
}

#[test]
fn escapes_and_terminal_injection_are_refused() {
    for net in [NetFilter::Denied, NetFilter::Supervised] {
        let filter = Filter::build(net).unwrap();
        for nr in [libc::SYS_io_uring_setup, libc::SYS_ptrace, libc::SYS_unshare, libc::SYS_bpf, libc::SYS_mount] {
            assert_eq!(on_arch(&filter, nr, args(&[])), errno(libc::EPERM), "syscall {nr}");
        }
        let ioctl = |request: u64| on_arch(&filter, libc::SYS_ioctl, args(&[0, request]));
        assert_eq!(ioctl(libc::TIOCSTI), errno(libc::EPERM));
        assert_eq!(ioctl(libc::TIOCLINUX), errno(libc::EPERM));
        assert_eq!(ioctl(libc::TCGETS), SECCOMP_RET_ALLOW);
    }
}

#[test]
fn the_search_finds_every_rule_and_allows_every_other_number() {
    for net in [NetFilter::Denied, NetFilter::Supervised] {
        let filter = Filter::build(net).unwrap();
        let named: Vec<c_long> = super::program::named_calls(net);
        for nr in 0..1024 {
            let decision = on_arch(&filter, nr, args(&[]));
            if super::program::DENIED.contains(&nr) {
                assert_eq!(decision, errno(libc::EPERM), "call {nr}");
            } else if !named.contains(&nr) {
                assert_eq!(decision, SECCOMP_RET_ALLOW, "call {nr}");
            }
        }
    }
}

#[test]
fn this_kernel_has_filters_and_user_notification() {
    assert_eq!(available(), Availability { filter: true, user_notif: true });
}

/// A Python prelude: `attempt(name, f)` prints `name ok` or `name <ERRNO>`.
const PRELUDE: &str = r#"
import ctypes, errno, fcntl, socket, termios
def attempt(name, f):
    try:
        f()
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
libc = ctypes.CDLL(None, use_errno=True)
def syscall(*args):
    if libc.syscall(*args) < 0:
        raise OSError(ctypes.get_errno(), "")
"#;

#[test]
fn a_denied_tool_has_unix_sockets_and_no_internet_ones() {
    let script = format!(
        "{PRELUDE}
attempt('tcp', lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
attempt('udp6', lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))
attempt('unix', lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
attempt('unix_connect', lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect('/run/nothing.sock'))
attempt('pair', lambda: socket.socketpair())
attempt('io_uring', lambda: syscall({}, 8, ctypes.create_string_buffer(256)))
attempt('tiocsti', lambda: fcntl.ioctl(0, termios.TIOCSTI, b'x'))
",
        libc::SYS_io_uring_setup
    );
    let dir = tempfile::tempdir().unwrap();
    let out = python(Filter::build(NetFilter::Denied).unwrap(), &script, dir.path()).stdout();
    assert_eq!(out, "tcp EACCES\nudp6 EACCES\nunix ok\nunix_connect EACCES\npair ok\nio_uring EPERM\ntiocsti EPERM\n");
}

#[test]
fn a_supervised_tool_opens_tcp_sockets_only() {
    let script = format!(
        "{PRELUDE}
attempt('tcp', lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
attempt('tcp6', lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM | socket.SOCK_NONBLOCK))
attempt('udp', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
attempt('raw', lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP))
attempt('fastopen', lambda: socket.socket().sendto(b'x', socket.MSG_FASTOPEN, ('127.0.0.1', 9)))
"
    );
    let dir = tempfile::tempdir().unwrap();
    let sandboxed = python(Filter::build(NetFilter::Supervised).unwrap(), &script, dir.path());
    assert!(sandboxed.listener.is_some());
    // Python names EOPNOTSUPP by its Linux alias ENOTSUP (both 95).
    assert_eq!(sandboxed.stdout(), "tcp ok\ntcp6 ok\nudp EACCES\nraw EACCES\nfastopen ENOTSUP\n");
}
