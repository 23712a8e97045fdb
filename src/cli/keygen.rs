//! `rlp keygen`.

use std::path::PathBuf;

use clap::Args;

use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::integrity::keys::write_key_pair;

/// Flags of `rlp keygen`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  rlp keygen --out keys --name release\n\nWrites <NAME>.pub (one line `ed25519:<base64>`; share it, e.g. `rlp trust add`) and\n<NAME>.key (mode 0600; keep it secret). Never overwrites a file.\nExit codes: 0 written, 2 a file exists or cannot be written."
)]
pub struct KeygenArgs {
    /// Folder for the key files (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Base name of the files.
    #[arg(long, default_value = "rlp", value_name = "NAME")]
    pub name: String,
}

/// Runs `rlp keygen`.
pub fn run(args: &KeygenArgs, _ctx: &Context) -> CliResult {
    let files = write_key_pair(&args.out, &args.name).map_err(CliError::from)?;
    println!("wrote {} (public key: share it)", files.public_file.display());
    println!("wrote {} (secret key, mode 0600: keep it private)", files.secret_file.display());
    println!("key id {}", files.public.key_id());
    Ok(Exit::Success)
}
