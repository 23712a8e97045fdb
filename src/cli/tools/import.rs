//! `rlp tools import`.

use std::path::PathBuf;

use clap::Args;

use crate::cli::Context;
use crate::cli::exit::CliResult;

/// Flags of `rlp tools import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The bundle folder.
    pub bundle: PathBuf,
}

/// Runs `rlp tools import`.
pub fn run(_args: &ImportArgs, _ctx: &Context) -> CliResult {
    crate::cli::not_built("tools import")
}
