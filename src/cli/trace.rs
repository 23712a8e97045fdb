//! `rlp trace`: list, show, export, import, verify and diff the traces in the
//! knowledge base (`$RUNLOOP_HOME/pog/events.sqlite`).

use std::collections::HashSet;
use std::io::BufWriter;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, OutputError, Printer, diagnostic, warning, write_each};
use crate::event::frame::TraceFrame;
use crate::event::{Outcome, Usage};
use crate::ledger::export::{ExportError, export_trace};
use crate::ledger::import::{ImportError, import_file};
use crate::ledger::query::{
    InputError, TraceInput, TraceSummary, for_each_frame, list_traces, newest_trace, tagged_invocations,
    trace_carries_tags,
};
use crate::ledger::timeline::{Detail, Timeline, TimelineEntry, TimelineSummary};
use crate::ledger::{LedgerStore, Location, VerifyReport};
use crate::replay::trace_diff::trace_diff;
use crate::telemetry::{SendError, Settings, TraceSender, process_env};
use crate::text::{ellipsize, format_ts, plural, terminal_safe, terminal_safe_line};

/// Characters of a payload shown on one timeline line.
const SHOWN_VALUE: usize = 80;

/// `rlp trace …`
#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// List the traces in the ledger: id, agent, first and last time, calls, errors.
    List(ListArgs),
    /// Show one trace as a timeline: each call, its result, duration, status and tags.
    Show(ShowArgs),
    /// Export one trace as JSON Lines (one frame per line).
    Export(ExportArgs),
    /// Import a JSON Lines trace into the ledger (all or nothing).
    Import(ImportArgs),
    /// Recompute every row hash and the hash chain; name the first row edited, removed or reordered.
    Verify(VerifyArgs),
    /// Compare two runs of an agent call by call: the regression gate (exit 1 on any divergence).
    Diff(DiffArgs),
}

/// Flags of `rlp trace list`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  rlp trace list
  rlp trace list --tag team=docs
  rlp trace list --format json

--tag matches the `tags` of a frame's payload (from `observability.tags` in tools.json and
`rlp tools call --tag`); a trace is listed when one of its frames carries every tag given.")]
pub struct ListArgs {
    /// Only traces with a frame with this tag (repeat: every tag must be there), e.g. `--tag mail --tag team=mail`.
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Flags of `rlp trace show`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  rlp trace show last                   # the newest trace
  rlp trace show last --tag team=docs --format json

With --tag, only the frames of the calls (invocations) one of whose frames carries every tag
given are shown, at their positions in the whole trace; the summary counts those frames.")]
pub struct ShowArgs {
    /// Only the frames of calls with a frame with this tag (repeat: every tag must be there), e.g. `--tag mail --tag team=mail`.
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// The trace id (see `rlp trace list`), `last` for the newest, or an exported JSON Lines file.
    #[arg(value_name = "TRACE_ID|FILE")]
    pub trace: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Flags of `rlp trace export`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  rlp trace export last -o golden.jsonl
  rlp trace export last | head -1
  rlp trace export last --tag team=docs -o docs-calls.jsonl
  rlp trace export last --otlp https://api.collector.example
  OTEL_EXPORTER_OTLP_ENDPOINT=https://api.collector.example rlp trace export last --otlp

With --tag, only the frames of the calls (invocations) one of whose frames carries every tag
given are exported: a partial trace, numbered and chained on its own (each frame keeps its
own hash_blake3). It can be shown, diffed, replayed and imported like a whole one.

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
    #[arg(long, value_name = "ENDPOINT", num_args = 0..=1, conflicts_with = "output")]
    pub otlp: Option<Option<String>>,
}

/// Flags of `rlp trace import`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  rlp trace import golden.jsonl --home replay-home

Every line is checked before anything is kept; a file with any problem is refused whole (exit 2).
A trace the ledger already holds is refused (exit 1).")]
pub struct ImportArgs {
    /// The JSON Lines file (as written by `rlp trace export`).
    pub file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Flags of `rlp trace verify`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  rlp trace verify
  rlp trace verify --format json --home replay-home

Exit codes: 0 every row checks out, 1 a row was edited, removed or reordered,
2 no ledger, or a file SQLite cannot read (not a ledger, or damaged).")]
pub struct VerifyArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Flags of `rlp trace diff`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  rlp trace diff golden.jsonl last
  rlp trace diff golden.jsonl docs-calls.jsonl --format json

Each side is a JSON Lines file from `rlp trace export`, or a trace id of this home's ledger.
Calls are aligned by tool id, then compared on arguments and final outcome (ids, times,
durations and hashes are ignored). Divergence kinds: extra_call, unused_recording,
order_divergence, args_mismatch, result_changed, outcome_changed. See docs/replay.md.

Exit codes: 0 no divergence, 1 divergences found, 2 unreadable or inconsistent trace.")]
pub struct DiffArgs {
    /// The reference run: a trace id (or `last`), or a JSON Lines file from `rlp trace export`.
    #[arg(value_name = "BASELINE")]
    pub baseline: String,
    /// The run to check against it: a trace id (or `last`), or a JSON Lines file.
    #[arg(value_name = "CANDIDATE")]
    pub candidate: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Runs a `trace` subcommand.
pub(crate) fn run(command: TraceCommand, ctx: &Context) -> CliResult {
    match command {
        TraceCommand::List(args) => list(&args, ctx),
        TraceCommand::Show(args) => show(&args, ctx),
        TraceCommand::Export(args) => export(&args, ctx),
        TraceCommand::Import(args) => import(&args, ctx),
        TraceCommand::Verify(args) => verify(&args, ctx),
        TraceCommand::Diff(args) => diff(&args, ctx),
    }
}

/// The word that stands for the newest trace of the home's ledger.
pub(crate) const LAST: &str = "last";

/// A trace id argument: a UUID, or `last` for the newest trace of the
/// home's ledger (the one `rlp trace list` lists last).
pub(crate) fn resolve_trace_id(text: &str, ledger: &Location) -> Result<Uuid, CliError> {
    if text != LAST {
        return Uuid::parse_str(text).map_err(|_| {
            CliError::usage(format!("`{text}` is not a trace id (a UUID, or `{LAST}`)"))
                .with_help("`rlp trace list` shows the trace ids")
        });
    }
    newest_trace(ledger)?.and_then(|id| Uuid::parse_str(&id).ok()).ok_or_else(|| {
        CliError::usage(format!("`{LAST}` names the newest trace, and the ledger holds none yet"))
            .with_help("a call makes one: `rlp tools call <bundle> <tool-id> --args …`")
    })
}

/// A trace id (or `last`), or a JSON Lines file: an existing file wins;
/// then a UUID or `last` names a trace of the home's ledger.
pub(crate) fn parse_input(text: &str, ctx: &Context) -> Result<TraceInput, CliError> {
    let path = Path::new(text);
    if path.is_file() {
        return Ok(TraceInput::File(path.to_path_buf()));
    }
    if text != LAST && Uuid::parse_str(text).is_err() {
        return Err(CliError::usage(format!("`{text}` is neither a file nor a trace id")).with_help(
            "pass a trace id from `rlp trace list` (or `last`), or the path of a file written by `rlp trace export`",
        ));
    }
    let ledger = ctx.ledger()?;
    let trace_id = resolve_trace_id(text, &ledger)?;
    Ok(TraceInput::Ledger { ledger, trace_id })
}

// ------------------------------------------------------------------ list

fn list(args: &ListArgs, ctx: &Context) -> CliResult {
    let ledger = ctx.ledger()?;
    let mut out = Printer::stdout();
    let mut first = true;
    let mut write_row = |out: &mut Printer, summary: TraceSummary| -> Result<(), OutputError> {
        match args.format {
            Format::Human => {
                if first {
                    out.line(format_args!(
                        "{:<36}  {:<16}  {:<24}  {:<24}  {:>7}  {:>6}  {:>6}  {:>7}",
                        "TRACE", "AGENT", "FIRST", "LAST", "FRAMES", "CALLS", "ERRORS", "REFUSED"
                    ))?;
                }
                let mut line = format!(
                    "{:<36}  {:<16}  {:<24}  {:<24}  {:>7}  {:>6}  {:>6}  {:>7}",
                    summary.trace_id,
                    summary.agents.join(","),
                    format_ts(summary.first_ts_ms),
                    format_ts(summary.last_ts_ms),
                    summary.frames,
                    summary.calls,
                    summary.errors,
                    summary.refused
                );
                if let Some(of) = &summary.replay_of {
                    line.push_str(&format!("  replay of {of}"));
                }
                out.line(line.trim_end())?;
            }
            Format::Json => {
                let mut value = serde_json::to_value(&summary).unwrap_or(Value::Null);
                value["first"] = json!(format_ts(summary.first_ts_ms));
                value["last"] = json!(format_ts(summary.last_ts_ms));
                out.text(&format!("{}\n  {}", if first { "[" } else { "," }, value))?;
            }
        }
        first = false;
        Ok(())
    };
    let visit = |each: &mut dyn FnMut(TraceSummary) -> ControlFlow<()>| -> Result<u64, CliError> {
        if args.tags.is_empty() {
            return Ok(list_traces(&ledger, each)?);
        }
        let mut all = Vec::new();
        list_traces(&ledger, |summary| {
            all.push(summary);
            ControlFlow::Continue(())
        })?;
        let mut listed = 0;
        for summary in all {
            let Ok(trace_id) = Uuid::parse_str(&summary.trace_id) else { continue };
            if trace_carries_tags(&TraceInput::Ledger { ledger: ledger.clone(), trace_id }, &args.tags)? {
                listed += 1;
                if each(summary).is_break() {
                    break;
                }
            }
        }
        Ok(listed)
    };
    let count = write_each(visit, |trace| write_row(&mut out, trace))?;
    match args.format {
        Format::Json => out.line(if count == 0 { "[]" } else { "\n]" })?,
        Format::Human if count == 0 && !args.tags.is_empty() => {
            diagnostic(&format!("No trace in {ledger} has a frame tagged {}.", args.tags.join(" and ")))
        }
        Format::Human if count == 0 => diagnostic(&format!("No traces in {ledger}.")),
        Format::Human => {}
    }
    out.finish(Exit::Success)
}

// ------------------------------------------------------------------ show

/// A value as compact JSON, cut at [`SHOWN_VALUE`] characters.
fn compact(value: &Value) -> String {
    ellipsize(&serde_json::to_string(value).unwrap_or_default(), SHOWN_VALUE)
}

/// One timeline line; text from the trace (tool output, names) is made
/// terminal-safe.
fn human_entry(entry: &TimelineEntry, start: i64) -> String {
    let offset = entry.ts_ms.saturating_sub(start) as f64 / 1000.0;
    let tool = entry.tool.as_deref().unwrap_or("-");
    let what = match &entry.detail {
        Detail::Call { args, tags } => {
            let mut text = compact(args);
            if !tags.is_empty() {
                text.push_str(&format!("  tags: {}", tags.join(", ")));
            }
            if let Some(id) = entry.invocation_id {
                text.push_str(&format!("  (invocation {id})"));
            }
            text
        }
        Detail::Result { call_position, outcome, attempt, duration_ms, will_retry, usage } => {
            let took = duration_ms.map(|d| format!(" in {d} ms")).unwrap_or_default();
            let status = match (will_retry, outcome) {
                (true, Outcome::Error(e)) => {
                    let wait = e.error.retry_after_ms.map(|ms| format!(" after {ms} ms")).unwrap_or_default();
                    format!("failed{took}, will retry{wait}")
                }
                _ => format!("{}{took}", entry.status()),
            };
            let value = match outcome {
                Outcome::Result(v) => compact(v),
                Outcome::Error(e) => ellipsize(&e.error.message, SHOWN_VALUE),
            };
            let call = match call_position {
                Some(p) => format!("call #{p}"),
                None => "no call before it".to_string(),
            };
            let used = usage.map(|u| format!("  usage: {}", shown_usage(&u))).unwrap_or_default();
            format!("{status} → {value}  ({call}, attempt {attempt}){used}")
        }
        Detail::Inquiry { questions } => {
            let asked: Vec<String> = questions
                .iter()
                .map(|q| {
                    let id = q.get("id").and_then(Value::as_str).unwrap_or("?");
                    match q.get("text").and_then(Value::as_str) {
                        Some(text) => format!("`{id}` ({})", ellipsize(text, SHOWN_VALUE / 2)),
                        None => format!("`{id}`"),
                    }
                })
                .collect();
            format!("asks {}", asked.join(", "))
        }
        Detail::Answer { answers } => {
            let given: Vec<String> =
                answers.iter().map(|a| format!("`{}` = {} ({})", a.id, compact(&a.value), a.source)).collect();
            given.join(", ")
        }
        Detail::Audit { capability, decision, reason } => format!("{decision} {capability}: {reason}"),
        Detail::Confirm { approved, by, how } => {
            format!("{} by {by} ({how})", if *approved { "approved" } else { "denied" })
        }
        Detail::ReplayLink { replay_of, mode } => format!("{mode} replay of trace {replay_of}"),
        Detail::Discover(discovery) => shown_discovery(discovery),
    };
    let line =
        format!("  {:<6} {:>+9.3}s  {:<12} {:<24} {what}", format!("#{}", entry.position), offset, entry.kind, tool);
    terminal_safe_line(&line).into_owned()
}

/// A discovery in words: `search "create an issue" (category github,
/// limit 5) → github.create_issue, github.update_issue`.
fn shown_discovery(discovery: &crate::event::ToolDiscoverPayload) -> String {
    let mut asked = discovery.action.clone();
    if let Some(query) = &discovery.query {
        asked.push_str(&format!(" {}", compact(&Value::String(query.clone()))));
    }
    let filters: Vec<String> =
        [discovery.category.as_ref().map(|c| format!("category {c}")), discovery.limit.map(|l| format!("limit {l}"))]
            .into_iter()
            .flatten()
            .collect();
    if !filters.is_empty() {
        asked.push_str(&format!(" ({})", filters.join(", ")));
    }
    let shown = if discovery.ids.is_empty() { "nothing".to_string() } else { discovery.ids.join(", ") };
    let unknown = match discovery.unknown.as_slice() {
        [] => String::new(),
        ids => format!("; unknown: {}", ids.join(", ")),
    };
    format!("{asked} → {}{unknown}", ellipsize(&shown, SHOWN_VALUE * 2))
}

/// Usage in words: `600 tokens, $0.0031`.
fn shown_usage(usage: &Usage) -> String {
    let mut parts = Vec::new();
    if let Some(tokens) = usage.tokens {
        parts.push(plural(tokens, "token"));
    }
    if let Some(usd) = usage.usd {
        parts.push(format!("${usd}"));
    }
    parts.join(", ")
}

fn human_footer(summary: &TimelineSummary) -> String {
    let span = match (summary.first_ts_ms, summary.last_ts_ms) {
        (Some(a), Some(b)) => format!(", {:.3} s", b.saturating_sub(a) as f64 / 1000.0),
        _ => String::new(),
    };
    let mut extra = String::new();
    if summary.questions > 0 {
        extra.push_str(&format!(", {}", plural(summary.questions, "round")));
        extra.push_str(" of questions");
    }
    if !summary.usage.is_empty() {
        extra.push_str(&format!(", usage {}", shown_usage(&summary.usage)));
    }
    format!(
        "{}: {} ({} ok, {} error, {} without result), {} retr{}, {}{extra}{span}",
        plural(summary.frames, "frame"),
        plural(summary.calls, "call"),
        summary.ok,
        summary.errors,
        summary.without_result,
        summary.retries,
        if summary.retries == 1 { "y" } else { "ies" },
        plural(summary.denials, "denial"),
    )
}

/// With `--tag`: the invocations of the trace whose frames carry every tag
/// (at least one); none is an error (exit 1).
fn tagged(input: &TraceInput, tags: &[String]) -> Result<Option<HashSet<Uuid>>, CliError> {
    if tags.is_empty() {
        return Ok(None);
    }
    let only = tagged_invocations(input, tags)?;
    if only.is_empty() {
        return Err(CliError::problem(format!("no call of {input} has a frame tagged {}", tags.join(" and ")))
            .with_help("`rlp trace show` without --tag lists every frame with its tags"));
    }
    Ok(Some(only))
}

fn show(args: &ShowArgs, ctx: &Context) -> CliResult {
    let input = parse_input(&args.trace, ctx)?;
    let only = tagged(&input, &args.tags)?;
    let kept = |frame: &TraceFrame| match &only {
        Some(only) => frame.body.invocation_id().is_some_and(|id| only.contains(&id)),
        None => true,
    };
    let mut out = Printer::stdout();
    let mut timeline = Timeline::new();
    let mut start = None;
    let mut write_entry = |out: &mut Printer, frame: TraceFrame| -> Result<(), OutputError> {
        let first = start.is_none();
        let start_ts = *start.get_or_insert(frame.ts_ms);
        if first {
            let (trace, agent) = (frame.provenance.trace_id, frame.provenance.agent.clone());
            match args.format {
                Format::Human => out.line(format_args!(
                    "Trace {trace} (agent `{}`), from {}",
                    terminal_safe(&agent),
                    format_ts(start_ts)
                ))?,
                Format::Json => out.text(&format!(
                    "{{\n  \"trace_id\": {},\n  \"agent\": {},\n  \"frames\": [",
                    json!(trace),
                    json!(agent)
                ))?,
            }
        }
        let entry = timeline.entry(frame);
        match args.format {
            Format::Human => out.line(human_entry(&entry, start_ts)),
            Format::Json => out.text(&format!("{}\n    {}", if first { "" } else { "," }, entry.to_json())),
        }
    };
    let visit = |each: &mut dyn FnMut(TraceFrame) -> ControlFlow<()>| {
        for_each_frame(&input, |frame| if kept(&frame) { each(frame) } else { ControlFlow::Continue(()) })
    };
    write_each(visit, |frame| write_entry(&mut out, frame))?;
    let summary = timeline.finish();
    match args.format {
        Format::Human => out.line(human_footer(&summary))?,
        Format::Json => out.line(format_args!(
            "\n  ],\n  \"summary\": {}\n}}",
            serde_json::to_value(&summary).unwrap_or(Value::Null)
        ))?,
    }
    out.finish(Exit::Success)
}

// ---------------------------------------------------------------- export

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

fn export(args: &ExportArgs, ctx: &Context) -> CliResult {
    if let Some(endpoint) = &args.otlp {
        return export_spans(args, endpoint.as_deref(), ctx);
    }
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
            let frames = match export_trace(&*ledger, &trace_id, only.as_ref(), &mut out) {
                Ok(frames) => frames,
                Err(e) => return export_failure(e, |e| Err(cannot(e))),
            };
            let temp = out.into_inner().map_err(|e| cannot(e.into_error()))?;
            temp.as_file().sync_all().map_err(cannot)?;
            temp.persist(path).map_err(|e| cannot(e.error))?;
            crate::fsutil::sync_dir(dir).map_err(cannot)?;
            diagnostic(&format!("Exported {} of trace {trace_id} to {}.", plural(frames, "frame"), path.display()));
            Ok(Exit::Success)
        }
        _ => {
            let mut out = Printer::stdout();
            match export_trace(&*ledger, &trace_id, only.as_ref(), &mut out) {
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

// ---------------------------------------------------------------- import

fn import(args: &ImportArgs, ctx: &Context) -> CliResult {
    let ledger = ctx.ledger()?;
    let file = args.file.display();
    match import_file(&ledger, &args.file) {
        Ok(summary) => {
            let text = match args.format {
                Format::Human => format!(
                    "Imported {} ({}) of trace {} into {} (rows {} to {}).",
                    plural(summary.frames, "frame"),
                    plural(summary.calls, "call"),
                    summary.trace_id,
                    ledger,
                    summary.first_row,
                    summary.last_row
                ),
                Format::Json => serde_json::to_string_pretty(&json!({
                    "trace_id": summary.trace_id,
                    "frames": summary.frames,
                    "calls": summary.calls,
                    "ledger": ledger.to_string(),
                    "first_row": summary.first_row,
                    "last_row": summary.last_row,
                }))
                .unwrap_or_default(),
            };
            let mut out = Printer::stdout();
            out.line(text)?;
            out.finish(Exit::Success)
        }
        Err(ImportError::Malformed { problems, more }) => {
            let total = problems.len() as u64 + more;
            let mut message = format!("{file}: {}; nothing was imported:", plural(total, "problem"));
            for problem in &problems {
                message.push_str(&format!("\n  {problem}"));
            }
            if more > 0 {
                message.push_str(&format!("\n  … and {more} more"));
            }
            Err(CliError::usage(message).with_help("fix the file or export the trace again; the ledger is unchanged"))
        }
        Err(ImportError::AlreadyPresent(trace)) => {
            Err(CliError::problem(format!("the ledger {ledger} already holds trace {trace}; nothing was imported"))
                .with_help("import into another runtime home (--home), or replay the trace that is there"))
        }
        Err(ImportError::Empty) => Err(CliError::usage(format!("{file} holds no frame; nothing was imported"))
            .with_help("pass a file written by `rlp trace export`")),
        Err(e @ ImportError::Io { .. }) => {
            Err(CliError::usage(e.to_string()).with_help("pass a file written by `rlp trace export`"))
        }
        Err(ImportError::Ledger(e)) if e.is_not_a_database() => Err(e.into()),
        Err(ImportError::Ledger(e)) => Err(CliError::problem(format!("cannot write the ledger: {e}"))
            .with_help("check that the runtime home (--home or $RUNLOOP_HOME) is writable")),
    }
}

// ---------------------------------------------------------------- verify

fn human_verify(report: &VerifyReport) -> String {
    let rows = plural(report.rows, "row");
    let unchained = if report.unchained > 0 {
        format!(" ({} without a chain value, not checked)", plural(report.unchained, "upstream row"))
    } else {
        String::new()
    };
    let head = report.head.as_deref().unwrap_or("none");
    let Some(first) = report.first_problem() else {
        return format!(
            "Ledger {}: {rows}{unchained}, every hash and the chain check out.\nHead: {head}\n",
            report.ledger
        );
    };
    let total = report.problems.len() as u64 + report.more_problems;
    let mut text = format!(
        "Ledger {}: {rows}{unchained}, {}; the first is row {}.\n",
        report.ledger,
        plural(total, "problem"),
        first.row
    );
    for problem in &report.problems {
        let trace = problem.trace_id.as_deref().map(|t| format!(", trace {t}")).unwrap_or_default();
        let kind =
            serde_json::to_value(problem.problem).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        text.push_str(&format!("  row {} ({}{trace}): {kind}: {}\n", problem.row, problem.kind, problem.message));
    }
    if report.more_problems > 0 {
        text.push_str(&format!("  … and {} more\n", report.more_problems));
    }
    text.push_str(&format!("Head: {head}\n"));
    text
}

/// Verifies `ledger`; a missing or unreadable ledger is an error (exit 2).
fn verify_report(ledger: &Location) -> Result<VerifyReport, CliError> {
    let store = ledger.open_if_exists()?.ok_or_else(|| InputError::NoLedger(ledger.clone()))?;
    store.verify_chain().map_err(CliError::from)
}

fn verify(args: &VerifyArgs, ctx: &Context) -> CliResult {
    let ledger = ctx.ledger()?;
    let report = match verify_report(&ledger) {
        Ok(report) => report,
        Err(error) if args.format == Format::Json => {
            // Still one JSON document on stdout, as documented; the error goes to stderr too.
            let doc = json!({
                "ledger": ledger.to_string(),
                "intact": false,
                "error": {"message": error.message, "help": error.help},
            });
            let mut out = Printer::stdout();
            let _ = out.json(&doc);
            return out.fail(error);
        }
        Err(error) => return Err(error),
    };
    let text = match args.format {
        Format::Human => human_verify(&report),
        Format::Json => {
            let mut value = serde_json::to_value(&report).unwrap_or(Value::Null);
            value["intact"] = json!(report.is_intact());
            format!("{}\n", serde_json::to_string_pretty(&value).unwrap_or_default())
        }
    };
    let exit = if report.is_intact() { Exit::Success } else { Exit::Problems };
    Printer::stdout().finish_with(&text, exit)
}

// ------------------------------------------------------------------ diff

fn diff(args: &DiffArgs, ctx: &Context) -> CliResult {
    let baseline = parse_input(&args.baseline, ctx)?;
    let candidate = parse_input(&args.candidate, ctx)?;
    let found = trace_diff(&baseline, &candidate)?;
    let exit = if found.is_clean() { Exit::Success } else { Exit::Problems };
    let mut out = Printer::stdout();
    // A failure is remembered, and `finish` reports it with `exit`.
    let _ = match args.format {
        Format::Human => found.write_human(&mut out),
        Format::Json => found.write_json(&mut out),
    };
    out.finish(exit)
}
