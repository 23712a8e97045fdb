//! `rlp sign`.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, Printer, path_json};
use crate::integrity::keys::SecretKey;
use crate::integrity::signature::sign_bundle;

/// Flags of `rlp sign`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  rlp digest agents/mailer && rlp sign agents/mailer --key keys/release.key\n\nSigns the exact bytes of manifest.toml (which carries every file's size and BLAKE3)\ninto SIGNATURES/manifest.sig. Refuses a bundle whose digests are out of date.\nExit codes: 0 signed, 1 stale digests or links in the bundle, 2 unreadable bundle or key."
)]
pub struct SignArgs {
    /// The bundle folder.
    pub bundle: PathBuf,
    /// The secret key file written by `rlp keygen` (mode 0600).
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Runs `rlp sign`.
pub(crate) fn run(args: &SignArgs, ctx: &Context) -> CliResult {
    let key = SecretKey::load(&args.key).map_err(CliError::from)?;
    let signed = sign_bundle(&args.bundle, &key, &ctx.registries()?).map_err(CliError::from)?;
    let key_id = signed.signature.key_id();
    let human = format!("signed {} with key {key_id}", signed.path.display());
    let json =
        json!({"bundle": path_json(&args.bundle), "signature": path_json(&signed.path), "key_id": key_id.to_string()});
    let mut out = Printer::stdout();
    out.report(args.format, &human, &json)?;
    out.finish(Exit::Success)
}
