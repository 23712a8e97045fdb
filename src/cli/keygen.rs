//! `rlp keygen`.

use std::path::PathBuf;

use clap::Args;

use crate::cli::Context;
use crate::cli::exit::CliResult;

/// Flags of `rlp keygen`.
#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// The bundle folder.
    pub bundle: PathBuf,
}

/// Runs `rlp keygen`.
pub fn run(_args: &KeygenArgs, _ctx: &Context) -> CliResult {
    crate::cli::not_built("keygen")
}
