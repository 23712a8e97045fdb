//! Shared schema registries: a `schema:<id>` the bundle does not hold is
//! found in the folders of `[schemas] registries` (config.toml), then in the
//! home's `schemas/`; `rlp digest` pins it in manifest.toml, the signature
//! covers the pin, and lint, verify and calls refuse a registry file that no
//! longer matches it.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::output::{self, stderr, stdout};
use crate::support::{TestDir, bundle, rlp_snapshot};

const GREETING: &str =
    "{\"type\": \"object\", \"required\": [\"name\"], \"properties\": {\"name\": {\"type\": \"string\"}}}\n";

/// `<testdir>/<folder>/<id>.json` holding `text`; returns the file.
fn shared(td: &TestDir, folder: &str, id: &str, text: &str) -> PathBuf {
    let dir = td.join(folder);
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{id}.json"));
    fs::write(&path, text).unwrap();
    path
}

/// Bundle `agents/<name>` with one exec tool `greet` (it prints its call
/// blob) whose input schema is `schema:<id>`.
fn greeter(td: &TestDir, name: &str, id: &str) -> PathBuf {
    let tool = bundle::with(
        bundle::runtime_tool("greet", "echo_blob.sh", &[]),
        json!({"input_schema": {"$ref": format!("schema:{id}")}}),
    );
    td.bundle(name, json!([tool]), "[capabilities]\nexec = true\n")
}

/// The config.toml of the default home naming `registry` (a folder of the
/// test folder) by a path relative to the home.
fn config_naming(td: &TestDir, registry: &str) {
    td.write_config(&format!("[schemas]\nregistries = [\"../{registry}\"]\n"));
}

/// The findings of `rlp lint <bundle> --format json` with the fields a test compares.
fn lint_findings(td: &TestDir, bundle: &Path) -> (i32, Vec<Value>) {
    let (code, findings) = td.lint_json([bundle]);
    let shown = findings
        .iter()
        .map(|f| json!({"code": f["code"], "severity": f["severity"], "resolved": f.get("resolved")}))
        .collect();
    (code, shown)
}

fn registry_note(path: &Path) -> Value {
    json!({"code": "RLP307", "severity": "note", "resolved": format!("registry:{}", path.display())})
}

#[test]
fn a_registry_schema_is_pinned_signed_verified_and_validates_calls() {
    let td = TestDir::new();
    let file = shared(&td, "registry", "greeting.v1", GREETING);
    config_naming(&td, "registry");
    let dir = greeter(&td, "greeter", "greeting.v1");

    // Found, but not pinned: an error until `rlp digest` pins it.
    rlp_snapshot!("unpinned", &td, td.rlp().args(["lint", "agents/greeter"]));
    let out = td.call(&dir, "greet", json!({"name": "Ada"})).output().unwrap();
    assert_eq!(output::code(&out), 2, "{}", output::text(&out));
    assert!(
        stderr(&out).contains("RLP305 `schema:greeting.v1` resolves to the shared registry file"),
        "{}",
        stderr(&out)
    );

    let (digest_out, _) = td.expect(0, &["digest", "agents/greeter"]);
    assert_eq!(digest_out, "added schema:greeting.v1\nupdated manifest.toml: 1 added, 0 updated, 0 removed\n");
    let manifest = fs::read_to_string(dir.join("manifest.toml")).unwrap();
    let pin = format!(
        "[shared_schemas.\"greeting.v1\"]\nblake3 = \"{}\"\nsize = {}\n",
        blake3::hash(GREETING.as_bytes()).to_hex(),
        GREETING.len()
    );
    assert!(manifest.ends_with(&pin), "{manifest}");
    td.expect(0, &["digest", "agents/greeter", "--check"]);

    // Lint names where the id resolved.
    rlp_snapshot!("pinned", &td, td.rlp().args(["lint", "agents/greeter"]));
    assert_eq!(lint_findings(&td, &dir), (0, vec![registry_note(&file)]));

    // Signed and verified against the registries of the home that verifies it.
    td.expect(0, &["keygen", "--out", "keys", "--name", "author"]);
    td.expect(0, &["sign", "agents/greeter", "--key", "keys/author.key"]);
    td.expect(0, &["bundle", "verify", "agents/greeter", "--key", "keys/author.pub"]);
    td.expect(0, &["trust", "add", "keys/author.pub", "--name", "author"]);
    td.expect(0, &["trust", "allow", "author", "--exec"]);
    td.expect(0, &["bundle", "verify", "agents/greeter"]);

    // Calls validate against the registry schema.
    let ok = td.call(&dir, "greet", json!({"name": "Ada"})).output().unwrap();
    assert_eq!(output::code(&ok), 0, "{}", output::text(&ok));
    assert!(stdout(&ok).contains("\"Ada\""), "{}", stdout(&ok));
    let bad = td.call(&dir, "greet", json!({"name": 5})).output().unwrap();
    assert_ne!(output::code(&bad), 0, "{}", output::text(&bad));
    assert!(stderr(&bad).contains("/name: 5 is not of type \"string\""), "{}", stderr(&bad));

    // The registry file changes after signing: lint, verify and calls refuse it.
    let loose = "{\"type\": \"object\"}\n";
    fs::write(&file, loose).unwrap();
    let (found, pinned) = (blake3::hash(loose.as_bytes()).to_hex(), blake3::hash(GREETING.as_bytes()).to_hex());
    rlp_snapshot!(
        "changed",
        td.filters().literal(found.as_str(), "[FOUND]").literal(pinned.as_str(), "[PINNED]"),
        td.rlp().args(["lint", "agents/greeter"])
    );
    let (_, err) = td.expect(1, &["bundle", "verify", "agents/greeter", "--key", "keys/author.pub"]);
    assert_eq!(
        err,
        format!(
            "error: the shared schema `schema:greeting.v1` changed: {} has BLAKE3 {found}, manifest.toml pins {pinned}\n  help: restore the pinned file; if the change is intended, the bundle's author reviews it, runs `rlp digest` and signs again\n",
            file.display()
        )
    );
    let out = td.call(&dir, "greet", json!({"name": 5})).output().unwrap();
    assert_eq!(output::code(&out), 2, "{}", output::text(&out));
    assert!(
        stderr(&out).contains(&format!(
            "RLP306 the shared schema `schema:greeting.v1` changed: {} has BLAKE3 {found}",
            file.display()
        )),
        "{}",
        stderr(&out)
    );

    // Reviewed and digested again: the pin follows, and the signature must be made again.
    let (digest_out, _) = td.expect(0, &["digest", "agents/greeter"]);
    assert_eq!(digest_out, "updated schema:greeting.v1\nupdated manifest.toml: 0 added, 1 updated, 0 removed\n");
    td.expect(1, &["bundle", "verify", "agents/greeter", "--key", "keys/author.pub"]);
    td.expect(0, &["sign", "agents/greeter", "--key", "keys/author.key"]);
    td.expect(0, &["bundle", "verify", "agents/greeter", "--key", "keys/author.pub"]);
}

#[test]
fn the_bundle_wins_over_config_registries_which_win_over_the_home() {
    let td = TestDir::new();
    config_naming(&td, "registry");
    let home = td.home().join("schemas");
    let in_home = |id: &str| {
        fs::create_dir_all(&home).unwrap();
        fs::write(home.join(format!("{id}.json")), "{\"type\": \"object\"}").unwrap();
        home.join(format!("{id}.json"))
    };
    let tool = |id: &str, schema: &str| {
        bundle::with(
            bundle::runtime_tool(id, "echo_blob.sh", &[]),
            json!({"input_schema": {"$ref": format!("schema:{schema}")}}),
        )
    };
    let dir = td.bundle(
        "layers",
        json!([tool("a", "own"), tool("b", "both"), tool("c", "home_only")]),
        "[capabilities]\nexec = true\n",
    );
    fs::create_dir_all(dir.join("schemas")).unwrap();
    fs::write(dir.join("schemas/own.json"), "{\"type\": \"object\"}").unwrap();
    shared(&td, "registry", "own", "{\"type\": \"string\"}");
    in_home("own");
    let config_both = shared(&td, "registry", "both", "{\"type\": \"object\"}");
    let home_both = in_home("both");
    let home_only = in_home("home_only");
    let (digest_out, _) = td.expect(0, &["digest", "agents/layers"]);
    assert_eq!(
        digest_out,
        "added schema:both\nadded schema:home_only\nadded schemas/own.json\nupdated manifest.toml: 3 added, 0 updated, 0 removed\n"
    );
    assert_eq!(lint_findings(&td, &dir), (0, vec![registry_note(&config_both), registry_note(&home_only)]));
    let (_, findings) = td.lint_json([&dir]);
    assert_eq!(
        findings[0]["help"],
        format!("it shadows {}: the first registry holding an id wins", home_both.display())
    );
    rlp_snapshot!("precedence", &td, td.rlp().args(["lint", "agents/layers"]));
}

#[test]
fn an_unresolved_id_lists_the_places_searched() {
    let td = TestDir::new();
    config_naming(&td, "registry");
    fs::create_dir_all(td.join("registry")).unwrap();
    greeter(&td, "lost", "nowhere.v1");
    td.expect(0, &["digest", "agents/lost"]);
    rlp_snapshot!("unresolved", &td, td.rlp().args(["lint", "agents/lost"]));
}

#[test]
fn a_pin_without_its_registry_file_is_refused_by_verify_and_lint() {
    let td = TestDir::new();
    let file = shared(&td, "registry", "greeting.v1", GREETING);
    config_naming(&td, "registry");
    let dir = greeter(&td, "greeter", "greeting.v1");
    td.expect(0, &["digest", "agents/greeter"]);
    fs::remove_file(&file).unwrap();
    let (_, err) = td.expect(1, &["bundle", "verify", "agents/greeter"]);
    let pinned = blake3::hash(GREETING.as_bytes()).to_hex();
    assert_eq!(
        err,
        format!(
            "error: manifest.toml pins the shared schema `schema:greeting.v1` (BLAKE3 {pinned}), which is in no registry (searched {}, {})\n  help: put the pinned `greeting.v1.json` in the home's schemas/ folder or in a folder of `[schemas] registries` in config.toml\n",
            file.display(),
            td.home().join("schemas/greeting.v1.json").display()
        )
    );
    let (code, findings) = td.lint_json([&dir]);
    assert_eq!(code, 1);
    assert_eq!(findings[0]["code"], "RLP303");
    assert!(findings[0]["help"].as_str().unwrap().contains(&format!("manifest.toml pins it (BLAKE3 {pinned})")));
    // `rlp digest` keeps the pin of an id still referenced.
    let (digest_out, _) = td.expect(0, &["digest", "agents/greeter"]);
    assert_eq!(digest_out, "manifest.toml is up to date\n");
}

#[test]
fn registry_files_are_hostile_input() {
    let td = TestDir::new();
    config_naming(&td, "registry");
    let outside = shared(&td, "elsewhere", "greeting.v1", GREETING);
    fs::create_dir_all(td.join("registry")).unwrap();
    std::os::unix::fs::symlink(&outside, td.join("registry/greeting.v1.json")).unwrap();
    let dir = greeter(&td, "greeter", "greeting.v1");
    td.expect(0, &["digest", "agents/greeter"]);
    assert!(!fs::read_to_string(dir.join("manifest.toml")).unwrap().contains("shared_schemas"));
    let (code, findings) = td.lint_json([&dir]);
    assert_eq!(code, 1);
    assert_eq!(
        findings[0]["message"],
        format!(
            "`schema:greeting.v1` resolves to the shared registry file {}, which cannot be used: it is a symbolic link; registry schemas must be regular files",
            td.join("registry/greeting.v1.json").display()
        )
    );
    // An id is never a path: `schema:../elsewhere/greeting.v1` is refused before any lookup.
    greeter(&td, "escape", "../elsewhere/greeting.v1");
    let (code, findings) = td.lint_json([td.bundle_path("escape")]);
    assert_eq!(code, 1);
    assert_eq!(findings[0]["code"], "RLP303");
    assert!(findings[0]["message"].as_str().unwrap().contains("is not a schema id"), "{findings:?}");
    // A malformed config key names the file and the key.
    let config = td.write_config("[schemas]\nregistries = \"../registry\"\n");
    let (_, err) = td.expect(2, &["lint", "agents/greeter"]);
    assert_eq!(
        err,
        format!(
            "error: {}:2:14: `schemas.registries` must be an array of folder paths, found string\n  help: write `registries = [\"/srv/schemas\", \"shared-schemas\"]` under [schemas]: folders holding `<id>.json` files, relative ones to the config file's folder\n",
            config.display()
        )
    );
}
