//! `rlp tools list`.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::authoring::list::list;
use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Printer, json_text};
use crate::cli::runtime_setup::{RuntimeFlags, load_runtime};
use crate::discovery::{Catalog, Expose};

/// `--format` of `rlp tools list`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    /// A table.
    Human,
    /// One JSON document.
    Json,
    /// The `tools/list` result `rlp serve` sends (with --expose).
    Mcp,
}

/// Flags of `rlp tools list`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  rlp tools list agents/notes
  rlp tools list agents/notes --format json
  rlp tools list agents/notes --core
  rlp tools list agents/notes --format mcp --expose core

EXPOSED is `yes` when the effective policy (policy.caps ∩ $RUNLOOP_HOME/caps/overrides/<name>.toml,
when present) grants every capability the tool needs and the operator's list of config.toml
([agents.<name>.tools] allow/deny) lets it through, else `no: missing …` or `no: ` and the
list that keeps it out (`denied by the operator's list in FILE (\"PATTERN\")`).
SANDBOX is what an exec tool may write (rw) and reach (net) under [runtime] sandbox
(docs/sandbox.md), or `off`. DISCOVERY is `core` (listed up front by `rlp serve --expose core`)
or `discoverable` (found through rlp.search_tools; docs/discovery.md).
--format mcp prints exactly the tools/list result `rlp serve --expose all|core` sends (to a
2025-11-25 client, each tool also says `execution: {\"taskSupport\": \"optional\"}`).")]
pub struct ListArgs {
    /// The bundle folder.
    pub bundle: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ListFormat::Human)]
    pub format: ListFormat,
    /// Only tools of this category.
    #[arg(long, value_name = "C", conflicts_with = "expose")]
    pub category: Option<String>,
    /// Only the core tools.
    #[arg(long, conflicts_with = "expose")]
    pub core: bool,
    /// With --format mcp: the tools/list of `rlp serve --expose all` (default) or `--expose core`.
    #[arg(long, value_enum, value_name = "MODE")]
    pub expose: Option<Expose>,
}

/// Runs `rlp tools list`.
pub(crate) fn run(args: &ListArgs, ctx: &Context) -> CliResult {
    if args.format == ListFormat::Mcp {
        if args.category.is_some() || args.core {
            return Err(CliError::usage(
                "--format mcp prints the whole tools/list; --category and --core do not apply",
            )
            .with_help("pick what is listed with --expose all|core"));
        }
        return mcp_listing(args, ctx);
    }
    if args.expose.is_some() {
        return Err(CliError::usage("--expose applies to --format mcp only")
            .with_help("e.g. rlp tools list agents/github --format mcp --expose core"));
    }
    let mut listing = list(&args.bundle, &ctx.home, &ctx.config()?)?;
    listing.filter(args.category.as_deref(), args.core);
    let text = match args.format {
        ListFormat::Json => json_text(&listing.to_json()),
        _ => listing.render_human(),
    };
    Printer::stdout().finish_with(&text, Exit::Success)
}

/// `--format mcp`: the bundle loaded as `rlp serve` loads it, and the
/// `tools/list` result it would send.
fn mcp_listing(args: &ListArgs, ctx: &Context) -> CliResult {
    let (runtime, _) = load_runtime(RuntimeFlags::inspecting(&args.bundle), ctx)?;
    let expose = args.expose.unwrap_or_default();
    if expose == Expose::Core {
        crate::cli::serve::refuse_meta_names(&runtime)?;
    }
    let listed = Catalog::of(&runtime)
        .tools_list(expose)
        .map_err(|e| CliError::problem(format!("cannot build the tool list: {e}")))?;
    let mut value =
        serde_json::to_value(listed).map_err(|e| CliError::problem(format!("cannot print the tool list: {e}")))?;
    // As sent under 2025-11-25; 2026-07-28 adds its `resultType` marker.
    if let Some(result) = value.as_object_mut() {
        result.remove("resultType");
    }
    Printer::stdout().finish_with(&json_text(&value), Exit::Success)
}
