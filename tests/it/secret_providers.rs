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
use crate::support::output::{assert_contains, stderr, stdout, stdout_json};
use crate::support::pty::Terminal;
use crate::support::{Sandbox, bundle};

const ID: &str = "runloop/test/token";
const ENV: &str = "RUNLOOP_TEST__TOKEN";
/// A value with a quote, a backslash, a slash and non-ASCII.
const VALUE: &str = "s3\"cr\\et/v\u{e9}lue";

/// A bundle whose tool `check` succeeds, printing `{"match": true}`, only
/// when its secret ID holds `expected`; it prints `{"match": false}` otherwise.
fn checking_bundle(sb: &Sandbox, expected: &str) -> PathBuf {
    let expected_file = sb.state_dir().join("expected.txt");
    std::fs::write(&expected_file, expected).unwrap();
    let script = sb.script(
        "check.sh",
        &format!(
            "if [ \"$(printf '%s' \"${ENV}\")\" = \"$(cat '{}')\" ]; then echo '{{\"match\": true}}'; else echo '{{\"match\": false}}'; fi",
            expected_file.display()
        ),
    );
    let tool = bundle::with_fs(
        bundle::with(bundle::tool("check", bundle::exec(&script.display().to_string(), &[])), json!({"secrets": [ID]})),
        &sb.state_dir(),
    );
    sb.bundle("checker", json!([tool]), &bundle::caps(&format!("exec = true\nsecrets = [\"{ID}\"]\n"), &sb.state_dir()))
}

fn configure(sb: &Sandbox, text: &str) {
    std::fs::create_dir_all(sb.home()).unwrap();
    std::fs::write(sb.home().join("config.toml"), text).unwrap();
}

fn set(sb: &Sandbox, id: &str, value: &str) -> Output {
    sb.rlp().args(["secrets", "set", id]).write_stdin(value).output().unwrap()
}

fn call(sb: &Sandbox, bundle: &std::path::Path) -> Output {
    sb.call(bundle, "check", json!({})).output().unwrap()
}

/// The secret's last audit record.
fn secret_audit(sb: &Sandbox) -> Value {
    let audits: Vec<Value> = sb.events().iter().filter(|e| e.kind == "cap.audit").map(payload).collect();
    audits.into_iter().rev().find(|a| a["capability"] == format!("secrets:{ID}")).expect("an audit of the secret")
}

fn secrets_dir(sb: &Sandbox) -> PathBuf {
    sb.home().join("secrets")
}

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_secret_set_from_stdin_reaches_the_tool_and_is_never_stored_in_clear() {
    let sb = Sandbox::new();
    let bundle = checking_bundle(&sb, VALUE);
    configure(&sb, "[secrets]\nproviders = [\"file\", \"env\"]\n");
    let out = set(&sb, ID, &format!("{VALUE}\n"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let store = secrets_dir(&sb).join("store.age");
    let identity = secrets_dir(&sb).join("identity.txt");
    assert_eq!(
        stdout(&out),
        format!(
            "stored `{ID}` in {} (encrypted)\ncreated the store's key {} (mode 0600): back it up; without it the store cannot be read\n",
            store.display(),
            identity.display()
        )
    );
    assert_eq!(stderr(&out), "");
    assert_eq!((mode(&secrets_dir(&sb)), mode(&store), mode(&identity)), (0o700, 0o600, 0o600));
    let bytes = std::fs::read(&store).unwrap();
    assert!(bytes.starts_with(b"age-encryption.org/v1\n-> X25519 "), "an age file for the identity");
    for needle in [VALUE, "s3\\\"cr", "v\\u00e9lue", "cr\\\\et"] {
        assert!(!bytes.windows(needle.len()).any(|w| w == needle.as_bytes()), "{needle}");
    }
    let identity_text = std::fs::read_to_string(&identity).unwrap();
    assert!(identity_text.lines().any(|l| l.starts_with("AGE-SECRET-KEY-1")), "{identity_text}");

    // The trailing newline of stdin was dropped: the tool sees the value itself.
    let out = call(&sb, &bundle);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout_json(&out), json!({"match": true}));
    let audit = secret_audit(&sb);
    assert_eq!(audit["decision"], "allow");
    assert_eq!(audit["provider"], "file");
    assert_eq!(audit["reason"], format!("granted by policy.caps; the value came from the `file` provider"));

    // Setting it again replaces it, and a running store is re-read.
    let out = set(&sb, ID, "other");
    assert_eq!(stdout(&out), format!("replaced `{ID}` in {} (encrypted)\n", store.display()));
    assert_eq!(stdout_json(&call(&sb, &bundle)), json!({"match": false}));
}

#[test]
fn list_shows_ids_providers_and_changes_never_values() {
    let sb = Sandbox::new();
    let (out, err) = sb.expect(0, &["secrets", "list"]);
    let store = secrets_dir(&sb).join("store.age");
    assert_eq!(out, format!("no secrets in {} (encrypted); add one with `rlp secrets set <id>`\n", store.display()));
    assert_contains(
        &err,
        &format!(
            "warning: calls do not read the `file` provider: it is not in [secrets] providers (from the default); \
             to use it, write `providers = [\"file\", \"env\"]` under [secrets] in {}\n",
            sb.home().join("config.toml").display()
        ),
    );
    for (id, value) in [("runloop/b/second", "v2-SECRET"), (ID, VALUE), ("mail.smtp.key", "v3-SECRET")] {
        assert_eq!(set(&sb, id, value).status.code(), Some(0));
    }
    let (out, _) = sb.expect(0, &["secrets", "list"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "ID                  PROVIDER  CHANGED");
    assert!(lines[1].starts_with("mail.smtp.key       file      20"), "{out}");
    assert!(lines[2].starts_with("runloop/b/second    file      20"), "{out}");
    assert!(lines[3].starts_with("runloop/test/token  file      20"), "{out}");
    assert_eq!(lines[4], format!("3 secrets in {} (encrypted)", store.display()));
    let listed = stdout_json(&sb.expect_output(0, &["secrets", "list", "--format", "json"]));
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
    let sb = Sandbox::new();
    let bundle = checking_bundle(&sb, VALUE);
    configure(&sb, "[secrets]\nproviders = [\"file\"]\n");
    set(&sb, ID, VALUE);
    assert_eq!(call(&sb, &bundle).status.code(), Some(0));
    let store = secrets_dir(&sb).join("store.age");
    let (out, _) = sb.expect(0, &["secrets", "rm", ID]);
    assert_eq!(out, format!("removed `{ID}` from {} (encrypted)\n", store.display()));
    let out = call(&sb, &bundle);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_contains(
        &stderr(&out),
        &format!("error: tool `check` needs secrets that are not available: `{ID}` (file: not in {})", store.display()),
    );
    assert_contains(&stderr(&out), &format!("help: run `rlp secrets set {ID}` (secret `{ID}`), then call again"));
    let audit = secret_audit(&sb);
    assert_eq!(audit["decision"], "deny");
    let (_, err) = sb.expect(1, &["secrets", "rm", ID]);
    assert_contains(&err, &format!("error: `{ID}` is not in {} (encrypted)", store.display()));
}

#[test]
fn providers_are_asked_in_the_configured_order() {
    let sb = Sandbox::new();
    let bundle = checking_bundle(&sb, "from-env");
    set(&sb, ID, "from-file");
    configure(&sb, "[secrets]\nproviders = [\"env\", \"file\"]\n");
    let out = sb.call(&bundle, "check", json!({})).env(ENV, "from-env").output().unwrap();
    assert_eq!(stdout_json(&out), json!({"match": true}));
    assert_eq!(secret_audit(&sb)["provider"], "env");
    configure(&sb, "[secrets]\nproviders = [\"file\", \"env\"]\n");
    let out = sb.call(&bundle, "check", json!({})).env(ENV, "from-env").output().unwrap();
    assert_eq!(stdout_json(&out), json!({"match": false}));
    assert_eq!(secret_audit(&sb)["provider"], "file");
    // Without the file provider, the store is not read.
    configure(&sb, "[secrets]\nproviders = [\"env\"]\n");
    let out = call(&sb, &bundle);
    assert_eq!(out.status.code(), Some(3));
    assert_contains(&stderr(&out), &format!("`{ID}` (env: {ENV} is not set)"));
}

/// Writes `[secrets.cmd]` running `body` as a script (`$1` is the id).
fn command_provider(sb: &Sandbox, body: &str, extra: &str) -> PathBuf {
    let script = sb.script("provide.sh", body);
    configure(
        sb,
        &format!(
            "[secrets]\nproviders = [\"cmd\", \"env\"]\n[secrets.cmd]\ncommand = [\"{}\", \"--id={{id}}\"]\n{extra}",
            script.display()
        ),
    );
    script
}

#[test]
fn a_command_supplies_the_value_with_a_cleared_environment() {
    let sb = Sandbox::new();
    let bundle = checking_bundle(&sb, VALUE);
    let seen = sb.join("seen.txt");
    command_provider(
        &sb,
        &format!(
            "env > '{}'\necho \"$1\" >> '{}'\nprintf '%s\\n' '{}'",
            seen.display(),
            seen.display(),
            VALUE.replace('\'', "'\\''")
        ),
        "env = [\"PROVIDER_SESSION\"]\n",
    );
    let out = sb
        .call(&bundle, "check", json!({}))
        .env("PROVIDER_SESSION", "kept")
        .env("RUNLOOP_OTHER__THING", "not passed")
        .env("UNRELATED", "not passed")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout_json(&out), json!({"match": true}));
    assert_eq!(secret_audit(&sb)["provider"], "cmd");
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
    let sb = Sandbox::new();
    let id = "runloop/../x";
    let ran = sb.join("ran.txt");
    command_provider(&sb, &format!("echo \"$1\" >> '{}'\necho value", ran.display()), "");
    let script = sb.script("check.sh", "echo '{}'");
    let tool =
        bundle::with(bundle::tool("check", bundle::exec(&script.display().to_string(), &[])), json!({"secrets": [id]}));
    let grants = bundle::caps(&format!("exec = true\nsecrets = [\"{id}\"]\n"), &sb.state_dir());
    let stepping = sb.bundle("stepping", json!([bundle::with_fs(tool, &sb.state_dir())]), &grants);
    let out = call(&sb, &stepping);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_contains(&stderr(&out), "`runloop/../x` has a `..` part");
    for command in ["set", "rm"] {
        let out = sb.rlp().args(["secrets", command, id]).write_stdin("value").output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{command}: {}", stderr(&out));
        assert_contains(&stderr(&out), "`runloop/../x` has a `..` part");
    }
    assert!(!ran.exists(), "the command ran: {}", std::fs::read_to_string(&ran).unwrap_or_default());
}

#[test]
fn a_failing_command_refuses_the_call_without_printing_what_it_said() {
    let sb = Sandbox::new();
    let bundle = checking_bundle(&sb, VALUE);
    command_provider(&sb, "echo 'half-SECRET-out'\necho 'half-SECRET-err' >&2\nexit 4", "");
    let out = call(&sb, &bundle);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let script = sb.join("provide.sh");
    assert_contains(
        &stderr(&out),
        &format!(
            "error: tool `check` needs secrets that are not available: `{ID}` (cmd: `{} --id={ID}` exited with status 4; env: {ENV} is not set)",
            script.display()
        ),
    );
    let everything = format!("{}{}", stdout(&out), stderr(&out));
    assert!(!everything.contains("half-SECRET"), "{everything}");
    for (_, bytes) in crate::support::ledger::files(&sb.ledger_path()) {
        assert!(!bytes.windows(11).any(|w| w == b"half-SECRET"));
    }
    let audit = secret_audit(&sb);
    assert_eq!(audit["decision"], "deny");

    // A command that hangs is killed at its timeout.
    command_provider(&sb, "sleep 30", "timeout_ms = 300\n");
    let out = call(&sb, &bundle);
    assert_eq!(out.status.code(), Some(3));
    assert_contains(&stderr(&out), "--id=runloop/test/token` did not answer within 300 ms (timeout_ms)");

    // One that prints more than a value may hold fails the provider: the
    // environment is not asked in its stead.
    command_provider(&sb, "head -c 70000 /dev/zero | tr '\\0' x", "");
    let out = sb.call(&bundle, "check", json!({})).env(ENV, VALUE).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_contains(&stderr(&out), "the `cmd` secret provider failed for `runloop/test/token`");
    assert_contains(&stderr(&out), "printed more than 65536 bytes");
    assert_eq!(secret_audit(&sb)["provider"], "cmd");
}

#[test]
fn a_damaged_store_or_another_key_is_an_error_never_a_partial_read() {
    let sb = Sandbox::new();
    let bundle = checking_bundle(&sb, VALUE);
    configure(&sb, "[secrets]\nproviders = [\"file\", \"env\"]\n");
    for i in 0..50 {
        set(&sb, &format!("runloop/bulk/s{i}"), &"x".repeat(2000));
    }
    set(&sb, ID, VALUE);
    let store = secrets_dir(&sb).join("store.age");
    let original = std::fs::read(&store).unwrap();
    let shown = store.display().to_string();

    // Cut short: the last chunk is missing.
    std::fs::write(&store, &original[..original.len() - 100]).unwrap();
    let out = sb.call(&bundle, "check", json!({})).env(ENV, VALUE).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_contains(
        &stderr(&out),
        &format!("the `file` secret provider failed for `{ID}`: {shown} cannot be read: it is damaged or cut short"),
    );
    let (_, err) = sb.expect(2, &["secrets", "list"]);
    assert_contains(&err, &format!("error: {shown} cannot be read: it is damaged or cut short"));

    // One byte flipped in the payload.
    let mut flipped = original.clone();
    let last = flipped.len() - 10;
    flipped[last] ^= 1;
    std::fs::write(&store, &flipped).unwrap();
    let (_, err) = sb.expect(2, &["secrets", "list"]);
    assert_contains(&err, "cannot be read: it is damaged or cut short");

    // Not an age file at all.
    std::fs::write(&store, "{\"v\":1}").unwrap();
    let (_, err) = sb.expect(2, &["secrets", "list"]);
    assert_contains(&err, &format!("error: {shown} cannot be read: it is not an age file"));

    // Another identity.
    std::fs::write(&store, &original).unwrap();
    let identity = secrets_dir(&sb).join("identity.txt");
    let other = Sandbox::new();
    set(&other, ID, "x");
    std::fs::copy(secrets_dir(&other).join("identity.txt"), &identity).unwrap();
    let (_, err) = sb.expect(2, &["secrets", "list"]);
    assert_contains(&err, &format!("error: {shown} was not encrypted for the identity {}", identity.display()));
    let (_, err) = sb.expect(2, &["secrets", "set", "runloop/x/y"]);
    assert_contains(&err, "was not encrypted for the identity");
    assert_eq!(std::fs::read(&store).unwrap(), original, "a failed set leaves the store as it was");

    // An identity others may read is refused.
    std::fs::set_permissions(&identity, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (_, err) = sb.expect(2, &["secrets", "list"]);
    assert_contains(&err, &format!("error: {} may be read by other users (mode 0644)", identity.display()));
    assert_contains(&err, &format!("help: run `chmod 600 {}`", identity.display()));
}

#[test]
fn concurrent_sets_lose_no_change() {
    let sb = Sandbox::new();
    let children: Vec<_> = (0..8)
        .map(|i| {
            let mut command = sb.command();
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
    let listed = stdout_json(&sb.expect_output(0, &["secrets", "list", "--format", "json"]));
    assert_eq!(listed["secrets"].as_array().unwrap().len(), 8, "{listed}");
}

#[test]
fn a_passphrase_store_opens_with_its_command() {
    let sb = Sandbox::new();
    let bundle = checking_bundle(&sb, VALUE);
    let pass = sb.script("pass.sh", "echo 'correct horse battery staple'");
    configure(
        &sb,
        &format!(
            "[secrets]\nproviders = [\"file\"]\n[secrets.file]\nkey = \"passphrase\"\npassphrase_command = [\"{}\"]\n",
            pass.display()
        ),
    );
    assert_eq!(set(&sb, ID, VALUE).status.code(), Some(0));
    assert!(!secrets_dir(&sb).join("identity.txt").exists());
    let bytes = std::fs::read(secrets_dir(&sb).join("store.age")).unwrap();
    assert!(bytes.starts_with(b"age-encryption.org/v1\n-> scrypt "));
    assert_eq!(stdout_json(&call(&sb, &bundle)), json!({"match": true}));
    sb.script("pass.sh", "echo 'wrong'");
    let out = call(&sb, &bundle);
    assert_eq!(out.status.code(), Some(3));
    assert_contains(&stderr(&out), "the passphrase does not open");
    // A store made with a passphrase, read as if it had an identity.
    configure(&sb, "[secrets]\nproviders = [\"file\"]\n");
    let (_, err) = sb.expect(2, &["secrets", "list"]);
    assert_contains(&err, "is encrypted with a passphrase, but [secrets.file] key is \"identity\"");
}

#[test]
fn a_value_typed_on_a_terminal_is_hidden_and_confirmed() {
    let sb = Sandbox::new();
    let mut command: Command = sb.command();
    command.args(["secrets", "set", ID]);
    let mut terminal = Terminal::spawn(command, Duration::from_secs(20));
    terminal.answer(&format!("Value of {ID}"), "typed-SECRET");
    terminal.answer("Again, to confirm", "typed-other");
    terminal.expect("The two entries differ; try again.");
    terminal.answer(&format!("Value of {ID}"), "typed-SECRET");
    terminal.answer("Again, to confirm", "typed-SECRET");
    terminal.expect(&format!("stored `{ID}`"));
    terminal.expect_end();
    let bundle = checking_bundle(&sb, "typed-SECRET");
    configure(&sb, "[secrets]\nproviders = [\"file\"]\n");
    assert_eq!(stdout_json(&call(&sb, &bundle)), json!({"match": true}));
}

#[test]
fn bad_values_and_settings_are_clear_errors() {
    let sb = Sandbox::new();
    let (_, err) = sb.expect(2, &["secrets", "set", ID]);
    assert_contains(&err, "error: the value on stdin is empty");
    let out = sb.rlp().args(["secrets", "set", ID]).write_stdin(vec![0xff, 0xfe]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_contains(&stderr(&out), "error: the value on stdin is not UTF-8 text");
    let out = sb.rlp().args(["secrets", "set", ID]).write_stdin("x".repeat(70_000)).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_contains(&stderr(&out), "error: the value on stdin is longer than 65536 bytes");
    let (_, err) = sb.expect(2, &["secrets", "set", "Not/An/Id"]);
    assert_contains(&err, "error: `Not/An/Id` is not a secret id");
    assert!(!secrets_dir(&sb).join("store.age").exists());

    let bundle = checking_bundle(&sb, VALUE);
    configure(&sb, "[secrets]\nproviders = [\"cmd\"]\n");
    let out = call(&sb, &bundle);
    assert_eq!(out.status.code(), Some(2));
    assert_contains(&stderr(&out), "error: the `cmd` secret provider is named in [secrets] in");
    configure(&sb, "[secrets]\nproviders = [\"vault\"]\n");
    let (_, err) = sb.expect(2, &["secrets", "list"]);
    assert_contains(&err, "`secrets.providers` names `vault`, which is not a provider");
    assert_contains(&err, "help: the providers are env, file, cmd, keyring");
}

#[test]
fn without_a_secret_service_the_keyring_is_skipped_saying_so() {
    let sb = Sandbox::new();
    let bundle = checking_bundle(&sb, VALUE);
    configure(&sb, "[secrets]\nproviders = [\"keyring\", \"env\"]\n");
    let no_bus = sb.join("no-bus");
    let out = sb
        .call(&bundle, "check", json!({}))
        .env("DBUS_SESSION_BUS_ADDRESS", format!("unix:path={}", no_bus.display()))
        .env(ENV, VALUE)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(secret_audit(&sb)["provider"], "env");
    let out = sb
        .call(&bundle, "check", json!({}))
        .env("DBUS_SESSION_BUS_ADDRESS", format!("unix:path={}", no_bus.display()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert_contains(&stderr(&out), &format!("`{ID}` (keyring: skipped: no Secret Service is running"));
}

/// `script` run by `sh` on a private D-Bus session bus with an unlocked
/// GNOME Keyring, `rlp` on `PATH` and the sandbox's home.
fn on_a_keyring(sb: &Sandbox, script: &str) -> Output {
    for program in ["dbus-run-session", "gnome-keyring-daemon"] {
        assert!(
            Command::new("sh").args(["-c", &format!("command -v {program}")]).output().unwrap().status.success(),
            "{program} is not installed: the keyring tests need Debian's dbus and gnome-keyring packages (.ci/run installs them)"
        );
    }
    let setup = "printf 'unlock' | gnome-keyring-daemon --unlock --components=secrets >/dev/null 2>&1\nsleep 0.3\n";
    let rlp_dir = std::path::Path::new(env!("CARGO_BIN_EXE_rlp")).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", rlp_dir.display(), std::env::var("PATH").unwrap_or_default());
    let xdg = sb.join("xdg");
    std::fs::create_dir_all(xdg.join("data")).unwrap();
    Command::new("dbus-run-session")
        .args(["--", "sh", "-ec", &format!("{setup}{script}")])
        .env("PATH", path)
        .env("RUNLOOP_HOME", sb.home())
        .env("RUNLOOP_SYSTEM_CONFIG", sb.join("no-system-config.toml"))
        .env("HOME", &xdg)
        .env("XDG_DATA_HOME", xdg.join("data"))
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .output()
        .unwrap()
}

#[test]
fn the_keyring_holds_values_rlp_sets_and_reads() {
    let sb = Sandbox::new();
    let bundle = checking_bundle(&sb, VALUE);
    configure(&sb, "[secrets]\nproviders = [\"keyring\"]\n");
    let value_file = sb.join("value.txt");
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
    let out = on_a_keyring(&sb, &script);
    let printed = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{printed}\n{}", stderr(&out));
    let expected = format!(
        "stored `{ID}` in the keyring (Secret Service)\n\
         ID                  PROVIDER  CHANGED\n\
         {ID}  keyring   -\n\
         1 secret in {} (encrypted) and the keyring (Secret Service)\n\
         {{\n  \"match\": true\n}}\n",
        secrets_dir(&sb).join("store.age").display()
    );
    assert!(printed.starts_with(&expected), "{printed}");
    assert!(printed.ends_with(&format!("removed `{ID}` from the keyring (Secret Service)\nexit 3\n")), "{printed}");
    assert!(!printed.contains(VALUE) && !stderr(&out).contains(VALUE));
}

// ------------------------------------------------------------ hostile inputs

#[test]
fn a_command_that_leaves_a_process_holding_its_output_still_answers() {
    let sb = Sandbox::new();
    let bundle = checking_bundle(&sb, "forked-value");
    // The background sleep keeps stdout open after the command exits; the
    // process runner ends it with the command's group.
    command_provider(&sb, "sleep 60 &\nprintf 'forked-value\\n'", "");
    let out = call(&sb, &bundle);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout_json(&out), json!({"match": true}));
    // An endless writer is cut at the bound and fails the provider.
    command_provider(&sb, "yes", "");
    let out = call(&sb, &bundle);
    assert_eq!(out.status.code(), Some(3));
    assert_contains(&stderr(&out), "printed more than 65536 bytes");
}

#[test]
fn a_store_that_is_not_a_file_or_too_large_is_refused_without_reading_it() {
    let sb = Sandbox::new();
    let bundle = checking_bundle(&sb, VALUE);
    configure(&sb, "[secrets]\nproviders = [\"file\", \"env\"]\n");
    set(&sb, ID, VALUE);
    // A folder given as the value's file.
    let (_, err) = sb.expect(2, &["secrets", "set", "--from-file", "/", ID]);
    assert_contains(&err, "error: cannot read the value from /: ");
    let store = secrets_dir(&sb).join("store.age");
    std::fs::remove_file(&store).unwrap();
    // A FIFO no one writes to: opening it must not block.
    assert!(Command::new("mkfifo").arg(&store).status().unwrap().success());
    let (_, err) = sb.expect(2, &["secrets", "list"]);
    assert_contains(&err, &format!("error: {} is not a regular file", store.display()));
    let out = sb.call(&bundle, "check", json!({})).env(ENV, VALUE).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "a broken store is not passed over for the environment");
    assert_contains(&stderr(&out), "the `file` secret provider failed");
    std::fs::remove_file(&store).unwrap();
    // A sparse file past the bound is refused before it is read whole.
    std::fs::File::create(&store).unwrap().set_len(65 * 1024 * 1024).unwrap();
    let (_, err) = sb.expect(2, &["secrets", "list"]);
    assert_contains(&err, &format!("error: {} is larger than 64 MiB", store.display()));
}

#[test]
fn a_full_disk_during_set_leaves_the_store_as_it_was() {
    let sb = Sandbox::new();
    set(&sb, ID, VALUE);
    let secrets = secrets_dir(&sb);
    let saved = sb.join("saved");
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
    let mut command = sb.wrapped(&["unshare", "--mount", "sh", "-c", &script, "sh"]);
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
    let sb = Sandbox::new();
    let bundle = checking_bundle(&sb, VALUE);
    configure(&sb, "[secrets]\nproviders = [\"keyring\", \"env\"]\n");
    // A "session bus" that accepts connections and never says a word.
    let socket = sb.join("silent-bus");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let held = std::thread::spawn(move || listener.incoming().take(4).filter_map(Result::ok).collect::<Vec<_>>());
    let out = sb
        .call(&bundle, "check", json!({}))
        .env("DBUS_SESSION_BUS_ADDRESS", format!("unix:path={}", socket.display()))
        .env(ENV, VALUE)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_contains(
        &stderr(&out),
        "the `keyring` secret provider failed for `runloop/test/token`: the keyring did not answer within 5 s",
    );
    assert_eq!(secret_audit(&sb)["provider"], "keyring");
    drop(held);
}

#[test]
fn a_secret_capability_without_a_secrets_entry_is_still_audited() {
    let sb = Sandbox::new();
    let script = sb.script("ok.sh", "echo '{}'");
    let tool = bundle::with(
        bundle::tool("plain", bundle::exec(&script.display().to_string(), &[])),
        json!({"capabilities": [format!("secrets:{ID}")]}),
    );
    let bundle = sb.bundle("declared", json!([tool]), &format!("[capabilities]\nexec = true\nsecrets = [\"{ID}\"]\n"));
    let out = sb.call(&bundle, "plain", json!({})).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let audit = secret_audit(&sb);
    assert_eq!(audit["decision"], "allow");
    assert_eq!(audit["reason"], "granted by policy.caps");
    assert!(audit.get("provider").is_none(), "{audit}");
}
