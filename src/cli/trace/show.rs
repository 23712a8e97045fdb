//! `rlp trace show`: one trace as a timeline of calls, results, durations, statuses and tags.

use std::ops::ControlFlow;

use clap::Args;
use serde_json::{Value, json};

use crate::cli::Context;
use crate::cli::exit::{CliResult, Exit};
use crate::cli::output::{Format, OutputError, Printer, write_each};
use crate::cli::trace::{parse_input, tagged};
use crate::event::frame::TraceFrame;
use crate::event::{Outcome, Usage};
use crate::ledger::query::for_each_frame;
use crate::ledger::timeline::{Detail, Timeline, TimelineEntry, TimelineSummary};
use crate::text::{ellipsize, format_ts, plural, terminal_safe, terminal_safe_line};

/// Characters of a payload shown on one timeline line.
const SHOWN_VALUE: usize = 80;

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
        Detail::Call { args, tags, replay } => {
            let mut text = compact(args);
            if !tags.is_empty() {
                text.push_str(&format!("  tags: {}", tags.join(", ")));
            }
            if let Some(mark) = replay {
                let at = mark.position.map(|p| format!(" #{p}")).unwrap_or_default();
                text.push_str(&format!("  replay: {}{at} of trace {}", mark.answered.as_str(), mark.trace_id));
            }
            if let Some(id) = entry.invocation_id {
                text.push_str(&format!("  (invocation {id})"));
            }
            text
        }
        Detail::Result { call_position, outcome, attempt, duration_ms, will_retry, usage, content } => {
            let took = duration_ms.map(|d| format!(" in {d} ms")).unwrap_or_default();
            let status = match (will_retry, outcome) {
                (true, Outcome::Error(e)) => {
                    let wait = e.error.retry_after_ms.map(|ms| format!(" after {ms} ms")).unwrap_or_default();
                    format!("failed{took}, will retry{wait}")
                }
                _ => format!("{}{took}", entry.status()),
            };
            let value = match (outcome, content) {
                (Outcome::Result(v), None) => match v.get("content").and_then(Value::as_array) {
                    Some(blocks) if v.as_object().is_some_and(|o| o.len() == 1) => shown_blocks(blocks),
                    _ => compact(v),
                },
                (Outcome::Result(v), Some(blocks)) => format!("{} + {}", compact(v), shown_blocks(blocks)),
                (Outcome::Error(e), _) => ellipsize(&e.error.message, SHOWN_VALUE),
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
        Detail::Sample { relayed, response, error } => match (error, response) {
            (Some(why), _) => {
                format!("sampling {}: {}", if *relayed { "failed" } else { "refused" }, ellipsize(why, SHOWN_VALUE))
            }
            (None, Some(answer)) => format!("sampled by the client → {}", compact(answer)),
            (None, None) => "sampled by the client".to_string(),
        },
        Detail::Hook(hook) => shown_hook(hook),
        Detail::Audit { capability, decision, reason } => format!("{decision} {capability}: {reason}"),
        Detail::Confirm { approved, by, how } => {
            format!("{} by {by} ({how})", if *approved { "approved" } else { "denied" })
        }
        Detail::ReplayLink { replay_of, mode } => format!("{mode} replay of trace {replay_of}"),
        Detail::Discover(discovery) => shown_discovery(discovery),
        Detail::Exchange(exchange) => shown_exchange(exchange),
    };
    let line =
        format!("  {:<6} {:>+9.3}s  {:<19} {:<24} {what}", format!("#{}", entry.position), offset, entry.kind, tool);
    terminal_safe_line(&line).into_owned()
}

/// An after-call hook's work in words: `hook redact replaced the result →
/// {"to":"[redacted]"}`, `hook audit annotated: "checked"`.
fn shown_hook(hook: &crate::event::ToolHookPayload) -> String {
    use crate::event::HookEffect;
    let name = &hook.hook;
    let notes = || {
        let notes: Vec<String> = hook.annotations.iter().map(|n| compact(&Value::String(n.clone()))).collect();
        notes.join(", ")
    };
    let why = || ellipsize(hook.reason.as_deref().unwrap_or("?"), SHOWN_VALUE);
    match hook.effect {
        HookEffect::Unchanged => format!("hook {name} left the result as it was"),
        HookEffect::Annotated => format!("hook {name} annotated: {}", notes()),
        HookEffect::Replaced => {
            let mut given = Vec::new();
            given.extend(hook.result.as_ref().map(compact));
            given.extend(hook.content.as_deref().map(shown_blocks));
            let mut line = format!("hook {name} replaced the result → {}", given.join(" + "));
            if !hook.annotations.is_empty() {
                line.push_str(&format!("; annotated: {}", notes()));
            }
            line
        }
        HookEffect::Withheld => format!("hook {name} withheld the result: {}", why()),
        HookEffect::FailedWithheld => format!("hook {name} failed, the result was withheld: {}", why()),
        HookEffect::FailedPassed => format!("hook {name} failed, the result went on: {}", why()),
    }
}

/// Content blocks in words: `text "It is 7°C", image (image/png, 68 bytes),
/// resource test://doc (text/plain)`.
fn shown_blocks(blocks: &[Value]) -> String {
    let text = |block: &Value, key: &str| block.get(key).and_then(Value::as_str).unwrap_or("?").to_string();
    let size = |block: &Value, field: &str| match (block.get(field), block.get(format!("{field}_bytes"))) {
        (Some(Value::String(data)), _) => format!("{} bytes", crate::runtime::mcp::content::decoded_len(data)),
        (_, Some(bytes)) => format!("{bytes} bytes, recorded by digest"),
        _ => "no data".to_string(),
    };
    let shown: Vec<String> = blocks
        .iter()
        .map(|block| match block.get("type").and_then(Value::as_str).unwrap_or("?") {
            "text" => format!("text {}", compact(block.get("text").unwrap_or(&Value::Null))),
            kind @ ("image" | "audio") => format!("{kind} ({}, {})", text(block, "mimeType"), size(block, "data")),
            "resource" => {
                let resource = block.get("resource").unwrap_or(&Value::Null);
                let what = if resource.get("text").is_some() { "text".to_string() } else { size(resource, "blob") };
                format!("resource {} ({what})", text(resource, "uri"))
            }
            "resource_link" => format!("link {}", text(block, "uri")),
            other => format!("{other} block"),
        })
        .collect();
    if shown.is_empty() { "no content".to_string() } else { ellipsize(&shown.join(", "), SHOWN_VALUE * 2) }
}

/// An exchange with a bridged server in words: `files: resources/read
/// {"uri":"test://a"} → {"contents":[…]} in 3 ms`.
fn shown_exchange(exchange: &crate::event::ServerExchangePayload) -> String {
    let took = exchange.duration_ms.map(|d| format!(" in {d} ms")).unwrap_or_default();
    let answer = match (&exchange.error, &exchange.response) {
        (Some(why), _) => format!(" → error: {}", ellipsize(why, SHOWN_VALUE)),
        (None, Some(response)) => format!(" → {}", compact(response)),
        (None, None) => String::new(),
    };
    format!("{}: {} {}{answer}{took}", exchange.server, exchange.method, compact(&exchange.request))
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

pub(crate) fn run(args: &ShowArgs, ctx: &Context) -> CliResult {
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
