//! Whether a bundle may be sealed — signed or packed: its digests are up to
//! date and it lints without errors. A signature or an archive made of
//! anything else would only be refused later, by `rlp bundle verify`.

use std::path::Path;

use crate::bundle::diag::Severity;
use crate::bundle::manifest::MANIFEST_FILE;
use crate::bundle::registry::Registries;
use crate::integrity::digest::Plan;
use crate::integrity::failure::{Failure, Reason};

/// Checks the bundle in `dir`; `then` names the step that follows (`sign`,
/// `pack`) for the hints; `registries` are where shared schemas are found.
/// Returns the digest plan, whose manifest text is the one to seal.
pub(crate) fn check_ready(dir: &Path, then: &str, registries: &Registries) -> Result<Plan, Failure> {
    let plan = crate::integrity::digest::plan(dir, registries).map_err(crate::integrity::digest_failure)?;
    if !plan.changes.is_empty() {
        let names: Vec<String> =
            plan.changes.iter().take(5).map(|c| format!("{} {}", c.check_word(), c.path())).collect();
        let more = if plan.changes.len() > 5 { format!(" and {} more", plan.changes.len() - 5) } else { String::new() };
        return Err(Failure::new(
            Reason::Stale,
            format!("{}: the digests in {MANIFEST_FILE} are out of date ({}{more})", dir.display(), names.join(", ")),
        )
        .with_help(format!("run `rlp digest {}`, then {then} again", dir.display())));
    }
    let report = crate::lint::lint_bundle(dir, registries);
    let errors: Vec<_> = report.findings.iter().filter(|l| l.finding.severity == Severity::Error).collect();
    if let Some(first) = errors.first() {
        let more = if errors.len() > 1 { format!(" (and {} more)", errors.len() - 1) } else { String::new() };
        return Err(Failure::new(
            Reason::Lint,
            format!(
                "the bundle does not lint clean: {}:{}:{}: {}{more}",
                first.finding.file.display(),
                first.position.line,
                first.position.column,
                first.finding.message
            ),
        )
        .with_help(format!("run `rlp lint {}` and fix every error, then {then} again", dir.display())));
    }
    Ok(plan)
}
