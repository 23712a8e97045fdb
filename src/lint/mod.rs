//! `rlp lint`: every rule over one bundle or a folder of bundles.
//!
//! Loading a bundle ([`crate::bundle::load`]) reports what is wrong with each
//! file on its own (syntax, types, unknown keys, malformed values); the rules
//! in [`rules`] check what spans files and the file system (ids, schemas,
//! grants, digests). [`render`] prints the findings.

pub(crate) mod against;
pub(crate) mod render;
pub(crate) mod rules;

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::bundle::diag::{Finding, Severity};
use crate::bundle::manifest::MANIFEST_FILE;
use crate::bundle::registry::Registries;
use crate::bundle::source::Position;
use crate::bundle::{self, LoadedBundle};

/// A finding with its position resolved, ready to print.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Located {
    /// The finding.
    pub finding: Finding,
    /// Byte range in the file, when it points inside one.
    pub span: Option<std::ops::Range<usize>>,
    /// Line and column of the span's start (1:1 for whole-file findings).
    pub position: Position,
}

/// The lint result of one bundle.
#[derive(Debug)]
pub(crate) struct BundleReport {
    /// The bundle as loaded (kept for quoting source lines).
    pub bundle: LoadedBundle,
    /// Findings, sorted by file, line, column and code.
    pub findings: Vec<Located>,
}

impl BundleReport {
    /// Number of findings at a severity.
    pub(crate) fn count(&self, severity: Severity) -> usize {
        self.findings.iter().filter(|l| l.finding.severity == severity).count()
    }
}

/// What the rules that take a setting are given (`rlp lint` flags, and
/// the host's shared schema registries).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Settings {
    /// RLP217: bundles with more tools than this should mark some core.
    pub core_threshold: usize,
    /// Where a `schema:<id>` the bundle does not hold is looked for.
    pub registries: Registries,
}

impl Settings {
    /// The default settings with the shared schema registries `registries`.
    pub(crate) fn with_registries(registries: &Registries) -> Settings {
        Settings { core_threshold: rules::DEFAULT_CORE_THRESHOLD, registries: registries.clone() }
    }
}

/// Loads a bundle and runs every rule on it with the default settings,
/// resolving shared schemas in `registries`.
pub(crate) fn lint_bundle(dir: &Path, registries: &Registries) -> BundleReport {
    lint_bundle_with(dir, &Settings::with_registries(registries))
}

/// Loads a bundle and runs every rule on it.
pub(crate) fn lint_bundle_with(dir: &Path, settings: &Settings) -> BundleReport {
    let mut bundle = bundle::load_with(dir, &settings.registries);
    let mut findings = std::mem::take(&mut bundle.findings);
    rules::check_all(&bundle, settings, &mut findings);
    let mut located: Vec<Located> = findings.into_iter().map(|f| locate(&bundle, f)).collect();
    located.sort_by(|a, b| {
        (&a.finding.file, a.position.line, a.position.column, a.finding.code).cmp(&(
            &b.finding.file,
            b.position.line,
            b.position.column,
            b.finding.code,
        ))
    });
    located.dedup();
    BundleReport { bundle, findings: located }
}

/// Resolves a finding's position in its file.
pub(crate) fn locate(bundle: &LoadedBundle, finding: Finding) -> Located {
    let source = bundle.sources.values().find(|s| s.path() == finding.file);
    let span = source.and_then(|s| s.locate(&finding.at));
    let position = match (source, &span) {
        (Some(source), Some(span)) => source.position(span.start),
        _ => Position { line: 1, column: 1 },
    };
    Located { finding, span, position }
}

/// Whether `dir` is a bundle (holds a manifest.toml).
pub(crate) fn is_bundle(dir: &Path) -> bool {
    dir.join(MANIFEST_FILE).is_file()
}

/// Expands lint arguments into bundle folders: a bundle stands for itself, a
/// folder for the bundles directly inside it (sorted by name).
pub(crate) fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut bundles = Vec::new();
    for path in paths {
        let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if !meta.is_dir() {
            return Err(format!(
                "{} is not a folder; lint takes a bundle folder or a folder of bundles",
                path.display()
            ));
        }
        if is_bundle(path) {
            bundles.push(path.clone());
            continue;
        }
        let mut found: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?
            .filter_map(|entry| entry.ok())
            .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
            .map(|entry| entry.path())
            .filter(|dir| is_bundle(dir))
            .collect();
        if found.is_empty() {
            return Err(format!(
                "{} holds no bundle (no manifest.toml in it or in the folders directly inside it)",
                path.display()
            ));
        }
        found.sort();
        bundles.extend(found);
    }
    Ok(bundles)
}

/// Lints many bundles in parallel, keeping their order.
pub(crate) fn lint_all(dirs: &[PathBuf], settings: &Settings) -> Vec<BundleReport> {
    dirs.par_iter().map(|dir| lint_bundle_with(dir, settings)).collect()
}
