//! Bundles in the upstream Runloop form (tests/fixtures/upstream): `[ports]`,
//! `[schemas.with]`, fs grants written `~/…` and dotted secret ids load, and
//! lint clean once `rlp digest` listed every file; at call time a `~/…`
//! grant is the running user's `$HOME` below, and a dotted secret comes from
//! its environment variable and is scrubbed.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::bundle::{self, with};
use crate::support::files::{copy_tree, fixture, read};
use crate::support::output::{stderr, stdout, stdout_json, text};
use crate::support::rlp_snapshot;

/// `rlp digest` then `rlp lint` of fixture bundle `name` (copied into the
/// test folder's `agents/`), both outputs as one text.
fn digest_then_lint(td: &TestDir, name: &str) -> String {
    copy_tree(Path::new(&fixture(&format!("upstream/{name}"))), &td.bundle_path(name));
    let digest = td.rlp().current_dir(td.join("agents")).args(["digest", name]).output().unwrap();
    assert_eq!(digest.status.code(), Some(0), "{}", stderr(&digest));
    let lint = td.rlp().current_dir(td.join("agents")).args(["lint", name]).output().unwrap();
    assert_eq!(lint.status.code(), Some(0), "{}", text(&lint));
    format!("$ rlp digest {name}\n{}$ rlp lint {name}\n{}", text(&digest), text(&lint))
}

#[test]
fn an_upstream_bundle_with_tools_digests_and_lints_clean_and_keeps_its_forms() {
    let td = TestDir::new();
    insta::assert_snapshot!("upstream_notebook", digest_then_lint(&td, "notebook"));
    let root = td.bundle_path("notebook");
    let manifest = read(&root.join("manifest.toml"));
    for kept in ["[ports]\nin = [\"intent.note.write.v1\"]", "[schemas.with.properties.title]"] {
        assert!(manifest.contains(kept), "{kept:?} lost:\n{manifest}");
    }
    let original = Path::new(&fixture("upstream/notebook")).to_path_buf();
    for file in ["policy.caps", "tools.json"] {
        assert_eq!(read(&root.join(file)), read(&original.join(file)), "{file} rewritten");
    }
}

/// Before `rlp digest`, an upstream bundle fails lint, and each finding
/// names `rlp digest` as the fix; the policy's says why it must be digested.
#[test]
fn an_upstream_bundle_before_digest_is_told_to_run_rlp_digest() {
    let td = TestDir::new();
    copy_tree(Path::new(&fixture("upstream/notebook")), &td.bundle_path("notebook"));
    let lint = td.rlp().current_dir(td.join("agents")).args(["lint", "notebook"]).output().unwrap();
    assert_eq!(lint.status.code(), Some(1), "{}", text(&lint));
    rlp_snapshot!(&td, &lint);
}

#[test]
fn an_upstream_wasm_agent_without_tools_lints_clean() {
    let td = TestDir::new();
    insta::assert_snapshot!("upstream_relay", digest_then_lint(&td, "relay"));
}

#[test]
fn bad_home_forms_and_dotted_ids_are_errors_that_say_why() {
    let td = TestDir::new();
    let caps =
        "[capabilities]\nfs = [\"~alice/notes\", \"/srv/~/x\", \"~\"]\nsecrets = [\"runloop.home\", \"Mail.key\"]\n";
    td.bundle("strict", json!([]), caps);
    let output = td.rlp().current_dir(td.join("agents")).args(["lint", "strict", "--format", "json"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let findings: Vec<Value> = serde_json::from_value(stdout_json(&output)).unwrap();
    let messages: Vec<&str> = findings.iter().map(|f| f["message"].as_str().unwrap()).collect();
    let not_an_id = "is not a secret id of the form runloop/<scope>/<name> (lower case, digits, _ - .) or \
                     <segment>.<segment>… (each a lower-case letter, then lower case, digits and single `_`)";
    assert_eq!(
        messages,
        [
            "invalid `fs` grant: `~alice/notes`: only `~/<dir>` (below your own home) is supported, not `~` alone or `~user`",
            "invalid `fs` grant: `/srv/~/x` holds a `~` after its start; `~` may only begin a path, as `~/<dir>`",
            "invalid `fs` grant: `~`: only `~/<dir>` (below your own home) is supported, not `~` alone or `~user`",
            &format!("invalid `secrets` grant: `runloop.home` {not_an_id}"),
            &format!("invalid `secrets` grant: `Mail.key` {not_an_id}"),
        ]
    );
}

/// A bundle `homely` whose exec tool `save` declares `fs:~/work` and secret
/// `notes.sync.token`, granted by the same forms in policy.caps; the tool
/// writes the secret to `<dir>/note.txt` and prints it.
fn homely(td: &TestDir, dir: &Path) -> std::path::PathBuf {
    let body =
        "printf '%s' \"$NOTES__SYNC__TOKEN\" > \"$2/note.txt\" && printf '{\"token\":\"%s\"}' \"$NOTES__SYNC__TOKEN\"";
    let script = td.script("save.sh", body);
    let save = with(
        bundle::tool("save", bundle::exec(script.to_str().unwrap(), &[dir.to_str().unwrap()])),
        json!({"capabilities": ["fs:~/work"], "secrets": ["notes.sync.token"]}),
    );
    let caps = "[capabilities]\nexec = true\nfs = [\"~/work\"]\nsecrets = [\"notes.sync.token\"]\n";
    td.bundle("homely", json!([save]), caps)
}

#[test]
fn a_home_grant_is_the_users_home_at_call_time_and_a_dotted_secret_is_read_and_scrubbed() {
    let td = TestDir::new();
    let home = td.join("user");
    let work = home.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let bundle = homely(&td, &work);
    let output = td
        .call(&bundle, "save", json!({}))
        .env("HOME", &home)
        .env("NOTES__SYNC__TOKEN", "s3cret-t0ken")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(stdout_json(&output), json!({"token": "[redacted]"}));
    assert_eq!(read(&work.join("note.txt")), "s3cret-t0ken", "the tool wrote below the expanded grant");
    let events = td.events();
    let call = events.iter().find(|e| e.kind == "tool.call").expect("a call frame").payload().unwrap();
    assert_eq!(call["sandbox"]["write"], json!(["$TMPDIR", work.canonicalize().unwrap()]));
    let ledger = std::fs::read(td.ledger_path()).unwrap();
    assert!(!ledger.windows(12).any(|w| w == b"s3cret-t0ken"), "the secret reached the ledger");
}

#[test]
fn without_an_absolute_home_a_home_grant_grants_nothing() {
    let td = TestDir::new();
    let bundle = homely(&td, &td.join("user/work"));
    let output = td.call(&bundle, "save", json!({})).env("HOME", "relative/home").output().unwrap();
    assert_eq!((output.status.code(), stdout(&output)), (Some(3), String::new()), "{}", stderr(&output));
    // After the note naming the (temporary) bundle folder.
    let err = stderr(&output);
    let lines: Vec<&str> = err.lines().skip(1).collect();
    assert_eq!(
        lines,
        [
            "error: tool `save` is not exposed: it needs `fs:~/work` (policy.caps does not grant it)",
            "  help: grant it under [capabilities] in policy.caps (fs = [\"~/work\"]), then run `rlp digest`",
        ]
    );
}
