//! `rlp agent`: scaffold, install, list.

pub(crate) mod install;
pub(crate) mod scaffold;

use clap::Subcommand;

use crate::cli::Context;
use crate::cli::exit::CliResult;

/// `rlp agent …`
#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Create a new bundle (interactive wizard, or flags with --non-interactive).
    Scaffold(scaffold::ScaffoldArgs),
    /// Verify a bundle or archive and install it into $RUNLOOP_HOME/agents/.
    Install(install::InstallArgs),
    /// List installed bundles with their verification status.
    List(install::ListArgs),
}

/// Runs an `agent` subcommand.
pub(crate) fn run(command: AgentCommand, ctx: &Context) -> CliResult {
    match command {
        AgentCommand::Scaffold(args) => scaffold::run(&args, ctx),
        AgentCommand::Install(args) => install::run_install(&args, ctx),
        AgentCommand::List(args) => install::run_list(&args, ctx),
    }
}
