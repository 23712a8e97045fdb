//! `rlp bundle pack` and `rlp bundle verify`; push and pull are in
//! [`crate::cli::registry`], `rlp bundle export-mcpb` in [`crate::cli::mcpb`].

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, Printer, diagnostic, json_text, path_json};
use crate::cli::terminal::ByteProgress;
use crate::error::Reportable;
use crate::integrity::failure::Failure;
use crate::integrity::keys::{PublicKey, SecretKey};
use crate::integrity::trust::TrustPolicy;
use crate::integrity::verify::{Options, Trust, Verified};
use crate::pack::reader::Encoding;
use crate::pack::reader::Format as ArchiveFormat;
use crate::pack::verify_path;
use crate::pack::writer::{Destination, PackOptions, STDOUT, check, default_archive, pack};

/// `rlp bundle …`
#[derive(Debug, Subcommand)]
pub enum BundleCommand {
    /// Pack a bundle into a reproducible .tar.gz (byte-identical for identical content).
    Pack(PackArgs),
    /// Verify a bundle folder or archive: sizes, digests, file set, signature, trust policy.
    Verify(VerifyArgs),
    /// Push a packed bundle to an OCI registry (oci://HOST/REPO:TAG).
    Push(crate::cli::registry::PushArgs),
    /// Pull a packed bundle from an OCI registry, checking its digest and content.
    Pull(crate::cli::registry::PullArgs),
    /// Export a bundle, with rlp to serve it, as an MCP Bundle (.mcpb) for desktop hosts.
    #[command(name = "export-mcpb")]
    ExportMcpb(crate::cli::mcpb::ExportMcpbArgs),
}

/// Flags of `rlp bundle pack`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  rlp bundle pack agents/mailer                        # writes ./mailer-0.1.0.bundle.tar.gz\n  mkdir -p dist && rlp bundle pack agents/mailer --key keys/release.key -o dist/mailer.bundle.tar.gz\n  rlp bundle pack agents/mailer --check -o dist/mailer.bundle.tar.gz   # is it what pack writes?\n  rlp bundle pack agents/mailer -o - | ssh host 'cat > mailer.bundle.tar.gz'\n\nRefuses a bundle with lint errors, stale digests, all-zero placeholder digests, or a\nsignature that no longer matches manifest.toml.\n--check writes nothing: it packs the bundle in memory and compares the result with the\narchive (-o, or the default name) byte for byte, naming the first difference: a file\nmissing, extra or changed, or the first byte of another compression of the same files.\nExit codes: 0 written (with --check: the archive is identical), 1 bundle not ready or\n(--check) the archive differs, 2 unreadable input."
)]
pub struct PackArgs {
    /// The bundle folder.
    pub bundle: PathBuf,
    /// The archive to write (default `<name>-<version>.bundle.tar.gz` in the current folder;
    /// `-` for standard output, with the summary on standard error).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Sign the bundle with this secret key before packing.
    #[arg(long, value_name = "FILE", conflicts_with = "check")]
    pub key: Option<PathBuf>,
    /// Write nothing; check that the archive (-o, or the default name) is byte for byte
    /// what pack would write for the bundle (exit 1 naming the first difference).
    #[arg(long)]
    pub check: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Flags of `rlp bundle verify`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  rlp bundle verify mailer-0.1.0.bundle.tar.gz --require-signature\n  rlp bundle verify agents/mailer --key keys/release.pub\n\nWithout --key, the signer must be a trust anchor of $RUNLOOP_HOME/trust-policy.toml,\nnot revoked, and the bundle's capabilities must be within the anchor's rule.\nAn archive is checked as it inflates (its chunks on every core): every entry's type, name,\nsize and digest, the file set, the limits, the gzip checksum, nothing after the end.\nThat accepts another compression of the same files, which `rlp bundle pack` would not\nhave written; --canonical also refuses it, by compressing the content again (slower).\nExit codes: 0 verified, 1 verification failed (tampering, bad signature, unsafe archive,\nwith --canonical an encoding pack does not write), 2 unreadable input, 3 refused by policy\n(unsigned with --require-signature, untrusted or revoked signer, capabilities beyond the\nsigner's rule)."
)]
pub struct VerifyArgs {
    /// A bundle folder or a .bundle.tar.gz archive.
    pub source: PathBuf,
    /// Verify against this public key (`.pub` file) instead of the trust anchors and rules
    /// (keys revoked in the trust policy are still refused).
    #[arg(long, value_name = "PUB")]
    pub key: Option<PathBuf>,
    /// Refuse a bundle without a signature (implied by --key).
    #[arg(long)]
    pub require_signature: bool,
    /// For an archive: also check that its compressed bytes are the canonical encoding
    /// `rlp bundle pack` writes (byte-reproducibility); slower.
    #[arg(long)]
    pub canonical: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Runs a `bundle` subcommand.
pub(crate) fn run(command: BundleCommand, ctx: &Context) -> CliResult {
    match command {
        BundleCommand::Pack(args) => run_pack(&args, ctx),
        BundleCommand::Verify(args) => run_verify(&args, ctx),
        BundleCommand::Push(args) => crate::cli::registry::run_push(&args),
        BundleCommand::Pull(args) => crate::cli::registry::run_pull(&args),
        BundleCommand::ExportMcpb(args) => crate::cli::mcpb::run(&args, ctx),
    }
}

fn run_pack(args: &PackArgs, ctx: &Context) -> CliResult {
    if args.check {
        return run_pack_check(args, ctx);
    }
    let key = args.key.as_deref().map(SecretKey::load).transpose().map_err(CliError::from)?;
    let mut out = Printer::stdout();
    let to_stdout = args.output.as_deref() == Some(Path::new(STDOUT));
    if to_stdout && out.is_terminal() {
        return Err(CliError::usage("refusing to write a binary archive to a terminal")
            .with_help("redirect standard output to a file or a pipe, or give `-o FILE`"));
    }
    let output = match &args.output {
        _ if to_stdout => Destination::Stream(&mut out),
        Some(path) => Destination::File(path.clone()),
        None => Destination::DefaultFile,
    };
    let progress = ByteProgress::on_terminal("packing");
    let packed = match pack(
        &args.bundle,
        PackOptions { output, key: key.as_ref(), registries: ctx.registries()? },
        progress.as_ref(),
    ) {
        Ok(packed) => packed,
        // The archive could not be written to standard output: say so as every command does.
        Err(_) if out.has_failed() => return out.finish(Exit::Success),
        Err(failure) => return Err(CliError::from(failure)),
    };
    let signed = match packed.signed_by {
        Some(id) => format!("signed by key {id}"),
        None => "unsigned".to_string(),
    };
    let summary = format!(
        "wrote {} ({} {}: {} files, {signed}): {} bytes\nblake3 {}",
        packed.path.display(),
        packed.name,
        packed.version,
        packed.files,
        packed.bytes,
        packed.digest
    );
    let json = json!({
        "archive": path_json(&packed.path),
        "name": packed.name,
        "version": packed.version,
        "files": packed.files,
        "bytes": packed.bytes,
        "blake3": packed.digest.to_string(),
        "signed_by": packed.signed_by.map(|id| id.to_string()),
    });
    if to_stdout {
        // Standard output carries the archive.
        diagnostic(&summary);
    } else {
        out.report(args.format, &summary, &json)?;
    }
    out.finish(Exit::Success)
}

fn run_pack_check(args: &PackArgs, ctx: &Context) -> CliResult {
    let archive = match &args.output {
        Some(path) if path.as_os_str() == STDOUT => {
            return Err(CliError::usage("--check compares with an archive file, not standard output")
                .with_help("give the archive with `-o FILE`"));
        }
        Some(path) => path.clone(),
        None => default_archive(&args.bundle).map_err(CliError::from)?,
    };
    let progress = ByteProgress::on_terminal("checking");
    let checked = check(&args.bundle, &archive, &ctx.registries()?, progress.as_ref()).map_err(CliError::from)?;
    let summary = format!(
        "{} is what `rlp bundle pack` writes for {} ({} {}: {} files): {} bytes, identical",
        archive.display(),
        args.bundle.display(),
        checked.name,
        checked.version,
        checked.files,
        checked.bytes
    );
    let json = json!({
        "archive": path_json(&archive),
        "name": checked.name,
        "version": checked.version,
        "files": checked.files,
        "bytes": checked.bytes,
        "identical": true,
    });
    let mut out = Printer::stdout();
    out.report(args.format, &summary, &json)?;
    out.finish(Exit::Success)
}

fn verified_json(source: &str, v: &Verified, format: Option<ArchiveFormat>) -> Value {
    json!({
        "source": source,
        "ok": true,
        "archive_format": format.map(ArchiveFormat::number),
        "name": v.name,
        "version": v.version.to_string(),
        "files": v.files,
        "bytes": v.bytes,
        "signed": v.signer.is_some(),
        "signer": v.signer.as_ref().map(|s| json!({"key_id": s.key_id.to_string(), "anchor": s.anchor})),
        "capabilities": v.capabilities.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
        "error": null,
    })
}

/// The JSON form of a failure.
pub(crate) fn failure_json(failure: &Failure) -> Value {
    json!({"reason": failure.reason.as_str(), "message": failure.message, "help": failure.help})
}

fn run_verify(args: &VerifyArgs, ctx: &Context) -> CliResult {
    let source = args.source.display().to_string();
    let registries = ctx.registries()?;
    let result = args.key.as_deref().map(PublicKey::load).transpose().and_then(|key| {
        // With --key the anchors and rules do not apply, but revocations do.
        let policy = TrustPolicy::load(&ctx.home.trust_policy_file())?;
        let trust = match &key {
            Some(key) => Trust::Key(key, &policy),
            None => Trust::Policy(&policy),
        };
        let encoding = if args.canonical { Encoding::Canonical } else { Encoding::Content };
        let options = Options { trust, require_signature: args.require_signature, registries: Some(&registries) };
        verify_path(&args.source, &options, encoding)
    });
    let out = Printer::stdout();
    match (args.format, result) {
        (Format::Json, Ok((v, format))) => {
            out.finish_with(&json_text(&verified_json(&source, &v, format)), Exit::Success)
        }
        (Format::Json, Err(f)) => {
            let doc = json!({"source": source, "ok": false, "error": failure_json(&f)});
            out.finish_with(&json_text(&doc), f.class())
        }
        (Format::Human, Ok((v, format))) => {
            let what = match format {
                Some(format) => format!(" (archive format {})", format.number()),
                None => String::new(),
            };
            let mut text = format!(
                "verified {} {}{what}: {} files, {} bytes; sizes, digests and file set match\n",
                v.name, v.version, v.files, v.bytes
            );
            text.push_str(&match (&v.signer, &args.key) {
                (Some(s), Some(file)) => format!("signed by key {} (the key in {})\n", s.key_id, file.display()),
                (Some(s), None) => format!(
                    "signed by key {} (trust anchor `{}`), capabilities within its rule\n",
                    s.key_id,
                    s.anchor.as_deref().unwrap_or("?")
                ),
                (None, _) => "not signed\n".to_string(),
            });
            out.finish_with(&text, Exit::Success)
        }
        (Format::Human, Err(f)) => Err(CliError::from(f)),
    }
}
