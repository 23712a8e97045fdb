//! `rlp tools`: add, list, search, import, call.

pub(crate) mod add;
pub(crate) mod batch;
pub(crate) mod call;
pub(crate) mod import;
pub(crate) mod import_mcp;
pub(crate) mod list;
pub(crate) mod search;

use clap::Subcommand;

use crate::cli::Context;
use crate::cli::deferred::Deferred;
use crate::cli::exit::CliResult;

/// `rlp tools …` (each built when the command line enters it: `rlp tools call`
/// is what scripts run in loops).
#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// Add one tool to a bundle's tools.json.
    Add(Deferred<add::AddArgs>),
    /// List a bundle's tools and whether the policy exposes each.
    List(Deferred<list::ListArgs>),
    /// Find a bundle's tools by what they do (the search of `rlp serve --expose core`).
    Search(Deferred<search::SearchArgs>),
    /// Add the tools a binary describes (`schema` action) or an MCP server lists (--mcp, --mcp-config).
    Import(Deferred<import::ImportArgs>),
    /// Run one tool call through the runtime and print its result.
    Call(Deferred<call::CallArgs>),
}

/// Runs a `tools` subcommand.
pub(crate) fn run(command: ToolsCommand, ctx: &Context) -> CliResult {
    match command {
        ToolsCommand::Add(Deferred(args)) => add::run(&args, ctx),
        ToolsCommand::List(Deferred(args)) => list::run(&args, ctx),
        ToolsCommand::Search(Deferred(args)) => search::run(&args, ctx),
        ToolsCommand::Import(Deferred(args)) => import::run(&args, ctx),
        ToolsCommand::Call(Deferred(args)) => call::run(&args, ctx),
    }
}
