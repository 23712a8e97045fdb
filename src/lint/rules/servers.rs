//! RLP219–RLP224: the MCP servers of tools.json (`servers`) and the `mcp`
//! tools that live in them; RLP210 and RLP211 for the `${secret:<id>}` of
//! a server's `env`, `args` and `headers`.

use crate::bundle::LoadedBundle;
use crate::bundle::capability::Capability;
use crate::bundle::diag::{At, Code, Diagnostics, Finding};
use crate::bundle::manifest::is_valid_name;
use crate::bundle::policy::Policy;
use crate::bundle::servers::Server;
use crate::bundle::tools::{TOOLS_FILE, Tool, ToolsFile, Transport};
use crate::lint::rules::grants::{Needer, known_policy};
use crate::lint::rules::tools::{Owner, check_secret_ref};

pub(super) fn check(bundle: &LoadedBundle, out: &mut Vec<Finding>) {
    let Some(file) = &bundle.tools else { return };
    let mut diags = Diagnostics::new(bundle.display_path(TOOLS_FILE));
    let policy = known_policy(bundle);
    for server in &file.servers {
        let owner = Owner { named: format!("server `{}`", server.name), kind: "server", secrets: &server.secrets };
        for reference in &server.secret_refs {
            check_secret_ref(&owner, &reference.at, &reference.site, &reference.id, &mut diags);
        }
        check_plain_http(server, &mut diags);
        if let Some((policy, caps_file)) = &policy {
            check_granted(server, policy, caps_file, &mut diags);
        }
        if !file.tools.iter().any(|tool| server_name(tool) == Some(&server.name)) {
            diags
                .report(Code::ServerUnused, At::Key(server.at.clone()), format!("server `{}` is used by no tool", server.name))
                .help(format!(
                    "remove it, or give a tool `\"transport\": {{\"kind\": \"mcp\", \"server\": \"{}\", \"tool\": \"<its name on the server>\"}}`",
                    server.name
                ));
        }
    }
    for tool in &file.tools {
        let Some(Transport::Mcp { server, tool: name, definition_blake3, .. }) = &tool.transport else { continue };
        match file.server(server) {
            Some(found) => check_declared(tool, found, &mut diags),
            // A name that cannot be a server's is reported where it is read.
            None if is_valid_name(server) => report_unknown(file, tool, server, &mut diags),
            None => {}
        }
        if definition_blake3.is_none() {
            diags
                .report(
                    Code::DefinitionUnpinned,
                    At::Key(tool.at.key("transport")),
                    format!("tool `{}` does not pin its server's definition of `{name}`", tool.id),
                )
                .help(format!(
                    "re-import it with `rlp tools import --mcp {server}`, which writes `definition_blake3`: with the pin, a server whose tool changed is refused until you re-import"
                ));
        }
    }
    out.extend(diags.into_findings());
}

/// The server an `mcp` tool names.
fn server_name(tool: &Tool) -> Option<&String> {
    match &tool.transport {
        Some(Transport::Mcp { server, .. }) => Some(server),
        _ => None,
    }
}

/// RLP219: the tool's server is not in `servers`.
fn report_unknown(file: &ToolsFile, tool: &Tool, server: &str, diags: &mut Diagnostics) {
    let known: Vec<String> = file.servers.iter().map(|s| format!("`{}`", s.name)).collect();
    let help = if known.is_empty() {
        format!("declare `{server}` under the top-level `servers`, with a `command` or a `url`")
    } else {
        format!("declare `{server}` under `servers`, or name one of {}", known.join(", "))
    };
    diags
        .report(
            Code::ServerUnknown,
            At::Value(tool.at.key("transport").key("server")),
            format!("tool `{}` lives in server `{server}`, which `servers` does not declare", tool.id),
        )
        .help(help);
}

/// RLP222: plain `http://` to a host other than this machine.
fn check_plain_http(server: &Server, diags: &mut Diagnostics) {
    let Some(url) = server.url() else { return };
    if url.is_https() || url.target().is_loopback() {
        return;
    }
    diags
        .report(
            Code::ServerPlainHttp,
            At::Value(server.at.key("url")),
            format!(
                "server `{}` is reached over plain http at `{}`: its requests, headers and secrets would cross the network unencrypted",
                server.name,
                url.suggested_grant()
            ),
        )
        .help("use `https://`; plain `http://` is only for a server on this machine (`localhost`, `127.0.0.1`, `[::1]`)");
}

/// RLP220: what the server needs and the policy does not grant.
fn check_granted(server: &Server, policy: &Policy, caps_file: &str, diags: &mut Diagnostics) {
    let needer = Needer {
        named: format!("server `{}`", server.name),
        declared: &server.capabilities,
        secrets: &server.secrets,
        runs_at: server.at.key("command"),
        url: server.url(),
        url_at: server.at.key("url"),
        at: server.at.clone(),
    };
    for cap in server.required_capabilities().iter().filter(|cap| !policy.allows(cap)) {
        needer.report_ungranted(cap, Code::ServerNotGranted, caps_file, "; every tool of the server needs it", diags);
    }
}

/// RLP221: what the server needs and the tool does not declare, its
/// capabilities and its secrets each in one finding.
fn check_declared(tool: &Tool, server: &Server, diags: &mut Diagnostics) {
    let declared = Policy::from_capabilities(&tool.required_capabilities());
    let missing: Vec<Capability> =
        server.required_capabilities().into_iter().filter(|cap| !declared.allows(cap)).collect();
    let (secrets, caps): (Vec<&Capability>, Vec<&Capability>) =
        missing.iter().partition(|cap| matches!(cap, Capability::Secret(_)));
    for (list, key, one) in [(caps, "capabilities", "capability"), (secrets, "secrets", "secret")] {
        if list.is_empty() {
            continue;
        }
        let noun = if list.len() == 1 { format!("the {one}") } else { format!("the {key}") };
        // The URL's own spelling of its host, as for the grant it implies.
        let url = server.url();
        let shown = |cap: &&Capability| match (cap, url) {
            (Capability::Secret(id), _) => id.to_string(),
            (Capability::Net(target), Some(url)) if target == url.target() => format!("net:{}", url.suggested_grant()),
            (other, _) => other.to_string(),
        };
        let named: Vec<String> = list.iter().map(|cap| format!("`{}`", shown(cap))).collect();
        let quoted: Vec<String> = list.iter().map(|cap| format!("\"{}\"", shown(cap))).collect();
        diags
            .report(
                Code::ServerNeedUndeclared,
                At::Key(tool.at.key(key)),
                format!(
                    "tool `{}` does not declare {noun} {} that its server `{}` needs",
                    tool.id,
                    named.join(", "),
                    server.name
                ),
            )
            .help(format!(
                "add {} to the tool's `{key}`: every tool of a server needs what the server needs, so that the policy decides on each tool",
                quoted.join(", ")
            ));
    }
}
