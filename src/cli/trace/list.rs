//! `rlp trace list`: the traces of the ledger, one line (or JSON object) each.

use std::ops::ControlFlow;

use clap::Args;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, OutputError, Printer, diagnostic, write_each};
use crate::ledger::query::{TraceInput, TraceSummary, list_traces, trace_carries_tags};
use crate::text::{format_ts, terminal_safe_line};

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

pub(crate) fn run(args: &ListArgs, ctx: &Context) -> CliResult {
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
                // Trace ids and agents are the ledger's text (an imported trace's, as written).
                let mut line = format!(
                    "{:<36}  {:<16}  {:<24}  {:<24}  {:>7}  {:>6}  {:>6}  {:>7}",
                    terminal_safe_line(&summary.trace_id),
                    terminal_safe_line(&summary.agents.join(",")),
                    format_ts(summary.first_ts_ms),
                    format_ts(summary.last_ts_ms),
                    summary.frames,
                    summary.calls,
                    summary.errors,
                    summary.refused
                );
                if let Some(of) = &summary.replay_of {
                    line.push_str(&format!("  replay of {}", terminal_safe_line(of)));
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
