//! `rlp digest`.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, Printer, warning};
use crate::integrity::digest::{self, Change};
use crate::integrity::signature::SIGNATURE_FILE;

/// Flags of `rlp digest`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  rlp digest agents/mailer            # update manifest.toml\n  rlp digest agents/mailer --check    # the CI gate: exit 1 if anything is stale, missing or extra\n\nOnly the `size` and `blake3` values (and entries of added or removed files) change;\ncomments, order and layout of manifest.toml are kept. A `schema:<id>` found in a shared\nregistry is pinned as `[shared_schemas.\"<id>\"]` (`schema:<id>` in the list of changes).\nExit codes: 0 done (or up to date), 1 out of date with --check, or a link/device in the\nbundle, 2 unreadable bundle or manifest."
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
        Change::Added(_) if change.is_pin() => "found in a shared schema registry but not pinned",
        Change::Updated(_) if change.is_pin() => "the shared registry file's size or digest changed",
        Change::Removed(_) if change.is_pin() => "pinned but no longer referenced outside the bundle",
        Change::Added(_) => "in the bundle but not listed",
        Change::Updated(_) => "size or digest changed",
        Change::Removed(_) => "listed but not in the bundle",
    }
}

/// Runs `rlp digest`.
pub(crate) fn run(args: &DigestArgs, ctx: &Context) -> CliResult {
    let registries = ctx.registries()?;
    let result = if args.check {
        digest::check(&args.bundle, &registries)
    } else {
        digest::write(&args.bundle, &registries).map(|p| p.changes)
    };
    let mut out = Printer::stdout();
    let changes = match result {
        Ok(changes) => changes,
        Err(e) => {
            let failure = crate::integrity::digest_failure(e);
            if args.format == Format::Json {
                let _ = out.json(&json!({
                    "bundle": args.bundle.display().to_string(),
                    "error": crate::cli::bundle::failure_json(&failure),
                }));
            }
            return out.fail(CliError::from(failure));
        }
    };
    let stale = args.check && !changes.is_empty();
    let signature = args.bundle.join(SIGNATURE_FILE);
    if !args.check && !changes.is_empty() && signature.exists() {
        warning(format_args!(
            "{SIGNATURE_FILE} no longer matches manifest.toml; sign again: `rlp sign {} --key <file.key>`",
            args.bundle.display()
        ));
    }
    match args.format {
        Format::Json => {
            let items: Vec<_> =
                changes.iter().map(|c| json!({"path": c.path(), "change": verb(c), "check": c.check_word()})).collect();
            out.json(&json!({
                "bundle": args.bundle.display().to_string(),
                "up_to_date": changes.is_empty(),
                "written": !args.check && !changes.is_empty(),
                "changes": items,
            }))?;
        }
        Format::Human => {
            for change in &changes {
                if args.check {
                    out.line(format_args!("{}: {} ({})", change.check_word(), change.path(), why(change)))?;
                } else {
                    out.line(format_args!("{} {}", verb(change), change.path()))?;
                }
            }
            if changes.is_empty() {
                out.line("manifest.toml is up to date")?;
            } else if !args.check {
                let count = |word: &str| changes.iter().filter(|c| verb(c) == word).count();
                out.line(format_args!(
                    "updated manifest.toml: {} added, {} updated, {} removed",
                    count("added"),
                    count("updated"),
                    count("removed")
                ))?;
            }
        }
    }
    if stale {
        let entries = if changes.len() == 1 { "1 entry".to_string() } else { format!("{} entries", changes.len()) };
        if args.format == Format::Human {
            return out.fail(
                CliError::problem(format!("manifest.toml is out of date: {entries}"))
                    .with_help(format!("run `rlp digest {}` to update it", args.bundle.display())),
            );
        }
        return out.finish(Exit::Problems);
    }
    out.finish(Exit::Success)
}
