//! A recorded trace answering a runtime's calls: what `rlp serve --replay`
//! and `rlp tools call --replay` give the runtime
//! ([`crate::runtime::recorded::Recording`]). Each call is looked up in a
//! [`ReplaySource`] (matching in order or in any order); a call no
//! recording answers fails naming the closest recorded call, or runs for
//! real under [`Fallback::Live`]. [`RecordedTrace::finish`] says how the
//! replay went, for the exit status.

use std::sync::{Mutex, PoisonError};

use serde_json::Value;
use uuid::Uuid;

use crate::event::{ReplayAnswered, ReplayMark};
use crate::ledger::query::{InputError, TraceInput};
use crate::replay::divergence::{Divergence, DivergenceKind};
use crate::replay::source::{Answer, MatchOrder, ReplaySource};
use crate::runtime::recorded::{Lookup, RecordedCall, Recording};
use crate::text::plural;

/// What becomes of a call no recording answers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fallback {
    /// It fails (an `isError` result over MCP, exit 1 from the command line).
    #[default]
    Error,
    /// It runs for real, recorded as such.
    Live,
}

/// How the calls of a replay were answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Calls answered from the recording.
    pub recorded: u64,
    /// Calls no recording answered that ran for real.
    pub live: u64,
    /// Calls no recording answered that failed.
    pub unmatched: u64,
}

/// A recorded trace answering calls; shared by the calls of a server.
pub struct RecordedTrace {
    source: Mutex<ReplaySource>,
    trace_id: Uuid,
    fallback: Fallback,
    tally: Mutex<Tally>,
    /// Told whether the replay is clean so far, after every call.
    on_verdict: Option<fn(bool)>,
}

impl std::fmt::Debug for RecordedTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordedTrace").field("trace_id", &self.trace_id).field("fallback", &self.fallback).finish()
    }
}

/// How a replay went, once it ends.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayEnd {
    /// The recorded trace.
    pub trace_id: Uuid,
    /// How the calls were answered.
    pub tally: Tally,
    /// What diverged: the recording's own problems, calls out of order or
    /// matching no recording, recordings never asked for (last).
    pub divergences: Vec<Divergence>,
}

impl ReplayEnd {
    /// Recordings no call asked for.
    pub fn unused(&self) -> usize {
        self.divergences.iter().filter(|d| d.kind == DivergenceKind::UnusedRecording).count()
    }

    /// Whether every call was answered from the recording and every
    /// recording was asked for.
    pub fn is_clean(&self) -> bool {
        self.tally.live == 0 && self.tally.unmatched == 0 && self.unused() == 0
    }

    /// One line saying how the replay went.
    pub fn summary(&self) -> String {
        let Tally { recorded, live, unmatched } = self.tally;
        let mut parts = vec![format!("{} answered from the recording", plural(recorded, "call"))];
        if unmatched > 0 {
            parts.push(format!("{} matched no recording", plural(unmatched, "call")));
        }
        if live > 0 {
            parts.push(format!("{} matched no recording and ran live", plural(live, "call")));
        }
        let unused = self.unused();
        if unused > 0 {
            parts.push(format!("{} never asked for", plural(unused, "recorded call")));
        }
        format!("replay of trace {}: {}", self.trace_id, parts.join(", "))
    }
}

impl RecordedTrace {
    /// Loads the calls of a recorded trace (a ledger's or an export's).
    pub fn load(input: &TraceInput, order: MatchOrder, fallback: Fallback) -> Result<RecordedTrace, InputError> {
        let source = ReplaySource::load(input)?.matching(order);
        Ok(RecordedTrace::new(source, fallback))
    }

    /// A recorded trace answering from `source`.
    pub fn new(source: ReplaySource, fallback: Fallback) -> RecordedTrace {
        let trace_id = source.trace_id().unwrap_or_default();
        RecordedTrace { source: Mutex::new(source), trace_id, fallback, tally: Mutex::default(), on_verdict: None }
    }

    /// The recorded trace telling `on_verdict` whether the replay is clean
    /// so far (every call answered from the recording, every recording
    /// used): now, and after every call.
    pub fn telling(mut self, on_verdict: fn(bool)) -> RecordedTrace {
        let clean = self.source.get_mut().unwrap_or_else(PoisonError::into_inner).all_used();
        on_verdict(clean);
        self.on_verdict = Some(on_verdict);
        self
    }

    /// The recorded trace's id.
    pub fn trace_id(&self) -> Uuid {
        self.trace_id
    }

    /// Problems of the recording itself (calls it cannot answer), found
    /// while it was loaded.
    pub fn problems(&self) -> Vec<Divergence> {
        self.source.lock().unwrap_or_else(PoisonError::into_inner).divergences().to_vec()
    }

    /// Counts a call an earlier process of the same replay made, and the
    /// recording that answered it (if one did) as used; whether the
    /// recording has that invocation.
    pub fn earlier_call(&self, answered_by: Option<Uuid>) -> bool {
        self.source.lock().unwrap_or_else(PoisonError::into_inner).earlier_call(answered_by)
    }

    /// The agent the recorded trace names.
    pub fn agent(&self) -> String {
        self.source.lock().unwrap_or_else(PoisonError::into_inner).agent().unwrap_or_default().to_string()
    }

    /// How the replay went so far (at its end: how it went).
    pub fn end(&self) -> ReplayEnd {
        let tally = *self.tally.lock().unwrap_or_else(PoisonError::into_inner);
        let divergences = self.source.lock().unwrap_or_else(PoisonError::into_inner).end();
        ReplayEnd { trace_id: self.trace_id, tally, divergences }
    }

    fn mark(&self, answered: ReplayAnswered, at: Option<(Uuid, u64)>) -> ReplayMark {
        ReplayMark {
            answered,
            trace_id: self.trace_id,
            invocation_id: at.map(|(id, _)| id),
            position: at.map(|(_, position)| position),
        }
    }

    fn count(&self, f: impl FnOnce(&mut Tally)) {
        f(&mut self.tally.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

impl Recording for RecordedTrace {
    fn lookup(&self, tool: &str, arguments: &Value) -> Lookup {
        let mut source = self.source.lock().unwrap_or_else(PoisonError::into_inner);
        let lookup = self.answer(&mut source, tool, arguments);
        if let Some(on_verdict) = self.on_verdict {
            let tally = *self.tally.lock().unwrap_or_else(PoisonError::into_inner);
            on_verdict(tally.live == 0 && tally.unmatched == 0 && source.all_used());
        }
        lookup
    }
}

impl RecordedTrace {
    /// What answers a call of `tool` with `arguments`, counted.
    fn answer(&self, source: &mut ReplaySource, tool: &str, arguments: &Value) -> Lookup {
        match source.answer(tool, arguments) {
            Answer::Recorded(recording) => {
                let call = RecordedCall {
                    mark: self.mark(ReplayAnswered::Recording, Some((recording.invocation_id, recording.position))),
                    rounds: recording.rounds.clone(),
                    outcome: recording.tool_outcome.clone(),
                    usage: recording.usage,
                    content: recording.tool_content.clone(),
                };
                self.count(|t| t.recorded += 1);
                Lookup::Recorded(Box::new(call))
            }
            Answer::NotRecorded(miss) => {
                let closest = miss.closest.map(|r| (r.invocation_id, r.position));
                match self.fallback {
                    Fallback::Live => {
                        self.count(|t| t.live += 1);
                        Lookup::Live(self.mark(ReplayAnswered::Live, closest))
                    }
                    Fallback::Error => {
                        self.count(|t| t.unmatched += 1);
                        Lookup::Unmatched { mark: self.mark(ReplayAnswered::Unmatched, closest), message: miss.message }
                    }
                }
            }
        }
    }
}
