//! `rlp trace import`: a JSON Lines trace into the ledger, all or nothing.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, Printer};
use crate::error::Reportable;
use crate::ledger::Location;
use crate::ledger::import::{ImportError, import_file};
use crate::text::plural;

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

pub(crate) fn run(args: &ImportArgs, ctx: &Context) -> CliResult {
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
        Err(ImportError::Ledger(e)) if e.is_not_a_ledger() => Err(e.into()),
        Err(ImportError::Ledger(e)) => {
            let help = match ledger {
                // A PostgreSQL ledger's own error says what to check.
                Location::Postgres(_) => e.help().unwrap_or_default(),
                Location::Sqlite(_) => "check that the runtime home (--home or $RUNLOOP_HOME) is writable".into(),
            };
            Err(CliError::problem(format!("cannot write the ledger: {e}")).with_help(help))
        }
    }
}
