//! `rlp lint` end to end: every rule fires on its own in an otherwise valid
//! bundle at the exact file:line:col, every output format carries the same
//! findings, and hostile input never panics or hangs.

use std::fs;
use std::path::PathBuf;

use serde_json::Value;

use crate::support::TestDir;
use crate::support::files::{copy_tree, noise};
use crate::support::output::{assert_contains, stdout, stdout_json};
use crate::support::text_snapshot;

const MANIFEST: &str = r#"# The mailer agent.
[agent]
name = "mailer"
version = "0.1.0"
description = "Sends drafts"

[caps]
file = "policy.caps"
"#;

const POLICY: &str = r#"[capabilities]
net = ["api.mail.example"]
secrets = ["runloop/mail/smtp_api_key"]
exec = true
kb_read = true
"#;

const TOOLS: &str = r#"{
  "version": 1,
  "tools": [
    {
      "id": "notes.search",
      "description": "Search local notes.",
      "transport": {"kind": "exec", "command": "/usr/local/bin/notes", "args": ["--json"]},
      "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}},
      "result_schema": {"type": "array"},
      "capabilities": ["kb_read"],
      "requires_confirmation": false,
      "timeout_ms": 5000
    },
    {
      "id": "mail.send",
      "description": "Send a rendered draft.",
      "transport": {
        "kind": "http",
        "method": "POST",
        "url": "https://api.mail.example/send/{user}",
        "headers": {"Authorization": "Bearer ${secret:runloop/mail/smtp_api_key}"}
      },
      "input_schema": {"$ref": "schema:mail.send.request.v1"},
      "result_schema": {"type": "object"},
      "capabilities": ["net:api.mail.example"],
      "secrets": ["runloop/mail/smtp_api_key"],
      "requires_confirmation": true,
      "observability": {"tags": ["external", "mail"]}
    }
  ]
}
"#;

const REQUEST_SCHEMA: &str = r##"{
  "type": "object",
  "required": ["user", "body"],
  "properties": {"user": {"type": "string"}, "body": {"$ref": "#/$defs/body"}},
  "$defs": {"body": {"type": "string"}}
}
"##;

/// A valid full-form bundle `mailer` inside a fresh test folder.
struct Fixture {
    td: TestDir,
    root: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let td = TestDir::new();
        let root = td.join("mailer");
        fs::create_dir_all(root.join("schemas")).unwrap();
        fs::write(root.join("manifest.toml"), MANIFEST).unwrap();
        fs::write(root.join("policy.caps"), POLICY).unwrap();
        fs::write(root.join("tools.json"), TOOLS).unwrap();
        fs::write(root.join("schemas/mail.send.request.v1.json"), REQUEST_SCHEMA).unwrap();
        fs::write(root.join("README.md"), "# mailer\n").unwrap();
        let fixture = Fixture { td, root };
        fixture.digest();
        fixture
    }

    fn path(&self, file: &str) -> PathBuf {
        self.root.join(file)
    }

    fn read(&self, file: &str) -> String {
        fs::read_to_string(self.path(file)).unwrap()
    }

    /// Replaces `from` (which must occur) with `to` in `file`.
    fn edit(&self, file: &str, from: &str, to: &str) {
        let text = self.read(file);
        assert!(text.contains(from), "{from:?} not in {file}");
        fs::write(self.path(file), text.replacen(from, to, 1)).unwrap();
    }

    fn digest(&self) {
        rlp::integrity::digest::write(&self.root, &Default::default()).unwrap();
    }

    /// Re-digests where the manifest still parses (a syntax case leaves it as is).
    fn try_digest(&self) {
        let _ = rlp::integrity::digest::write(&self.root, &Default::default());
    }

    /// Runs `rlp lint --format json` in the bundle's parent folder on `mailer`.
    fn lint_json(&self, extra: &[&str]) -> (i32, Vec<Value>) {
        self.td.lint_json(["mailer"].iter().chain(extra))
    }
}

/// 1-based line and column (in characters) of the first occurrence of `needle`.
fn position_of(text: &str, needle: &str) -> (u64, u64) {
    position_at(text, text.find(needle).unwrap_or_else(|| panic!("{needle:?} not found")))
}

/// 1-based line and column (in characters) of the byte `offset`.
fn position_at(text: &str, offset: usize) -> (u64, u64) {
    let before = &text[..offset];
    let line = before.matches('\n').count() as u64 + 1;
    let column = before[before.rfind('\n').map_or(0, |i| i + 1)..].chars().count() as u64 + 1;
    (line, column)
}

/// Asserts exactly one finding: its code, file and position.
fn assert_single(fixture: &Fixture, extra: &[&str], code: &str, file: &str, at: Option<&str>) -> Value {
    let (status, findings) = fixture.lint_json(extra);
    assert_eq!(findings.len(), 1, "expected only {code}, got {findings:#?}");
    let finding = findings[0].clone();
    assert_eq!(finding["code"], code, "{finding:#?}");
    assert_eq!(finding["file"], format!("mailer/{file}"));
    let (line, column) = match at {
        Some(needle) => position_of(&fixture.read(file), needle),
        None => (1, 1),
    };
    assert_eq!(
        (finding["line"].as_u64().unwrap(), finding["column"].as_u64().unwrap()),
        (line, column),
        "{finding:#?}"
    );
    assert_eq!(status, 1, "{finding:#?}");
    finding
}

#[test]
fn valid_full_form_bundle_lints_clean() {
    let fixture = Fixture::new();
    let (status, findings) = fixture.lint_json(&["--deny-warnings"]);
    assert_eq!(findings, Vec::<Value>::new());
    assert_eq!(status, 0);
    let manifest = fixture.read("manifest.toml");
    assert!(manifest.starts_with(MANIFEST), "digest keeps the hand-written part:\n{manifest}");
    for key in [
        "[artifacts.tools]",
        "[artifacts.caps]",
        "[artifacts.\"README.md\"]",
        "[artifacts.\"schemas/mail.send.request.v1.json\"]",
    ] {
        assert!(manifest.contains(key), "{key} missing:\n{manifest}");
    }
}

#[test]
fn human_output_for_a_clean_bundle() {
    let fixture = Fixture::new();
    fixture.td.rlp().args(["lint", "mailer"]).assert().success().stdout("1 bundle checked: no problems\n");
}

#[test]
fn upstream_bundle_loads_and_names_unlisted_files() {
    let fixture = Fixture::new();
    let tools_digest = rlp::bundle::inventory::hash_file(&fixture.path("tools.json")).unwrap().1;
    let upstream = format!(
        "[agent]\nname = \"mailer\"\nversion = \"0.1.0\"\n\n[caps]\nfile = \"policy.caps\"\n\n[artifacts.tools]\npath = \"tools.json\"\nblake3 = \"{tools_digest}\"\nversion = 1\n"
    );
    fs::write(fixture.path("manifest.toml"), &upstream).unwrap();
    let (status, findings) = fixture.lint_json(&[]);
    assert_eq!(status, 1);
    let unlisted: Vec<(&str, &str)> =
        findings.iter().map(|f| (f["code"].as_str().unwrap(), f["file"].as_str().unwrap())).collect();
    assert_eq!(
        unlisted,
        [
            ("RLP502", "mailer/README.md"),
            ("RLP502", "mailer/policy.caps"),
            ("RLP502", "mailer/schemas/mail.send.request.v1.json"),
        ]
    );
    for finding in &findings {
        let why = if finding["file"] == "mailer/policy.caps" {
            ": rlp digests every file, so that a signature covers the policy too"
        } else {
            ""
        };
        assert_eq!(finding["help"], format!("run `rlp digest mailer` to list it with its digest{why}"));
    }
    // `rlp digest` brings it to the full form, touching nothing else.
    fixture.digest();
    let full = fixture.read("manifest.toml");
    let size = fs::metadata(fixture.path("tools.json")).unwrap().len();
    assert!(full.starts_with(&upstream.replace("version = 1\n", &format!("version = 1\nsize = {size}\n"))), "{full}");
    assert_eq!(fixture.lint_json(&[]), (0, vec![]));
}

/// One case: edit the valid bundle, re-digest unless the rule is about digests,
/// and expect exactly one finding.
struct Case {
    code: &'static str,
    file: &'static str,
    edit: &'static [(&'static str, &'static str, &'static str)],
    at: Option<&'static str>,
    redigest: bool,
    warning: bool,
}

const fn case(
    code: &'static str,
    file: &'static str,
    edit: &'static [(&'static str, &'static str, &'static str)],
    at: &'static str,
) -> Case {
    Case { code, file, edit, at: Some(at), redigest: true, warning: false }
}

const CASES: &[Case] = &[
    case("RLP001", "tools.json", &[("tools.json", "\"version\": 1,", "\"version\": 1")], "\"tools\""),
    case("RLP001", "manifest.toml", &[("manifest.toml", "version = \"0.1.0\"", "version = \"0.1.0")], "\ndescription"),
    case(
        "RLP002",
        "tools.json",
        &[("tools.json", "\"id\": \"notes.search\",", "\"id\": \"notes.search\", \"id\": \"x\",")],
        "\"id\": \"x\"",
    ),
    case("RLP002", "policy.caps", &[("policy.caps", "exec = true\n", "exec = true\nexec = false\n")], "exec = false"),
    case(
        "RLP003",
        "tools.json",
        &[("tools.json", "\"requires_confirmation\": false", "\"requires_confirmation\": \"no\"")],
        "\"no\"",
    ),
    case("RLP003", "manifest.toml", &[("manifest.toml", "version = \"0.1.0\"", "version = 1979-05-27")], "1979-05-27"),
    case("RLP005", "tools.json", &[("tools.json", "\"version\": 1,", "\"version\": 2,")], "2,"),
    case("RLP006", "manifest.toml", &[("manifest.toml", "version = \"0.1.0\"\n", "")], "agent]"),
    case("RLP007", "tools.json", &[("tools.json", "\"timeout_ms\": 5000", "\"timeout_ms\": 0")], "0\n"),
    case("RLP007", "tools.json", &[("tools.json", "\"timeout_ms\": 5000", "\"budget\": {\"tokens\": 0}")], "0}"),
    case("RLP101", "manifest.toml", &[("manifest.toml", "name = \"mailer\"", "name = \"sender\"")], "\"sender\""),
    case("RLP102", "manifest.toml", &[("manifest.toml", "name = \"mailer\"", "name = \"Mailer\"")], "\"Mailer\""),
    case("RLP103", "manifest.toml", &[("manifest.toml", "version = \"0.1.0\"", "version = \"1.0\"")], "\"1.0\""),
    case(
        "RLP104",
        "manifest.toml",
        &[(
            "manifest.toml",
            "description = \"Sends drafts\"",
            "description = \"Sends drafts\"\nkind = \"wasm32-wasip1\"",
        )],
        "\"wasm32-wasip1\"",
    ),
    Case {
        code: "RLP105",
        file: "manifest.toml",
        edit: &[("manifest.toml", "\"Sends drafts\"", "\"Sends drafts\\nand archives them\"")],
        at: Some("\"Sends drafts"),
        redigest: true,
        warning: true,
    },
    case("RLP201", "tools.json", &[("tools.json", "\"notes.search\"", "\"Notes.Search\"")], "\"Notes.Search\""),
    case("RLP203", "tools.json", &[("tools.json", "\"Search local notes.\"", "\"  \"")], "\"  \""),
    case("RLP204", "tools.json", &[("tools.json", "\"/usr/local/bin/notes\"", "\"bin/notes\"")], "\"bin/notes\""),
    case(
        "RLP205",
        "tools.json",
        &[("tools.json", "\"https://api.mail.example/send/{user}\"", "\"api.mail.example/send/{user}\"")],
        "\"api.mail.example/send/{user}\"",
    ),
    case(
        "RLP205",
        "tools.json",
        &[("tools.json", "/send/{user}\"", "/send/{user}#{part}\"")],
        "\"https://api.mail.example/send/{user}#{part}\"",
    ),
    case("RLP206", "tools.json", &[("tools.json", "\"POST\"", "\"FETCH\"")], "\"FETCH\""),
    case(
        "RLP207",
        "tools.json",
        &[("tools.json", "\"https://api.mail.example/send/{user}\"", "\"https://{user}.mail.example/send\"")],
        "\"https://{user}.mail.example/send\"",
    ),
    case(
        "RLP208",
        "tools.json",
        &[("tools.json", "/send/{user}", "/send/{recipient}")],
        "\"https://api.mail.example/send/{recipient}\"",
    ),
    case(
        "RLP209",
        "tools.json",
        &[("tools.json", "\"Authorization\": \"Bearer", "\"X-Trace\": \"a\\r\\nb\", \"Authorization\": \"Bearer")],
        "\"a\\r\\nb\"",
    ),
    case(
        "RLP209",
        "tools.json",
        &[("tools.json", "\"Authorization\": \"Bearer", "\"X-Trace\": \"a\\u0001b\", \"Authorization\": \"Bearer")],
        "\"a\\u0001b\"",
    ),
    case(
        "RLP209",
        "tools.json",
        &[("tools.json", "\"Authorization\": \"Bearer", "\"X-Trace\": \"a\\u007f\", \"Authorization\": \"Bearer")],
        "\"a\\u007f\"",
    ),
    case(
        "RLP210",
        "tools.json",
        &[("tools.json", "${secret:runloop/mail/smtp_api_key}", "${secret:runloop/mail/other_key}")],
        "\"Bearer ${secret:runloop/mail/other_key}\"",
    ),
    case(
        "RLP211",
        "tools.json",
        &[(
            "tools.json",
            "\"secrets\": [\"runloop/mail/smtp_api_key\"]",
            "\"secrets\": [\"runloop/mail/smtp_api_key\", \"mail/key\"]",
        )],
        "\"mail/key\"",
    ),
    case(
        "RLP212",
        "tools.json",
        &[("tools.json", "\"capabilities\": [\"kb_read\"]", "\"capabilities\": [\"kb_read\", \"net:\"]")],
        "\"net:\"",
    ),
    case(
        "RLP301",
        "tools.json",
        &[("tools.json", "      \"result_schema\": {\"type\": \"array\"},\n", "")],
        "\"notes.search\"",
    ),
    case("RLP302", "tools.json", &[("tools.json", "{\"type\": \"array\"}", "{\"type\": \"arrays\"}")], "\"arrays\""),
    case(
        "RLP302",
        "schemas/mail.send.request.v1.json",
        &[("schemas/mail.send.request.v1.json", "\"required\": [\"user\", \"body\"]", "\"required\": \"user\"")],
        "\"user\",\n",
    ),
    case(
        "RLP303",
        "tools.json",
        &[("tools.json", "schema:mail.send.request.v1", "schema:mail.send.request.v2")],
        "\"schema:mail.send.request.v2\"",
    ),
    case(
        "RLP303",
        "schemas/mail.send.request.v1.json",
        &[("schemas/mail.send.request.v1.json", "#/$defs/body", "#/$defs/text")],
        "\"#/$defs/text\"",
    ),
    case(
        "RLP304",
        "tools.json",
        &[("tools.json", "{\"type\": \"array\"}", "{\"$ref\": \"https://schemas.example/list.json\"}")],
        "\"https://schemas.example/list.json\"",
    ),
    case("RLP401", "tools.json", &[("policy.caps", "exec = true\n", "")], "\"exec\", \"command\""),
    case("RLP401", "tools.json", &[("policy.caps", "kb_read = true\n", "")], "\"kb_read\"]"),
    case(
        "RLP402",
        "tools.json",
        &[("policy.caps", "secrets = [\"runloop/mail/smtp_api_key\"]\n", "")],
        "\"runloop/mail/smtp_api_key\"]",
    ),
    case("RLP403", "policy.caps", &[("policy.caps", "exec = true", "exec = true\nfs = [\"notes\"]")], "\"notes\""),
    Case {
        code: "RLP507",
        file: "manifest.toml",
        edit: &[(
            "manifest.toml",
            "[caps]",
            "[artifacts.\"../escape\"]\npath = \"../escape\"\nblake3 = \"0000000000000000000000000000000000000000000000000000000000000001\"\n\n[caps]",
        )],
        at: Some("\"../escape\"\nblake3"),
        redigest: false,
        warning: false,
    },
];

#[test]
fn each_rule_fires_alone_at_the_offending_value() {
    for case in CASES {
        let fixture = Fixture::new();
        for (file, from, to) in case.edit {
            fixture.edit(file, from, to);
        }
        if case.redigest {
            fixture.try_digest();
        }
        let extra: &[&str] = if case.warning { &["--deny-warnings"] } else { &[] };
        assert_single(&fixture, extra, case.code, case.file, case.at);
    }
}

/// A secret id with a `..` part is refused where it is written — a tool's
/// `secrets`, a header placeholder, the policy's grant — so it never
/// reaches a provider that reads ids as paths (`pass show {id}`).
#[test]
fn secret_ids_with_a_dot_dot_part_are_refused_where_they_are_written() {
    let listed = "\"secrets\": [\"runloop/mail/smtp_api_key\"]";
    let header = "${secret:runloop/mail/smtp_api_key}";
    let granted = "secrets = [\"runloop/mail/smtp_api_key\"]";
    for (code, file, from, to, at) in [
        (
            "RLP211",
            "tools.json",
            listed,
            "\"secrets\": [\"runloop/mail/smtp_api_key\", \"runloop/../x\"]",
            "\"runloop/../x\"",
        ),
        ("RLP211", "tools.json", header, "${secret:runloop/../mail/smtp_api_key}", "\"Bearer ${secret:runloop/../"),
        (
            "RLP403",
            "policy.caps",
            granted,
            "secrets = [\"runloop/mail/smtp_api_key\", \"runloop/mail/..\"]",
            "\"runloop/mail/..\"",
        ),
    ] {
        let fixture = Fixture::new();
        fixture.edit(file, from, to);
        fixture.digest();
        let finding = assert_single(&fixture, &[], code, file, Some(at));
        assert_contains(finding["message"].as_str().unwrap(), "has a `..` part: a secret id is not a path");
    }
}

#[test]
fn a_byte_order_mark_in_tools_json_is_named_with_the_way_to_remove_it() {
    let fixture = Fixture::new();
    fs::write(fixture.path("tools.json"), format!("\u{feff}{}", fixture.read("tools.json"))).unwrap();
    fixture.digest();
    let finding = assert_single(&fixture, &[], "RLP001", "tools.json", None);
    assert_eq!(finding["message"], "the file starts with a UTF-8 byte-order mark (U+FEFF), which JSON does not allow");
    assert_eq!(
        finding["help"],
        "save the file as UTF-8 without a byte-order mark, or delete its first 3 bytes: `sed -i '1s/^\\xEF\\xBB\\xBF//' mailer/tools.json`"
    );
}

#[test]
fn a_path_too_long_for_an_archive_is_named_before_pack_would_fail() {
    let fixture = Fixture::new();
    let name = format!("{}.txt", "a".repeat(120));
    fs::write(fixture.path(&name), "x").unwrap();
    fixture.digest();
    let (status, findings) = fixture.lint_json(&[]);
    assert_eq!((status, findings.len()), (1, 1), "{findings:#?}");
    assert_eq!(findings[0]["code"], "RLP507");
    assert_eq!(findings[0]["message"], format!("artifact path `{name}` is too long to be stored in a bundle archive"));
    let manifest = fixture.read("manifest.toml");
    let line = manifest.lines().position(|l| l == format!("path = \"{name}\"")).unwrap() + 1;
    assert_eq!((findings[0]["line"].as_u64(), findings[0]["column"].as_u64()), (Some(line as u64), Some(8)));
    // Split at a `/`, a long path fits: 150 bytes of folder, 100 of name.
    fs::remove_file(fixture.path(&name)).unwrap();
    let folder = "f".repeat(150);
    fs::create_dir(fixture.path(&folder)).unwrap();
    fs::write(fixture.path(&format!("{folder}/{}.txt", "b".repeat(96))), "x").unwrap();
    fixture.digest();
    assert_eq!(fixture.lint_json(&[]), (0, vec![]));
}

#[test]
fn warnings_pass_unless_denied() {
    let cases: &[(&str, &str, &str, &str)] = &[
        ("RLP004", "\"timeout_ms\": 5000", "\"timeout_ms\": 5000, \"colour\": \"blue\"", "\"colour\""),
        ("RLP213", "      \"requires_confirmation\": true,\n", "", "\"mail.send\""),
    ];
    for (code, from, to, at) in cases {
        let fixture = Fixture::new();
        fixture.edit("tools.json", from, to);
        fixture.digest();
        let (status, findings) = fixture.lint_json(&[]);
        assert_eq!((status, findings.len()), (0, 1), "{findings:#?}");
        assert_eq!(findings[0]["severity"], "warning");
        assert_single(&fixture, &["--deny-warnings"], code, "tools.json", Some(at));
    }
}

#[test]
fn duplicate_tool_ids_point_at_the_second() {
    let fixture = Fixture::new();
    fixture.edit("tools.json", "\"id\": \"mail.send\"", "\"id\": \"notes.search\"");
    fixture.edit(
        "tools.json",
        "\"notes.search\",\n      \"description\": \"Send",
        "\"notes.search\" ,\n      \"description\": \"Send",
    );
    fixture.digest();
    let finding = assert_single(&fixture, &[], "RLP202", "tools.json", Some("\"notes.search\" ,"));
    assert_eq!(finding["message"], "tool id `notes.search` is already used by tool #0");
}

/// Points `notes.search`'s `result_schema` at `schema:<id>`, mapped by
/// `schema_refs` where `mapping` is given, and lints for one finding.
fn lint_schema_ref(fixture: &Fixture, id: &str, mapping: Option<&str>, file: &str, at: &str) -> Value {
    let refs = mapping.map_or(String::new(), |path| format!(" \"schema_refs\": {{\"schema:{id}\": \"{path}\"}},"));
    fixture.edit("tools.json", "{\"type\": \"array\"},", &format!("{{\"$ref\": \"schema:{id}\"}},{refs}"));
    fixture.digest();
    assert_single(fixture, &[], if file == "tools.json" { "RLP303" } else { "RLP001" }, file, Some(at))
}

#[test]
fn a_schema_that_is_not_json_is_reported_only_as_a_syntax_error() {
    let fixture = Fixture::new();
    fs::write(fixture.path("schemas/a.json"), "{\"type\": ,}").unwrap();
    let finding = lint_schema_ref(&fixture, "a", None, "schemas/a.json", ",}");
    assert_eq!(finding["message"], "invalid JSON: expected value");
}

#[test]
fn a_schema_refs_target_that_cannot_hold_a_schema_is_named_once_at_the_mapping() {
    let cases = [
        (
            "tools.json",
            "is the bundle's tool list, not a schema",
            "map the id to a JSON Schema file of the bundle, e.g. `schemas/<id>.json`",
        ),
        (
            "policy.caps",
            "is not a `.json` file",
            "map the id to a JSON Schema file of the bundle, e.g. `schemas/<id>.json`",
        ),
        (
            "schemas/../../outside.json",
            "is not a path inside the bundle",
            "use a relative path of `/`-separated [A-Za-z0-9._-] segments, without `.` or `..`, e.g. `schemas/<id>.json`",
        ),
        ("schemas/gone.json", "is not in the bundle", "create `schemas/gone.json`, or fix the path"),
    ];
    for (path, why, help) in cases {
        let fixture = Fixture::new();
        let finding = lint_schema_ref(&fixture, "m", Some(path), "tools.json", &format!("\"{path}\""));
        assert_eq!(finding["message"], format!("`schema:m` maps to `{path}`, which {why}"));
        assert_eq!(finding["help"], help);
    }
}

#[test]
fn a_schema_ref_with_an_invalid_id_is_refused_as_such() {
    let fixture = Fixture::new();
    let finding = lint_schema_ref(&fixture, "../../outside", None, "tools.json", "\"schema:../../outside\"");
    assert_eq!(
        finding["message"],
        "`schema:../../outside` is not a schema id (letters, digits, . _ -), e.g. `schema:mail.send.request.v1`"
    );
    assert_eq!(
        finding["help"],
        "name a file of `schemas/` without its `.json`, or map the id in the tool's `schema_refs`"
    );
}

#[test]
fn a_schema_of_another_dialect_is_named_at_its_dollar_schema() {
    let cases = [
        (
            "http://json-schema.org/draft-04/schema#",
            "`$schema` is JSON Schema draft-04 (`http://json-schema.org/draft-04/schema#`)",
        ),
        (
            "http://json-schema.org/draft-07/schema#",
            "`$schema` is JSON Schema draft-07 (`http://json-schema.org/draft-07/schema#`)",
        ),
        ("https://example.com/mine", "`$schema` is `https://example.com/mine`, an unknown meta-schema"),
    ];
    for (uri, what) in cases {
        let fixture = Fixture::new();
        fixture.edit("schemas/mail.send.request.v1.json", "{\n", &format!("{{\n  \"$schema\": \"{uri}\",\n"));
        fixture.digest();
        let at = format!("\"{uri}\"");
        let finding = assert_single(&fixture, &[], "RLP302", "schemas/mail.send.request.v1.json", Some(&at));
        assert_eq!(finding["message"], format!("{what}; schemas are JSON Schema 2020-12"));
        assert_eq!(finding["help"], "remove `$schema`, or set it to `https://json-schema.org/draft/2020-12/schema`");
    }
    let fixture = Fixture::new();
    fixture.edit(
        "tools.json",
        "{\"type\": \"array\"}",
        "{\"$schema\": \"https://json-schema.org/draft/2020-12/schema\"}",
    );
    fixture.digest();
    assert_eq!(fixture.lint_json(&[]), (0, vec![]));
}

#[test]
fn a_key_of_the_other_transport_is_named_with_its_article() {
    let fixture = Fixture::new();
    fixture.edit("tools.json", "\"args\": [\"--json\"]", "\"args\": [\"--json\"], \"method\": \"GET\"");
    fixture.digest();
    let finding = assert_single(&fixture, &["--deny-warnings"], "RLP004", "tools.json", Some("\"method\": \"GET\"}"));
    assert_eq!(finding["message"], "`method` has no meaning for an `exec` transport");
}

#[test]
fn artifact_rules() {
    // Listed but missing.
    let fixture = Fixture::new();
    fs::remove_file(fixture.path("README.md")).unwrap();
    assert_single(&fixture, &[], "RLP501", "manifest.toml", Some("\"README.md\"\nblake3"));

    // Present but unlisted.
    let fixture = Fixture::new();
    fs::write(fixture.path("notes.txt"), "extra").unwrap();
    assert_single(&fixture, &[], "RLP502", "notes.txt", None);

    // Size changed.
    let fixture = Fixture::new();
    fs::write(fixture.path("README.md"), "# mailer!\n").unwrap();
    let manifest = fixture.read("manifest.toml");
    let readme = &manifest[manifest.find("[artifacts.\"README.md\"]").unwrap()..];
    let size_line = readme.lines().find(|l| l.starts_with("size")).unwrap();
    let finding = assert_single(&fixture, &[], "RLP503", "manifest.toml", Some(&format!("{}\n", &size_line[7..])));
    assert_eq!(finding["message"], "`README.md` is 10 bytes, the manifest says 9");

    // Same size, other content.
    let fixture = Fixture::new();
    fs::write(fixture.path("README.md"), "# mailex\n").unwrap();
    let finding =
        assert_single(&fixture, &[], "RLP504", "manifest.toml", None.or(Some(&blake3_value(&fixture, "README.md"))));
    assert!(finding["message"].as_str().unwrap().starts_with("`README.md` has BLAKE3 "));

    // Placeholder digest: a warning.
    let fixture = Fixture::new();
    let digest = blake3_value(&fixture, "README.md");
    fixture.edit("manifest.toml", &digest, &format!("\"{}\"", "0".repeat(64)));
    let (status, findings) = fixture.lint_json(&[]);
    assert_eq!((status, findings[0]["code"].as_str()), (0, Some("RLP505")));
    assert_single(&fixture, &["--deny-warnings"], "RLP505", "manifest.toml", Some(&format!("\"{}\"", "0".repeat(64))));

    // An entry binary not built yet: the placeholder is the only finding.
    let fixture = Fixture::new();
    let zeros = format!("\"{}\"", "0".repeat(64));
    let entry = format!("kind = \"wasm32-wasip1\"\nentry_wasm = {{ path = \"bin/mailer.wasm\", blake3 = {zeros} }}\n");
    fixture.edit("manifest.toml", "\n[caps]", &format!("{entry}\n[caps]"));
    let finding = assert_single(&fixture, &["--deny-warnings"], "RLP505", "manifest.toml", Some(&zeros));
    assert_eq!(finding["message"], "`bin/mailer.wasm` carries the all-zero placeholder digest");
    assert_eq!(fixture.lint_json(&[]).0, 0);

    // A symlink inside the bundle.
    let fixture = Fixture::new();
    std::os::unix::fs::symlink("/etc/hostname", fixture.path("link")).unwrap();
    let finding = assert_single(&fixture, &[], "RLP506", "link", None);
    assert_eq!(finding["message"], "`link` cannot be part of a bundle: it is a symbolic link");
}

/// The quoted BLAKE3 value of an artifact in the manifest.
fn blake3_value(fixture: &Fixture, path: &str) -> String {
    let manifest = fixture.read("manifest.toml");
    let section = &manifest[manifest.find(&format!("path = \"{path}\"")).unwrap()..];
    let line = section.lines().find(|l| l.starts_with("blake3")).unwrap();
    line["blake3 = ".len()..].to_string()
}

#[test]
fn not_utf8_is_reported_not_fatal() {
    let fixture = Fixture::new();
    fs::write(fixture.path("tools.json"), b"{\"version\": 1, \"tools\": [\xff]}").unwrap();
    fixture.digest();
    let finding = assert_single(&fixture, &[], "RLP008", "tools.json", None);
    assert_eq!(finding["message"], "tools.json is not UTF-8 (invalid byte at offset 25)");
}

/// A bundle with several findings in three files, for the format tests.
fn broken_fixture() -> Fixture {
    let fixture = Fixture::new();
    fixture.edit("tools.json", "\"notes.search\"", "\"Notes Search\"");
    fixture.edit("tools.json", "\"/usr/local/bin/notes\"", "\"notes\"");
    fixture.edit("tools.json", "      \"requires_confirmation\": true,\n", "");
    fixture.edit("manifest.toml", "name = \"mailer\"", "name = \"mail_er\"");
    fixture.digest();
    fs::write(fixture.path("stray.txt"), "x").unwrap();
    fixture
}

fn run_format(fixture: &Fixture, format: &str) -> (i32, String) {
    let output = fixture.td.rlp().args(["lint", "mailer", "--format", format]).output().unwrap();
    (output.status.code().unwrap(), stdout(&output))
}

#[test]
fn human_output_is_rustc_style() {
    let fixture = broken_fixture();
    let (status, text) = run_format(&fixture, "human");
    assert_eq!(status, 1);
    insta::assert_snapshot!("human_report", text);
}

#[test]
fn minified_json_is_quoted_as_a_window_around_the_marker() {
    let fixture = broken_fixture();
    let tools: Value = serde_json::from_str(&fixture.read("tools.json")).unwrap();
    fs::write(fixture.path("tools.json"), serde_json::to_string(&tools).unwrap()).unwrap();
    fixture.digest();
    let (status, text) = run_format(&fixture, "human");
    assert_eq!(status, 1);
    assert!(text.lines().all(|line| line.chars().count() < 200), "{text}");
    let (_, findings) = fixture.lint_json(&[]);
    for finding in findings.iter().filter(|f| f["file"] == "mailer/tools.json") {
        let header = format!("mailer/tools.json:{}:{}\n", finding["line"], finding["column"]);
        assert!(text.contains(&header), "{header} not in\n{text}");
    }
    insta::assert_snapshot!("human_report_minified", text);
}

#[test]
fn sarif_artifact_uris_are_percent_encoded() {
    let fixture = Fixture::new();
    fixture.edit("tools.json", "\"/usr/local/bin/notes\"", "\"notes\"");
    fixture.digest();
    let odd = fixture.root.parent().unwrap().join("we,ird:dir\n");
    fs::create_dir(&odd).unwrap();
    fs::rename(&fixture.root, odd.join("mailer")).unwrap();
    let output = fixture.td.rlp().args(["lint", "we,ird:dir\n/mailer", "--format", "sarif"]).output().unwrap();
    let sarif: Value = stdout_json(&output);
    let uris: std::collections::BTreeSet<&str> = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].as_str().unwrap())
        .collect();
    assert_eq!(uris.into_iter().collect::<Vec<_>>(), ["we%2Cird%3Adir%0A/mailer/tools.json"]);
}

#[test]
fn json_sarif_and_github_carry_the_same_findings() {
    let fixture = broken_fixture();
    let (status, json) = run_format(&fixture, "json");
    assert_eq!(status, 1);
    let findings: Vec<Value> = serde_json::from_str(&json).unwrap();
    insta::assert_json_snapshot!("json_report", findings);
    let keys: Vec<(String, String, u64, u64)> = findings
        .iter()
        .map(|f| {
            (
                f["code"].as_str().unwrap().to_string(),
                f["file"].as_str().unwrap().to_string(),
                f["line"].as_u64().unwrap(),
                f["column"].as_u64().unwrap(),
            )
        })
        .collect();

    let (status, sarif) = run_format(&fixture, "sarif");
    assert_eq!(status, 1);
    let sarif: Value = serde_json::from_str(&sarif).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    let run = &sarif["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "rlp");
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    assert_eq!(rules.len(), rlp::bundle::diag::Code::ALL.len());
    let sarif_keys: Vec<(String, String, u64, u64)> = run["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let location = &r["locations"][0]["physicalLocation"];
            assert_eq!(rules[r["ruleIndex"].as_u64().unwrap() as usize]["id"], r["ruleId"]);
            (
                r["ruleId"].as_str().unwrap().to_string(),
                location["artifactLocation"]["uri"].as_str().unwrap().to_string(),
                location["region"]["startLine"].as_u64().unwrap(),
                location["region"]["startColumn"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(sarif_keys, keys);

    let (status, github) = run_format(&fixture, "github");
    assert_eq!(status, 1);
    let lines: Vec<&str> = github.lines().collect();
    assert_eq!(lines.len(), keys.len());
    for (line, (code, file, l, c)) in lines.iter().zip(&keys) {
        assert!(line.starts_with("::"), "{line}");
        assert_contains(line, &format!(" file={file},line={l},col={c},title={code} "));
    }
    insta::assert_snapshot!("github_report", github);
}

#[test]
fn a_folder_of_bundles_is_linted_in_name_order() {
    let td = TestDir::new();
    for name in ["zeta", "alpha"] {
        let fixture = Fixture::new();
        let dest = td.join(name);
        copy_tree(&fixture.root, &dest);
        let manifest = fs::read_to_string(dest.join("manifest.toml")).unwrap();
        fs::write(dest.join("manifest.toml"), manifest.replace("name = \"mailer\"", &format!("name = \"{name}\"")))
            .unwrap();
        rlp::integrity::digest::write(&dest, &Default::default()).unwrap();
    }
    fs::write(td.join("alpha/stray"), "x").unwrap();
    fs::create_dir(td.join("not_a_bundle")).unwrap();
    td.rlp()
        .args(["lint", ".", "--format", "github"])
        .assert()
        .code(1)
        .stdout("::error file=./alpha/stray,line=1,col=1,title=RLP502 artifact-unlisted::`stray` is in the bundle but not listed in manifest.toml (help%3A run `rlp digest ./alpha` to list it with its digest)\n".replace("(help%3A", "(help:"));
}

#[test]
fn unreadable_paths_exit_2() {
    let td = TestDir::new();
    let missing = td.join("nope");
    td.rlp()
        .args(["lint"])
        .arg(&missing)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("cannot read").and(predicates::str::contains("help: pass a bundle folder")));
    td.rlp().args(["lint"]).arg(td.path()).assert().code(2).stderr(predicates::str::contains("holds no bundle"));
    let nested = td.join("nest/sub/b");
    fs::create_dir_all(&nested).unwrap();
    fs::write(nested.join("manifest.toml"), MANIFEST).unwrap();
    td.rlp().args(["lint"]).arg(td.join("nest")).assert().code(2).stderr(predicates::str::contains(
        "nest holds no bundle (no manifest.toml in it or in the folders directly inside it)",
    ));
}

use predicates::prelude::PredicateBooleanExt;

mod hostile {
    use super::*;

    fn lint_status(fixture: &Fixture) -> (i32, Vec<Value>) {
        fixture.lint_json(&[])
    }

    #[test]
    fn truncated_files() {
        for file in ["manifest.toml", "policy.caps", "tools.json", "schemas/mail.send.request.v1.json"] {
            let fixture = Fixture::new();
            let text = fixture.read(file);
            fs::write(fixture.path(file), &text[..text.len() / 2]).unwrap();
            let (status, findings) = lint_status(&fixture);
            assert_eq!(status, 1, "{file}");
            assert!(findings.iter().any(|f| f["code"] == "RLP001"), "{file}: {findings:#?}");
        }
    }

    #[test]
    fn binary_garbage() {
        let garbage = noise(4096, 0x2545_f491_4f6c_dd1d);
        for file in ["manifest.toml", "policy.caps", "tools.json"] {
            let fixture = Fixture::new();
            fs::write(fixture.path(file), &garbage).unwrap();
            let (status, findings) = lint_status(&fixture);
            assert_eq!(status, 1, "{file}");
            assert!(
                findings.iter().any(|f| f["code"] == "RLP008" && f["file"] == format!("mailer/{file}")),
                "{findings:#?}"
            );
        }
    }

    #[test]
    fn fifty_megabyte_tools_json() {
        let fixture = Fixture::new();
        let big = "x".repeat(50 << 20);
        fixture.edit("tools.json", "\"Search local notes.\"", &format!("\"{big}\""));
        fixture.digest();
        assert_eq!(lint_status(&fixture), (0, vec![]));
    }

    #[test]
    fn ten_thousand_levels_of_nesting() {
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let fixture = Fixture::new();
        fixture.edit("tools.json", "{\"type\": \"array\"}", &deep);
        fixture.edit("schemas/mail.send.request.v1.json", "{\"type\": \"string\"}", &deep);
        fixture.digest();
        let (status, findings) = lint_status(&fixture);
        assert_eq!(status, 1);
        let files: Vec<&str> = findings.iter().map(|f| f["file"].as_str().unwrap()).collect();
        assert_eq!(files, ["mailer/schemas/mail.send.request.v1.json", "mailer/tools.json"], "{findings:#?}");
        for finding in &findings {
            assert_eq!(finding["code"], "RLP001");
            assert_eq!(finding["message"], "invalid JSON: recursion limit exceeded");
        }
    }

    #[test]
    fn schema_ref_cycle_terminates() {
        let fixture = Fixture::new();
        fs::write(
            fixture.path("schemas/a.json"),
            r#"{"type": "object", "properties": {"next": {"$ref": "schema:b"}}}"#,
        )
        .unwrap();
        fs::write(fixture.path("schemas/b.json"), r##"{"anyOf": [{"$ref": "schema:a"}, {"$ref": "#"}]}"##).unwrap();
        fixture.edit("tools.json", "{\"type\": \"array\"}", "{\"$ref\": \"schema:a\"}");
        fixture.digest();
        assert_eq!(lint_status(&fixture), (0, vec![]));
    }

    #[test]
    fn remote_ref_is_refused_and_never_fetched() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}/schema.json", listener.local_addr().unwrap());
        let fixture = Fixture::new();
        fixture.edit("tools.json", "{\"type\": \"array\"}", &format!("{{\"$ref\": \"{url}\"}}"));
        fixture.digest();
        assert_single(&fixture, &[], "RLP304", "tools.json", Some(&format!("\"{url}\"")));
        assert!(listener.accept().is_err(), "lint connected to the schema URL");
    }
}

/// Placing findings costs one pass over the file, however many there are:
/// 50,000 findings in one tools.json are each reported at their own line and
/// column. Placing each one by rescanning the text took about ten minutes
/// here; the limit only stops a regression from running that long.
#[test]
fn fifty_thousand_findings_are_each_placed_exactly() {
    const TOOLS: usize = 50_000;
    let fixture = Fixture::new();
    fixture.edit("policy.caps", "exec = true\n", "");
    // Without the http tool, nothing claims the net grant (RLP215).
    fixture.edit("policy.caps", "net = [\"api.mail.example\"]\n", "");
    let tools: Vec<Value> = (0..TOOLS)
        .map(|i| {
            serde_json::json!({
                "id": format!("t.n{i}"), "description": "d",
                "transport": {"kind": "exec", "command": "/bin/true"},
                "input_schema": {}, "result_schema": {}, "requires_confirmation": false,
            })
        })
        .collect();
    let text = serde_json::to_string_pretty(&serde_json::json!({"version": 1, "tools": tools})).unwrap();
    fs::write(fixture.path("tools.json"), &text).unwrap();
    fixture.digest();
    let output = fixture
        .td
        .rlp()
        // Core tools are not this test's subject (RLP217).
        .args(["lint", "mailer", "--format", "json", "--core-threshold", "50000"])
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .expect("lint finishes");
    assert_eq!(output.status.code(), Some(1));
    let findings: Vec<Value> = serde_json::from_value(stdout_json(&output)).unwrap();
    let expected: Vec<(u64, u64)> = text
        .lines()
        .enumerate()
        .filter_map(|(i, line)| line.find("\"exec\"").map(|c| (i as u64 + 1, c as u64 + 1)))
        .collect();
    let placed: Vec<(u64, u64)> = findings
        .iter()
        .map(|f| {
            assert_eq!(f["code"], "RLP401", "{f:#?}");
            (f["line"].as_u64().unwrap(), f["column"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(placed.len(), TOOLS);
    assert!(placed == expected, "findings are not at the `exec` values");
}

/// Control characters from a bundle file never reach the terminal or a CI
/// log raw: human output escapes them, github annotations percent-encode them.
#[test]
fn control_characters_in_findings_are_escaped() {
    let fixture = Fixture::new();
    fixture.edit("tools.json", "\"notes.search\"", "\"notes\\u001b[31m\\nsearch\"");
    fixture.digest();
    let (status, human) = run_format(&fixture, "human");
    assert_eq!(status, 1);
    assert!(!human.contains('\u{1b}'), "{human:?}");
    text_snapshot!(&fixture.td, human);
    let (status, github) = run_format(&fixture, "github");
    assert_eq!(status, 1);
    assert!(!github.contains('\u{1b}'), "{github:?}");
    assert_eq!(github.lines().count(), 1, "{github}");
    text_snapshot!(&fixture.td, github);
}

/// RLP215 and RLP216: what an exec tool can reach under the sandbox, and
/// sandbox limits where there is no sandbox.
mod sandbox {
    use serde_json::json;

    use super::*;

    /// Re-digests, then lints as JSON and as human text.
    fn lint_both(fixture: &Fixture) -> (i32, Vec<Value>, String) {
        fixture.digest();
        let (status, findings) = fixture.lint_json(&[]);
        let (human_status, human) = run_format(fixture, "human");
        assert_eq!(status, human_status);
        (status, findings, human)
    }

    /// The JSON record of a warning in tools.json at the first `needle`.
    fn warning(fixture: &Fixture, code: &str, rule: &str, needle: &str, message: &str, help: &str) -> Value {
        let (line, column) = position_of(&fixture.read("tools.json"), needle);
        json!({
            "code": code, "rule": rule, "severity": "warning", "file": "mailer/tools.json",
            "line": line, "column": column, "message": message, "help": help,
        })
    }

    fn undeclared(fixture: &Fixture, needle: &str, message: &str, help: &str) -> Value {
        warning(fixture, "RLP215", "sandbox-grant-undeclared", needle, message, help)
    }

    #[test]
    fn grants_no_tool_claims_are_named_at_the_capabilities_key() {
        let fixture = Fixture::new();
        fixture.edit("policy.caps", "exec = true", "exec = true\nfs = [\"/srv/mail/outbox\"]");
        fixture.edit("policy.caps", "\"api.mail.example\"]", "\"api.mail.example\", \"localhost:8080\"]");
        let (status, findings, human) = lint_both(&fixture);
        let at = "\"capabilities\": [\"kb_read\"]";
        assert_eq!(
            (status, findings),
            (
                0,
                vec![
                    undeclared(
                        &fixture,
                        at,
                        "exec tool `notes.search` declares no `fs:` capability, so the sandbox keeps it from `/srv/mail/outbox`, which policy.caps grants",
                        "add \"fs:/srv/mail/outbox\" to \"capabilities\" if the tool uses that folder",
                    ),
                    undeclared(
                        &fixture,
                        at,
                        "exec tool `notes.search` declares no `net:` capability, so the sandbox keeps it from `localhost:8080`, which policy.caps grants",
                        "add \"net:localhost:8080\" to \"capabilities\" if the tool uses that host",
                    ),
                ]
            )
        );
        insta::assert_snapshot!("sandbox_grants", human);
        assert_eq!(fixture.lint_json(&["--deny-warnings"]).0, 1);
    }

    #[test]
    fn a_tool_without_capabilities_is_marked_at_its_object() {
        let fixture = Fixture::new();
        fixture.edit("tools.json", "      \"capabilities\": [\"kb_read\"],\n", "");
        fixture.edit("policy.caps", "exec = true", "exec = true\nfs = [\"/srv/mail/outbox\", \"/srv/mail/archive\"]");
        let (status, findings, human) = lint_both(&fixture);
        assert_eq!(
            (status, findings),
            (
                0,
                vec![undeclared(
                    &fixture,
                    "{\n      \"id\": \"notes.search\"",
                    "exec tool `notes.search` declares no `fs:` capability, so the sandbox keeps it from `/srv/mail/outbox` or `/srv/mail/archive`, which policy.caps grants",
                    "add \"fs:/srv/mail/outbox\", \"fs:/srv/mail/archive\" to \"capabilities\" for the folders the tool uses",
                )]
            )
        );
        insta::assert_snapshot!("sandbox_no_capabilities_key", human);
    }

    #[test]
    fn paths_and_addresses_in_args_are_named() {
        let fixture = Fixture::new();
        fixture.edit("policy.caps", "exec = true", "exec = true\nfs = [\"/srv/mail/outbox\"]");
        fixture.edit(
            "tools.json",
            "\"args\": [\"--json\"]",
            "\"args\": [\"--json\", \"--db=/var/lib/notes/index.db\", \"/srv/mail/outbox/today.eml\", \"https://search.example:9200/notes\"]",
        );
        let (status, findings, human) = lint_both(&fixture);
        let at = "\"capabilities\": [\"kb_read\"]";
        assert_eq!(
            (status, findings),
            (
                0,
                vec![
                    undeclared(
                        &fixture,
                        at,
                        "exec tool `notes.search` declares no `fs:` capability, so the sandbox keeps it from `/srv/mail/outbox`, which policy.caps grants, and from `/var/lib/notes`, which its `transport.args` name",
                        "add \"fs:/srv/mail/outbox\", \"fs:/var/lib/notes\" to \"capabilities\" for the folders the tool uses",
                    ),
                    undeclared(
                        &fixture,
                        at,
                        "exec tool `notes.search` declares no `net:` capability, so the sandbox keeps it from `search.example:9200`, which its `transport.args` name",
                        "add \"net:search.example:9200\" to \"capabilities\" if the tool uses that host",
                    ),
                ]
            )
        );
        insta::assert_snapshot!("sandbox_args", human);
    }

    #[test]
    fn limits_on_an_http_tool_are_named_and_on_an_exec_tool_are_not() {
        let fixture = Fixture::new();
        // Written without a space on the exec tool, so `"<key>": ` finds the http tool's.
        let exec_limits = "\"max_memory_bytes\":268435456, \"max_processes\":8";
        fixture.edit("tools.json", "\"timeout_ms\": 5000", &format!("\"timeout_ms\": 5000, {exec_limits}"));
        fixture.edit(
            "tools.json",
            "\"requires_confirmation\": true,",
            "\"requires_confirmation\": true, \"max_memory_bytes\": 268435456, \"max_processes\": 8,",
        );
        let (status, findings, human) = lint_both(&fixture);
        let expected = ["max_memory_bytes", "max_processes"].map(|key| {
            warning(
                &fixture,
                "RLP216",
                "sandbox-limit-on-http-tool",
                &format!("\"{key}\": "),
                &format!("`{key}` applies only to exec tools; `mail.send` is an http tool and it is ignored"),
                &format!("remove `{key}`: an http tool runs no process of its own for the sandbox to limit"),
            )
        });
        assert_eq!((status, findings), (0, expected.to_vec()));
        insta::assert_snapshot!("sandbox_limits", human);
    }

    /// RLP215 stays quiet for a grant another tool claims, for a tool that
    /// declares a capability of the family, without exec tools, for http
    /// tools, and for a path inside the bundle.
    #[test]
    fn grants_and_args_that_need_no_declaration_are_not_named() {
        let two_fs = ("policy.caps", "exec = true", "exec = true\nfs = [\"/srv/a\", \"/srv/b\"]");
        let declares_one: &[(&str, &str, &str)] =
            &[two_fs, ("tools.json", "[\"kb_read\"]", "[\"kb_read\", \"fs:/srv/a\"]")];
        // The net grant is claimed by the http tool's URL: the fixture as it is.
        run_quiet(&[]);
        run_quiet(declares_one);
        run_quiet(&[
            ("policy.caps", "\"api.mail.example\"]", "\"api.mail.example\", \"localhost:8080\", \"localhost:9090\"]"),
            ("tools.json", "[\"kb_read\"]", "[\"kb_read\", \"net:localhost:8080\"]"),
        ]);
        // No exec tool: the http tool reaches the network by its URL only.
        let fixture = Fixture::new();
        let mut tools: Value = serde_json::from_str(&fixture.read("tools.json")).unwrap();
        tools["tools"].as_array_mut().unwrap().remove(0);
        fs::write(fixture.path("tools.json"), serde_json::to_string_pretty(&tools).unwrap()).unwrap();
        fixture.edit("policy.caps", "exec = true", "exec = true\nfs = [\"/srv/mail/outbox\"]");
        fixture.edit("policy.caps", "\"api.mail.example\"]", "\"api.mail.example\", \"localhost:8080\"]");
        fixture.digest();
        assert_eq!(fixture.lint_json(&["--deny-warnings"]), (0, vec![]));
        // A path inside the bundle, and the standard streams.
        let fixture = Fixture::new();
        let inside = fixture.root.canonicalize().unwrap().join("notes.db");
        let args = format!("\"args\": [\"--json\", \"{}\", \"--log=/dev/stderr\"]", inside.display());
        fixture.edit("tools.json", "\"args\": [\"--json\"]", &args);
        fixture.digest();
        assert_eq!(fixture.lint_json(&["--deny-warnings"]), (0, vec![]));
    }

    /// Applies `edits` to the valid bundle and expects no finding at all.
    fn run_quiet(edits: &[(&str, &str, &str)]) {
        let fixture = Fixture::new();
        for (file, from, to) in edits {
            fixture.edit(file, from, to);
        }
        fixture.digest();
        assert_eq!(fixture.lint_json(&["--deny-warnings"]), (0, vec![]), "{edits:?}");
    }
}

/// RLP219–RLP224, and RLP210 and RLP216 where they meet servers: the MCP
/// servers of tools.json and the `mcp` tools that live in them.
mod servers {
    use serde_json::json;

    use super::*;

    const PIN: &str = "0d66d411a21e80d93afa1487b002a1867432c04ba1d08dc790d259639f6a69c4";

    /// The valid bundle plus a stdio and an HTTP server, one tool each, and
    /// the grants they need.
    fn fixture() -> Fixture {
        let fixture = Fixture::new();
        let read: Value = serde_json::from_str(&fixture.read("tools.json")).unwrap();
        let mut tools = json!({"version": 1, "servers": {}, "tools": read["tools"]});
        tools["servers"] = json!({
            "files": {
                "command": "/usr/local/bin/files-server",
                "args": ["/srv/notes"],
                "env": {"API_KEY": "${secret:runloop/notes/key}"},
                "capabilities": ["fs:/srv/notes"],
                "secrets": ["runloop/notes/key"]
            },
            "tracker": {
                "url": "https://mcp.tracker.example/mcp",
                "headers": {"Authorization": "Bearer ${secret:runloop/tracker/token}"},
                "secrets": ["runloop/tracker/token"]
            }
        });
        let tool = |id: &str, server: &str, name: &str, caps: Value, secret: &str, confirm: bool| {
            json!({
                "id": id,
                "description": format!("{name} of the {server} server."),
                "transport": {"kind": "mcp", "server": server, "tool": name, "definition_blake3": PIN},
                "input_schema": {"type": "object"},
                "result_schema": {},
                "capabilities": caps,
                "secrets": [secret],
                "requires_confirmation": confirm
            })
        };
        let list = tools["tools"].as_array_mut().unwrap();
        list.push(tool(
            "files.read",
            "files",
            "read_text_file",
            json!(["exec", "fs:/srv/notes"]),
            "runloop/notes/key",
            false,
        ));
        list.push(tool(
            "tracker.search",
            "tracker",
            "search_issues",
            json!(["net:mcp.tracker.example"]),
            "runloop/tracker/token",
            true,
        ));
        write_tools(&fixture, &tools);
        fixture.edit(
            "policy.caps",
            "net = [\"api.mail.example\"]",
            "net = [\"api.mail.example\", \"mcp.tracker.example\"]",
        );
        fixture.edit(
            "policy.caps",
            "secrets = [\"runloop/mail/smtp_api_key\"]",
            "secrets = [\"runloop/mail/smtp_api_key\", \"runloop/notes/key\", \"runloop/tracker/token\"]\nfs = [\"/srv/notes\"]",
        );
        fixture.digest();
        fixture
    }

    fn write_tools(fixture: &Fixture, tools: &Value) {
        fs::write(fixture.path("tools.json"), serde_json::to_string_pretty(tools).unwrap() + "\n").unwrap();
    }

    /// Rewrites tools.json through `change`, then re-digests.
    fn change_tools(fixture: &Fixture, change: impl FnOnce(&mut Value)) {
        let mut tools: Value = serde_json::from_str(&fixture.read("tools.json")).unwrap();
        change(&mut tools);
        write_tools(fixture, &tools);
        fixture.digest();
    }

    /// The JSON record of a finding of `code` in tools.json at the first
    /// `needle` after the first `anchor`.
    fn finding(fixture: &Fixture, code: &str, (anchor, needle): (&str, &str), message: &str, help: &str) -> Value {
        let text = fixture.read("tools.json");
        let from = text.find(anchor).unwrap_or_else(|| panic!("{anchor:?} not in tools.json"));
        let offset = from + text[from..].find(needle).unwrap_or_else(|| panic!("{needle:?} not after {anchor:?}"));
        let (line, column) = position_at(&text, offset);
        let rule = rlp::bundle::diag::Code::ALL.iter().find(|c| c.as_str() == code).unwrap();
        json!({
            "code": code, "rule": rule.name(), "severity": rule.severity().as_str(), "file": "mailer/tools.json",
            "line": line, "column": column, "message": message, "help": help,
        })
    }

    /// [`finding`] at the first `needle` of the file.
    fn in_tools(fixture: &Fixture, code: &str, needle: &str, message: &str, help: &str) -> Value {
        finding(fixture, code, ("", needle), message, help)
    }

    #[test]
    fn a_bundle_with_servers_lints_clean() {
        let fixture = fixture();
        assert_eq!(fixture.lint_json(&["--deny-warnings"]), (0, vec![]));
        // Plain http to this machine is fine.
        change_tools(&fixture, |tools| {
            tools["servers"]["tracker"]["url"] = json!("http://127.0.0.1:8931/mcp");
            tools["tools"][3]["capabilities"] = json!(["net:127.0.0.1:8931"]);
        });
        fixture.edit("policy.caps", "\"mcp.tracker.example\"]", "\"127.0.0.1:8931\"]");
        fixture.digest();
        assert_eq!(fixture.lint_json(&["--deny-warnings"]), (0, vec![]));
    }

    #[test]
    fn an_unknown_server_is_named_with_the_known_ones() {
        let fixture = fixture();
        change_tools(&fixture, |tools| tools["tools"][3]["transport"]["server"] = json!("trackers"));
        let expected = vec![
            in_tools(
                &fixture,
                "RLP224",
                "\"tracker\": {",
                "server `tracker` is used by no tool",
                "remove it, or give a tool `\"transport\": {\"kind\": \"mcp\", \"server\": \"tracker\", \"tool\": \"<its name on the server>\"}`",
            ),
            in_tools(
                &fixture,
                "RLP219",
                "\"trackers\"",
                "tool `tracker.search` lives in server `trackers`, which `servers` does not declare",
                "declare `trackers` under `servers`, or name one of `files`, `tracker`",
            ),
        ];
        assert_eq!(fixture.lint_json(&[]), (1, expected));
    }

    #[test]
    fn a_grant_a_server_needs_is_named_once_at_the_server() {
        let fixture = fixture();
        fixture.edit("policy.caps", "\nfs = [\"/srv/notes\"]", "");
        fixture.digest();
        let help = "add `fs = [\"/srv/notes\"]` under [capabilities] in policy.caps; every tool of the server needs it";
        let expected = vec![in_tools(
            &fixture,
            "RLP220",
            "\"fs:/srv/notes\"",
            "server `files` declares `fs:/srv/notes`, which policy.caps does not grant",
            help,
        )];
        assert_eq!(fixture.lint_json(&[]), (1, expected));
        // An implied grant is named where it comes from: the command.
        let fixture = super::servers::fixture();
        fixture.edit("policy.caps", "exec = true\n", "");
        fixture.digest();
        let (status, findings) = fixture.lint_json(&[]);
        assert_eq!(status, 1);
        let server = in_tools(
            &fixture,
            "RLP220",
            "\"/usr/local/bin/files-server\"",
            "server `files` runs a command and so needs `exec`, which policy.caps does not grant",
            "add `exec = true` under [capabilities] in policy.caps; every tool of the server needs it",
        );
        let codes: Vec<&str> = findings.iter().map(|f| f["code"].as_str().unwrap()).collect();
        assert_eq!(codes, ["RLP220", "RLP401"], "{findings:#?}");
        assert_eq!(findings[0], server);
    }

    #[test]
    fn what_a_server_needs_its_tool_declares() {
        let fixture = fixture();
        change_tools(&fixture, |tools| {
            tools["tools"][2]["capabilities"] = json!(["fs:/srv/notes"]);
            tools["tools"][2].as_object_mut().unwrap().remove("secrets");
        });
        let expected = vec![
            in_tools(
                &fixture,
                "RLP221",
                "{\n      \"id\": \"files.read\"",
                "tool `files.read` does not declare the secret `runloop/notes/key` that its server `files` needs",
                "add \"runloop/notes/key\" to the tool's `secrets`: every tool of a server needs what the server needs, so that the policy decides on each tool",
            ),
            finding(
                &fixture,
                "RLP221",
                ("\"files.read\"", "\"capabilities\""),
                "tool `files.read` does not declare the capability `exec` that its server `files` needs",
                "add \"exec\" to the tool's `capabilities`: every tool of a server needs what the server needs, so that the policy decides on each tool",
            ),
        ];
        assert_eq!(fixture.lint_json(&[]), (1, expected));
    }

    #[test]
    fn plain_http_is_for_loopback_only() {
        let fixture = fixture();
        change_tools(&fixture, |tools| tools["servers"]["tracker"]["url"] = json!("http://mcp.tracker.example/mcp"));
        let expected = vec![in_tools(
            &fixture,
            "RLP222",
            "\"http://mcp.tracker.example/mcp\"",
            "server `tracker` is reached over plain http at `mcp.tracker.example`: its requests, headers and secrets would cross the network unencrypted",
            "use `https://`; plain `http://` is only for a server on this machine (`localhost`, `127.0.0.1`, `[::1]`)",
        )];
        assert_eq!(fixture.lint_json(&[]), (1, expected));
    }

    #[test]
    fn warnings_for_a_missing_pin_an_unused_server_and_sandbox_limits() {
        let fixture = fixture();
        change_tools(&fixture, |tools| {
            tools["servers"]["spare"] = json!({"command": "/usr/local/bin/spare-server"});
            tools["tools"][2]["transport"].as_object_mut().unwrap().remove("definition_blake3");
            tools["tools"][2]["max_processes"] = json!(8);
        });
        let expected = vec![
            in_tools(
                &fixture,
                "RLP224",
                "\"spare\"",
                "server `spare` is used by no tool",
                "remove it, or give a tool `\"transport\": {\"kind\": \"mcp\", \"server\": \"spare\", \"tool\": \"<its name on the server>\"}`",
            ),
            finding(
                &fixture,
                "RLP223",
                ("\"files.read\"", "\"transport\""),
                "tool `files.read` does not pin its server's definition of `read_text_file`",
                "re-import it with `rlp tools import --mcp files`, which writes `definition_blake3`: with the pin, a server whose tool changed is refused until you re-import",
            ),
            in_tools(
                &fixture,
                "RLP216",
                "\"max_processes\"",
                "`max_processes` applies only to exec tools; `files.read` is an mcp tool and it is ignored",
                "remove `max_processes`: an mcp tool's calls run in its server's process, which the tool's limits do not bound",
            ),
        ];
        assert_eq!(fixture.lint_json(&[]), (0, expected));
        assert_eq!(fixture.lint_json(&["--deny-warnings"]).0, 1);
    }

    #[test]
    fn a_server_secret_reference_is_listed_in_the_servers_secrets() {
        let fixture = fixture();
        change_tools(&fixture, |tools| {
            tools["servers"]["files"]["env"]["API_KEY"] = json!("${secret:runloop/notes/other}");
            tools["servers"]["tracker"]["headers"]["Authorization"] = json!("Bearer ${secret:Bad}");
        });
        let expected = vec![
            in_tools(
                &fixture,
                "RLP210",
                "\"${secret:runloop/notes/other}\"",
                "env `API_KEY` uses secret `runloop/notes/other`, which server `files` does not list in `secrets`",
                "add `\"runloop/notes/other\"` to the server's `secrets`",
            ),
            in_tools(
                &fixture,
                "RLP211",
                "\"Bearer ${secret:Bad}\"",
                "header `Authorization`: `Bad` is not a secret id of the form runloop/<scope>/<name> (lower case, digits, _ - .) or <segment>.<segment>… (each a lower-case letter, then lower case, digits and single `_`)",
                "secret ids look like `runloop/mail/smtp_api_key`",
            ),
        ];
        assert_eq!(fixture.lint_json(&[]), (1, expected));
    }

    #[test]
    fn human_output_names_each_server_problem() {
        let fixture = fixture();
        change_tools(&fixture, |tools| {
            tools["servers"]["tracker"]["url"] = json!("http://mcp.tracker.example/mcp");
            tools["tools"][2]["transport"]["server"] = json!("file");
            tools["tools"][3]["capabilities"] = json!([]);
        });
        let (status, human) = run_format(&fixture, "human");
        assert_eq!(status, 1);
        insta::assert_snapshot!("servers_human", human);
    }
}

/// Rewrites the version in `bundle`'s manifest.
fn set_version(bundle: &std::path::Path, version: &str) {
    let manifest = bundle.join("manifest.toml");
    let text = fs::read_to_string(&manifest).unwrap();
    let line = text.lines().find(|l| l.starts_with("version = \"")).unwrap().to_string();
    fs::write(&manifest, text.replacen(&line, &format!("version = \"{version}\""), 1)).unwrap();
}

/// `rlp lint --against` compares a release with the previous one (an
/// archive or a folder): removed, renamed and narrowed tools need a major
/// bump, and a version that does not make it fails the gate.
#[test]
fn against_the_previous_release_names_the_breaking_changes_and_the_bump_they_need() {
    use crate::support::bundle::{runtime_tool, with};
    use serde_json::json;
    let td = TestDir::new();
    let send = |required: &[&str]| {
        with(
            runtime_tool("mail.send", "ok.sh", &[]),
            json!({"input_schema": {"type": "object", "properties": {"to": {"type": "string"}, "subject": {"type": "string"}}, "required": required}}),
        )
    };
    let caps = "[capabilities]\nexec = true\n";
    let bundle = td.bundle("mailer", json!([send(&["to"]), runtime_tool("mail.list", "ok.sh", &[])]), caps);
    set_version(&bundle, "1.2.0");
    let archive = td.join("mailer-1.2.0.bundle.tar.gz");
    let packed = td.rlp().args(["bundle", "pack"]).arg(&bundle).arg("-o").arg(&archive).output().unwrap();
    assert_eq!(packed.status.code(), Some(0), "{}", crate::support::output::stderr(&packed));
    let folder = td.join("previous");
    copy_tree(&bundle, &folder);

    td.bundle("mailer", json!([send(&["to", "subject"]), runtime_tool("mail.draft", "echo_blob.sh", &[])]), caps);
    set_version(&bundle, "1.3.0");
    for previous in [&archive, &folder] {
        let out = td.rlp().arg("lint").arg(&bundle).arg("--against").arg(previous).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        let shown = stdout(&out);
        assert_contains(&shown, &format!("against {} (1.2.0 → 1.3.0):\n", previous.display()));
        assert_contains(&shown, "  major  tool `mail.send` input: `subject` is now required\n");
        assert_contains(&shown, "  major  tool `mail.list` was removed\n");
        assert_contains(&shown, "  minor  tool `mail.draft` was added\n");
        assert_contains(
            &shown,
            "error: the changes need a major version bump: version 1.2.0 → 1.3.0 is too small a step for major changes: release 2.0.0 or later\n",
        );
    }
    set_version(&bundle, "2.0.0");
    let out = td.rlp().arg("lint").arg(&bundle).arg("--against").arg(&archive).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_contains(&stdout(&out), "  the changes need a major version bump, and the version makes it\n");
}
