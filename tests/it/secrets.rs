//! Secrets end to end: a value echoed back by an exec tool or an HTTP server
//! in any spelling (raw, JSON-escaped, base64, percent-encoded) never reaches
//! rlp's output, the ledger or the trace commands; and each secret id is read
//! from an environment variable of its own.

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use crate::support::http::{Request, Server, reply};
use crate::support::ledger::{self, payload};
use crate::support::output::{assert_contains, stdout_json};
use crate::support::process::decode_environ;
use crate::support::{TestDir, bundle};

/// Holds `"`, `\`, `/`, a tab, a space, `+`, `=`, a non-ASCII and a non-BMP character.
pub(crate) const SECRET: &str = "Qx9k\"Zr\\7w/Pv\tm\u{e9}\u{1F600} Lt3Nb8+=";
pub(crate) const SECRET_ID: &str = "runloop/test/token";
pub(crate) const SECRET_ENV: &str = "RUNLOOP_TEST__TOKEN";
/// ASCII only (a header value cannot carry more), with `"`, `\`, `/`, a space and `+`.
const HEADER_SECRET: &str = "Hx7q\"t\\k/Q9 +z=W4~";
const HEADER_SECRET_ID: &str = "runloop/test/http_token";
const HEADER_SECRET_ENV: &str = "RUNLOOP_TEST__HTTP_TOKEN";
const TRACE: &str = "0197b0ff-0000-7000-8000-00000000c0de";

// ---------------------------------------------------------------- helpers

/// Everything the ledger files hold, byte for byte.
fn ledger_bytes(td: &TestDir) -> Vec<(String, Vec<u8>)> {
    let files: Vec<(String, Vec<u8>)> =
        ledger::files(&td.ledger_path()).into_iter().map(|(path, bytes)| (path.display().to_string(), bytes)).collect();
    assert!(files.iter().any(|(path, _)| path.ends_with("-wal")), "no -wal file to scan");
    files
}

/// What `trace show` (human and json) and `trace export` print for TRACE.
fn trace_outputs(td: &TestDir) -> Vec<(String, Vec<u8>)> {
    [vec!["trace", "show", TRACE], vec!["trace", "show", TRACE, "--format", "json"], vec!["trace", "export", TRACE]]
        .into_iter()
        .map(|args| {
            let output = td.rlp().args(&args).output().unwrap();
            assert_eq!(output.status.code(), Some(0), "{args:?}: {}", text(&output.stderr));
            assert!(text(&output.stdout).contains("[redacted]"), "{args:?}: {}", text(&output.stdout));
            (args.join(" "), [output.stdout, output.stderr].concat())
        })
        .collect()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn exec_tool(id: &str, command: impl AsRef<Path>, args: &[&str], secrets: &[&str]) -> Value {
    json!({
        "id": id,
        "description": format!("test tool {id}"),
        "transport": {"kind": "exec", "command": command.as_ref(), "args": args},
        "input_schema": {"type": "object"},
        "result_schema": {},
        "secrets": secrets,
        "requires_confirmation": false,
    })
}

/// The lines of policy.caps granting exec and `secrets`.
fn exec_grants(secrets: &[&str]) -> String {
    format!("exec = true\nsecrets = {}\n", json!(secrets))
}

/// The policy granting exec and `secrets`.
fn exec_caps(secrets: &[&str]) -> String {
    format!("[capabilities]\n{}", exec_grants(secrets))
}

/// Each character of `value` written by `spell`.
fn spelled(value: &str, spell: impl Fn(usize, char) -> String) -> String {
    value.chars().enumerate().map(|(i, c)| spell(i, c)).collect()
}

fn json_u(c: char, upper: bool) -> String {
    let mut units = [0; 2];
    let text: String = c.encode_utf16(&mut units).iter().map(|u| format!("\\u{u:04x}")).collect();
    if upper { text.to_uppercase().replace("\\U", "\\u") } else { text }
}

fn percent(value: &str, upper: bool) -> String {
    value.bytes().map(|b| if upper { format!("%{b:02X}") } else { format!("%{b:02x}") }).collect()
}

/// The JSON string body of `text` (what it looks like inside JSON).
fn json_inner(text: &str) -> String {
    let quoted = serde_json::to_string(text).unwrap();
    quoted[1..quoted.len() - 1].to_string()
}

/// The base64 characters of `base64(prefix + value + …)` that depend on
/// `value`'s bytes alone.
fn embedded_run(prefix: &str, value: &str) -> String {
    let encoded = STANDARD_NO_PAD.encode(format!("{prefix}{value}"));
    let (p, n) = (prefix.len(), value.len());
    encoded[(8 * p).div_ceil(6)..8 * (p + n) / 6].to_string()
}

/// The spellings of `value` a tool may print whole, each with a label.
pub(crate) fn whole_spellings(value: &str) -> Vec<(String, String)> {
    let mut out = vec![
        ("raw", value.to_string()),
        ("json", json_inner(value)),
        ("json-in-json", json_inner(&json_inner(value))),
        ("php", json_inner(value).replace('/', "\\/")),
        ("u-lower", spelled(value, |_, c| json_u(c, false))),
        ("u-upper", spelled(value, |_, c| json_u(c, true))),
        ("u-mixed", spelled(value, |i, c| if i % 2 == 0 { json_u(c, i % 4 == 0) } else { c.to_string() })),
        ("b64", STANDARD.encode(value)),
        ("b64-nopad", STANDARD_NO_PAD.encode(value)),
        ("b64-url", URL_SAFE.encode(value)),
        ("b64-url-nopad", URL_SAFE_NO_PAD.encode(value)),
        ("b64-php", STANDARD.encode(value).replace('/', "\\/")),
        ("pct-upper", percent(value, true)),
        ("pct-lower", percent(value, false)),
        ("pct-form", url::form_urlencoded::byte_serialize(value.as_bytes()).collect()),
    ];
    let mixed = spelled(value, |i, c| if i % 2 == 1 { percent(&c.to_string(), i % 3 == 0) } else { c.to_string() });
    out.push(("pct-mixed", mixed));
    out.into_iter().map(|(label, text)| (label.to_string(), text)).collect()
}

/// `base64(user:value…)` texts, each with the run that must not survive.
fn embedded_spellings(value: &str) -> Vec<(String, String, String)> {
    [("api:", ""), ("user:", ""), ("admin:", ":x")]
        .iter()
        .flat_map(|(prefix, suffix)| {
            let plain = format!("{prefix}{value}{suffix}");
            let run = embedded_run(prefix, value);
            [
                (format!("basic {prefix}"), STANDARD.encode(&plain), run.clone()),
                (format!("basic-url {prefix}"), URL_SAFE.encode(&plain), run.replace('+', "-").replace('/', "_")),
            ]
        })
        .collect()
}

/// Every text whose presence would show `value`: each spelling, as it is and
/// as it looks inside JSON, the runs of embedded base64, and pieces of the value.
pub(crate) fn needles(value: &str, pieces: &[&str]) -> Vec<String> {
    let mut needles: Vec<String> = whole_spellings(value).into_iter().map(|(_, s)| s).collect();
    needles.extend(embedded_spellings(value).into_iter().map(|(_, _, run)| run));
    needles.extend(needles.clone().iter().map(|s| json_inner(s)));
    needles.extend(pieces.iter().map(|p| p.to_string()));
    needles
}

pub(crate) fn assert_absent(needles: &[String], what: &str, bytes: &[u8]) {
    for needle in needles {
        let needle = needle.as_bytes();
        assert!(!bytes.windows(needle.len()).any(|w| w == needle), "{what} holds {:?}", text(needle));
    }
}

/// A tool that reports its initial environment (hex, so values survive scrubbing).
const ENV_SCRIPT: &str = "printf '{\"environ\":\"%s\"}\\n' \"$(od -An -v -tx1 < /proc/$$/environ | tr -d ' \\n')\"\n";

// ------------------------------------------------------------ point A: exec

/// Echoes its secret (from the environment, and in the spellings the test
/// wrote to DATA beforehand) on stderr, or prints `DATA/<mode>.json`.
const ECHO_SCRIPT: &str = r#"# $1 is the blob, $2 the mode.
case "$2" in
  stderr) printf 'env: %s\n' "$RUNLOOP_TEST__TOKEN" >&2
          printf 'env-b64: %s\n' "$(printf '%s' "$RUNLOOP_TEST__TOKEN" | base64 -w0)" >&2
          cat 'DATA/spellings.txt' >&2; exit 3 ;;
  *) cat "DATA/$2.json" ;;
esac
"#;

#[test]
fn an_exec_tool_echoing_its_secret_in_any_spelling_leaks_nothing() {
    let td = TestDir::new();
    assert_echoes_leak_nothing(&td, &[(SECRET_ENV, SECRET)]);
}

#[test]
fn a_secret_from_the_file_store_echoed_in_any_spelling_leaks_nothing() {
    let td = TestDir::new();
    td.rlp().args(["secrets", "set", SECRET_ID]).write_stdin(SECRET).assert().code(0);
    std::fs::write(td.home().join("config.toml"), "[secrets]\nproviders = [\"file\"]\n").unwrap();
    assert_echoes_leak_nothing(&td, &[]);
    let needles = needles(SECRET, &["Qx9k", "Lt3Nb8"]);
    for file in ["store.age", "identity.txt"] {
        let path = td.home().join("secrets").join(file);
        assert_absent(&needles, file, &std::fs::read(path).unwrap());
    }
}

#[test]
fn a_secret_from_a_command_echoed_in_any_spelling_leaks_nothing() {
    let td = TestDir::new();
    let value_file = td.join("value.txt");
    std::fs::write(&value_file, format!("{SECRET}\n")).unwrap();
    let script = td
        .script("print_secret.sh", &format!("[ \"$1\" = '{SECRET_ID}' ] || exit 1\ncat '{}'\n", value_file.display()));
    let config =
        format!("[secrets]\nproviders = [\"cmd\"]\n[secrets.cmd]\ncommand = [\"{}\", \"{{id}}\"]\n", script.display());
    std::fs::create_dir_all(td.home()).unwrap();
    std::fs::write(td.home().join("config.toml"), config).unwrap();
    assert_echoes_leak_nothing(&td, &[]);
}

/// Calls tools that echo the secret SECRET_ID — provided by `env` or by the
/// home's configured provider — in every spelling, in results, stderr and
/// an error envelope, and finds it in none of rlp's output, the ledger
/// files or the trace commands.
fn assert_echoes_leak_nothing(td: &TestDir, env: &[(&str, &str)]) {
    let data = td.state_dir();
    let whole = whole_spellings(SECRET);
    let embedded = embedded_spellings(SECRET);
    let mut lines: Vec<String> = whole.iter().map(|(label, s)| format!("{label}: {s}")).collect();
    lines.extend(embedded.iter().map(|(label, s, _)| format!("{label} {s}")));
    std::fs::write(data.join("spellings.txt"), lines.join("\n") + "\n").unwrap();
    let joined = whole.iter().map(|(label, s)| format!("{label}: {s}")).collect::<Vec<_>>().join(" | ");
    std::fs::write(data.join("envelope.json"), json!({"outcome": "error", "message": joined}).to_string()).unwrap();
    let inner = json!({"token": SECRET});
    std::fs::write(data.join("nested.json"), json!({"payload": inner.to_string()}).to_string()).unwrap();
    let result: serde_json::Map<String, Value> =
        whole.iter().map(|(label, s)| (label.clone(), json!(s))).chain([("embedded".into(), json!(lines))]).collect();
    std::fs::write(data.join("result.json"), Value::Object(result).to_string()).unwrap();
    let script = td.script("echo_secret.sh", &ECHO_SCRIPT.replace("DATA", &data.display().to_string()));
    let tools = ["stderr", "envelope", "nested", "result"]
        .map(|mode| bundle::with_fs(exec_tool(&format!("echo.{mode}"), &script, &[mode], &[SECRET_ID]), &data));
    let bundle = td.bundle("echoer", json!(tools), &bundle::caps(&exec_grants(&[SECRET_ID]), &data));

    let mut printed = Vec::new();
    let mut run = |mode: &str, code: i32| {
        let output = td
            .call(&bundle, &format!("echo.{mode}"), json!({"echo": SECRET}))
            .args(["--trace-id", TRACE])
            .envs(env.iter().copied())
            .output();
        let output = output.unwrap();
        assert_eq!(output.status.code(), Some(code), "{mode}: {}", text(&output.stderr));
        printed.push((format!("`tools call echo.{mode}`"), [output.stdout.clone(), output.stderr.clone()].concat()));
        output
    };

    let stderr = text(&run("stderr", 1).stderr);
    for label in ["env", "env-b64"].iter().copied().chain(whole.iter().map(|(l, _)| l.as_str())) {
        assert!(stderr.contains(&format!("{label}: [redacted]\n")), "{label}: {stderr}");
    }
    for (label, _, _) in &embedded {
        let line = stderr.lines().find(|l| l.starts_with(label.as_str())).unwrap_or_else(|| panic!("{label}"));
        assert_contains(line, "[redacted]");
    }

    let stderr = text(&run("envelope", 1).stderr);
    let scrubbed = whole.iter().map(|(label, _)| format!("{label}: [redacted]")).collect::<Vec<_>>().join(" | ");
    assert_contains(&stderr, &format!("error: tool `echo.envelope` failed: {scrubbed}"));

    let output = run("nested", 0);
    let shown: Value = stdout_json(&output);
    assert_eq!(shown, json!({"payload": r#"{"token":"[redacted]"}"#}));

    let output = run("result", 0);
    let shown: Value = stdout_json(&output);
    for (label, _) in &whole {
        assert_eq!(shown[label], "[redacted]", "{label}");
    }

    let needles = needles(SECRET, &["Qx9k", "Lt3Nb8"]);
    for (what, bytes) in printed.iter().chain(&ledger_bytes(td)).chain(&trace_outputs(td)) {
        assert_absent(&needles, what, bytes);
    }
}

// ------------------------------------------------------------ point A: http

/// A `401` body echoing the request's bearer token in the spelling its path
/// names (`/echo/<kind>`).
fn echo_token(request: &Request) -> String {
    let token = request.header("authorization").and_then(|v| v.strip_prefix("Bearer ")).unwrap_or_default();
    let echoed = match request.path().trim_start_matches("/echo/") {
        "pct-upper" => percent(token, true),
        "pct-lower" => percent(token, false),
        "pct-form" => url::form_urlencoded::byte_serialize(token.as_bytes()).collect(),
        "b64" => STANDARD.encode(token),
        "b64-url" => URL_SAFE_NO_PAD.encode(token),
        "basic" => STANDARD.encode(format!("user:{token}")),
        "basic-url" => URL_SAFE.encode(format!("api:{token}:x")),
        _ => token.to_string(), // "json": as it is, which the JSON body escapes
    };
    json!({"error": format!("bad token {echoed}")}).to_string()
}

#[test]
fn an_http_server_echoing_the_header_secret_encoded_leaks_nothing() {
    let server = Server::start(|request| reply(401, &echo_token(request)));
    let port = server.port;
    let td = TestDir::new();
    let tool = json!({
        "id": "echo.http",
        "description": "echoes its token",
        "transport": {"kind": "http", "method": "GET", "url": format!("http://127.0.0.1:{port}/echo/{{kind}}"),
                      "headers": {"Authorization": format!("Bearer ${{secret:{HEADER_SECRET_ID}}}")}},
        "input_schema": {"type": "object", "properties": {"kind": {"type": "string"}}, "required": ["kind"]},
        "result_schema": {},
        "secrets": [HEADER_SECRET_ID],
        "requires_confirmation": false,
    });
    let caps = format!("[capabilities]\nnet = [\"127.0.0.1:{port}\"]\nsecrets = [\"{HEADER_SECRET_ID}\"]\n");
    let bundle = td.bundle("httpecho", json!([tool]), &caps);
    let mut printed = Vec::new();
    for kind in ["json", "pct-upper", "pct-lower", "pct-form", "b64", "b64-url", "basic", "basic-url"] {
        let output = td
            .call(&bundle, "echo.http", json!({"kind": kind}))
            .args(["--trace-id", TRACE])
            .env(HEADER_SECRET_ENV, HEADER_SECRET)
            .output()
            .unwrap();
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{kind}: {stderr}");
        let line = stderr.lines().find(|l| l.starts_with("error: HTTP 401 Unauthorized: ")).unwrap_or(&stderr);
        if kind.starts_with("basic") {
            assert!(line.contains("[redacted]"), "{kind}: {line}");
        } else {
            assert_eq!(line, r#"error: HTTP 401 Unauthorized: {"error":"bad token [redacted]"}"#, "{kind}");
        }
        printed.push((format!("`tools call` ({kind})"), [output.stdout, output.stderr].concat()));
    }
    let needles = needles(HEADER_SECRET, &["Hx7q", "Q9 +z"]);
    for (what, bytes) in printed.iter().chain(&ledger_bytes(&td)).chain(&trace_outputs(&td)) {
        assert_absent(&needles, what, bytes);
    }
}

// ------------------------------------------------ point B: environment names

const COLLIDING: [(&str, &str); 4] = [
    ("runloop/mail/api_key", "RUNLOOP_MAIL__API_KEY"),
    ("runloop/mail_api/key", "RUNLOOP_MAIL_API__KEY"),
    ("runloop/mail/api-key", "RUNLOOP__MAIL_SAPI_HKEY"),
    ("runloop/mail/api.key", "RUNLOOP__MAIL_SAPI_DKEY"),
];

/// Calls tool `env` of `bundle` and returns the environment it saw.
fn environment_seen(td: &TestDir, bundle: &Path, env: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut cmd = td.call(bundle, "env", json!({}));
    cmd.args(["--trace-id", TRACE]);
    for (name, value) in env {
        cmd.env(name, value);
    }
    let output = cmd.output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let result: Value = stdout_json(&output);
    decode_environ(result["environ"].as_str().unwrap())
}

fn names(environ: &BTreeMap<String, String>) -> Vec<&str> {
    environ.keys().map(String::as_str).collect()
}

#[test]
fn ids_that_shared_one_variable_each_read_their_own() {
    let td = TestDir::new();
    let ids: Vec<&str> = COLLIDING.iter().map(|(id, _)| *id).collect();
    let script = td.script("env.sh", ENV_SCRIPT);
    let bundle = td.bundle("collide", json!([exec_tool("env", &script, &[], &ids)]), &exec_caps(&ids));
    let mut env: Vec<(&str, &str)> = vec![("RUNLOOP_MAIL_API_KEY", "shared-old-value")];
    let values = ["value-underscore", "value-scope", "value-hyphen", "value-dot"];
    env.extend(COLLIDING.iter().zip(values).map(|((_, name), value)| (*name, value)));
    let seen = environment_seen(&td, &bundle, &env);
    assert_eq!(
        names(&seen),
        [
            "LANG",
            "PATH",
            "RLP_INVOCATION_ID",
            "RUNLOOP_MAIL_API__KEY",
            "RUNLOOP_MAIL__API_KEY",
            "RUNLOOP__MAIL_SAPI_DKEY",
            "RUNLOOP__MAIL_SAPI_HKEY",
            "TMPDIR"
        ],
        "the shared earlier name is passed to none of them"
    );
    for ((_, name), value) in COLLIDING.iter().zip(values) {
        assert_eq!(seen[*name], value, "{name}");
    }
}

#[test]
fn an_id_whose_earlier_name_is_shared_never_reads_it() {
    let td = TestDir::new();
    let marker = td.join("ran");
    let script = td.script("touch.sh", &format!("touch '{}'\necho '{{}}'\n", marker.display()));
    let id = "runloop/mail/api-key";
    let bundle = td.bundle("hyphen", json!([exec_tool("touch", &script, &[], &[id])]), &exec_caps(&[id]));
    let value = "only-the-shared-name-holds-this";
    let output = td
        .call(&bundle, "touch", json!({}))
        .args(["--trace-id", TRACE])
        .env("RUNLOOP_MAIL_API_KEY", value)
        .output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(!marker.exists(), "the tool never ran");
    assert_contains(
        &stderr,
        "error: tool `touch` needs secrets that are not available: `runloop/mail/api-key` (env: \
         RUNLOOP__MAIL_SAPI_HKEY is not set (RUNLOOP_MAIL_API_KEY is, but that name is shared by several ids))\n  \
         help: set the environment variable RUNLOOP__MAIL_SAPI_HKEY (secret `runloop/mail/api-key`), then call again",
    );
    let audits: Vec<Value> = td.events().iter().map(payload).collect();
    let denial = audits.iter().rev().find(|a| a["capability"] == format!("secrets:{id}")).unwrap();
    assert_eq!(denial["decision"], "deny");
    assert_eq!(
        denial["reason"],
        "the secret is not available (env: RUNLOOP__MAIL_SAPI_HKEY is not set (RUNLOOP_MAIL_API_KEY is, but \
         that name is shared by several ids))"
    );
    let needles = vec![value.to_string()];
    assert_absent(&needles, "rlp's output", &[output.stdout, output.stderr].concat());
    for (what, bytes) in ledger_bytes(&td) {
        assert_absent(&needles, &what, &bytes);
    }
}

#[test]
fn an_id_of_letters_and_digits_still_reads_its_earlier_name() {
    let td = TestDir::new();
    let script = td.script("env.sh", ENV_SCRIPT);
    let id = "runloop/github/token";
    let bundle = td.bundle("github", json!([exec_tool("env", &script, &[], &[id])]), &exec_caps(&[id]));
    let seen = environment_seen(&td, &bundle, &[("RUNLOOP_GITHUB_TOKEN", "from-the-old-name")]);
    assert_eq!(seen["RUNLOOP_GITHUB__TOKEN"], "from-the-old-name");
    assert_eq!(seen["RUNLOOP_GITHUB_TOKEN"], "from-the-old-name");
    let both = [("RUNLOOP_GITHUB_TOKEN", "old"), ("RUNLOOP_GITHUB__TOKEN", "new")];
    let seen = environment_seen(&td, &bundle, &both);
    assert_eq!((seen["RUNLOOP_GITHUB__TOKEN"].as_str(), seen["RUNLOOP_GITHUB_TOKEN"].as_str()), ("new", "new"));
}

#[test]
fn a_tool_gets_new_names_and_the_earlier_ones_it_alone_uses() {
    let td = TestDir::new();
    let script = td.script("env.sh", ENV_SCRIPT);
    let ids = ["runloop/github/token", "runloop/mail/api-key", "runloop/mail/smtp_api_key"];
    let bundle = td.bundle("mixed", json!([exec_tool("env", &script, &[], &ids)]), &exec_caps(&ids));
    let env = [("RUNLOOP_GITHUB__TOKEN", "g"), ("RUNLOOP__MAIL_SAPI_HKEY", "h"), ("RUNLOOP_MAIL__SMTP_API_KEY", "s")];
    let seen = environment_seen(&td, &bundle, &env);
    let expected = [
        ("LANG", "C.UTF-8"),
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("RLP_INVOCATION_ID", seen["RLP_INVOCATION_ID"].as_str()),
        ("RUNLOOP_GITHUB_TOKEN", "g"),
        ("RUNLOOP_GITHUB__TOKEN", "g"),
        ("RUNLOOP_MAIL_API_KEY", "h"),
        ("RUNLOOP_MAIL_SMTP_API_KEY", "s"),
        ("RUNLOOP_MAIL__SMTP_API_KEY", "s"),
        ("RUNLOOP__MAIL_SAPI_HKEY", "h"),
        ("TMPDIR", seen["TMPDIR"].as_str()),
    ];
    let seen: Vec<(&str, &str)> = seen.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(seen, expected);
}

// ------------------------------------------------------ point B: lint RLP214

#[test]
fn lint_warns_about_ids_that_shared_one_variable() {
    let td = TestDir::new();
    let tools = json!([
        exec_tool("mail.a", "/usr/local/bin/mail-a", &[], &["runloop/mail/api_key"]),
        exec_tool("mail.b", "/usr/local/bin/mail-b", &[], &["runloop/github/token", "runloop/mail/api-key"]),
    ]);
    let granted = ["runloop/mail/api_key", "runloop/github/token", "runloop/mail/api-key", "runloop/mail/api.key"];
    td.bundle("demo", tools, &exec_caps(&granted));
    let output = td.rlp().args(["lint", "agents/demo", "--color", "never"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "warnings only: {}", text(&output.stderr));
    let expected = r#"warning[RLP214]: secrets `runloop/mail/api_key` and `runloop/mail/api.key` were both read from RUNLOOP_MAIL_API_KEY; they are now read from RUNLOOP_MAIL__API_KEY and RUNLOOP__MAIL_SAPI_DKEY
  ┌─ agents/demo/policy.caps:3:81
  │
3 │ secrets = ["runloop/mail/api_key","runloop/github/token","runloop/mail/api-key","runloop/mail/api.key"]
  │                                                                                 ^^^^^^^^^^^^^^^^^^^^^^
  │
  = help: set each secret in its own variable; RUNLOOP_MAIL_API_KEY is no longer read for either

warning[RLP214]: secrets `runloop/mail/api_key` and `runloop/mail/api-key` were both read from RUNLOOP_MAIL_API_KEY; they are now read from RUNLOOP_MAIL__API_KEY and RUNLOOP__MAIL_SAPI_HKEY
   ┌─ agents/demo/tools.json:35:9
   │
35 │         "runloop/mail/api-key"
   │         ^^^^^^^^^^^^^^^^^^^^^^
   │
   = help: set each secret in its own variable; RUNLOOP_MAIL_API_KEY is no longer read for either

1 bundle checked: 0 errors and 2 warnings
"#;
    assert_eq!(text(&output.stdout), expected);
    let denied = td.rlp().args(["lint", "agents/demo", "--deny-warnings"]).output().unwrap();
    assert_eq!(denied.status.code(), Some(1));
}
