//! `rlp lint`.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::bundle::diag::Severity;
use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::lint::render::{self, LintFormat};
use crate::lint::{discover, lint_all};

/// Flags of `rlp lint`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  rlp lint                       the bundle or bundles in the current folder\n  rlp lint agents/ --deny-warnings\n  rlp lint agents/mailer --format sarif > lint.sarif\n\nExit codes: 0 clean, 1 errors (or warnings with --deny-warnings), 2 unreadable path.\nEvery rule is described in docs/lint.md."
)]
pub struct LintArgs {
    /// Bundle folders, or folders holding bundles (e.g. `agents/`).
    #[arg(default_value = ".", value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = LintFormat::Human)]
    pub format: LintFormat,
    /// Fail (exit 1) on warnings too.
    #[arg(long)]
    pub deny_warnings: bool,
    /// Also ask each exec tool's binary for its definitions (`schema` action)
    /// and report drift from tools.json (exit 1 on any).
    #[arg(long)]
    pub check_tools: bool,
}

/// Runs `rlp lint`.
pub fn run(args: &LintArgs, ctx: &Context) -> CliResult {
    let dirs = discover(&args.paths).map_err(|e| {
        CliError::usage(e).with_help("pass a bundle folder (with manifest.toml) or a folder of bundles")
    })?;
    let reports = lint_all(&dirs);
    let errors: usize = reports.iter().map(|r| r.count(Severity::Error)).sum();
    let warnings: usize = reports.iter().map(|r| r.count(Severity::Warning)).sum();
    let text = match args.format {
        LintFormat::Human => {
            let mut text = render::human(&reports, ctx.color.stdout());
            let bundles = match reports.len() {
                1 => "1 bundle".to_string(),
                n => format!("{n} bundles"),
            };
            text.push_str(&match (errors, warnings) {
                (0, 0) => format!("{bundles} checked: no problems\n"),
                _ => format!("{bundles} checked: {} and {}\n", plural(errors, "error"), plural(warnings, "warning")),
            });
            text
        }
        format => render::machine(format, &reports),
    };
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    let mut drifted = false;
    if args.check_tools {
        for dir in &dirs {
            let drifts = crate::authoring::drift::check(dir);
            drifted |= !drifts.is_empty();
            let text = crate::authoring::drift::render(dir, &drifts);
            if args.format == LintFormat::Human {
                let _ = std::io::stdout().lock().write_all(text.as_bytes());
            } else {
                let _ = std::io::stderr().lock().write_all(text.as_bytes());
            }
        }
    }
    let failed = errors > 0 || (args.deny_warnings && warnings > 0) || drifted;
    Ok(if failed { Exit::Problems } else { Exit::Success })
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 { format!("1 {word}") } else { format!("{n} {word}s") }
}
