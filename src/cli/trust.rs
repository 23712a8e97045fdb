//! `rlp trust`.

use clap::Subcommand;

use crate::cli::Context;
use crate::cli::exit::CliResult;

/// `rlp trust …`
#[derive(Debug, Subcommand)]
pub enum TrustCommand {
    /// Not available yet.
    List,
}

/// Runs a `trust` subcommand.
pub fn run(_command: TrustCommand, _ctx: &Context) -> CliResult {
    crate::cli::not_built("trust")
}
