//! What the tests of the MCP bridge (tests/it/bridge.rs and
//! tests/it/bridge_import.rs) share: the servers `tests/bridge/setup.sh`
//! installs under the cargo target folder (its `servers.env`), the tests'
//! own seed.py (its command line, the folders it reads, served over HTTP),
//! the pins of a server's tool definitions, and what `rlp tools call` prints
//! of a bridged tool's answer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::{Value, json};

use super::TestDir;
use super::output::{self, stdout, stdout_json};

// ---------------------------------------------------------------------------
// The servers tests/bridge/setup.sh installed

/// What `tests/bridge/setup.sh` installed, read from its `servers.env`.
pub struct Servers {
    pub node: String,
    pub filesystem_js: String,
    pub memory_js: String,
    pub everything_js: String,
    /// The node_modules folder of the three npm servers.
    pub node_modules: PathBuf,
    pub time_python: String,
    pub sdk_python: String,
    /// `tests/bridge/servers`, which holds seed.py.
    pub servers_dir: PathBuf,
    /// The folder of servers.env (`<target>/bridge`): the virtualenvs and
    /// the npm installs.
    pub root: PathBuf,
    /// The Python installation the SDK's virtualenv runs on (its
    /// `sys.base_prefix`, resolved): a stdio server on it reads it.
    pub sdk_python_home: PathBuf,
    /// The same for the time server's virtualenv.
    pub time_python_home: PathBuf,
}

/// The servers, installed (or found installed) by `tests/bridge/setup.sh`
/// under the cargo target folder on first use, as the serve tests get the
/// SDK's virtualenv. A missing or broken install fails the test, naming the
/// script: these tests are never skipped.
pub fn servers() -> &'static Servers {
    static SERVERS: OnceLock<Servers> = OnceLock::new();
    SERVERS.get_or_init(|| {
        let env_file = super::process::set_up(
            "tests/bridge/setup.sh",
            "bridge",
            "could not install or check the MCP servers (npm ci, PyPI, the MCP Python SDK; run it by hand to see why)",
            "the bridge tests (tests/it/bridge.rs, tests/it/bridge_import.rs)",
        );
        let text = std::fs::read_to_string(&env_file).unwrap_or_else(|e| {
            panic!(
                "tests/bridge/setup.sh named {} as its servers.env, which cannot be read ({e}); the bridge tests need it",
                env_file.display()
            )
        });
        let vars: BTreeMap<&str, &str> = text.lines().filter_map(|line| line.split_once('=')).collect();
        let get = |key: &str| -> String {
            let value = vars.get(key).unwrap_or_else(|| {
                panic!("{} has no {key}: run `sh tests/bridge/setup.sh target/bridge` again", env_file.display())
            });
            value.to_string()
        };
        let sdk_python = get("SDK_PYTHON");
        let time_python = get("TIME_PYTHON");
        Servers {
            node: get("NODE"),
            filesystem_js: get("FILESYSTEM_JS"),
            memory_js: get("MEMORY_JS"),
            everything_js: get("EVERYTHING_JS"),
            node_modules: PathBuf::from(get("NODE_MODULES")),
            servers_dir: PathBuf::from(get("SERVERS_DIR")),
            root: env_file.parent().expect("the folder of servers.env").to_path_buf(),
            sdk_python_home: python_home(&sdk_python),
            time_python_home: python_home(&time_python),
            sdk_python,
            time_python,
        }
    })
}

/// The installation `python` (a virtualenv's) runs on: its resolved
/// `sys.base_prefix`.
fn python_home(python: &str) -> PathBuf {
    let out = Command::new(python)
        .args(["-c", "import sys; print(sys.base_prefix)"])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    assert!(out.status.success(), "{python} could not say its base prefix\n{}", output::text(&out));
    std::fs::canonicalize(stdout(&out).trim()).unwrap()
}

// ---------------------------------------------------------------------------
// seed.py, the tests' own server

/// The path of seed.py.
fn seed_py() -> PathBuf {
    servers().servers_dir.join("seed.py")
}

/// The file seed.py reads the description of `echo_meta` from (at every
/// tools/list; the default description while it does not exist). Its path,
/// on the server's command line, is unique to the test: it tells the test's
/// seed.py processes from any other. It is in the test's `state/`, which
/// the server is granted.
pub fn echo_description(td: &TestDir) -> PathBuf {
    td.state_dir().join("echo-description")
}

/// The command line of seed.py over stdio: the SDK's Python, seed.py and
/// the test's description file.
pub fn seed_command(td: &TestDir) -> Vec<String> {
    vec![
        servers().sdk_python.clone(),
        seed_py().display().to_string(),
        "--description-file".to_string(),
        echo_description(td).display().to_string(),
    ]
}

/// The folders seed.py needs: the Python installation, `target/bridge`,
/// seed.py's folder and the test's `state/`.
pub fn seed_folders(td: &TestDir) -> Vec<PathBuf> {
    let servers = servers();
    vec![servers.sdk_python_home.clone(), servers.root.clone(), servers.servers_dir.clone(), td.state_dir()]
}

/// seed.py serving Streamable HTTP on a port of its choosing; killed when
/// dropped.
pub struct HttpSeed {
    child: Child,
    pub port: u16,
}

impl HttpSeed {
    /// Starts seed.py with `--http 0` and waits for the port it writes to
    /// `<testdir>/seed.port`; its stderr goes to `<testdir>/seed.stderr`.
    pub fn start(td: &TestDir) -> HttpSeed {
        let port_file = td.join("seed.port");
        let child = Command::new(&servers().sdk_python)
            .arg(seed_py())
            .args(["--http", "0", "--port-file"])
            .arg(&port_file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(td.join("seed.stderr")).unwrap())
            .spawn()
            .unwrap();
        let port = super::process::wait_for_file(&port_file).trim().parse().unwrap();
        HttpSeed { child, port }
    }
}

impl Drop for HttpSeed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------
// Pins of a server's tool definitions

/// The pin of a server's tool definition, computed here from its parts
/// (docs/formats.md, mcp transport): BLAKE3 of the RFC 8785 form of its
/// `name`, `description`, `inputSchema`, `outputSchema` and `annotations`.
pub fn pin_of(definition: &Value) -> String {
    blake3::hash(canonical(definition).as_bytes()).to_hex().to_string()
}

/// The pins of the parts of a definition (`definition_parts`): each
/// member's RFC 8785 form, hashed, for those it has.
pub fn parts_of(definition: &Value) -> Value {
    let mut parts = serde_json::Map::new();
    for (key, member) in [
        ("description", "description"),
        ("input_schema", "inputSchema"),
        ("output_schema", "outputSchema"),
        ("annotations", "annotations"),
    ] {
        if let Some(value) = definition.get(member) {
            parts.insert(key.into(), json!(pin_of(value)));
        }
    }
    Value::Object(parts)
}

/// The RFC 8785 form of a JSON value of strings, booleans, arrays and
/// objects (keys in code-unit order; no numbers here).
fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            let members: Vec<String> =
                keys.iter().map(|k| format!("{}:{}", serde_json::to_string(k).unwrap(), canonical(&map[*k]))).collect();
            format!("{{{}}}", members.join(","))
        }
        Value::Array(items) => format!("[{}]", items.iter().map(canonical).collect::<Vec<_>>().join(",")),
        Value::Number(_) => panic!("no numbers in a pinned definition here: {value}"),
        other => serde_json::to_string(other).unwrap(),
    }
}

// ---------------------------------------------------------------------------
// What rlp tools call prints

/// The stdout of a call that succeeded, as JSON.
#[track_caller]
pub fn succeeded(out: &Output) -> Value {
    assert_eq!(out.status.code(), Some(0), "{}", output::text(out));
    stdout_json(out)
}

/// A result of one text block, as `rlp tools call` prints an MCP answer it
/// does not unwrap.
pub fn one_text(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

/// The line rlp prints first about an unsigned bundle folder.
pub fn unsigned_note(bundle: &Path) -> String {
    format!("note: {} is an unsigned working folder: it is not checked against the trust policy\n", bundle.display())
}
