//! The JSON Schemas in `schemas/` agree with the loaders in `rlp::bundle`, and
//! `docs/lint.md` documents every rule code.
//!
//! Each document below is checked twice: against its schema, and by the
//! loader (`parse_tools`, `parse_manifest`, `parse_policy`). Both must agree on
//! whether it is valid. Unknown keys are the one designed difference: the
//! schemas flag them for editors, the loaders only warn.

use std::path::PathBuf;

use rlp::bundle::diag::{Code, Finding, Severity};
use serde_json::{Value, json};

use crate::support::files::{read, read_json, repo};

const TOOLS_SCHEMA: &str = "tools.v1.schema.json";
const MANIFEST_SCHEMA: &str = "manifest.schema.json";
const POLICY_SCHEMA: &str = "policy.caps.schema.json";

fn schema(name: &str) -> Value {
    read_json(&repo("schemas").join(name))
}

fn validator(name: &str) -> jsonschema::Validator {
    jsonschema::draft202012::options().build(&schema(name)).unwrap_or_else(|e| panic!("{name} does not compile: {e}"))
}

fn schema_errors(validator: &jsonschema::Validator, document: &Value) -> Vec<String> {
    validator.iter_errors(document).map(|e| format!("{} at {}", e, e.instance_path())).collect()
}

fn loader_errors(findings: &[Finding]) -> Vec<String> {
    findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| format!("{} {}: {}", f.code, f.code.name(), f.message))
        .collect()
}

/// TOML text as the JSON value its schema describes.
fn toml_to_json(text: &str) -> Value {
    toml::from_str::<Value>(text).unwrap_or_else(|e| panic!("not TOML: {e}\n{text}"))
}

enum Kind {
    Tools,
    Manifest,
    Policy,
}

impl Kind {
    fn schema(&self) -> &'static str {
        match self {
            Kind::Tools => TOOLS_SCHEMA,
            Kind::Manifest => MANIFEST_SCHEMA,
            Kind::Policy => POLICY_SCHEMA,
        }
    }

    /// The document as JSON, and the loader's findings (an error also when
    /// the loader returned nothing).
    fn check(&self, text: &str) -> (Value, Vec<Finding>, bool) {
        match self {
            Kind::Tools => {
                let (tools, findings) = rlp::bundle::parse_tools(text);
                (serde_json::from_str(text).expect("test documents are JSON"), findings, tools.is_some())
            }
            Kind::Manifest => {
                let (manifest, findings) = rlp::bundle::parse_manifest(text);
                (toml_to_json(text), findings, manifest.is_some())
            }
            Kind::Policy => {
                let (grants, findings) = rlp::bundle::parse_policy(text);
                (toml_to_json(text), findings, grants.is_some())
            }
        }
    }
}

/// Asserts schema and loader both accept `text`, without a single finding.
fn assert_valid(kind: Kind, label: &str, text: &str) {
    let (document, findings, loaded) = kind.check(text);
    let errors = schema_errors(&validator(kind.schema()), &document);
    assert!(errors.is_empty(), "{label}: {} rejects a valid document: {errors:#?}", kind.schema());
    assert!(loaded, "{label}: the loader returned nothing");
    assert!(findings.is_empty(), "{label}: the loader reported {findings:#?}");
}

/// Asserts schema and loader both reject `text`, the loader with `code`.
fn assert_invalid(kind: Kind, label: &str, text: &str, code: Code) {
    let (document, findings, loaded) = kind.check(text);
    let errors = schema_errors(&validator(kind.schema()), &document);
    assert!(!errors.is_empty(), "{label}: {} accepts an invalid document", kind.schema());
    let loader = loader_errors(&findings);
    assert!(!loader.is_empty() || !loaded, "{label}: the loader accepts an invalid document: {findings:#?}");
    assert!(findings.iter().any(|f| f.code == code), "{label}: expected {code}, the loader reported {loader:#?}");
}

const FULL_TOOLS: &str = r#"{
  "version": 1,
  "tools": [
    {
      "id": "mail.smtp_send",
      "description": "Send rendered drafts via the configured SMTP relay.",
      "transport": {
        "kind": "http",
        "method": "POST",
        "url": "https://api.mail.example:8443/v2/users/{user}/send?dry_run={dry_run}",
        "headers": {
          "Authorization": "Bearer ${secret:runloop/mail/smtp_api_key}",
          "X-Price": "$5 or $$ or a trailing $",
          "Accept": "application/json"
        }
      },
      "input_schema": {
        "type": "object",
        "required": ["user", "draft"],
        "properties": {
          "user": {"type": "string"},
          "dry_run": {"type": "boolean"},
          "draft": {"$ref": "schema:mail.draft.v1#/$defs/draft"}
        }
      },
      "result_schema": {"$ref": "schema:mail.send.result.v1"},
      "schema_refs": {"schema:mail.draft.v1": "schemas/shared/draft.json"},
      "capabilities": ["net:api.mail.example:8443", "kb_write:drafts", "time"],
      "secrets": ["runloop/mail/smtp_api_key"],
      "budget": {"tokens": 2000, "usd": 0.25},
      "requires_confirmation": true,
      "observability": {"tags": ["external", "mail"]},
      "timeout_ms": 10000,
      "max_output_bytes": 65536,
      "retry": {"max_attempts": 3},
      "options_schema": {"type": "object", "properties": {"relay": {"type": "string"}}},
      "category": "mail",
      "discoverability": "core"
    },
    {
      "id": "notes.search",
      "description": "Search the local notes folder.",
      "transport": {"kind": "exec", "command": "/usr/local/bin/notes-search", "args": ["--json", "--limit", "20"]},
      "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}},
      "result_schema": true,
      "capabilities": ["fs:/home/user/work/notes", "kb_read", "model", "exec", "net:[::1]:9000", "net:bücher.example"],
      "secrets": ["runloop/notes/index-key.v2"],
      "budget": {"tokens": 1},
      "requires_confirmation": false,
      "observability": {"tags": []},
      "timeout_ms": 86400000,
      "max_output_bytes": 4294967296,
      "max_memory_bytes": 1099511627776,
      "max_processes": 4096,
      "retry": {"max_attempts": 1},
      "category": "notes",
      "discoverability": "discoverable"
    },
    {
      "id": "ping",
      "description": "Minimal http tool.",
      "transport": {"kind": "http", "method": "HEAD", "url": "http://localhost:8080"},
      "input_schema": {},
      "result_schema": false,
      "requires_confirmation": false
    }
  ]
}"#;

/// The example of the Runloop tools.json specification, verbatim.
const RUNLOOP_SEED_TOOLS: &str = r#"{
  "version": 1,
  "tools": [
    {
      "id": "mail.smtp_send",
      "description": "Send rendered drafts via the configured SMTP relay.",
      "transport": {
        "kind": "http",
        "method": "POST",
        "url": "https://api.mail.example/send"
      },
      "input_schema": {
        "$ref": "schema:mail.send.request.v1"
      },
      "result_schema": {
        "$ref": "schema:mail.send.result.v1"
      },
      "capabilities": ["net:api.mail.example"],
      "secrets": ["runloop/mail/smtp_api_key"],
      "requires_confirmation": true,
      "observability": {
        "tags": ["external", "mail"]
      }
    }
  ]
}"#;

/// Sets `tool[field]` (`outer.inner` for a nested key); `null` removes the key.
fn set(tool: &mut Value, field: &str, value: Value) {
    let (parent, key) = match field.split_once('.') {
        Some((outer, inner)) => (&mut tool[outer], inner),
        None => (tool, field),
    };
    let map = parent.as_object_mut().expect("an object");
    if value.is_null() {
        map.remove(key);
    } else {
        map.insert(key.to_string(), value);
    }
}

/// A tools.json with one exec tool whose `field` is replaced by `value`
/// (removed when `value` is null).
fn tool_with(field: &str, value: Value) -> String {
    let mut tool = json!({
        "id": "notes.search",
        "description": "Search notes.",
        "transport": {"kind": "exec", "command": "/usr/bin/notes"},
        "input_schema": {"type": "object"},
        "result_schema": {"type": "object"},
    });
    set(&mut tool, field, value);
    json!({"version": 1, "tools": [tool]}).to_string()
}

/// A tools.json with one http tool whose transport `field` is replaced by
/// `value` (removed when `value` is null).
fn http_with(field: &str, value: Value) -> String {
    let mut tool = json!({
        "id": "api.get",
        "description": "Get a thing.",
        "transport": {"kind": "http", "method": "GET", "url": "https://api.example.com/things/{id}"},
        "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}},
        "result_schema": {"type": "object"},
        "secrets": ["runloop/api/token"],
        "requires_confirmation": false,
    });
    set(&mut tool["transport"], field, value);
    json!({"version": 1, "tools": [tool]}).to_string()
}

const PIN: &str = "0d66d411a21e80d93afa1487b002a1867432c04ba1d08dc790d259639f6a69c4";

/// A stdio and a Streamable HTTP server, each with one tool.
const SERVERS_TOOLS: &str = r#"{
  "version": 1,
  "servers": {
    "files": {
      "command": "${bundle}/bin/files-server",
      "args": ["/srv/notes", "--key=${secret:runloop/notes/key}"],
      "env": {"LOG_LEVEL": "warn", "API_KEY": "${secret:runloop/notes/key}"},
      "capabilities": ["exec", "fs:/srv/notes"],
      "secrets": ["runloop/notes/key"],
      "startup_timeout_ms": 10000
    },
    "tracker": {
      "url": "https://mcp.tracker.example/mcp",
      "headers": {"Authorization": "Bearer ${secret:tracker.token}"},
      "capabilities": ["net:mcp.tracker.example"],
      "secrets": ["tracker.token"]
    },
    "local": {"url": "http://127.0.0.1:8931/mcp"}
  },
  "tools": [
    {
      "id": "files.read_text_file",
      "description": "Read a text file under /srv/notes.",
      "transport": {"kind": "mcp", "server": "files", "tool": "read_text_file",
                    "definition_blake3": "0d66d411a21e80d93afa1487b002a1867432c04ba1d08dc790d259639f6a69c4"},
      "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
      "result_schema": {},
      "capabilities": ["exec", "fs:/srv/notes"],
      "secrets": ["runloop/notes/key"],
      "requires_confirmation": false
    },
    {
      "id": "tracker.search",
      "description": "Search the tracker.",
      "transport": {"kind": "mcp", "server": "tracker", "tool": "search-issues/v2"},
      "input_schema": {"type": "object"},
      "result_schema": {},
      "capabilities": ["net:mcp.tracker.example"],
      "secrets": ["tracker.token"],
      "requires_confirmation": true
    }
  ]
}"#;

/// [`SERVERS_TOOLS`] with server `name` replaced by `server` (removed when
/// null).
fn server_with(name: &str, server: Value) -> String {
    let mut document: Value = serde_json::from_str(SERVERS_TOOLS).unwrap();
    set(&mut document["servers"], name, server);
    document.to_string()
}

/// [`SERVERS_TOOLS`] with the stdio server's `field` replaced by `value`
/// (removed when null).
fn stdio_with(field: &str, value: Value) -> String {
    let mut document: Value = serde_json::from_str(SERVERS_TOOLS).unwrap();
    set(&mut document["servers"]["files"], field, value);
    document.to_string()
}

/// [`SERVERS_TOOLS`] with the first tool's transport `field` replaced by
/// `value` (removed when null).
fn mcp_with(field: &str, value: Value) -> String {
    let mut document: Value = serde_json::from_str(SERVERS_TOOLS).unwrap();
    set(&mut document["tools"][0]["transport"], field, value);
    document.to_string()
}

#[test]
fn every_schema_is_a_valid_2020_12_schema() {
    let mut names: Vec<String> = std::fs::read_dir(repo("schemas"))
        .expect("schemas/ exists")
        .map(|e| e.expect("readable entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".json"))
        .collect();
    names.sort();
    assert!(names.len() >= 3, "expected the tools, manifest and policy schemas, found {names:?}");
    for name in &names {
        let document = schema(name);
        if let Err(error) = jsonschema::meta::validate(&document) {
            panic!("{name} is not a valid JSON Schema: {error}");
        }
        assert_eq!(document["$schema"], "https://json-schema.org/draft/2020-12/schema", "{name}");
        assert_eq!(document["$id"], format!("https://rlp.dev/schemas/{name}"), "{name}: $id names the file");
        assert!(document["title"].as_str().is_some_and(|t| !t.is_empty()), "{name} has no title");
        assert!(document["description"].as_str().is_some_and(|t| !t.is_empty()), "{name} has no description");
        validator(name);
    }
}

/// Every entry of every `properties` map (at any depth) has a description.
#[test]
fn every_property_is_described() {
    fn walk(value: &Value, at: &str, missing: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::Object(properties)) = map.get("properties") {
                    for (key, property) in properties {
                        let described =
                            property.get("description").and_then(Value::as_str).is_some_and(|d| d.len() > 3);
                        if !described {
                            missing.push(format!("{at}/properties/{key}"));
                        }
                    }
                }
                // `if` subschemas test values; they define no properties.
                for (key, child) in map.iter().filter(|(key, _)| *key != "if") {
                    walk(child, &format!("{at}/{key}"), missing);
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, &format!("{at}/{i}"), missing);
                }
            }
            _ => {}
        }
    }
    for name in [TOOLS_SCHEMA, MANIFEST_SCHEMA, POLICY_SCHEMA] {
        let mut missing = Vec::new();
        walk(&schema(name), "", &mut missing);
        assert!(missing.is_empty(), "{name}: properties without a description: {missing:#?}");
    }
}

/// Constants the schemas repeat match the loader's.
#[test]
fn schemas_repeat_the_loaders_constants() {
    use rlp::bundle::tools::{
        DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TIMEOUT_MS, HTTP_METHODS, MAX_MEMORY_BYTES_RANGE, MAX_PROCESSES_RANGE,
        TOOL_ID_PATTERN,
    };
    let tools = schema(TOOLS_SCHEMA);
    let tool = &tools["$defs"]["tool"]["properties"];
    assert_eq!(tool["id"]["pattern"], TOOL_ID_PATTERN);
    assert_eq!(tool["timeout_ms"]["default"], DEFAULT_TIMEOUT_MS);
    assert_eq!(tool["max_output_bytes"]["default"], DEFAULT_MAX_OUTPUT_BYTES);
    for (key, range) in [("max_memory_bytes", MAX_MEMORY_BYTES_RANGE), ("max_processes", MAX_PROCESSES_RANGE)] {
        assert_eq!((&tool[key]["minimum"], &tool[key]["maximum"]), (&json!(range.start()), &json!(range.end())));
    }
    assert_eq!(tool["retry"]["properties"]["max_attempts"]["default"], 1);
    assert_eq!(tool["discoverability"]["default"], "discoverable");
    assert_eq!(tools["$defs"]["httpTransport"]["properties"]["method"]["enum"], json!(HTTP_METHODS));
    let server = &tools["$defs"]["server"]["properties"];
    assert_eq!(server["startup_timeout_ms"]["default"], rlp::bundle::servers::DEFAULT_STARTUP_TIMEOUT_MS);
    for range in [&server["startup_timeout_ms"], &tool["timeout_ms"]] {
        assert_eq!((&range["minimum"], &range["maximum"]), (&json!(1), &json!(rlp::bundle::tools::MAX_TIMEOUT_MS)));
    }
    let mcp = &tools["$defs"]["mcpTransport"]["properties"];
    assert!(
        mcp["tool"]["pattern"].as_str().unwrap().contains(&format!(",{}}}", rlp::bundle::tools::MAX_MCP_TOOL_NAME))
    );
    assert_eq!(mcp["server"]["pattern"], rlp::bundle::manifest::NAME_PATTERN);
    assert_eq!(tools["properties"]["servers"]["propertyNames"]["pattern"], rlp::bundle::manifest::NAME_PATTERN);
    let policy = schema(POLICY_SCHEMA);
    let keys: Vec<&String> = policy["properties"]["capabilities"]["properties"].as_object().unwrap().keys().collect();
    assert_eq!(keys, rlp::bundle::policy::CAPABILITY_KEYS);
    let manifest = schema(MANIFEST_SCHEMA);
    assert_eq!(manifest["properties"]["agent"]["properties"]["name"]["pattern"], rlp::bundle::manifest::NAME_PATTERN);
}

#[test]
fn valid_tools_documents_pass_schema_and_loader() {
    assert_valid(Kind::Tools, "full", FULL_TOOLS);
    assert_valid(Kind::Tools, "runloop seed", RUNLOOP_SEED_TOOLS);
    assert_valid(Kind::Tools, "no tools", r#"{"version": 1}"#);
    assert_valid(Kind::Tools, "empty tools", r#"{"version": 1, "tools": []}"#);
    assert_valid(Kind::Tools, "minimal exec", &tool_with("category", json!("x")));
    assert_valid(
        Kind::Tools,
        "minimal http",
        &http_with("headers", json!({"Authorization": "${secret:runloop/api/token}"})),
    );
    assert_valid(Kind::Tools, "1 MiB of memory", &tool_with("max_memory_bytes", json!(1_048_576)));
    assert_valid(Kind::Tools, "one process", &tool_with("max_processes", json!(1)));
    assert_valid(Kind::Tools, "root fs grant", &tool_with("capabilities", json!(["fs:/", "fs:/srv/.cache/..x"])));
    assert_valid(Kind::Tools, "upper-case scheme", &http_with("url", json!("HTTPS://Api.Example.com/{id}")));
    assert_valid(Kind::Tools, "servers", SERVERS_TOOLS);
    assert_valid(Kind::Tools, "absolute command", &stdio_with("command", json!("/usr/local/bin/files-server")));
    assert_valid(
        Kind::Tools,
        "dollar signs",
        &stdio_with("args", json!(["$HOME", "$$", "a$", "$${secret:runloop/notes/key}"])),
    );
    assert_valid(Kind::Tools, "no pin", &mcp_with("definition_blake3", Value::Null));
    assert_valid(Kind::Tools, "no servers", r#"{"version": 1, "servers": {}}"#);
}

#[test]
fn invalid_tools_documents_fail_schema_and_loader() {
    use Code::*;
    let cases: Vec<(&str, String, Code)> = vec![
        ("bad id", tool_with("id", json!("Mail.Send")), ToolIdInvalid),
        ("id with a dash", tool_with("id", json!("mail.smtp-send")), ToolIdInvalid),
        ("empty id segment", tool_with("id", json!("mail..send")), ToolIdInvalid),
        ("relative command", tool_with("transport.command", json!("bin/notes")), ExecCommandNotAbsolute),
        ("unknown version", r#"{"version": 2, "tools": []}"#.to_string(), UnsupportedVersion),
        ("version as a string", r#"{"version": "1", "tools": []}"#.to_string(), UnsupportedVersion),
        ("no version", r#"{"tools": []}"#.to_string(), MissingField),
        ("bad secret id", tool_with("secrets", json!(["mail/smtp_api_key"])), SecretIdInvalid),
        ("secret id in upper case", tool_with("secrets", json!(["runloop/Mail/key"])), SecretIdInvalid),
        ("bad capability", tool_with("capabilities", json!(["network:api.example.com"])), CapabilityInvalid),
        ("net without a host", tool_with("capabilities", json!(["net:"])), CapabilityInvalid),
        ("net with a scheme", tool_with("capabilities", json!(["net:https://api.example.com"])), CapabilityInvalid),
        ("port out of range", tool_with("capabilities", json!(["net:api.example.com:65536"])), CapabilityInvalid),
        ("relative fs", tool_with("capabilities", json!(["fs:home/user"])), CapabilityInvalid),
        ("fs with ..", tool_with("capabilities", json!(["fs:/home/../etc"])), CapabilityInvalid),
        ("exec with an argument", tool_with("capabilities", json!(["exec:now"])), CapabilityInvalid),
        ("bad kb domain", tool_with("capabilities", json!(["kb_read:Drafts"])), CapabilityInvalid),
        ("empty description", tool_with("description", json!("  ")), ToolDescriptionEmpty),
        ("no transport", tool_with("transport", Value::Null), MissingField),
        ("unknown transport kind", tool_with("transport.kind", json!("socket")), InvalidValue),
        ("lower-case method", http_with("method", json!("get")), HttpMethodInvalid),
        ("no url", http_with("url", Value::Null), MissingField),
        ("relative url", http_with("url", json!("/things/{id}")), HttpUrlInvalid),
        ("ftp url", http_with("url", json!("ftp://files.example.com/{id}")), HttpUrlInvalid),
        ("credentials in url", http_with("url", json!("https://u:p@api.example.com/{id}")), HttpUrlInvalid),
        ("unclosed placeholder", http_with("url", json!("https://api.example.com/{id")), HttpUrlInvalid),
        ("placeholder in host", http_with("url", json!("https://{tenant}.example.com/x")), UrlPlaceholderInAuthority),
        ("placeholder in port", http_with("url", json!("https://api.example.com:{port}/x")), UrlPlaceholderInAuthority),
        ("header with CRLF", http_with("headers", json!({"X-A": "a\r\nX-B: b"})), HeaderInvalid),
        ("bad header name", http_with("headers", json!({"X A": "b"})), HeaderInvalid),
        ("non-secret placeholder", http_with("headers", json!({"X-A": "${env:HOME}"})), HeaderInvalid),
        (
            "unclosed placeholder in header",
            http_with("headers", json!({"X-A": "${secret:runloop/api/token"})),
            HeaderInvalid,
        ),
        ("schema as a string", tool_with("input_schema", json!("schema:x")), WrongType),
        ("no result schema", tool_with("result_schema", Value::Null), SchemaMissing),
        ("schema_refs key", tool_with("schema_refs", json!({"x": "schemas/x.json"})), InvalidValue),
        ("timeout 0", tool_with("timeout_ms", json!(0)), InvalidValue),
        ("timeout over a day", tool_with("timeout_ms", json!(86_400_001)), InvalidValue),
        ("output over 4 GiB", tool_with("max_output_bytes", json!(4_294_967_297_u64)), InvalidValue),
        ("fractional timeout", tool_with("timeout_ms", json!(1.5)), InvalidValue),
        ("memory under 1 MiB", tool_with("max_memory_bytes", json!(1_048_575)), InvalidValue),
        ("memory over 1 TiB", tool_with("max_memory_bytes", json!(1_099_511_627_777_u64)), InvalidValue),
        ("memory as a string", tool_with("max_memory_bytes", json!("1GiB")), WrongType),
        ("no processes", tool_with("max_processes", json!(0)), InvalidValue),
        ("4097 processes", tool_with("max_processes", json!(4097)), InvalidValue),
        ("fractional processes", tool_with("max_processes", json!(2.5)), InvalidValue),
        ("processes as a boolean", tool_with("max_processes", json!(true)), WrongType),
        ("11 attempts", tool_with("retry", json!({"max_attempts": 11})), InvalidValue),
        ("negative budget", tool_with("budget", json!({"usd": -1})), InvalidValue),
        ("no tokens", tool_with("budget", json!({"tokens": 0})), InvalidValue),
        ("bad discoverability", tool_with("discoverability", json!("hidden")), InvalidValue),
        ("confirmation as a string", tool_with("requires_confirmation", json!("yes")), WrongType),
        ("tags as a string", tool_with("observability", json!({"tags": "mail"})), WrongType),
        ("tools as an object", r#"{"version": 1, "tools": {}}"#.to_string(), WrongType),
        ("a tool that is a number", r#"{"version": 1, "tools": [7]}"#.to_string(), WrongType),
        ("command and url", stdio_with("url", json!("https://x.example/mcp")), InvalidValue),
        ("neither command nor url", server_with("local", json!({"capabilities": []})), MissingField),
        ("relative server command", stdio_with("command", json!("npx")), ExecCommandNotAbsolute),
        ("command out of the bundle", stdio_with("command", json!("${bundle}/../x")), ExecCommandNotAbsolute),
        (
            "server url with a placeholder",
            server_with("local", json!({"url": "https://x.example/{t}"})),
            HttpUrlInvalid,
        ),
        ("server url of another scheme", server_with("local", json!({"url": "ws://x.example/mcp"})), HttpUrlInvalid),
        ("server url with credentials", server_with("local", json!({"url": "https://u:p@x.example/"})), HttpUrlInvalid),
        ("env name", stdio_with("env", json!({"1A": "x"})), InvalidValue),
        ("NUL in env", stdio_with("env", json!({"A": "a\u{0}b"})), InvalidValue),
        ("non-secret placeholder in args", stdio_with("args", json!(["${HOME}"])), InvalidValue),
        (
            "server header with CRLF",
            server_with("local", json!({"url": "http://localhost/", "headers": {"A": "a\r\nb"}})),
            HeaderInvalid,
        ),
        ("server name", server_with("Files", json!({"command": "/bin/s"})), InvalidValue),
        ("server as a string", server_with("local", json!("http://localhost/")), WrongType),
        ("servers as a list", r#"{"version": 1, "servers": []}"#.to_string(), WrongType),
        ("startup timeout 0", stdio_with("startup_timeout_ms", json!(0)), InvalidValue),
        ("startup timeout over a day", stdio_with("startup_timeout_ms", json!(86_400_001)), InvalidValue),
        ("server capability", stdio_with("capabilities", json!(["fs:srv"])), CapabilityInvalid),
        ("server secret", stdio_with("secrets", json!(["key"])), SecretIdInvalid),
        ("no server", mcp_with("server", Value::Null), MissingField),
        ("no tool", mcp_with("tool", Value::Null), MissingField),
        ("server in upper case", mcp_with("server", json!("Files")), InvalidValue),
        ("tool with a space", mcp_with("tool", json!("read file")), InvalidValue),
        ("tool of 129 characters", mcp_with("tool", json!("x".repeat(129))), InvalidValue),
        ("upper-case pin", mcp_with("definition_blake3", json!(PIN.to_uppercase())), InvalidValue),
        ("short pin", mcp_with("definition_blake3", json!(&PIN[1..])), InvalidValue),
    ];
    for (label, text, code) in cases {
        assert_invalid(Kind::Tools, label, &text, code);
    }
}

/// The sandbox limits reach the loaded tool as written; `null` is the same as
/// leaving a limit out, and a value out of range is named with the range.
#[test]
fn sandbox_limits_load_into_the_tool() {
    let limits = |document: &Value| {
        let (tools, findings) = rlp::bundle::parse_tools(&document.to_string());
        let tool = tools.and_then(|t| t.tools.into_iter().next());
        (tool.map(|t| (t.max_memory_bytes, t.max_processes)), findings)
    };
    let mut document: Value = serde_json::from_str(&tool_with("max_memory_bytes", json!(268_435_456))).unwrap();
    document["tools"][0]["max_processes"] = json!(64);
    assert_eq!(limits(&document), (Some((Some(268_435_456), Some(64))), vec![]));
    document["tools"][0]["max_memory_bytes"] = Value::Null;
    document["tools"][0]["max_processes"] = Value::Null;
    assert_eq!(limits(&document), (Some((None, None)), vec![]));
    document["tools"][0]["max_memory_bytes"] = json!(1_048_575);
    let (loaded, findings) = limits(&document);
    assert_eq!(loaded, Some((None, None)));
    let found: Vec<(Code, &str, Option<&str>)> =
        findings.iter().map(|f| (f.code, f.message.as_str(), f.help.as_deref())).collect();
    assert_eq!(
        found,
        [(
            Code::InvalidValue,
            "`max_memory_bytes` is 1048575, outside 1048576..=1099511627776",
            Some("use a value from 1048576 to 1099511627776")
        )]
    );
    document["tools"][0]["max_memory_bytes"] = Value::Null;
    document["tools"][0]["max_processes"] = json!(4097);
    let messages: Vec<String> = limits(&document).1.into_iter().map(|f| f.message).collect();
    assert_eq!(messages, ["`max_processes` is 4097, outside 1..=4096"]);
}

/// A required key written as `null` is as wrong as a missing one; the schema
/// says so, and the loader reports it as missing.
#[test]
fn required_keys_set_to_null_fail_schema_and_loader() {
    let null_transport = json!({"version": 1, "tools": [{
        "id": "a", "description": "A.", "transport": null, "input_schema": {}, "result_schema": {},
    }]});
    let null_id = json!({"version": 1, "tools": [{
        "id": null, "description": "A.", "transport": {"kind": "exec", "command": "/bin/a"},
        "input_schema": {}, "result_schema": {},
    }]});
    let null_url = json!({"version": 1, "tools": [{
        "id": "a", "description": "A.", "transport": {"kind": "http", "method": "GET", "url": null},
        "input_schema": {}, "result_schema": {}, "requires_confirmation": false,
    }]});
    for (label, document) in [("transport", null_transport), ("id", null_id), ("url", null_url)] {
        assert_invalid(Kind::Tools, label, &document.to_string(), Code::MissingField);
    }
}

/// Unknown keys: editors flag them (the schema), rlp warns and goes on.
#[test]
fn unknown_keys_are_schema_errors_but_loader_warnings() {
    let documents = [
        r#"{"$schema": "https://rlp.dev/schemas/tools.v1.schema.json", "version": 1, "tools": []}"#.to_string(),
        tool_with("colour", json!("blue")),
        tool_with("retry", json!({"max_attempts": 2, "backoff_ms": 100})),
        http_with("command", json!("/bin/sh")),
        stdio_with("colour", json!("blue")),
        stdio_with("headers", json!({"A": "b"})),
        server_with("local", json!({"url": "http://localhost/", "args": []})),
        mcp_with("url", json!("https://x.example/mcp")),
    ];
    for text in documents {
        let (document, findings, loaded) = Kind::Tools.check(&text);
        assert!(!schema_errors(&validator(TOOLS_SCHEMA), &document).is_empty(), "schema accepts {text}");
        assert!(loaded && loader_errors(&findings).is_empty(), "loader errors on {text}: {findings:#?}");
        assert!(findings.iter().any(|f| f.code == Code::UnknownField && f.severity == Severity::Warning), "{text}");
    }
}

const FULL_MANIFEST: &str = r#"
[agent]
name = "mailer"
version = "1.2.3-rc.1+build.5"
description = "Sends drafts"
kind = "wasm32-wasip1"
entry_wasm = { path = "bin/mailer.wasm", blake3 = "0d66d411a21e80d93afa1487b002a1867432c04ba1d08dc790d259639f6a69c4", size = 8 }

[ports]
in = []
out = ["out"]

[schemas.with]
type = "object"
required = ["input"]

[caps]
file = "policy.caps"

[artifacts.tools]
path = "tools.json"
blake3 = "8f61d5e02b32eb874d22c732471d3b056a4c802240fedef2d661632b1cc5509f"
version = 1
size = 1351

[artifacts.caps]
path = "policy.caps"
blake3 = "DB635B4B1380B42D6129E38BCF28C7A43461B29B778D54C850008F19EE17E569"
size = 205

[artifacts."schemas/mail.send.request.v1.json"]
path = "schemas/mail.send.request.v1.json"
blake3 = "4c88604b5591995f97d33f7ecaea171ab3ff1e7c9900819e4613e1089d700bde"
size = 283

[artifacts."bin/.gitkeep"]
path = "bin/.gitkeep"
blake3 = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
size = 0

[shared_schemas."mail.address.v1"]
blake3 = "9a31d5c0e1b2f4a6c8e0a2b4d6f8091a3c5e7f9b1d3f5a7c9e1b3d5f7a9c1e3f"
size = 214
"#;

const UPSTREAM_MANIFEST: &str = r#"
[agent]
name = "mailer"
version = "0.1.0"
kind = "native-shim"
entry_native = { path = "bin/mailer", blake3 = "0000000000000000000000000000000000000000000000000000000000000000" }

[caps]
file = "policy.caps"

[artifacts.tools]
path = "tools.json"
blake3 = "8f61d5e02b32eb874d22c732471d3b056a4c802240fedef2d661632b1cc5509f"
version = 1
"#;

const DIGEST: &str = "8f61d5e02b32eb874d22c732471d3b056a4c802240fedef2d661632b1cc5509f";

fn manifest_with(tail: &str) -> String {
    format!("[agent]\nname = \"mailer\"\nversion = \"0.1.0\"\n{tail}")
}

#[test]
fn valid_manifests_pass_schema_and_loader() {
    assert_valid(Kind::Manifest, "full", FULL_MANIFEST);
    assert_valid(Kind::Manifest, "upstream", UPSTREAM_MANIFEST);
    assert_valid(Kind::Manifest, "tools-only, no artifacts", &manifest_with(""));
    assert_valid(
        Kind::Manifest,
        "dotted file names",
        &manifest_with(&format!("[artifacts.\"..data/.x\"]\npath = \"..data/.x\"\nblake3 = \"{DIGEST}\"\n")),
    );
}

#[test]
fn invalid_manifests_fail_schema_and_loader() {
    use Code::*;
    let artifact = |path: &str, blake3: &str, extra: &str| {
        manifest_with(&format!("[artifacts.\"{path}\"]\npath = \"{path}\"\nblake3 = \"{blake3}\"\n{extra}"))
    };
    let cases: Vec<(&str, String, Code)> = vec![
        ("no [agent]", "[caps]\nfile = \"policy.caps\"\n".to_string(), MissingField),
        ("no name", "[agent]\nversion = \"0.1.0\"\n".to_string(), MissingField),
        ("no version", "[agent]\nname = \"mailer\"\n".to_string(), MissingField),
        ("name as a number", "[agent]\nname = 7\nversion = \"0.1.0\"\n".to_string(), WrongType),
        ("unknown kind", manifest_with("kind = \"elf\"\n"), InvalidValue),
        ("short digest", artifact("a.txt", "abc", ""), InvalidValue),
        ("non-hex digest", artifact("a.txt", &"g".repeat(64), ""), InvalidValue),
        ("path with ..", artifact("../etc/passwd", DIGEST, ""), ArtifactPathInvalid),
        ("absolute path", artifact("/etc/passwd", DIGEST, ""), ArtifactPathInvalid),
        ("path with a space", artifact("a b.txt", DIGEST, ""), ArtifactPathInvalid),
        ("negative size", artifact("a.txt", DIGEST, "size = -1\n"), InvalidValue),
        ("size beyond 2^53", artifact("a.txt", DIGEST, "size = 9007199254740992\n"), InvalidValue),
        ("size as a string", artifact("a.txt", DIGEST, "size = \"1\"\n"), WrongType),
        ("artifact without path", manifest_with(&format!("[artifacts.x]\nblake3 = \"{DIGEST}\"\n")), MissingField),
        ("artifact without digest", manifest_with("[artifacts.x]\npath = \"x\"\n"), MissingField),
        (
            "tools artifact names another file",
            manifest_with(&format!("[artifacts.tools]\npath = \"tool.json\"\nblake3 = \"{DIGEST}\"\n")),
            InvalidValue,
        ),
        (
            "entry with a bad path",
            manifest_with(&format!(
                "kind = \"native-shim\"\nentry_native = {{ path = \"../x\", blake3 = \"{DIGEST}\" }}\n"
            )),
            ArtifactPathInvalid,
        ),
        ("ports as a string", manifest_with("[ports]\nout = \"out\"\n"), WrongType),
        ("caps file as a list", manifest_with("[caps]\nfile = [\"policy.caps\"]\n"), WrongType),
        ("datetime", manifest_with("description = 1979-05-27T07:32:00Z\n"), WrongType),
        (
            "shared schema pin with a path for an id",
            manifest_with(&format!("[shared_schemas.\"../x\"]\nblake3 = \"{DIGEST}\"\n")),
            InvalidValue,
        ),
        ("shared schema pin without digest", manifest_with("[shared_schemas.x]\nsize = 3\n"), MissingField),
        (
            "shared schema pin with a short digest",
            manifest_with("[shared_schemas.x]\nblake3 = \"abc\"\n"),
            InvalidValue,
        ),
    ];
    for (label, text, code) in cases {
        assert_invalid(Kind::Manifest, label, &text, code);
    }
}

#[test]
fn unknown_manifest_keys_are_schema_errors_but_loader_warnings() {
    for text in [
        manifest_with("license = \"MIT\"\n"),
        manifest_with(&format!("[artifacts.tools]\npath = \"tools.json\"\nblake3 = \"{DIGEST}\"\nsigned = true\n")),
        format!("{}\n[build]\ntarget = \"wasm32-wasip1\"\n", manifest_with("")),
    ] {
        let (document, findings, loaded) = Kind::Manifest.check(&text);
        assert!(!schema_errors(&validator(MANIFEST_SCHEMA), &document).is_empty(), "schema accepts {text}");
        assert!(loaded && loader_errors(&findings).is_empty(), "loader errors on {text}: {findings:#?}");
        assert!(findings.iter().any(|f| f.code == Code::UnknownField), "{text}");
    }
}

const FULL_POLICY: &str = r#"
[capabilities]
fs = ["/home/user/work/notes", "/srv/data/"]
net = ["api.mail.example", "localhost:8080", "Bücher.Example", "[::1]:9000", "127.0.0.1"]
time = true
kb_read = true
kb_write = ["drafts", "mail.sent"]
secrets = ["runloop/mail/smtp_api_key"]
model = true
exec = false
"#;

#[test]
fn valid_policies_pass_schema_and_loader() {
    assert_valid(Kind::Policy, "full", FULL_POLICY);
    assert_valid(Kind::Policy, "empty file", "");
    assert_valid(Kind::Policy, "empty table", "[capabilities]\n");
    assert_valid(Kind::Policy, "false and empty lists", "[capabilities]\nkb_read = false\nkb_write = []\nnet = []\n");
}

#[test]
fn invalid_policies_fail_schema_and_loader() {
    use Code::*;
    let caps = |line: &str| format!("[capabilities]\n{line}\n");
    let cases: Vec<(&str, String, Code)> = vec![
        ("relative fs", caps("fs = [\"home/user\"]"), PolicyValueInvalid),
        ("fs with ..", caps("fs = [\"/home/../etc\"]"), PolicyValueInvalid),
        ("net with a scheme", caps("net = [\"https://api.example.com\"]"), PolicyValueInvalid),
        ("net with a path", caps("net = [\"api.example.com/v1\"]"), PolicyValueInvalid),
        ("port 0", caps("net = [\"localhost:0\"]"), PolicyValueInvalid),
        ("port out of range", caps("net = [\"localhost:70000\"]"), PolicyValueInvalid),
        ("bad secret", caps("secrets = [\"mail/smtp_api_key\"]"), PolicyValueInvalid),
        ("secret with 4 parts", caps("secrets = [\"runloop/a/b/c\"]"), PolicyValueInvalid),
        ("bad kb domain", caps("kb_write = [\"Drafts\"]"), PolicyValueInvalid),
        ("kb_read as a number", caps("kb_read = 1"), WrongType),
        ("exec as a string", caps("exec = \"yes\""), WrongType),
        ("net as a string", caps("net = \"localhost\""), WrongType),
        ("capabilities as a list", "capabilities = []\n".to_string(), WrongType),
    ];
    for (label, text, code) in cases {
        assert_invalid(Kind::Policy, label, &text, code);
    }
}

#[test]
fn unknown_policy_keys_are_schema_errors_but_loader_warnings() {
    for text in ["[capabilities]\ngpu = true\n", "[limits]\ncpu = 1\n"] {
        let (document, findings, loaded) = Kind::Policy.check(text);
        assert!(!schema_errors(&validator(POLICY_SCHEMA), &document).is_empty(), "schema accepts {text}");
        assert!(loaded && loader_errors(&findings).is_empty(), "loader errors on {text}: {findings:#?}");
        assert!(findings.iter().any(|f| f.code == Code::UnknownField), "{text}");
    }
}

/// The fuzz seed corpora are real documents: schema and loader agree on each.
#[test]
fn fuzz_seeds_agree_with_their_schema() {
    for (folder, kind) in [("tools", Kind::Tools), ("manifest", Kind::Manifest), ("policy", Kind::Policy)] {
        let dir = repo("fuzz/seeds").join(folder);
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("readable entry").path())
            .collect();
        paths.sort();
        assert!(!paths.is_empty(), "{} is empty", dir.display());
        for path in paths {
            let text = std::fs::read_to_string(&path).expect("seeds are UTF-8");
            let (document, findings, loaded) = kind.check(&text);
            let schema_ok = schema_errors(&validator(kind.schema()), &document).is_empty();
            let loader_ok = loaded && loader_errors(&findings).is_empty();
            assert_eq!(schema_ok, loader_ok, "{}: schema and loader disagree: {findings:#?}", path.display());
        }
    }
}

/// The first fenced block of `lang` after `heading` in a Markdown text.
fn fenced_block<'a>(text: &'a str, heading: &str, lang: &str) -> &'a str {
    let after = &text[text.find(heading).unwrap_or_else(|| panic!("no heading `{heading}`"))..];
    let open = format!("```{lang}\n");
    let start = after.find(&open).unwrap_or_else(|| panic!("no {lang} block after `{heading}`")) + open.len();
    let end = after[start..].find("\n```").expect("a closed block");
    &after[start..start + end + 1]
}

/// The complete examples of docs/formats.md are valid for schema and loader.
#[test]
fn format_docs_examples_are_valid() {
    let text = read(&repo("docs/formats.md"));
    assert_valid(Kind::Manifest, "manifest example", fenced_block(&text, "## manifest.toml", "toml"));
    assert_valid(Kind::Manifest, "upstream example", fenced_block(&text, "## Upstream Runloop manifests", "toml"));
    assert_valid(Kind::Policy, "policy example", fenced_block(&text, "## policy.caps", "toml"));
    assert_valid(Kind::Tools, "tools example", fenced_block(&text, "## tools.json (version 1)", "json"));
    assert_valid(Kind::Tools, "servers example", fenced_block(&text, "### MCP servers", "json"));
}

#[test]
fn lint_docs_have_a_section_per_rule() {
    let text = read(&repo("docs/lint.md"));
    let headings: Vec<&str> = text.lines().filter(|l| l.starts_with("### RLP")).collect();
    for code in Code::ALL {
        let heading = format!("### {} {}", code.as_str(), code.name());
        assert!(headings.contains(&heading.as_str()), "docs/lint.md has no section `{heading}`");
        let anchor = format!("<a id=\"{}\"></a>", code.as_str().to_lowercase());
        assert!(text.contains(&anchor), "docs/lint.md has no anchor `{anchor}` (SARIF helpUri links to it)");
    }
    assert_eq!(headings.len(), Code::ALL.len(), "docs/lint.md documents codes the catalog does not have");
}
