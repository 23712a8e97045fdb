//! `rlp trace verify`: every row hash and the hash chain of the ledger.

use clap::Args;
use serde_json::{Value, json};

use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, Printer};
use crate::ledger::query::InputError;
use crate::ledger::{Location, VerifyReport};
use crate::text::plural;

/// Flags of `rlp trace verify`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  rlp trace verify
  rlp trace verify --format json --home replay-home

Exit codes: 0 every row checks out, 1 a row was edited, removed or reordered,
2 no ledger, or a file SQLite cannot read (not a ledger, or damaged).")]
pub struct VerifyArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

fn human_verify(report: &VerifyReport) -> String {
    let rows = plural(report.rows, "row");
    let unchained = if report.unchained > 0 {
        format!(" ({} without a chain value, not checked)", plural(report.unchained, "upstream row"))
    } else {
        String::new()
    };
    let head = report.head.as_deref().unwrap_or("none");
    let Some(first) = report.first_problem() else {
        return format!(
            "Ledger {}: {rows}{unchained}, every hash and the chain check out.\nHead: {head}\n",
            report.ledger
        );
    };
    let total = report.problems.len() as u64 + report.more_problems;
    let mut text = format!(
        "Ledger {}: {rows}{unchained}, {}; the first is row {}.\n",
        report.ledger,
        plural(total, "problem"),
        first.row
    );
    for problem in &report.problems {
        let trace = problem.trace_id.as_deref().map(|t| format!(", trace {t}")).unwrap_or_default();
        let kind =
            serde_json::to_value(problem.problem).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        text.push_str(&format!("  row {} ({}{trace}): {kind}: {}\n", problem.row, problem.kind, problem.message));
    }
    if report.more_problems > 0 {
        text.push_str(&format!("  … and {} more\n", report.more_problems));
    }
    text.push_str(&format!("Head: {head}\n"));
    text
}

/// Verifies `ledger`; a missing or unreadable ledger is an error (exit 2).
fn verify_report(ledger: &Location) -> Result<VerifyReport, CliError> {
    let store = ledger.open_if_exists()?.ok_or_else(|| InputError::NoLedger(ledger.clone()))?;
    store.verify_chain().map_err(CliError::from)
}

pub(crate) fn run(args: &VerifyArgs, ctx: &Context) -> CliResult {
    let ledger = ctx.ledger()?;
    let report = match verify_report(&ledger) {
        Ok(report) => report,
        Err(error) if args.format == Format::Json => {
            // Still one JSON document on stdout, as documented; the error goes to stderr too.
            let doc = json!({
                "ledger": ledger.to_string(),
                "intact": false,
                "error": {"message": error.message, "help": error.help},
            });
            let mut out = Printer::stdout();
            let _ = out.json(&doc);
            return out.fail(error);
        }
        Err(error) => return Err(error),
    };
    let text = match args.format {
        Format::Human => human_verify(&report),
        Format::Json => {
            let mut value = serde_json::to_value(&report).unwrap_or(Value::Null);
            value["intact"] = json!(report.is_intact());
            format!("{}\n", serde_json::to_string_pretty(&value).unwrap_or_default())
        }
    };
    let exit = if report.is_intact() { Exit::Success } else { Exit::Problems };
    Printer::stdout().finish_with(&text, exit)
}
