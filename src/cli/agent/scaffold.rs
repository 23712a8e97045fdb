//! `rlp agent scaffold`.

use std::path::PathBuf;

use clap::Args;

use crate::cli::Context;
use crate::cli::exit::CliResult;

/// Flags of `rlp agent scaffold`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  rlp agent scaffold mailer\n  rlp agent scaffold mailer --non-interactive --description 'Sends drafts' --cap-net api.mail.example"
)]
pub struct ScaffoldArgs {
    /// The agent's name (`^[a-z][a-z0-9_]*$`); the bundle folder gets this name.
    pub name: String,
    /// Folder that receives the bundle.
    #[arg(long, default_value = "agents", value_name = "DIR")]
    pub root: PathBuf,
    /// Ask nothing; build the bundle from flags and defaults.
    #[arg(long)]
    pub non_interactive: bool,
    /// Replace an existing bundle folder.
    #[arg(long)]
    pub force: bool,
}

/// Runs `rlp agent scaffold`.
pub fn run(_args: &ScaffoldArgs, _ctx: &Context) -> CliResult {
    crate::cli::not_built("agent scaffold")
}
