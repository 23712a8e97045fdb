//! `rlp tools call --batch`: many calls in one process (one bundle load,
//! its trust verdict reused while it is unchanged), at most `--jobs` at
//! once, all in one trace, their results printed as JSON Lines in input
//! order as soon as each is known.

mod file;
mod pool;

use std::io::Write;
use std::ops::ControlFlow;
use std::path::Path;

use serde_json::{Map, Value};
use uuid::Uuid;

use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::Printer;
use crate::cli::replaying;
use crate::cli::runtime_setup::load_concurrent_runtime;
use crate::cli::terminal;
use crate::cli::tools::call::{
    CallArgs, answering_from, call_document, parse_trace_id, print_unrecorded, runtime_flags,
};
use crate::runtime::call::check_call_tags;
use crate::runtime::{CallContext, CallError, CallOutcome, CallRequest, Cancel, MAX_CONCURRENT_CALLS};

use file::BatchCall;

/// Most failed lines the closing error lists.
const LISTED_FAILURES: usize = 10;

/// Runs the calls of the batch at `path` (`-`: standard input).
pub(crate) fn run(args: &CallArgs, path: &Path, ctx: &Context) -> CliResult {
    let calls = file::read(path)?;
    let trace_id = parse_trace_id(args.trace_id.as_deref())?.unwrap_or_else(Uuid::now_v7);
    // Tags that every call would refuse are refused once, before any call.
    check_call_tags(&args.tags)?;
    let jobs = args.jobs.map_or_else(default_jobs, usize::from);
    let recorded = args.replay.load(ctx, false)?;
    let (runtime, _) = load_concurrent_runtime(runtime_flags(args), ctx)?;
    let runtime = match &recorded {
        Some(recorded) => answering_from(runtime, recorded, trace_id, ctx)?,
        None => runtime,
    };
    // Cancelled when nobody reads the output any more: the running calls are
    // killed rather than left to run to their timeouts.
    let cancel =
        Cancel::new().map_err(|e| CliError::problem(format!("cannot set up the batch's cancellation: {e}")))?;
    let context = CallContext { cancel: Some(cancel.clone()), ..CallContext::default() };
    let call = |call: &BatchCall| {
        let mut request = CallRequest::new(call.tool.clone(), call.args.clone());
        request.trace_id = Some(trace_id);
        request.tags = args.tags.clone();
        runtime.call_in(&request, &context)
    };
    let mut out = Printer::stdout();
    let mut exit = Exit::Success;
    let mut failed = Vec::new();
    let emit = |call: &BatchCall, result: Result<CallOutcome, CallError>| {
        if let Err(e) = &result {
            exit = worse(exit, e.kind.class());
            failed.push(call.line);
        }
        let _held = terminal::hold_prompts();
        if let Err(e) = &result
            && let Some(outcome) = &e.unrecorded
        {
            print_unrecorded(outcome);
        }
        // Flushed at once: whoever reads the lines gets each as soon as it is known.
        let written = out.line(line_document(call, result.as_ref())).is_ok() && out.flush().is_ok();
        if written {
            return ControlFlow::Continue(());
        }
        cancel.cancel();
        ControlFlow::Break(())
    };
    pool::run_in_order(&calls, jobs, call, emit)
        .map_err(|e| CliError::problem(format!("cannot start the threads of the batch: {e}")))?;
    // A replay's own verdict (a recorded call never made) counts as a failure.
    let replayed = recorded.as_ref().map_or(Exit::Success, |recorded| replaying::report(&recorded.end()));
    if exit == Exit::Success || out.has_failed() {
        return out.finish(worse(exit, replayed));
    }
    out.fail(failures(exit, &failed, calls.len()))
}

/// The output line of one call: `"line"`, then the `--format json` document.
fn line_document(call: &BatchCall, result: Result<&CallOutcome, &CallError>) -> Value {
    let mut document = Map::new();
    document.insert("line".into(), call.line.into());
    if let Value::Object(fields) = call_document(&call.tool, result) {
        document.extend(fields);
    }
    Value::Object(document)
}

/// `--jobs` left out: as many calls at once as there are cores.
fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from).min(MAX_CONCURRENT_CALLS)
}

/// The exit code of a batch whose calls ended `a` and `b`: refused over
/// bad input over failed over success.
fn worse(a: Exit, b: Exit) -> Exit {
    if b.code() > a.code() { b } else { a }
}

/// The error a batch ends with when some of its `total` calls, on lines
/// `failed`, did not succeed; `exit` is the worst of their codes.
fn failures(exit: Exit, failed: &[usize], total: usize) -> CliError {
    let mut lines: Vec<String> = failed.iter().take(LISTED_FAILURES).map(usize::to_string).collect();
    if failed.len() > LISTED_FAILURES {
        lines.push("…".into());
    }
    let message = format!(
        "{} of {} did not succeed (line{} {})",
        failed.len(),
        crate::text::plural(total, "call"),
        if failed.len() == 1 { "" } else { "s" },
        lines.join(", ")
    );
    let error = match exit {
        Exit::Refused => CliError::refused(message),
        Exit::Usage => CliError::usage(message),
        Exit::Success | Exit::Problems => CliError::problem(message),
    };
    error.with_help("each call's error is in the \"error\" of its output line")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_exit_wins() {
        let worst = [Exit::Problems, Exit::Success, Exit::Refused, Exit::Usage].into_iter().fold(Exit::Success, worse);
        assert_eq!(worst, Exit::Refused);
        assert_eq!(worse(Exit::Problems, Exit::Usage), Exit::Usage);
    }

    #[test]
    fn the_closing_error_lists_the_first_failed_lines() {
        let error = failures(Exit::Problems, &[3], 5);
        assert_eq!(error.message, "1 of 5 calls did not succeed (line 3)");
        let lines: Vec<usize> = (1..=12).collect();
        let error = failures(Exit::Refused, &lines, 20);
        assert_eq!(error.exit, Exit::Refused);
        assert_eq!(error.message, "12 of 20 calls did not succeed (lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, …)");
    }
}
