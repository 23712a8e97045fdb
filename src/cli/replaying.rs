//! `--replay TRACE` of `rlp serve` and `rlp tools call`: calls answered
//! from a recorded trace instead of run (docs/replay.md). The flags, the
//! recording loaded, the link frame that starts the new trace, and how the
//! replay went when it ends.

use std::ops::ControlFlow;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use uuid::Uuid;

use crate::cli::Context;
use crate::cli::exit::{CliError, Exit};
use crate::cli::output::{diagnostic, warning};
use crate::cli::trace::parse_input;
use crate::event::{EventKind, PAYLOAD_VERSION, Payload, ReplayAnswered, ReplayLinkPayload};
use crate::ledger::query::{InputError, TraceInput, for_each_frame};
use crate::replay::divergence::DivergenceKind;
use crate::replay::serving::{Fallback, RecordedTrace, ReplayEnd};
use crate::replay::source::MatchOrder;
use crate::runtime::Runtime;
use crate::text::terminal_safe;

/// Which recorded call may answer a call (`--match`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MatchFlag {
    /// The next recorded call only: the calls come in the recorded order.
    InOrder,
    /// Any recorded call with the same tool and arguments not yet used, the earliest first.
    AnyOrder,
}

/// What a call no recording answers gets (`--fallback`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FallbackFlag {
    /// An error result naming the closest recorded call and how it differs.
    Error,
    /// A real run of the tool, recorded as live.
    Live,
}

/// The flags of a command that can answer its calls from a recording.
#[derive(Debug, Args)]
pub struct ReplayFlags {
    /// Answer every call from this recorded trace instead of running the tool: a trace id,
    /// `last`, or a file written by `rlp trace export` (docs/replay.md).
    #[arg(long, value_name = "TRACE|FILE.jsonl")]
    pub replay: Option<String>,
    /// Which recorded call answers a call: the next one (in-order), or any one with the same
    /// tool and arguments (any-order, for agents that make calls in parallel).
    #[arg(long = "match", value_enum, value_name = "ORDER", default_value_t = MatchFlag::InOrder, requires = "replay")]
    pub match_order: MatchFlag,
    /// What a call no recording answers gets: an error naming the closest recorded call, or a
    /// real run of the tool (live), recorded as such.
    #[arg(long, value_enum, value_name = "WHAT", default_value_t = FallbackFlag::Error, requires = "replay")]
    pub fallback: FallbackFlag,
}

/// The link frame's mode of a replay by `rlp serve` and `rlp tools call`.
pub(crate) const SERVED: &str = "served";

impl ReplayFlags {
    /// The recording `--replay` names, loaded (its own problems shown as
    /// warnings); `None` without `--replay`. A `server`'s stop by a signal
    /// ends it with the replay's verdict so far ([`stop_verdict`]).
    pub(crate) fn load(&self, ctx: &Context, server: bool) -> Result<Option<Arc<RecordedTrace>>, CliError> {
        let Some(text) = &self.replay else {
            return Ok(None);
        };
        let input = parse_input(text, ctx)?;
        let order = match self.match_order {
            MatchFlag::InOrder => MatchOrder::InOrder,
            MatchFlag::AnyOrder => MatchOrder::AnyOrder,
        };
        let fallback = match self.fallback {
            FallbackFlag::Error => Fallback::Error,
            FallbackFlag::Live => Fallback::Live,
        };
        let mut recorded = RecordedTrace::load(&input, order, fallback)?;
        if server {
            recorded = recorded.telling(stop_verdict);
        }
        for problem in recorded.problems() {
            warning(format!("the recording {input}: #{}: {}", problem.position.unwrap_or_default(), problem.message));
        }
        Ok(Some(Arc::new(recorded)))
    }
}

/// What a replay server stopped by a signal (SIGTERM, SIGINT, SIGHUP) exits
/// with: 0 when the replay is clean so far, else 1, with a line saying so.
fn stop_verdict(clean: bool) {
    if clean {
        crate::interrupt::on_stop_exit(
            0,
            c"rlp: stopped; every call was answered from the recording, which was used up\n",
        );
    } else {
        crate::interrupt::on_stop_exit(
            1,
            c"rlp: stopped; the replay was not clean: a call matched no recording, or a recorded call was never made\n",
        );
    }
}

/// Starts trace `trace_id` with the frame that links it to the recording
/// it replays.
pub(crate) fn link(runtime: &Runtime, trace_id: Uuid, recorded: &RecordedTrace) -> Result<(), CliError> {
    let link = ReplayLinkPayload {
        v: PAYLOAD_VERSION,
        replay_of: recorded.trace_id(),
        mode: SERVED.into(),
        recorded_agent: recorded.agent(),
    };
    runtime.record_frame(trace_id, EventKind::TraceReplay, &link).map_err(|e| {
        CliError::problem(format!("cannot record the start of the replay: {e}"))
            .with_help("check that the ledger can be written")
    })
}

/// Counts the calls earlier `rlp tools call --replay` processes made in
/// trace `trace_id` (the next call is numbered after them) and the
/// recordings that answered them as used; whether the trace has frames at
/// all (it needs no link frame then).
pub(crate) fn resume(ctx: &Context, trace_id: Uuid, recorded: &RecordedTrace) -> Result<bool, CliError> {
    let input = TraceInput::Ledger { ledger: ctx.ledger()?, trace_id };
    let read = for_each_frame(&input, |frame| {
        if let Payload::ToolCall(call) = &frame.body
            && let Some(mark) = &call.replay
            && mark.trace_id == recorded.trace_id()
        {
            recorded.earlier_call(mark.invocation_id.filter(|_| mark.answered == ReplayAnswered::Recording));
        }
        ControlFlow::Continue(())
    });
    match read {
        Ok(frames) => Ok(frames > 0),
        Err(InputError::NoSuchTrace { .. } | InputError::NoLedger(_)) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Says how the replay went on stderr: one line, then each call no
/// recording answered and each recording never asked for. Exit 1 when
/// there was one of either, for CI.
pub(crate) fn report(end: &ReplayEnd) -> Exit {
    for line in report_lines(end) {
        diagnostic(&line);
    }
    if end.is_clean() { Exit::Success } else { Exit::Problems }
}

/// The lines of [`report`]; what the recording wrote (tool names, values)
/// cannot drive the terminal.
fn report_lines(end: &ReplayEnd) -> Vec<String> {
    let shown = [DivergenceKind::ExtraCall, DivergenceKind::OrderDivergence, DivergenceKind::UnusedRecording];
    let listed = end
        .divergences
        .iter()
        .filter(|d| shown.contains(&d.kind))
        .map(|d| format!("  {}: {}", d.kind.as_str(), terminal_safe(&d.message)));
    std::iter::once(format!("rlp: {}", end.summary())).chain(listed).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::divergence::Divergence;
    use crate::replay::serving::Tally;

    #[test]
    fn the_report_names_what_diverged_and_a_recording_cannot_drive_the_terminal() {
        let hostile = "the recorded call of `\u{1b}]0;owned\u{7}x` at #3 was never made";
        let end = ReplayEnd {
            trace_id: Uuid::nil(),
            tally: Tally { recorded: 1, live: 0, unmatched: 0 },
            divergences: vec![
                Divergence::at(DivergenceKind::UnusedRecording, 3, hostile.to_string()),
                Divergence::at(DivergenceKind::InvalidTrace, 9, "shown as a warning at the start".to_string()),
            ],
        };
        let lines = report_lines(&end);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(
            lines[0],
            "rlp: replay of trace 00000000-0000-0000-0000-000000000000: 1 call answered from the recording, \
             1 recorded call never asked for"
        );
        assert!(lines[1].starts_with("  unused_recording: the recorded call of `"), "{}", lines[1]);
        assert!(!lines[1].contains('\u{1b}') && !lines[1].contains('\u{7}'), "{:?}", lines[1]);
        assert_eq!(report(&end), Exit::Problems);
    }
}
