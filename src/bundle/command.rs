//! The `command` of an exec tool or a stdio MCP server: an absolute path,
//! or `${bundle}/<path>` for a program the bundle carries. `${bundle}`
//! stands for the folder the bundle is loaded from, wherever it was
//! installed or copied; it is resolved when the program is started, in the
//! command and in its arguments. The signature covers the form as written.

use std::path::Path;

use crate::bundle::manifest::is_valid_artifact_path;

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
