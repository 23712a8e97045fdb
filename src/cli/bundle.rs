//! `rlp bundle`.

use clap::Subcommand;

use crate::cli::Context;
use crate::cli::exit::CliResult;

/// `rlp bundle …`
#[derive(Debug, Subcommand)]
pub enum BundleCommand {
    /// Not available yet.
    Pack,
}

/// Runs a `bundle` subcommand.
pub fn run(_command: BundleCommand, _ctx: &Context) -> CliResult {
    crate::cli::not_built("bundle")
}
