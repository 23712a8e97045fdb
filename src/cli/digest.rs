//! `rlp digest`.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, print_json};
use crate::integrity::digest::{self, Change};
use crate::integrity::signature::SIGNATURE_FILE;

/// Flags of `rlp digest`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  rlp digest agents/mailer            update manifest.toml\n  rlp digest agents/mailer --check    CI gate: exit 1 if anything is stale, missing or extra\n\nOnly the `size` and `blake3` values (and entries of added or removed files) change;\ncomments, order and layout of manifest.toml are kept.\nExit codes: 0 done (or up to date), 1 out of date with --check, or a link/device in the\nbundle, 2 unreadable bundle or manifest."
)]
pub struct DigestArgs {
    /// The bundle folder.
    pub bundle: PathBuf,
    /// Write nothing; exit 1 naming each stale, missing or extra entry.
    #[arg(long)]
    pub check: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

fn verb(change: &Change) -> &'static str {
    match change {
        Change::Added(_) => "added",
        Change::Updated(_) => "updated",
        Change::Removed(_) => "removed",
    }
}

fn why(change: &Change) -> &'static str {
    match change {
        Change::Added(_) => "in the bundle but not listed",
        Change::Updated(_) => "size or digest changed",
        Change::Removed(_) => "listed but not in the bundle",
    }
}

/// Runs `rlp digest`.
pub fn run(args: &DigestArgs, _ctx: &Context) -> CliResult {
    let result = if args.check { digest::check(&args.bundle) } else { digest::write(&args.bundle).map(|p| p.changes) };
    let changes = match result {
        Ok(changes) => changes,
        Err(e) => {
            let failure = crate::integrity::digest_failure(e);
            if args.format == Format::Json {
                let _ = print_json(&json!({
                    "bundle": args.bundle.display().to_string(),
                    "error": crate::cli::bundle::failure_json(&failure),
                }));
            }
            return Err(CliError::from(failure));
        }
    };
    let stale = args.check && !changes.is_empty();
    let signature = args.bundle.join(SIGNATURE_FILE);
    if !args.check && !changes.is_empty() && signature.exists() {
        eprintln!(
            "warning: {SIGNATURE_FILE} no longer matches manifest.toml; sign again: `rlp sign {} --key <file.key>`",
            args.bundle.display()
        );
    }
    match args.format {
        Format::Json => {
            let items: Vec<_> =
                changes.iter().map(|c| json!({"path": c.path(), "change": verb(c), "check": c.check_word()})).collect();
            let _ = print_json(&json!({
                "bundle": args.bundle.display().to_string(),
                "up_to_date": changes.is_empty(),
                "written": !args.check && !changes.is_empty(),
                "changes": items,
            }));
        }
        Format::Human => {
            let mut out = std::io::stdout().lock();
            for change in &changes {
                let _ = if args.check {
                    writeln!(out, "{}: {} ({})", change.check_word(), change.path(), why(change))
                } else {
                    writeln!(out, "{} {}", verb(change), change.path())
                };
            }
            if changes.is_empty() {
                let _ = writeln!(out, "manifest.toml is up to date");
            } else if !args.check {
                let count = |word: &str| changes.iter().filter(|c| verb(c) == word).count();
                let _ = writeln!(
                    out,
                    "updated manifest.toml: {} added, {} updated, {} removed",
                    count("added"),
                    count("updated"),
                    count("removed")
                );
            }
        }
    }
    if stale {
        let entries = if changes.len() == 1 { "1 entry".to_string() } else { format!("{} entries", changes.len()) };
        if args.format == Format::Human {
            return Err(CliError::problem(format!("manifest.toml is out of date: {entries}"))
                .with_help(format!("run `rlp digest {}` to update it", args.bundle.display())));
        }
        return Ok(Exit::Problems);
    }
    Ok(Exit::Success)
}
