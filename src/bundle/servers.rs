//! `servers` in tools.json: the MCP servers that `mcp` tools live in.
//!
//! A server is stdio (`command`, `args`, `env`: a program rlp starts) or
//! Streamable HTTP (`url`, `headers`: a service rlp connects to). Its
//! `capabilities` and `secrets` are what it needs; every tool of the server
//! declares them too (RLP221), so the policy decides on each tool alone.
//! Values of `env`, `args` and `headers` may hold `${secret:<id>}`, each id
//! listed in the server's `secrets` (RLP210). This is the data model and its
//! reader; calling a server is the runtime's (`runtime::mcp`).

use serde_json::Value;

use crate::bundle::capability::{Capability, SecretId};
use crate::bundle::command;
use crate::bundle::diag::{At, Code, Diagnostics};
use crate::bundle::manifest::{NAME_PATTERN, is_valid_name};
use crate::bundle::pointer::{Pointer, Segment};
use crate::bundle::reader::Fields;
use crate::bundle::tools::{MAX_TIMEOUT_MS, parsed_list, read_headers, report_unexpected, secret_refs, with_implied};
use crate::bundle::url_template::UrlTemplate;

/// Default `startup_timeout_ms`: how long a server may take to start and
/// answer the MCP handshake.
pub const DEFAULT_STARTUP_TIMEOUT_MS: u64 = 10_000;

const SERVER_KEYS: &[&str] =
    &["command", "args", "env", "platforms", "url", "headers", "capabilities", "secrets", "startup_timeout_ms"];

/// How a server is reached.
#[derive(Clone, Debug, PartialEq)]
pub enum ServerTransport {
    /// A program rlp starts, speaking MCP on its stdin and stdout.
    Stdio {
        /// `command` (an absolute path, or `${bundle}/<path in the bundle>`)
        /// and `platforms`.
        programs: command::Programs,
        /// Its arguments; each may hold `${secret:<id>}`.
        args: Vec<String>,
        /// Its environment, in file order; values may hold `${secret:<id>}`.
        env: Vec<(String, String)>,
    },
    /// A Streamable HTTP endpoint.
    Http {
        /// The endpoint; `None` when it failed to parse (already reported).
        url: Option<UrlTemplate>,
        /// Static headers, in file order; values may hold `${secret:<id>}`.
        headers: Vec<(String, String)>,
    },
}

/// One `${secret:<id>}` in a server's `env`, `args` or `headers`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretRef {
    /// The value holding it.
    pub at: Pointer,
    /// The value as messages name it: ``env `API_KEY` ``, `argument 2`,
    /// ``header `Authorization` ``.
    pub site: String,
    /// The id, as written (not yet checked).
    pub id: String,
}

/// One entry of `servers`.
#[derive(Clone, Debug, PartialEq)]
pub struct Server {
    /// Where the entry is (`/servers/<name>`); each field is below it.
    pub at: Pointer,
    /// The key of the entry.
    pub name: String,
    /// stdio or HTTP, if it loaded.
    pub transport: Option<ServerTransport>,
    /// `capabilities`, each with its pointer.
    pub capabilities: Vec<(Pointer, Capability)>,
    /// `secrets`, each with its pointer.
    pub secrets: Vec<(Pointer, SecretId)>,
    /// `startup_timeout_ms` (default 10000).
    pub startup_timeout_ms: u64,
    /// Every well-formed `${secret:<id>}` of `env`, `args` and `headers`.
    pub secret_refs: Vec<SecretRef>,
}

impl Server {
    /// Every capability the server needs: declared, plus those implied by
    /// how it is reached (`exec` for a stdio server, `net:<url host:port>`
    /// for an HTTP one) and its secrets.
    pub fn required_capabilities(&self) -> Vec<Capability> {
        let implied = match &self.transport {
            Some(ServerTransport::Stdio { .. }) => Some(Capability::Exec),
            Some(ServerTransport::Http { url: Some(url), .. }) => Some(Capability::Net(url.target().clone())),
            _ => None,
        };
        with_implied(&self.capabilities, implied, &self.secrets)
    }

    /// The server's URL, for an HTTP server whose URL parsed.
    pub fn url(&self) -> Option<&UrlTemplate> {
        match &self.transport {
            Some(ServerTransport::Http { url, .. }) => url.as_ref(),
            _ => None,
        }
    }
}

/// Reads the top-level `servers` of tools.json (absent: none).
pub(crate) fn read_servers(top: &Fields<'_>, diags: &mut Diagnostics) -> Vec<Server> {
    let Some(servers) = top.table("servers", "`servers`", &[], false, diags) else { return Vec::new() };
    let mut out = Vec::new();
    for name in servers.keys() {
        let at = servers.at(name);
        if !is_valid_name(name) {
            diags
                .report(
                    Code::InvalidValue,
                    At::Key(at.clone()),
                    format!("server name `{name}` does not match {NAME_PATTERN}"),
                )
                .help("name servers with lower-case letters, digits and `_`, starting with a letter, e.g. `files`");
        }
        let Some(value) = servers.get(name) else { continue };
        if let Some(server) = read_server(name, value, at, diags) {
            out.push(server);
        }
    }
    out
}

fn read_server(name: &str, value: &Value, at: Pointer, diags: &mut Diagnostics) -> Option<Server> {
    let f = Fields::of(value, at.clone(), "the server", SERVER_KEYS, diags)?;
    f.finish(diags);
    let mut refs = Vec::new();
    let present = |key: &str| f.get(key).is_some_and(|v| !v.is_null());
    let stdio = present("command") || present("platforms");
    let transport = match (stdio, present("url")) {
        (true, true) => {
            diags
                .report(
                    Code::InvalidValue,
                    At::Key(f.at("url")),
                    format!("server `{name}` has both `command` and `url`"),
                )
                .help("a server is either stdio (`command`, `args`, `env`) or Streamable HTTP (`url`, `headers`): keep one");
            None
        }
        (false, false) => {
            diags
                .report(Code::MissingField, At::Key(at.clone()), format!("server `{name}` has neither `command` nor `url`"))
                .help("add `command` (and `args`, `env`) for a server rlp starts, or `url` (and `headers`) for one it connects to");
            None
        }
        (true, false) => {
            report_unexpected(
                &f,
                &["headers"],
                "a stdio server",
                "remove it; headers belong to a server with a `url`",
                diags,
            );
            read_stdio(&f, &mut refs, diags)
        }
        (false, true) => {
            let help = "remove it; `args`, `env` and `platforms` belong to a server with a `command`";
            report_unexpected(&f, &["args", "env", "platforms"], "an HTTP server", help, diags);
            Some(read_http(&f, &mut refs, diags))
        }
    };
    Some(Server {
        at,
        name: name.to_string(),
        transport,
        capabilities: parsed_list(&f, "capabilities", Code::CapabilityInvalid, diags),
        secrets: parsed_list(&f, "secrets", Code::SecretIdInvalid, diags),
        startup_timeout_ms: f
            .integer("startup_timeout_ms", 1, MAX_TIMEOUT_MS, diags)
            .unwrap_or(DEFAULT_STARTUP_TIMEOUT_MS),
        secret_refs: refs,
    })
}

fn read_stdio(f: &Fields<'_>, refs: &mut Vec<SecretRef>, diags: &mut Diagnostics) -> Option<ServerTransport> {
    let programs = command::read(f, "server", diags)?;
    let mut args = Vec::new();
    for (at, arg) in f.strings("args", diags) {
        let position = match at.segments().last() {
            Some(Segment::Index(i)) => i + 1,
            _ => 0,
        };
        collect_refs(at, format!("argument {position}"), arg, refs, diags);
        args.push(arg.to_string());
    }
    let mut env = Vec::new();
    if let Some(table) = f.table("env", "`env`", &[], false, diags) {
        for name in table.keys() {
            let Some(value) = table.string(name, true, diags) else { continue };
            if !is_env_name(name) {
                diags
                    .report(
                        Code::InvalidValue,
                        At::Key(table.at(name)),
                        format!("`{name}` is not an environment variable name"),
                    )
                    .help("use letters, digits and `_`, not starting with a digit, e.g. `API_KEY`");
                continue;
            }
            if collect_refs(table.at(name), format!("env `{name}`"), value, refs, diags) {
                env.push((name.clone(), value.to_string()));
            }
        }
    }
    Some(ServerTransport::Stdio { programs, args, env })
}

fn read_http(f: &Fields<'_>, refs: &mut Vec<SecretRef>, diags: &mut Diagnostics) -> ServerTransport {
    let url = f.string("url", true, diags).and_then(|raw| match parse_server_url(raw) {
        Ok(url) => Some(url),
        Err((code, message, help)) => {
            diags.report(code, At::Value(f.at("url")), message).help(help);
            None
        }
    });
    let headers = read_headers(f, diags);
    let at = f.at("headers");
    for (name, value) in &headers {
        collect_refs(at.key(name), format!("header `{name}`"), value, refs, diags);
    }
    ServerTransport::Http { url, headers }
}

/// A server's endpoint: an absolute http(s) URL without placeholders.
fn parse_server_url(raw: &str) -> Result<UrlTemplate, (Code, String, &'static str)> {
    let url = UrlTemplate::parse(raw).map_err(|e| (e.code, e.message, e.help))?;
    if let Some(name) = url.placeholders().next() {
        return Err((
            Code::HttpUrlInvalid,
            format!("`{{{name}}}` in a server's URL: a server is reached at one fixed address"),
            "write the server's endpoint without placeholders",
        ));
    }
    Ok(url)
}

/// Whether `name` is a portable environment variable name.
fn is_env_name(name: &str) -> bool {
    name.bytes().next().is_some_and(|b| !b.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Checks one value of `env` or `args` (headers are checked as they are
/// read) and notes its `${secret:<id>}` references; false when it is refused.
fn collect_refs(at: Pointer, site: String, value: &str, refs: &mut Vec<SecretRef>, diags: &mut Diagnostics) -> bool {
    if value.contains('\0') {
        diags
            .report(Code::InvalidValue, At::Value(at), format!("{site} contains a NUL character"))
            .help("a program's arguments and environment cannot hold NUL; remove it");
        return false;
    }
    match secret_refs(value) {
        Ok(ids) => {
            refs.extend(ids.into_iter().map(|id| SecretRef { at: at.clone(), site: site.clone(), id }));
            true
        }
        Err(why) => {
            diags
                .report(Code::InvalidValue, At::Value(at), format!("{site}: {why}"))
                .help("`${…}` in a server's values is only a secret reference, `${secret:<id>}`");
            false
        }
    }
}

#[cfg(test)]
mod tests;
