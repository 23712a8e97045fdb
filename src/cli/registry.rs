//! `rlp bundle push` and `rlp bundle pull`: archives in OCI registries.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, Printer, path_json, warning};
use crate::cli::terminal::ByteProgress;
use crate::integrity::verify::Verified;
use crate::oci::credentials::{self, Credentials};
use crate::oci::reference::OciReference;
use crate::oci::{self, Remote};

/// Flags of `rlp bundle push`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  rlp bundle push mailer-0.1.0.bundle.tar.gz oci://registry.example.com/agents/mailer:0.1.0\n  rlp bundle push mailer-0.1.0.bundle.tar.gz oci://registry.example.com/agents/mailer   # tag = the version\n  rlp bundle push mailer-0.1.0.bundle.tar.gz oci://localhost:5000/mailer:dev --plain-http\n\nThe archive is verified first (sizes, digests, file set, a valid signature when signed)\nand stored unchanged as the one layer of an OCI artifact of type\napplication/vnd.runloop.bundle.v1, annotated with its name, version and signer key id.\nCredentials: RLP_REGISTRY_TOKEN (a bearer token) for the registry RLP_REGISTRY_TOKEN_HOST\nnames, else the `auths` entry for the registry in $DOCKER_CONFIG/config.json or\n~/.docker/config.json; they are never printed.\nExit codes: 0 pushed, 1 the archive failed verification, 2 unreadable archive, bad\nreference, or the registry refused or could not be reached."
)]
pub struct PushArgs {
    /// The packed bundle (`rlp bundle pack`).
    pub archive: PathBuf,
    /// Where to: oci://HOST[:PORT]/REPOSITORY[:TAG] (without a tag, the bundle's version).
    #[arg(value_name = "oci://HOST[:PORT]/REPO[:TAG]")]
    pub reference: String,
    /// Speak plain HTTP, for a registry on this machine (localhost, 127.0.0.0/8, ::1) only.
    #[arg(long)]
    pub plain_http: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Flags of `rlp bundle pull`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  rlp bundle pull oci://registry.example.com/agents/mailer:0.1.0\n  rlp bundle pull oci://registry.example.com/agents/mailer@sha256:<digest> -o mailer.bundle.tar.gz\n  rlp bundle pull oci://localhost:5000/mailer:dev --plain-http -o /tmp/mailer.bundle.tar.gz\n\nThe layer is checked against its digest as it arrives, then the archive is verified\n(sizes, digests, file set, a valid signature when signed) before it is renamed into\nplace: nothing is written when either fails. Whom to trust is decided by\n`rlp bundle verify` or `rlp agent install`, against the trust policy.\nExit codes: 0 pulled, 1 a digest does not match or the archive failed verification,\n2 bad reference, not an rlp bundle, or the registry refused or could not be reached."
)]
pub struct PullArgs {
    /// oci://HOST[:PORT]/REPOSITORY:TAG or …/REPOSITORY@sha256:DIGEST.
    #[arg(value_name = "oci://HOST[:PORT]/REPO:TAG")]
    pub reference: String,
    /// The archive to write (default `<name>-<version>.bundle.tar.gz` in the current folder).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Speak plain HTTP, for a registry on this machine (localhost, 127.0.0.0/8, ::1) only.
    #[arg(long)]
    pub plain_http: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Parses a reference and finds its credentials, warning about ones rlp cannot use.
pub(crate) fn remote_reference(text: &str) -> Result<(OciReference, Credentials), CliError> {
    let reference = OciReference::parse(text).map_err(CliError::from)?;
    let (found, unused) = credentials::for_registry(&reference.registry).map_err(CliError::from)?;
    if let Some(unused) = unused {
        warning(unused);
    }
    Ok((reference, found))
}

/// Pulls `text` for `rlp bundle pull` and `rlp agent install`.
pub(crate) fn pull(text: &str, plain_http: bool, output: Option<&std::path::Path>) -> Result<oci::Pulled, CliError> {
    let (reference, credentials) = remote_reference(text)?;
    if reference.target.is_none() {
        return Err(CliError::usage(format!("{reference} names neither a tag nor a digest"))
            .with_help(format!("pull a tag or a digest: {reference}:TAG or {reference}@sha256:…")));
    }
    let progress = ByteProgress::on_terminal("pulling");
    let remote = Remote { reference, credentials: &credentials, plain_http };
    oci::pull(remote, output, progress.as_ref()).map_err(CliError::from)
}

/// "name version, signed by key K" or "…, unsigned".
fn described(v: &Verified) -> String {
    match &v.signer {
        Some(s) => format!("{} {}, signed by key {}", v.name, v.version, s.key_id),
        None => format!("{} {}, unsigned", v.name, v.version),
    }
}

/// Runs `rlp bundle push`.
pub(crate) fn run_push(args: &PushArgs) -> CliResult {
    let (reference, credentials) = remote_reference(&args.reference)?;
    let remote = Remote { reference, credentials: &credentials, plain_http: args.plain_http };
    let pushed = oci::push(&args.archive, remote).map_err(CliError::from)?;
    let v = &pushed.verified;
    let human = format!(
        "pushed {} ({}: {} bytes) to {}\ndigest {}",
        args.archive.display(),
        described(v),
        pushed.bytes,
        pushed.reference,
        pushed.manifest_digest
    );
    let json = json!({
        "archive": path_json(&args.archive),
        "reference": pushed.reference.to_string(),
        "digest": pushed.manifest_digest,
        "layer_digest": pushed.layer_digest,
        "bytes": pushed.bytes,
        "name": v.name,
        "version": v.version.to_string(),
        "signer": v.signer.as_ref().map(|s| s.key_id.to_string()),
    });
    let mut out = Printer::stdout();
    out.report(args.format, &human, &json)?;
    out.finish(Exit::Success)
}

/// Runs `rlp bundle pull`.
pub(crate) fn run_pull(args: &PullArgs) -> CliResult {
    let pulled = pull(&args.reference, args.plain_http, args.output.as_deref())?;
    let v = &pulled.verified;
    let human = format!(
        "pulled {} into {} ({}: {} files, {} bytes)\ndigest {}, layer {} verified",
        args.reference,
        pulled.path.display(),
        described(v),
        v.files,
        pulled.bytes,
        pulled.manifest_digest,
        pulled.layer_digest
    );
    let json = json!({
        "reference": args.reference,
        "archive": path_json(&pulled.path),
        "digest": pulled.manifest_digest,
        "layer_digest": pulled.layer_digest,
        "bytes": pulled.bytes,
        "name": v.name,
        "version": v.version.to_string(),
        "files": v.files,
        "signer": v.signer.as_ref().map(|s| s.key_id.to_string()),
    });
    let mut out = Printer::stdout();
    out.report(args.format, &human, &json)?;
    out.finish(Exit::Success)
}
