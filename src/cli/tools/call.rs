//! `rlp tools call`.

use std::path::PathBuf;

use clap::Args;

use crate::cli::Context;
use crate::cli::exit::CliResult;

/// Flags of `rlp tools call`.
#[derive(Debug, Args)]
pub struct CallArgs {
    /// The bundle folder.
    pub bundle: PathBuf,
}

/// Runs `rlp tools call`.
pub fn run(_args: &CallArgs, _ctx: &Context) -> CliResult {
    crate::cli::not_built("tools call")
}
