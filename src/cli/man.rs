//! `rlp man`: man pages made from the same clap definitions as `--help`
//! (clap_mangen), one per command in the manner of git and cargo:
//! `rlp.1`, `rlp-tools.1`, `rlp-tools-call.1`, …

use std::path::{Path, PathBuf};

use clap::Args;

use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Printer, diagnostic};

/// Flags of `rlp man`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  rlp man tools call\n  rlp man --out man1\n\nInstall the pages where man finds them, e.g. `rlp man --out ~/.local/share/man/man1`\n(then `man rlp-tools-call`).\nExit codes: 0 printed or written, 2 no such command or the folder cannot be written."
)]
pub struct ManArgs {
    /// The command whose page to print (e.g. `tools call`); none: `rlp` itself.
    #[arg(value_name = "COMMAND")]
    pub command: Vec<String>,
    /// Write every page (rlp.1, rlp-tools.1, rlp-tools-call.1, …) into this folder instead.
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    pub out: Option<PathBuf>,
}

/// One man page: its file name and its roff text.
struct Page {
    file: String,
    roff: Vec<u8>,
}

/// The page of `command`, named after its path of command names.
fn page(command: &clap::Command, path: &[&str]) -> Result<Page, CliError> {
    let name = path.join("-");
    let titled = command.clone().name(name.clone()).display_name(name.clone()).bin_name(path.join(" "));
    let mut roff = Vec::new();
    clap_mangen::Man::new(titled)
        .render(&mut roff)
        .map_err(|e| CliError::problem(format!("cannot render the man page of `{}`: {e}", path.join(" "))))?;
    Ok(Page { file: format!("{name}.1"), roff })
}

/// Every page: `command`'s and, depth first, its subcommands' (but `help`).
fn pages(command: &clap::Command, path: &mut Vec<String>, into: &mut Vec<Page>) -> Result<(), CliError> {
    let names: Vec<&str> = path.iter().map(String::as_str).collect();
    into.push(page(command, &names)?);
    for sub in command.get_subcommands().filter(|s| s.get_name() != "help") {
        path.push(sub.get_name().to_string());
        pages(sub, path, into)?;
        path.pop();
    }
    Ok(())
}

/// Writes every page into `dir` (created if missing), each atomically.
fn write_all(dir: &Path) -> CliResult {
    let mut all = Vec::new();
    let command = super::command_tree();
    pages(&command, &mut vec!["rlp".to_string()], &mut all)?;
    let cannot = |e: std::io::Error| {
        CliError::usage(format!("cannot write man pages into {}: {e}", dir.display()))
            .with_help("check that the folder is writable, or pass another with --out")
    };
    std::fs::create_dir_all(dir).map_err(cannot)?;
    for page in &all {
        crate::fsutil::write_atomic(&dir.join(&page.file), &page.roff, Some(0o644)).map_err(cannot)?;
    }
    diagnostic(&format!("wrote {} man pages into {}", all.len(), dir.display()));
    Ok(Exit::Success)
}

/// Runs `rlp man`.
pub(crate) fn run(args: &ManArgs, _ctx: &Context) -> CliResult {
    if let Some(dir) = &args.out {
        return write_all(dir);
    }
    let command = super::command_tree();
    let mut found = &command;
    let mut path = vec!["rlp"];
    for (i, word) in args.command.iter().enumerate() {
        found = found.find_subcommand(word).filter(|s| s.get_name() != "help").ok_or_else(|| {
            CliError::usage(format!("`rlp {}` is not a command", args.command[..=i].join(" ")))
                .with_help("`rlp --help` lists the commands; `rlp man --out DIR` writes every page")
        })?;
        path.push(found.get_name());
    }
    let page = page(found, &path)?;
    Printer::stdout().finish_with(&String::from_utf8_lossy(&page.roff), Exit::Success)
}
