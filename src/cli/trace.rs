//! `rlp trace`.

use clap::Subcommand;

use crate::cli::Context;
use crate::cli::exit::CliResult;

/// `rlp trace …`
#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Not available yet.
    List,
}

/// Runs a `trace` subcommand.
pub fn run(_command: TraceCommand, _ctx: &Context) -> CliResult {
    crate::cli::not_built("trace")
}
