//! The `[[hooks.after_call]]` tables of config.toml: the operator's commands
//! that see a call's result before the caller does, and may annotate it,
//! replace it (redaction) or withhold it (`crate::runtime::hooks` runs them).
//!
//! ```toml
//! [[hooks.after_call]]
//! name = "redact-emails"             # [A-Za-z0-9._-], unique
//! command = ["/usr/local/bin/redact", "--emails"]   # argv, no shell; absolute,
//!                                    # or relative to the config file's folder
//! tools = ["mail.*"]                 # tool-id patterns (default: every tool)
//! agents = ["mailer"]                # agent names (default: every agent)
//! timeout_ms = 5000                  # default 5000, at most 60000
//! on_failure = "withhold"            # or "pass": what a failed hook does to the call
//! ```
//!
//! Hooks of every config file apply, the system files' first, each file's
//! in the order written: a lower layer adds hooks and removes none.

use std::path::{Path, PathBuf};

use crate::config::tool_list::ToolPattern;
use crate::config::{ConfigError, ConfigFile};

/// The default `timeout_ms` of a hook.
pub(crate) const DEFAULT_TIMEOUT_MS: u64 = 5_000;
/// The longest `timeout_ms` accepted.
pub(crate) const MAX_TIMEOUT_MS: u64 = 60_000;
/// Most hooks one config file may declare.
const MAX_HOOKS: usize = 32;

/// What a hook that fails (exits non-zero, times out, prints what is not a
/// hook's answer) does to the call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnFailure {
    /// The caller gets an error instead of the result (the default: a
    /// redaction that did not run must not let the result through).
    #[default]
    Withhold,
    /// The result goes on as the hook received it; the failure is recorded.
    Pass,
}

impl OnFailure {
    /// As config.toml writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            OnFailure::Withhold => "withhold",
            OnFailure::Pass => "pass",
        }
    }
}

/// One `[[hooks.after_call]]` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AfterCallHook {
    /// `name`.
    pub name: String,
    /// `command`: the program (absolute), then its arguments.
    pub program: PathBuf,
    /// The arguments after the blob path.
    pub args: Vec<String>,
    /// `tools`: the tools it sees (empty: every tool).
    pub tools: Vec<ToolPattern>,
    /// `agents`: the agents whose calls it sees (empty: every agent).
    pub agents: Vec<String>,
    /// `timeout_ms`.
    pub timeout_ms: u64,
    /// `on_failure`.
    pub on_failure: OnFailure,
    /// The config file that declares it.
    pub file: PathBuf,
}

impl AfterCallHook {
    /// Whether the hook sees the calls of `tool` of `agent`.
    pub fn applies_to(&self, agent: &str, tool: &str) -> bool {
        (self.agents.is_empty() || self.agents.iter().any(|a| a == agent))
            && (self.tools.is_empty() || self.tools.iter().any(|p| p.matches(tool)))
    }
}

/// An entry as config.toml writes it.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    command: Vec<String>,
    #[serde(default)]
    tools: Vec<String>,
    #[serde(default)]
    agents: Vec<String>,
    timeout_ms: Option<u64>,
    on_failure: Option<String>,
}

/// Reads the `[hooks]` table of the config file `file`.
pub(crate) fn parse(
    file: ConfigFile<'_>,
    table: &toml::Table,
    warnings: &mut Vec<String>,
) -> Result<Vec<AfterCallHook>, ConfigError> {
    let mut hooks = Vec::new();
    for (key, value) in table {
        if key != "after_call" {
            warnings.push(file.warning(
                &format!("hooks.\"{key}\""),
                format!("unknown key `hooks.{key}` ignored (hooks are `[[hooks.after_call]]` tables)"),
            ));
            continue;
        }
        let Some(entries) = value.as_array() else {
            return Err(file.error(
                "hooks.after_call",
                format!("`hooks.after_call` must be an array of tables, found {}", value.type_str()),
                "write each hook as its own `[[hooks.after_call]]` table",
            ));
        };
        if entries.len() > MAX_HOOKS {
            return Err(file.error(
                &format!("hooks.after_call[{MAX_HOOKS}]"),
                format!("{} hooks in `hooks.after_call`; at most {MAX_HOOKS}", entries.len()),
                "fold hooks that do the same work into one command",
            ));
        }
        for (index, entry) in entries.iter().enumerate() {
            let hook = read_entry(file, index, entry)?;
            if hooks.iter().any(|h: &AfterCallHook| h.name == hook.name) {
                return Err(file.error(
                    &format!("hooks.after_call[{index}].name"),
                    format!("two hooks are named `{}`", hook.name),
                    "give each `[[hooks.after_call]]` its own name: traces tell hooks apart by it",
                ));
            }
            hooks.push(hook);
        }
    }
    Ok(hooks)
}

/// Reads entry `index` of `hooks.after_call`.
fn read_entry(file: ConfigFile<'_>, index: usize, value: &toml::Value) -> Result<AfterCallHook, ConfigError> {
    let at = format!("hooks.after_call[{index}]");
    // Placed at the entry's `field` where it has one, else at the entry.
    let fail = |field: &str, what: String, help: &str| {
        let place = if field.is_empty() { at.clone() } else { format!("{at}.{field}") };
        file.error(&place, format!("`{at}` {what}"), help)
    };
    let entry: Entry = value.clone().try_into().map_err(|e: toml::de::Error| {
        fail(
            "",
            format!("is not a hook: {}", e.message().trim()),
            "a hook has `name` and `command`, and may have `tools`, `agents`, `timeout_ms` and `on_failure` (docs/runtime.md, \"After-call hooks\")",
        )
    })?;
    let name_ok = !entry.name.is_empty()
        && entry.name.len() <= 64
        && entry.name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !name_ok {
        return Err(fail(
            "name",
            format!("has the name `{}`", entry.name.escape_debug()),
            "name it with 1 to 64 letters, digits, `.`, `_` or `-`",
        ));
    }
    let Some((program, args)) = entry.command.split_first() else {
        return Err(fail(
            "command",
            "has an empty `command`".into(),
            "write the program and its arguments, e.g. `command = [\"/usr/local/bin/redact\"]`",
        ));
    };
    let program = Path::new(program);
    let program = if program.is_absolute() {
        program.to_path_buf()
    } else if program.components().count() > 1 {
        file.path.parent().unwrap_or(Path::new("/")).join(program)
    } else {
        return Err(fail(
            "command[0]",
            format!("runs `{}`, which is not a path", program.display()),
            "write the program's absolute path, or a path relative to the config file's folder (`./redact`): hooks do not search PATH",
        ));
    };
    let tools = entry
        .tools
        .iter()
        .enumerate()
        .map(|(i, t)| {
            t.parse::<ToolPattern>().map_err(|why| {
                fail(
                    &format!("tools[{i}]"),
                    format!("`tools`: {why}"),
                    "write tool ids, with `*` for any run of characters",
                )
            })
        })
        .collect::<Result<_, _>>()?;
    let timeout_ms = entry.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
    if !(1..=MAX_TIMEOUT_MS).contains(&timeout_ms) {
        return Err(fail(
            "timeout_ms",
            format!("has `timeout_ms = {timeout_ms}`"),
            &format!("give a whole number of milliseconds from 1 to {MAX_TIMEOUT_MS}"),
        ));
    }
    let on_failure = match entry.on_failure.as_deref() {
        None | Some("withhold") => OnFailure::Withhold,
        Some("pass") => OnFailure::Pass,
        Some(other) => {
            return Err(fail(
                "on_failure",
                format!("has `on_failure = \"{}\"`", other.escape_debug()),
                "write `on_failure = \"withhold\"` (the default) or `\"pass\"`",
            ));
        }
    };
    Ok(AfterCallHook {
        name: entry.name,
        program,
        args: args.to_vec(),
        tools,
        agents: entry.agents,
        timeout_ms,
        on_failure,
        file: file.path.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<(Vec<AfterCallHook>, Vec<String>), ConfigError> {
        let table: toml::Table = text.parse().unwrap();
        let hooks = table.get("hooks").and_then(toml::Value::as_table).cloned().unwrap_or_default();
        let mut warnings = Vec::new();
        let places = crate::config::Places::default();
        let file = ConfigFile::new(Path::new("/etc/rlp/config.toml"), text, &places);
        parse(file, &hooks, &mut warnings).map(|h| (h, warnings))
    }

    #[test]
    fn a_hook_reads_with_its_defaults() {
        let (hooks, warnings) =
            parsed("[[hooks.after_call]]\nname = \"redact\"\ncommand = [\"./bin/redact\", \"--emails\"]\n").unwrap();
        assert!(warnings.is_empty());
        assert_eq!(hooks.len(), 1);
        let hook = &hooks[0];
        assert_eq!(hook.program, Path::new("/etc/rlp/bin/redact"));
        assert_eq!(hook.args, ["--emails"]);
        assert_eq!((hook.timeout_ms, hook.on_failure), (DEFAULT_TIMEOUT_MS, OnFailure::Withhold));
        assert!(hook.applies_to("any", "any.tool"));
    }

    #[test]
    fn tools_and_agents_narrow_what_a_hook_sees() {
        let (hooks, _) = parsed(
            "[[hooks.after_call]]\nname = \"h\"\ncommand = [\"/bin/h\"]\ntools = [\"mail.*\"]\nagents = [\"mailer\"]\non_failure = \"pass\"\n",
        )
        .unwrap();
        let hook = &hooks[0];
        assert!(hook.applies_to("mailer", "mail.send"));
        assert!(!hook.applies_to("mailer", "calendar.add"));
        assert!(!hook.applies_to("other", "mail.send"));
        assert_eq!(hook.on_failure, OnFailure::Pass);
    }

    #[test]
    fn bad_hooks_are_refused_naming_the_entry() {
        for (text, message) in [
            (
                "[[hooks.after_call]]\nname = \"h\"\ncommand = [\"redact\"]",
                "3:12: `hooks.after_call[0]` runs `redact`, which is not a path",
            ),
            ("[[hooks.after_call]]\nname = \"h\"\ncommand = []", "3:11: `hooks.after_call[0]` has an empty `command`"),
            (
                "[[hooks.after_call]]\nname = \"a b\"\ncommand = [\"/h\"]",
                "2:8: `hooks.after_call[0]` has the name `a b`",
            ),
            (
                "[[hooks.after_call]]\nname = \"h\"\ncommand = [\"/h\"]\ntimeout_ms = 0",
                "4:14: `hooks.after_call[0]` has `timeout_ms = 0`",
            ),
            (
                "[[hooks.after_call]]\nname = \"h\"\ncommand = [\"/h\"]\non_failure = \"ignore\"",
                "4:14: `hooks.after_call[0]` has `on_failure = \"ignore\"`",
            ),
            (
                "[[hooks.after_call]]\nname = \"h\"\ncommand = [\"/h\"]\ntools = [\"\"]",
                "4:10: `hooks.after_call[0]` `tools`: ",
            ),
            (
                "[[hooks.after_call]]\nname = \"h\"\ncommand = [\"/h\"]\ncomand = 1",
                "1:1: `hooks.after_call[0]` is not a hook: unknown field `comand`",
            ),
            (
                "[[hooks.after_call]]\nname = \"h\"\ncommand = [\"/h\"]\n[[hooks.after_call]]\nname = \"h\"\ncommand = [\"/g\"]",
                "5:8: two hooks are named `h`",
            ),
            ("[hooks]\nafter_call = 3", "2:14: `hooks.after_call` must be an array of tables"),
        ] {
            let error = parsed(text).unwrap_err();
            let expected = format!("/etc/rlp/config.toml:{message}");
            assert!(error.message.starts_with(&expected), "{text}: {}", error.message);
        }
    }
}
