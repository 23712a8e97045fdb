//! `rlp tools list`.

use std::path::PathBuf;

use clap::Args;

use crate::authoring::list::list;
use crate::cli::Context;
use crate::cli::exit::{CliResult, Exit};
use crate::cli::output::{Format, Printer, json_text};

/// Flags of `rlp tools list`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  rlp tools list agents/mailer
  rlp tools list agents/mailer --format json

EXPOSED is `yes` when the effective policy (policy.caps ∩ $RUNLOOP_HOME/caps/overrides/<name>.toml,
when present) grants every capability the tool needs, else `no: missing …`.
SANDBOX is what an exec tool may write (rw) and reach (net) under [runtime] sandbox
(docs/sandbox.md), or `off`.")]
pub struct ListArgs {
    /// The bundle folder.
    pub bundle: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Runs `rlp tools list`.
pub(crate) fn run(args: &ListArgs, ctx: &Context) -> CliResult {
    let config = crate::config::load(&ctx.home, &crate::config::Flags::default())?;
    let listing = list(&args.bundle, &ctx.home, &config.config)?;
    let text = match args.format {
        Format::Human => listing.render_human(),
        Format::Json => json_text(&listing.to_json()),
    };
    Printer::stdout().finish_with(&text, Exit::Success)
}
