//! RLP225, RLP226: programs a bundle carries are named with `${bundle}`,
//! and exist, are listed in the manifest and are executable.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::bundle::LoadedBundle;
use crate::bundle::command::{Programs, bundle_form, in_bundle};
use crate::bundle::diag::{At, Code, Diagnostics, Finding};
use crate::bundle::pointer::Pointer;
use crate::bundle::servers::ServerTransport;
use crate::bundle::tools::{TOOLS_FILE, Transport};

pub(super) fn check(bundle: &LoadedBundle, out: &mut Vec<Finding>) {
    let mut diags = Diagnostics::new(bundle.display_path(TOOLS_FILE));
    let root = bundle.dir.canonicalize().ok();
    for tool in bundle.tool_list() {
        for (at, command) in
            tool.transport.as_ref().and_then(Transport::programs).map(Programs::all).unwrap_or_default()
        {
            let at = at.cloned().unwrap_or_else(|| tool.at.key("transport").key("command"));
            check_command(bundle, root.as_deref(), command, &at, &mut diags);
        }
    }
    for server in bundle.tools.iter().flat_map(|t| &t.servers) {
        if let Some(ServerTransport::Stdio { programs, .. }) = &server.transport {
            for (at, command) in programs.all() {
                let at = at.cloned().unwrap_or_else(|| server.at.key("command"));
                check_command(bundle, root.as_deref(), command, &at, &mut diags);
            }
        }
    }
    out.extend(diags.into_findings());
}

/// One `command` at `at`: a `${bundle}/…` program must be a listed,
/// executable file of the bundle; an absolute one inside the bundle's
/// folder should be written `${bundle}/…`.
fn check_command(bundle: &LoadedBundle, root: Option<&Path>, command: &str, at: &Pointer, diags: &mut Diagnostics) {
    if let Some(inside) = in_bundle(command) {
        if let Some(why) = unusable(bundle, inside) {
            diags
                .report(Code::BundleProgramInvalid, At::Value(at.clone()), format!("`{command}` {why}"))
                .help(format!(
                    "put the program at `{inside}` in the bundle, make it executable (chmod +x) and run `rlp digest {}`",
                    bundle.dir.display()
                ));
        }
        return;
    }
    let Some(form) = root.and_then(|root| bundle_form(Path::new(command), root)) else { return };
    diags
        .report(
            Code::CommandInsideBundle,
            At::Value(at.clone()),
            format!("`{command}` is inside the bundle's folder, named by a path of this machine"),
        )
        .help(format!("write `{form}`: it names the bundle's copy wherever the bundle is installed or copied"));
}

/// Why the bundle's file `inside` cannot be run, if it cannot.
fn unusable(bundle: &LoadedBundle, inside: &str) -> Option<String> {
    if bundle.inventory.get(inside).is_none() {
        return Some("names no file of the bundle".to_string());
    }
    let listed = bundle.manifest.as_ref().is_some_and(|m| m.listed().any(|a| a.path == inside));
    if !listed {
        return Some("names a file manifest.toml does not list".to_string());
    }
    let mode = std::fs::metadata(bundle.dir.join(inside)).map(|m| m.permissions().mode()).unwrap_or(0);
    (mode & 0o111 == 0).then(|| "names a file that is not executable".to_string())
}
