//! `rlp trace checkpoint`: sign a checkpoint over every trace that grew
//! since the last one (docs/fleet.md, "Checkpoints"), once or every so often.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::json;

use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, Printer};
use crate::integrity::keys::{SecretKey, write_key_pair};
use crate::ledger::checkpoint::{Checkpointer, Made, Reach, statement_hash};
use crate::ledger::query::InputError;
use crate::ledger::verify::Problem;
use crate::notice;
use crate::text::{plural, terminal_safe_line};

/// Flags of `rlp trace checkpoint`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  rlp trace checkpoint
  rlp trace checkpoint --format json

For a fleet, one checkpointer: `rlp trace checkpoint --key fleet-ledger.key --every 10s
--ledger postgres://…`. Signs with --key, or with the home's keys/ledger.key (made on first use; its keys/ledger.pub is
trusted by `rlp trace verify` on this home — give it to other verifiers:
[ledger] checkpoint_keys in config.toml). One checkpointer per ledger is enough; several wait
their turn.

Before it signs, it verifies the checkpoints already there (each signed by this key or one
[ledger] checkpoint_keys trusts, each root over its stored leaves, none missing) and checks
every trace's new frames from the chain value its newest leaf signed; it builds on nothing it
could not verify. A run reads every head row and finds the traces from their frames too (a
sweep); with --every, the first run sweeps, and each run after reads the traces their appends
marked and a slice of the next sweep, so that a whole sweep takes about --sweep (10m).

Exit codes: 0 checkpoint written (or nothing new), 1 some traces were left out because their
new frames do not check out (named), or the checkpoints in the ledger do not check out (none
made), 2 no ledger, or the key cannot be read.")]
pub struct CheckpointArgs {
    /// The secret key that signs (`rlp keygen` writes one); default: the home's keys/ledger.key.
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Keep making one every DURATION (e.g. 500ms, 10s, 5m) until interrupted.
    #[arg(long, value_name = "DURATION", value_parser = parse_interval)]
    pub every: Option<Duration>,
    /// With --every: how long a whole sweep takes — every head row read and the traces listed
    /// from their frames, a slice each run, beyond those their appends marked as grown (a
    /// single run sweeps the whole ledger).
    #[arg(long, value_name = "DURATION", value_parser = parse_interval, default_value = "10m", requires = "every")]
    pub sweep: Duration,
    /// Output format (one JSON document per checkpoint with --every).
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// The fewest head rows a slice of the sweep reads: a run's fixed costs
/// dwarf reading fewer.
const MIN_SLICE_TRACES: usize = 1000;

/// Head rows each run reads so that a whole sweep of a ledger of `traces`
/// takes `sweep` when a run comes every `every`.
fn slice_of(traces: u64, every: Duration, sweep: Duration) -> usize {
    let runs = (sweep.as_secs_f64() / every.as_secs_f64().max(1e-3)).floor().max(1.0);
    let slice = (traces as f64 / runs).ceil();
    (slice as usize).max(MIN_SLICE_TRACES)
}

/// `500ms`, `10s`, `5m`, `1h`: a whole number and a unit.
fn parse_interval(text: &str) -> Result<Duration, String> {
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().map_err(|_| format!("`{text}` is not a duration like 500ms, 10s, 5m or 1h"))?;
    let duration = match unit {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        _ => return Err(format!("`{text}` is not a duration like 500ms, 10s, 5m or 1h")),
    };
    if duration < Duration::from_millis(10) {
        return Err("the interval must be at least 10ms".into());
    }
    Ok(duration)
}

/// The signing key: `--key`, or the home's (made on first use, said on stderr).
fn signing_key(args: &CheckpointArgs, ctx: &Context) -> Result<SecretKey, CliError> {
    if let Some(path) = &args.key {
        return SecretKey::load(path).map_err(CliError::from);
    }
    let path = ctx.home.ledger_key_file();
    if !path.exists() {
        let files = write_key_pair(&ctx.home.keys_dir(), "ledger").map_err(CliError::from)?;
        notice::note(&format!(
            "made the home's checkpoint key {} (key id {}); other hosts trust its checkpoints with \
             [ledger] checkpoint_keys = [\"{}\"]",
            files.secret_file.display(),
            files.public.key_id(),
            files.public
        ));
    }
    SecretKey::load(&path).map_err(CliError::from)
}

/// One line a problem: about its trace when it names one, else its
/// checkpoint; escaped, since trace ids are the ledger's text.
fn problem_lines(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| {
            let line = match (&p.trace_id, p.checkpoint) {
                (Some(trace), _) => format!("trace {trace}: {}", p.message),
                (None, Some(seq)) => format!("checkpoint #{seq}: {}", p.message),
                (None, None) => p.message.clone(),
            };
            format!("  {}\n", terminal_safe_line(&line))
        })
        .collect()
}

fn report(made: &Made, format: Format) -> String {
    match format {
        Format::Human => {
            let mut text = match &made.checkpoint {
                Some(c) => format!(
                    "Checkpoint #{}: {} in {}, statement hash {}.\n",
                    c.seq,
                    plural(made.frames, "new frame"),
                    plural(c.leaves.len() as u64, "trace"),
                    statement_hash(&c.statement)
                ),
                None => format!(
                    "Nothing new since checkpoint #{}.\n",
                    made.latest.map_or_else(|| "-".to_string(), |s| s.to_string())
                ),
            };
            if !made.broken.is_empty() {
                text = format!(
                    "No checkpoint made: those in the ledger do not check out, and a checkpoint never builds on one \
                     that does not (run `rlp trace verify`):\n{}",
                    problem_lines(&made.broken)
                );
            }
            if !made.refused.is_empty() {
                text.push_str(&format!(
                    "Left out, because their new frames do not check out (run `rlp trace verify`):\n{}",
                    problem_lines(&made.refused)
                ));
            }
            text
        }
        Format::Json => {
            let doc = json!({
                "checkpoint": made.checkpoint.as_ref().map(|c| c.seq),
                "latest": made.latest,
                "traces": made.checkpoint.as_ref().map_or(0, |c| c.leaves.len()),
                "frames": made.frames,
                "statement_hash": made.checkpoint.as_ref().map(|c| statement_hash(&c.statement)),
                "refused": made.refused,
                "broken": made.broken,
                "swept": made.swept,
            });
            format!("{}\n", serde_json::to_string(&doc).unwrap_or_default())
        }
    }
}

pub(crate) fn run(args: &CheckpointArgs, ctx: &Context) -> CliResult {
    let ledger = ctx.ledger()?;
    // Opened without the rights appending needs: a checkpointer's role may
    // have only those docs/fleet.md gives it.
    let store = ledger.open_if_exists()?.ok_or_else(|| InputError::NoLedger(ledger.clone()))?;
    let key = signing_key(args, ctx)?;
    let trusted = super::verify::home_trusted_keys(ctx)?;
    let mut checkpointer = Checkpointer::new(&key, &trusted);
    loop {
        let now_ms = i64::try_from(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis(),
        )
        .unwrap_or(i64::MAX);
        let reach = match (args.every, checkpointer.traces_per_pass()) {
            (Some(every), Some(traces)) => Reach::Slice { traces: slice_of(traces, every, args.sweep) },
            _ => Reach::Sweep,
        };
        let made = checkpointer.run(&*store, now_ms, reach)?;
        let text = report(&made, args.format);
        let Some(every) = args.every else {
            let exit = match made.refused.is_empty() && made.broken.is_empty() {
                true => Exit::Success,
                false => Exit::Problems,
            };
            return Printer::stdout().finish_with(&text, exit);
        };
        // Until interrupted (a checkpoint cut short is rolled back whole).
        let mut out = Printer::stdout();
        out.text(&text).map_err(|e| e.ending(Exit::Usage))?;
        std::io::Write::flush(&mut out).map_err(|e| crate::cli::output::OutputError::from(e).ending(Exit::Usage))?;
        std::thread::sleep(every);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_is_the_ledgers_share_of_the_runs_in_a_sweep_and_never_tiny() {
        let s = Duration::from_secs;
        assert_eq!(slice_of(1_000_000, s(1), s(600)), 1667);
        assert_eq!(slice_of(1_000_000, Duration::from_millis(100), s(600)), MIN_SLICE_TRACES);
        assert_eq!(slice_of(10, s(1), s(600)), MIN_SLICE_TRACES);
        // A sweep shorter than the interval: every run reads the whole ledger.
        assert_eq!(slice_of(5000, s(10), s(5)), 5000);
    }
}
