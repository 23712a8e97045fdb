//! `rlp bundle export-mcpb`: the MCP Bundle of a signed bundle, read back
//! with the zip crate, checked and unpacked by the reference MCPB tools
//! (installed once by `tests/mcpb/setup.sh`; without them these tests fail,
//! they are never skipped), and started the way an MCP host starts it; the
//! archive is reproducible, and a bundle that is not ready or an output
//! that cannot be written leaves no file behind.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::support::bundle::{runtime_tool, with};
use crate::support::files::{copy_tree, repo};
use crate::support::output::{self, assert_contains, code, stderr, stdout_json, text};
use crate::support::process::set_up;
use crate::support::rlp_snapshot;
use crate::support::{TestDir, mcp};

/// The secret both tools use; `secret_echo.sh` reads it by its earlier
/// variable name, RUNLOOP_TEST_TOKEN.
const TOKEN: &str = "runloop/test/token";
/// The secret of `vault.write` alone, a dotted id (`MAIL__SMTP__KEY`).
const SMTP: &str = "mail.smtp.key";
/// The values the host's user enters.
const TOKEN_VALUE: &str = "tok-4f9a1c77e2b8";
const SMTP_VALUE: &str = "smtp-8d0b3e51a6";

/// The folder of the reference MCPB tools (`tests/mcpb/setup.sh` installs
/// them on first use).
fn mcpb_tools() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        set_up("tests/mcpb/setup.sh", "mcpb-cli", "could not install @anthropic-ai/mcpb with npm", "the mcpb tests")
    })
}

/// The reference `mcpb` CLI run with `args` in the test folder.
fn mcpb(td: &TestDir, args: &[&str]) -> Output {
    Command::new(mcpb_tools().join("node_modules/.bin/mcpb"))
        .args(args)
        .current_dir(td.path())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Bundle `agents/vault`: two tools and two secrets, `TOKEN` used by both,
/// a description, and an executable file of its own, `bin/rotate`.
fn vault(td: &TestDir) -> PathBuf {
    let tools = json!([
        with(runtime_tool("vault.read", "secret_echo.sh", &["result"]), json!({"secrets": [TOKEN]})),
        with(runtime_tool("vault.write", "ok.sh", &[]), json!({"secrets": [TOKEN, SMTP]})),
    ]);
    let caps = format!("[capabilities]\nexec = true\nsecrets = [\"{TOKEN}\", \"{SMTP}\"]\n");
    let dir = td.bundle("vault", tools, &caps);
    let manifest = dir.join("manifest.toml");
    let text = fs::read_to_string(&manifest).unwrap();
    let described = "version = \"0.1.0\"\ndescription = \"Reads and writes the vault\"\n";
    fs::write(&manifest, text.replace("version = \"0.1.0\"\n", described)).unwrap();
    fs::create_dir(dir.join("bin")).unwrap();
    fs::write(dir.join("bin/rotate"), "#!/bin/sh\necho '{}'\n").unwrap();
    fs::set_permissions(dir.join("bin/rotate"), fs::Permissions::from_mode(0o755)).unwrap();
    td.expect(0, &["digest", "agents/vault"]);
    dir
}

/// `rlp keygen` and `rlp sign` of `agents/vault`; returns the key id.
fn sign_vault(td: &TestDir) -> String {
    let (out, _) = td.expect(0, &["keygen", "--out", "keys", "--name", "release"]);
    let id = out.lines().find_map(|l| l.strip_prefix("key id ")).expect("the key id").to_string();
    td.expect(0, &["sign", "agents/vault", "--key", "keys/release.key"]);
    id
}

/// One entry of a zip: its name, Unix mode, time stamp and compression.
#[derive(Debug, PartialEq)]
struct ZipEntry {
    name: String,
    mode: Option<u32>,
    modified: Option<zip::DateTime>,
    compression: zip::CompressionMethod,
}

/// The entries of the zip at `path`, in archive order, and the bytes of the
/// ones named in `read`.
fn read_zip(path: &Path, read: &[&str]) -> (Vec<ZipEntry>, Vec<Vec<u8>>) {
    let mut archive = zip::ZipArchive::new(fs::File::open(path).unwrap()).unwrap();
    let mut entries = Vec::new();
    let mut contents = vec![Vec::new(); read.len()];
    for i in 0..archive.len() {
        let mut file = archive.by_index(i).unwrap();
        let name = file.name().unwrap().to_string();
        if let Some(slot) = read.iter().position(|r| *r == name) {
            std::io::copy(&mut file, &mut contents[slot]).unwrap();
        }
        entries.push(ZipEntry {
            mode: file.unix_mode(),
            modified: file.last_modified(),
            compression: file.compression(),
            name,
        });
    }
    (entries, contents)
}

/// BLAKE3 of a file, streamed.
fn file_hash(path: &Path) -> blake3::Hash {
    let mut hasher = blake3::Hasher::new();
    std::io::copy(&mut fs::File::open(path).unwrap(), &mut hasher).unwrap();
    hasher.finalize()
}

/// Names in the test folder that an export may have left: archives and temporary files.
fn left_behind(td: &TestDir) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(td.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".mcpb") || n.starts_with(".rlp-"))
        .collect();
    names.sort();
    names
}

#[test]
fn an_exported_bundle_validates_unpacks_verifies_and_serves_as_a_host_starts_it() {
    let td = TestDir::new();
    vault(&td);
    let key = sign_vault(&td);
    let (out, err) = td.expect(0, &["bundle", "export-mcpb", "agents/vault", "-o", "vault.mcpb"]);
    let bytes = fs::metadata(td.join("vault.mcpb")).unwrap().len();
    assert_eq!(
        out,
        format!("wrote vault.mcpb (vault 0.1.0: 2 tools, 2 secrets, signed by key {key}): {bytes} bytes\n")
    );
    assert_eq!(err, "");

    // The zip: sorted entries, fixed times and modes, the manifest, this rlp.
    let (entries, contents) = read_zip(&td.join("vault.mcpb"), &["manifest.json", "bundle/vault/manifest.toml"]);
    let file = |name: &str, mode: u32| ZipEntry {
        name: name.to_string(),
        mode: Some(0o100000 | mode),
        modified: Some(zip::DateTime::default()),
        compression: zip::CompressionMethod::Deflated,
    };
    assert_eq!(
        entries,
        [
            file("bundle/vault/SIGNATURES/manifest.sig", 0o644),
            file("bundle/vault/bin/rotate", 0o755),
            file("bundle/vault/manifest.toml", 0o644),
            file("bundle/vault/policy.caps", 0o644),
            file("bundle/vault/tools.json", 0o644),
            file("manifest.json", 0o644),
            file("server/rlp", 0o755),
        ]
    );
    assert_eq!(contents[1], fs::read(td.join("agents/vault/manifest.toml")).unwrap());
    let manifest = String::from_utf8(contents[0].clone()).unwrap();
    assert_contains(&manifest, &format!("\"name\": \"rlp key {key}\""));
    insta::assert_snapshot!("mcpb_manifest", manifest.replace(&key, "KEY_ID"));

    // The reference tools validate and unpack it; what they unpack verifies.
    let unpacked = mcpb(&td, &["unpack", "vault.mcpb", "installed"]);
    assert_eq!(code(&unpacked), 0, "{}", text(&unpacked));
    let ext = td.join("installed");
    let validated = mcpb(&td, &["validate", "installed/manifest.json"]);
    assert_eq!(code(&validated), 0, "{}", text(&validated));
    rlp_snapshot!(&td, &validated);
    let server = ext.join("server/rlp");
    assert_eq!(fs::metadata(&server).unwrap().permissions().mode() & 0o777, 0o755);
    assert_eq!(file_hash(&server), file_hash(Path::new(env!("CARGO_BIN_EXE_rlp"))));
    // The bundle's size follows the checkout's path, written into its tools.json.
    rlp_snapshot!(
        td.filters().regex(r"\d+ bytes;", "[SIZE] bytes;"),
        td.expect_output(0, &["bundle", "verify", "installed/bundle/vault", "--key", "keys/release.pub"])
    );

    // The server configuration the host derives, with the user's two values.
    let values = json!({"runloop_test__token": TOKEN_VALUE, "mail__smtp__key": SMTP_VALUE});
    let config = host_config(&td, &ext, &values);
    assert_eq!(
        config,
        json!({
            "command": server.to_str().unwrap(),
            "args": ["serve", "--stdio", ext.join("bundle/vault").to_str().unwrap()],
            "env": {"RUNLOOP_TEST__TOKEN": TOKEN_VALUE, "MAIL__SMTP__KEY": SMTP_VALUE},
        })
    );

    // The host's user trusts the key in the home rlp uses there, ~/.runloop.
    let trusted = td
        .command_in("user/.runloop")
        .args(["trust", "add", "keys/release.pub", "--name", "release", "--allow-exec"])
        .output()
        .unwrap();
    assert_eq!(code(&trusted), 0, "{}", text(&trusted));

    let (answers, log) = start_as_host(&td, &config, json!({"name": "vault.read", "arguments": {}}));
    assert!(!log.contains(TOKEN_VALUE) && !log.contains(SMTP_VALUE), "{log}");
    let answer =
        |id: u64| answers.iter().find(|m| m["id"] == id).unwrap_or_else(|| panic!("no answer {id}: {answers:?}"));
    assert!(answer(1)["result"]["serverInfo"].is_object(), "{answers:?}");
    let listed: Vec<&Value> = answer(2)["result"]["tools"].as_array().unwrap().iter().map(|t| &t["name"]).collect();
    let declared: Value = serde_json::from_str(&manifest).unwrap();
    let declared: Vec<&Value> = declared["tools"].as_array().unwrap().iter().map(|t| &t["name"]).collect();
    assert_eq!(listed, declared);
    assert_eq!(listed, [&json!("vault.read"), &json!("vault.write")]);
    // The secret reached the tool (its value came back, scrubbed; a result
    // schema that is not an object's wraps the result).
    assert_eq!(
        answer(3)["result"]["structuredContent"],
        json!({"result": {"token": "[redacted]", "len": TOKEN_VALUE.len()}}),
        "{answers:?}"
    );
    assert!(td.ledger_path_in("user/.runloop").is_file(), "the calls are recorded in ~/.runloop");
}

#[test]
fn the_same_bundle_exports_to_the_same_bytes_wherever_it_lies() {
    let td = TestDir::new();
    vault(&td);
    td.expect(0, &["bundle", "export-mcpb", "agents/vault"]);
    // A copy elsewhere: other paths, other time stamps, the same content.
    copy_tree(&td.join("agents/vault"), &td.join("elsewhere/vault"));
    let (out, _) = td.expect(0, &["bundle", "export-mcpb", "elsewhere/vault", "-o", "copy.mcpb", "--format", "json"]);
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        report,
        json!({"archive": "copy.mcpb", "name": "vault", "version": "0.1.0", "tools": 2, "secrets": 2,
               "bytes": fs::metadata(td.join("copy.mcpb")).unwrap().len(), "signed_by": null, "warnings": []})
    );
    assert!(fs::read(td.join("vault-0.1.0.mcpb")).unwrap() == fs::read(td.join("copy.mcpb")).unwrap());
}

#[test]
fn a_bundle_that_is_not_ready_is_refused_and_nothing_is_written() {
    let td = TestDir::new();
    let dir = vault(&td);
    fs::write(dir.join("policy.caps"), "[capabilities]\nexec = true\n").unwrap();
    rlp_snapshot!(&td, td.expect_output(1, &["bundle", "export-mcpb", "agents/vault"]));
    assert_eq!(left_behind(&td), Vec::<String>::new());

    // A signature that is a link to a file elsewhere is refused, as pack refuses it.
    let td = TestDir::new();
    let dir = vault(&td);
    sign_vault(&td);
    let sig = dir.join("SIGNATURES/manifest.sig");
    fs::rename(&sig, td.join("elsewhere.sig")).unwrap();
    std::os::unix::fs::symlink(td.join("elsewhere.sig"), &sig).unwrap();
    rlp_snapshot!(&td, td.expect_output(1, &["bundle", "export-mcpb", "agents/vault"]));
    assert_eq!(left_behind(&td), Vec::<String>::new());
}

#[test]
fn an_output_that_cannot_be_written_is_exit_2_and_leaves_no_file() {
    let td = TestDir::new();
    vault(&td);
    let (_, err) = td.expect(2, &["bundle", "export-mcpb", "agents/vault", "-o", "missing/vault.mcpb"]);
    assert_contains(&err, "error: missing: No such file or directory");
    fs::create_dir(td.join("taken.mcpb")).unwrap();
    rlp_snapshot!(&td, td.expect_output(2, &["bundle", "export-mcpb", "agents/vault", "-o", "taken.mcpb"]));
    rlp_snapshot!(&td, td.expect_output(2, &["bundle", "export-mcpb", "agents/vault", "-o", "-"]));
    // The disk refuses the archive part way (a file size limit): nothing is left.
    let out =
        td.shell("trap '' XFSZ && ulimit -f 64").args(["bundle", "export-mcpb", "agents/vault"]).output().unwrap();
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert_contains(&stderr(&out), "error: vault-0.1.0.mcpb: File too large");
    assert_eq!(left_behind(&td), ["taken.mcpb"]);
}

#[test]
fn an_exec_tool_run_from_inside_the_bundle_is_warned_about_and_stays_executable() {
    let td = TestDir::new();
    td.expect(0, &["agent", "scaffold", "demo", "--example", "--non-interactive"]);
    // The example names its program `${bundle}/bin/greet`: it travels in the .mcpb.
    let err = output::stderr(&rlp_snapshot!(
        td.filters().regex(r"\): \d+ bytes", "): [SIZE] bytes"),
        td.expect_output(0, &["bundle", "export-mcpb", "agents/demo", "-o", "demo.mcpb"])
    ));
    assert_eq!(err, "");
    let (entries, _) = read_zip(&td.join("demo.mcpb"), &[]);
    let greet = entries.iter().find(|e| e.name == "bundle/demo/bin/greet").expect("bin/greet in the archive");
    assert_eq!(greet.mode, Some(0o100755));

    // Named by the author's absolute path, it would not.
    let program = td.path().canonicalize().unwrap().join("agents/demo/bin/greet");
    let tools_file = td.join("agents/demo/tools.json");
    let tools = fs::read_to_string(&tools_file).unwrap();
    fs::write(&tools_file, tools.replace("${bundle}/bin/greet", program.to_str().unwrap())).unwrap();
    td.expect(0, &["digest", "agents/demo"]);
    let (_, err) = td.expect(0, &["bundle", "export-mcpb", "agents/demo", "-o", "absolute.mcpb"]);
    assert_eq!(
        err,
        format!(
            "warning: tool `demo.greet` runs {}, inside the bundle folder: the host runs that path of its own \
             machine, not the copy in the .mcpb; write `command` as `${{bundle}}/bin/greet` so that it names \
             the copy wherever the bundle is\n",
            program.display()
        )
    );
}

/// The server configuration the reference host code derives from the
/// unpacked extension `ext`, with the user's `values`.
fn host_config(td: &TestDir, ext: &Path, values: &Value) -> Value {
    let mut node = Command::new("node")
        .arg(repo("tests/mcpb/host_config.mjs"))
        .arg(mcpb_tools())
        .arg(ext)
        .env("HOME", td.join("user"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    node.stdin.take().unwrap().write_all(values.to_string().as_bytes()).unwrap();
    let derived = node.wait_with_output().unwrap();
    assert_eq!(code(&derived), 0, "{}", text(&derived));
    stdout_json(&derived)
}

/// Starts the server of `config` as hosts on the MCP SDKs start it — from a
/// folder of their own, with HOME, PATH and the manifest's env alone (the
/// test folder's rule that no system configuration is read aside) — and
/// sends initialize, tools/list (id 2) and one tools/call of `call` (id 3).
/// Returns the answers and the server's stderr; it must exit 0.
fn start_as_host(td: &TestDir, config: &Value, call: Value) -> (Vec<Value>, String) {
    let mut command = Command::new(config["command"].as_str().unwrap());
    command
        .args(config["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()))
        .env_clear()
        .env("HOME", td.join("user"))
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("RUNLOOP_SYSTEM_CONFIG", td.join("no-system-config.toml"))
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in config["env"].as_object().into_iter().flatten() {
        command.env(name, value.as_str().unwrap());
    }
    let mut child = command.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    for request in [
        mcp::initialize(1),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call}),
    ] {
        writeln!(input, "{request}").unwrap();
    }
    let mut answers = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let message: Value = serde_json::from_str(&line.unwrap()).unwrap();
        let last = message["id"] == 3;
        answers.push(message);
        if last {
            break;
        }
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    let log = stderr(&out);
    assert_eq!(code(&out), 0, "{log}");
    (answers, log)
}

/// The example bundle, exported and unpacked by the reference tools into a
/// fresh folder, its author's folder gone: started as a host starts it, it
/// runs the copy of its program the `.mcpb` carries (`${bundle}`).
#[test]
fn an_exported_example_runs_its_own_program_where_it_is_unpacked() {
    let td = TestDir::new();
    td.expect(0, &["agent", "scaffold", "demo", "--example", "--non-interactive"]);
    td.expect(0, &["keygen", "--out", "keys", "--name", "release"]);
    td.expect(0, &["sign", "agents/demo", "--key", "keys/release.key"]);
    td.expect(0, &["bundle", "export-mcpb", "agents/demo", "-o", "demo.mcpb"]);
    fs::remove_dir_all(td.join("agents")).unwrap();
    let unpacked = mcpb(&td, &["unpack", "demo.mcpb", "fresh"]);
    assert_eq!(code(&unpacked), 0, "{}", text(&unpacked));
    let config = host_config(&td, &td.join("fresh"), &json!({}));
    let trusted = td
        .command_in("user/.runloop")
        .args(["trust", "add", "keys/release.pub", "--name", "release", "--allow-caps", "exec", "--allow-exec"])
        .output()
        .unwrap();
    assert_eq!(code(&trusted), 0, "{}", text(&trusted));
    let (answers, _) = start_as_host(&td, &config, json!({"name": "demo.greet", "arguments": {"name": "Ada"}}));
    let called = answers.iter().find(|m| m["id"] == 3).unwrap_or_else(|| panic!("no answer: {answers:?}"));
    assert_eq!(called["result"]["structuredContent"], json!({"greeting": "Hello, Ada!"}), "{answers:?}");
}
