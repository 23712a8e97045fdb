//! `rlp tools call`: one call through the whole runtime.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{ArgGroup, Args};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, Printer, diagnostic};
use crate::cli::replaying::{self, ReplayFlags};
use crate::cli::runtime_setup::{RuntimeFlags, load_runtime};
use crate::fsutil::{ReadError, read_limited, read_stream_limited};
use crate::replay::serving::RecordedTrace;
use crate::runtime::Runtime;
use crate::runtime::{CallError, CallOutcome, CallRequest, MAX_CONCURRENT_CALLS};
use crate::text::terminal_safe;

/// Largest `--args @FILE` or `@-` read.
const MAX_ARGS_BYTES: u64 = 16 << 20;

/// Flags of `rlp tools call`.
#[derive(Debug, Args)]
#[command(
    group(ArgGroup::new("calls").required(true).args(["tool", "batch"])),
    override_usage = "rlp tools call [OPTIONS] <BUNDLE> <TOOL_ID>\n       rlp tools call [OPTIONS] <BUNDLE> --batch <FILE.jsonl>"
)]
#[command(after_help = "\
Examples:
  rlp tools call agents/demo demo.greet --args '{\"name\": \"Ada\"}'
  echo '{\"name\": \"Grace\"}' | rlp tools call agents/demo demo.greet --args @- --format json
  rlp tools call agents/demo demo.greet --args '{\"name\": 7}'   # exit 2: shows a corrected --args
  rlp tools call agents/notes notes.add --args '{\"text\": \"hi\"}' --yes   # exit 3: no secret set
  printf '%s\\n' '{\"tool\": \"demo.greet\", \"args\": {\"name\": \"Ada\"}}' \\
      '{\"tool\": \"demo.greet\", \"args\": {\"name\": \"Grace\"}}' \\
      | rlp tools call agents/demo --batch - --jobs 8
  rlp tools call agents/demo demo.greet --args '{\"name\": \"Ada\"}' --replay last --match any-order
  rlp tools call agents/demo demo.greet --args '{\"name\": \"Ada\"}' --tag team=docs

A tool may ask questions before it goes on: --answer ID=VALUE answers one up front
(JSON values allowed); otherwise rlp asks on the terminal, and without one the call
fails (exit 2) naming each question and its --answer flag.
Options come from --option, then [agents.<agent>.tools.\"<id>\".options] in config.toml,
then the defaults of the tool's options_schema (`rlp tools list` shows them).

Secrets come from the environment: runloop/mail/smtp_api_key is read from RUNLOOP_MAIL__SMTP_API_KEY.
Every call is recorded in $RUNLOOP_HOME/pog/events.sqlite (see docs/runtime.md).

Exit codes: 0 success, 1 the tool failed or its result is invalid,
2 bad arguments, options or answers, a question left unanswered, or an invalid bundle,
3 refused by policy (capability not granted, secret missing, confirmation denied, budget spent).

--batch FILE.jsonl (or - for standard input) makes one call a line, {\"tool\": \"<id>\", \"args\": {…}},
at most --jobs at once, all in one trace; every line is checked before any call runs.
It prints one JSON line a call, in input order: the --format json document plus \"line\".
Its exit code is 3 if any call was refused, else 2 if any had bad arguments, an unknown
tool or an unanswered question, else 1 if any failed, else 0.

--replay TRACE answers the call from a recorded trace (an id, `last`, or a file of `rlp trace
export`) instead of running the tool, as `rlp serve --replay` does (docs/replay.md): a call no
recording answers fails (exit 1) naming the closest recorded call, unless --fallback live runs
it. Calls given the same --trace-id share one replay: each recording answers once, in order.
A --batch with --replay also exits 1 when a recorded call was never made.")]
pub struct CallArgs {
    /// The bundle folder.
    pub bundle: PathBuf,
    /// The tool to call (its `id` in tools.json); not with `--batch`.
    #[arg(value_name = "TOOL_ID")]
    pub tool: Option<String>,
    /// The arguments: JSON text, `@FILE`, or `@-` for standard input (default `{}`).
    #[arg(long, value_name = "JSON|@FILE")]
    pub args: Option<String>,
    /// Make the calls of a JSON Lines file (`-` for standard input), one a
    /// line: `{"tool": "<id>", "args": {…}}`.
    #[arg(long, value_name = "FILE.jsonl", conflicts_with_all = ["args", "answers", "options", "format"])]
    pub batch: Option<PathBuf>,
    /// Calls of a batch run at once (1 to 256; default: the number of cores).
    #[arg(long, value_name = "N", conflicts_with = "tool", value_parser = clap::value_parser!(u16).range(1..=MAX_CONCURRENT_CALLS as i64))]
    pub jobs: Option<u16>,
    /// Approve the call without asking (for tools with `requires_confirmation`).
    #[arg(long)]
    pub yes: bool,
    /// Add the call (every call of a batch) to this trace (a UUID); default: a new trace.
    #[arg(long, value_name = "ID")]
    pub trace_id: Option<String>,
    /// Output format: the result JSON (human), or a JSON document with ids
    /// (json); a batch always prints JSON Lines.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Override `security.confirm_external_actions` for this call (the
    /// system `[policy]` can still require confirmation).
    #[arg(long, value_name = "BOOL")]
    pub confirm_external_actions: Option<bool>,
    /// Answer a question the tool may ask (repeatable): the value is read as
    /// the question's type wants (text, number, true/false, JSON).
    #[arg(long = "answer", value_name = "ID=VALUE")]
    pub answers: Vec<String>,
    /// Set one of the tool's options for this call (repeatable; JSON values allowed).
    #[arg(long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
    /// Add a tag to every frame of the call (repeatable), e.g. `team=mail`.
    #[arg(long = "tag", value_name = "KEY=VALUE")]
    pub tags: Vec<String>,
    #[command(flatten)]
    pub replay: ReplayFlags,
}

/// `--answer ID=VALUE` flags, by question id (the text as given: the
/// runtime reads it as the question's type wants).
fn read_answers(flags: &[String]) -> Result<Map<String, Value>, CliError> {
    let mut answers = Map::new();
    for flag in flags {
        let (id, value) = flag.split_once('=').filter(|(id, _)| !id.is_empty()).ok_or_else(|| {
            CliError::usage(format!("--answer `{}` is not ID=VALUE", terminal_safe(flag)))
                .with_help("name the question and its answer, e.g. --answer tone=formal")
        })?;
        if answers.insert(id.to_string(), Value::String(value.to_string())).is_some() {
            return Err(CliError::usage(format!("--answer {id} is given twice")).with_help("give each answer once"));
        }
    }
    Ok(answers)
}

/// `--option KEY=VALUE` flags, by option name.
fn read_options(flags: &[String]) -> Result<Map<String, Value>, CliError> {
    let mut options = Map::new();
    for flag in flags {
        let (key, value) = crate::runtime::options::parse_flag(flag).map_err(|why| {
            CliError::usage(format!("--option {}", terminal_safe(&why)))
                .with_help("set an option as KEY=VALUE, e.g. --option max_results=5")
        })?;
        options.insert(key, value);
    }
    Ok(options)
}

/// The `--args` value: JSON text, `@FILE` or `@-`.
fn read_arguments(spec: Option<&str>) -> Result<Value, CliError> {
    let (bytes, source) = match spec {
        None => return Ok(json!({})),
        Some(spec) if spec.starts_with('@') => {
            let path = Path::new(&spec[1..]);
            let source = if path == Path::new("-") { "standard input" } else { &spec[1..] };
            (read_input(path, MAX_ARGS_BYTES, "--args", &format!("the arguments from {source}"))?, source)
        }
        Some(text) => (text.as_bytes().to_vec(), "--args"),
    };
    serde_json::from_slice(&bytes).map_err(|e| {
        CliError::usage(format!("the arguments in {source} are not valid JSON: {e}"))
            .with_help("pass a JSON object, e.g. --args '{\"to\": \"a@b.c\"}', or @FILE to read it from a file")
    })
}

/// The bytes of `path` (standard input when `-`), at most `max`, read
/// through the bounded reader (a file's reported size is not trusted:
/// /dev/zero reports 0). `flag` names the flag in the error of an input too
/// large; a failed read says it could not read `what`.
pub(super) fn read_input(path: &Path, max: u64, flag: &str, what: &str) -> Result<Vec<u8>, CliError> {
    let read = if path == Path::new("-") {
        read_stream_limited(std::io::stdin().lock(), max, "standard input")
    } else {
        read_limited(path, max)
    };
    read.map_err(|e| match e {
        ReadError::Io(e) => CliError::usage(format!("cannot read {what}: {e}")),
        e => {
            let help = e.help().unwrap_or_default();
            CliError::usage(format!("{flag}: {e}")).with_help(help)
        }
    })
}

/// The `--trace-id` value, checked to be a UUID.
pub(super) fn parse_trace_id(text: Option<&str>) -> Result<Option<Uuid>, CliError> {
    match text {
        None => Ok(None),
        Some(text) => Uuid::parse_str(text).map(Some).map_err(|_| {
            CliError::usage(format!("--trace-id `{text}` is not a UUID")).with_help(
                "pass the trace id printed by an earlier call (--format json), or leave it out for a new trace",
            )
        }),
    }
}

/// Runs `rlp tools call`: one call, or a batch of them (`--batch`).
pub(crate) fn run(args: &CallArgs, ctx: &Context) -> CliResult {
    if let Some(file) = &args.batch {
        return super::batch::run(args, file, ctx);
    }
    let Some(tool) = &args.tool else {
        return Err(CliError::usage("name the tool to call")
            .with_help("pass its id after the bundle, or --batch FILE.jsonl for many calls"));
    };
    let arguments = read_arguments(args.args.as_deref())?;
    let mut request = CallRequest::new(tool.clone(), arguments);
    request.trace_id = parse_trace_id(args.trace_id.as_deref())?;
    request.answers = read_answers(&args.answers)?;
    request.options = read_options(&args.options)?;
    request.tags = args.tags.clone();
    let recorded = args.replay.load(ctx, false)?;
    let (runtime, _) = load_runtime(runtime_flags(args), ctx)?;
    let runtime = match &recorded {
        Some(recorded) => {
            let trace_id = *request.trace_id.get_or_insert_with(Uuid::now_v7);
            answering_from(runtime, recorded, trace_id, ctx)?
        }
        None => runtime,
    };
    let mut out = Printer::stdout();
    match runtime.call(&request) {
        Ok(outcome) => {
            let document = match args.format {
                Format::Human => {
                    // The hooks' notes go beside the result, never into it.
                    for note in &outcome.annotations {
                        diagnostic(&format!("note (hook `{}`): {}", note.hook, terminal_safe(&note.text)));
                    }
                    outcome.result
                }
                Format::Json => call_document(tool, Ok(&outcome)),
            };
            out.json(&document)?;
            out.finish(Exit::Success)
        }
        Err(e) => {
            if args.format == Format::Json {
                let _ = out.json(&call_document(tool, Err(&e)));
            }
            if let Some(outcome) = &e.unrecorded {
                print_unrecorded(outcome);
            }
            out.fail(e.into())
        }
    }
}

/// `runtime` answering from the recording of `--replay`, its calls going
/// into trace `trace_id`: the recordings that earlier calls of that trace
/// used count as used (a replay may take several `rlp tools call`
/// processes), and a new trace starts with the link to the recording.
pub(super) fn answering_from(
    runtime: Runtime,
    recorded: &Arc<RecordedTrace>,
    trace_id: Uuid,
    ctx: &Context,
) -> Result<Runtime, CliError> {
    if !replaying::resume(ctx, trace_id, recorded)? {
        replaying::link(&runtime, trace_id, recorded)?;
    }
    Ok(runtime.answering_from(recorded.clone()))
}

/// The flags of the runtime `rlp tools call` loads, one call or a batch.
pub(super) fn runtime_flags(args: &CallArgs) -> RuntimeFlags<'_> {
    RuntimeFlags {
        bundle: &args.bundle,
        yes: args.yes,
        confirm_external_actions: args.confirm_external_actions,
        tools: None,
        ask_questions: true,
        serving: false,
    }
}

/// The `--format json` document of one call of `tool`: its ids, attempts,
/// duration, usage and result (and the content blocks an MCP server sent
/// beside a structured result); or, when it failed, its ids (`null` until
/// assigned), its error with the exit code it maps to, and the result that
/// could not be recorded (if any).
pub(super) fn call_document(tool: &str, result: Result<&CallOutcome, &CallError>) -> Value {
    match result {
        Ok(outcome) => {
            let mut document = json!({
                "tool": outcome.tool,
                "invocation_id": outcome.invocation_id.to_string(),
                "trace_id": outcome.trace_id.to_string(),
                "attempts": outcome.attempts,
                "duration_ms": outcome.duration_ms,
                "usage": outcome.usage,
                "result": outcome.result,
            });
            if let Some(content) = &outcome.content {
                document["content"] = content.clone();
            }
            if !outcome.annotations.is_empty() {
                document["annotations"] = json!(outcome.annotations);
            }
            document
        }
        Err(e) => {
            let mut document = json!({
                "tool": tool,
                "invocation_id": e.invocation_id.map(|id| id.to_string()),
                "trace_id": e.trace_id.map(|id| id.to_string()),
                "error": {"exit": e.kind.class().code(), "message": e.message, "help": e.help},
            });
            if let Some(outcome) = &e.unrecorded {
                document["unrecorded_result"] = (**outcome).clone();
            }
            document
        }
    }
}

/// Shows on stderr the outcome of a call that ran but was not recorded.
pub(super) fn print_unrecorded(outcome: &Value) {
    let text = serde_json::to_string_pretty(outcome).unwrap_or_default();
    diagnostic(&format!("the tool's result, NOT recorded in the ledger:\n{}", terminal_safe(&text)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_arguments_and_trace_ids() {
        assert_eq!(read_arguments(None).unwrap(), json!({}));
        assert_eq!(read_arguments(Some("{\"a\": 1}")).unwrap(), json!({"a": 1}));
        let err = read_arguments(Some("{nope")).unwrap_err();
        assert_eq!(err.exit, Exit::Usage);
        assert!(err.message.starts_with("the arguments in --args are not valid JSON"), "{}", err.message);
        assert_eq!(read_arguments(Some("@/nonexistent/args.json")).unwrap_err().exit, Exit::Usage);
        assert_eq!(parse_trace_id(None).unwrap(), None);
        let id = Uuid::now_v7();
        assert_eq!(parse_trace_id(Some(&id.to_string())).unwrap(), Some(id));
        assert_eq!(parse_trace_id(Some("trace-1")).unwrap_err().exit, Exit::Usage);
    }
}
