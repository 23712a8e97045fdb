//! `rlp tools search`: the discovery search of `rlp serve --expose core`,
//! on the command line.

use std::path::PathBuf;

use clap::Args;
use serde_json::{Value, json};

use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, Printer, diagnostic, json_text};
use crate::cli::runtime_setup::{RuntimeFlags, load_runtime};
use crate::discovery::definition::Listed;
use crate::discovery::meta::{self, SearchRequest};
use crate::discovery::{Catalog, found_json};
use crate::text::{ellipsize, terminal_safe_line};

/// Widest description shown in the table.
const SHOWN_DESCRIPTION: usize = 80;

/// Flags of `rlp tools search`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  rlp tools search agents/notes \"add a note\"
  rlp tools search agents/notes \"find notes\" --limit 3
  rlp tools search agents/notes \"note\" --format json

Searches the tools the policy exposes, ranked by BM25 over each tool's id, description,
category and input property names; ties by id. The same search answers rlp.search_tools
under `rlp serve --expose core`, and --format json prints what it returns (docs/discovery.md).

Exit codes: 0 tools found, 1 no tool matches, 2 bad flags or an invalid bundle.")]
pub struct SearchArgs {
    /// The bundle folder.
    pub bundle: PathBuf,
    /// What the tool should do, in a few words; leave it out with --category to list the
    /// category's tools.
    pub query: Option<String>,
    /// Only tools of this category.
    #[arg(long, value_name = "C")]
    pub category: Option<String>,
    /// At most N results (1 to 50; default 5 for a query, 50 for a category's list).
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
    /// Output format: a table (human), or the `{"tools": [...]}` rlp.search_tools returns (json).
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// The table of results.
fn table(found: &[&Listed]) -> String {
    let rows: Vec<[String; 3]> = found
        .iter()
        .map(|t| {
            let description = t.definition.get("description").and_then(Value::as_str).unwrap_or_default();
            let first_line = description.lines().next().unwrap_or_default();
            [t.id.clone(), t.category.clone().unwrap_or_else(|| "-".into()), ellipsize(first_line, SHOWN_DESCRIPTION)]
                .map(|cell| terminal_safe_line(&cell).into_owned())
        })
        .collect();
    let width = |c: usize| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0);
    let (id_width, category_width) = (width(0), width(1));
    rows.iter()
        .map(|[id, category, description]| format!("{id:<id_width$}  {category:<category_width$}  {description}\n"))
        .collect()
}

/// Runs `rlp tools search`.
pub(crate) fn run(args: &SearchArgs, ctx: &Context) -> CliResult {
    let query = args.query.as_deref();
    let limit = args.limit.unwrap_or(meta::default_limit(query.is_some()) as u64);
    let request = SearchRequest::new(query, args.category.clone(), limit, ["QUERY", "--limit"]).map_err(|why| {
        CliError::usage(why).with_help("e.g. rlp tools search agents/github \"create an issue\" --limit 5")
    })?;
    let (runtime, _) = load_runtime(RuntimeFlags::inspecting(&args.bundle), ctx)?;
    let catalog = Catalog::of(&runtime);
    let found = catalog.search(&request).map_err(|why| {
        CliError::usage(why).with_help(format!("`rlp tools list {}` shows each tool's category", args.bundle.display()))
    })?;
    let exit = if found.is_empty() { Exit::Problems } else { Exit::Success };
    match args.format {
        Format::Json => {
            let tools: Vec<Value> = found.iter().map(|t| found_json(t)).collect();
            Printer::stdout().finish_with(&json_text(&json!({"tools": tools})), exit)
        }
        Format::Human if found.is_empty() => {
            let within = request.category.as_ref().map(|c| format!(" in category `{c}`")).unwrap_or_default();
            let matching = request.query.as_ref().map(|q| format!(" matches `{q}`")).unwrap_or_default();
            diagnostic(&terminal_safe_line(&format!(
                "no tool of {}{matching}{within} ({} exposed)",
                runtime.agent(),
                catalog.tools().len()
            )));
            Printer::stdout().finish(exit)
        }
        Format::Human => Printer::stdout().finish_with(&table(&found), exit),
    }
}
