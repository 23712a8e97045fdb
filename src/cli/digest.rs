//! `rlp digest`.

use std::path::PathBuf;

use clap::Args;

use crate::cli::Context;
use crate::cli::exit::CliResult;

/// Flags of `rlp digest`.
#[derive(Debug, Args)]
pub struct DigestArgs {
    /// The bundle folder.
    pub bundle: PathBuf,
}

/// Runs `rlp digest`.
pub fn run(_args: &DigestArgs, _ctx: &Context) -> CliResult {
    crate::cli::not_built("digest")
}
