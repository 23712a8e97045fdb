//! `rlp trace prove`: an inclusion proof of a trace (and one frame of it
//! in full) in a signed checkpoint, for a third party to check offline
//! with `rlp trace verify --proof`.

use std::path::PathBuf;

use clap::Args;

use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::Printer;
use crate::ledger::proof::{ProveError, prove};
use crate::ledger::query::InputError;

/// Flags of `rlp trace prove`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  rlp trace checkpoint
  rlp trace prove last --frame 1 --out proof.json
  rlp trace export last -o trace.jsonl

Anyone can then check it offline, with the ledger's checkpoint key (keys/ledger.pub of the
home that signed): `rlp trace verify --proof proof.json --export trace.jsonl --key ledger.pub`.
The proof holds the hashes of the trace's frames up to what the checkpoint covers, the frame
asked for in full (as `rlp trace export` writes it), the Merkle audit path and the signed
checkpoint. Frames recorded after the newest checkpoint cannot be proven until the next one.

The checkpoint used is the newest that covers the trace; it must be signed by a key this home
trusts (its own keys/ledger.pub, or [ledger] checkpoint_keys) and its root must be its stored
leaves', or no proof is written.

Exit codes: 0 written, 1 no checkpoint covers it yet, or the ledger or the checkpoint does not
check out, 2 no such trace, frame or ledger, or the file cannot be written.")]
pub struct ProveArgs {
    /// The trace (a trace id, or `last`).
    pub trace: String,
    /// Prove this frame in full (its position in the trace, from 1, as `rlp trace export` numbers it).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..))]
    pub frame: Option<i64>,
    /// Write the proof here (atomically) instead of to stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub(crate) fn run(args: &ProveArgs, ctx: &Context) -> CliResult {
    let ledger = ctx.ledger()?;
    let trace = super::resolve_trace_id(&args.trace, &ledger)?;
    let store = ledger.open_if_exists()?.ok_or_else(|| InputError::NoLedger(ledger.clone()))?;
    let trusted = super::verify::home_trusted_keys(ctx)?;
    let proof = prove(&*store, &trace, args.frame, &trusted).map_err(|e| match e {
        ProveError::Ledger(e) => CliError::from(e),
        ProveError::NotCovered(message) if store.trace_head(&trace).ok().flatten().is_none() => {
            CliError::usage(format!("the ledger has no trace {trace} in per-trace chains: {message}"))
                .with_help("`rlp trace list` shows the traces")
        }
        ProveError::NotCovered(message) => CliError::problem(message),
        ProveError::Edited(message) => CliError::problem(message),
        ProveError::NoFrame(message) => CliError::usage(message),
    })?;
    let text = format!("{}\n", serde_json::to_string_pretty(&proof).unwrap_or_default());
    match &args.out {
        Some(path) => {
            crate::fsutil::write_atomic(path, text.as_bytes(), None)
                .map_err(|e| CliError::usage(format!("cannot write {}: {e}", path.display())))?;
            let frame = args.frame.map(|n| format!(", frame {n} in full")).unwrap_or_default();
            Printer::stdout().finish_with(
                &format!(
                    "wrote {}: frames 1 to {} of trace {trace}{frame}\n",
                    path.display(),
                    proof.frame_hashes.len()
                ),
                Exit::Success,
            )
        }
        None => Printer::stdout().finish_with(&text, Exit::Success),
    }
}
