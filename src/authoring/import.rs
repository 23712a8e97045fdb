//! `rlp tools import`: ask a binary for its own tool definitions (the
//! `schema` action) and add or update them in tools.json.
//!
//! The answer is `{"tools": [<tools.json entry>, …]}` on stdout (or the same
//! object as the `result` of a `{"outcome": "success", …}` envelope). An
//! entry without `transport` gets `{"kind": "exec", "command": <the binary>,
//! "args": [...]}`. Entries are matched by id: a new id is added; an existing
//! one is merged field by field ([`merge`]): the binary wins for the fields it
//! owns ([`BINARY_OWNED`]), tools.json wins for every other field it has, and
//! `--replace` lets the binary win for every field it states. Tools of this
//! binary that it no longer describes are kept and reported.
//!
//! The binary is run the way the runtime runs tools, by the same runner
//! ([`crate::process::tool`]), with a blob whose action is `schema`: its own
//! process group, killed with everything it started at the timeout or when
//! stdout passes its bound; killed too when rlp is interrupted or dies.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::authoring::jp_shape;
use serde_json::{Map, Value, json};

use crate::authoring::AuthoringError;
use crate::authoring::add::{GrantOutcome, commit, plan_grants};
use crate::authoring::check::{EntryFinding, check_drafts};
use crate::authoring::drift::exec_source;
use crate::authoring::spec::ToolDraft;
use crate::authoring::target::BundleTarget;
use crate::authoring::tools_file::{Change, ToolsDoc};
use crate::bundle::command::bundle_form;
use crate::bundle::value;
use crate::process::capture::Keep;
use crate::process::tool::{Invocation, InvokeError, invoke};
use crate::sandbox::{Grants, SandboxMode, SandboxPlan};

/// Default time a binary gets to answer.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default bound on stdout.
pub(crate) const DEFAULT_MAX_OUTPUT: usize = 4 << 20;
/// How much of stderr is kept.
const STDERR_TAIL: usize = 64 << 10;

/// Limits of one run of the binary.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Killed after this long.
    pub timeout: Duration,
    /// Killed when stdout grows beyond this many bytes.
    pub max_output: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { timeout: DEFAULT_TIMEOUT, max_output: DEFAULT_MAX_OUTPUT }
    }
}

/// The binary to ask.
#[derive(Clone, Debug)]
pub(crate) struct Source {
    /// Absolute path of the binary.
    pub command: PathBuf,
    /// Arguments after the blob path.
    pub args: Vec<String>,
    /// Time and output limits.
    pub limits: Limits,
    /// `runtime.sandbox`: the binary is asked under the sandbox, with no grant.
    pub sandbox: SandboxMode,
}

/// The fields of a tool entry the binary owns: how it is run and the schemas
/// of what it reads and returns. Where the binary states one, its value
/// replaces the one in tools.json.
pub(crate) const BINARY_OWNED: &[&str] =
    &["transport", "input_schema", "result_schema", "options_schema", "schema_refs"];

/// Lists of what a tool needs: the binary's new entries are added to the
/// author's, none is removed.
const UNION: &[&str] = &["capabilities", "secrets"];

/// What a merge did to the fields of one existing tool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Fields {
    /// Fields written from the binary's answer (new, or replaced).
    pub updated: Vec<String>,
    /// Fields where tools.json differs from the answer and was kept.
    pub kept: Vec<String>,
}

/// Merges the binary's `answer` for a tool into its entry `old`, keeping
/// `old`'s key order. A field the answer does not state is kept; one only the
/// answer states is added; where both state a field and differ, the answer
/// wins for [`BINARY_OWNED`] fields (and for every field under `replace`),
/// [`UNION`] lists get the answer's missing items appended, and tools.json
/// wins for the rest (description, requires_confirmation, observability,
/// budget, timeout_ms, …).
pub(crate) fn merge(
    old: &Map<String, Value>,
    answer: Map<String, Value>,
    replace: bool,
) -> (Map<String, Value>, Fields) {
    let mut merged = old.clone();
    let mut fields = Fields::default();
    for (key, new) in answer {
        let value = match old.get(&key) {
            Some(current) if *current == new => continue,
            Some(_) if replace || BINARY_OWNED.contains(&key.as_str()) => new,
            Some(Value::Array(current)) if UNION.contains(&key.as_str()) => {
                let mut items = current.clone();
                let Value::Array(extra) = new else {
                    fields.kept.push(key);
                    continue;
                };
                items.extend(extra.into_iter().filter(|item| !current.contains(item)));
                if items == *current {
                    fields.kept.push(key);
                    continue;
                }
                Value::Array(items)
            }
            Some(_) => {
                fields.kept.push(key);
                continue;
            }
            None => new,
        };
        fields.updated.push(key.clone());
        merged.insert(key, value);
    }
    (merged, fields)
}

/// What an import did.
#[derive(Debug)]
pub(crate) struct Imported {
    /// Each tool the binary described, with what happened to it and its fields.
    pub changes: Vec<(String, Change, Fields)>,
    /// Tools of tools.json run by this binary that its answer no longer
    /// describes: kept, in file order.
    pub not_described: Vec<String>,
    /// Grants outcome.
    pub grants: GrantOutcome,
    /// Lint warnings about the imported entries.
    pub warnings: Vec<EntryFinding>,
    /// Tools whose transport kind the answer changed: (id, old kind, new kind).
    pub retyped: Vec<(String, String, String)>,
}

/// Checks that `command` is an absolute path to an executable regular file.
pub(crate) fn check_command(command: &Path) -> Result<(), AuthoringError> {
    if !command.is_absolute() {
        return Err(AuthoringError::usage(format!("--exec `{}` is not an absolute path", command.display()))
            .with_help("write the full path, e.g. /usr/local/bin/mytool; the runtime never searches PATH"));
    }
    let meta = std::fs::metadata(command).map_err(|e| AuthoringError::io("inspect", command, &e))?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(AuthoringError::usage(format!("{} is not an executable file", command.display())));
    }
    Ok(())
}

/// What the binary printed, when it ended within its limits.
#[derive(Debug)]
struct Answer {
    status: ExitStatus,
    /// stdout, complete (within the bound).
    stdout: Vec<u8>,
    /// The end of stderr, lossily decoded.
    stderr: String,
}

/// Why the binary gave no output to read.
#[derive(Debug)]
enum NoOutput {
    /// It could not be started (or the blob written).
    Start(String),
    /// It did not finish in time; it was killed with everything it started.
    Timeout(Duration),
    /// stdout went past the bound; it was killed with everything it started.
    TooLarge(usize),
}

impl std::fmt::Display for NoOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoOutput::Start(why) => write!(f, "it could not be started: {why}"),
            NoOutput::Timeout(t) => write!(f, "it did not answer within {} ms and was killed", t.as_millis()),
            NoOutput::TooLarge(n) => write!(f, "it printed more than {n} bytes and was killed"),
        }
    }
}

/// The blob of a `schema` request.
fn schema_blob(invocation_id: &str, bundle_root: &Path, timeout: Duration) -> Value {
    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    json!({
        "v": 1,
        "action": "schema",
        "invocation_id": invocation_id,
        "trace_id": uuid::Uuid::now_v7().to_string(),
        "tool": {"id": null, "name": null, "arguments": {}, "answers": {}, "options": {}},
        "context": {
            "action": "schema",
            "root": bundle_root.display().to_string(),
            "attempt": 1,
            "deadline_ms": now_ms + timeout.as_millis() as u64,
        }
    })
}

/// Runs `command` with a `schema` blob and returns what it printed.
fn ask_schema(source: &Source, bundle_root: &Path) -> Result<Answer, NoOutput> {
    let (command, args, limits) = (source.command.as_path(), source.args.as_slice(), source.limits);
    let invocation_id = uuid::Uuid::now_v7().to_string();
    let blob = schema_blob(&invocation_id, bundle_root, limits.timeout);
    // Asked for its schema, a binary needs nothing beyond what any program
    // does: no grant, no network.
    let grants = Grants {
        command,
        bundle: bundle_root,
        fs: Vec::new(),
        net: Vec::new(),
        max_memory_bytes: None,
        max_processes: None,
    };
    let sandbox = SandboxPlan::new(source.sandbox, &grants);
    if let Some(why) = sandbox.refusal() {
        return Err(NoOutput::Start(format!(
            "refused: the sandbox is required and this kernel cannot confine the binary: {why}"
        )));
    }
    sandbox.warn_once();
    let invocation = Invocation {
        command,
        args,
        blob: &blob,
        invocation_id: &invocation_id,
        env: &[],
        deadline: Instant::now() + limits.timeout,
        max_stdout: limits.max_output as u64,
        stderr: Keep::Tail { keep: STDERR_TAIL, margin: 0 },
        sandbox: Some(&sandbox),
        cancel: None,
    };
    let finished = invoke(&invocation).map_err(|e| {
        NoOutput::Start(match e {
            InvokeError::Folder(e) => format!("cannot create a private folder: {e}"),
            InvokeError::Blob(e) => format!("cannot write the blob: {e}"),
            InvokeError::Sandbox(e) => format!("cannot prepare the sandbox: {e}"),
            InvokeError::Start(e) => e.to_string(),
            InvokeError::Wait(e) => format!("waiting for it failed: {e}"),
        })
    })?;
    if finished.timed_out {
        return Err(NoOutput::Timeout(limits.timeout));
    }
    if finished.overflow {
        return Err(NoOutput::TooLarge(limits.max_output));
    }
    let status = finished.status.ok_or_else(|| NoOutput::Start("lost track of the process".into()))?;
    let stderr = &finished.stderr.bytes;
    let tail = &stderr[stderr.len().saturating_sub(STDERR_TAIL)..];
    Ok(Answer { status, stdout: finished.stdout.bytes, stderr: String::from_utf8_lossy(tail).into_owned() })
}

/// Asks the binary for its tools; the error says why it gave none.
pub(crate) fn describe(source: &Source, bundle_root: &Path) -> Result<Vec<Map<String, Value>>, String> {
    let root = bundle_root.canonicalize().unwrap_or_else(|_| bundle_root.to_path_buf());
    let output = ask_schema(source, &root).map_err(|e| e.to_string())?;
    let parsed = match std::str::from_utf8(&output.stdout).map(value::parse_json_text) {
        Ok(Err(e)) if e.is_data() => {
            return Err(format!("its answer is ambiguous: {}", value::json_error_message(&e)));
        }
        parsed => parsed.ok().and_then(Result::ok),
    };
    let answer = match parsed {
        Some(Value::Object(mut envelope)) if envelope.contains_key("outcome") => {
            match envelope.get("outcome").and_then(Value::as_str) {
                Some("success") => envelope.remove("result").unwrap_or(Value::Null),
                Some("error") => {
                    let message = envelope.get("message").and_then(Value::as_str).unwrap_or("no message");
                    return Err(format!("it answered with an error: {}", excerpt(message)));
                }
                _ => return Err("it answered with an outcome other than success".into()),
            }
        }
        _ if !output.status.success() => {
            let mut why = match output.status.code() {
                Some(code) => format!("it exited with status {code}"),
                None => "it was killed by a signal".to_string(),
            };
            if !output.stderr.trim().is_empty() {
                why.push_str(&format!(" (stderr: {})", excerpt(output.stderr.trim())));
            }
            return Err(why);
        }
        Some(value) => value,
        None if output.stdout.iter().all(u8::is_ascii_whitespace) => return Err("it printed nothing".into()),
        None => {
            return Err(format!(
                "it printed something that is not JSON: {}",
                excerpt(&String::from_utf8_lossy(&output.stdout))
            ));
        }
    };
    let tools = match answer {
        Value::Object(mut map) => match map.remove("tools") {
            Some(Value::Array(items)) => items,
            _ => return Err("its answer has no `tools` list (expected {\"tools\": [...]})".into()),
        },
        _ => return Err("its answer is not an object (expected {\"tools\": [...]})".into()),
    };
    if tools.is_empty() {
        return Err("its answer lists no tools".into());
    }
    let mut entries = Vec::new();
    for (i, item) in tools.into_iter().enumerate() {
        let Value::Object(entry) = item else {
            return Err(format!("tools[{i}] of its answer is not an object"));
        };
        // Seed 000's own shape (`name`, `summary`, `parameters`) reads too.
        let mut entry = jp_shape::to_entry(entry);
        let Some(id) = entry.get("id").and_then(Value::as_str) else {
            return Err(format!("tools[{i}] of its answer has neither a string `id` nor a string `name`"));
        };
        if entries.iter().any(|e: &Map<String, Value>| e.get("id").and_then(Value::as_str) == Some(id)) {
            return Err(format!("its answer lists the tool `{}` twice", excerpt(id)));
        }
        if !entry.contains_key("transport") {
            let mut transport = Map::new();
            transport.insert("kind".into(), json!("exec"));
            transport.insert("command".into(), json!(written_command(&source.command, &root)));
            if !source.args.is_empty() {
                transport.insert("args".into(), json!(source.args));
            }
            entry = with_transport(entry, Value::Object(transport));
        }
        entries.push(entry);
    }
    Ok(entries)
}

/// Inserts `transport` after `description` (or `id`), keeping key order readable.
fn with_transport(entry: Map<String, Value>, transport: Value) -> Map<String, Value> {
    let anchor = if entry.contains_key("description") { "description" } else { "id" };
    let mut out = Map::new();
    for (key, value) in entry {
        let is_anchor = key == anchor;
        out.insert(key, value);
        if is_anchor {
            out.insert("transport".into(), transport.clone());
        }
    }
    out
}

fn excerpt(text: &str) -> String {
    let line: String = text.chars().filter(|c| !c.is_control() || *c == ' ').take(200).collect();
    if text.chars().count() > 200 { format!("{line}…") } else { line }
}

/// The error for a binary that gave no usable answer.
pub(crate) fn not_supported(source: &Source, target: &BundleTarget, why: &str) -> AuthoringError {
    AuthoringError::failed(format!(
        "{} did not answer the `schema` action: {why}; {} is unchanged",
        source.command.display(),
        target.dir.display()
    ))
    .with_help(format!(
        "add its tools by hand with `rlp tools add {} --id <id> --description '…' --exec {}`, or make the binary answer a blob whose \"action\" is \"schema\" with {{\"tools\": [...]}} (see docs/authoring.md)",
        target.dir.display(),
        source.command.display()
    ))
}

/// Imports the binary's tools into the bundle; `replace`: the binary's
/// answer wins for every field it states.
/// `command` as tools.json should write it: `${bundle}/<path>` for a
/// program inside the bundle at `root` (canonical), so the bundle can move;
/// else as given.
fn written_command(command: &Path, root: &Path) -> String {
    bundle_form(command, root).unwrap_or_else(|| command.display().to_string())
}

pub(crate) fn import(
    target: &BundleTarget,
    source: &Source,
    grant: bool,
    replace: bool,
) -> Result<Imported, AuthoringError> {
    check_command(&source.command)?;
    let mut tools = ToolsDoc::read(&target.dir)?;
    let entries = describe(source, &target.dir).map_err(|why| not_supported(source, target, &why))?;
    let mut changes = Vec::new();
    let mut merged = Vec::new();
    let mut retyped = Vec::new();
    let kind = |entry: Option<&Map<String, Value>>| {
        entry.and_then(|e| e.get("transport")?.get("kind")?.as_str()).map(str::to_string)
    };
    let root = target.dir.canonicalize().unwrap_or_else(|_| target.dir.clone());
    let program = source.command.canonicalize().unwrap_or_else(|_| source.command.clone());
    let asked = (program, source.args.clone());
    let same = |found: (PathBuf, Vec<String>)| (found.0.canonicalize().unwrap_or(found.0), found.1) == asked;
    let not_described: Vec<String> = tools
        .entries()
        .filter(|e| exec_source(e, &root).is_some_and(same))
        .filter_map(|e| e.get("id").and_then(Value::as_str))
        .filter(|id| !entries.iter().any(|answer| answer.get("id").and_then(Value::as_str) == Some(id)))
        .map(str::to_string)
        .collect();
    for entry in entries {
        let id = entry.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
        let before = kind(tools.get(&id));
        let (entry, fields) = match tools.get(&id) {
            Some(old) => merge(old, entry, replace),
            None => (entry, Fields::default()),
        };
        changes.push((id.clone(), tools.upsert(entry), fields));
        if let Some(now) = tools.get(&id) {
            if let (Some(old), Some(new)) = (before, kind(Some(now)))
                && old != new
            {
                retyped.push((id.clone(), old, new));
            }
            merged.push(now.clone());
        }
    }
    let drafts: Vec<ToolDraft> =
        merged.iter().map(|e| ToolDraft { entry: e.clone(), schema_files: Vec::new() }).collect();
    let refs: Vec<&ToolDraft> = drafts.iter().collect();
    let warnings = check_drafts(&target.dir, &refs).map_err(|e| {
        AuthoringError::failed(format!(
            "{} answered with tools that would not pass lint; {} is unchanged:\n{}",
            source.command.display(),
            target.dir.display(),
            e.message.split_once('\n').map_or("", |(_, rest)| rest)
        ))
        .with_help("fix the binary's `schema` answer, or add the tools by hand with `rlp tools add`")
    })?;
    let (grants, policy) = plan_grants(target, &merged, grant)?;
    commit(target, &tools, policy.as_ref(), &[])?;
    Ok(Imported { changes, not_described, grants, warnings, retyped })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn the_binary_wins_for_its_fields_and_tools_json_for_the_authors() {
        let old = map(json!({
            "id": "a", "description": "Mine", "input_schema": {"type": "object"},
            "capabilities": ["net:x", "fs:/data"], "requires_confirmation": true, "timeout_ms": 9,
        }));
        let answer = map(json!({
            "id": "a", "description": "Theirs", "input_schema": {"type": "string"},
            "capabilities": ["net:x", "net:y"], "requires_confirmation": false, "category": "c",
        }));
        let (merged, fields) = merge(&old, answer.clone(), false);
        assert_eq!(
            Value::Object(merged),
            json!({
                "id": "a", "description": "Mine", "input_schema": {"type": "string"},
                "capabilities": ["net:x", "fs:/data", "net:y"], "requires_confirmation": true, "timeout_ms": 9,
                "category": "c",
            })
        );
        assert_eq!(fields.updated, ["input_schema", "capabilities", "category"]);
        assert_eq!(fields.kept, ["description", "requires_confirmation"]);
        let (replaced, fields) = merge(&old, answer, true);
        assert_eq!((replaced["description"].clone(), replaced["timeout_ms"].clone()), (json!("Theirs"), json!(9)));
        assert!(fields.kept.is_empty());
    }
}
