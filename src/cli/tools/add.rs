//! `rlp tools add`.

use std::path::PathBuf;

use clap::Args;

use crate::cli::Context;
use crate::cli::exit::CliResult;

/// Flags of `rlp tools add`.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The bundle folder.
    pub bundle: PathBuf,
}

/// Runs `rlp tools add`.
pub fn run(_args: &AddArgs, _ctx: &Context) -> CliResult {
    crate::cli::not_built("tools add")
}
