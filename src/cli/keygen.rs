//! `rlp keygen`.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, Printer, path_json};
use crate::integrity::keys::write_key_pair;

/// Flags of `rlp keygen`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  rlp keygen --out keys --name ci\n\nWrites <NAME>.pub (one line `ed25519:<base64>`; share it, e.g. `rlp trust add`) and\n<NAME>.key (mode 0600; keep it secret). Never overwrites a file.\nExit codes: 0 written, 2 a file exists or cannot be written."
)]
pub struct KeygenArgs {
    /// Folder for the key files (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Base name of the files.
    #[arg(long, default_value = "rlp", value_name = "NAME")]
    pub name: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Runs `rlp keygen`.
pub(crate) fn run(args: &KeygenArgs, _ctx: &Context) -> CliResult {
    let files = write_key_pair(&args.out, &args.name).map_err(CliError::from)?;
    let key_id = files.public.key_id();
    let human = format!(
        "wrote {} (public key: share it)\nwrote {} (secret key, mode 0600: keep it private)\nkey id {key_id}",
        files.public_file.display(),
        files.secret_file.display()
    );
    let json = json!({"public_file": path_json(&files.public_file), "secret_file": path_json(&files.secret_file), "key_id": key_id.to_string()});
    let mut out = Printer::stdout();
    out.report(args.format, &human, &json)?;
    out.finish(Exit::Success)
}
