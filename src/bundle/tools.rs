//! `tools.json` version 1: the host tools an agent may call.

use std::ops::RangeInclusive;

use serde_json::{Map, Value};

use crate::bundle::capability::{Capability, SecretId};
use crate::bundle::command;
use crate::bundle::diag::{At, Code, Diagnostics};
use crate::bundle::pointer::Pointer;
use crate::bundle::reader::{Fields, type_name};
use crate::bundle::servers::{Server, read_servers};
use crate::bundle::url_template::UrlTemplate;

/// The tools.json versions this rlp reads.
pub const SUPPORTED_VERSIONS: &[u64] = &[1];
/// The tools file name.
pub const TOOLS_FILE: &str = "tools.json";
/// Default `timeout_ms`.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// The largest `timeout_ms` (and server `startup_timeout_ms`): one day.
pub const MAX_TIMEOUT_MS: u64 = 24 * 3600 * 1000;
/// Default `max_output_bytes`.
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 1 << 20;
/// The values `max_memory_bytes` may take: 1 MiB to 1 TiB.
pub const MAX_MEMORY_BYTES_RANGE: RangeInclusive<u64> = (1 << 20)..=(1 << 40);
/// The values `max_processes` may take.
pub const MAX_PROCESSES_RANGE: RangeInclusive<u64> = 1..=4096;
/// The tool id pattern, for messages.
pub const TOOL_ID_PATTERN: &str = "^[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)*$";
/// Methods an http transport may use.
pub const HTTP_METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"];
/// The transport kinds this rlp reads.
pub const TRANSPORT_KINDS: &[&str] = &["exec", "http", "mcp"];
/// The longest tool name on an MCP server (`transport.tool`), in characters.
pub const MAX_MCP_TOOL_NAME: usize = 128;

const TRANSPORT_KEYS: &[&str] = &[
    "kind",
    "command",
    "args",
    "platforms",
    "method",
    "url",
    "headers",
    "server",
    "tool",
    "definition_blake3",
    "definition_parts",
];
/// The parts of a server's definition of a tool that `definition_parts`
/// pins one by one.
pub const DEFINITION_PARTS: &[&str] = &["description", "input_schema", "output_schema", "annotations"];

const TOOL_KEYS: &[&str] = &[
    "id",
    "summary",
    "description",
    "transport",
    "input_schema",
    "result_schema",
    "schema_refs",
    "capabilities",
    "secrets",
    "budget",
    "requires_confirmation",
    "observability",
    "timeout_ms",
    "max_output_bytes",
    "max_memory_bytes",
    "max_processes",
    "retry",
    "options_schema",
    "category",
    "discoverability",
    "long_running",
];

/// Whether `id` matches the tool id pattern.
pub fn is_valid_tool_id(id: &str) -> bool {
    !id.is_empty() && id.split('.').all(crate::bundle::manifest::is_valid_name)
}

/// Whether `name` is an HTTP header name token (RFC 9110).
pub fn is_header_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The first character a header value may not hold, if any: RFC 9110 allows
/// no control character in a field value but horizontal tab.
pub fn header_value_control(value: &str) -> Option<char> {
    value.chars().find(|&c| c.is_ascii_control() && c != '\t')
}

/// What is wrong with a header value holding the control character `c`.
pub fn header_control_message(name: &str, c: char) -> String {
    format!("header `{name}` contains the control character U+{:04X}, which HTTP does not allow in a value", c as u32)
}

/// Splits a value (a header's, a server's environment variable or argument)
/// into literal text and `${secret:<id>}` references.
///
/// Returns the ids referenced, or the malformed reference text.
pub fn secret_refs(value: &str) -> Result<Vec<String>, String> {
    let mut ids = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let end = rest[start..].find('}').ok_or_else(|| format!("unclosed `${{` in `{value}`"))?;
        let inner = &rest[start + 2..start + end];
        let id = inner
            .strip_prefix("secret:")
            .ok_or_else(|| format!("`${{{inner}}}` is not a secret reference; write `${{secret:<id>}}`"))?;
        ids.push(id.to_string());
        rest = &rest[start + end + 1..];
    }
    Ok(ids)
}

/// How a tool is reached.
#[derive(Clone, Debug, PartialEq)]
pub enum Transport {
    /// Run a local binary.
    Exec {
        /// `command` and `platforms`: the executable (an absolute path or
        /// `${bundle}/<path>`), per platform where the bundle says.
        programs: command::Programs,
        /// Arguments appended after the blob path.
        args: Vec<String>,
    },
    /// Call an HTTP API.
    Http {
        /// Upper-case method.
        method: String,
        /// The URL template; `None` when it failed to parse (already reported).
        url: Option<UrlTemplate>,
        /// Static headers, in file order; values may hold `${secret:<id>}`.
        headers: Vec<(String, String)>,
    },
    /// Call a tool of an MCP server declared in `servers`.
    Mcp {
        /// The server's name (a key of `servers`).
        server: String,
        /// The tool's name on the server.
        tool: String,
        /// The pin of the server's definition of the tool: 64 lower-case hex
        /// digits of BLAKE3; `None` when not pinned (RLP223).
        definition_blake3: Option<String>,
        /// The pins of the parts of that definition ([`DEFINITION_PARTS`]),
        /// each with its digest, in that order: what lets rlp name the part
        /// that changed, and tell a server's change from an author's edit.
        definition_parts: Vec<(String, String)>,
    },
}

impl Transport {
    /// The transport's `kind`, as written in tools.json.
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Exec { .. } => "exec",
            Transport::Http { .. } => "http",
            Transport::Mcp { .. } => "mcp",
        }
    }

    /// An exec transport's programs (`command`, `platforms`).
    pub fn programs(&self) -> Option<&command::Programs> {
        match self {
            Transport::Exec { programs, .. } => Some(programs),
            _ => None,
        }
    }
}

/// `discoverability`: whether a tool is offered up front or found on demand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Discoverability {
    /// Always offered to the model.
    Core,
    /// Listed on request.
    Discoverable,
}

/// One tool entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Tool {
    /// Where the entry is (`/tools/<i>`).
    pub at: Pointer,
    /// `id`.
    pub id: String,
    /// `description`: the full text (`rlp.describe_tools`).
    pub description: String,
    /// `summary`: the short text the model is sent in tool lists (seed 000),
    /// when the tool has one; else lists send `description`.
    pub summary: Option<String>,
    /// `transport`, if it loaded.
    pub transport: Option<Transport>,
    /// `input_schema` (inline or `{"$ref": …}`).
    pub input_schema: Option<Value>,
    /// `result_schema`.
    pub result_schema: Option<Value>,
    /// `schema_refs`: `schema:<id>` → bundle path.
    pub schema_refs: Vec<(String, String)>,
    /// `capabilities`, each with its pointer.
    pub capabilities: Vec<(Pointer, Capability)>,
    /// `secrets`, each with its pointer.
    pub secrets: Vec<(Pointer, SecretId)>,
    /// `budget.tokens`.
    pub budget_tokens: Option<u64>,
    /// `budget.usd`.
    pub budget_usd: Option<f64>,
    /// `requires_confirmation`, as written (absent: `None`, meaning false).
    pub requires_confirmation: Option<bool>,
    /// `observability.tags`.
    pub tags: Vec<String>,
    /// `timeout_ms` (default 30000).
    pub timeout_ms: u64,
    /// `max_output_bytes` (default 1 MiB).
    pub max_output_bytes: u64,
    /// `max_memory_bytes`: the largest address space of each of an exec
    /// tool's processes (`RLIMIT_AS`); `None`: no limit.
    pub max_memory_bytes: Option<u64>,
    /// `max_processes`: the most processes and threads an exec tool may have
    /// at once; `None`: no limit.
    pub max_processes: Option<u64>,
    /// `retry.max_attempts` (default 1).
    pub max_attempts: u32,
    /// `options_schema`.
    pub options_schema: Option<Value>,
    /// `category`.
    pub category: Option<String>,
    /// `discoverability` (default discoverable).
    pub discoverability: Discoverability,
    /// `long_running` (default false): the tool's calls may take long, and
    /// `rlp serve` runs them as MCP tasks for clients that take tasks.
    pub long_running: bool,
}

impl Tool {
    /// Whether each call needs a person's approval (subject to
    /// `security.confirm_external_actions`).
    pub fn needs_confirmation(&self) -> bool {
        self.requires_confirmation.unwrap_or(false)
    }

    /// Every capability the tool needs: declared, plus those implied by its
    /// transport (`exec`, `net:<url host:port>`) and its secrets.
    ///
    /// An `mcp` tool implies nothing: it declares its server's needs itself
    /// (RLP221), so that the policy decides on the tool alone.
    pub fn required_capabilities(&self) -> Vec<Capability> {
        let implied = match &self.transport {
            Some(Transport::Exec { .. }) => Some(Capability::Exec),
            Some(Transport::Http { url: Some(url), .. }) => Some(Capability::Net(url.target().clone())),
            _ => None,
        };
        with_implied(&self.capabilities, implied, &self.secrets)
    }
}

/// The declared capabilities, then the one a transport implies, then one
/// per secret, without repeats.
pub(crate) fn with_implied(
    declared: &[(Pointer, Capability)],
    implied: Option<Capability>,
    secrets: &[(Pointer, SecretId)],
) -> Vec<Capability> {
    let mut caps: Vec<Capability> = declared.iter().map(|(_, c)| c.clone()).collect();
    caps.extend(implied);
    caps.extend(secrets.iter().map(|(_, s)| Capability::Secret(s.clone())));
    let mut seen = std::collections::HashSet::new();
    caps.retain(|c| seen.insert(c.clone()));
    caps
}

/// A loaded tools.json.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ToolsFile {
    /// `version`.
    pub version: u64,
    /// `tools`, in order (entries that are not objects are skipped).
    pub tools: Vec<Tool>,
    /// `servers`, in file order (entries that are not objects are skipped).
    pub servers: Vec<Server>,
}

impl ToolsFile {
    /// The tool with this id.
    pub fn get(&self, id: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.id == id)
    }

    /// The server with this name.
    pub fn server(&self, name: &str) -> Option<&Server> {
        self.servers.iter().find(|s| s.name == name)
    }

    /// The server an `mcp` tool lives in, if it is declared.
    pub fn server_of(&self, tool: &Tool) -> Option<&Server> {
        match &tool.transport {
            Some(Transport::Mcp { server, .. }) => self.server(server),
            _ => None,
        }
    }

    /// Reads the tools.json tree, reporting structural problems.
    pub fn from_value(root: &Value, diags: &mut Diagnostics) -> Option<ToolsFile> {
        let top = Fields::of(root, Pointer::root(), "tools.json", &["version", "tools", "servers"], diags)?;
        top.finish(diags);
        let version = match top.get("version") {
            None => {
                diags
                    .report(Code::MissingField, At::Value(Pointer::root()), "tools.json has no `version`")
                    .help("add `\"version\": 1` at the top level");
                return None;
            }
            Some(v) => v,
        };
        match version.as_u64() {
            Some(v) if SUPPORTED_VERSIONS.contains(&v) => {}
            _ => {
                diags
                    .report(
                        Code::UnsupportedVersion,
                        At::Value(top.at("version")),
                        format!("tools.json version {version} is not supported; this rlp reads version 1"),
                    )
                    .help("write `\"version\": 1`, or install an rlp that reads this version");
                return None;
            }
        }
        let mut file = ToolsFile { version: 1, tools: Vec::new(), servers: read_servers(&top, diags) };
        match top.get("tools") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    if let Some(tool) = read_tool(item, top.at("tools").index(i), diags) {
                        file.tools.push(tool);
                    }
                }
            }
            Some(other) => {
                diags.report(
                    Code::WrongType,
                    At::Value(top.at("tools")),
                    format!("`tools` must be a list, found {}", type_name(other)),
                );
            }
        }
        Some(file)
    }
}

fn read_tool(value: &Value, at: Pointer, diags: &mut Diagnostics) -> Option<Tool> {
    let f = Fields::of(value, at.clone(), "the tool", TOOL_KEYS, diags)?;
    f.finish(diags);
    let id = f.string("id", true, diags).unwrap_or_default().to_string();
    if f.get("id").is_some_and(Value::is_string) && !is_valid_tool_id(&id) {
        diags
            .report(
                Code::ToolIdInvalid,
                At::Value(f.at("id")),
                format!("tool id `{id}` does not match {TOOL_ID_PATTERN}"),
            )
            .help("use lower-case dot-separated words, e.g. `mail.smtp_send`");
    }
    let description = f.string("description", false, diags).unwrap_or_default().to_string();
    if description.trim().is_empty() && !f.get("description").is_some_and(|v| !v.is_string() && !v.is_null()) {
        let at = if f.get("description").is_some() { At::Value(f.at("description")) } else { At::Value(at.key("id")) };
        diags
            .report(Code::ToolDescriptionEmpty, at, format!("tool `{id}` has no description"))
            .help("add a one-line `description`: the model reads it to decide when to call the tool");
    }
    let transport = f.table("transport", "the transport", TRANSPORT_KEYS, true, diags);
    let transport = transport.and_then(|t| read_transport(&t, diags));
    let schema = |key: &str, required: bool, diags: &mut Diagnostics| match f.get(key) {
        Some(value @ (Value::Object(_) | Value::Bool(_))) => Some(value.clone()),
        Some(other) => {
            diags.report(
                Code::WrongType,
                At::Value(f.at(key)),
                format!(
                    "`{key}` must be a JSON Schema object or {{\"$ref\": \"schema:<id>\"}}, found {}",
                    type_name(other)
                ),
            );
            None
        }
        None if required => {
            diags
                .report(Code::SchemaMissing, At::Value(at.key("id")), format!("tool `{id}` has no `{key}`"))
                .help(format!("add `\"{key}\": {{\"type\": \"object\"}}` or a `{{\"$ref\": \"schema:<id>\"}}`"));
            None
        }
        None => None,
    };
    let input_schema = schema("input_schema", true, diags);
    let result_schema = schema("result_schema", true, diags);
    let options_schema = schema("options_schema", false, diags);
    let schema_refs = read_schema_refs(&f, diags);
    let capabilities = parsed_list(&f, "capabilities", Code::CapabilityInvalid, diags);
    let secrets = parsed_list(&f, "secrets", Code::SecretIdInvalid, diags);
    let (mut budget_tokens, mut budget_usd) = (None, None);
    if let Some(budget) = f.table("budget", "`budget`", &["tokens", "usd"], false, diags) {
        budget.finish(diags);
        budget_tokens = budget.integer("tokens", 1, u64::MAX >> 11, diags);
        budget_usd = budget.number("usd", diags);
    }
    let mut tags = Vec::new();
    if let Some(obs) = f.table("observability", "`observability`", &["tags"], false, diags) {
        obs.finish(diags);
        tags = obs.strings("tags", diags).into_iter().map(|(_, s)| s.to_string()).collect();
    }
    let mut max_attempts = 1;
    if let Some(retry) = f.table("retry", "`retry`", &["max_attempts"], false, diags) {
        retry.finish(diags);
        max_attempts = retry.integer("max_attempts", 1, 10, diags).unwrap_or(1) as u32;
    }
    let discoverability = match f.string("discoverability", false, diags) {
        None | Some("discoverable") => Discoverability::Discoverable,
        Some("core") => Discoverability::Core,
        Some(other) => {
            diags
                .report(
                    Code::InvalidValue,
                    At::Value(f.at("discoverability")),
                    format!("unknown discoverability `{other}`"),
                )
                .help("use `core` or `discoverable`");
            Discoverability::Discoverable
        }
    };
    let summary = f.string("summary", false, diags).map(str::trim).filter(|s| !s.is_empty()).map(str::to_string);
    Some(Tool {
        at,
        id,
        description,
        summary,
        transport,
        input_schema,
        result_schema,
        schema_refs,
        capabilities,
        secrets,
        budget_tokens,
        budget_usd,
        requires_confirmation: f.boolean("requires_confirmation", diags),
        tags,
        timeout_ms: f.integer("timeout_ms", 1, MAX_TIMEOUT_MS, diags).unwrap_or(DEFAULT_TIMEOUT_MS),
        max_output_bytes: f.integer("max_output_bytes", 1, 1 << 32, diags).unwrap_or(DEFAULT_MAX_OUTPUT_BYTES),
        max_memory_bytes: f.integer(
            "max_memory_bytes",
            *MAX_MEMORY_BYTES_RANGE.start(),
            *MAX_MEMORY_BYTES_RANGE.end(),
            diags,
        ),
        max_processes: f.integer("max_processes", *MAX_PROCESSES_RANGE.start(), *MAX_PROCESSES_RANGE.end(), diags),
        max_attempts,
        options_schema,
        category: f.string("category", false, diags).map(str::to_string),
        discoverability,
        long_running: f.boolean("long_running", diags).unwrap_or(false),
    })
}

/// The strings of list `key`, each parsed, with its pointer; one that does
/// not parse is reported with `code` and left out.
pub(super) fn parsed_list<T: std::str::FromStr<Err = String>>(
    f: &Fields<'_>,
    key: &str,
    code: Code,
    diags: &mut Diagnostics,
) -> Vec<(Pointer, T)> {
    f.strings(key, diags)
        .into_iter()
        .filter_map(|(at, text)| match text.parse::<T>() {
            Ok(item) => Some((at, item)),
            Err(why) => {
                diags.report(code, At::Value(at), why);
                None
            }
        })
        .collect()
}

fn read_schema_refs(f: &Fields<'_>, diags: &mut Diagnostics) -> Vec<(String, String)> {
    let Some(refs) = f.table("schema_refs", "`schema_refs`", &[], false, diags) else { return Vec::new() };
    let mut out = Vec::new();
    for key in refs.keys() {
        if !key.starts_with("schema:") {
            diags
                .report(
                    Code::InvalidValue,
                    At::Key(refs.at(key)),
                    format!("`schema_refs` key `{key}` is not a `schema:<id>`"),
                )
                .help("map ids like `\"schema:mail.send.v1\": \"schemas/mail.send.v1.json\"`");
            continue;
        }
        if let Some(path) = refs.string(key, true, diags) {
            out.push((key.clone(), path.to_string()));
        }
    }
    out
}

/// Reports each of `keys` present in `t` as meaningless for `what` (e.g.
/// "an `exec` transport").
pub(super) fn report_unexpected(t: &Fields<'_>, keys: &[&str], what: &str, help: &str, diags: &mut Diagnostics) {
    for key in keys.iter().filter(|key| t.get(key).is_some()) {
        diags.report(Code::UnknownField, At::Key(t.at(key)), format!("`{key}` has no meaning for {what}")).help(help);
    }
}

fn read_transport(t: &Fields<'_>, diags: &mut Diagnostics) -> Option<Transport> {
    let kind = t.string("kind", true, diags)?;
    let others: Vec<&str> = match kind {
        "exec" => vec!["method", "url", "headers", "server", "tool", "definition_blake3", "definition_parts"],
        "http" => vec!["command", "args", "platforms", "server", "tool", "definition_blake3", "definition_parts"],
        "mcp" => vec!["command", "args", "platforms", "method", "url", "headers"],
        _ => vec![],
    };
    // `exec`, `http` and `mcp` are all read with a vowel sound first: "an".
    report_unexpected(t, &others, &format!("an `{kind}` transport"), "remove it", diags);
    match kind {
        "exec" => {
            let programs = command::read(t, "tool", diags)?;
            let args = t.strings("args", diags).into_iter().map(|(_, s)| s.to_string()).collect();
            t.finish(diags);
            Some(Transport::Exec { programs, args })
        }
        "http" => {
            let method = t.string("method", true, diags).unwrap_or("GET").to_string();
            if t.get("method").is_some() && !HTTP_METHODS.contains(&method.as_str()) {
                diags
                    .report(
                        Code::HttpMethodInvalid,
                        At::Value(t.at("method")),
                        format!("method `{method}` is not supported"),
                    )
                    .help(format!("use one of {} (upper case)", HTTP_METHODS.join(", ")));
            }
            let url = t.string("url", true, diags).and_then(|raw| match UrlTemplate::parse(raw) {
                Ok(url) => Some(url),
                Err(e) => {
                    diags.report(e.code, At::Value(t.at("url")), e.message).help(e.help);
                    None
                }
            });
            let headers = read_headers(t, diags);
            t.finish(diags);
            Some(Transport::Http { method, url, headers })
        }
        "mcp" => read_mcp_transport(t, diags),
        other => {
            diags
                .report(Code::InvalidValue, At::Value(t.at("kind")), format!("unknown transport kind `{other}`"))
                .help("use `exec`, `http` or `mcp`");
            None
        }
    }
}

/// Whether `name` can be a tool's name on an MCP server: 1 to 128
/// characters, none of them white space or a control character.
pub fn is_valid_mcp_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= MAX_MCP_TOOL_NAME
        && !name.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// Whether `text` is a BLAKE3 digest as a pin holds it: 64 lower-case hex digits.
pub fn is_definition_digest(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn read_mcp_transport(t: &Fields<'_>, diags: &mut Diagnostics) -> Option<Transport> {
    let server = t.string("server", true, diags).map(str::to_string);
    if let Some(name) = &server
        && !crate::bundle::manifest::is_valid_name(name)
    {
        diags
            .report(
                Code::InvalidValue,
                At::Value(t.at("server")),
                format!("server name `{name}` does not match {}", crate::bundle::manifest::NAME_PATTERN),
            )
            .help("name a key of the top-level `servers`: lower-case letters, digits and `_`, starting with a letter");
    }
    let tool = t.string("tool", true, diags).map(str::to_string);
    if let Some(name) = &tool
        && !is_valid_mcp_tool_name(name)
    {
        diags
            .report(
                Code::InvalidValue,
                At::Value(t.at("tool")),
                format!("`{name}` is not a tool name an MCP server can give"),
            )
            .help(format!(
                "write the tool's name on the server as it lists it: 1 to {MAX_MCP_TOOL_NAME} characters, without spaces or control characters"
            ));
    }
    let definition_blake3 = t.string("definition_blake3", false, diags).map(str::to_string);
    let pin_ok = definition_blake3.as_deref().is_none_or(is_definition_digest);
    if !pin_ok {
        diags
            .report(
                Code::InvalidValue,
                At::Value(t.at("definition_blake3")),
                "`definition_blake3` must be 64 lower-case hex digits (a BLAKE3 digest)",
            )
            .help("re-import the tool with `rlp tools import --mcp` to write the pin");
    }
    let definition_parts = read_definition_parts(t, diags);
    t.finish(diags);
    Some(Transport::Mcp {
        server: server?,
        tool: tool?,
        definition_blake3: definition_blake3.filter(|_| pin_ok),
        definition_parts,
    })
}

/// Reads `definition_parts` of an mcp transport: each known part's digest.
fn read_definition_parts(t: &Fields<'_>, diags: &mut Diagnostics) -> Vec<(String, String)> {
    let Some(parts) = t.table("definition_parts", "`definition_parts`", DEFINITION_PARTS, false, diags) else {
        return Vec::new();
    };
    parts.finish(diags);
    let mut out = Vec::new();
    for part in DEFINITION_PARTS {
        let Some(digest) = parts.string(part, false, diags) else { continue };
        if is_definition_digest(digest) {
            out.push(((*part).to_string(), digest.to_string()));
        } else {
            diags
                .report(
                    Code::InvalidValue,
                    At::Value(parts.at(part)),
                    format!("`definition_parts.{part}` must be 64 lower-case hex digits (a BLAKE3 digest)"),
                )
                .help("re-import the tool with `rlp tools import --mcp` to write the pins");
        }
    }
    out
}

/// Reads `headers` of `t` (an http transport or a server): names and values
/// checked, `${secret:<id>}` references well-formed.
pub(super) fn read_headers(t: &Fields<'_>, diags: &mut Diagnostics) -> Vec<(String, String)> {
    let Some(headers) = t.table("headers", "`headers`", &[], false, diags) else { return Vec::new() };
    let mut out = Vec::new();
    let map: &Map<String, Value> = match t.get("headers") {
        Some(Value::Object(map)) => map,
        _ => return out,
    };
    for (name, value) in map {
        let Some(text) = headers.string(name, true, diags) else { continue };
        if !is_header_name(name) {
            diags
                .report(Code::HeaderInvalid, At::Key(headers.at(name)), format!("`{name}` is not a valid header name"))
                .help("header names are letters, digits and !#$%&'*+-.^_`|~");
            continue;
        }
        if let Some(c) = header_value_control(text) {
            diags.report(Code::HeaderInvalid, At::Value(headers.at(name)), header_control_message(name, c)).help(
                "remove the control characters (CR and LF would let a value inject headers); only tab is allowed",
            );
            continue;
        }
        if let Err(why) = secret_refs(text) {
            diags.report(Code::HeaderInvalid, At::Value(headers.at(name)), why);
            continue;
        }
        debug_assert!(value.is_string());
        out.push((name.clone(), text.to_string()));
    }
    out
}
