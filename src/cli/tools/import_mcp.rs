//! `rlp tools import --mcp` and `--mcp-config`: the servers to import, from
//! flags or from an MCP host's configuration file, then the import
//! ([`crate::authoring::mcp_import`]) and its report.
//!
//! A host's file names a server's program the way a shell finds it (`npx`,
//! `uvx`, `node`); rlp never searches PATH when it runs a tool, so the
//! import writes the absolute path it finds now, and says so. `npx -y` and
//! `uvx` download the server when it starts: they need `net:` and `fs:`
//! grants for their registry and cache, or the package installed and the
//! server pointed at it.

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::authoring::mcp_import::{McpImported, McpSource, import_mcp, resolve_program};
use crate::authoring::target::BundleTarget;
use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, Printer, diagnostic, path_json, warning};
use crate::cli::terminal;
use crate::cli::tools::add::{grants_json, print_added_grants, warn_missing_grants};
use crate::cli::tools::import::ImportArgs;
use crate::text::terminal_safe_line;

/// Largest host configuration file read.
const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// Launchers that fetch the server when it starts.
const DOWNLOADERS: &[&str] = &["npx", "uvx", "pipx", "bunx", "pnpx"];

/// Runs `rlp tools import --mcp …` or `--mcp-config FILE`.
pub(crate) fn run(args: &ImportArgs, ctx: &Context, target: &BundleTarget) -> CliResult {
    let sources = match (&args.mcp, &args.mcp_config) {
        (Some(name), None) => vec![from_flags(name, args)?],
        (None, Some(file)) => from_config(file, args)?,
        _ => return Err(CliError::usage("give --exec CMD, --mcp NAME or --mcp-config FILE")),
    };
    let secrets = ctx.secret_providers(terminal::passphrase_asker())?;
    let mode = ctx.config()?.sandbox.value;
    let imported = import_mcp(target, &sources, args.grant, args.replace, mode, &secrets)?;
    report(args, target, &imported)
}

/// Parses `K=V` flags.
fn pairs(flag: &str, values: &[String]) -> Result<Map<String, Value>, CliError> {
    let mut map = Map::new();
    for value in values {
        let (key, text) = value
            .split_once('=')
            .filter(|(k, _)| !k.is_empty())
            .ok_or_else(|| CliError::usage(format!("{flag} `{value}` is not KEY=VALUE")))?;
        map.insert(key.to_string(), json!(text));
    }
    Ok(map)
}

/// The server of `--mcp NAME` and its flags.
fn from_flags(name: &str, args: &ImportArgs) -> Result<McpSource, CliError> {
    let mut entry = Map::new();
    match (&args.url, args.command.split_first()) {
        (Some(url), None) => {
            entry.insert("url".into(), json!(url));
            let headers = pairs("--header", &args.headers)?;
            if !headers.is_empty() {
                entry.insert("headers".into(), Value::Object(headers));
            }
        }
        (None, Some((program, rest))) => {
            let command = absolute_program(name, program)?;
            entry.insert("command".into(), json!(command));
            if !rest.is_empty() {
                entry.insert("args".into(), json!(rest));
            }
            let env = pairs("--env", &args.env)?;
            if !env.is_empty() {
                entry.insert("env".into(), Value::Object(env));
            }
            note_downloader(name, program, rest);
        }
        (Some(_), Some(_)) => return Err(CliError::usage("give either --url URL or `-- COMMAND [ARGS…]`, not both")),
        // Re-import of a server tools.json declares.
        (None, None) => {}
    }
    if !args.caps.is_empty() {
        entry.insert("capabilities".into(), json!(args.caps));
    }
    if !args.secrets.is_empty() {
        entry.insert("secrets".into(), json!(args.secrets));
    }
    Ok(McpSource { name: name.to_string(), entry, bare_ids: args.bare_ids })
}

/// The absolute path of a server's program, found the way a shell finds it.
fn absolute_program(server: &str, program: &str) -> Result<String, CliError> {
    let path = std::env::var_os("PATH");
    let found = resolve_program(program, path.as_deref()).ok_or_else(|| {
        CliError::usage(format!("the server `{server}`'s program `{program}` is not found (on PATH, or as a path)"))
            .with_help("install it, or give its absolute path")
    })?;
    let shown = found.display().to_string();
    if !Path::new(program).is_absolute() {
        diagnostic(&terminal_safe_line(&format!(
            "note: the server `{server}` runs `{shown}` (`{program}` as found now: rlp never searches PATH when it runs a server)"
        )));
    }
    Ok(shown)
}

/// Says what a launcher that downloads its server needs.
fn note_downloader(server: &str, program: &str, args: &[String]) {
    let base = Path::new(program).file_name().and_then(|n| n.to_str()).unwrap_or(program);
    if !DOWNLOADERS.contains(&base) {
        return;
    }
    let package = args.iter().find(|a| !a.starts_with('-')).map_or("its package".to_string(), |p| format!("`{p}`"));
    warning(format_args!(
        "the server `{server}` is started by `{base}`, which downloads {package} when it starts: grant it the registry and its cache (e.g. --cap net:registry.npmjs.org --cap fs:~/.npm for npx), or install the package and import its installed command instead"
    ));
}

/// The servers of a host's configuration file: `mcpServers` (desktop hosts,
/// `.mcp.json`) or `servers` (editors).
fn from_config(file: &Path, args: &ImportArgs) -> Result<Vec<McpSource>, CliError> {
    let text = crate::fsutil::read_text_limited(file, MAX_CONFIG_BYTES)
        .map_err(|e| CliError::usage(format!("cannot read {}: {e}", file.display())))?;
    let document: Value = serde_json::from_str(&text)
        .map_err(|e| CliError::usage(format!("{}:{}:{}: not JSON: {e}", file.display(), e.line(), e.column())))?;
    let servers = ["mcpServers", "servers"]
        .iter()
        .find_map(|key| document.get(*key).and_then(Value::as_object))
        .ok_or_else(|| {
            CliError::usage(format!("{} has no `mcpServers` or `servers` object", file.display())).with_help(
                "give the configuration file of an MCP host (claude_desktop_config.json, .mcp.json, .vscode/mcp.json)",
            )
        })?;
    if servers.is_empty() {
        return Err(CliError::usage(format!("{} declares no server", file.display())));
    }
    let mut sources = Vec::new();
    for (key, server) in servers {
        let name = server_name(key);
        let field = |k: &str| server.get(k);
        let mut entry = Map::new();
        match (field("command").and_then(Value::as_str), field("url").and_then(Value::as_str)) {
            (Some(program), _) => {
                let rest: Vec<String> = field("args")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
                    .unwrap_or_default();
                entry.insert("command".into(), json!(absolute_program(&name, program)?));
                if !rest.is_empty() {
                    entry.insert("args".into(), json!(rest));
                }
                if let Some(env) = field("env").and_then(Value::as_object).filter(|e| !e.is_empty()) {
                    entry.insert("env".into(), Value::Object(env.clone()));
                }
                note_downloader(&name, program, &rest);
            }
            (None, Some(url)) => {
                entry.insert("url".into(), json!(url));
                if let Some(headers) = field("headers").and_then(Value::as_object).filter(|h| !h.is_empty()) {
                    entry.insert("headers".into(), Value::Object(headers.clone()));
                }
            }
            (None, None) => {
                return Err(CliError::usage(format!(
                    "{}: the server `{key}` has neither `command` nor `url`",
                    file.display()
                )));
            }
        }
        if name != *key {
            diagnostic(&terminal_safe_line(&format!("note: the server `{key}` is imported as `{name}`")));
        }
        if !args.caps.is_empty() {
            entry.insert("capabilities".into(), json!(args.caps));
        }
        sources.push(McpSource { name, entry, bare_ids: args.bare_ids });
    }
    Ok(sources)
}

/// A host's server key as a server name: lower-case letters, digits and
/// `_`, starting with a letter.
fn server_name(key: &str) -> String {
    let mut name: String =
        key.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        name.insert(0, 's');
    }
    name
}

/// Prints what the import did.
fn report(args: &ImportArgs, target: &BundleTarget, imported: &McpImported) -> CliResult {
    let human = matches!(args.format, Format::Human);
    for server in imported.servers.iter().filter(|_| human) {
        let record = &server.record;
        let version = record.version.as_deref().map(|v| format!(" {v}")).unwrap_or_default();
        let protocol = record.protocol.as_deref().map(|p| format!(", protocol {p}")).unwrap_or_default();
        diagnostic(&terminal_safe_line(&format!(
            "server `{}`: {}{version}{protocol}, {} tools",
            server.name,
            record.name,
            server.changes.len()
        )));
        for name in &server.unnamed {
            warning(terminal_safe_line(&format!(
                "`{name}` left out: the server `{}` lists a tool under a name no tool can have (empty, over 128 characters, or with spaces or control characters)",
                server.name
            )));
        }
        for id in &server.gone {
            diagnostic(&terminal_safe_line(&format!(
                "{id}: kept (the server no longer lists it; remove it from tools.json if it is gone)"
            )));
        }
        for (id, _, fields) in &server.changes {
            if !fields.kept.is_empty() {
                diagnostic(&terminal_safe_line(&format!(
                    "{id}: kept {} (edited in tools.json)",
                    fields.kept.join(", ")
                )));
            }
        }
    }
    warn_missing_grants(target, &imported.grants, "rlp tools import");
    let mut out = Printer::stdout();
    match args.format {
        Format::Json => out.json(&json!({
            "bundle": path_json(&target.dir),
            "servers": imported.servers.iter().map(|s| json!({
                "name": s.name,
                "server": s.record,
                "tools": s.changes.iter().map(|(id, change, fields)| json!({
                    "id": id, "change": change.as_str(), "updated": fields.updated, "kept": fields.kept,
                })).collect::<Vec<_>>(),
                "gone": s.gone,
                "left_out": s.unnamed,
            })).collect::<Vec<_>>(),
            "grants": grants_json(target, &imported.grants),
        }))?,
        Format::Human => {
            for server in &imported.servers {
                for (id, change, _) in &server.changes {
                    out.line(format_args!("{:9} {id}", change.as_str()))?;
                }
            }
            print_added_grants(&mut out, target, &imported.grants)?;
        }
    }
    out.finish(Exit::Success)
}
