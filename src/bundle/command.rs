//! The `command` of an exec tool or a stdio MCP server: an absolute path,
//! or `${bundle}/<path>` for a program the bundle carries. `${bundle}`
//! stands for the folder the bundle is loaded from, wherever it was
//! installed or copied; it is resolved when the program is started, in the
//! command and in its arguments. The signature covers the form as written.

use std::path::Path;

use serde_json::Value;

use crate::bundle::diag::{At, Code, Diagnostics};
use crate::bundle::manifest::is_valid_artifact_path;
use crate::bundle::pointer::Pointer;
use crate::bundle::reader::Fields;

/// What stands for the bundle's folder.
pub const BUNDLE_DIR: &str = "${bundle}";

/// The platforms a `platforms` map may name: `<os>-<arch>`, as
/// [`this_platform`] writes the one rlp runs on.
pub const TARGETS: &[&str] = &[
    "linux-x86_64",
    "linux-aarch64",
    "linux-arm",
    "linux-riscv64",
    "macos-x86_64",
    "macos-aarch64",
    "windows-x86_64",
    "windows-aarch64",
];

/// The platform rlp runs on, as `platforms` names it (`linux-x86_64`).
pub fn this_platform() -> String {
    format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH)
}

/// What a command starts with to name a program in the bundle.
pub const BUNDLE_PREFIX: &str = "${bundle}/";

/// The program's path in the bundle, for a command written `${bundle}/…`.
pub fn in_bundle(command: &str) -> Option<&str> {
    command.strip_prefix(BUNDLE_PREFIX)
}

/// The program of an exec tool or a stdio server: `command`, and the
/// `platforms` entries that win over it on their platform.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Programs {
    /// `command`; absent when `platforms` names the programs.
    pub command: Option<String>,
    /// `platforms`: a platform (`linux-x86_64`), its program, and where the
    /// entry is written; in file order.
    pub platforms: Vec<(Pointer, String, String)>,
}

impl Programs {
    /// The program on `platform`: its `platforms` entry, else `command`.
    pub fn for_platform(&self, platform: &str) -> Option<&str> {
        let entry = self.platforms.iter().find(|(_, target, _)| target == platform);
        entry.map(|(_, _, program)| program.as_str()).or(self.command.as_deref())
    }

    /// Every program named (`command`, then each `platforms` entry), with
    /// the pointer of a `platforms` entry.
    pub fn all(&self) -> Vec<(Option<&Pointer>, &str)> {
        let command = self.command.iter().map(|c| (None, c.as_str()));
        command.chain(self.platforms.iter().map(|(at, _, program)| (Some(at), program.as_str()))).collect()
    }

    /// The platforms `platforms` names.
    pub fn carried(&self) -> Vec<&str> {
        self.platforms.iter().map(|(_, target, _)| target.as_str()).collect()
    }
}

/// Reads `command` and `platforms` of `f` (an exec transport or a stdio
/// server, a `what`), each program checked; `command` is required unless
/// `platforms` names programs.
pub(crate) fn read(f: &Fields<'_>, what: &str, diags: &mut Diagnostics) -> Option<Programs> {
    let platforms = read_platforms(f, what, diags);
    let command = f.string("command", platforms.is_empty(), diags).map(str::to_string);
    if let Some((message, help)) = command.as_deref().and_then(|c| problem(c, what)) {
        diags.report(Code::ExecCommandNotAbsolute, At::Value(f.at("command")), message).help(help);
    }
    (command.is_some() || !platforms.is_empty()).then_some(Programs { command, platforms })
}

/// `platforms`: a platform to the program for it.
fn read_platforms(f: &Fields<'_>, what: &str, diags: &mut Diagnostics) -> Vec<(Pointer, String, String)> {
    let Some(table) = f.table("platforms", "`platforms`", &[], false, diags) else { return Vec::new() };
    let Some(Value::Object(map)) = f.get("platforms") else { return Vec::new() };
    let mut out = Vec::new();
    for target in map.keys() {
        let Some(program) = table.string(target, true, diags) else { continue };
        if !TARGETS.contains(&target.as_str()) {
            diags
                .report(
                    Code::PlatformUnknown,
                    At::Key(table.at(target)),
                    format!("`{target}` is not a platform rlp knows"),
                )
                .help(format!("name one of {}", TARGETS.join(", ")));
            continue;
        }
        if let Some((message, help)) = problem(program, what) {
            diags.report(Code::ExecCommandNotAbsolute, At::Value(table.at(target)), message).help(help);
        }
        out.push((table.at(target), target.clone(), program.to_string()));
    }
    out
}

/// The `${bundle}/<path>` form of `program` when it lies inside the bundle
/// folder `root` (canonical), links resolved; `None` outside it.
pub fn bundle_form(program: &Path, root: &Path) -> Option<String> {
    let real = program.canonicalize().unwrap_or_else(|_| program.to_path_buf());
    real.strip_prefix(root).ok().map(|inside| format!("{BUNDLE_PREFIX}{}", inside.display()))
}

/// `text` with every `${bundle}` replaced by `dir`.
pub fn resolve(text: &str, dir: &Path) -> String {
    text.replace(BUNDLE_DIR, &dir.to_string_lossy())
}

/// What is wrong with a `command` (of a `what`: `tool` or `server`), if
/// anything: the message and the fix.
pub(crate) fn problem(command: &str, what: &str) -> Option<(String, String)> {
    if command.starts_with('/') {
        return None;
    }
    match in_bundle(command) {
        Some(inside) if is_valid_artifact_path(inside) => None,
        Some(_) => Some((
            format!("command `{command}` does not name a file inside the bundle"),
            format!(
                "after `${{bundle}}/` write the file's path in the bundle, e.g. `${{bundle}}/bin/{what}`, without `.` or `..`"
            ),
        )),
        None => Some((
            format!("command `{command}` is neither an absolute path nor `${{bundle}}/<path>`"),
            format!(
                "write the full path, e.g. `/usr/local/bin/{what}`, or `${{bundle}}/bin/{what}` for a program in the bundle; the runtime never searches PATH"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_absolute_or_in_the_bundle() {
        assert_eq!(problem("/usr/bin/env", "tool"), None);
        assert_eq!(problem("${bundle}/bin/greet", "tool"), None);
        assert_eq!(in_bundle("${bundle}/bin/greet"), Some("bin/greet"));
        let (message, help) = problem("${bundle}/../x", "tool").unwrap();
        assert_eq!(message, "command `${bundle}/../x` does not name a file inside the bundle");
        assert!(help.contains("`${bundle}/bin/tool`"), "{help}");
        let (message, help) = problem("greet", "server").unwrap();
        assert_eq!(message, "command `greet` is neither an absolute path nor `${bundle}/<path>`");
        assert!(help.starts_with("write the full path, e.g. `/usr/local/bin/server`"), "{help}");
        assert_eq!(resolve("${bundle}/data:${bundle}", Path::new("/a b")), "/a b/data:/a b");
    }
}
