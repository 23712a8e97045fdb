//! After-call hooks: the operator's commands (config.toml
//! `[[hooks.after_call]]`, [`crate::config::hooks`]) that see a call's
//! final result before the caller does, and may annotate it, replace it
//! (redaction) or withhold it.
//!
//! Each hook that applies to the call runs in turn, through the process
//! runner and the kernel sandbox like an exec tool with nothing granted: no
//! network, no file system beyond the system's read-only view and its own
//! folder, a private working folder, no secret in its environment. It gets
//! the exec protocol's blob (its path as the first argument) holding the
//! call, the result as the previous hook left it (secret values scrubbed)
//! and the notes so far; it answers on stdout with a JSON object, or with
//! nothing to leave the result as it is:
//!
//! - `result`: the result in place of the one received (checked against
//!   the tool's `result_schema`);
//! - `content`: content blocks in place of those received;
//! - `annotations`: notes for the caller (strings), which MCP clients get
//!   as text blocks after the result's;
//! - `withhold`: a reason; the caller gets an error saying it instead of
//!   the result.
//!
//! Each hook's effect is a `tool.hook` frame, written with the call's final
//! `tool.result` frame, which keeps the result as the tool returned it:
//! replay shows what the caller saw. A hook that fails (exits non-zero,
//! times out, answers what is not a hook's answer) withholds the result
//! unless its `on_failure` is `pass`.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::bundle::value::{MAX_DATA_DEPTH, json_depth};
use crate::config::hooks::{AfterCallHook, OnFailure};
use crate::event::{EventKind, HookEffect, PAYLOAD_VERSION, ToolHookPayload};
use crate::process::capture::Keep;
use crate::process::tool::{Invocation, invoke};
use crate::runtime::call::Call;
use crate::runtime::error::{CallError, CallErrorKind};
use crate::runtime::exec::check_command;
use crate::runtime::mcp::content::recorded_blocks;
use crate::runtime::validate::schema_errors;
use crate::sandbox::{Grants, SandboxPlan};

/// Most bytes a hook may print.
const MAX_HOOK_OUTPUT: u64 = 16 << 20;
/// The tail of a hook's stderr kept, and quoted in a failure.
const STDERR_TAIL: usize = 2 * 1024;
/// Most notes one hook may add, and the longest.
const MAX_ANNOTATIONS: usize = 16;
const MAX_ANNOTATION_BYTES: usize = 4 * 1024;
/// The longest reason for withholding a result.
const MAX_REASON_BYTES: usize = 1024;

/// A note a hook added for the caller.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Annotation {
    /// The hook's name.
    pub hook: String,
    /// The note.
    pub text: String,
}

/// What the caller sees of a call's result once its hooks ran.
#[derive(Debug)]
pub(crate) struct Seen {
    /// The result.
    pub(crate) result: Value,
    /// The content blocks (an MCP server's, or a hook's).
    pub(crate) content: Option<Vec<Value>>,
    /// The notes of the hooks.
    pub(crate) annotations: Vec<Annotation>,
}

/// A hook's answer, read from its stdout.
#[derive(Debug, Default, PartialEq)]
struct Answer {
    result: Option<Value>,
    content: Option<Vec<Value>>,
    annotations: Vec<String>,
    withhold: Option<String>,
}

impl Call<'_> {
    /// Runs the hooks that apply to this call on its final result (as
    /// recorded: scrubbed) and the content blocks beside it, in order, each
    /// one's frame pushed to the journal (made durable with the result
    /// frame). `None` when no hook applies; an error when one withheld the
    /// result.
    pub(crate) fn after_call(&mut self, result: &Value, content: Option<&[Value]>) -> Option<Result<Seen, CallError>> {
        let runtime = self.runtime;
        let (agent, tool) = (runtime.agent(), self.tool().id.as_str());
        let hooks: Vec<&AfterCallHook> =
            runtime.options().config.after_call_hooks.iter().filter(|h| h.applies_to(agent, tool)).collect();
        if hooks.is_empty() {
            return None;
        }
        let scrubber = &self.journal.scrubber;
        let mut seen = Seen {
            result: scrubber.scrubbed(result),
            content: content.map(|blocks| blocks.iter().map(|b| scrubber.scrubbed(b)).collect()),
            annotations: Vec::new(),
        };
        for hook in hooks {
            let started = Instant::now();
            let ran = self.run_hook(hook, &seen).and_then(|answer| self.checked(answer));
            let duration_ms = Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
            let mut frame = ToolHookPayload {
                v: PAYLOAD_VERSION,
                invocation_id: self.journal.invocation_id,
                tool: tool.to_string(),
                hook: hook.name.clone(),
                command: std::iter::once(hook.program.display().to_string()).chain(hook.args.iter().cloned()).collect(),
                effect: HookEffect::Unchanged,
                result: None,
                content: None,
                annotations: Vec::new(),
                reason: None,
                duration_ms,
                tags: self.journal.tags.clone(),
            };
            let refusal = match ran {
                Ok(answer) => {
                    frame.effect = match (&answer.withhold, answer.result.is_some() || answer.content.is_some()) {
                        (Some(_), _) => HookEffect::Withheld,
                        (None, true) => HookEffect::Replaced,
                        (None, false) if !answer.annotations.is_empty() => HookEffect::Annotated,
                        (None, false) => HookEffect::Unchanged,
                    };
                    if let Some(result) = &answer.result {
                        seen.result = result.clone();
                    }
                    if let Some(content) = &answer.content {
                        seen.content = Some(content.clone());
                    }
                    seen.annotations.extend(
                        answer
                            .annotations
                            .iter()
                            .map(|text| Annotation { hook: hook.name.clone(), text: text.clone() }),
                    );
                    let refusal = answer.withhold.as_ref().map(|why| self.withheld(hook, why));
                    frame.reason = answer.withhold;
                    // Binary data past a bound is recorded by digest, as in a result frame.
                    frame.content = answer.content.as_deref().map(recorded_blocks);
                    (frame.result, frame.annotations) = (answer.result, answer.annotations);
                    refusal
                }
                Err(why) => {
                    frame.reason = Some(why.clone());
                    match hook.on_failure {
                        OnFailure::Pass => {
                            frame.effect = HookEffect::FailedPassed;
                            None
                        }
                        OnFailure::Withhold => {
                            frame.effect = HookEffect::FailedWithheld;
                            Some(self.hook_failed(hook, &why))
                        }
                    }
                }
            };
            self.journal.push(EventKind::ToolHook, "runtime".into(), frame);
            if let Some(refusal) = refusal {
                return Some(Err(refusal));
            }
        }
        Some(Ok(seen))
    }

    /// Runs `hook` on what the caller would see now; its answer, or why it
    /// failed (scrubbed).
    fn run_hook(&self, hook: &AfterCallHook, seen: &Seen) -> Result<Answer, String> {
        let program = check_command(&hook.program.display().to_string()).map_err(|e| e.to_string())?;
        let folder = program.parent().unwrap_or(Path::new("/"));
        refuse_writable_by_others(&program, folder)?;
        let grants = Grants {
            command: &program,
            bundle: folder,
            fs: Vec::new(),
            net: Vec::new(),
            max_memory_bytes: None,
            max_processes: None,
        };
        let setting = &self.runtime.options().config.sandbox;
        let sandbox = SandboxPlan::new(setting.value, &grants);
        if let Some(why) = sandbox.refusal() {
            return Err(format!(
                "the sandbox is required ({}) and this kernel cannot confine the hook: {why}",
                setting.source.shown("runtime")
            ));
        }
        let blob = self.hook_blob(hook, seen);
        let invocation_id = self.journal.invocation_id.to_string();
        let sandbox_env = sandbox.environment();
        let env: Vec<(String, &str)> = sandbox_env.iter().map(|(name, value)| (name.clone(), value.as_str())).collect();
        let scrubber = &self.journal.scrubber;
        let invocation = Invocation {
            command: &program,
            args: &hook.args,
            blob: &blob,
            invocation_id: &invocation_id,
            env: &env,
            deadline: Instant::now() + Duration::from_millis(hook.timeout_ms),
            max_stdout: MAX_HOOK_OUTPUT,
            stderr: Keep::Tail { keep: STDERR_TAIL, margin: scrubber.max_spelled_len() },
            sandbox: Some(&sandbox),
            cancel: self.context.cancel.as_ref(),
        };
        let finished = invoke(&invocation).map_err(|e| e.describe(&program))?;
        let stderr = || {
            let tail = scrubber.scrub_tail(&finished.stderr.bytes, STDERR_TAIL, finished.stderr.cut);
            let tail = tail.trim_end();
            if tail.is_empty() { String::new() } else { format!("; stderr: {tail}") }
        };
        if finished.timed_out {
            return Err(format!("it took longer than its timeout_ms ({} ms) and was killed", hook.timeout_ms));
        }
        if finished.cancelled {
            return Err("the call was cancelled while it ran".to_string());
        }
        if finished.overflow {
            return Err(format!("it printed more than {MAX_HOOK_OUTPUT} bytes"));
        }
        match finished.status {
            Some(status) if status.success() => {}
            Some(status) => return Err(format!("it exited with {status}{}", stderr())),
            None => return Err(format!("it could not be waited for{}", stderr())),
        }
        read_answer(&finished.stdout.bytes).map_err(|why| scrubber.scrub_string(&why))
    }

    /// The blob `hook` reads.
    fn hook_blob(&self, hook: &AfterCallHook, seen: &Seen) -> Value {
        let notes: Vec<&str> = seen.annotations.iter().map(|a| a.text.as_str()).collect();
        json!({
            "v": 1,
            "action": "after_call",
            "hook": hook.name,
            "invocation_id": self.journal.invocation_id.to_string(),
            "trace_id": self.journal.trace_id.to_string(),
            "agent": self.runtime.agent(),
            "tool": {
                "id": self.tool().id,
                "name": self.tool().id,
                "arguments": self.journal.scrubber.scrubbed(&self.request.arguments),
            },
            "result": seen.result,
            "content": seen.content,
            "annotations": notes,
        })
    }

    /// A hook's answer, scrubbed, with a replaced result checked against
    /// the tool's `result_schema`.
    fn checked(&self, mut answer: Answer) -> Result<Answer, String> {
        let scrubber = &self.journal.scrubber;
        answer.result = answer.result.map(|r| scrubber.scrubbed(&r));
        answer.content = answer.content.map(|blocks| blocks.iter().map(|b| scrubber.scrubbed(b)).collect());
        answer.annotations = answer.annotations.iter().map(|n| scrubber.scrub_string(n)).collect();
        answer.withhold = answer.withhold.map(|w| scrubber.scrub_string(&w));
        if let Some(result) = &answer.result
            && let Some(errors) = schema_errors(&self.prepared.result, result)
        {
            return Err(format!("the result it gave does not match the tool's result_schema: {errors}"));
        }
        // What cannot be read back from the ledger is not recorded.
        let given = answer.result.iter().chain(answer.content.iter().flatten());
        if let Some(depth) = given.map(json_depth).find(|depth| *depth > MAX_DATA_DEPTH) {
            return Err(format!(
                "what it gave nests arrays and objects {depth} levels deep; rlp records at most {MAX_DATA_DEPTH}"
            ));
        }
        Ok(answer)
    }

    /// The error of a call whose result `hook` withheld.
    fn withheld(&self, hook: &AfterCallHook, why: &str) -> CallError {
        CallError::new(
            CallErrorKind::Withheld,
            withheld_message(&self.tool().id, &hook.name, HookEffect::Withheld, why),
        )
        .help(format!(
            "the hook is declared in {}; the call is recorded under invocation {}",
            hook.file.display(),
            self.journal.invocation_id
        ))
        .of_call(self.journal.invocation_id, self.journal.trace_id)
    }

    /// The error of a call whose result a failed `hook` withheld.
    fn hook_failed(&self, hook: &AfterCallHook, why: &str) -> CallError {
        CallError::new(
            CallErrorKind::Tool,
            withheld_message(&self.tool().id, &hook.name, HookEffect::FailedWithheld, why),
        )
        .help(format!(
            "fix the hook declared in {}, or set `on_failure = \"pass\"` there to let results through when it fails",
            hook.file.display()
        ))
        .of_call(self.journal.invocation_id, self.journal.trace_id)
    }
}

/// Refuses a hook program that others may replace: the program or its
/// folder (which the hook also reads, see the module docs) writable by
/// group or others, like a world-writable `/tmp`.
fn refuse_writable_by_others(program: &Path, folder: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    for path in [program, folder] {
        let mode =
            std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?.permissions().mode();
        if mode & 0o022 != 0 {
            return Err(format!(
                "{} is writable by group or others (mode {:o}): anyone who can write there could change what the hook runs; keep hooks in a folder only its owner writes, e.g. /usr/local/lib/rlp",
                path.display(),
                mode & 0o7777
            ));
        }
    }
    Ok(())
}

/// What the caller of `tool` is told when the hook `hook` withheld its
/// result (`effect` [`HookEffect::Withheld`], `why` the hook's reason) or
/// failed (`why` how); replay rebuilds the same message from the frame.
pub(crate) fn withheld_message(tool: &str, hook: &str, effect: HookEffect, why: &str) -> String {
    match effect {
        HookEffect::Withheld => format!("the result of `{tool}` was withheld by the hook `{hook}`: {why}"),
        _ => format!("the result of `{tool}` was withheld: the hook `{hook}` failed: {why}"),
    }
}

/// Reads a hook's stdout: nothing (the result as it was), or a JSON object
/// of [`Answer`]'s members.
fn read_answer(stdout: &[u8]) -> Result<Answer, String> {
    let text = std::str::from_utf8(stdout).map_err(|_| "its output is not UTF-8".to_string())?;
    if text.trim().is_empty() {
        return Ok(Answer::default());
    }
    let value: Value = serde_json::from_str(text).map_err(|e| format!("its output is not JSON: {e}"))?;
    let Value::Object(members) = value else {
        return Err("its output is not a JSON object (write {} or nothing to leave the result as it is)".to_string());
    };
    let mut answer = Answer::default();
    for (key, value) in members {
        match key.as_str() {
            "result" => answer.result = Some(value),
            "content" => answer.content = Some(content_blocks(value)?),
            "annotations" => answer.annotations = annotations(value)?,
            "withhold" => match value {
                Value::String(why) if !why.trim().is_empty() && why.len() <= MAX_REASON_BYTES => {
                    answer.withhold = Some(why);
                }
                _ => return Err(format!("`withhold` must be a reason: a string of 1 to {MAX_REASON_BYTES} bytes")),
            },
            other => {
                return Err(format!(
                    "its output has the member `{}`; a hook answers with `result`, `content`, `annotations` or `withhold`",
                    other.escape_debug()
                ));
            }
        }
    }
    Ok(answer)
}

/// `content`: an array of content blocks, each an object with a `type`.
fn content_blocks(value: Value) -> Result<Vec<Value>, String> {
    let wrong = || "`content` must be an array of content blocks (objects with a string `type`)".to_string();
    let Value::Array(blocks) = value else { return Err(wrong()) };
    if blocks.iter().all(|b| b.get("type").is_some_and(Value::is_string)) { Ok(blocks) } else { Err(wrong()) }
}

/// `annotations`: at most [`MAX_ANNOTATIONS`] strings.
fn annotations(value: Value) -> Result<Vec<String>, String> {
    let wrong = || {
        format!(
            "`annotations` must be an array of at most {MAX_ANNOTATIONS} strings of at most {MAX_ANNOTATION_BYTES} bytes"
        )
    };
    let Value::Array(notes) = value else { return Err(wrong()) };
    if notes.len() > MAX_ANNOTATIONS {
        return Err(wrong());
    }
    notes
        .into_iter()
        .map(|note| match note {
            Value::String(text) if text.len() <= MAX_ANNOTATION_BYTES => Ok(text),
            _ => Err(wrong()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_answer_leaves_the_result() {
        assert_eq!(read_answer(b"").unwrap(), Answer::default());
        assert_eq!(read_answer(b" \n").unwrap(), Answer::default());
        assert_eq!(read_answer(b"{}").unwrap(), Answer::default());
    }

    #[test]
    fn an_answer_replaces_annotates_or_withholds() {
        let answer =
            read_answer(br#"{"result": {"to": "[redacted]"}, "annotations": ["redacted 1 address"]}"#).unwrap();
        assert_eq!(answer.result, Some(json!({"to": "[redacted]"})));
        assert_eq!(answer.annotations, ["redacted 1 address"]);
        let answer = read_answer(br#"{"withhold": "contains a card number"}"#).unwrap();
        assert_eq!(answer.withhold.as_deref(), Some("contains a card number"));
        let answer = read_answer(br#"{"content": [{"type": "text", "text": "hi"}]}"#).unwrap();
        assert_eq!(answer.content, Some(vec![json!({"type": "text", "text": "hi"})]));
    }

    #[test]
    fn what_is_not_an_answer_is_refused_saying_why() {
        for (stdout, why) in [
            (&b"\xff"[..], "its output is not UTF-8"),
            (b"nope", "its output is not JSON"),
            (b"[1]", "its output is not a JSON object"),
            (br#"{"reslt": 1}"#, "its output has the member `reslt`"),
            (br#"{"withhold": ""}"#, "`withhold` must be a reason"),
            (br#"{"annotations": "x"}"#, "`annotations` must be an array"),
            (br#"{"annotations": [1]}"#, "`annotations` must be an array"),
            (br#"{"content": [{"text": "no type"}]}"#, "`content` must be an array of content blocks"),
        ] {
            let error = read_answer(stdout).unwrap_err();
            assert!(error.starts_with(why), "{error}");
        }
    }
}
