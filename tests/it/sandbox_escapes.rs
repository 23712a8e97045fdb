//! Escapes from the exec tool sandbox, each tried as a hostile tool running
//! as root would (docs/sandbox.md, "The tool's world"): every attempt must
//! be refused, the data outside its grants untouched, and nothing it
//! started left running after the call.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::sandbox::{call_frame, python_tool, tool};
use crate::support::TestDir;
use crate::support::output::{stderr, stdout_json};
use crate::support::rlp_snapshot;

/// A secret file outside every grant, mode 0600.
fn secret(td: &TestDir, name: &str) -> std::path::PathBuf {
    let dir = td.join("secrets");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, "the secret").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

#[test]
fn a_link_planted_inside_a_grant_never_widens_it() {
    let td = TestDir::new();
    let data = td.join("work/data");
    std::fs::create_dir_all(&data).unwrap();
    let target = secret(&td, "key").parent().unwrap().to_path_buf();
    let sub = data.join("sub");
    // The tool declares its grant and a folder below it (covered, so
    // allowed); one call plants `sub` as a link, the next is granted `sub`.
    let command = python_tool(
        &td,
        "planter",
        "sub, target = args\n\
         if not os.path.lexists(sub):\n    os.symlink(target, sub)\n    result['planted'] = True\n\
         else:\n    attempt('read', lambda: open(os.path.join(sub, 'key')).read())\n    \
         attempt('write', lambda: open(os.path.join(sub, 'key'), 'w').write('owned'))",
    );
    let caps = [format!("fs:{}", data.display()), format!("fs:{}", sub.display())];
    let policy = format!("[capabilities]\nexec = true\nfs = [\"{}\"]\n", data.display());
    let args = [sub.to_str().unwrap(), target.to_str().unwrap()];
    let bundle = td.bundle("planter", json!([tool("plant", &command, &args, &caps)]), &policy);
    let first = td.call(&bundle, "plant", json!({})).output().unwrap();
    // `sub` did not exist when the first call started: not reachable, so
    // the link is made through the `data` grant.
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert_eq!(stdout_json(&first), json!({"planted": true}));
    let second = td.call(&bundle, "plant", json!({})).output().unwrap();
    assert_eq!(second.status.code(), Some(3), "{}", stderr(&second));
    rlp_snapshot!(&td, &second);
    assert_eq!(std::fs::read_to_string(target.join("key")).unwrap(), "the secret");
}

#[test]
fn an_interpreter_whose_lib_links_out_of_its_installation_gets_no_lib() {
    let td = TestDir::new();
    let key = secret(&td, "shadow");
    // What a sibling tool with any write grant could plant: an
    // installation whose `bin/python3` is the system's Python and whose
    // `lib` is the whole machine.
    let prefix = td.join("planted");
    std::fs::create_dir_all(prefix.join("bin")).unwrap();
    std::os::unix::fs::symlink("/usr/bin/python3", prefix.join("bin/python3")).unwrap();
    std::os::unix::fs::symlink("/", prefix.join("lib")).unwrap();
    let script = td.join("victim.py");
    std::fs::write(
        &script,
        format!(
            "#!{}\nimport json\ntry:\n    open({:?}).read()\n    print(json.dumps({{'read': 'ok'}}))\nexcept OSError as e:\n    print(json.dumps({{'read': e.__class__.__name__}}))\n",
            prefix.join("bin/python3").display(),
            prefix.join("lib").join(key.strip_prefix("/").unwrap()).display(),
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bundle =
        td.bundle("victim", json!([tool("run", script.to_str().unwrap(), &[], &[])]), "[capabilities]\nexec = true\n");
    let output = td.call(&bundle, "run", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout_json(&output), json!({"read": "FileNotFoundError"}));
    let read = call_frame(&td)["sandbox"]["read"].to_string();
    assert!(!read.contains("planted/lib") && !read.contains("\"/\""), "{read}");
}

/// Changes the metadata of each path in `args` every way a tool could:
/// mode, owner, times, an extended attribute; then tries to make the last
/// one set-user-id.
const METADATA_PROBE: &str = "\
for path in args:
    name = os.path.basename(path)
    attempt(name + ':chmod', lambda: os.chmod(path, 0o777))
    attempt(name + ':chown', lambda: os.chown(path, 4242, 4242))
    attempt(name + ':utime', lambda: os.utime(path, (0, 0)))
    attempt(name + ':xattr', lambda: os.setxattr(path, 'user.rlp', b'x'))
attempt('setuid', lambda: os.chmod(args[-1], 0o4755))
def create_setuid():
    os.close(os.open(args[-1] + '.new', os.O_CREAT | os.O_WRONLY, 0o4755))
attempt('create_setuid', create_setuid)
attempt('mknod_setuid', lambda: os.mknod(args[-1] + '.node', 0o104755))
attempt('mknod_setgid', lambda: os.mknod(args[-1] + '.node', 0o102755))
attempt('write_setuid', lambda: open(os.path.join(os.path.dirname(args[-1]), 'setuid_prog'), 'a').write('x'))";

#[test]
fn a_tool_changes_no_metadata_outside_its_grants_and_sets_no_set_user_id_bit_inside() {
    let td = TestDir::new();
    let outside = secret(&td, "outside");
    let granted = td.join("granted");
    std::fs::create_dir_all(&granted).unwrap();
    let own = granted.join("own");
    std::fs::write(&own, "mine").unwrap();
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o644)).unwrap();
    // A set-user-id program already in the grant: writing to it clears the bit.
    let setuid_prog = granted.join("setuid_prog");
    std::fs::write(&setuid_prog, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&setuid_prog, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let command = python_tool(&td, "meta", METADATA_PROBE);
    let readable = std::path::Path::new(&command).to_path_buf();
    let args = [outside.to_str().unwrap(), readable.to_str().unwrap(), "/usr/bin/python3", own.to_str().unwrap()];
    let caps = format!("[capabilities]\nexec = true\nfs = [\"{}\"]\n", granted.display());
    let grant = format!("fs:{}", granted.display());
    let bundle = td.bundle("meta", json!([tool("probe", &command, &args, &[grant])]), &caps);
    let before = |path: &std::path::Path| {
        let meta = std::fs::metadata(path).unwrap();
        use std::os::unix::fs::MetadataExt;
        (meta.mode(), meta.uid(), meta.mtime())
    };
    let (outside_before, python_before, program_before) =
        (before(&outside), before(std::path::Path::new("/usr/bin/python3")), before(&readable));
    let output = td.call(&bundle, "probe", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout_json(&output),
        json!({
            // Not in the tool's world at all.
            "outside:chmod": "ENOENT", "outside:chown": "ENOENT", "outside:utime": "ENOENT", "outside:xattr": "ENOENT",
            // Shown read-only.
            "meta.py:chmod": "EROFS", "meta.py:chown": "EROFS", "meta.py:utime": "EROFS", "meta.py:xattr": "EROFS",
            "python3:chmod": "EROFS", "python3:chown": "EROFS", "python3:utime": "EROFS", "python3:xattr": "EROFS",
            // Its own file: anything but a set-user-id bit.
            "own:chmod": "ok", "own:chown": "ok", "own:utime": "ok", "own:xattr": "ok",
            "setuid": "EPERM", "create_setuid": "EPERM", "mknod_setuid": "EPERM", "mknod_setgid": "EPERM", "write_setuid": "ok",
        })
    );
    assert_eq!(before(&outside), outside_before);
    assert_eq!(before(std::path::Path::new("/usr/bin/python3")), python_before);
    assert_eq!(before(&readable), program_before);
    assert!(!granted.join("own.new").exists());
    assert!(!granted.join("own.node").exists());
    let mode = std::fs::metadata(&setuid_prog).unwrap().permissions().mode();
    assert_eq!(mode & 0o7777, 0o755, "the tool's write left the set-user-id bit (CAP_FSETID)");
}

#[test]
fn a_datagram_never_reaches_a_unix_socket_outside_the_tool() {
    let td = TestDir::new();
    let socket_path = td.join("daemon.sock");
    let daemon = std::os::unix::net::UnixDatagram::bind(&socket_path).unwrap();
    daemon.set_nonblocking(true).unwrap();
    let command = python_tool(
        &td,
        "dgram",
        "def send():\n    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n    s.sendto(b'hostile', args[0])\n\
         attempt('sendto', send)\n\
         def pair(kind):\n    a, b = socket.socketpair(socket.AF_UNIX, kind)\n    a.send(b'x'); assert b.recv(1) == b'x'\n\
         attempt('dgram_pair', lambda: pair(socket.SOCK_DGRAM))\n\
         attempt('stream_pair', lambda: pair(socket.SOCK_STREAM))",
    );
    let port = "127.0.0.1:9";
    for caps in [vec![], vec![format!("net:{port}")]] {
        let policy = match caps.is_empty() {
            true => "[capabilities]\nexec = true\n".to_string(),
            false => format!("[capabilities]\nexec = true\nnet = [\"{port}\"]\n"),
        };
        let args = [socket_path.to_str().unwrap()];
        let bundle = td.bundle("dgram", json!([tool("send", &command, &args, &caps)]), &policy);
        let output = td.call(&bundle, "send", json!({})).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert_eq!(
            stdout_json(&output),
            json!({"sendto": "EACCES", "dgram_pair": "EACCES", "stream_pair": "ok"}),
            "{caps:?}"
        );
        assert!(daemon.recv(&mut [0u8; 16]).is_err(), "a datagram arrived ({caps:?})");
    }
}

#[test]
fn a_tool_makes_no_namespace_through_clone_and_clone3_is_unknown() {
    let td = TestDir::new();
    let command = python_tool(
        &td,
        "clone",
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n\
         CLONE_NEWUSER, CLONE_NEWNET, SIGCHLD = 0x10000000, 0x40000000, 17\n\
         nr_clone, nr_clone3 = (56, 435) if os.uname().machine == 'x86_64' else (220, 435)\n\
         pid = libc.syscall(nr_clone, CLONE_NEWUSER | CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0)\n\
         if pid == 0:\n    os._exit(0)\n\
         result['clone'] = 'ok' if pid > 0 else errno.errorcode[ctypes.get_errno()]\n\
         if pid > 0: os.waitpid(pid, 0)\n\
         args3 = (ctypes.c_uint64 * 11)(); args3[0] = CLONE_NEWUSER; args3[4] = SIGCHLD\n\
         pid = libc.syscall(nr_clone3, ctypes.byref(args3), 88)\n\
         if pid == 0:\n    os._exit(0)\n\
         result['clone3'] = 'ok' if pid > 0 else errno.errorcode[ctypes.get_errno()]\n\
         if pid > 0: os.waitpid(pid, 0)\n\
         import subprocess\nresult['fork'] = subprocess.run(['/bin/true']).returncode",
    );
    let bundle = td.bundle("clone", json!([tool("probe", &command, &[], &[])]), "[capabilities]\nexec = true\n");
    let output = td.call(&bundle, "probe", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout_json(&output), json!({"clone": "EPERM", "clone3": "ENOSYS", "fork": 0}));
}

/// The pids of the processes whose command line holds `token`.
fn processes_with(token: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(token))
        })
        .collect()
}

/// A bundle whose tool starts a chain that re-forks every millisecond, each
/// sleeper in a session of its own carrying `token`, then exits at once.
fn detaching_bundle(td: &TestDir, token: &str) -> std::path::PathBuf {
    let script = td.script(
        "detach.sh",
        &format!(
            "setsid sh -c 'while :; do setsid sleep 1000 {token} & sleep 0.001; done' {token} >/dev/null 2>&1 &\n\
             sleep 0.3\necho '{{}}'"
        ),
    );
    td.bundle("detach", json!([tool("go", script.to_str().unwrap(), &[], &[])]), "[capabilities]\nexec = true\n")
}

/// Asserts that no process carrying `token` is left (giving a survivor a
/// moment to show itself), killing any that is.
fn assert_none_left(token: &str) {
    let deadline = Instant::now() + Duration::from_millis(500);
    let mut left = processes_with(token);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left = processes_with(token);
    }
    for pid in &left {
        // SAFETY: kill on a pid found above; cleans up after a failure.
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    assert!(left.is_empty(), "{} processes outlived the call", left.len());
}

#[test]
fn nothing_a_tool_starts_outlives_its_call_however_it_detaches() {
    let td = TestDir::new();
    let token = format!("rlp-escape-{}", std::process::id());
    let bundle = detaching_bundle(&td, &token);
    let output = td.call(&bundle, "go", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_none_left(&token);
    assert_eq!(call_frame(&td)["sandbox"]["processes"], "cgroup");
}

#[test]
fn for_a_user_without_cgroups_a_pid_namespace_ends_what_the_tool_started() {
    let td = TestDir::new();
    let token = format!("rlp-escape-nobody-{}", std::process::id());
    let bundle = detaching_bundle(&td, &token);
    std::fs::set_permissions(td.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    // The home belongs to the user that runs rlp: rlp uses no home others can write.
    std::fs::create_dir_all(td.home()).unwrap();
    std::os::unix::fs::chown(td.home(), Some(65534), Some(65534)).unwrap();
    let output = td
        .wrapped(&["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(["tools", "call"])
        .arg(&bundle)
        .args(["go", "--args", "{}"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_none_left(&token);
    let sandbox = &call_frame(&td)["sandbox"];
    assert_eq!(sandbox["processes"], "pid-namespace");
    assert_eq!(sandbox["namespaces"], json!(["mount", "pid", "ipc", "user"]));
    assert_eq!(sandbox["identity"], "uid 65534, no capabilities");
}

#[test]
fn a_tool_cannot_reach_another_processs_shared_memory() {
    let td = TestDir::new();
    let key: libc::key_t = 0x524c_5000 + (std::process::id() as libc::key_t & 0xfff);
    // SAFETY: a private System V segment of this test process, removed below.
    let id = unsafe { libc::shmget(key, 4096, libc::IPC_CREAT | 0o666) };
    assert!(id >= 0, "shmget: {}", std::io::Error::last_os_error());
    // SAFETY: attaches the segment just made; writes inside its 4096 bytes.
    let memory = unsafe { libc::shmat(id, std::ptr::null(), 0) };
    // SAFETY: `memory` is the segment attached above, 4096 bytes long.
    unsafe { std::ptr::copy_nonoverlapping(b"secret".as_ptr(), memory.cast::<u8>(), 6) };
    let command = python_tool(
        &td,
        "shm",
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.shmat.restype = ctypes.c_void_p\n\
         shmid = libc.shmget(int(args[0]), 4096, 0)\n\
         if shmid < 0:\n    result['shmget'] = errno.errorcode[ctypes.get_errno()]\n\
         else:\n    addr = libc.shmat(shmid, None, 0)\n    ctypes.memmove(addr, b'OWNED!', 6)\n    result['shmget'] = 'ok'\n\
         result['msgget'] = errno.errorcode.get(ctypes.get_errno(), 'ok') if libc.msgget(int(args[0]), 0o1666) < 0 else 'ok'",
    );
    let bundle =
        td.bundle("shm", json!([tool("probe", &command, &[&key.to_string()], &[])]), "[capabilities]\nexec = true\n");
    let output = td.call(&bundle, "probe", json!({})).output().unwrap();
    let mut seen = [0u8; 6];
    // SAFETY: reads the 6 bytes written above, then lets the segment go.
    unsafe {
        std::ptr::copy_nonoverlapping(memory.cast::<u8>(), seen.as_mut_ptr(), 6);
        libc::shmdt(memory);
        libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
    }
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(&seen, b"secret");
    assert_eq!(stdout_json(&output), json!({"shmget": "EPERM", "msgget": "EPERM"}));
}

#[test]
fn a_tool_sees_only_its_own_processes_in_proc() {
    let td = TestDir::new();
    let command = python_tool(
        &td,
        "processes",
        "import subprocess\nchild = subprocess.Popen(['sleep', '30'])\n\
         pids = {int(p) for p in os.listdir('/proc') if p.isdigit()}\n\
         mine = {os.getpid(), child.pid}\n\
         result['mine'] = sorted(p in pids for p in mine)\n\
         result['rlp'] = os.getppid() in pids\n\
         result['init'] = os.getpid() != 1 and 1 in pids\n\
         result['test'] = int(args[0]) in pids\n\
         result['others'] = len(pids - mine)\n\
         attempt('cmdline of rlp', lambda: open(f'/proc/{os.getppid()}/cmdline').read())\n\
         import re\nshown = re.findall(r'gid=(\\d+)', ''.join(l for l in open('/proc/self/mountinfo') if ' /proc ' in l))\n\
         attempt('join', lambda: (os.setgroups([0] + [int(g) for g in shown]), os.setgid(int(shown[0]) if shown else 0)))\n\
         result['others, in the mount group'] = len({int(p) for p in os.listdir('/proc') if p.isdigit()} - mine)\n\
         child.kill()\nchild.wait()",
    );
    let test_pid = std::process::id().to_string();
    let bundle =
        td.bundle("processes", json!([tool("probe", &command, &[&test_pid], &[])]), "[capabilities]\nexec = true\n");
    let output = td.call(&bundle, "probe", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout_json(&output),
        json!({"mine": [true, true], "rlp": false, "init": false, "test": false, "others": 0, "cmdline of rlp": "ENOENT",
               "join": "ok", "others, in the mount group": 0})
    );
}

/// Whether signal `signal` waits, blocked, in the pending sets of `pid`.
fn pending(pid: u32, signal: libc::c_int) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let bit = 1u64 << (signal - 1);
    status
        .lines()
        .filter_map(|line| line.strip_prefix("SigPnd:").or_else(|| line.strip_prefix("ShdPnd:")))
        .any(|mask| u64::from_str_radix(mask.trim(), 16).unwrap() & bit != 0)
}

/// The nice value of process `pid`, as /proc shows it.
fn nice(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command's closing parenthesis; nice is field 19.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.split(' ').nth(16).unwrap().to_string()
}

#[test]
fn a_root_tool_signals_mounts_and_tunes_nothing_outside_its_call() {
    use std::io::BufRead;
    let td = TestDir::new();
    // A process of the same user outside the call, holding SIGWINCH blocked:
    // a signal sent to it stays pending, where /proc shows it.
    let mut victim = std::process::Command::new("python3")
        .args(["-c", "import signal, time\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGWINCH])\nprint('ready', flush=True)\ntime.sleep(60)"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    std::io::BufReader::new(victim.stdout.take().unwrap()).read_line(&mut ready).unwrap();
    assert_eq!(ready, "ready\n");
    let core_pattern = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap();
    let command = python_tool(
        &td,
        "administer",
        "import ctypes, signal\nlibc = ctypes.CDLL(None, use_errno=True)\n\
         def call(nr, *a):\n    if libc.syscall(nr, *a) < 0:\n        raise OSError(ctypes.get_errno(), 'syscall')\n\
         attempt('signal the victim', lambda: os.kill(int(args[0]), signal.SIGWINCH))\n\
         attempt('signal the test', lambda: os.kill(int(args[1]), signal.SIGWINCH))\n\
         attempt('signal every process', lambda: os.kill(-1, signal.SIGWINCH))\n\
         attempt('core_pattern', lambda: open('/proc/sys/kernel/core_pattern', 'w').write('|/bin/false'))\n\
         attempt('fsopen cgroup2', lambda: call(430, b'cgroup2', 0))\n\
         attempt('fsopen proc', lambda: call(430, b'proc', 0))\n\
         attempt('open_tree clone', lambda: call(428, -100, b'/', 1 | 0o2000000))\n\
         attempt('cgroup folder', lambda: os.stat('/sys/fs/cgroup'))\n\
         import resource\n\
         attempt('limit the victim', lambda: resource.prlimit(int(args[0]), resource.RLIMIT_CPU, (1, 1)))\n\
         attempt('limit the test', lambda: resource.prlimit(int(args[1]), resource.RLIMIT_NOFILE, (0, 0)))\n\
         attempt('renice the victim', lambda: os.setpriority(os.PRIO_PROCESS, int(args[0]), 19))\n\
         attempt('renice every process', lambda: os.setpriority(os.PRIO_USER, os.getuid(), 19))\n\
         attempt('reschedule the victim', lambda: os.sched_setscheduler(int(args[0]), os.SCHED_IDLE, os.sched_param(0)))\n\
         attempt('pin the victim', lambda: os.sched_setaffinity(int(args[0]), {0}))\n\
         attempt('its own limit', lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64)))\n\
         attempt('tls private keys', lambda: os.listdir('/etc/ssl/private'))",
    );
    let bundle = td.bundle(
        "administer",
        json!([tool("probe", &command, &[&victim.id().to_string(), &std::process::id().to_string()], &[])]),
        "[capabilities]\nexec = true\n",
    );
    let limits_before = std::fs::read_to_string(format!("/proc/{}/limits", victim.id())).unwrap();
    let nice_before = nice(victim.id());
    let output = td.call(&bundle, "probe", json!({})).output().unwrap();
    let signalled = pending(victim.id(), libc::SIGWINCH);
    let limits_after = std::fs::read_to_string(format!("/proc/{}/limits", victim.id())).unwrap();
    let nice_after = nice(victim.id());
    let _ = victim.kill();
    let _ = victim.wait();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // With a call cgroup and Landlock's signal scope, the processes outside
    // are there and refuse (kill(-1) answers 0 even when every process
    // refuses, kill(2)); in a PID namespace they cannot be named. Their
    // limits and scheduling are refused before the kernel looks for them.
    let pid_namespace = call_frame(&td)["sandbox"]["namespaces"].as_array().unwrap().contains(&json!("pid"));
    let (outside, every) = if pid_namespace { ("ESRCH", "ESRCH") } else { ("EPERM", "ok") };
    // The host's TLS private keys, where it has any, are not the tool's to read.
    let keys = if std::path::Path::new("/etc/ssl/private").exists() { "EACCES" } else { "ENOENT" };
    assert_eq!(
        stdout_json(&output),
        json!({"signal the victim": outside, "signal the test": outside, "signal every process": every,
               "core_pattern": "EROFS", "fsopen cgroup2": "EPERM", "fsopen proc": "EPERM", "open_tree clone": "EPERM",
               "cgroup folder": "ENOENT", "limit the victim": "EPERM", "limit the test": "EPERM",
               "renice the victim": "EPERM", "renice every process": "EPERM", "reschedule the victim": "EPERM",
               "pin the victim": "EPERM", "its own limit": "ok", "tls private keys": keys})
    );
    assert!(!signalled, "a process outside the call got the tool's signal");
    assert_eq!(limits_after, limits_before, "the tool changed the limits of a process outside its call");
    assert_eq!(nice_after, nice_before, "the tool changed the priority of a process outside its call");
    assert_eq!(std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap(), core_pattern);
}
