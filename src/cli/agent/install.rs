//! `rlp agent install` and `rlp agent list`.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, Printer, path_json, warning};
use crate::pack::install::{InstallOptions, download_folder, install, list};

/// Flags of `rlp agent install`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  rlp agent install mailer-0.1.0.bundle.tar.gz\n  rlp agent install agents/demo --allow-unsigned\n  rlp agent install oci://registry.example.com/agents/mailer:0.1.0\n\nFrom oci://, the archive is pulled first as `rlp bundle pull` does (digest and content\nchecked), into a private folder under $RUNLOOP_HOME/agents/.\nThe bundle is extracted into a private staging folder under $RUNLOOP_HOME/agents/,\nverified there against trust-policy.toml, then renamed into $RUNLOOP_HOME/agents/<name>.\nExit codes: 0 installed, 1 verification failed, 2 unreadable input or the same version\nis installed (use --force), 3 refused by policy (unsigned, untrusted or revoked signer,\ncapabilities beyond the signer's rule, older than the installed version)."
)]
pub struct InstallArgs {
    /// A bundle folder, a packed archive, or oci://HOST[:PORT]/REPO:TAG in a registry.
    pub source: PathBuf,
    /// For oci://: speak plain HTTP, to a registry on this machine only.
    #[arg(long)]
    pub plain_http: bool,
    /// Install a bundle that carries no signature.
    #[arg(long)]
    pub allow_unsigned: bool,
    /// Replace an installed bundle of the same version.
    #[arg(long)]
    pub force: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Flags of `rlp agent list`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  rlp agent list\n  rlp agent list --format json --home /srv/runloop\n\nEvery installed bundle is verified again against the current trust policy.\nStatus: ok, unsigned, digest mismatch, files changed, bad signature, untrusted, revoked,\ncapabilities beyond rule, invalid. Exit codes: 0 every bundle ok or unsigned, 1 otherwise."
)]
pub struct ListArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Runs `rlp agent install`.
pub(crate) fn run_install(args: &InstallArgs, ctx: &Context) -> CliResult {
    let options = InstallOptions { allow_unsigned: args.allow_unsigned, force: args.force };
    let remote = args.source.to_str().filter(|s| s.starts_with(crate::oci::reference::SCHEME));
    if args.plain_http && remote.is_none() {
        return Err(CliError::usage("--plain-http applies to an oci:// source only")
            .with_help("drop --plain-http, or install from oci://HOST[:PORT]/REPO:TAG"));
    }
    let installed = match remote {
        Some(reference) => {
            let (folder, _tracked) = download_folder(&ctx.home).map_err(CliError::from)?;
            let archive = folder.path().join("bundle.tar.gz");
            let pulled = crate::cli::registry::pull(reference, args.plain_http, Some(&archive))?;
            install(&ctx.home, &pulled.path, options, &ctx.registries()?)
        }
        None => install(&ctx.home, &args.source, options, &ctx.registries()?),
    }
    .map_err(CliError::from)?;
    let v = &installed.verified;
    let signer = match &v.signer {
        Some(s) => format!("signed by `{}`, key {}", s.anchor.as_deref().unwrap_or("-"), s.key_id),
        None => {
            warning(format_args!("{} is not signed; installed because of --allow-unsigned", v.name));
            "unsigned".to_string()
        }
    };
    let mut human = format!("installed {} {} ({signer}) in {}", v.name, v.version, installed.path.display());
    if let Some(old) = &installed.replaced {
        human.push_str(&format!("\nreplaced {old}"));
    }
    let json = json!({
        "name": v.name,
        "version": v.version.to_string(),
        "path": path_json(&installed.path),
        "signer": v.signer.as_ref().map(|s| json!({"key_id": s.key_id.to_string(), "anchor": s.anchor})),
        "replaced": installed.replaced.as_ref().map(ToString::to_string),
    });
    let mut out = Printer::stdout();
    out.report(args.format, &human, &json)?;
    out.finish(Exit::Success)
}

/// Runs `rlp agent list`.
pub(crate) fn run_list(args: &ListArgs, ctx: &Context) -> CliResult {
    let rows = list(&ctx.home).map_err(CliError::from)?;
    let exit = if rows.iter().all(|r| r.status.is_usable()) { Exit::Success } else { Exit::Problems };
    let mut out = Printer::stdout();
    match args.format {
        Format::Json => {
            let items: Vec<_> = rows
                .iter()
                .map(|r| {
                    json!({
                        "name": r.name,
                        "version": r.version,
                        "status": r.status.as_str(),
                        "detail": if r.detail.is_empty() { None } else { Some(&r.detail) },
                        "signer": r.signer.as_ref().map(|s| json!({"key_id": s.key_id.to_string(), "anchor": s.anchor})),
                    })
                })
                .collect();
            out.json(&json!({"agents": items})).map_err(|e| e.ending(exit))?;
        }
        Format::Human => {
            if rows.is_empty() {
                out.line(format_args!("no agents installed in {}", ctx.home.agents_dir().display()))
                    .map_err(|e| e.ending(exit))?;
            }
            let name_w = rows.iter().map(|r| r.name.len()).max().unwrap_or(0);
            let version_w = rows.iter().map(|r| r.version.as_deref().map_or(1, str::len)).max().unwrap_or(0);
            for row in &rows {
                let signer = match &row.signer {
                    Some(s) => format!("  {} ({})", s.anchor.as_deref().unwrap_or("-"), s.key_id),
                    None => String::new(),
                };
                let detail = if row.detail.is_empty() { String::new() } else { format!(": {}", row.detail) };
                out.line(format_args!(
                    "{:name_w$}  {:version_w$}  {}{detail}{signer}",
                    row.name,
                    row.version.as_deref().unwrap_or("?"),
                    row.status.as_str()
                ))
                .map_err(|e| e.ending(exit))?;
            }
        }
    }
    out.finish(exit)
}
