//! `rlp lint --against PREVIOUS`: the previous release read (a bundle folder,
//! or an archive unpacked into a private temporary folder with the archive
//! reader's limits) and compared ([`crate::lint::against`]).

use std::fmt::Write as _;
use std::path::Path;

use crate::cli::exit::CliError;
use crate::lint::against::{self, Release};
use crate::pack::extract::DirSink;
use crate::pack::reader::{Limits, read_archive};
use crate::text::terminal_safe_line;

/// The report of `dir` against `previous`, and whether the version is too
/// low for what changed.
pub(super) fn report(dir: &Path, previous: &Path) -> Result<(String, bool), CliError> {
    let unpacked;
    let previous_dir = if previous.is_dir() {
        previous
    } else {
        unpacked = unpack(previous)?;
        unpacked.path()
    };
    let read = |dir: &Path| {
        Release::read(dir).map_err(|why| {
            CliError::usage(why).with_help("--against takes the previous release's bundle folder or archive")
        })
    };
    let (before, now) = (read(previous_dir)?, read(dir)?);
    let changes = against::compare(&before, &now);
    let bump = against::needed(&changes);
    let versions = (before.version.as_deref().unwrap_or("?"), now.version.as_deref().unwrap_or("?"));
    let mut text = format!("against {} ({} → {}):\n", previous.display(), versions.0, versions.1);
    for change in &changes {
        let _ = writeln!(text, "  {:<5}  {}", change.bump.as_str(), terminal_safe_line(&change.what));
    }
    if changes.is_empty() {
        text.push_str("  no change a caller of its tools can see\n");
    }
    let verdict = match (&before.version, &now.version, changes.is_empty()) {
        (_, _, true) => Ok(()),
        (Some(old), Some(new), false) => against::bumped_enough(old, new, bump),
        _ => Err("a manifest has no version".to_string()),
    };
    let fails = verdict.is_err();
    match verdict {
        Ok(()) if changes.is_empty() => {}
        Ok(()) => {
            let _ = writeln!(text, "  the changes need a {} version bump, and the version makes it", bump.as_str());
        }
        Err(why) => {
            let _ = writeln!(text, "error: the changes need a {} version bump: {why}", bump.as_str());
        }
    }
    Ok((text, fails))
}

/// `archive` unpacked into a temporary folder, checked as `rlp bundle
/// verify` reads it.
fn unpack(archive: &Path) -> Result<tempfile::TempDir, CliError> {
    let file = std::fs::File::open(archive).map_err(|e| {
        CliError::usage(format!("cannot read {}: {e}", archive.display()))
            .with_help("--against takes the previous release's bundle folder or archive")
    })?;
    let folder = tempfile::tempdir().map_err(|e| CliError::problem(format!("cannot make a temporary folder: {e}")))?;
    read_archive(std::io::BufReader::new(file), &Limits::default(), &mut DirSink::new(folder.path())).map_err(
        |failure| CliError::usage(format!("{} is not a bundle archive rlp reads: {failure}", archive.display())),
    )?;
    Ok(folder)
}
