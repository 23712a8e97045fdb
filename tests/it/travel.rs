//! Bundles that travel: a program the bundle carries is named
//! `${bundle}/<path>`, which resolves to wherever the bundle is loaded from
//! — installed into another home, copied to another folder — and lint keeps
//! such commands honest (RLP225, RLP226).

use std::fs;
use std::os::unix::fs::PermissionsExt;

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::files::{copy_tree, read_json};
use crate::support::output::{code, stdout, stdout_json, text};

const GREETING: &str = "{\n  \"greeting\": \"Hello, Ada!\"\n}\n";

/// The example bundle `agents/demo`, scaffolded, lint-clean.
fn example(td: &TestDir) {
    td.expect(0, &["agent", "scaffold", "demo", "--example", "--non-interactive"]);
    let tools = read_json(&td.join("agents/demo/tools.json"));
    assert_eq!(tools["tools"][0]["transport"]["command"], "${bundle}/bin/greet");
    td.expect(0, &["lint", "agents/demo", "--deny-warnings"]);
}

/// `rlp lint agents/demo`: its exit code and each finding's code and message.
fn findings_of(td: &TestDir) -> (i32, Vec<(String, String)>) {
    let (status, found) = td.lint_json(["agents/demo"]);
    let codes = found
        .iter()
        .map(|f| (f["code"].as_str().unwrap().to_string(), f["message"].as_str().unwrap().to_string()))
        .collect();
    (status, codes)
}

/// The command record of the last `tool.call` frame of a home.
fn command_record(td: &TestDir, home: &str) -> Value {
    let events = crate::support::ledger::events(&td.ledger_path_in(home));
    let call = events.iter().rev().find(|e| e.kind == "tool.call").expect("a call frame");
    call.payload().unwrap()["command"].clone()
}

/// Signed, packed, installed into a second home, the author's folder gone:
/// the installed copy runs its own program.
#[test]
fn an_installed_bundle_runs_its_own_program_after_the_authors_folder_is_gone() {
    let td = TestDir::new();
    example(&td);
    td.expect(0, &["keygen", "--out", "keys", "--name", "release"]);
    td.expect(0, &["sign", "agents/demo", "--key", "keys/release.key"]);
    td.expect(0, &["bundle", "pack", "agents/demo", "-o", "demo.bundle.tar.gz"]);
    let run = |args: &[&str]| {
        let out = td.rlp_in("elsewhere").args(args).output().unwrap();
        assert_eq!(code(&out), 0, "{args:?}: {}", text(&out));
        out
    };
    run(&["trust", "add", "keys/release.pub", "--name", "release", "--allow-caps", "exec", "--allow-exec"]);
    run(&["agent", "install", "demo.bundle.tar.gz"]);
    fs::remove_dir_all(td.join("agents")).unwrap();

    let installed = td.join("elsewhere/agents/demo");
    let out = run(&["tools", "call", installed.to_str().unwrap(), "demo.greet", "--args", r#"{"name": "Ada"}"#]);
    assert_eq!(stdout(&out), GREETING);
    let resolved = installed.canonicalize().unwrap().join("bin/greet");
    assert_eq!(
        command_record(&td, "elsewhere"),
        json!({"written": "${bundle}/bin/greet", "resolved": resolved.display().to_string()})
    );
}

/// A bundle folder copied elsewhere runs the copy's program, and lists it
/// as written.
#[test]
fn a_copied_bundle_runs_the_copys_program() {
    let td = TestDir::new();
    example(&td);
    copy_tree(&td.join("agents/demo"), &td.join("moved/demo"));
    fs::write(td.join("agents/demo/bin/greet"), "#!/bin/sh\necho '{\"greeting\": \"the original\"}'\n").unwrap();

    let (out, _) = td.expect(0, &["tools", "call", "moved/demo", "demo.greet", "--args", r#"{"name": "Ada"}"#]);
    assert_eq!(out, GREETING);
    let listed = stdout_json(&td.expect_output(0, &["tools", "list", "moved/demo", "--format", "json"]));
    assert_eq!(listed["tools"][0]["transport"]["command"], "${bundle}/bin/greet");
    let resolved = td.join("moved/demo").canonicalize().unwrap().join("bin/greet");
    assert_eq!(command_record(&td, "home")["resolved"], resolved.display().to_string());
}

/// `${bundle}/…` must name a listed, executable file of the bundle
/// (RLP225); an absolute command into the bundle's own folder is a warning
/// with the `${bundle}` form as the fix (RLP226).
#[test]
fn lint_checks_programs_named_in_the_bundle() {
    let td = TestDir::new();
    example(&td);
    let tools_file = td.join("agents/demo/tools.json");
    let mut tools = read_json(&tools_file);
    let edit = |tools: &mut Value, command: &str| {
        tools["tools"][0]["transport"]["command"] = json!(command);
        fs::write(&tools_file, serde_json::to_string_pretty(tools).unwrap()).unwrap();
        td.expect(0, &["digest", "agents/demo"]);
    };
    let findings = |td: &TestDir| findings_of(td).1;

    edit(&mut tools, "${bundle}/bin/missing");
    assert_eq!(findings(&td), [("RLP225".into(), "`${bundle}/bin/missing` names no file of the bundle".into())]);

    let script = td.join("agents/demo/bin/greet");
    edit(&mut tools, "${bundle}/bin/greet");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(findings(&td), [("RLP225".into(), "`${bundle}/bin/greet` names a file that is not executable".into())]);
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();

    let absolute = td.join("agents/demo/bin/greet").canonicalize().unwrap().display().to_string();
    edit(&mut tools, &absolute);
    let (status, found) = td.lint_json(["agents/demo"]);
    assert_eq!(status, 0, "{found:?}");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["code"], "RLP226");
    assert_eq!(
        found[0]["help"],
        "write `${bundle}/bin/greet`: it names the bundle's copy wherever the bundle is installed or copied"
    );
    let strict = td.rlp().args(["lint", "agents/demo", "--deny-warnings"]).output().unwrap();
    assert_eq!(code(&strict), 1, "{}", text(&strict));
}

/// `rlp tools import --exec` of a program inside the bundle writes the
/// `${bundle}` form.
#[test]
fn importing_a_program_inside_the_bundle_writes_the_bundle_form() {
    let td = TestDir::new();
    td.expect(0, &["agent", "scaffold", "demo", "--non-interactive"]);
    let tool = td.join("agents/demo/bin/describe");
    fs::create_dir_all(tool.parent().unwrap()).unwrap();
    fs::write(
        &tool,
        "#!/bin/sh\necho '{\"tools\": [{\"id\": \"demo.hello\", \"description\": \"Says hello.\", \"input_schema\": {\"type\": \"object\"}, \"result_schema\": {\"type\": \"object\"}}]}'\n",
    )
    .unwrap();
    fs::set_permissions(&tool, fs::Permissions::from_mode(0o755)).unwrap();
    let program = tool.canonicalize().unwrap();
    td.expect(0, &["tools", "import", "agents/demo", "--exec", program.to_str().unwrap(), "--grant"]);
    let tools = read_json(&td.join("agents/demo/tools.json"));
    assert_eq!(tools["tools"][0]["transport"]["command"], "${bundle}/bin/describe");
    // Imported again, the same tool is recognised as the same binary's.
    let (_, err) = td.expect(0, &["tools", "import", "agents/demo", "--exec", program.to_str().unwrap()]);
    assert!(!err.contains("no longer described"), "{err}");
    td.expect(0, &["digest", "agents/demo"]);
    td.expect(0, &["lint", "agents/demo"]);
}

/// The platform the tests run on, as `platforms` names it.
fn here() -> String {
    format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH)
}

/// `transport.platforms` of the example tool set to `platforms` (and its
/// `command` removed unless `keep_command`), re-digested.
fn with_platforms(td: &TestDir, platforms: Value, keep_command: bool) {
    let tools_file = td.join("agents/demo/tools.json");
    let mut tools = read_json(&tools_file);
    tools["tools"][0]["transport"]["platforms"] = platforms;
    if !keep_command {
        tools["tools"][0]["transport"].as_object_mut().unwrap().remove("command");
    }
    fs::write(&tools_file, serde_json::to_string_pretty(&tools).unwrap()).unwrap();
    td.expect(0, &["digest", "agents/demo"]);
}

/// A `platforms` entry for the platform rlp runs on wins over `command`;
/// a tool with none for it is refused, naming the platforms it carries.
#[test]
fn a_tool_runs_the_program_for_its_platform_or_says_which_it_carries() {
    let td = TestDir::new();
    example(&td);
    let native = td.join("agents/demo/bin/greet-native");
    fs::write(&native, "#!/bin/sh\necho '{\"greeting\": \"native\"}'\n").unwrap();
    fs::set_permissions(&native, fs::Permissions::from_mode(0o755)).unwrap();
    with_platforms(&td, json!({ here(): "${bundle}/bin/greet-native" }), true);
    td.expect(0, &["lint", "agents/demo", "--deny-warnings"]);
    let (out, _) = td.expect(0, &["tools", "call", "agents/demo", "demo.greet", "--args", r#"{"name": "Ada"}"#]);
    assert_eq!(out, "{\n  \"greeting\": \"native\"\n}\n");

    let other = if here() == "macos-aarch64" { "linux-riscv64" } else { "macos-aarch64" };
    with_platforms(&td, json!({ other: "${bundle}/bin/greet" }), false);
    td.expect(0, &["lint", "agents/demo"]);
    let out = td.call(&td.join("agents/demo"), "demo.greet", json!({"name": "Ada"})).output().unwrap();
    assert_eq!(code(&out), 1, "{}", text(&out));
    let err = crate::support::output::stderr(&out);
    assert!(err.ends_with(&format!(
            "error: tool `demo.greet` carries no program for this platform ({}); it carries one for {other}\n  help: add `\"{}\"` to the tool's `transport.platforms`, or a `command` for every other platform\n",
            here(),
            here()
        )),
        "{err}"
    );
    // Exported as an .mcpb, whose rlp runs on this platform, it is warned about.
    let (_, err) = td.expect(0, &["bundle", "export-mcpb", "agents/demo", "-o", "demo.mcpb"]);
    assert_eq!(
        err,
        format!(
            "warning: tool `demo.greet` carries no program for {0}, the platform of the rlp in the .mcpb: a host's \
             calls to it are refused; add `\"{0}\"` to its `transport.platforms`\n",
            here()
        )
    );
}

/// Lint names an unknown platform (RLP227) and checks each platform's
/// program as it checks `command` (RLP225).
#[test]
fn lint_checks_every_platform_of_a_tool() {
    let td = TestDir::new();
    example(&td);
    with_platforms(&td, json!({"linux-x64": "${bundle}/bin/greet", "macos-aarch64": "${bundle}/bin/greet-mac"}), true);
    let (status, codes) = findings_of(&td);
    assert_eq!(status, 1);
    assert_eq!(
        codes,
        [
            ("RLP227".to_string(), "`linux-x64` is not a platform rlp knows".to_string()),
            ("RLP225".to_string(), "`${bundle}/bin/greet-mac` names no file of the bundle".to_string()),
        ]
    );
}

/// A stdio server's `platforms` are read and checked as an exec tool's.
#[test]
fn a_stdio_servers_platforms_are_checked_as_a_tools() {
    let td = TestDir::new();
    example(&td);
    let tools_file = td.join("agents/demo/tools.json");
    let mut tools = read_json(&tools_file);
    tools["servers"] = json!({"files": {
        "platforms": {"linux-x64": "/usr/bin/env", "macos-aarch64": "${bundle}/bin/server-mac"},
    }});
    fs::write(&tools_file, serde_json::to_string_pretty(&tools).unwrap()).unwrap();
    td.expect(0, &["digest", "agents/demo"]);
    let (_, codes) = findings_of(&td);
    let has = |code: &str, message: &str| codes.iter().any(|(c, m)| c == code && m == message);
    assert!(has("RLP227", "`linux-x64` is not a platform rlp knows"), "{codes:?}");
    assert!(has("RLP225", "`${bundle}/bin/server-mac` names no file of the bundle"), "{codes:?}");
}

/// A `${bundle}` command cannot leave the bundle: `..` is refused by the
/// reader, and a program that is a link to a file outside (planted in the
/// folder) makes the bundle unloadable; neither call runs anything.
#[test]
fn a_bundle_program_cannot_point_outside_the_bundle() {
    let td = TestDir::new();
    example(&td);
    let marker = td.state_dir().join("ran");
    let outside = td.script("outside.sh", &format!("touch '{}'; echo '{{}}'", marker.display()));
    let tools_file = td.join("agents/demo/tools.json");
    let original = fs::read_to_string(&tools_file).unwrap();

    fs::write(&tools_file, original.replace("${bundle}/bin/greet", "${bundle}/../../outside.sh")).unwrap();
    let out = td.call(&td.join("agents/demo"), "demo.greet", json!({"name": "Ada"})).output().unwrap();
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(crate::support::output::stderr(&out).contains("does not name a file inside the bundle"), "{}", text(&out));

    fs::write(&tools_file, &original).unwrap();
    let program = td.join("agents/demo/bin/greet");
    fs::remove_file(&program).unwrap();
    std::os::unix::fs::symlink(&outside, &program).unwrap();
    let out = td.call(&td.join("agents/demo"), "demo.greet", json!({"name": "Ada"})).output().unwrap();
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(crate::support::output::stderr(&out).contains("RLP506"), "{}", text(&out));
    assert!(!marker.exists(), "the program outside the bundle ran");
}

/// An install that replaces a bundle and dies between its two renames (on a
/// file system that cannot swap folders in one step) leaves the installed
/// copy set aside as `.old-<pid>-<random>-<name>` next to the staged new
/// copy: the next install, of any bundle, puts the old copy back before it
/// sweeps, so the bundle is never lost.
#[test]
fn a_copy_set_aside_by_an_interrupted_replacement_is_put_back_by_the_next_install() {
    let td = TestDir::new();
    example(&td);
    td.expect(0, &["agent", "install", "agents/demo", "--allow-unsigned"]);
    td.expect(0, &["agent", "scaffold", "other", "--example", "--non-interactive"]);
    // What the interrupted `agent install agents/demo --force` of a process
    // that no longer runs (its pid is above the kernel's pid_max) left.
    let agents = td.home().join("agents");
    fs::rename(agents.join("demo"), agents.join(".old-99999999-0123456789abcdef-demo")).unwrap();
    copy_tree(&td.join("agents/demo"), &agents.join(".staging-99999999-AbCdEf"));
    let (listed, _) = td.expect(0, &["agent", "list"]);
    assert_eq!(listed, format!("no agents installed in {}\n", agents.display()));

    td.expect(0, &["agent", "install", "agents/other", "--allow-unsigned"]);
    let mut left: Vec<_> = fs::read_dir(&agents).unwrap().map(|e| e.unwrap().file_name()).collect();
    left.sort();
    assert_eq!(left, ["demo", "other"]);
    let (listed, _) = td.expect(0, &["agent", "list"]);
    assert_eq!(listed, "demo   0.1.0  unsigned\nother  0.1.0  unsigned\n");
    let installed = agents.join("demo");
    let (out, _) =
        td.expect(0, &["tools", "call", installed.to_str().unwrap(), "demo.greet", "--args", r#"{"name": "Ada"}"#]);
    assert_eq!(out, GREETING);
}
