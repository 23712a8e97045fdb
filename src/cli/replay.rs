//! `rlp replay`.

use std::path::PathBuf;

use clap::Args;

use crate::cli::Context;
use crate::cli::exit::CliResult;

/// Flags of `rlp replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The bundle folder.
    pub bundle: PathBuf,
}

/// Runs `rlp replay`.
pub fn run(_args: &ReplayArgs, _ctx: &Context) -> CliResult {
    crate::cli::not_built("replay")
}
