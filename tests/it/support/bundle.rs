//! Bundles written straight to disk, and the tools.json entries they hold.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// Writes (or rewrites) bundle `<agents>/<name>`: `tools` as tools.json v1,
/// `caps` as policy.caps, and a manifest listing both with their digests.
pub fn write(agents: &Path, name: &str, tools: Value, caps: &str) -> PathBuf {
    write_document(agents, name, &json!({"version": 1, "tools": tools}), caps)
}

/// Writes (or rewrites) bundle `<agents>/<name>` as [`write`] does, with
/// the whole tools.json `document` (servers and all).
pub fn write_document(agents: &Path, name: &str, document: &Value, caps: &str) -> PathBuf {
    let dir = agents.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let tools_text = serde_json::to_string_pretty(document).unwrap();
    std::fs::write(dir.join("tools.json"), &tools_text).unwrap();
    std::fs::write(dir.join("policy.caps"), caps).unwrap();
    let entry = |path: &str, text: &str| {
        format!("path = \"{path}\"\nblake3 = \"{}\"\nsize = {}\n", blake3::hash(text.as_bytes()).to_hex(), text.len())
    };
    let manifest = format!(
        "[agent]\nname = \"{name}\"\nversion = \"0.1.0\"\n\n[artifacts.tools]\n{}version = 1\n\n[artifacts.caps]\n{}",
        entry("tools.json", &tools_text),
        entry("policy.caps", caps)
    );
    std::fs::write(dir.join("manifest.toml"), manifest).unwrap();
    dir
}

/// A tools.json entry `id` over `transport`: objects in, anything out, no
/// confirmation.
pub fn tool(id: &str, transport: Value) -> Value {
    json!({
        "id": id,
        "description": format!("test tool {id}"),
        "transport": transport,
        "input_schema": {"type": "object"},
        "result_schema": {},
        "requires_confirmation": false,
    })
}

/// An exec transport running `command` with `args` after the blob path.
pub fn exec(command: &str, args: &[&str]) -> Value {
    json!({"kind": "exec", "command": command, "args": args})
}

/// Tool `id` running the fixture script `tests/fixtures/runtime/<script>`
/// with `args`.
pub fn runtime_tool(id: &str, script: &str, args: &[&str]) -> Value {
    tool(id, exec(&super::files::fixture(&format!("runtime/{script}")), args))
}

/// An http transport sending `method` to `url`.
pub fn http(method: &str, url: &str) -> Value {
    json!({"kind": "http", "method": method, "url": url})
}

/// `tool` declaring the capability `fs:<dir>` besides those it has: the
/// sandbox lets it read and write `dir`.
pub fn with_fs(mut tool: Value, dir: &Path) -> Value {
    let capability = Value::String(format!("fs:{}", dir.display()));
    match tool.get_mut("capabilities").and_then(Value::as_array_mut) {
        Some(capabilities) => capabilities.push(capability),
        None => tool["capabilities"] = json!([capability]),
    }
    tool
}

/// policy.caps granting `grants` (lines under `[capabilities]`, each ending
/// in a newline) and `fs = ["<dir>"]`.
pub fn caps(grants: &str, dir: &Path) -> String {
    format!("[capabilities]\n{grants}fs = [{}]\n", serde_json::to_string(&dir.display().to_string()).unwrap())
}

/// `tool` with the keys of `extra` set (replaced or added).
pub fn with(mut tool: Value, extra: Value) -> Value {
    for (k, v) in extra.as_object().unwrap() {
        tool[k] = v.clone();
    }
    tool
}
