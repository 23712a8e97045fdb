//! `rlp trace`: list, show, export, import, verify and diff the traces in the
//! knowledge base (`$RUNLOOP_HOME/pog/events.sqlite`).
mod checkpoint;
mod diff;
mod export;
mod import;
mod list;
mod prove;
mod show;
mod verify;

use std::collections::HashSet;
use std::path::Path;

use clap::Subcommand;
use uuid::Uuid;

use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult};
use crate::ledger::Location;
use crate::ledger::query::{TraceInput, newest_trace, tagged_invocations};

/// `rlp trace …`
#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// List the traces in the ledger: id, agent, first and last time, calls, errors.
    List(list::ListArgs),
    /// Show one trace as a timeline: each call, its result, duration, status and tags.
    Show(show::ShowArgs),
    /// Export one trace as JSON Lines (one frame per line).
    Export(export::ExportArgs),
    /// Import a JSON Lines trace into the ledger (all or nothing).
    Import(import::ImportArgs),
    /// Sign a checkpoint over every trace that grew since the last one (once, or --every DURATION).
    Checkpoint(checkpoint::CheckpointArgs),
    /// Write an inclusion proof of a trace (and one frame in full) in a signed checkpoint.
    Prove(prove::ProveArgs),
    /// Check every row hash, chain, head row and checkpoint (or one trace, or a proof offline); name what was changed.
    Verify(verify::VerifyArgs),
    /// Compare two runs of an agent call by call: the regression gate (exit 1 on any divergence).
    Diff(diff::DiffArgs),
}

/// Runs a `trace` subcommand.
pub(crate) fn run(command: TraceCommand, ctx: &Context) -> CliResult {
    match command {
        TraceCommand::List(args) => list::run(&args, ctx),
        TraceCommand::Show(args) => show::run(&args, ctx),
        TraceCommand::Export(args) => export::run(&args, ctx),
        TraceCommand::Import(args) => import::run(&args, ctx),
        TraceCommand::Verify(args) => verify::run(&args, ctx),
        TraceCommand::Checkpoint(args) => checkpoint::run(&args, ctx),
        TraceCommand::Prove(args) => prove::run(&args, ctx),
        TraceCommand::Diff(args) => diff::run(&args, ctx),
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

/// With `--tag`: the invocations of the trace whose frames carry every tag
/// (at least one); none is an error (exit 1).
pub(crate) fn tagged(input: &TraceInput, tags: &[String]) -> Result<Option<HashSet<Uuid>>, CliError> {
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
