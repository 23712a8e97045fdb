//! `rlp trace diff`: two runs of an agent compared call by call (the regression gate).

use clap::Args;

use crate::cli::Context;
use crate::cli::exit::{CliResult, Exit};
use crate::cli::output::{Format, Printer};
use crate::cli::trace::parse_input;
use crate::replay::trace_diff::trace_diff;

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

pub(crate) fn run(args: &DiffArgs, ctx: &Context) -> CliResult {
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
