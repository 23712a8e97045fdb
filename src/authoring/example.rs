//! `rlp agent scaffold --example`: a small exec tool that runs as written,
//! so a new bundle can be called, traced and replayed before anything is built.
//!
//! The tool, `<agent>.greet`, follows the exec protocol (docs/runtime.md,
//! "Exec tools"): it reads the blob whose path is its first argument and
//! prints `{"greeting": "Hello, <name>!"}`; asked for its schema (the
//! `schema` action of `rlp tools import`), it prints its own entry. It is a POSIX sh script, or a
//! python3 script where `/bin/sh` is missing; which one is decided when the
//! bundle is scaffolded. Its input schema keeps the name to letters, spaces
//! and hyphens, which is what lets the sh version read it with `sed`.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::authoring::spec::ToolDefinition;
use crate::bundle::command::BUNDLE_PREFIX;
use crate::fsutil::{find_on_path, is_executable_file};

/// Where the script goes, relative to the bundle folder.
pub(crate) const SCRIPT_FILE: &str = "bin/greet";
/// The POSIX shell every POSIX system has.
const SH: &str = "/bin/sh";

/// The interpreter the example script is written for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Interpreter {
    /// `/bin/sh`.
    Sh,
    /// python3, at this absolute path.
    Python3(PathBuf),
}

impl Interpreter {
    /// `/bin/sh` when it is there, else the first `python3` on `PATH`.
    pub(crate) fn detect() -> Option<Interpreter> {
        detect_in(Path::new(SH), std::env::var_os("PATH").as_deref())
    }
}

/// [`Interpreter::detect`] with the shell's path and `PATH` given.
fn detect_in(sh: &Path, path: Option<&std::ffi::OsStr>) -> Option<Interpreter> {
    if is_executable_file(sh) {
        return Some(Interpreter::Sh);
    }
    find_on_path("python3", path).map(Interpreter::Python3)
}

/// The example tool of one bundle: its tools.json entry and its script.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Example {
    /// The tools.json entry (its `transport.command` is `${bundle}/bin/greet`,
    /// so the bundle can be installed or copied anywhere).
    pub tool: ToolDefinition,
    /// The text of [`SCRIPT_FILE`].
    pub script: String,
}

impl Example {
    /// The example tool of agent `agent`, its script run by `interpreter`.
    pub(crate) fn new(agent: &str, interpreter: &Interpreter) -> Example {
        let id = tool_id(agent);
        let command = format!("{BUNDLE_PREFIX}{SCRIPT_FILE}");
        let entry: Map<String, Value> = json!({
            "id": id,
            "description": "Greets someone by name: an example exec tool (bin/greet) to call, trace and replay",
            "transport": {"kind": "exec", "command": command},
            "input_schema": {
                "type": "object",
                "properties": {
                    "name": {
                        "type": "string",
                        "description": "Who to greet: letters, spaces and hyphens",
                        "minLength": 1,
                        "maxLength": 40,
                        "pattern": "^[A-Za-z][A-Za-z -]*$",
                        "examples": ["Ada"]
                    }
                },
                "required": ["name"],
                "additionalProperties": false
            },
            "result_schema": {
                "type": "object",
                "properties": {"greeting": {"type": "string"}},
                "required": ["greeting"],
                "additionalProperties": false
            },
            "requires_confirmation": false
        })
        .as_object()
        .cloned()
        .unwrap_or_default();
        let mut described = entry.clone();
        described.remove("transport");
        let schema = json!({"tools": [described]}).to_string();
        let script = match interpreter {
            Interpreter::Sh => SH_SCRIPT.to_string(),
            Interpreter::Python3(python) => PYTHON_SCRIPT.replace("{python}", &python.display().to_string()),
        };
        let script = script.replace("{id}", &id).replace("{schema}", &schema);
        Example { tool: ToolDefinition::Entry(entry), script }
    }
}

/// The example tool's id for agent `agent`.
pub(crate) fn tool_id(agent: &str) -> String {
    format!("{agent}.greet")
}

/// The sh version of the script.
const SH_SCRIPT: &str = r#"#!/bin/sh
# {id}: an example exec tool (docs/runtime.md, "Exec tools").
# rlp runs it as `greet <blob>`: $1 is a JSON file whose tool.arguments hold
# {"name": "..."}. The input_schema allows only letters, spaces and hyphens
# in the name, so sed can pick it out without a JSON parser. It prints one
# JSON value on stdout, the result; diagnostics would go to stderr.
# `rlp tools import` asks for its definition with the action "schema".
set -eu
if grep -q '"action" *: *"schema"' "$1"; then
    cat <<'SCHEMA'
{schema}
SCHEMA
    exit 0
fi
name=$(sed -n 's/.*"name" *: *"\([A-Za-z -]*\)".*/\1/p' "$1")
printf '{"greeting": "Hello, %s!"}\n' "$name"
"#;

/// The python3 version of the script.
const PYTHON_SCRIPT: &str = r#"#!{python}
"""{id}: an example exec tool (docs/runtime.md, "Exec tools").

rlp runs it as `greet <blob>`: argv[1] is a JSON file whose tool.arguments
hold {"name": "..."}. It prints one JSON value on stdout, the result;
diagnostics would go to stderr. `rlp tools import` asks for its definition
with the action "schema".
"""
import json
import sys

SCHEMA = r"""{schema}"""

with open(sys.argv[1], encoding="utf-8") as file:
    blob = json.load(file)
if blob["action"] == "schema":
    print(SCHEMA)
else:
    print(json.dumps({"greeting": "Hello, %s!" % blob["tool"]["arguments"]["name"]}))
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefers_sh_then_finds_python3_on_path() {
        let dir = tempfile::tempdir().unwrap();
        let python = dir.path().join("python3");
        std::fs::write(&python, "").unwrap();
        std::fs::set_permissions(&python, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let path = std::env::join_paths(["relative", dir.path().to_str().unwrap()]).unwrap();
        assert_eq!(detect_in(Path::new(SH), Some(&path)), Some(Interpreter::Sh));
        let missing = dir.path().join("no-sh");
        assert_eq!(detect_in(&missing, Some(&path)), Some(Interpreter::Python3(python)));
        assert_eq!(detect_in(&missing, None), None);
    }

    /// Runs the script of `interpreter` with a blob of `action` and `arguments`.
    fn run(interpreter: &Interpreter, action: &str, arguments: Value) -> Value {
        let dir = tempfile::tempdir().unwrap();
        let example = Example::new("demo", interpreter);
        let script = dir.path().join("greet");
        std::fs::write(&script, &example.script).unwrap();
        let blob = dir.path().join("blob.json");
        let body = json!({"v": 1, "action": action, "tool": {"id": "demo.greet", "arguments": arguments}});
        std::fs::write(&blob, body.to_string()).unwrap();
        let program = match interpreter {
            Interpreter::Sh => PathBuf::from(SH),
            Interpreter::Python3(python) => python.clone(),
        };
        let out = std::process::Command::new(program).arg(&script).arg(&blob).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    #[test]
    fn both_scripts_greet_and_describe_themselves() {
        let python = detect_in(Path::new("/nonexistent"), std::env::var_os("PATH").as_deref());
        for interpreter in [Some(Interpreter::Sh), python].into_iter().flatten() {
            let greeting = run(&interpreter, "run", json!({"name": "Ada Lovelace"}));
            assert_eq!(greeting, json!({"greeting": "Hello, Ada Lovelace!"}), "{interpreter:?}");
            let described = run(&interpreter, "schema", Value::Null);
            assert_eq!(described["tools"][0]["id"], "demo.greet", "{interpreter:?}");
            assert_eq!(described["tools"][0]["input_schema"]["required"], json!(["name"]), "{interpreter:?}");
        }
    }

    #[test]
    fn the_python_script_names_its_interpreter() {
        let example = Example::new("demo", &Interpreter::Python3("/opt/py/bin/python3".into()));
        assert!(example.script.starts_with("#!/opt/py/bin/python3\n\"\"\"demo.greet: "), "{}", example.script);
        let ToolDefinition::Entry(entry) = example.tool else { panic!("an entry") };
        assert_eq!(entry["transport"]["command"], "${bundle}/bin/greet");
    }
}
