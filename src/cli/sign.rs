//! `rlp sign`.

use std::path::PathBuf;

use clap::Args;

use crate::cli::Context;
use crate::cli::exit::CliResult;

/// Flags of `rlp sign`.
#[derive(Debug, Args)]
pub struct SignArgs {
    /// The bundle folder.
    pub bundle: PathBuf,
}

/// Runs `rlp sign`.
pub fn run(_args: &SignArgs, _ctx: &Context) -> CliResult {
    crate::cli::not_built("sign")
}
