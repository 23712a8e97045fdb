use serde_json::{Value, json};

use super::*;
use crate::bundle::command::Programs;
use crate::bundle::source::{SourceFile, Syntax};
use crate::bundle::tools::{TOOLS_FILE, ToolsFile, Transport};

const PIN: &str = "0d66d411a21e80d93afa1487b002a1867432c04ba1d08dc790d259639f6a69c4";

/// Reads `text` as tools.json: what loaded, and each finding as
/// `line:column CODE message`.
fn read(text: &str) -> (Option<ToolsFile>, Vec<String>) {
    let (file, findings) = crate::bundle::parse_tools(text);
    let source = SourceFile::new(TOOLS_FILE, text.to_string(), Syntax::Json);
    let shown = findings
        .iter()
        .map(|f| {
            let position = source.position(source.locate(&f.at).map_or(0, |span| span.start));
            format!("{}:{} {} {}", position.line, position.column, f.code, f.message)
        })
        .collect();
    (file, shown)
}

/// A tools.json with `servers` and one tool of server `files`, pretty-printed
/// so that findings have distinct lines.
fn document(servers: Value) -> String {
    serde_json::to_string_pretty(&json!({
        "version": 1,
        "servers": servers,
        "tools": [{
            "id": "files.read",
            "description": "Read a file.",
            "transport": {"kind": "mcp", "server": "files", "tool": "read_text_file", "definition_blake3": PIN},
            "input_schema": {"type": "object"},
            "result_schema": {},
        }],
    }))
    .unwrap()
}

/// `line:column` of the first `needle` in `text`.
fn position(text: &str, needle: &str) -> String {
    let offset = text.find(needle).unwrap_or_else(|| panic!("{needle:?} not in {text}"));
    let source = SourceFile::new(TOOLS_FILE, text.to_string(), Syntax::Json);
    let position = source.position(offset);
    format!("{}:{}", position.line, position.column)
}

/// Asserts the findings of `text`: each `(needle, "CODE message")` at the
/// first `needle`.
fn assert_findings(text: &str, expected: &[(&str, &str)]) {
    let expected: Vec<String> =
        expected.iter().map(|(needle, finding)| format!("{} {finding}", position(text, needle))).collect();
    assert_eq!(read(text).1, expected, "{text}");
}

/// Asserts the findings of a document whose server `files` is `server`.
fn assert_server(server: Value, expected: &[(&str, &str)]) {
    assert_findings(&document(json!({ "files": server })), expected);
}

#[test]
fn a_stdio_and_an_http_server_load_with_every_field() {
    let text = document(json!({
        "files": {
            "command": "${bundle}/bin/files-server",
            "args": ["/srv/notes", "--token=${secret:notes.key}"],
            "env": {"LOG_LEVEL": "warn", "API_KEY": "${secret:runloop/notes/key}"},
            "capabilities": ["exec", "fs:/srv/notes"],
            "secrets": ["runloop/notes/key", "notes.key"],
            "startup_timeout_ms": 5000
        },
        "tracker": {
            "url": "https://mcp.tracker.example/mcp",
            "headers": {"Authorization": "Bearer ${secret:runloop/tracker/token}"},
            "capabilities": ["net:mcp.tracker.example"],
            "secrets": ["runloop/tracker/token"]
        }
    }));
    let (file, findings) = read(&text);
    assert_eq!(findings, Vec::<String>::new());
    let file = file.unwrap();
    let [files, tracker] = &file.servers[..] else { panic!("two servers: {:?}", file.servers) };
    assert_eq!(files.name, "files");
    assert_eq!(files.at, Pointer::root().key("servers").key("files"));
    assert_eq!(
        files.transport,
        Some(ServerTransport::Stdio {
            programs: Programs { command: Some("${bundle}/bin/files-server".into()), platforms: Vec::new() },
            args: vec!["/srv/notes".into(), "--token=${secret:notes.key}".into()],
            env: vec![("LOG_LEVEL".into(), "warn".into()), ("API_KEY".into(), "${secret:runloop/notes/key}".into())],
        })
    );
    assert_eq!(files.startup_timeout_ms, 5000);
    let required: Vec<String> = files.required_capabilities().iter().map(ToString::to_string).collect();
    assert_eq!(required, ["exec", "fs:/srv/notes", "secrets:runloop/notes/key", "secrets:notes.key"]);
    let refs: Vec<(String, &str, &str)> =
        files.secret_refs.iter().map(|r| (r.at.to_string(), r.site.as_str(), r.id.as_str())).collect();
    assert_eq!(
        refs,
        [
            ("/servers/files/args/1".to_string(), "argument 2", "notes.key"),
            ("/servers/files/env/API_KEY".to_string(), "env `API_KEY`", "runloop/notes/key"),
        ]
    );
    assert_eq!(tracker.startup_timeout_ms, DEFAULT_STARTUP_TIMEOUT_MS);
    assert_eq!(tracker.url().map(|u| u.as_str()), Some("https://mcp.tracker.example/mcp"));
    let required: Vec<String> = tracker.required_capabilities().iter().map(ToString::to_string).collect();
    assert_eq!(required, ["net:mcp.tracker.example", "net:mcp.tracker.example:443", "secrets:runloop/tracker/token"]);
    assert_eq!(tracker.secret_refs[0].site, "header `Authorization`");
    let tool = &file.tools[0];
    assert_eq!(
        tool.transport,
        Some(Transport::Mcp {
            server: "files".into(),
            tool: "read_text_file".into(),
            definition_blake3: Some(PIN.into()),
            definition_parts: Vec::new(),
        })
    );
    assert_eq!(file.server_of(tool).map(|s| s.name.as_str()), Some("files"));
    assert!(tool.required_capabilities().is_empty(), "an mcp tool implies nothing");
}

#[test]
fn a_document_without_servers_has_none() {
    let (file, findings) = read(r#"{"version": 1, "tools": []}"#);
    assert_eq!((file.unwrap().servers, findings), (vec![], vec![]));
    let (file, findings) = read(r#"{"version": 1, "servers": {}}"#);
    assert_eq!((file.unwrap().servers, findings), (vec![], vec![]));
}

#[test]
fn a_server_is_stdio_or_http_never_both_nor_neither() {
    assert_server(
        json!({"command": "/bin/s", "url": "https://x.example/mcp"}),
        &[("\"url\"", "RLP007 server `files` has both `command` and `url`")],
    );
    assert_server(
        json!({"capabilities": ["exec"]}),
        &[("\"files\": {", "RLP006 server `files` has neither `command` nor `url`")],
    );
    assert_server(
        json!({"command": "/bin/s", "headers": {"A": "b"}}),
        &[("\"headers\"", "RLP004 `headers` has no meaning for a stdio server")],
    );
    assert_server(
        json!({"url": "https://x.example/mcp", "env": {"A": "b"}, "args": []}),
        &[
            ("\"args\"", "RLP004 `args` has no meaning for an HTTP server"),
            ("\"env\"", "RLP004 `env` has no meaning for an HTTP server"),
        ],
    );
    assert_server(
        json!({"command": "/bin/s", "colour": "blue"}),
        &[("\"colour\"", "RLP004 unknown key `colour` in the server")],
    );
}

#[test]
fn a_command_is_absolute_or_inside_the_bundle() {
    for good in ["/usr/bin/server", "${bundle}/bin/server", "${bundle}/server.py"] {
        assert_server(json!({"command": good}), &[]);
    }
    for (command, message) in [
        ("npx", "RLP204 command `npx` is neither an absolute path nor `${bundle}/<path>`"),
        ("${bundle}/../escape", "RLP204 command `${bundle}/../escape` does not name a file inside the bundle"),
        ("${bundle}/", "RLP204 command `${bundle}/` does not name a file inside the bundle"),
        ("${bundle}bin/s", "RLP204 command `${bundle}bin/s` is neither an absolute path nor `${bundle}/<path>`"),
    ] {
        assert_server(json!({"command": command}), &[(&format!("\"{command}\""), message)]);
    }
}

#[test]
fn values_hold_only_well_formed_secret_references() {
    assert_server(
        json!({"command": "/bin/s", "args": ["-v", "${HOME}/x"]}),
        &[("\"${HOME}/x\"", "RLP007 argument 2: `${HOME}` is not a secret reference; write `${secret:<id>}`")],
    );
    assert_server(
        json!({"command": "/bin/s", "env": {"KEY": "${secret:runloop/a/b"}}),
        &[("\"${secret:runloop/a/b\"", "RLP007 env `KEY`: unclosed `${` in `${secret:runloop/a/b`")],
    );
    assert_server(
        json!({"command": "/bin/s", "env": {"1KEY": "x", "OK": "a\u{0}b"}}),
        &[
            ("\"1KEY\"", "RLP007 `1KEY` is not an environment variable name"),
            ("\"a\\u0000b\"", "RLP007 env `OK` contains a NUL character"),
        ],
    );
    assert_server(
        json!({"url": "https://x.example/mcp", "headers": {"X-A": "a\r\nb"}}),
        &[(
            "\"a\\r\\nb\"",
            "RLP209 header `X-A` contains the control character U+000D, which HTTP does not allow in a value",
        )],
    );
}

#[test]
fn a_url_is_a_fixed_http_endpoint() {
    for (url, message) in [
        (
            "https://x.example/{tenant}/mcp",
            "RLP205 `{tenant}` in a server's URL: a server is reached at one fixed address",
        ),
        ("ws://x.example/mcp", "RLP205 scheme `ws` is not http or https"),
        ("https://u:p@x.example/mcp", "RLP205 credentials in the URL are refused; use a header with ${secret:<id>}"),
        ("mcp.example", "RLP205 `mcp.example` is not an absolute URL (it needs http:// or https://)"),
    ] {
        assert_server(json!({"url": url}), &[(&format!("\"{url}\""), message)]);
    }
}

#[test]
fn names_grants_and_timeouts_are_checked() {
    assert_findings(
        &document(json!({"Files": {"command": "/bin/s"}})),
        &[("\"Files\"", "RLP007 server name `Files` does not match ^[a-z][a-z0-9_]*$")],
    );
    assert_server(
        json!({"command": "/bin/s", "capabilities": ["fs:srv"], "secrets": ["key"]}),
        &[
            ("\"fs:srv\"", "RLP212 `srv` is not an absolute path (or `~/<dir>`)"),
            (
                "\"key\"",
                "RLP211 `key` is not a secret id of the form runloop/<scope>/<name> (lower case, digits, _ - .) or <segment>.<segment>… (each a lower-case letter, then lower case, digits and single `_`)",
            ),
        ],
    );
    assert_server(
        json!({"command": "/bin/s", "startup_timeout_ms": 0}),
        &[("0\n", "RLP007 `startup_timeout_ms` is 0, outside 1..=86400000")],
    );
    assert_server(json!("/bin/s"), &[("\"/bin/s\"", "RLP003 the server must be a table (object), found a string")]);
}

#[test]
fn an_mcp_transport_names_a_server_a_tool_and_a_pin() {
    let with_transport = |transport: &Value| {
        let mut document: Value = serde_json::from_str(&document(json!({"files": {"command": "/bin/s"}}))).unwrap();
        document["tools"][0]["transport"] = transport.clone();
        serde_json::to_string_pretty(&document).unwrap()
    };
    let text = with_transport(&json!({"kind": "mcp", "server": "files", "tool": "read"}));
    assert_findings(&text, &[]);
    let transport = read(&text).0.unwrap().tools[0].transport.clone();
    assert_eq!(
        transport,
        Some(Transport::Mcp {
            server: "files".into(),
            tool: "read".into(),
            definition_blake3: None,
            definition_parts: Vec::new()
        })
    );
    let long = "x".repeat(129);
    let long_message = format!("RLP007 `{long}` is not a tool name an MCP server can give");
    let cases = [
        (json!({"kind": "mcp", "tool": "read"}), "\"transport\": {", "RLP006 the transport has no `server`"),
        (json!({"kind": "mcp", "server": "files"}), "\"transport\": {", "RLP006 the transport has no `tool`"),
        (
            json!({"kind": "mcp", "server": "Files", "tool": "read"}),
            "\"Files\"",
            "RLP007 server name `Files` does not match ^[a-z][a-z0-9_]*$",
        ),
        (
            json!({"kind": "mcp", "server": "files", "tool": "read file"}),
            "\"read file\"",
            "RLP007 `read file` is not a tool name an MCP server can give",
        ),
        (json!({"kind": "mcp", "server": "files", "tool": long}), "\"xxx", long_message.as_str()),
        (
            json!({"kind": "mcp", "server": "files", "tool": "read", "definition_blake3": PIN.to_uppercase()}),
            "\"0D66",
            "RLP007 `definition_blake3` must be 64 lower-case hex digits (a BLAKE3 digest)",
        ),
        (
            json!({"kind": "mcp", "server": "files", "tool": "read", "url": "https://x.example"}),
            "\"url\"",
            "RLP004 `url` has no meaning for an `mcp` transport",
        ),
        (
            json!({"kind": "exec", "command": "/bin/x", "server": "files"}),
            "\"server\": \"files\"",
            "RLP004 `server` has no meaning for an `exec` transport",
        ),
        (json!({"kind": "socket"}), "\"socket\"", "RLP007 unknown transport kind `socket`"),
    ];
    for (transport, needle, message) in cases {
        assert_findings(&with_transport(&transport), &[(needle, message)]);
    }
    assert_findings(&with_transport(&json!({"kind": "mcp", "server": "files", "tool": "x".repeat(128)})), &[]);
}
