//! `rlp trace diff`: two runs of an agent compared call by call (the
//! regression gate).
//!
//! Two streaming passes over each trace, both traces read side by side on
//! two threads:
//!
//! 1. [`digest`]: every call as a compact digest (tool, BLAKE3 of the
//!    canonical arguments and result, error kind, positions); no payload is
//!    kept;
//! 2. the calls are aligned by tool id ([`align`]) and each aligned pair is
//!    compared by digest; unmatched calls with the same tool and arguments on
//!    both sides are the same call made in another order;
//! 3. [`payloads`]: only the arguments and results of the pairs that differ
//!    are read again, to list the JSON Pointer paths that differ.
//!
//! Memory follows the number of calls (about 80 bytes each per side) and the
//! payloads of the differing pairs, never the payloads of whole traces.
//! [`render`] writes the human and JSON reports.

pub(crate) mod align;
mod digest;
mod payloads;
pub(crate) mod render;

use std::collections::{HashMap, VecDeque};
use std::fmt;

use crate::error::{Exit, Reportable};
use crate::ledger::query::{InputError, TraceInput};
use crate::replay::diff::{Change, diff};
use crate::replay::replayer::MAX_LISTED_CHANGES;
use crate::replay::trace_diff::align::{Step, align};
use crate::replay::trace_diff::digest::{CallDigest, OutcomeDigest, Side, load};

/// How the two runs differ at one place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum DiffKind {
    /// A candidate call the baseline does not have.
    ExtraCall,
    /// A baseline call the candidate does not make.
    UnusedRecording,
    /// The same call (tool and arguments), made at another place in the order.
    OrderDivergence,
    /// Aligned calls of the same tool with different arguments.
    ArgsMismatch,
    /// Both succeeded, with different results.
    ResultChanged,
    /// One succeeded and the other failed, the error kind changed, or one has no result.
    OutcomeChanged,
}

impl DiffKind {
    /// The stable name, e.g. `extra_call`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DiffKind::ExtraCall => "extra_call",
            DiffKind::UnusedRecording => "unused_recording",
            DiffKind::OrderDivergence => "order_divergence",
            DiffKind::ArgsMismatch => "args_mismatch",
            DiffKind::ResultChanged => "result_changed",
            DiffKind::OutcomeChanged => "outcome_changed",
        }
    }
}

/// One divergence: the calls concerned (indexes into each side's calls) and,
/// for `args_mismatch` and `result_changed`, what differs.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Found {
    /// The class.
    pub kind: DiffKind,
    /// The baseline call, when there is one.
    pub baseline: Option<usize>,
    /// The candidate call, when there is one.
    pub candidate: Option<usize>,
    /// The differing paths (`recorded` is the baseline value, `replayed` the candidate's).
    pub changes: Vec<Change>,
    /// Paths that differ beyond those listed.
    pub more_changes: u64,
}

impl Found {
    fn new(kind: DiffKind, baseline: Option<usize>, candidate: Option<usize>) -> Self {
        Found { kind, baseline, candidate, changes: Vec::new(), more_changes: 0 }
    }
}

/// The comparison of two traces.
#[derive(Debug)]
pub(crate) struct TraceDiff {
    /// The baseline run.
    pub baseline: Side,
    /// The candidate run.
    pub candidate: Side,
    /// Whether the alignment fell back to the greedy one (see [`align`]).
    pub greedy: bool,
    /// The divergences, in alignment order.
    pub divergences: Vec<Found>,
}

impl TraceDiff {
    /// Whether nothing diverged.
    pub(crate) fn is_clean(&self) -> bool {
        self.divergences.is_empty()
    }
}

/// Why two traces could not be compared.
#[derive(Debug)]
pub(crate) enum TraceDiffError {
    /// A trace could not be read (the error names the file and line, or the trace).
    Input(InputError),
    /// A trace is not a consistent recording (a result without its call…).
    Inconsistent {
        /// The input as given.
        input: String,
        /// The frame.
        position: u64,
        /// What is wrong.
        message: String,
    },
}

impl fmt::Display for TraceDiffError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceDiffError::Input(error) => f.write_str(&error.message()),
            TraceDiffError::Inconsistent { input, position, message } => {
                write!(f, "{input}: frame #{position}: {message}; the trace cannot be compared")
            }
        }
    }
}

impl std::error::Error for TraceDiffError {}

/// Exit 2 (unreadable or inconsistent), except an edited ledger row (1).
impl Reportable for TraceDiffError {
    fn class(&self) -> Exit {
        match self {
            TraceDiffError::Input(error) => error.class(),
            TraceDiffError::Inconsistent { .. } => Exit::Usage,
        }
    }

    fn help(&self) -> Option<String> {
        match self {
            TraceDiffError::Input(error) => error.help(),
            TraceDiffError::Inconsistent { input, .. } => {
                Some(format!("`rlp trace show {input}` lists its frames; export the trace again from the ledger"))
            }
        }
    }
}

/// Runs `a` and `b` at once, `a` on a thread of its own.
fn both<A: Send, B>(a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B) -> (A, B) {
    std::thread::scope(|scope| {
        let thread = scope.spawn(a);
        let second = b();
        let first = thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (first, second)
    })
}

fn outcomes_equal(baseline: &Side, b: &CallDigest, candidate: &Side, c: &CallDigest) -> bool {
    match (b.outcome, c.outcome) {
        (OutcomeDigest::Result(x), OutcomeDigest::Result(y)) => x == y,
        (OutcomeDigest::Error(x), OutcomeDigest::Error(y)) => baseline.name(x) == candidate.name(y),
        (OutcomeDigest::NoResult, OutcomeDigest::NoResult) => true,
        _ => false,
    }
}

/// What differs between two calls taken to be the same one: their
/// arguments first (then the outcomes are not compared), then their outcomes.
fn compare(baseline: &Side, i: usize, candidate: &Side, j: usize) -> Option<Found> {
    let (b, c) = (&baseline.calls[i], &candidate.calls[j]);
    if b.args != c.args {
        return Some(Found::new(DiffKind::ArgsMismatch, Some(i), Some(j)));
    }
    if outcomes_equal(baseline, b, candidate, c) {
        return None;
    }
    let kind = match (b.outcome, c.outcome) {
        (OutcomeDigest::Result(_), OutcomeDigest::Result(_)) => DiffKind::ResultChanged,
        _ => DiffKind::OutcomeChanged,
    };
    Some(Found::new(kind, Some(i), Some(j)))
}

/// The divergences of an alignment, in its order.
fn divergences(baseline: &Side, candidate: &Side, steps: &[Step]) -> Vec<Found> {
    // Unmatched calls with the same tool and arguments on both sides are
    // the same call, moved: paired in order of each side.
    let mut unmatched: HashMap<(&str, [u8; 16]), VecDeque<usize>> = HashMap::new();
    for step in steps {
        if let Step::Baseline(i) = *step {
            let call = &baseline.calls[i];
            unmatched.entry((baseline.name(call.tool), call.args)).or_default().push_back(i);
        }
    }
    let mut moved_to: HashMap<usize, usize> = HashMap::new();
    let mut moved_from: HashMap<usize, usize> = HashMap::new();
    for step in steps {
        if let Step::Candidate(j) = *step {
            let call = &candidate.calls[j];
            if let Some(i) = unmatched.get_mut(&(candidate.name(call.tool), call.args)).and_then(VecDeque::pop_front) {
                moved_to.insert(i, j);
                moved_from.insert(j, i);
            }
        }
    }
    let mut found = Vec::new();
    for step in steps {
        match *step {
            Step::Pair(i, j) => found.extend(compare(baseline, i, candidate, j)),
            Step::Baseline(i) => match moved_to.get(&i) {
                Some(&j) => {
                    found.push(Found::new(DiffKind::OrderDivergence, Some(i), Some(j)));
                    found.extend(compare(baseline, i, candidate, j));
                }
                None => found.push(Found::new(DiffKind::UnusedRecording, Some(i), None)),
            },
            Step::Candidate(j) if !moved_from.contains_key(&j) => {
                found.push(Found::new(DiffKind::ExtraCall, None, Some(j)));
            }
            Step::Candidate(_) => {}
        }
    }
    found
}

fn tool_ids(side: &Side) -> Vec<&str> {
    side.calls.iter().map(|call| side.name(call.tool)).collect()
}

/// Compares `candidate` with `baseline`; see the module documentation.
pub(crate) fn trace_diff(baseline: &TraceInput, candidate: &TraceInput) -> Result<TraceDiff, TraceDiffError> {
    let (b, c) = both(|| load(baseline), || load(candidate));
    let (b, c) = (b?, c?);
    // Tool ids compared as text: each side interned its own.
    let alignment = align(&tool_ids(&b), &tool_ids(&c));
    let mut found = divergences(&b, &c, &alignment.steps);
    drop(alignment.steps);
    let want_b = payloads::wanted(&found, |f| f.baseline, &b);
    let want_c = payloads::wanted(&found, |f| f.candidate, &c);
    let (values_b, values_c) = both(|| payloads::read(baseline, &want_b), || payloads::read(candidate, &want_c));
    let (values_b, values_c) = (values_b?, values_c?);
    for divergence in &mut found {
        let (Some(i), Some(j)) = (divergence.baseline, divergence.candidate) else { continue };
        let Some(at) = payloads::compared(divergence.kind) else { continue };
        let (Some(x), Some(y)) = (values_b.get(&at(&b.calls[i])), values_c.get(&at(&c.calls[j]))) else {
            continue;
        };
        let changes = diff(x, y, MAX_LISTED_CHANGES);
        divergence.changes = changes.changes;
        divergence.more_changes = changes.more;
    }
    Ok(TraceDiff { baseline: b, candidate: c, greedy: alignment.greedy, divergences: found })
}
