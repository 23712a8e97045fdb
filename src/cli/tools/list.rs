//! `rlp tools list`.

use std::path::PathBuf;

use clap::Args;

use crate::cli::Context;
use crate::cli::exit::CliResult;

/// Flags of `rlp tools list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// The bundle folder.
    pub bundle: PathBuf,
}

/// Runs `rlp tools list`.
pub fn run(_args: &ListArgs, _ctx: &Context) -> CliResult {
    crate::cli::not_built("tools list")
}
