use std::ffi::c_long;
use std::io::ErrorKind;
use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};

use libc::{
    BPF_ABS, BPF_ALU, BPF_AND, BPF_JA, BPF_JEQ, BPF_JGE, BPF_JMP, BPF_JSET, BPF_K, BPF_LD, BPF_RET, BPF_W,
    SECCOMP_RET_ALLOW, SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_USER_NOTIF,
};

use super::program::{ARCH, errno};
use super::sandboxed::{Sandboxed, python};
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
    let unix_pair = args(&[libc::AF_UNIX as u64, libc::SOCK_STREAM as u64]);
    assert_eq!(on_arch(&filter, libc::SYS_socketpair, unix_pair), SECCOMP_RET_ALLOW);
}

#[test]
fn unix_sockets_and_pairs_are_stream_or_seqpacket() {
    for net in [NetFilter::Denied, NetFilter::Supervised] {
        let filter = Filter::build(net).unwrap();
        for nr in [libc::SYS_socket, libc::SYS_socketpair] {
            let unix = |kind: i32| on_arch(&filter, nr, args(&[libc::AF_UNIX as u64, kind as u64]));
            assert_eq!(unix(libc::SOCK_STREAM), SECCOMP_RET_ALLOW);
            assert_eq!(unix(libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC), SECCOMP_RET_ALLOW);
            assert_eq!(unix(libc::SOCK_DGRAM), errno(libc::EACCES));
            assert_eq!(unix(libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC), errno(libc::EACCES));
            // Linux makes a Unix SOCK_RAW socket a datagram one.
            assert_eq!(unix(libc::SOCK_RAW), errno(libc::EACCES));
        }
    }
}

#[test]
fn netlink_sockets_are_for_routing_only() {
    for net in [NetFilter::Denied, NetFilter::Supervised] {
        let filter = Filter::build(net).unwrap();
        let netlink = |kind: i32, protocol: i32| {
            on_arch(&filter, libc::SYS_socket, args(&[libc::AF_NETLINK as u64, kind as u64, protocol as u64]))
        };
        assert_eq!(netlink(libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE), SECCOMP_RET_ALLOW);
        assert_eq!(netlink(libc::SOCK_DGRAM, libc::NETLINK_ROUTE), SECCOMP_RET_ALLOW);
        for protocol in [
            libc::NETLINK_SOCK_DIAG,
            libc::NETLINK_AUDIT,
            libc::NETLINK_NETFILTER,
            libc::NETLINK_KOBJECT_UEVENT,
            libc::NETLINK_GENERIC,
        ] {
            assert_eq!(netlink(libc::SOCK_RAW, protocol), errno(libc::EACCES), "protocol {protocol}");
        }
    }
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
        for nr in [
            libc::SYS_io_uring_setup,
            libc::SYS_ptrace,
            libc::SYS_unshare,
            libc::SYS_bpf,
            libc::SYS_mount,
            libc::SYS_shmat,
            libc::SYS_msgsnd,
            libc::SYS_semop,
            libc::SYS_mq_open,
        ] {
            assert_eq!(on_arch(&filter, nr, args(&[])), errno(libc::EPERM), "syscall {nr}");
        }
        let ioctl = |request: u64| on_arch(&filter, libc::SYS_ioctl, args(&[0, request]));
        assert_eq!(ioctl(libc::TIOCSTI), errno(libc::EPERM));
        assert_eq!(ioctl(libc::TIOCLINUX), errno(libc::EPERM));
        assert_eq!(ioctl(libc::TCGETS), SECCOMP_RET_ALLOW);
    }
}

#[test]
fn clone_makes_no_namespaces_and_clone3_is_unavailable() {
    const THREAD: i32 = libc::CLONE_VM
        | libc::CLONE_FS
        | libc::CLONE_FILES
        | libc::CLONE_SIGHAND
        | libc::CLONE_THREAD
        | libc::CLONE_SYSVSEM
        | libc::CLONE_SETTLS
        | libc::CLONE_PARENT_SETTID
        | libc::CLONE_CHILD_CLEARTID;
    for net in [NetFilter::Denied, NetFilter::Supervised] {
        let filter = Filter::build(net).unwrap();
        let clone = |flags: i32| on_arch(&filter, libc::SYS_clone, args(&[(flags | libc::SIGCHLD) as u64]));
        assert_eq!(clone(0), SECCOMP_RET_ALLOW);
        assert_eq!(clone(THREAD), SECCOMP_RET_ALLOW);
        assert_eq!(clone(libc::CLONE_VM | libc::CLONE_VFORK), SECCOMP_RET_ALLOW);
        for namespace in [
            libc::CLONE_NEWNS,
            libc::CLONE_NEWCGROUP,
            libc::CLONE_NEWUTS,
            libc::CLONE_NEWIPC,
            libc::CLONE_NEWUSER,
            libc::CLONE_NEWPID,
            libc::CLONE_NEWNET,
        ] {
            assert_eq!(clone(namespace), errno(libc::EPERM), "flag {namespace:#x}");
        }
        assert_eq!(clone(libc::CLONE_NEWUSER | libc::CLONE_NEWNET), errno(libc::EPERM));
        assert_eq!(on_arch(&filter, libc::SYS_clone3, args(&[])), errno(libc::ENOSYS));
    }
}

#[test]
fn no_mode_sets_a_set_id_bit_and_openat2_is_unavailable() {
    for net in [NetFilter::Denied, NetFilter::Supervised] {
        let filter = Filter::build(net).unwrap();
        let fchmodat = |mode: u64| on_arch(&filter, libc::SYS_fchmodat, args(&[0, 0, mode]));
        let openat = |mode: u64| on_arch(&filter, libc::SYS_openat, args(&[0, 0, libc::O_CREAT as u64, mode]));
        assert_eq!(fchmodat(0o755), SECCOMP_RET_ALLOW);
        assert_eq!(fchmodat(0o4755), errno(libc::EPERM));
        assert_eq!(fchmodat(0o2755), errno(libc::EPERM));
        assert_eq!(openat(0o644), SECCOMP_RET_ALLOW);
        assert_eq!(openat(0o4755), errno(libc::EPERM));
        assert_eq!(on_arch(&filter, libc::SYS_fchmod, args(&[0, 0o6000])), errno(libc::EPERM));
        // mknod makes a regular file with any mode, without privilege.
        let mknodat = |mode: u64| on_arch(&filter, libc::SYS_mknodat, args(&[0, 0, mode, 0]));
        assert_eq!(mknodat(u64::from(libc::S_IFREG) | 0o755), SECCOMP_RET_ALLOW);
        assert_eq!(mknodat(u64::from(libc::S_IFREG) | 0o4755), errno(libc::EPERM));
        assert_eq!(mknodat(u64::from(libc::S_IFREG) | 0o2755), errno(libc::EPERM));
        assert_eq!(on_arch(&filter, libc::SYS_openat2, args(&[0, 0, 0, 24])), errno(libc::ENOSYS));
        assert_eq!(on_arch(&filter, libc::SYS_chroot, args(&[0])), errno(libc::EPERM));
    }
}

#[test]
fn limits_and_scheduling_are_the_callers_own_only() {
    for net in [NetFilter::Denied, NetFilter::Supervised] {
        let filter = Filter::build(net).unwrap();
        for nr in [
            libc::SYS_prlimit64,
            libc::SYS_sched_setaffinity,
            libc::SYS_sched_setscheduler,
            libc::SYS_sched_setparam,
            libc::SYS_sched_setattr,
        ] {
            assert_eq!(on_arch(&filter, nr, args(&[0, 1, 0, 0])), SECCOMP_RET_ALLOW, "call {nr}");
            assert_eq!(on_arch(&filter, nr, args(&[1, 1, 0, 0])), errno(libc::EPERM), "call {nr}");
            assert_eq!(on_arch(&filter, nr, args(&[4242, 1, 0, 0])), errno(libc::EPERM), "call {nr}");
        }
        let (process, group, user) = (libc::PRIO_PROCESS as u64, libc::PRIO_PGRP as u64, libc::PRIO_USER as u64);
        let setpriority = |which: u64, who: u64| on_arch(&filter, libc::SYS_setpriority, args(&[which, who, 19]));
        assert_eq!(setpriority(process, 0), SECCOMP_RET_ALLOW);
        assert_eq!(setpriority(group, 0), SECCOMP_RET_ALLOW);
        assert_eq!(setpriority(process, 4242), errno(libc::EPERM));
        assert_eq!(setpriority(user, 0), errno(libc::EPERM));
        let ioprio_set = |which: u64, who: u64| on_arch(&filter, libc::SYS_ioprio_set, args(&[which, who, 3 << 13]));
        assert_eq!(ioprio_set(1, 0), SECCOMP_RET_ALLOW);
        assert_eq!(ioprio_set(2, 0), SECCOMP_RET_ALLOW);
        assert_eq!(ioprio_set(1, 4242), errno(libc::EPERM));
        assert_eq!(ioprio_set(3, 0), errno(libc::EPERM));
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
def check(result):
    if result < 0:
        raise OSError(ctypes.get_errno(), "")
    return result
def syscall(*args):
    return check(libc.syscall(*args))
"#;

/// Runs `script` in Python without a filter, and returns its stdout.
fn unfiltered(script: &str) -> String {
    let mut command = Command::new("/usr/bin/python3");
    command.arg("-c").arg(script).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    Sandboxed { child: command.spawn().unwrap(), listener: None }.stdout()
}

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

#[test]
fn a_tool_forks_threads_and_spawns_but_makes_no_namespaces() {
    let namespaces = libc::CLONE_NEWUSER | libc::CLONE_NEWNET;
    let script = format!(
        "{PRELUDE}
import os, subprocess, threading
def child(start):
    def f():
        pid = start()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    return f
def thread():
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()
attempt('clone', child(lambda: syscall({clone}, {namespaces} | {sigchld}, 0, 0, 0, 0)))
attempt('clone3', child(lambda: syscall({clone3}, (ctypes.c_uint64 * 8)({namespaces}, 0, 0, 0, {sigchld}), 64)))
attempt('unshare', lambda: syscall({unshare}, {namespaces}))
attempt('fork', child(os.fork))
attempt('thread', thread)
attempt('spawn', lambda: subprocess.run(['/bin/true'], check=True))
",
        clone = libc::SYS_clone,
        clone3 = libc::SYS_clone3,
        unshare = libc::SYS_unshare,
        sigchld = libc::SIGCHLD,
    );
    let dir = tempfile::tempdir().unwrap();
    let out = python(Filter::build(NetFilter::Denied).unwrap(), &script, dir.path()).stdout();
    assert_eq!(out, "clone EPERM\nclone3 ENOSYS\nunshare EPERM\nfork ok\nthread ok\nspawn ok\n");
}

#[test]
fn a_tool_sends_no_unix_datagrams() {
    let script = format!(
        "{PRELUDE}
def send(kind):
    socket.socket(socket.AF_UNIX, kind).sendto(b'x', 'daemon.sock')
def send_from_pair(kind):
    socket.socketpair(socket.AF_UNIX, kind)[0].sendto(b'x', 'daemon.sock')
attempt('dgram', lambda: send(socket.SOCK_DGRAM))
attempt('dgram_nonblock', lambda: send(socket.SOCK_DGRAM | socket.SOCK_NONBLOCK))
attempt('raw', lambda: send(socket.SOCK_RAW))
attempt('pair_dgram', lambda: send_from_pair(socket.SOCK_DGRAM))
attempt('seqpacket', lambda: socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET))
attempt('pair_seqpacket', lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET))
"
    );
    for net in [NetFilter::Denied, NetFilter::Supervised] {
        let dir = tempfile::tempdir().unwrap();
        let daemon = UnixDatagram::bind(dir.path().join("daemon.sock")).unwrap();
        daemon.set_nonblocking(true).unwrap();
        let out = python(Filter::build(net).unwrap(), &script, dir.path()).stdout();
        assert_eq!(
            out,
            "dgram EACCES\ndgram_nonblock EACCES\nraw EACCES\npair_dgram EACCES\nseqpacket ok\npair_seqpacket ok\n"
        );
        assert_eq!(daemon.recv(&mut [0; 8]).unwrap_err().kind(), ErrorKind::WouldBlock, "{net:?}");
    }
}

#[test]
fn a_tool_opens_routing_netlink_sockets_only() {
    let script = format!(
        "{PRELUDE}
def netlink(protocol):
    return lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, protocol).close()
attempt('route', netlink({}))
attempt('if_nameindex', socket.if_nameindex)
attempt('audit', netlink({}))
attempt('netfilter', netlink({}))
attempt('uevent', netlink({}))
attempt('generic', netlink({}))
",
        libc::NETLINK_ROUTE,
        libc::NETLINK_AUDIT,
        libc::NETLINK_NETFILTER,
        libc::NETLINK_KOBJECT_UEVENT,
        libc::NETLINK_GENERIC,
    );
    let dir = tempfile::tempdir().unwrap();
    let out = python(Filter::build(NetFilter::Denied).unwrap(), &script, dir.path()).stdout();
    assert_eq!(out, "route ok\nif_nameindex ok\naudit EACCES\nnetfilter EACCES\nuevent EACCES\ngeneric EACCES\n");
}

#[test]
fn a_tool_reaches_no_sysv_ipc_or_message_queues() {
    // Each object is made private and removed at once, where it can be made.
    let script = format!(
        "{PRELUDE}
import os
PRIVATE, CREATE, REMOVE = {}, {} | 0o600, {}
queue = b'/rlp-seccomp-test-%d' % os.getpid()
def message_queue():
    check(libc.mq_close(check(libc.mq_open(queue, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600, None))))
    check(libc.mq_unlink(queue))
attempt('shm', lambda: check(libc.shmctl(check(libc.shmget(PRIVATE, 4096, CREATE)), REMOVE, None)))
attempt('msg', lambda: check(libc.msgctl(check(libc.msgget(PRIVATE, CREATE)), REMOVE, None)))
attempt('sem', lambda: check(libc.semctl(check(libc.semget(PRIVATE, 1, CREATE)), 0, REMOVE)))
attempt('mq', message_queue)
",
        libc::IPC_PRIVATE,
        libc::IPC_CREAT,
        libc::IPC_RMID,
    );
    assert_eq!(unfiltered(&script), "shm ok\nmsg ok\nsem ok\nmq ok\n");
    let dir = tempfile::tempdir().unwrap();
    let out = python(Filter::build(NetFilter::Denied).unwrap(), &script, dir.path()).stdout();
    assert_eq!(out, "shm EPERM\nmsg EPERM\nsem EPERM\nmq EPERM\n");
}
