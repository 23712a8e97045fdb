//! Secret providers end to end: the age-encrypted file store managed with
//! `rlp secrets set|list|rm`, a `cmd` provider, the keyring (a real GNOME
//! Keyring on a private D-Bus session), their order, and the audit record
//! naming the provider that answered.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::ledger::payload;
use crate::support::output::{self, assert_contains, stderr, stdout, stdout_json};
use crate::support::pty::Terminal;
use crate::support::rlp_snapshot;
use crate::support::{TestDir, bundle};

const ID: &str = "runloop/test/token";
const ENV: &str = "RUNLOOP_TEST__TOKEN";
/// A value with a quote, a backslash, a slash and non-ASCII.
const VALUE: &str = "s3\"cr\\et/v\u{e9}lue";

/// A bundle whose tool `check` succeeds, printing `{"match": true}`, only
/// when its secret ID holds `expected`; it prints `{"match": false}` otherwise.
fn checking_bundle(td: &TestDir, expected: &str) -> PathBuf {
    let expected_file = td.state_dir().join("expected.txt");
    std::fs::write(&expected_file, expected).unwrap();
    let script = td.script(
        "check.sh",
        &format!(
            "if [ \"$(printf '%s' \"${ENV}\")\" = \"$(cat '{}')\" ]; then echo '{{\"match\": true}}'; else echo '{{\"match\": false}}'; fi",
            expected_file.display()
        ),
    );
    let tool = bundle::with_fs(
        bundle::with(bundle::tool("check", bundle::exec(&script.display().to_string(), &[])), json!({"secrets": [ID]})),
        &td.state_dir(),
    );
    td.bundle("checker", json!([tool]), &bundle::caps(&format!("exec = true\nsecrets = [\"{ID}\"]\n"), &td.state_dir()))
}

fn configure(td: &TestDir, text: &str) {
    std::fs::create_dir_all(td.home()).unwrap();
    std::fs::write(td.home().join("config.toml"), text).unwrap();
}

fn set(td: &TestDir, id: &str, value: &str) -> Output {
    td.rlp().args(["secrets", "set", id]).write_stdin(value).output().unwrap()
}

fn call(td: &TestDir, bundle: &std::path::Path) -> Output {
    td.call(bundle, "check", json!({})).output().unwrap()
}

/// The secret's last audit record.
fn secret_audit(td: &TestDir) -> Value {
    let audits: Vec<Value> = td.events().iter().filter(|e| e.kind == "cap.audit").map(payload).collect();
    audits.into_iter().rev().find(|a| a["capability"] == format!("secrets:{ID}")).expect("an audit of the secret")
}

fn secrets_dir(td: &TestDir) -> PathBuf {
    td.home().join("secrets")
}

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_secret_set_from_stdin_reaches_the_tool_and_is_never_stored_in_clear() {
    let td = TestDir::new();
    let bundle = checking_bundle(&td, VALUE);
    configure(&td, "[secrets]\nproviders = [\"file\", \"env\"]\n");
    let out = set(&td, ID, &format!("{VALUE}\n"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let store = secrets_dir(&td).join("store.age");
    let identity = secrets_dir(&td).join("identity.txt");
    assert_eq!(
        stdout(&out),
        format!(
            "stored `{ID}` in {} (encrypted)\ncreated the store's key {} (mode 0600): back it up; without it the store cannot be read\n",
            store.display(),
            identity.display()
        )
    );
    assert_eq!(stderr(&out), "");
    assert_eq!((mode(&secrets_dir(&td)), mode(&store), mode(&identity)), (0o700, 0o600, 0o600));
    let bytes = std::fs::read(&store).unwrap();
    assert!(bytes.starts_with(b"age-encryption.org/v1\n-> X25519 "), "an age file for the identity");
    for needle in [VALUE, "s3\\\"cr", "v\\u00e9lue", "cr\\\\et"] {
        assert!(!bytes.windows(needle.len()).any(|w| w == needle.as_bytes()), "{needle}");
    }
    let identity_text = std::fs::read_to_string(&identity).unwrap();
    assert!(identity_text.lines().any(|l| l.starts_with("AGE-SECRET-KEY-1")), "{identity_text}");

    // The trailing newline of stdin was dropped: the tool sees the value itself.
    let out = call(&td, &bundle);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout_json(&out), json!({"match": true}));
    let audit = secret_audit(&td);
    assert_eq!(audit["decision"], "allow");
    assert_eq!(audit["provider"], "file");
    assert_eq!(audit["reason"], format!("granted by policy.caps; the value came from the `file` provider"));

    // Setting it again replaces it, and a running store is re-read.
    let out = set(&td, ID, "other");
    assert_eq!(stdout(&out), format!("replaced `{ID}` in {} (encrypted)\n", store.display()));
    assert_eq!(stdout_json(&call(&td, &bundle)), json!({"match": false}));
}

/// With no `[secrets] providers` in any config file, a secret set with
/// `rlp secrets set` reaches the next call: the store is read after the
/// environment, whose variable still wins; naming the providers turns the
/// store off again.
#[test]
fn a_secret_set_with_no_configuration_reaches_the_next_call() {
    let td = TestDir::new();
    let bundle = checking_bundle(&td, VALUE);
    let out = set(&td, ID, VALUE);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stderr(&out), "", "no warning that calls do not read the store");

    let out = call(&td, &bundle);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout_json(&out), json!({"match": true}));
    assert_eq!(secret_audit(&td)["provider"], "file");

    let out = td.call(&bundle, "check", json!({})).env(ENV, "from the environment").output().unwrap();
    assert_eq!(stdout_json(&out), json!({"match": false}), "the environment is asked first");
    assert_eq!(secret_audit(&td)["provider"], "env");

    configure(&td, "[secrets]\nproviders = [\"env\"]\n");
    let out = call(&td, &bundle);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
}

#[test]
fn list_shows_ids_providers_and_changes_never_values() {
    let td = TestDir::new();
    let out = output::stdout(&rlp_snapshot!(&td, td.expect_output(0, &["secrets", "list"])));
    let store = secrets_dir(&td).join("store.age");
    assert_eq!(out, format!("no secrets in {} (encrypted); add one with `rlp secrets set <id>`\n", store.display()));
    for (id, value) in [("runloop/b/second", "v2-SECRET"), (ID, VALUE), ("mail.smtp.key", "v3-SECRET")] {
        assert_eq!(set(&td, id, value).status.code(), Some(0));
    }
    let (out, _) = td.expect(0, &["secrets", "list"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "ID                  PROVIDER  CHANGED");
    assert!(lines[1].starts_with("mail.smtp.key       file      20"), "{out}");
    assert!(lines[2].starts_with("runloop/b/second    file      20"), "{out}");
    assert!(lines[3].starts_with("runloop/test/token  file      20"), "{out}");
    assert_eq!(lines[4], format!("3 secrets in {} (encrypted)", store.display()));
    let listed = stdout_json(&td.expect_output(0, &["secrets", "list", "--format", "json"]));
    let ids: Vec<&str> = listed["secrets"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["mail.smtp.key", "runloop/b/second", ID]);
    assert_eq!(listed["secrets"][0]["provider"], "file");
    assert_eq!(listed["stores"], json!([{"provider": "file", "store": store.display().to_string()}]));
    let all = format!("{out}{listed}");
    for value in ["v2-SECRET", "v3-SECRET", "s3", "lue"] {
        assert!(!all.contains(value), "{value} in {all}");
    }
}

#[test]
fn after_rm_the_call_is_refused() {
    let td = TestDir::new();
    let bundle = checking_bundle(&td, VALUE);
    configure(&td, "[secrets]\nproviders = [\"file\"]\n");
    set(&td, ID, VALUE);
    assert_eq!(call(&td, &bundle).status.code(), Some(0));
    let store = secrets_dir(&td).join("store.age");
    let (out, _) = td.expect(0, &["secrets", "rm", ID]);
    assert_eq!(out, format!("removed `{ID}` from {} (encrypted)\n", store.display()));
    let out = call(&td, &bundle);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    rlp_snapshot!(&td, &out);
    let audit = secret_audit(&td);
    assert_eq!(audit["decision"], "deny");
    rlp_snapshot!(&td, td.expect_output(1, &["secrets", "rm", ID]));
}

#[test]
fn providers_are_asked_in_the_configured_order() {
    let td = TestDir::new();
    let bundle = checking_bundle(&td, "from-env");
    set(&td, ID, "from-file");
    configure(&td, "[secrets]\nproviders = [\"env\", \"file\"]\n");
    let out = td.call(&bundle, "check", json!({})).env(ENV, "from-env").output().unwrap();
    assert_eq!(stdout_json(&out), json!({"match": true}));
    assert_eq!(secret_audit(&td)["provider"], "env");
    configure(&td, "[secrets]\nproviders = [\"file\", \"env\"]\n");
    let out = td.call(&bundle, "check", json!({})).env(ENV, "from-env").output().unwrap();
    assert_eq!(stdout_json(&out), json!({"match": false}));
    assert_eq!(secret_audit(&td)["provider"], "file");
    // Without the file provider, the store is not read.
    configure(&td, "[secrets]\nproviders = [\"env\"]\n");
    let out = call(&td, &bundle);
    assert_eq!(out.status.code(), Some(3));
    rlp_snapshot!(&td, &out);
}

/// Writes `[secrets.cmd]` running `body` as a script (`$1` is the id).
fn command_provider(td: &TestDir, body: &str, extra: &str) -> PathBuf {
    let script = td.script("provide.sh", body);
    configure(
        td,
        &format!(
            "[secrets]\nproviders = [\"cmd\", \"env\"]\n[secrets.cmd]\ncommand = [\"{}\", \"--id={{id}}\"]\n{extra}",
            script.display()
        ),
    );
    script
}

#[test]
fn a_command_supplies_the_value_with_a_cleared_environment() {
    let td = TestDir::new();
    let bundle = checking_bundle(&td, VALUE);
    let seen = td.join("seen.txt");
    command_provider(
        &td,
        &format!(
            "env > '{}'\necho \"$1\" >> '{}'\nprintf '%s\\n' '{}'",
            seen.display(),
            seen.display(),
            VALUE.replace('\'', "'\\''")
        ),
        "env = [\"PROVIDER_SESSION\"]\n",
    );
    let out = td
        .call(&bundle, "check", json!({}))
        .env("PROVIDER_SESSION", "kept")
        .env("RUNLOOP_OTHER__THING", "not passed")
        .env("UNRELATED", "not passed")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout_json(&out), json!({"match": true}));
    assert_eq!(secret_audit(&td)["provider"], "cmd");
    let seen = std::fs::read_to_string(seen).unwrap();
    assert_contains(&seen, "PROVIDER_SESSION=kept\n");
    assert_contains(&seen, &format!("--id={ID}\n"));
    assert!(!seen.contains("RUNLOOP_") && !seen.contains("UNRELATED"), "{seen}");
}

/// An id with a `..` part never reaches the `cmd` provider, whose
/// `pass show {id}` would read outside the password store: the tool that
/// lists it (and a policy granting it) is refused before any provider runs,
/// and `rlp secrets set|rm` refuse it too.
#[test]
fn an_id_with_a_dot_dot_part_never_reaches_a_command() {
    let td = TestDir::new();
    let id = "runloop/../x";
    let ran = td.join("ran.txt");
    command_provider(&td, &format!("echo \"$1\" >> '{}'\necho value", ran.display()), "");
    let script = td.script("check.sh", "echo '{}'");
    let tool =
        bundle::with(bundle::tool("check", bundle::exec(&script.display().to_string(), &[])), json!({"secrets": [id]}));
    let grants = bundle::caps(&format!("exec = true\nsecrets = [\"{id}\"]\n"), &td.state_dir());
    let stepping = td.bundle("stepping", json!([bundle::with_fs(tool, &td.state_dir())]), &grants);
    let out = call(&td, &stepping);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    rlp_snapshot!(&td, &out);
    for command in ["set", "rm"] {
        let out = td.rlp().args(["secrets", command, id]).write_stdin("value").output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{command}: {}", stderr(&out));
        rlp_snapshot!(&td, &out);
    }
    assert!(!ran.exists(), "the command ran: {}", std::fs::read_to_string(&ran).unwrap_or_default());
}

#[test]
fn a_failing_command_refuses_the_call_without_printing_what_it_said() {
    let td = TestDir::new();
    let bundle = checking_bundle(&td, VALUE);
    command_provider(&td, "echo 'half-SECRET-out'\necho 'half-SECRET-err' >&2\nexit 4", "");
    let out = call(&td, &bundle);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    rlp_snapshot!(&td, &out);
    let everything = format!("{}{}", stdout(&out), stderr(&out));
    assert!(!everything.contains("half-SECRET"), "{everything}");
    for (_, bytes) in crate::support::ledger::files(&td.ledger_path()) {
        assert!(!bytes.windows(11).any(|w| w == b"half-SECRET"));
    }
    let audit = secret_audit(&td);
    assert_eq!(audit["decision"], "deny");

    // A command that hangs is killed at its timeout.
    command_provider(&td, "sleep 30", "timeout_ms = 300\n");
    let out = call(&td, &bundle);
    assert_eq!(out.status.code(), Some(3));
    rlp_snapshot!(&td, &out);

    // One that prints more than a value may hold fails the provider: the
    // environment is not asked in its stead.
    command_provider(&td, "head -c 70000 /dev/zero | tr '\\0' x", "");
    let out = td.call(&bundle, "check", json!({})).env(ENV, VALUE).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    rlp_snapshot!(&td, &out);
    assert_eq!(secret_audit(&td)["provider"], "cmd");
}

#[test]
fn a_damaged_store_or_another_key_is_an_error_never_a_partial_read() {
    let td = TestDir::new();
    let bundle = checking_bundle(&td, VALUE);
    configure(&td, "[secrets]\nproviders = [\"file\", \"env\"]\n");
    for i in 0..50 {
        set(&td, &format!("runloop/bulk/s{i}"), &"x".repeat(2000));
    }
    set(&td, ID, VALUE);
    let store = secrets_dir(&td).join("store.age");
    let original = std::fs::read(&store).unwrap();

    // Cut short: the last chunk is missing.
    std::fs::write(&store, &original[..original.len() - 100]).unwrap();
    let out = td.call(&bundle, "check", json!({})).env(ENV, VALUE).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    rlp_snapshot!(&td, &out);
    rlp_snapshot!(&td, td.expect_output(2, &["secrets", "list"]));

    // One byte flipped in the payload.
    let mut flipped = original.clone();
    let last = flipped.len() - 10;
    flipped[last] ^= 1;
    std::fs::write(&store, &flipped).unwrap();
    rlp_snapshot!(&td, td.expect_output(2, &["secrets", "list"]));

    // Not an age file at all.
    std::fs::write(&store, "{\"v\":1}").unwrap();
    rlp_snapshot!(&td, td.expect_output(2, &["secrets", "list"]));

    // Another identity.
    std::fs::write(&store, &original).unwrap();
    let identity = secrets_dir(&td).join("identity.txt");
    let other = TestDir::new();
    set(&other, ID, "x");
    std::fs::copy(secrets_dir(&other).join("identity.txt"), &identity).unwrap();
    rlp_snapshot!(&td, td.expect_output(2, &["secrets", "list"]));
    rlp_snapshot!(&td, td.expect_output(2, &["secrets", "set", "runloop/x/y"]));
    assert_eq!(std::fs::read(&store).unwrap(), original, "a failed set leaves the store as it was");

    // An identity others may read is refused.
    std::fs::set_permissions(&identity, std::fs::Permissions::from_mode(0o644)).unwrap();
    rlp_snapshot!(&td, td.expect_output(2, &["secrets", "list"]));
}

#[test]
fn concurrent_sets_lose_no_change() {
    let td = TestDir::new();
    let children: Vec<_> = (0..8)
        .map(|i| {
            let mut command = td.command();
            command.args(["secrets", "set", &format!("runloop/many/s{i}")]).stdin(std::process::Stdio::piped());
            command.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
            let mut child = command.spawn().unwrap();
            use std::io::Write;
            child.stdin.take().unwrap().write_all(format!("value-{i}").as_bytes()).unwrap();
            child
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let listed = stdout_json(&td.expect_output(0, &["secrets", "list", "--format", "json"]));
    assert_eq!(listed["secrets"].as_array().unwrap().len(), 8, "{listed}");
}

#[test]
fn a_passphrase_store_opens_with_its_command() {
    let td = TestDir::new();
    let bundle = checking_bundle(&td, VALUE);
    let pass = td.script("pass.sh", "echo 'correct horse battery staple'");
    configure(
        &td,
        &format!(
            "[secrets]\nproviders = [\"file\"]\n[secrets.file]\nkey = \"passphrase\"\npassphrase_command = [\"{}\"]\n",
            pass.display()
        ),
    );
    assert_eq!(set(&td, ID, VALUE).status.code(), Some(0));
    assert!(!secrets_dir(&td).join("identity.txt").exists());
    let bytes = std::fs::read(secrets_dir(&td).join("store.age")).unwrap();
    assert!(bytes.starts_with(b"age-encryption.org/v1\n-> scrypt "));
    assert_eq!(stdout_json(&call(&td, &bundle)), json!({"match": true}));
    td.script("pass.sh", "echo 'wrong'");
    let out = call(&td, &bundle);
    assert_eq!(out.status.code(), Some(3));
    rlp_snapshot!(&td, &out);
    // A store made with a passphrase, read as if it had an identity.
    configure(&td, "[secrets]\nproviders = [\"file\"]\n");
    rlp_snapshot!(&td, td.expect_output(2, &["secrets", "list"]));
}

#[test]
fn a_value_typed_on_a_terminal_is_hidden_and_confirmed() {
    let td = TestDir::new();
    let mut command: Command = td.command();
    command.args(["secrets", "set", ID]);
    let mut terminal = Terminal::spawn(command, Duration::from_secs(20));
    terminal.answer(&format!("Value of {ID}"), "typed-SECRET");
    terminal.answer("Again, to confirm", "typed-other");
    terminal.expect("The two entries differ; try again.");
    terminal.answer(&format!("Value of {ID}"), "typed-SECRET");
    terminal.answer("Again, to confirm", "typed-SECRET");
    terminal.expect(&format!("stored `{ID}`"));
    terminal.expect_end();
    let bundle = checking_bundle(&td, "typed-SECRET");
    configure(&td, "[secrets]\nproviders = [\"file\"]\n");
    assert_eq!(stdout_json(&call(&td, &bundle)), json!({"match": true}));
}

#[test]
fn bad_values_and_settings_are_clear_errors() {
    let td = TestDir::new();
    rlp_snapshot!(&td, td.expect_output(2, &["secrets", "set", ID]));
    let out = td.rlp().args(["secrets", "set", ID]).write_stdin(vec![0xff, 0xfe]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    rlp_snapshot!(&td, &out);
    let out = td.rlp().args(["secrets", "set", ID]).write_stdin("x".repeat(70_000)).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    rlp_snapshot!(&td, &out);
    rlp_snapshot!(&td, td.expect_output(2, &["secrets", "set", "Not/An/Id"]));
    assert!(!secrets_dir(&td).join("store.age").exists());

    let bundle = checking_bundle(&td, VALUE);
    configure(&td, "[secrets]\nproviders = [\"cmd\"]\n");
    let out = call(&td, &bundle);
    assert_eq!(out.status.code(), Some(2));
    rlp_snapshot!(&td, &out);
    configure(&td, "[secrets]\nproviders = [\"vault\"]\n");
    rlp_snapshot!(&td, td.expect_output(2, &["secrets", "list"]));
}

#[test]
fn without_a_secret_service_the_keyring_is_skipped_saying_so() {
    let td = TestDir::new();
    let bundle = checking_bundle(&td, VALUE);
    configure(&td, "[secrets]\nproviders = [\"keyring\", \"env\"]\n");
    let no_bus = td.join("no-bus");
    let out = td
        .call(&bundle, "check", json!({}))
        .env("DBUS_SESSION_BUS_ADDRESS", format!("unix:path={}", no_bus.display()))
        .env(ENV, VALUE)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(secret_audit(&td)["provider"], "env");
    let out = td
        .call(&bundle, "check", json!({}))
        .env("DBUS_SESSION_BUS_ADDRESS", format!("unix:path={}", no_bus.display()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert_contains(&stderr(&out), &format!("`{ID}` (keyring: skipped: no Secret Service is running"));
}

/// `script` run by `sh` on a private D-Bus session bus with an unlocked
/// GNOME Keyring, `rlp` on `PATH` and the test folder's home.
fn on_a_keyring(td: &TestDir, script: &str) -> Output {
    for program in ["dbus-run-session", "gnome-keyring-daemon"] {
        assert!(
            Command::new("sh").args(["-c", &format!("command -v {program}")]).output().unwrap().status.success(),
            "{program} is not installed: the keyring tests need Debian's dbus and gnome-keyring packages (.ci/run installs them)"
        );
    }
    let setup = "printf 'unlock' | gnome-keyring-daemon --unlock --components=secrets >/dev/null 2>&1\nsleep 0.3\n";
    let rlp_dir = std::path::Path::new(env!("CARGO_BIN_EXE_rlp")).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", rlp_dir.display(), std::env::var("PATH").unwrap_or_default());
    let xdg = td.join("xdg");
    std::fs::create_dir_all(xdg.join("data")).unwrap();
    Command::new("dbus-run-session")
        .args(["--", "sh", "-ec", &format!("{setup}{script}")])
        .env("PATH", path)
        .env("RUNLOOP_HOME", td.home())
        .env("RUNLOOP_SYSTEM_CONFIG", td.join("no-system-config.toml"))
        .env("HOME", &xdg)
        .env("XDG_DATA_HOME", xdg.join("data"))
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .output()
        .unwrap()
}

#[test]
fn the_keyring_holds_values_rlp_sets_and_reads() {
    let td = TestDir::new();
    let bundle = checking_bundle(&td, VALUE);
    configure(&td, "[secrets]\nproviders = [\"keyring\"]\n");
    let value_file = td.join("value.txt");
    std::fs::write(&value_file, VALUE).unwrap();
    let args = json!({}).to_string();
    let script = format!(
        "rlp secrets set --provider keyring {ID} < '{value}'\n\
         rlp secrets list\n\
         rlp tools call '{bundle}' check --args '{args}'\n\
         secret-tool lookup service rlp username {ID} | grep -c . || true\n\
         rlp secrets rm --provider keyring {ID}\n\
         rlp tools call '{bundle}' check --args '{args}' || echo \"exit $?\"\n",
        value = value_file.display(),
        bundle = bundle.display(),
    );
    let out = on_a_keyring(&td, &script);
    let printed = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{printed}\n{}", stderr(&out));
    let expected = format!(
        "stored `{ID}` in the keyring (Secret Service)\n\
         ID                  PROVIDER  CHANGED\n\
         {ID}  keyring   -\n\
         1 secret in {} (encrypted) and the keyring (Secret Service)\n\
         {{\n  \"match\": true\n}}\n",
        secrets_dir(&td).join("store.age").display()
    );
    assert!(printed.starts_with(&expected), "{printed}");
    assert!(printed.ends_with(&format!("removed `{ID}` from the keyring (Secret Service)\nexit 3\n")), "{printed}");
    assert!(!printed.contains(VALUE) && !stderr(&out).contains(VALUE));
}

// ------------------------------------------------------------ hostile inputs

#[test]
fn a_command_that_leaves_a_process_holding_its_output_still_answers() {
    let td = TestDir::new();
    let bundle = checking_bundle(&td, "forked-value");
    // The background sleep keeps stdout open after the command exits; the
    // process runner ends it with the command's group.
    command_provider(&td, "sleep 60 &\nprintf 'forked-value\\n'", "");
    let out = call(&td, &bundle);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout_json(&out), json!({"match": true}));
    // An endless writer is cut at the bound and fails the provider.
    command_provider(&td, "yes", "");
    let out = call(&td, &bundle);
    assert_eq!(out.status.code(), Some(3));
    rlp_snapshot!(&td, &out);
}

#[test]
fn a_store_that_is_not_a_file_or_too_large_is_refused_without_reading_it() {
    let td = TestDir::new();
    let bundle = checking_bundle(&td, VALUE);
    configure(&td, "[secrets]\nproviders = [\"file\", \"env\"]\n");
    set(&td, ID, VALUE);
    // A folder given as the value's file.
    let (_, err) = td.expect(2, &["secrets", "set", "--from-file", "/", ID]);
    assert_contains(&err, "error: cannot read the value from /: ");
    let store = secrets_dir(&td).join("store.age");
    std::fs::remove_file(&store).unwrap();
    // A FIFO no one writes to: opening it must not block.
    assert!(Command::new("mkfifo").arg(&store).status().unwrap().success());
    rlp_snapshot!(&td, td.expect_output(2, &["secrets", "list"]));
    let out = td.call(&bundle, "check", json!({})).env(ENV, VALUE).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "a broken store is not passed over for the environment");
    rlp_snapshot!(&td, &out);
    std::fs::remove_file(&store).unwrap();
    // A sparse file past the bound is refused before it is read whole.
    std::fs::File::create(&store).unwrap().set_len(65 * 1024 * 1024).unwrap();
    rlp_snapshot!(&td, td.expect_output(2, &["secrets", "list"]));
}

#[test]
fn a_full_disk_during_set_leaves_the_store_as_it_was() {
    let td = TestDir::new();
    set(&td, ID, VALUE);
    let secrets = secrets_dir(&td);
    let saved = td.join("saved");
    std::fs::create_dir_all(&saved).unwrap();
    for file in ["store.age", "identity.txt"] {
        std::fs::copy(secrets.join(file), saved.join(file)).unwrap();
    }
    // secrets/ becomes a 64 KiB file system holding the store, then filled.
    let script = format!(
        "set -e; mount --make-rprivate /; mount -t tmpfs -o size=64k,mode=0700 tmpfs '{s}'; \
         cp -p '{v}/store.age' '{v}/identity.txt' '{s}/'; dd if=/dev/zero of='{s}/filler' bs=1k count=64 2>/dev/null || true; \
         set +e; \"$@\"; code=$?; cp '{s}/store.age' '{v}/after.age'; ls -a '{s}' > '{v}/left.txt'; exit $code",
        s = secrets.display(),
        v = saved.display()
    );
    let mut command = td.wrapped(&["unshare", "--mount", "sh", "-c", &script, "sh"]);
    command.args(["secrets", "set", "runloop/test/other"]);
    let output = assert_cmd::Command::from_std(command).write_stdin("x".repeat(30_000)).output().unwrap();
    let err = stderr(&output);
    assert!(!err.contains("unshare:") && !err.contains("mount:"), "this test needs root and unshare(1): {err}");
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert_contains(&err, "error: cannot write ");
    assert_eq!(std::fs::read(saved.join("after.age")).unwrap(), std::fs::read(saved.join("store.age")).unwrap());
    let left = std::fs::read_to_string(saved.join("left.txt")).unwrap();
    assert!(!left.contains(".rlp-"), "a temporary file was left: {left}");
}

#[test]
fn a_keyring_that_never_answers_fails_the_call_in_bounded_time() {
    let td = TestDir::new();
    let bundle = checking_bundle(&td, VALUE);
    configure(&td, "[secrets]\nproviders = [\"keyring\", \"env\"]\n");
    // A "session bus" that accepts connections and never says a word.
    let socket = td.join("silent-bus");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let held = std::thread::spawn(move || listener.incoming().take(4).filter_map(Result::ok).collect::<Vec<_>>());
    let out = td
        .call(&bundle, "check", json!({}))
        .env("DBUS_SESSION_BUS_ADDRESS", format!("unix:path={}", socket.display()))
        .env(ENV, VALUE)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    rlp_snapshot!(&td, &out);
    assert_eq!(secret_audit(&td)["provider"], "keyring");
    drop(held);
}

#[test]
fn a_secret_capability_without_a_secrets_entry_is_still_audited() {
    let td = TestDir::new();
    let script = td.script("ok.sh", "echo '{}'");
    let tool = bundle::with(
        bundle::tool("plain", bundle::exec(&script.display().to_string(), &[])),
        json!({"capabilities": [format!("secrets:{ID}")]}),
    );
    let bundle = td.bundle("declared", json!([tool]), &format!("[capabilities]\nexec = true\nsecrets = [\"{ID}\"]\n"));
    let out = td.call(&bundle, "plain", json!({})).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let audit = secret_audit(&td);
    assert_eq!(audit["decision"], "allow");
    assert_eq!(audit["reason"], "granted by policy.caps");
    assert!(audit.get("provider").is_none(), "{audit}");
}
