//! `rlp trace export`: one trace as JSON Lines (redacted for sharing with
//! `--redact` and `--redacted`), or as OpenTelemetry spans (`--otlp`).

use std::collections::HashSet;
use std::io::{BufWriter, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use clap::Args;
use uuid::Uuid;

use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{OutputError, Printer, diagnostic, warning};
use crate::cli::trace::{resolve_trace_id, tagged};
use crate::ledger::export::{ExportError, export_redacted, export_trace};
use crate::ledger::query::{InputError, TraceInput, for_each_frame};
use crate::ledger::redact::{RedactionReport, Rule};
use crate::ledger::{LedgerStore, Location};
use crate::telemetry::{SendError, Settings, TraceSender, process_env};
use crate::text::{plural, terminal_safe};

/// Flags of `rlp trace export`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  rlp trace export last -o golden.jsonl
  rlp trace export last | head -1
  rlp trace export last --tag team=docs -o docs-calls.jsonl
  rlp trace export last --redact /args/user -o fixture.jsonl
  rlp trace export last --redact 'mail.send:/result/messages/*/from' --redact /args/to
  rlp trace export last --redacted -o fixture.jsonl   # exit 2: no redact list in config.toml
  rlp trace export last --otlp https://api.collector.example
  OTEL_EXPORTER_OTLP_ENDPOINT=https://api.collector.example rlp trace export last --otlp

With --tag, only the frames of the calls (invocations) one of whose frames carries every tag
given are exported: a partial trace, numbered and chained on its own (each frame keeps its
own hash_blake3). It can be shown, diffed, replayed and imported like a whole one.

With --redact POINTER, the value at POINTER in every call is replaced by a placeholder,
<redacted:N>, before a trace is shared (a test fixture): POINTER is a JSON Pointer into a call's
arguments (/args/…) or its result (/result/…), for one tool's calls when prefixed by its id and a
colon (mail.send:/args/to). `*` is always a wildcard: every member of an object or element of an
array (/result/messages/*/from; quote it from the shell). The same value gets the same
placeholder everywhere in the file, numbered in order of first appearance, and is also replaced
wherever else it appears in the trace (whole, or inside other strings: error messages, content
blocks, hooks, questions and answers); changed frames get a new hash_blake3, so the file reads,
imports, replays and diffs as an export does. A pointer that names nothing in the trace is
warned about. --redacted applies the redact lists of config.toml
([agents.<agent>.tools.\"<tool id>\"] redact = [\"/args/to\"]), and fails (exit 2) when there is
none; --redact implies it. Without either, the export is the trace as recorded.

With --otlp, each call of the trace is sent as an OpenTelemetry span (the one a live call
sends) over OTLP/HTTP with protobuf bodies, to ENDPOINT (a base URL: /v1/traces is added
unless it is there) or where OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT
says; headers and the timeout come from the OTEL_EXPORTER_OTLP_* variables, content only
with RLP_OTEL_CAPTURE_CONTENT=true (docs/fleet.md). Exit 1 when the collector refuses
the spans or cannot be reached.

The file format is described in docs/replay.md.")]
pub struct ExportArgs {
    /// Only the frames of calls with a frame with this tag (repeat: every tag must be there), e.g. `--tag mail --tag team=mail`.
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// The trace id (see `rlp trace list`), or `last` for the newest.
    #[arg(value_name = "TRACE_ID")]
    pub trace_id: String,
    /// Write to this file (atomically) instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Send the trace's calls as OpenTelemetry spans (OTLP/HTTP) to ENDPOINT, or to the collector the OTEL_EXPORTER_OTLP_* variables name.
    #[arg(long, value_name = "ENDPOINT", num_args = 0..=1, conflicts_with_all = ["output", "redact", "redacted"])]
    pub otlp: Option<Option<String>>,
    /// Replace the value at POINTER (/args/… or /result/…, `*` for every member or element; TOOL:POINTER for one tool) by a placeholder in every call (repeat; implies --redacted).
    #[arg(long = "redact", value_name = "POINTER")]
    pub redact: Vec<String>,
    /// Replace the fields the redact lists of config.toml name ([agents.<agent>.tools."<tool id>"] redact).
    #[arg(long)]
    pub redacted: bool,
}

/// A rule of a redacted export, and where it was given (for warnings).
struct GivenRule {
    rule: Rule,
    /// `--redact …`, or the config key.
    shown: String,
    /// Whether it was given as a flag (warned about even when no call it
    /// covers is in the trace).
    flag: bool,
}

/// The rules of a redacted export: the `--redact` flags, then the
/// config's redact lists; none without `--redact` and `--redacted`.
fn redaction_rules(args: &ExportArgs, ctx: &Context) -> Result<Vec<GivenRule>, CliError> {
    let mut rules = Vec::new();
    for text in &args.redact {
        let rule = Rule::parse(text).map_err(|e| {
            CliError::usage(format!("--redact: {}", terminal_safe(&e.message))).with_help(terminal_safe(&e.help))
        })?;
        rules.push(GivenRule { rule, shown: format!("--redact {}", terminal_safe(text)), flag: true });
    }
    if !args.redacted && args.redact.is_empty() {
        return Ok(rules);
    }
    for (agent, tools) in ctx.config()?.tool_redactions {
        for (tool, pointers) in tools {
            for pointer in pointers {
                let shown = format!("redact \"{pointer}\" of [agents.{agent}.tools.\"{tool}\"] in the config");
                let rule = Rule { agent: Some(agent.clone()), tool: Some(tool.clone()), pointer };
                rules.push(GivenRule { rule, shown, flag: false });
            }
        }
    }
    if rules.is_empty() {
        // Asked for a redacted file: never write the trace as recorded instead.
        return Err(CliError::usage(
            "--redacted: no config file has a redact list ([agents.<agent>.tools.\"<tool id>\"] redact); nothing \
             was exported",
        )
        .with_help("add a redact list to config.toml, or name the fields with --redact POINTER"));
    }
    Ok(rules)
}

/// Warns of each rule that named nothing in trace `trace_id` (a config
/// list's only when a call it covers is there: a tool's list applies to
/// every trace of its agent).
fn warn_unmatched(rules: &[GivenRule], report: &RedactionReport, trace_id: Uuid) {
    for unmatched in &report.unmatched {
        let Some(given) = rules.get(unmatched.rule) else { continue };
        match (unmatched.called, &given.rule.tool) {
            (true, _) => warning(format!("{} matched nothing in trace {trace_id}", given.shown)),
            (false, Some(tool)) if given.flag => {
                warning(format!("{} matched nothing in trace {trace_id}: it has no call of {tool}", given.shown))
            }
            (false, None) if given.flag => {
                warning(format!("{} matched nothing in trace {trace_id}: it has no call", given.shown))
            }
            (false, _) => {}
        }
    }
}

/// What a redacted export did, in words.
fn redaction_summary(report: &RedactionReport) -> String {
    match report.values {
        0 => "nothing redacted".to_string(),
        n => format!("{} redacted in {}", plural(n, "value"), plural(report.frames_changed, "frame")),
    }
}

/// Exports the trace to `out`, redacted when there are `rules`; returns the
/// frames written and, redacted, what was done.
fn export_to(
    ledger: &dyn LedgerStore,
    trace_id: &Uuid,
    only: Option<&HashSet<Uuid>>,
    rules: &[GivenRule],
    out: &mut dyn Write,
) -> Result<(u64, Option<RedactionReport>), ExportError> {
    if rules.is_empty() {
        return export_trace(ledger, trace_id, only, out).map(|frames| (frames, None));
    }
    let plain: Vec<Rule> = rules.iter().map(|given| given.rule.clone()).collect();
    let export = export_redacted(ledger, trace_id, only, &plain, out)?;
    warn_unmatched(rules, &export.redaction, *trace_id);
    Ok((export.frames, Some(export.redaction)))
}

fn open_ledger(ledger: Location) -> Result<Box<dyn LedgerStore>, CliError> {
    ledger.open_if_exists()?.ok_or_else(|| InputError::NoLedger(ledger).into())
}

/// An export that stopped; `write` maps a failure to write the output.
fn export_failure(e: ExportError, write: impl FnOnce(std::io::Error) -> CliResult) -> CliResult {
    match e {
        ExportError::Write(e) => write(e),
        e => Err(e.into()),
    }
}

/// The folder `-o FILE` is written in (the temporary file goes there too),
/// once FILE is known not to be a folder and its folder to exist (exit 2).
fn output_dir(path: &Path) -> Result<&Path, CliError> {
    if path.is_dir() {
        return Err(CliError::usage(format!("cannot write {}: it is a folder", path.display()))
            .with_help("pass the file to write with -o, e.g. -o golden.jsonl"));
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(CliError::usage(format!(
            "cannot write {}: the folder {} does not exist",
            path.display(),
            dir.display()
        ))
        .with_help("create the folder first, or pass another path with -o"));
    }
    Ok(dir)
}

pub(crate) fn run(args: &ExportArgs, ctx: &Context) -> CliResult {
    if let Some(endpoint) = &args.otlp {
        return export_spans(args, endpoint.as_deref(), ctx);
    }
    let rules = redaction_rules(args, ctx)?;
    let location = ctx.ledger()?;
    let trace_id = resolve_trace_id(&args.trace_id, &location)?;
    let dir = args.output.as_deref().map(output_dir).transpose()?;
    let only = tagged(&TraceInput::Ledger { ledger: location.clone(), trace_id }, &args.tags)?;
    let ledger = open_ledger(location)?;
    match (&args.output, dir) {
        (Some(path), Some(dir)) => {
            let cannot = |e: std::io::Error| {
                CliError::usage(format!("cannot write {}: {e}", path.display()))
                    .with_help("check that the folder is writable and has room; nothing was exported")
            };
            let (temp, _tracked) = crate::interrupt::temp_file_in(dir, ".rlp-export-").map_err(cannot)?;
            let mut out = BufWriter::with_capacity(1 << 20, temp);
            let (frames, redaction) = match export_to(&*ledger, &trace_id, only.as_ref(), &rules, &mut out) {
                Ok(done) => done,
                Err(e) => return export_failure(e, |e| Err(cannot(e))),
            };
            let temp = out.into_inner().map_err(|e| cannot(e.into_error()))?;
            temp.as_file().sync_all().map_err(cannot)?;
            temp.persist(path).map_err(|e| cannot(e.error))?;
            crate::fsutil::sync_dir(dir).map_err(cannot)?;
            let redacted = redaction.map(|r| format!(" ({})", redaction_summary(&r))).unwrap_or_default();
            diagnostic(&format!(
                "Exported {} of trace {trace_id} to {}{redacted}.",
                plural(frames, "frame"),
                path.display()
            ));
            Ok(Exit::Success)
        }
        _ => {
            let mut out = Printer::stdout();
            match export_to(&*ledger, &trace_id, only.as_ref(), &rules, &mut out) {
                Ok(_) => out.finish(Exit::Success),
                Err(e) => export_failure(e, |e| Err(OutputError::from(e).into())),
            }
        }
    }
}

/// `rlp trace export --otlp [ENDPOINT]`: the trace's calls as spans, sent
/// to a collector; one that refuses them or cannot be reached is exit 1.
fn export_spans(args: &ExportArgs, endpoint: Option<&str>, ctx: &Context) -> CliResult {
    let ledger = ctx.ledger()?;
    let trace_id = resolve_trace_id(&args.trace_id, &ledger)?;
    let reading = Settings::export(process_env, endpoint).map_err(|why| {
        CliError::usage(why).with_help(
            "rlp sends OTLP over HTTP with protobuf bodies: pass the collector's base URL (e.g. --otlp \
             http://localhost:4318) or set OTEL_EXPORTER_OTLP_ENDPOINT (docs/fleet.md)",
        )
    })?;
    for line in &reading.warnings {
        warning(line);
    }
    let settings = reading.settings;
    let input = TraceInput::Ledger { ledger, trace_id };
    let only = tagged(&input, &args.tags)?;
    let mut sender = TraceSender::new(&settings).map_err(CliError::problem)?;
    let mut failure = None;
    for_each_frame(&input, |frame| {
        let kept = match &only {
            Some(only) => frame.body.invocation_id().is_some_and(|id| only.contains(&id)),
            None => true,
        };
        if !kept {
            return ControlFlow::Continue(());
        }
        match sender.add(frame) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                failure = Some(e);
                ControlFlow::Break(())
            }
        }
    })?;
    let sent = match failure {
        Some(e) => Err(e),
        None => sender.finish(),
    }
    .map_err(|e| unsent(e, trace_id))?;
    diagnostic(&format!("Sent {} of trace {trace_id} to {}.", plural(sent, "span"), settings.endpoint()));
    Ok(Exit::Success)
}

/// The error of an export the collector refused or did not answer (exit 1).
fn unsent(e: SendError, trace_id: Uuid) -> CliError {
    let before = match e.sent {
        0 => "no span was sent".to_string(),
        n => format!("{} went before", plural(n, "span")),
    };
    CliError::problem(format!("cannot send the spans of trace {trace_id} to {}: {}; {before}", e.endpoint, e.why))
        .with_help(
            "check that an OpenTelemetry collector takes OTLP over HTTP (protobuf) there, with the headers it needs \
             (OTEL_EXPORTER_OTLP_HEADERS); then export again",
        )
}
