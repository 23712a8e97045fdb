//! `rlp replay`: replay a recorded trace against a bundle and report every
//! divergence (see docs/replay.md).

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, Printer};
use crate::cli::runtime_setup::{RuntimeFlags, load_runtime};
use crate::cli::terminal::FrameCounter;
use crate::cli::trace::parse_input;
use crate::ledger::query::TraceInput;
use crate::replay::contract::Contract;
use crate::replay::live::LiveExecutor;
use crate::replay::replayer::{Executor, ReplayError, Summary, replay};
use crate::replay::report::{Report, ReportFormat};

/// `--mode strict|live`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReplayMode {
    /// Run nothing: check every recorded call against the bundle and return the recorded results.
    Strict,
    /// Run every call again through the runtime and diff the new results against the recorded ones.
    Live,
}

/// Flags of `rlp replay`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  rlp replay golden.jsonl --bundle agents/demo      # the CI regression gate
  rlp replay last --bundle agents/demo --format json
  rlp replay golden.jsonl --bundle agents/demo --mode live --yes

Divergence kinds: missing_tool, args_mismatch, schema_mismatch, invalid_trace (strict and live),
result_changed (live). See docs/replay.md.

Exit codes: 0 nothing diverged, 1 divergences found, 2 unreadable trace or bundle,
3 live: a call refused by policy or not confirmed.")]
pub struct ReplayArgs {
    /// The trace: a trace id of this home's ledger (`last` for the newest), or a JSON Lines file from `rlp trace export`.
    #[arg(value_name = "TRACE_ID|FILE.jsonl")]
    pub trace: String,
    /// The bundle folder to replay against.
    #[arg(long, value_name = "DIR")]
    pub bundle: PathBuf,
    /// strict: run nothing; live: run every call again.
    #[arg(long, value_enum, default_value_t = ReplayMode::Strict)]
    pub mode: ReplayMode,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Live: approve calls of tools that require confirmation without asking.
    #[arg(long)]
    pub yes: bool,
    /// Live: override `security.confirm_external_actions` (the system `[policy]` can still require it).
    #[arg(long, value_name = "BOOL")]
    pub confirm_external_actions: Option<bool>,
}

/// Replays `input` into `report`, with a progress line on a terminal.
fn replay_with_progress(
    input: &TraceInput,
    contract: &Contract,
    executor: Option<&mut dyn Executor>,
    report: &mut Report,
) -> Result<Summary, ReplayError> {
    let mut counter = FrameCounter::new("replaying");
    replay(input, contract, executor, report, &mut || counter.tick())
}

/// Runs `rlp replay`.
pub(crate) fn run(args: &ReplayArgs, ctx: &Context) -> CliResult {
    let input = parse_input(&args.trace, ctx)?;
    let format = match args.format {
        Format::Human => ReportFormat::Human,
        Format::Json => ReportFormat::Json,
    };
    let mut report = Report::new(format);
    let summary = match args.mode {
        ReplayMode::Strict => {
            let contract = Contract::load(&args.bundle, &ctx.home)?;
            replay_with_progress(&input, &contract, None, &mut report)?
        }
        ReplayMode::Live => {
            let flags = RuntimeFlags {
                bundle: &args.bundle,
                yes: args.yes,
                confirm_external_actions: args.confirm_external_actions,
                tools: None,
                ask_questions: false,
                serving: false,
            };
            let (runtime, recorder) = load_runtime(flags, ctx)?;
            let contract = Contract::for_runtime(&runtime)?;
            let mut executor = LiveExecutor::new(&runtime, recorder);
            let result = replay_with_progress(&input, &contract, Some(&mut executor), &mut report);
            let new_trace = executor.trace_id();
            result.map_err(|e| {
                let mut error = CliError::from(e);
                error.message.push_str(&format!(" (the calls made so far are in trace {new_trace})"));
                error
            })?
        }
    };
    let exit = if summary.is_clean() { Exit::Success } else { Exit::Problems };
    let mut out = Printer::stdout();
    // A failure is remembered, and `finish` reports it with `exit`.
    let _ = report.write_to(&mut out);
    out.finish(exit)
}
