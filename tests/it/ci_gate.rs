//! The drop-in CI gate: the GitHub Action's shell steps (action.yml, run by
//! bash as the runner would, step after step) and the pre-commit hooks
//! (.pre-commit-hooks.yaml, run by the real pre-commit from PyPI through
//! `try-repo`) on a sample repository.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::support::output::{assert_contains, text};
use crate::support::process::venv_python;
use crate::support::rlp_snapshot;
use crate::support::{TestDir, bundle};

/// The rlp checkout (what `GITHUB_ACTION_PATH` names on a runner).
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `run:` line of every step of action.yml that runs a shell, in order.
fn action_steps() -> Vec<String> {
    let action = std::fs::read_to_string(repo().join("action.yml")).unwrap();
    action.lines().filter_map(|l| l.trim_start().strip_prefix("run: ")).map(str::to_string).collect()
}

/// A sample repository with two clean bundles under `agents/`.
fn sample() -> TestDir {
    let td = TestDir::new();
    for name in ["mailer", "notes"] {
        td.bundle(
            name,
            json!([bundle::runtime_tool(&format!("{name}.ok"), "ok.sh", &[])]),
            "[capabilities]\nexec = true\n",
        );
    }
    td
}

/// Runs the action's shell steps in `td` on `paths`, as a runner does: each
/// step a bash process, `GITHUB_PATH` entries put on `PATH` for the next.
/// Returns each step's output.
fn run_action(td: &TestDir, paths: &str) -> Vec<Output> {
    let runner = td.join("runner");
    std::fs::create_dir_all(&runner).unwrap();
    let github_path = runner.join("path");
    std::fs::write(&github_path, "").unwrap();
    let mut outputs = Vec::new();
    for step in action_steps() {
        let added: Vec<PathBuf> = std::fs::read_to_string(&github_path).unwrap().lines().map(PathBuf::from).collect();
        // The runner's PATH, without any rlp of the caller's.
        let path = std::env::join_paths(added.into_iter().chain(["/usr/bin".into(), "/bin".into()])).unwrap();
        let output = Command::new("bash")
            .args(["-c", &step])
            .current_dir(td.path())
            .env_clear()
            .env("PATH", path)
            .env("HOME", td.path())
            .env("GITHUB_ACTION_PATH", repo())
            .env("GITHUB_PATH", &github_path)
            .env("RUNNER_TEMP", &runner)
            .env("RLP_BIN", env!("CARGO_BIN_EXE_rlp"))
            .env("RLP_PATHS", paths)
            .env("RLP_SARIF", "rlp.sarif")
            .env("RUNLOOP_HOME", td.home())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        outputs.push(output);
    }
    outputs
}

fn codes(outputs: &[Output]) -> Vec<Option<i32>> {
    outputs.iter().map(|o| o.status.code()).collect()
}

#[test]
fn the_action_passes_clean_bundles_and_fails_on_lint_errors_and_stale_digests() {
    assert_eq!(action_steps().len(), 4, "install, lint, digest, finish");
    let td = sample();
    let clean = run_action(&td, "agents");
    assert_eq!(codes(&clean), [Some(0); 4], "{}", clean.iter().map(text).collect::<String>());
    rlp_snapshot!(&td, &clean[0]);
    rlp_snapshot!(&td, &clean[3]);
    let sarif: Value = serde_json::from_slice(&std::fs::read(td.join("rlp.sarif")).unwrap()).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    assert_eq!(sarif["runs"][0]["results"], json!([]));

    // A file changed after `rlp digest`: the digest step names the bundle, finish fails.
    edit_policy(&td);
    let stale = run_action(&td, "agents");
    assert_eq!(codes(&stale)[2..], [Some(0), Some(1)], "{}", stale.iter().map(text).collect::<String>());
    rlp_snapshot!(&td, &stale[2]);
    rlp_snapshot!(&td, &stale[3]);

    // A lint error: annotations in the log, results in the SARIF, finish fails.
    std::fs::write(td.join("agents/mailer/tools.json"), "{\"tools\": [}").unwrap();
    let broken = run_action(&td, "agents");
    assert_eq!(codes(&broken)[3], Some(1));
    rlp_snapshot!(td.filters().regex(r"the manifest says \d+", "the manifest says [SIZE]"), &broken[1]);
    rlp_snapshot!(&td, &broken[3]);
    let sarif: Value = serde_json::from_slice(&std::fs::read(td.join("rlp.sarif")).unwrap()).unwrap();
    assert!(!sarif["runs"][0]["results"].as_array().unwrap().is_empty(), "{sarif:#}");
}

/// Changes a file of `agents/notes` after its digests were written.
fn edit_policy(td: &TestDir) {
    let path = td.join("agents/notes/policy.caps");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("# reviewed\n{text}")).unwrap();
}

/// The python of the venv holding pre-commit (tests/ci/setup.sh).
fn pre_commit_python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| venv_python("tests/ci/setup.sh", "ci-venv", "the pre-commit hook tests"))
}

/// `pre-commit try-repo <rlp checkout> <hook> --all-files` in `td`, a git repository.
fn try_hook(td: &TestDir, hook: &str) -> Output {
    let rlp_dir = Path::new(env!("CARGO_BIN_EXE_rlp")).parent().unwrap();
    let path = std::env::join_paths([rlp_dir.to_path_buf(), "/usr/bin".into(), "/bin".into()]).unwrap();
    Command::new(pre_commit_python())
        .args(["-m", "pre_commit", "try-repo"])
        .arg(repo())
        .args([hook, "--all-files", "--color", "never"])
        .current_dir(td.path())
        .env("PATH", path)
        .env("PRE_COMMIT_HOME", td.join("pre-commit-cache"))
        .env("RUNLOOP_HOME", td.home())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn git(td: &TestDir, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(td.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", text(&out));
}

#[test]
fn the_pre_commit_hooks_fail_a_stale_digest_until_rlp_digest_runs() {
    let td = sample();
    git(&td, &["init", "-q"]);
    git(&td, &["add", "agents"]);
    git(&td, &["commit", "-q", "-m", "bundles"]);
    for hook in ["rlp-digest-check", "rlp-lint"] {
        let passed = try_hook(&td, hook);
        assert_eq!(passed.status.code(), Some(0), "{hook}: {}", text(&passed));
    }

    edit_policy(&td);
    git(&td, &["add", "agents"]);
    let stale = try_hook(&td, "rlp-digest-check");
    assert_eq!(stale.status.code(), Some(1), "{}", text(&stale));
    assert_contains(&text(&stale), "run `rlp digest agents/notes` to refresh its digests");
    let linted = try_hook(&td, "rlp-lint");
    assert_eq!(linted.status.code(), Some(1), "lint checks digests too: {}", text(&linted));

    let refreshed = td.rlp().args(["digest", "agents/notes"]).output().unwrap();
    assert_eq!(refreshed.status.code(), Some(0), "{}", text(&refreshed));
    git(&td, &["add", "agents"]);
    for hook in ["rlp-digest-check", "rlp-lint"] {
        let passed = try_hook(&td, hook);
        assert_eq!(passed.status.code(), Some(0), "{hook}: {}", text(&passed));
    }
}
