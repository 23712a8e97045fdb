//! The filter's rules, one table, and their assembly into classic BPF.
//!
//! The program checks the architecture, then finds the system call number
//! among the [`Rule`]s by binary search (a few comparisons for any call,
//! which also keeps loading the filter cheap: the kernel runs it once per
//! system call number to precompute what it can); a rule's block tests
//! arguments (a test may lead to further tests, as a socket's type after
//! its family) and always ends in a return, and a call no rule names is
//! allowed. Arguments are compared on their low 32 bits only (every
//! argument tested is a C `int` or flag word), read at their little-endian
//! offset in `struct seccomp_data` (both supported architectures are
//! little-endian).

use std::ffi::{c_int, c_long};

use libc::{
    BPF_ABS, BPF_ALU, BPF_AND, BPF_JA, BPF_JEQ, BPF_JGE, BPF_JMP, BPF_JSET, BPF_K, BPF_LD, BPF_RET, BPF_W,
    SECCOMP_RET_ALLOW, SECCOMP_RET_DATA, SECCOMP_RET_ERRNO, SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_USER_NOTIF,
    sock_filter,
};

use crate::sandbox::seccomp::NetFilter;

/// The architecture rlp's syscall numbers belong to, as `seccomp_data.arch`
/// reports it, and whether x32 numbers (bit 30) must be refused.
#[cfg(target_arch = "x86_64")]
pub(super) const ARCH: Option<(u32, bool)> = Some((0xC000_003E, true)); // AUDIT_ARCH_X86_64
/// The architecture rlp's syscall numbers belong to (see the x86_64 twin).
#[cfg(target_arch = "aarch64")]
pub(super) const ARCH: Option<(u32, bool)> = Some((0xC000_00B7, false)); // AUDIT_ARCH_AARCH64
/// No syscall table for this architecture: no filter.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(super) const ARCH: Option<(u32, bool)> = None;

/// The bit x32 system call numbers carry on x86_64.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
/// Offset of `nr` in `struct seccomp_data`.
const NR_OFFSET: u32 = 0;
/// Offset of `arch` in `struct seccomp_data`.
const ARCH_OFFSET: u32 = 4;

/// Offset of the low 32 bits of argument `index` in `struct seccomp_data`.
const fn arg_offset(index: u32) -> u32 {
    16 + 8 * index
}

/// The action that fails a call with `errno`.
pub(super) const fn errno(errno: c_int) -> u32 {
    SECCOMP_RET_ERRNO | (errno as u32 & SECCOMP_RET_DATA)
}

/// Calls every tool is refused with EPERM, each with why.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(super) const DENIED: &[c_long] = &[
    libc::SYS_io_uring_setup,    // io_uring performs I/O the filter never sees
    libc::SYS_io_uring_enter,    // (same)
    libc::SYS_io_uring_register, // (same)
    libc::SYS_ptrace,            // reads and writes other processes
    libc::SYS_process_vm_readv,  // reads another process's memory
    libc::SYS_process_vm_writev, // writes another process's memory
    libc::SYS_pidfd_getfd,       // takes another process's file descriptors (rlp's sockets)
    libc::SYS_bpf,               // loads kernel programs
    libc::SYS_perf_event_open,   // kernel profiling, a side channel and attack surface
    libc::SYS_userfaultfd,       // stalls the kernel on a fault, an exploit primitive
    libc::SYS_kexec_load,        // replaces the running kernel
    libc::SYS_kexec_file_load,   // (same)
    libc::SYS_init_module,       // loads kernel modules
    libc::SYS_finit_module,      // (same)
    libc::SYS_delete_module,     // unloads kernel modules
    libc::SYS_mount,             // changes the filesystem tree
    libc::SYS_chroot,            // a root of its own, outside the view's
    libc::SYS_umount2,           // (same)
    libc::SYS_pivot_root,        // (same)
    libc::SYS_swapon,            // system-wide swap
    libc::SYS_swapoff,           // (same)
    libc::SYS_reboot,            // stops the machine
    libc::SYS_setns,             // enters other namespaces
    libc::SYS_unshare,           // new namespaces (a user namespace lifts restrictions)
    libc::SYS_keyctl,            // the kernel keyring holds other programs' secrets
    libc::SYS_add_key,           // (same)
    libc::SYS_request_key,       // (same)
    libc::SYS_open_by_handle_at, // opens files around Landlock's path checks
    libc::SYS_name_to_handle_at, // (its counterpart)
    libc::SYS_fanotify_init,     // watches the whole filesystem
    libc::SYS_acct,              // system-wide process accounting
    libc::SYS_quotactl,          // filesystem quotas
    libc::SYS_syslog,            // the kernel log
    libc::SYS_settimeofday,      // the system clock
    libc::SYS_clock_settime,     // (same)
    libc::SYS_clock_adjtime,     // (same)
    libc::SYS_adjtimex,          // (same)
    libc::SYS_lookup_dcookie,    // kernel profiling internals
    libc::SYS_shmget,            // SysV shared memory: other processes' segments
    libc::SYS_shmat,             // (same)
    libc::SYS_shmdt,             // (same)
    libc::SYS_shmctl,            // (same)
    libc::SYS_msgget,            // SysV message queues: other processes' queues
    libc::SYS_msgsnd,            // (same)
    libc::SYS_msgrcv,            // (same)
    libc::SYS_msgctl,            // (same)
    libc::SYS_semget,            // SysV semaphores: other processes' semaphores
    libc::SYS_semop,             // (same)
    libc::SYS_semtimedop,        // (same)
    libc::SYS_semctl,            // (same)
    libc::SYS_mq_open,           // POSIX message queues: other processes' queues
    libc::SYS_mq_unlink,         // (same)
    libc::SYS_mq_timedsend,      // (same)
    libc::SYS_mq_timedreceive,   // (same)
    libc::SYS_mq_notify,         // (same)
    libc::SYS_mq_getsetattr,     // (same)
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl, // direct hardware port access
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm, // (same)
];

/// When a [`Test`] applies.
#[derive(Clone, Copy)]
enum When {
    /// The masked argument is one of the values.
    In,
    /// The masked argument is none of the values.
    NotIn,
}

/// A mask that keeps an argument's whole low 32 bits.
const WHOLE: u32 = u32::MAX;

/// One test on an argument of a call.
struct Test {
    /// Which argument (0 to 5).
    arg: u32,
    /// What is kept of its low 32 bits before comparing.
    mask: u32,
    /// The values compared against.
    values: &'static [u32],
    /// Whether a match or a miss applies the test.
    when: When,
    /// What decides the call when the test applies.
    then: Decision,
}

impl Test {
    /// `then` when argument `arg`, masked with `mask`, is one of `values`.
    fn is(arg: u32, mask: u32, values: &'static [u32], then: Decision) -> Test {
        Test { arg, mask, values, when: When::In, then }
    }

    /// `then` when argument `arg`, masked with `mask`, is none of `values`.
    fn is_not(arg: u32, mask: u32, values: &'static [u32], then: Decision) -> Test {
        Test { arg, mask, values, when: When::NotIn, then }
    }
}

/// How a call is decided: its tests in order, then `otherwise`.
struct Decision {
    /// Tests on arguments; the first that applies decides.
    tests: Vec<Test>,
    /// The action when no test applies.
    otherwise: u32,
}

impl Decision {
    /// Always `action`.
    fn always(action: u32) -> Decision {
        Decision { tests: Vec::new(), otherwise: action }
    }

    /// Allowed unless one of `tests` applies.
    fn allow_unless(tests: Vec<Test>) -> Decision {
        Decision { tests, otherwise: SECCOMP_RET_ALLOW }
    }

    /// Failed with EACCES, as refused sockets are.
    fn eacces() -> Decision {
        Decision::always(errno(libc::EACCES))
    }
}

/// What one system call gets.
struct Rule {
    /// The system call number.
    nr: c_long,
    /// How its arguments decide it.
    decision: Decision,
}

impl Rule {
    /// A call that always gets `action`.
    fn always(nr: c_long, action: u32) -> Rule {
        Rule { nr, decision: Decision::always(action) }
    }

    /// A call allowed unless `test` applies.
    fn allow_unless(nr: c_long, test: Test) -> Rule {
        Rule { nr, decision: Decision::allow_unless(vec![test]) }
    }

    /// A send call whose flags, argument `arg`, ask for TCP Fast Open, which
    /// connects from `sendto`/`sendmsg` around `connect`: EOPNOTSUPP.
    fn no_fast_open(nr: c_long, arg: u32) -> Rule {
        const FAST_OPEN: u32 = libc::MSG_FASTOPEN as u32;
        Rule::allow_unless(nr, Test::is(arg, FAST_OPEN, &[FAST_OPEN], Decision::always(errno(libc::EOPNOTSUPP))))
    }
}

/// What `socket` and `socketpair` keep of their type argument (argument 1):
/// the type, without SOCK_NONBLOCK and SOCK_CLOEXEC.
const TYPE_MASK: u32 = !((libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) as u32);

/// The Unix sockets of `socket` and `socketpair`: stream and seqpacket ones
/// only. Those reach no one but their pair, or a peer `connect` (refused)
/// names, while a datagram socket (and a SOCK_RAW one, which Linux makes a
/// datagram one), even one of a pair, sends to any bound path: the system
/// log's, the service manager's notify socket.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn unix_socket() -> Test {
    const TYPES: &[u32] = &[libc::SOCK_STREAM as u32, libc::SOCK_SEQPACKET as u32];
    let unix_type = Test::is_not(1, TYPE_MASK, TYPES, Decision::eacces());
    Test::is(0, WHOLE, &[libc::AF_UNIX as u32], Decision::allow_unless(vec![unix_type]))
}

/// Netlink sockets for routing only (what glibc's getaddrinfo and
/// if_nameindex use): no netfilter, audit, uevent or generic netlink.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn netlink_socket() -> Test {
    let protocol = Test::is_not(2, WHOLE, &[libc::NETLINK_ROUTE as u32], Decision::eacces());
    Test::is(0, WHOLE, &[libc::AF_NETLINK as u32], Decision::allow_unless(vec![protocol]))
}

/// `socket`: [`unix_socket`]s and [`netlink_socket`]s, TCP ones too when
/// `net` is supervised, and nothing else.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn socket(net: NetFilter) -> Rule {
    const INET_FAMILIES: &[u32] = &[libc::AF_INET as u32, libc::AF_INET6 as u32];
    const TCP_PROTOCOLS: &[u32] = &[0, libc::IPPROTO_TCP as u32];
    let mut tests = vec![unix_socket(), netlink_socket()];
    if let NetFilter::Supervised = net {
        let tcp = Decision::allow_unless(vec![
            Test::is_not(1, TYPE_MASK, &[libc::SOCK_STREAM as u32], Decision::eacces()),
            Test::is_not(2, WHOLE, TCP_PROTOCOLS, Decision::eacces()),
        ]);
        tests.push(Test::is(0, WHOLE, INET_FAMILIES, tcp));
    }
    Rule { nr: libc::SYS_socket, decision: Decision { tests, otherwise: errno(libc::EACCES) } }
}

/// `clone` asking for a new namespace: EPERM, as `unshare` (a user namespace
/// brings CAP_NET_ADMIN over a new network namespace). The flags are
/// argument 0 on both architectures; CLONE_NEWTIME is no flag of `clone`,
/// whose low byte is the exit signal.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn clone() -> Rule {
    const NAMESPACES: u32 = (libc::CLONE_NEWNS
        | libc::CLONE_NEWCGROUP
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUSER
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWNET) as u32;
    Rule::allow_unless(libc::SYS_clone, Test::is_not(0, NAMESPACES, &[0], Decision::always(errno(libc::EPERM))))
}

/// A call whose mode, argument `arg`, sets the set-user-id or set-group-id
/// bit: EPERM, so that no tool leaves a set-id program in its grants for
/// someone else to run (as root, one owned by root).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn no_set_id(nr: c_long, arg: u32) -> Rule {
    const SET_ID: u32 = libc::S_ISUID | libc::S_ISGID;
    Rule::allow_unless(nr, Test::is_not(arg, SET_ID, &[0], Decision::always(errno(libc::EPERM))))
}

/// The calls that set a file's mode, with the argument that holds it:
/// changing it, and creating a file with it (`mknod` makes a regular file
/// with any mode, and needs no privilege to).
#[cfg(target_arch = "x86_64")]
const MODE_CALLS: &[(c_long, u32)] = &[
    (libc::SYS_chmod, 1),
    (libc::SYS_fchmod, 1),
    (libc::SYS_fchmodat, 2),
    (libc::SYS_fchmodat2, 2),
    (libc::SYS_open, 2),
    (libc::SYS_openat, 3),
    (libc::SYS_creat, 1),
    (libc::SYS_mknod, 1),
    (libc::SYS_mknodat, 2),
];
/// (aarch64 has neither `chmod`, `open`, `creat` nor `mknod`.)
#[cfg(target_arch = "aarch64")]
const MODE_CALLS: &[(c_long, u32)] =
    &[(libc::SYS_fchmod, 1), (libc::SYS_fchmodat, 2), (452, 2), (libc::SYS_openat, 3), (libc::SYS_mknodat, 2)];

/// The calls that act on another process by its pid (argument 0) with no
/// check but that it runs as the same user: its resource limits
/// (`prlimit64`), its scheduling class, priority and CPUs. No Landlock
/// scope covers them, so a tool run as root could cap rlp's open files or
/// file size, set a CPU limit that kills a process outside its sandbox,
/// or starve one. The tool may act on itself (pid 0) only; a call naming
/// any pid, its own threads' included, fails with EPERM.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const PID_CALLS: &[c_long] = &[
    libc::SYS_prlimit64,
    libc::SYS_sched_setaffinity,
    libc::SYS_sched_setscheduler,
    libc::SYS_sched_setparam,
    libc::SYS_sched_setattr,
];

/// `setpriority` and `ioprio_set` take whom they act on as a kind and an
/// id (arguments 0 and 1); both may set the priority of every process of
/// a user. The tool may name itself or its own process group (id 0)
/// only: `PRIO_PROCESS`/`PRIO_PGRP` and `IOPRIO_WHO_PROCESS`/`IOPRIO_WHO_PGRP`.
/// (The kinds are 0 and 1 for `setpriority`, 1 and 2 for `ioprio_set`:
/// linux/resource.h, linux/ioprio.h.)
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const WHO_CALLS: &[(c_long, &[u32])] = &[(libc::SYS_setpriority, &[0, 1]), (libc::SYS_ioprio_set, &[1, 2])];

/// The rules of [`PID_CALLS`] and [`WHO_CALLS`]: the caller's own only.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn own_process_only() -> impl Iterator<Item = Rule> {
    let eperm = || Decision::always(errno(libc::EPERM));
    let by_pid = PID_CALLS.iter().map(move |&nr| Rule::allow_unless(nr, Test::is_not(0, WHOLE, &[0], eperm())));
    let by_who = WHO_CALLS.iter().map(move |&(nr, kinds)| Rule {
        nr,
        decision: Decision::allow_unless(vec![
            Test::is_not(0, WHOLE, kinds, eperm()),
            Test::is_not(1, WHOLE, &[0], eperm()),
        ]),
    });
    by_pid.chain(by_who)
}

/// The rules for `net`: the [`DENIED`] table, process creation, terminals,
/// file modes, other processes' limits and scheduling, and sockets.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn rules(net: NetFilter) -> Vec<Rule> {
    // Terminal injection: pushing input into the controlling terminal.
    const INJECTION: &[u32] = &[libc::TIOCSTI as u32, libc::TIOCLINUX as u32];
    let eacces = errno(libc::EACCES);
    let mut rules = vec![
        socket(net),
        // A pair reaches only itself, unless it is a datagram one.
        Rule { nr: libc::SYS_socketpair, decision: Decision { tests: vec![unix_socket()], otherwise: eacces } },
        Rule::allow_unless(libc::SYS_ioctl, Test::is(1, WHOLE, INJECTION, Decision::always(errno(libc::EPERM)))),
        clone(),
        // Its flags are in memory, out of the filter's reach; on ENOSYS glibc
        // falls back to `clone`.
        Rule::always(libc::SYS_clone3, errno(libc::ENOSYS)),
        // Its mode is in memory too; glibc's `open` never uses it.
        Rule::always(libc::SYS_openat2, errno(libc::ENOSYS)),
    ];
    rules.extend(MODE_CALLS.iter().map(|&(nr, arg)| no_set_id(nr, arg)));
    rules.extend(own_process_only());
    rules.extend(DENIED.iter().map(|&nr| Rule::always(nr, errno(libc::EPERM))));
    if let NetFilter::Denied = net {
        // Only Unix sockets remain to connect, and those are refused (see
        // `net::sockaddr::classify`): no supervisor is needed to say so.
        rules.push(Rule::always(libc::SYS_connect, eacces));
    }
    if let NetFilter::Supervised = net {
        rules.push(Rule::always(libc::SYS_connect, SECCOMP_RET_USER_NOTIF));
        rules.push(Rule::no_fast_open(libc::SYS_sendto, 3));
        rules.push(Rule::no_fast_open(libc::SYS_sendmsg, 2));
        rules.push(Rule::no_fast_open(libc::SYS_sendmmsg, 3));
    }
    rules
}

/// The numbers of the calls the rules for `net` name.
#[cfg(test)]
pub(super) fn named_calls(net: NetFilter) -> Vec<c_long> {
    rules(net).iter().map(|rule| rule.nr).collect()
}

/// No rules where rlp has no syscall table.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn rules(_net: NetFilter) -> Vec<Rule> {
    Vec::new()
}

/// A statement: `code` with operand `k`.
fn stmt(code: u32, k: u32) -> sock_filter {
    sock_filter { code: code as u16, jt: 0, jf: 0, k }
}

/// A conditional jump: `jt` or `jf` instructions forward.
fn jump(code: u32, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code: (BPF_JMP | code | BPF_K) as u16, jt, jf, k }
}

/// The instructions of `decision`, after its call's number matched; they
/// always return.
fn block(decision: &Decision) -> Option<Vec<sock_filter>> {
    let mut out = Vec::new();
    for test in &decision.tests {
        let then = block(&test.then)?;
        out.push(stmt(BPF_LD | BPF_W | BPF_ABS, arg_offset(test.arg)));
        if test.mask != WHOLE {
            out.push(stmt(BPF_ALU | BPF_AND | BPF_K, test.mask));
        }
        // A match skips the remaining comparisons, then the `ja` over the
        // test's block (In) or that block itself (NotIn).
        let skip = match test.when {
            When::In => 1,
            When::NotIn => then.len(),
        };
        let count = test.values.len();
        for (index, &value) in test.values.iter().enumerate() {
            out.push(jump(BPF_JEQ, value, u8::try_from(count - index - 1 + skip).ok()?, 0));
        }
        if let When::In = test.when {
            out.push(stmt(BPF_JMP | BPF_JA, u32::try_from(then.len()).ok()?));
        }
        out.extend(then);
    }
    out.push(stmt(BPF_RET | BPF_K, decision.otherwise));
    Some(out)
}

/// Rules in a list as short as this are compared one by one.
const LINEAR_RULES: usize = 3;

/// The instructions that find the number (in the accumulator) among
/// `rules`, sorted by number, and run its block; a number none of them has
/// is allowed. A binary search: every branch ends in a return.
fn search(rules: &[Rule], out: &mut Vec<sock_filter>) -> Option<()> {
    if rules.len() <= LINEAR_RULES {
        for rule in rules {
            let block = block(&rule.decision)?;
            out.push(jump(BPF_JEQ, u32::try_from(rule.nr).ok()?, 0, u8::try_from(block.len()).ok()?));
            out.extend(block);
        }
        out.push(stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
        return Some(());
    }
    let (below, above) = rules.split_at(rules.len() / 2);
    // Numbers from the pivot up take the `ja` to the upper half; the rest
    // skip it into the lower half.
    out.push(jump(BPF_JGE, u32::try_from(above[0].nr).ok()?, 0, 1));
    let ja = out.len();
    out.push(stmt(BPF_JMP | BPF_JA, 0));
    search(below, out)?;
    out[ja].k = u32::try_from(out.len() - ja - 1).ok()?;
    search(above, out)
}

/// The whole program for `net`; `None` without a syscall table or if it
/// does not fit classic BPF's jump ranges.
pub(super) fn assemble(net: NetFilter) -> Option<Vec<sock_filter>> {
    let (arch, x32) = ARCH?;
    let mut out = vec![
        stmt(BPF_LD | BPF_W | BPF_ABS, ARCH_OFFSET),
        jump(BPF_JEQ, arch, 1, 0),
        stmt(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        stmt(BPF_LD | BPF_W | BPF_ABS, NR_OFFSET),
    ];
    if x32 {
        out.push(jump(BPF_JSET, X32_SYSCALL_BIT, 0, 1));
        out.push(stmt(BPF_RET | BPF_K, errno(libc::EACCES)));
    }
    let mut rules = rules(net);
    rules.sort_by_key(|rule| rule.nr);
    search(&rules, &mut out)?;
    Some(out)
}
