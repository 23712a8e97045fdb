//! RLP215, RLP216: what an exec tool can reach and use under the kernel
//! sandbox, which opens to it only the `fs:` folders and `net:` hosts the
//! tool itself declares.
//!
//! RLP215 names, for an exec tool that declares no capability of a family,
//! what it may have reached before: the policy's grants of that family that
//! no tool declares or reaches through its URL (a grant another tool claims
//! is that tool's, one a server needs is that server's), and the folders and
//! hosts its `transport.args` name.

mod args;

use std::path::{Path, PathBuf};

use crate::bundle::LoadedBundle;
use crate::bundle::capability::{Capability, NetTarget, fs_covers};
use crate::bundle::diag::{At, Code, Diagnostics, Finding};
use crate::bundle::servers::Server;
use crate::bundle::tools::{TOOLS_FILE, Tool, Transport};

/// A capability family the sandbox confines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    /// `fs:<dir>`.
    Fs,
    /// `net:<host>[:<port>]`.
    Net,
}

impl Family {
    /// The family of `cap`, if the sandbox confines it.
    fn of(cap: &Capability) -> Option<Family> {
        match cap {
            Capability::Fs(_) => Some(Family::Fs),
            Capability::Net(_) => Some(Family::Net),
            _ => None,
        }
    }

    /// The capability prefix, e.g. `fs:`.
    fn prefix(self) -> &'static str {
        match self {
            Family::Fs => "fs:",
            Family::Net => "net:",
        }
    }

    /// What one capability of the family opens, for help text.
    fn noun(self) -> &'static str {
        match self {
            Family::Fs => "folder",
            Family::Net => "host",
        }
    }
}

/// Whether one of two capabilities of a family covers the other.
fn overlap(a: &Capability, b: &Capability) -> bool {
    match (a, b) {
        (Capability::Fs(a), Capability::Fs(b)) => fs_covers(a, b) || fs_covers(b, a),
        (Capability::Net(a), Capability::Net(b)) => a.covers(b) || b.covers(a),
        _ => false,
    }
}

/// Whether grant `grant` covers `wanted` (same family).
fn covers(grant: &Capability, wanted: &Capability) -> bool {
    match (grant, wanted) {
        (Capability::Fs(grant), Capability::Fs(wanted)) => fs_covers(grant, wanted),
        (Capability::Net(grant), Capability::Net(wanted)) => grant.covers(wanted),
        _ => false,
    }
}

/// Runs RLP215 on every exec tool and RLP216 on every http and mcp tool.
pub(super) fn check(bundle: &LoadedBundle, out: &mut Vec<Finding>) {
    let mut diags = Diagnostics::new(bundle.display_path(TOOLS_FILE));
    let unclaimed = unclaimed_grants(bundle);
    let caps_file = bundle.manifest.as_ref().map_or("the policy file", |m| m.caps_file.as_str());
    let bundle_dir = bundle.dir.canonicalize().ok();
    for tool in bundle.tool_list() {
        match &tool.transport {
            Some(Transport::Exec { args, .. }) => {
                for family in [Family::Fs, Family::Net] {
                    if tool.capabilities.iter().any(|(_, c)| Family::of(c) == Some(family)) {
                        continue;
                    }
                    let granted: Vec<&Capability> =
                        unclaimed.iter().filter(|c| Family::of(c) == Some(family)).collect();
                    let named = named_in_args(args, bundle_dir.as_deref(), family, &granted);
                    report_undeclared(tool, family, &granted, &named, caps_file, &mut diags);
                }
            }
            Some(transport @ (Transport::Http { .. } | Transport::Mcp { .. })) => {
                check_limits(tool, transport, &mut diags)
            }
            None => {}
        }
    }
    out.extend(diags.into_findings());
}

/// The policy's `fs` and `net` grants, in file order, that no tool or
/// server needs.
fn unclaimed_grants(bundle: &LoadedBundle) -> Vec<Capability> {
    let Some(grants) = &bundle.grants else { return Vec::new() };
    let servers = bundle.tools.iter().flat_map(|file| &file.servers);
    let needed: Vec<Capability> = bundle
        .tool_list()
        .iter()
        .flat_map(Tool::required_capabilities)
        .chain(servers.flat_map(Server::required_capabilities))
        .filter(|c| Family::of(c).is_some())
        .collect();
    let fs = grants.fs.iter().flatten().map(|p: &PathBuf| Capability::Fs(p.clone()));
    let net = grants.net.iter().flatten().map(|t: &NetTarget| Capability::Net(t.clone()));
    let mut out: Vec<Capability> = Vec::new();
    for grant in fs.chain(net) {
        if !needed.iter().any(|n| overlap(n, &grant)) && !out.contains(&grant) {
            out.push(grant);
        }
    }
    out
}

/// The capabilities of `family` that `args` name, without repeats and
/// without those a grant in `granted` already covers.
fn named_in_args(
    args: &[String],
    bundle_dir: Option<&Path>,
    family: Family,
    granted: &[&Capability],
) -> Vec<Capability> {
    let mut out: Vec<Capability> = Vec::new();
    for cap in args.iter().filter_map(|arg| args::reach(arg, bundle_dir)) {
        if Family::of(&cap) == Some(family) && !granted.iter().any(|g| covers(g, &cap)) && !out.contains(&cap) {
            out.push(cap);
        }
    }
    out
}

/// Reports RLP215 for one exec tool and family, when anything suggests the
/// tool reaches that family.
fn report_undeclared(
    tool: &Tool,
    family: Family,
    granted: &[&Capability],
    named: &[Capability],
    caps_file: &str,
    diags: &mut Diagnostics,
) {
    if granted.is_empty() && named.is_empty() {
        return;
    }
    let mut reasons = Vec::new();
    if !granted.is_empty() {
        reasons.push(format!("{}, which {caps_file} grants", listed(family, granted.iter().copied())));
    }
    if !named.is_empty() {
        reasons.push(format!("{}, which its `transport.args` name", listed(family, named)));
    }
    let all: Vec<String> =
        granted.iter().copied().chain(named).map(|c| serde_json::Value::String(c.to_string()).to_string()).collect();
    let help = match all.as_slice() {
        [one] => format!("add {one} to \"capabilities\" if the tool uses that {}", family.noun()),
        many => format!("add {} to \"capabilities\" for the {}s the tool uses", many.join(", "), family.noun()),
    };
    // Without a `capabilities` key this falls back to the tool object.
    let at = At::Key(tool.at.key("capabilities"));
    diags
        .report(
            Code::SandboxGrantUndeclared,
            at,
            format!(
                "exec tool `{}` declares no `{}` capability, so the sandbox keeps it from {}",
                tool.id,
                family.prefix(),
                reasons.join(", and from ")
            ),
        )
        .help(help);
}

/// The folders or hosts of `caps`, each in backquotes, joined by "or".
fn listed<'a>(family: Family, caps: impl IntoIterator<Item = &'a Capability>) -> String {
    let shown: Vec<String> =
        caps.into_iter().map(|c| format!("`{}`", &c.to_string()[family.prefix().len()..])).collect();
    shown.join(" or ")
}

/// Reports RLP216 for each sandbox limit set on an http or mcp tool.
fn check_limits(tool: &Tool, transport: &Transport, diags: &mut Diagnostics) {
    let (kind, why) = match transport {
        Transport::Mcp { .. } => {
            ("an mcp", "an mcp tool's calls run in its server's process, which the tool's limits do not bound")
        }
        _ => ("an http", "an http tool runs no process of its own for the sandbox to limit"),
    };
    let limits = [("max_memory_bytes", tool.max_memory_bytes), ("max_processes", tool.max_processes)];
    for (key, _) in limits.iter().filter(|(_, value)| value.is_some()) {
        diags
            .report(
                Code::SandboxLimitOnHttpTool,
                At::Key(tool.at.key(*key)),
                format!("`{key}` applies only to exec tools; `{}` is {kind} tool and it is ignored", tool.id),
            )
            .help(format!("remove `{key}`: {why}"));
    }
}
