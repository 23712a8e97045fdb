//! Renderers for lint findings: human (rustc-style), json, sarif, github.

mod excerpt;
mod github;
mod human;
mod json;
mod sarif;

use clap::ValueEnum;

use crate::lint::BundleReport;
pub(crate) use crate::text::plural;

pub(crate) use human::render as human;
pub(crate) use json::finding_json;

/// `--format` of `rlp lint`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LintFormat {
    /// rustc-style diagnostics with the source line and a marker.
    Human,
    /// A JSON array of `{code, severity, file, line, column, message, help}`.
    Json,
    /// SARIF 2.1.0.
    Sarif,
    /// GitHub workflow annotations (`::error file=…,line=…,col=…::…`).
    Github,
}

/// Renders the reports in a machine format (everything but human).
pub(crate) fn machine(format: LintFormat, reports: &[BundleReport]) -> String {
    match format {
        LintFormat::Json => json::render(reports),
        LintFormat::Sarif => sarif::render(reports),
        LintFormat::Github => github::render(reports),
        LintFormat::Human => unreachable!("human output is rendered by render::human"),
    }
}

/// What lint found, as its human report words it: `no problems`,
/// `1 error and 0 warnings`, or with drift `0 errors, 0 warnings and 2 drifts`.
pub(crate) fn problems(errors: usize, warnings: usize, drifts: usize) -> String {
    match (errors, warnings, drifts) {
        (0, 0, 0) => "no problems".to_string(),
        (errors, warnings, 0) => format!("{} and {}", plural(errors, "error"), plural(warnings, "warning")),
        (errors, warnings, drifts) => {
            format!("{}, {} and {}", plural(errors, "error"), plural(warnings, "warning"), plural(drifts, "drift"))
        }
    }
}
