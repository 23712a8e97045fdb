//! `rlp lint`.

use std::path::PathBuf;

use clap::Args;

use crate::authoring::drift::{self, ToolCheck};
use crate::bundle::diag::Severity;
use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Printer, diagnostic};
use crate::lint::render::{self, LintFormat};
use crate::lint::{Settings, discover, lint_all};

mod against;

/// Flags of `rlp lint`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  (cd agents && rlp lint)        # the bundle or bundles in the current folder\n  rlp lint agents/ --deny-warnings\n  rlp lint agents/mailer --format sarif > lint.sarif\n  rlp lint agents/mailer --against ../last-release/agents/mailer   # or its .bundle.tar.gz\n\nExit codes: 0 clean, 1 errors (or warnings with --deny-warnings, drift with --check-tools,\nor a version too low for the changes --against finds), 2 unreadable path.\nEvery rule is described in docs/lint.md."
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
    /// Compare the bundle with its previous release (a bundle folder or archive): report removed
    /// or renamed tools and incompatible schema changes, and fail (exit 1) when the manifest's
    /// version does not go up as much as they need.
    #[arg(long, value_name = "PREVIOUS")]
    pub against: Option<PathBuf>,
    /// RLP217 warns when a bundle has more tools than this and none is core.
    #[arg(long, value_name = "N", default_value_t = crate::lint::rules::DEFAULT_CORE_THRESHOLD)]
    pub core_threshold: usize,
}

/// Runs `rlp lint`.
pub(crate) fn run(args: &LintArgs, ctx: &Context) -> CliResult {
    let dirs = discover(&args.paths).map_err(|e| {
        CliError::usage(e).with_help("pass a bundle folder (with manifest.toml) or a folder of bundles")
    })?;
    let reports = lint_all(&dirs, &Settings { core_threshold: args.core_threshold, registries: ctx.registries()? });
    let checks: Vec<ToolCheck> = if args.check_tools {
        let sandbox = ctx.config()?.sandbox.value;
        dirs.iter().map(|d| drift::check(d, sandbox)).collect()
    } else {
        Vec::new()
    };
    let mut notes: String = dirs.iter().zip(&checks).map(|(dir, check)| drift::render(dir, check)).collect();
    let mut unreleasable = false;
    if let Some(previous) = &args.against {
        let [dir] = dirs.as_slice() else {
            return Err(CliError::usage(format!("--against compares one bundle; {} were found", dirs.len()))
                .with_help("pass the one bundle folder to compare"));
        };
        let (report, fails) = against::report(dir, previous)?;
        notes.push_str(&report);
        unreleasable = fails;
    }
    let count = Counts {
        bundles: reports.len(),
        errors: reports.iter().map(|r| r.count(Severity::Error)).sum(),
        warnings: reports.iter().map(|r| r.count(Severity::Warning)).sum(),
        drifts: checks.iter().map(|c| c.drifts.len()).sum(),
        unchecked: checks.iter().flat_map(|c| &c.unchecked).filter(|u| !u.server).count(),
        unchecked_servers: checks.iter().flat_map(|c| &c.unchecked).filter(|u| u.server).count(),
    };
    let failed = count.errors > 0 || (args.deny_warnings && count.warnings > 0) || count.drifts > 0 || unreleasable;
    let exit = if failed { Exit::Problems } else { Exit::Success };
    let out = Printer::stdout();
    match args.format {
        LintFormat::Human => {
            let text = render::human(&reports, ctx.color.stdout()) + &notes + &count.summary();
            out.finish_with(&text, exit)
        }
        format => {
            let result = out.finish_with(&render::machine(format, &reports), exit);
            if !notes.is_empty() {
                diagnostic(notes.strip_suffix('\n').unwrap_or(&notes));
            }
            result
        }
    }
}

/// What one run found, for the last line of the human report.
struct Counts {
    bundles: usize,
    errors: usize,
    warnings: usize,
    drifts: usize,
    unchecked: usize,
    unchecked_servers: usize,
}

impl Counts {
    /// `2 bundles checked: 1 error and 0 warnings`, with the drift (and the
    /// binaries not checked) counted when `--check-tools` found any.
    fn summary(&self) -> String {
        let bundles = render::plural(self.bundles, "bundle");
        let problems = render::problems(self.errors, self.warnings, self.drifts);
        let binaries = match self.unchecked {
            0 => None,
            1 => Some("1 tool binary".to_string()),
            n => Some(format!("{n} tool binaries")),
        };
        let servers = (self.unchecked_servers > 0).then(|| render::plural(self.unchecked_servers, "MCP server"));
        let unchecked = match (binaries, servers) {
            (None, None) => String::new(),
            (Some(one), None) | (None, Some(one)) => format!(" ({one} not checked)"),
            (Some(binaries), Some(servers)) => format!(" ({binaries} and {servers} not checked)"),
        };
        format!("{bundles} checked: {problems}{unchecked}\n")
    }
}
