//! Reading one trace from the ledger as `rlp trace show`, `rlp trace
//! export`, `rlp replay` and `rlp trace diff` do: nothing is handed on that
//! does not check out.
//!
//! The trace's head row and its checkpoints' leaves are read first, then its
//! rows, in order, each checked as it is read, before it is handed on: its
//! content against its `hash_blake3`, then its place in the trace's chain
//! (`trace_seq` one past the frame before it, `chain_blake3` following from
//! that frame's) and, at the frame a leaf or the head row counts, the chain
//! value it holds. Once every row is read, the trace must reach what they
//! count. So frames removed, reordered or added inside a trace stop the read
//! at the row where it shows, frames removed at its end stop it there, and
//! the first problem is named as `rlp trace verify` names it (which lists
//! them all).
//!
//! No read transaction is held while the rows are handed on (a live replay
//! runs tools meanwhile): rows are only ever appended, so the rows read after
//! the head row and the leaves hold at least the frames they count, and
//! frames past the head row's, or a head row that did not exist yet, are
//! frames appended meanwhile.
//!
//! What this leaves to `rlp trace verify`: the leaves are taken as stored,
//! not checked against their checkpoints' signatures and roots (that takes
//! every leaf of each checkpoint), and rows written before per-trace chains
//! are checked by their hashes only (their links are the legacy chain's).
//! The cost is two indexed reads (the head row, the trace's leaves) and one
//! chain hash a row.

use std::ops::ControlFlow;

use uuid::Uuid;

use crate::event::Event;
use crate::ledger::layout::TraceChain;
use crate::ledger::verify::{LeafRef, Problem, TraceWalker};
use crate::ledger::{LedgerError, LedgerStore};

/// Where a trace read from the ledger does not check out: the ledger was
/// changed behind rlp's back.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Damage {
    /// A row: edited, or not in its place in the trace's chain.
    #[error("ledger row {row}: {message}")]
    Row {
        /// The row id.
        row: i64,
        /// What is wrong.
        message: String,
    },
    /// The trace as a whole: frames missing at its end, or its head row.
    #[error("trace {trace_id}: {message}")]
    Trace {
        /// The trace.
        trace_id: Uuid,
        /// What is wrong.
        message: String,
    },
}

impl Damage {
    /// The damage a problem of `trace_id` names.
    fn of(trace_id: &Uuid, problem: &Problem) -> Damage {
        let message = problem.message.clone();
        match problem.row {
            Some(row) => Damage::Row { row, message },
            None => Damage::Trace { trace_id: *trace_id, message },
        }
    }
}

/// Why a checked read stopped.
#[derive(Debug, thiserror::Error)]
pub enum CheckedReadError {
    /// The ledger could not be read.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The trace does not check out.
    #[error(transparent)]
    Damaged(Damage),
}

/// Calls `f` with each row of `trace_id`, in order, and its hash, each row
/// checked first (see the module documentation); returns the number of rows
/// handed on (0 for a trace the ledger holds nothing of). Stops at the first
/// row that does not check out, or when `f` breaks; only a read to the end
/// checks where the trace ends.
pub fn for_each_checked_row(
    store: &dyn LedgerStore,
    trace_id: &Uuid,
    f: &mut dyn FnMut(Event, [u8; 32]) -> ControlFlow<()>,
) -> Result<u64, CheckedReadError> {
    let head = store.trace_head(trace_id)?;
    let leaves = store.leaves_of(trace_id)?.into_iter().map(|(seq, leaf)| LeafRef::of(seq, leaf)).collect();
    let mut walker = TraceWalker::starting_at(&trace_id.to_string(), TraceChain::EMPTY).with_leaves(leaves);
    let mut scratch = String::new();
    let (mut given, mut damage, mut stopped) = (0u64, None, false);
    store.for_each_in_trace(trace_id, &mut |event| {
        let hash = match event.check_hash(&mut scratch) {
            Ok(hash) => hash,
            Err(e) => {
                damage = Some(Damage::Row { row: event.id, message: e.to_string() });
                return ControlFlow::Break(());
            }
        };
        // Rows from before per-trace chains have no place in one.
        if let Some(seq) = event.trace_seq {
            walker.link(&event, hash);
            if let Some(problem) = walker.first_problem() {
                damage = Some(Damage::of(trace_id, problem));
                return ControlFlow::Break(());
            }
            if let Some(head) = head.as_ref().filter(|head| head.frames == seq && head.head != event.chain_blake3) {
                damage = Some(Damage::Row {
                    row: event.id,
                    message: format!(
                        "frame {} of the trace is not the one its head row holds: the head row, or the trace up to \
                         here, was edited",
                        head.frames
                    ),
                });
                return ControlFlow::Break(());
            }
        }
        given += 1;
        let flow = f(event, hash);
        stopped = flow.is_break();
        flow
    })?;
    if let Some(damage) = damage {
        return Err(CheckedReadError::Damaged(damage));
    }
    if stopped {
        return Ok(given);
    }
    // Frames past the head row's were appended since it was read (its own
    // frame was checked against it above), as were those of a trace that had
    // no head row yet.
    let problems = match &head {
        Some(head) if head.frames >= walker.frames() => walker.finish(Some(head)),
        _ => walker.finish_leaves(),
    };
    match problems.first() {
        Some(problem) => Err(CheckedReadError::Damaged(Damage::of(trace_id, problem))),
        None => Ok(given),
    }
}
