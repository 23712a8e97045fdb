//! `rlp trace verify`: the whole ledger, one trace, or — offline — an
//! inclusion proof (with the export it covers).

use std::path::PathBuf;

use clap::Args;
use serde_json::{Value, json};

use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, Printer};
use crate::integrity::keys::PublicKey;
use crate::ledger::proof::{InclusionProof, Proven, check_export_hashes, check_proof};
use crate::ledger::query::InputError;
use crate::ledger::verify::{Problem, ProblemKind, VerifyOptions, verify};
use crate::ledger::{Location, VerifyReport};
use crate::text::{format_ts, plural, terminal_safe_line};

/// Flags of `rlp trace verify`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  rlp trace verify
  rlp trace verify last
  rlp trace verify --format json --home replay-home
  rlp trace verify --proof proof.json --export trace.jsonl

Without a trace, every row, trace, head row and checkpoint; with one, that trace and the
checkpoints that cover it. With --proof, offline: the proof `rlp trace prove` wrote, and the
export it covers; elsewhere, name the ledger's checkpoint key with --key ledger.pub.
Checkpoints count only when signed by a trusted key: the home's own (keys/ledger.pub),
[ledger] checkpoint_keys in config.toml, or --key.

Exit codes: 0 everything checks out, 1 something was edited, removed or reordered (or a proof
does not hold), 2 no ledger, no such trace, or a file SQLite cannot read (not a ledger, or
damaged).")]
pub struct VerifyArgs {
    /// Only this trace (a trace id, or `last`), and the checkpoints that cover it.
    #[arg(value_name = "TRACE", conflicts_with = "proof")]
    pub trace: Option<String>,
    /// Check an inclusion proof (from `rlp trace prove`) offline, without the ledger.
    #[arg(long, value_name = "FILE")]
    pub proof: Option<PathBuf>,
    /// With --proof: also check that this export (`rlp trace export`) holds the frames the proof covers.
    #[arg(long, value_name = "FILE", requires = "proof")]
    pub export: Option<PathBuf>,
    /// Trust checkpoints signed by this public key (a `.pub` file or `ed25519:<base64>`; repeatable).
    #[arg(long = "key", value_name = "KEY")]
    pub keys: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// One problem on one line, its text escaped: trace ids and kinds are the
/// ledger's text, which whoever edited the database wrote.
fn problem_line(problem: &Problem) -> String {
    let kind =
        serde_json::to_value(problem.problem).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
    let place = match (problem.row, &problem.trace_id, problem.checkpoint) {
        (Some(row), trace, _) => {
            let trace = trace.as_deref().map(|t| format!(", trace {t}")).unwrap_or_default();
            format!("row {row} ({}{trace})", problem.kind.as_deref().unwrap_or("?"))
        }
        (None, Some(trace), _) => format!("trace {trace}"),
        (None, None, Some(seq)) => format!("checkpoint #{seq}"),
        (None, None, None) if problem.problem == ProblemKind::Identity => "ledger".to_string(),
        (None, None, None) => "legacy chain".to_string(),
    };
    format!("  {}\n", terminal_safe_line(&format!("{place}: {kind}: {}", problem.message)))
}

fn human_verify(report: &VerifyReport) -> String {
    let scope = match &report.trace_id {
        Some(trace) => format!("Trace {trace} in ledger {}", report.ledger),
        None => format!("Ledger {}", report.ledger),
    };
    let contents = match report.trace_id {
        Some(_) => plural(report.rows, "frame"),
        None => format!("{} in {}", plural(report.rows, "row"), plural(report.traces, "trace")),
    };
    let unchained = match report.unchained {
        0 => String::new(),
        n => format!(" ({} without a chain value, not checked)", plural(n, "upstream row")),
    };
    let mut text = match report.first_problem() {
        None => format!("{scope}: {contents}{unchained}; every hash, chain, head and checkpoint checks out.\n"),
        Some(_) => {
            let total = report.problems.len() as u64 + report.more_problems;
            format!("{scope}: {contents}{unchained}; {}:\n", plural(total, "problem"))
        }
    };
    for problem in &report.problems {
        text.push_str(&problem_line(problem));
    }
    if report.more_problems > 0 {
        text.push_str(&format!("  … and {} more\n", report.more_problems));
    }
    if report.legacy_rows > 0 {
        let part = match report.trace_id {
            Some(_) => {
                "of its frames were recorded before per-trace chains: each one's hash was checked here, \
                        their links by a full `rlp trace verify`"
            }
            None => "of the legacy chain (recorded before per-trace chains), sealed at the upgrade",
        };
        text.push_str(&format!("{} {part}.\n", plural(report.legacy_rows, "row")));
    }
    // For one trace: the checkpoints that cover it, and the ledger's newest.
    let (checkpoints, newest) = match report.trace_id {
        Some(_) if report.checkpoints == 1 => ("1 checkpoint covers it".to_string(), "the ledger's newest"),
        Some(_) => (format!("{} checkpoints cover it", report.checkpoints), "the ledger's newest"),
        None => (plural(report.checkpoints, "checkpoint"), "the newest"),
    };
    match &report.latest_checkpoint {
        Some(latest) if report.checkpoints_intact == report.checkpoints => text.push_str(&format!(
            "{checkpoints}; {newest} is #{} ({}), signed by key {}, statement hash {}.\n",
            latest.seq,
            format_ts(latest.ts_ms),
            latest.key_id,
            latest.hash
        )),
        Some(latest) => text.push_str(&format!(
            "{checkpoints}, {} of which check out; {newest} that does is #{} ({}), signed by key {}, statement \
             hash {}.\n",
            report.checkpoints_intact,
            latest.seq,
            format_ts(latest.ts_ms),
            latest.key_id,
            latest.hash
        )),
        None if report.checkpoints > 0 => text.push_str(&format!("{checkpoints}, none of which checks out.\n")),
        None => text.push_str("No checkpoint covers this yet.\n"),
    }
    if report.uncovered_frames > 0 {
        text.push_str(&format!(
            "{} no checkpoint covers yet: removed together with their trace's head row, they would go unnoticed \
             (`rlp trace checkpoint` covers them).\n",
            plural(report.uncovered_frames, "frame")
        ));
    }
    text
}

/// The keys whose checkpoints count on this home: the configured ones
/// (`[ledger] checkpoint_keys`) and the home's own.
pub(crate) fn home_trusted_keys(ctx: &Context) -> Result<Vec<PublicKey>, CliError> {
    let mut keys = ctx.config()?.checkpoint_keys;
    let home_key = ctx.home.ledger_public_key_file();
    if home_key.is_file() {
        keys.push(PublicKey::load(&home_key).map_err(CliError::from)?);
    }
    Ok(keys)
}

/// The keys whose checkpoints count: the home's own, the configured ones, `--key`.
fn trusted_keys(args: &VerifyArgs, ctx: &Context) -> Result<Vec<PublicKey>, CliError> {
    let mut keys = home_trusted_keys(ctx)?;
    for text in &args.keys {
        keys.push(match text.starts_with("ed25519:") {
            true => PublicKey::parse(text).map_err(|why| CliError::usage(format!("--key {text}: {why}")))?,
            false => PublicKey::load(std::path::Path::new(text)).map_err(CliError::from)?,
        });
    }
    Ok(keys)
}

/// Verifies `ledger`; a missing or unreadable ledger is an error (exit 2).
fn verify_report(ledger: &Location, options: &VerifyOptions) -> Result<VerifyReport, CliError> {
    let store = ledger.open_if_exists()?.ok_or_else(|| InputError::NoLedger(ledger.clone()))?;
    let report = verify(&*store, options).map_err(CliError::from)?;
    match options.trace {
        // Nothing of it anywhere — no frame, no head row, no checkpoint —
        // and nothing else wrong: a mistyped id, not an intact trace.
        Some(trace) if report.rows == 0 && report.traces == 0 && report.checkpoints == 0 && report.is_intact() => {
            Err(CliError::usage(format!("the ledger {ledger} has no trace {trace}"))
                .with_help("`rlp trace list` shows the traces"))
        }
        _ => Ok(report),
    }
}

pub(crate) fn run(args: &VerifyArgs, ctx: &Context) -> CliResult {
    let trusted = trusted_keys(args, ctx)?;
    if let Some(proof) = &args.proof {
        return run_proof(proof, args, &trusted);
    }
    let ledger = ctx.ledger()?;
    let trace = args.trace.as_deref().map(|text| super::resolve_trace_id(text, &ledger)).transpose()?;
    let report = match verify_report(&ledger, &VerifyOptions { trusted, trace }) {
        Ok(report) => report,
        Err(error) if args.format == Format::Json => {
            // Still one JSON document on stdout, as documented; the error goes to stderr too.
            let doc = json!({
                "ledger": ledger.to_string(),
                "intact": false,
                "error": {"message": error.message, "help": error.help},
            });
            let mut out = Printer::stdout();
            let _ = out.json(&doc);
            return out.fail(error);
        }
        Err(error) => return Err(error),
    };
    let text = match args.format {
        Format::Human => human_verify(&report),
        Format::Json => {
            let mut value = serde_json::to_value(&report).unwrap_or(Value::Null);
            value["intact"] = json!(report.is_intact());
            format!("{}\n", serde_json::to_string_pretty(&value).unwrap_or_default())
        }
    };
    let exit = if report.is_intact() { Exit::Success } else { Exit::Problems };
    Printer::stdout().finish_with(&text, exit)
}

/// Reads a proof file.
fn read_proof(path: &std::path::Path) -> Result<InclusionProof, CliError> {
    // A proof of a million frames is about 70 MB; more is not one rlp wrote.
    let bytes = crate::fsutil::read_limited(path, 256 << 20).map_err(|e| {
        CliError::usage(format!("cannot read {}: {e}", path.display()))
            .with_help("pass the file `rlp trace prove` wrote")
    })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        CliError::usage(format!("{}: not an inclusion proof: {e}", path.display()))
            .with_help("pass the file `rlp trace prove` wrote")
    })
}

/// The hashes of an export's frames, each line checked as `rlp trace import` would.
fn export_hashes(path: &std::path::Path) -> Result<Vec<[u8; 32]>, CliError> {
    let file =
        std::fs::File::open(path).map_err(|e| CliError::usage(format!("cannot read {}: {e}", path.display())))?;
    let mut reader = crate::ledger::jsonl::JsonlReader::new(std::io::BufReader::new(file));
    let mut hashes = Vec::new();
    loop {
        match reader.next_frame() {
            Ok(Some(frame)) => hashes.push(frame.hash),
            Ok(None) => return Ok(hashes),
            Err(e) => {
                let what = match e {
                    crate::ledger::jsonl::ReadError::Io(e) => e.to_string(),
                    crate::ledger::jsonl::ReadError::Fatal(line) | crate::ledger::jsonl::ReadError::Line(line) => {
                        line.to_string()
                    }
                };
                return Err(CliError::problem(format!("{}: {what}", path.display()))
                    .with_help("an export verifies only as `rlp trace export` wrote it, whole and unchanged"));
            }
        }
    }
}

fn run_proof(path: &std::path::Path, args: &VerifyArgs, trusted: &[PublicKey]) -> CliResult {
    let proof = read_proof(path)?;
    let checked = check_proof(&proof, trusted).and_then(|proven| match &args.export {
        Some(export) => {
            let hashes = export_hashes(export).map_err(|e| e.message)?;
            if proof.trace_id.parse::<uuid::Uuid>().is_err() {
                return Err("the proof's trace id is not a UUID".into());
            }
            check_export_hashes(&proof, &hashes).map(|_| (proven, Some(hashes.len() as u64)))
        }
        None => Ok((proven, None)),
    });
    let (proven, export_frames) = match checked {
        Ok(checked) => checked,
        Err(message) => {
            let error = CliError::problem(format!("{}: the proof does not hold: {message}", path.display()));
            if args.format == Format::Json {
                let mut out = Printer::stdout();
                let _ = out.json(&json!({"proof": path.display().to_string(), "holds": false, "error": message}));
                return out.fail(error);
            }
            return Err(error);
        }
    };
    let text = match args.format {
        Format::Human => human_proven(&proven, export_frames),
        Format::Json => {
            let mut value = serde_json::to_value(&proven).unwrap_or(Value::Null);
            value["holds"] = json!(true);
            value["export_frames"] = json!(export_frames);
            format!("{}\n", serde_json::to_string_pretty(&value).unwrap_or_default())
        }
    };
    Printer::stdout().finish_with(&text, Exit::Success)
}

fn human_proven(proven: &Proven, export_frames: Option<u64>) -> String {
    let mut text = format!(
        "The proof holds: frames 1 to {} of trace {} are in checkpoint #{} of ledger {} ({}), signed by key {}.\n",
        proven.frames,
        proven.trace_id,
        proven.checkpoint,
        proven.ledger,
        format_ts(proven.ts_ms),
        proven.key_id
    );
    if let Some(frame) = proven.frame {
        text.push_str(&format!("Frame {frame} is in the proof in full, and is that frame.\n"));
    }
    if let Some(frames) = export_frames {
        let beyond = frames.saturating_sub(proven.frames);
        text.push_str(&format!("The export's first {} are those frames", plural(proven.frames, "frame")));
        text.push_str(&match beyond {
            0 => ".\n".to_string(),
            n => format!("; its last {} came after the checkpoint and are not covered.\n", plural(n, "frame")),
        });
    }
    text
}
