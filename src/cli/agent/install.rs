//! `rlp agent install` and `rlp agent list`.

use std::path::PathBuf;

use clap::Args;

use crate::cli::Context;
use crate::cli::exit::CliResult;
use crate::cli::output::Format;

/// Flags of `rlp agent install`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  rlp agent install mailer-0.1.0.bundle.tar.gz\n  rlp agent install agents/mailer --allow-unsigned"
)]
pub struct InstallArgs {
    /// A bundle folder or a packed archive.
    pub source: PathBuf,
    /// Install a bundle that carries no signature.
    #[arg(long)]
    pub allow_unsigned: bool,
    /// Replace an installed bundle of the same version.
    #[arg(long)]
    pub force: bool,
}

/// Flags of `rlp agent list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Runs `rlp agent install`.
pub fn run_install(_args: &InstallArgs, _ctx: &Context) -> CliResult {
    crate::cli::not_built("agent install")
}

/// Runs `rlp agent list`.
pub fn run_list(_args: &ListArgs, _ctx: &Context) -> CliResult {
    crate::cli::not_built("agent list")
}
