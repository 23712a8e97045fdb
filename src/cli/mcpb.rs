//! `rlp bundle export-mcpb`.

use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::json;

use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, Printer, path_json, warning};
use crate::cli::terminal::ByteProgress;
use crate::pack::mcpb::export;
use crate::pack::writer::STDOUT;
use crate::text::plural;

/// Flags of `rlp bundle export-mcpb`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  rlp bundle export-mcpb agents/mailer                 # writes ./mailer-0.1.0.mcpb
  mkdir -p dist && rlp bundle export-mcpb agents/mailer -o dist/mailer.mcpb --format json

The .mcpb holds manifest.json, this rlp executable as server/rlp (built for one platform:
export with the rlp of the platform the host runs on) and the bundle folder as
bundle/<name>/, its signature kept. A host that installs it runs
`server/rlp serve --stdio bundle/<name>` and asks its user for one value per secret the
tools declare, passed to rlp as the secret's environment variable. See
docs/distribution.md, \"MCP Bundles\".
Refuses a bundle with lint errors, stale digests, all-zero placeholder digests, or a
signature that no longer matches manifest.toml.
Exit codes: 0 written, 1 bundle not ready, 2 unreadable input or unwritable output.")]
pub struct ExportMcpbArgs {
    /// The bundle folder.
    pub bundle: PathBuf,
    /// The MCP Bundle to write (default `<name>-<version>.mcpb` in the current folder).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Runs `rlp bundle export-mcpb`.
pub(crate) fn run(args: &ExportMcpbArgs, ctx: &crate::cli::Context) -> CliResult {
    if args.output.as_deref() == Some(Path::new(STDOUT)) {
        return Err(CliError::usage("an MCP Bundle is written to a file, not to standard output")
            .with_help("give the file with `-o FILE`, e.g. `-o mailer.mcpb`"));
    }
    let progress = ByteProgress::on_terminal("exporting");
    let exported =
        export(&args.bundle, args.output.clone(), &ctx.registries()?, progress.as_ref()).map_err(CliError::from)?;
    for text in &exported.warnings {
        warning(text);
    }
    let signed = match exported.signed_by {
        Some(id) => format!("signed by key {id}"),
        None => "unsigned".to_string(),
    };
    let summary = format!(
        "wrote {} ({} {}: {}, {}, {signed}): {} bytes",
        exported.path.display(),
        exported.name,
        exported.version,
        plural(exported.tools, "tool"),
        plural(exported.secrets, "secret"),
        exported.bytes
    );
    let json = json!({
        "archive": path_json(&exported.path),
        "name": exported.name,
        "version": exported.version,
        "tools": exported.tools,
        "secrets": exported.secrets,
        "bytes": exported.bytes,
        "signed_by": exported.signed_by.map(|id| id.to_string()),
        "warnings": exported.warnings,
    });
    let mut out = Printer::stdout();
    out.report(args.format, &summary, &json)?;
    out.finish(Exit::Success)
}
