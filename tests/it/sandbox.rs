//! The kernel sandbox of exec tools (docs/sandbox.md), with real tools
//! (Python and shell) run by real `rlp tools call` processes: what a tool may
//! read, write and reach, what the call frame records, and the modes.

use std::io::Read;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::bundle::{self, with};
use crate::support::output::{assert_contains, stderr, stdout_json};
use crate::support::rlp_snapshot;

/// A Python tool at `<sandbox>/bin/<name>.py` running `body`, where `args`
/// holds the tool's command-line arguments after the blob and `result`
/// is printed as its JSON result.
pub(crate) fn python_tool(td: &TestDir, name: &str, body: &str) -> String {
    let dir = td.join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.py"));
    let text = format!(
        "#!/usr/bin/env python3\nimport errno, json, os, socket, sys\nargs = sys.argv[2:]\nresult = {{}}\n\
         def attempt(key, action):\n    try:\n        action()\n        result[key] = 'ok'\n    except OSError as e:\n        result[key] = errno.errorcode.get(e.errno, str(e.errno))\n\
         {body}\nprint(json.dumps(result))\n"
    );
    std::fs::write(&path, text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

/// An exec tool `id` running `command` with `args`, declaring `caps`.
pub(crate) fn tool(id: &str, command: &str, args: &[&str], caps: &[String]) -> Value {
    with(bundle::tool(id, bundle::exec(command, args)), json!({"capabilities": caps}))
}

/// The payload of the call frame of the last call.
pub(crate) fn call_frame(td: &TestDir) -> Value {
    let events = td.events();
    let call = events.iter().rev().find(|e| e.kind == "tool.call").expect("a call frame");
    call.payload().unwrap()
}

/// A TCP server on 127.0.0.1 counting the connections it accepts.
struct Listener {
    port: u16,
    accepted: Arc<AtomicUsize>,
}

impl Listener {
    fn start() -> Listener {
        let socket = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = socket.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        std::thread::spawn(move || {
            for mut stream in socket.incoming().flatten() {
                count.fetch_add(1, Ordering::SeqCst);
                let _ = stream.read(&mut [0u8; 16]);
            }
        });
        Listener { port, accepted }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

const FILE_PROBE: &str = "\
granted, other, outside = args
def write_granted():
    with open(os.path.join(granted, 'out.txt'), 'w') as f: f.write('hi')
attempt('write_granted', write_granted)
attempt('read_other', lambda: open(os.path.join(other, 'secret.txt')).read())
attempt('list_other', lambda: os.listdir(other))
attempt('write_outside', lambda: open(os.path.join(outside, 'escaped.txt'), 'w').close())
attempt('read_ssh', lambda: os.listdir('/root/.ssh') if os.path.isdir('/root/.ssh') else open('/etc/shadow').read())
attempt('read_shadow', lambda: open('/etc/shadow').read())";

#[test]
fn a_tool_writes_inside_its_grant_and_reaches_nothing_else() {
    let td = TestDir::new();
    let granted = td.join("granted");
    let outside = td.join("outside");
    std::fs::create_dir_all(&granted).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("secret.txt"), "secret").unwrap();
    let command = python_tool(&td, "files", FILE_PROBE);
    let args = [granted.to_str().unwrap(), other.path().to_str().unwrap(), outside.to_str().unwrap()];
    let grant = format!("fs:{}", granted.display());
    let caps = format!("[capabilities]\nexec = true\nfs = [\"{}\"]\n", granted.display());
    let bundle = td.bundle("files", json!([tool("probe", &command, &args, &[grant])]), &caps);
    let output = td.call(&bundle, "probe", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout_json(&output),
        json!({
            "write_granted": "ok",
            // Not in the tool's world at all.
            "read_other": "ENOENT",
            "list_other": "ENOENT",
            "write_outside": "ENOENT",
            // /etc is shown read-only; Landlock lets it read only what a
            // program needs.
            "read_ssh": "EACCES",
            "read_shadow": "EACCES",
        })
    );
    assert_eq!(std::fs::read_to_string(granted.join("out.txt")).unwrap(), "hi");
    assert!(!outside.join("escaped.txt").exists());
}

#[test]
fn with_no_grant_python_and_shell_tools_run_and_use_their_private_folder() {
    let td = TestDir::new();
    let python = python_tool(
        &td,
        "private",
        "tmp = os.environ['TMPDIR']\n\
         def scratch():\n    p = os.path.join(tmp, 'scratch')\n    open(p, 'w').write('x')\n    assert open(p).read() == 'x'\n    os.mkdir(os.path.join(tmp, 'sub'))\n\
         attempt('scratch', scratch)\nresult['cwd_is_tmp'] = os.getcwd() == tmp\n\
         import ssl, locale, tempfile\nresult['tempfile'] = os.path.dirname(tempfile.mkstemp()[1]) == tmp",
    );
    let shell = td.script(
        "private.sh",
        "cd \"$TMPDIR\" && echo x > scratch && mkdir sub && ls -d sub >/dev/null && date >/dev/null \
         && printf '{\"shell\":\"%s\"}\\n' \"$(cat scratch)\"",
    );
    let tools = json!([tool("py", &python, &[], &[]), tool("sh", shell.to_str().unwrap(), &[], &[])]);
    let bundle = td.bundle("private", tools, "[capabilities]\nexec = true\n");
    let output = td.call(&bundle, "py", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout_json(&output), json!({"scratch": "ok", "cwd_is_tmp": true, "tempfile": true}));
    let output = td.call(&bundle, "sh", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout_json(&output), json!({"shell": "x"}));
}

/// A probe connecting to each port in its arguments, by address and by name.
const CONNECT_PROBE: &str = "\
for port in args:
    attempt('127.0.0.1:' + port, lambda: socket.create_connection(('127.0.0.1', int(port)), timeout=5).close())
attempt('udp', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close())";

#[test]
fn a_tool_without_net_cannot_connect_even_to_loopback() {
    let td = TestDir::new();
    let server = Listener::start();
    let command = python_tool(&td, "connect", CONNECT_PROBE);
    let port = server.port.to_string();
    let bundle = td.bundle("offline", json!([tool("probe", &command, &[&port], &[])]), "[capabilities]\nexec = true\n");
    let output = td.call(&bundle, "probe", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout_json(&output), json!({format!("127.0.0.1:{port}"): "EACCES", "udp": "EACCES"}));
    assert_eq!(server.accepted(), 0);
    let frame = call_frame(&td);
    assert_eq!(frame["sandbox"]["net"], "none");
}

#[test]
fn a_tool_granted_one_port_reaches_it_and_not_another() {
    let td = TestDir::new();
    let (granted, other) = (Listener::start(), Listener::start());
    let command = python_tool(&td, "connect", CONNECT_PROBE);
    let (p, q) = (granted.port.to_string(), other.port.to_string());
    let grant = format!("net:127.0.0.1:{p}");
    let caps = format!("[capabilities]\nexec = true\nnet = [\"127.0.0.1:{p}\"]\n");
    let bundle = td.bundle("online", json!([tool("probe", &command, &[&p, &q], &[grant])]), &caps);
    let output = td.call(&bundle, "probe", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout_json(&output),
        json!({format!("127.0.0.1:{p}"): "ok", format!("127.0.0.1:{q}"): "EACCES", "udp": "EACCES"})
    );
    // The connection that went through reached the server; the other never left.
    assert_eq!((granted.accepted(), other.accepted()), (1, 0));
    let frame = call_frame(&td);
    assert_eq!(frame["sandbox"]["net"], "allowlist");
    assert_eq!(frame["sandbox"]["net_allow"], json!([format!("127.0.0.1:{p}")]));
}

#[test]
fn a_host_name_grant_reaches_what_the_name_resolves_to() {
    let td = TestDir::new();
    let server = Listener::start();
    let port = server.port.to_string();
    let command = python_tool(
        &td,
        "by_name",
        "attempt('localhost', lambda: socket.create_connection(('localhost', int(args[0])), timeout=5).close())",
    );
    let caps = "[capabilities]\nexec = true\nnet = [\"localhost\"]\n";
    let bundle = td.bundle("named", json!([tool("probe", &command, &[&port], &["net:localhost".to_string()])]), caps);
    let output = td.call(&bundle, "probe", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout_json(&output), json!({"localhost": "ok"}));
    assert_eq!(server.accepted(), 1);
}

#[test]
fn a_refused_connect_is_named_in_the_error() {
    let td = TestDir::new();
    let (granted, other) = (Listener::start(), Listener::start());
    let script = td.script(
        "fetch.sh",
        &format!("exec python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {}))'", other.port),
    );
    let grant = format!("net:127.0.0.1:{}", granted.port);
    let caps = format!("[capabilities]\nexec = true\nnet = [\"127.0.0.1:{}\"]\n", granted.port);
    let bundle = td.bundle("fetcher", json!([tool("fetch", script.to_str().unwrap(), &[], &[grant])]), &caps);
    let output = td.call(&bundle, "fetch", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_contains(&stderr(&output), "PermissionError: [Errno 13] Permission denied");
    assert_contains(&stderr(&output), "; the tool ran sandboxed (Landlock ABI ");
    assert_contains(
        &stderr(&output),
        &format!("; it tried to connect to 127.0.0.1:{}, which no net grant covers", other.port),
    );
    assert_eq!(other.accepted(), 0);
}

/// A probe of the tool's own process status.
const STATUS_PROBE: &str = "\
for line in open('/proc/self/status'):
    key, _, value = line.partition(':')
    if key in ('NoNewPrivs', 'Seccomp', 'CapEff', 'CapPrm', 'CapAmb'):
        result[key] = value.strip()
result['sid_is_pid'] = os.getsid(0) == os.getpid()
import resource
result['core'] = resource.getrlimit(resource.RLIMIT_CORE)[1]
attempt('tty', lambda: open('/dev/tty').close())";

#[test]
fn the_tool_runs_without_new_privileges_in_a_session_of_its_own() {
    let td = TestDir::new();
    let command = python_tool(&td, "status", STATUS_PROBE);
    let bundle = td.bundle("status", json!([tool("probe", &command, &[], &[])]), "[capabilities]\nexec = true\n");
    let output = td.call(&bundle, "probe", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let status = stdout_json(&output);
    assert_eq!(status["NoNewPrivs"], "1");
    assert_eq!(status["Seccomp"], "2");
    assert_eq!(status["sid_is_pid"], true);
    assert_eq!(status["core"], 0);
    // No controlling terminal to open (and /dev/tty is not in its world).
    assert_eq!(status["tty"], "ENOENT");
    // Root keeps only the file-ownership capabilities (0 to 7), but for
    // CAP_FSETID (4).
    for set in ["CapEff", "CapPrm", "CapAmb"] {
        assert_eq!(status[set], "00000000000000ef", "{set}");
    }
}

#[test]
fn the_call_frame_records_the_sandbox_that_applied() {
    let td = TestDir::new();
    let granted = td.join("granted");
    std::fs::create_dir_all(&granted).unwrap();
    let script = td.script("ok.sh", "echo '{}'");
    let grant = format!("fs:{}", granted.display());
    let caps = format!("[capabilities]\nexec = true\nfs = [\"{}\"]\n", granted.display());
    let bundle = td.bundle("recorded", json!([tool("ok", script.to_str().unwrap(), &[], &[grant])]), &caps);
    let output = td.call(&bundle, "ok", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let root = bundle.canonicalize().unwrap();
    assert_eq!(
        call_frame(&td)["sandbox"],
        json!({
            "mode": "best-effort",
            "confined": true,
            "landlock_abi": landlock_abi(),
            "read": ["system", script.canonicalize().unwrap(), root],
            "write": ["$TMPDIR", granted],
            "net": "none",
            "net_allow": [],
            "seccomp": true,
            "gaps": [],
            "namespaces": ["mount", "ipc"],
            "processes": "cgroup",
            "identity": "uid 0, capabilities chown dac_override dac_read_search fowner kill setgid setuid",
        })
    );
}

/// The kernel is probed once per context, not once per process: a later
/// call takes the verdict the home keeps (here made to say a PID
/// namespace, which the frame then records), a verdict kept for another
/// context, or in a file others may read, is probed afresh and replaced,
/// and a sandboxed call that cannot
/// start (here: its command is no program) removes it.
#[test]
fn the_kernel_verdict_is_kept_for_the_next_process_in_the_same_context() {
    let td = TestDir::new();
    let ok = td.script("ok.sh", "echo '{}'");
    let broken = td.script("broken.sh", "echo '{}'");
    let tools = json!([tool("ok", ok.to_str().unwrap(), &[], &[]), tool("broken", broken.to_str().unwrap(), &[], &[])]);
    let bundle = td.bundle("kept", tools, "[capabilities]\nexec = true\n");
    let call = |id: &str| td.call(&bundle, id, json!({})).output().unwrap();
    let succeeds = |id: &str| {
        let output = call(id);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        call_frame(&td)["sandbox"]["namespaces"].clone()
    };
    let file = td.home().join("cache/sandbox/kernel");
    assert_eq!(succeeds("ok"), json!(["mount", "ipc"]));
    let kept = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = kept.lines().collect();
    assert_eq!(lines.len(), 4, "{kept}");
    assert_eq!(lines[0], "rlp-kernel-verdict v1");
    assert!(lines[1].starts_with("key ") && lines[1].len() == 4 + 64, "{kept}");
    // How the tool gets into its call cgroup is the kernel's to say.
    assert!(["cgroup at-birth", "cgroup join"].contains(&lines[2]), "{kept}");
    assert_eq!(lines[3], "world no-user no-pid");

    // The kept verdict is what the next process goes by.
    std::fs::write(&file, kept.replace("no-pid", "pid")).unwrap();
    assert_eq!(succeeds("ok"), json!(["mount", "pid", "ipc"]));

    // One kept for another context is not: the kernel is probed again.
    let other_key = format!("key {}", "0".repeat(64));
    std::fs::write(&file, kept.replace(lines[1], &other_key).replace("no-pid", "pid")).unwrap();
    assert_eq!(succeeds("ok"), json!(["mount", "ipc"]));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), kept);

    // Nor is one others may read (rlp writes it 0600): it is replaced.
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(&file, kept.replace("no-pid", "pid")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(succeeds("ok"), json!(["mount", "ipc"]));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), kept);
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);

    // A sandboxed call that cannot start lets the next process probe.
    std::fs::write(&broken, "not a program\n").unwrap();
    let output = call("broken");
    assert_eq!(output.status.code(), Some(1));
    assert_contains(&stderr(&output), "Exec format error");
    assert!(!file.exists(), "the verdict was kept after a call that could not start");
    assert_eq!(succeeds("ok"), json!(["mount", "ipc"]));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), kept);
}

/// The Landlock ABI of this kernel, as the frame should record it.
fn landlock_abi() -> u32 {
    // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) only returns a number.
    let abi = unsafe { libc::syscall(444, std::ptr::null::<u8>(), 0usize, 1u32) };
    u32::try_from(abi).unwrap_or(0)
}

#[test]
fn with_the_sandbox_off_the_tool_is_unconfined_and_the_frame_says_so() {
    let td = TestDir::new();
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("secret.txt"), "secret").unwrap();
    let command = python_tool(
        &td,
        "unconfined",
        "attempt('read_other', lambda: open(os.path.join(args[0], 'secret.txt')).read())\n\
         result['NoNewPrivs'] = [l.split()[1] for l in open('/proc/self/status') if l.startswith('NoNewPrivs')][0]",
    );
    let bundle = td.bundle(
        "off",
        json!([tool("probe", &command, &[other.path().to_str().unwrap()], &[])]),
        "[capabilities]\nexec = true\n",
    );
    std::fs::create_dir_all(td.home()).unwrap();
    std::fs::write(td.home().join("config.toml"), "[runtime]\nsandbox = \"off\"\n").unwrap();
    let output = td.call(&bundle, "probe", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout_json(&output), json!({"read_other": "ok", "NoNewPrivs": "0"}));
    assert_eq!(
        call_frame(&td)["sandbox"],
        json!({
            "mode": "off",
            "confined": false,
            "landlock_abi": 0,
            "read": [],
            "write": [],
            "net": "unrestricted",
            "net_allow": [],
            "seccomp": false,
            "gaps": [],
        })
    );
    // The environment variable wins over the file.
    let output = td.call(&bundle, "probe", json!({})).env("RUNLOOP_RUNTIME_SANDBOX", "best-effort").output().unwrap();
    assert_eq!(stdout_json(&output)["read_other"], "ENOENT");
}

#[test]
fn tools_list_shows_the_sandbox_of_each_exec_tool() {
    let td = TestDir::new();
    let granted = td.join("granted");
    let script = td.script("ok.sh", "echo '{}'");
    let tools = json!([
        tool("files", script.to_str().unwrap(), &[], &[format!("fs:{}", granted.display())]),
        tool("net", script.to_str().unwrap(), &[], &["net:127.0.0.1:9".to_string()]),
    ]);
    let caps = format!("[capabilities]\nexec = true\nfs = [\"{}\"]\nnet = [\"127.0.0.1:9\"]\n", granted.display());
    let bundle = td.bundle("listed", tools, &caps);
    let (out, _) = td.expect(0, &["tools", "list", bundle.to_str().unwrap(), "--format", "json"]);
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed["tools"][0]["sandbox"]["write"], json!(["$TMPDIR", granted]));
    assert_eq!(listed["tools"][1]["sandbox"]["net_allow"], json!(["127.0.0.1:9"]));
    // The table's widths follow the test folder's path.
    rlp_snapshot!(td.filters().aligned(), td.expect_output(0, &["tools", "list", bundle.to_str().unwrap()]));
    let off = td.rlp().env("RUNLOOP_RUNTIME_SANDBOX", "off").args(["tools", "list"]).arg(&bundle).output().unwrap();
    rlp_snapshot!(td.filters().aligned(), &off);
}

#[test]
fn a_bad_sandbox_setting_is_a_usage_error() {
    let td = TestDir::new();
    let script = td.script("ok.sh", "echo '{}'");
    let bundle =
        td.bundle("bad", json!([tool("ok", script.to_str().unwrap(), &[], &[])]), "[capabilities]\nexec = true\n");
    let output = td.call(&bundle, "ok", json!({})).env("RUNLOOP_RUNTIME_SANDBOX", "strict").output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    rlp_snapshot!(&td, &output);
}

#[test]
fn max_memory_bytes_bounds_each_process_of_the_tool() {
    let td = TestDir::new();
    let command = python_tool(
        &td,
        "memory",
        "import resource\nresult['limit'] = resource.getrlimit(resource.RLIMIT_AS)[0]\n\
         try:\n    block = bytearray(512 * 1024 * 1024)\n    result['allocated'] = True\nexcept MemoryError:\n    result['allocated'] = False",
    );
    let limited = with(tool("probe", &command, &[], &[]), json!({"max_memory_bytes": 268_435_456}));
    let bundle = td.bundle("memory", json!([limited]), "[capabilities]\nexec = true\n");
    let output = td.call(&bundle, "probe", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout_json(&output), json!({"limit": 268_435_456, "allocated": false}));
    assert_eq!(call_frame(&td)["sandbox"]["max_memory_bytes"], 268_435_456);
}

#[test]
fn max_processes_bounds_the_tools_own_processes_for_root_too() {
    let td = TestDir::new();
    let command = python_tool(
        &td,
        "forks",
        "import signal, time\nchildren = []\nfor _ in range(8):\n    try:\n        pid = os.fork()\n    except OSError as e:\n        result['refused'] = errno.errorcode[e.errno]\n        break\n    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n    children.append(pid)\n\
         result['forked'] = len(children)\nfor pid in children:\n    os.kill(pid, signal.SIGKILL)\n    os.waitpid(pid, 0)",
    );
    let limited = with(tool("forks", &command, &[], &[]), json!({"max_processes": 4}));
    let bundle = td.bundle("limited", json!([limited]), "[capabilities]\nexec = true\n");
    // Required: this kernel can enforce it (a pids cgroup), so the call runs.
    let output = td.call(&bundle, "forks", json!({})).env("RUNLOOP_RUNTIME_SANDBOX", "required").output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // The tool itself and three children: the fourth fork is refused.
    assert_eq!(stdout_json(&output), json!({"forked": 3, "refused": "EAGAIN"}));
    let frame = call_frame(&td);
    assert_eq!((frame["sandbox"]["max_processes"].as_u64(), frame["sandbox"]["gaps"].clone()), (Some(4), json!([])));
    assert_eq!(frame["sandbox"]["mode"], "required");
}

#[test]
fn a_descriptor_rlp_inherited_never_reaches_the_tool() {
    let td = TestDir::new();
    let leak = td.join("leak.txt");
    std::fs::write(&leak, "").unwrap();
    let script =
        td.script("fd.sh", "if echo x >&5; then echo '{\"fd5\":\"open\"}'; else echo '{\"fd5\":\"closed\"}'; fi");
    let bundle =
        td.bundle("fds", json!([tool("fd", script.to_str().unwrap(), &[], &[])]), "[capabilities]\nexec = true\n");
    for mode in ["best-effort", "off"] {
        // rlp is started with descriptor 5 open on a file outside every grant.
        let output = td
            .wrapped(&["sh", "-c", "exec 5>>\"$0\"; exec \"$@\"", leak.to_str().unwrap()])
            .args(["tools", "call"])
            .arg(&bundle)
            .args(["fd", "--args", "{}"])
            .env("RUNLOOP_RUNTIME_SANDBOX", mode)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert_eq!(stdout_json(&output), json!({"fd5": "closed"}), "{mode}");
    }
    assert_eq!(std::fs::read_to_string(&leak).unwrap(), "");
}

#[test]
fn tools_import_asks_a_binary_for_its_schema_under_the_configured_sandbox() {
    let td = TestDir::new();
    let agents = td.join("agents");
    td.expect(0, &["agent", "scaffold", "imported", "--non-interactive", "--root", agents.to_str().unwrap()]);
    let escaped = td.join("escaped");
    let binary = td.script(
        "describe.sh",
        &format!(
            "touch {} 2>/dev/null\n\
             echo '{{\"tools\": [{{\"id\": \"probe.tool\", \"description\": \"probe\", \"input_schema\": {{\"type\": \"object\"}}, \"result_schema\": {{}}}}]}}'",
            escaped.display()
        ),
    );
    let import = |mode: &str| {
        let output = td
            .rlp()
            .args(["tools", "import"])
            .arg(agents.join("imported"))
            .arg("--exec")
            .arg(&binary)
            .env("RUNLOOP_RUNTIME_SANDBOX", mode)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{mode}: {}", stderr(&output));
    };
    import("best-effort");
    assert!(!escaped.exists(), "the sandboxed binary wrote outside its private folder");
    import("off");
    assert!(escaped.exists(), "with the sandbox off the binary is unconfined");
}

#[test]
fn a_sandboxed_tool_cannot_reach_a_local_daemons_socket() {
    let td = TestDir::new();
    let daemon = tempfile::tempdir().unwrap();
    let path = daemon.path().join("daemon.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || for _ in listener.incoming() {});
    let command = python_tool(
        &td,
        "daemon",
        "attempt('daemon', lambda: socket.socket(socket.AF_UNIX).connect(args[0]))\n\
         attempt('pair', lambda: socket.socketpair())",
    );
    let port = Listener::start().port;
    let tools = json!([
        tool("offline", &command, &[path.to_str().unwrap()], &[]),
        tool("online", &command, &[path.to_str().unwrap()], &[format!("net:127.0.0.1:{port}")]),
    ]);
    let caps = format!("[capabilities]\nexec = true\nnet = [\"127.0.0.1:{port}\"]\n");
    let bundle = td.bundle("daemon", tools, &caps);
    for id in ["offline", "online"] {
        let output = td.call(&bundle, id, json!({})).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert_eq!(stdout_json(&output), json!({"daemon": "EACCES", "pair": "ok"}), "{id}");
    }
    let output = td.call(&bundle, "offline", json!({})).env("RUNLOOP_RUNTIME_SANDBOX", "off").output().unwrap();
    assert_eq!(stdout_json(&output), json!({"daemon": "ok", "pair": "ok"}));
}

#[test]
fn a_script_whose_interpreter_is_a_chain_of_links_from_a_granted_folder_runs() {
    // As a virtual environment in a granted folder: env/bin/python3 links to
    // an installation elsewhere, whose python3 links on to its real program.
    let td = TestDir::new();
    let (env, home) = (td.join("env/bin"), td.join("pyhome/bin"));
    std::fs::create_dir_all(&env).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::os::unix::fs::symlink("/usr/bin/python3", home.join("python3.real")).unwrap();
    std::os::unix::fs::symlink("python3.real", home.join("python3")).unwrap();
    std::os::unix::fs::symlink(home.join("python3"), env.join("python3")).unwrap();
    let script = env.join("tool");
    std::fs::write(&script, format!("#!{}\nprint('{{\"ran\": true}}')\n", env.join("python3").display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let granted = td.join("env").display().to_string();
    let tools = json!([tool("venv", script.to_str().unwrap(), &[], &[format!("fs:{granted}")])]);
    let bundle = td.bundle("venv", tools, &format!("[capabilities]\nexec = true\nfs = [\"{granted}\"]\n"));
    let output = td.call(&bundle, "venv", json!({})).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout_json(&output), json!({"ran": true}));
}

/// `TMPDIR` decides where the calls' private folders are made, never how
/// strong the sandbox is: unset or empty is `/tmp`, and one that cannot hold
/// them (relative, missing, `/`) is replaced by `/tmp` with a warning naming it.
#[test]
fn a_tmpdir_that_cannot_hold_private_folders_is_replaced_by_tmp_and_named() {
    let td = TestDir::new();
    let script = td.script("where.sh", "printf '{\"tmp\":\"%s\"}\\n' \"$TMPDIR\"");
    let bundle =
        td.bundle("where", json!([tool("where", script.to_str().unwrap(), &[], &[])]), "[capabilities]\nexec = true\n");
    let call = |tmpdir: &str| {
        let output = td.call(&bundle, "where", json!({})).env("TMPDIR", tmpdir).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "TMPDIR={tmpdir:?}: {}", stderr(&output));
        let folder = stdout_json(&output)["tmp"].as_str().unwrap().to_string();
        let warnings: String = stderr(&output)
            .lines()
            .filter(|line| line.starts_with("warning: "))
            .map(|line| format!("{line}\n"))
            .collect();
        (folder, call_frame(&td)["sandbox"]["namespaces"].clone(), warnings)
    };
    let own = td.tmp_dir();
    let (folder, namespaces, warnings) = call(own.to_str().unwrap());
    assert!(folder.starts_with(&format!("{}/rlp-call-", own.canonicalize().unwrap().display())), "{folder}");
    assert_eq!(warnings, "");
    let tmp = std::fs::canonicalize("/tmp").unwrap();
    let cases = [
        ("", None),
        ("relative/tmp", Some("is not an absolute path")),
        ("/nonexistent/tmp", Some("does not exist")),
        ("/", Some("is the root folder, over which a tool's view would be mounted")),
    ];
    for (tmpdir, why) in cases {
        let (folder, same_namespaces, warnings) = call(tmpdir);
        assert!(folder.starts_with(&format!("{}/rlp-call-", tmp.display())), "TMPDIR={tmpdir:?}: {folder}");
        assert_eq!(same_namespaces, namespaces, "TMPDIR={tmpdir:?} weakened the sandbox");
        let expected = why.map(|why| {
            format!("warning: TMPDIR (`{tmpdir}`) {why}; the private folders of exec tools are made in /tmp instead\n")
        });
        assert_eq!(warnings, expected.unwrap_or_default(), "TMPDIR={tmpdir:?}");
    }
}
