//! The ledger's layout beside its frames (docs/fleet.md, "Verifiable
//! without one line"): what every backend stores the same way.
//!
//! - Each trace is a hash chain of its own: frame `n` of a trace has
//!   `trace_seq = n` and `chain_blake3 = BLAKE3(chain of frame n-1 ||
//!   frame hash)`, from [`GENESIS`]. Writers of different traces never wait
//!   for each other.
//! - A trace's head row ([`TraceHead`]) holds its frame count and last chain
//!   value; it moves in the same transaction as the frames, and is the one
//!   serial point — per trace.
//! - A checkpoint ([`StoredCheckpoint`]) is a signed statement over the
//!   traces whose heads moved since the checkpoint before it
//!   ([`crate::ledger::checkpoint`]).
//! - Rows written before this layout keep their single ledger-wide chain
//!   (`trace_seq` NULL): the legacy chain, frozen at the upgrade with its
//!   row count and head in [`LedgerInfo`].

use serde::Serialize;
use uuid::Uuid;

use crate::event::PreparedRow;
use crate::event::hash::{GENESIS, chain_hash, from_hex, to_hex};

/// What identifies a ledger and seals the rows before its upgrade.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerInfo {
    /// A random id, made with the ledger (or at its upgrade); checkpoints
    /// name it, so one ledger's checkpoint cannot stand for another's.
    pub ledger_id: String,
    /// Rows of the legacy chain (written before the upgrade).
    pub legacy_rows: u64,
    /// The legacy chain's last value (the genesis value when it has none).
    pub legacy_head: String,
}

/// A trace's head row: how many frames its chain holds and its last value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceHead {
    /// The trace id, as stored.
    pub trace_id: String,
    /// Frames in the trace's chain.
    pub frames: i64,
    /// The chain value of its last frame (hex).
    pub head: String,
    /// Frames the newest checkpoint covering the trace counted.
    pub sealed: i64,
}

/// One leaf of a checkpoint: a trace as it stood when the checkpoint was made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Leaf {
    /// The trace id.
    pub trace_id: String,
    /// Its frame count then.
    pub frames: i64,
    /// Its chain value then (hex).
    pub head: String,
}

/// A checkpoint as stored: the signed statement's text, the signature and
/// the leaves the statement's Merkle root is over (sorted by trace id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredCheckpoint {
    /// Its number, from 1.
    pub seq: i64,
    /// The statement, canonical JSON ([`crate::ledger::checkpoint::Statement`]).
    pub statement: String,
    /// The Ed25519 signature of the statement, base64.
    pub signature: String,
    /// The leaves.
    pub leaves: Vec<Leaf>,
}

/// The state of one trace's chain while rows are appended to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TraceChain {
    /// Frames so far.
    pub frames: i64,
    /// The last chain value.
    pub head: [u8; 32],
}

/// The most frames a trace's chain can count: a stored count or position
/// beyond it (or below 0) was not written by rlp, and arithmetic on it could
/// overflow.
pub(crate) const MAX_FRAMES: i64 = 1 << 53;

impl TraceChain {
    /// A trace with no frame yet.
    pub(crate) const EMPTY: TraceChain = TraceChain { frames: 0, head: GENESIS };

    /// The state a head row stores; `None` when its head is not 64 hex
    /// digits or its count is out of range.
    pub(crate) fn of_head(frames: i64, head: &str) -> Option<TraceChain> {
        (0..MAX_FRAMES).contains(&frames).then_some(())?;
        Some(TraceChain { frames, head: from_hex(head)? })
    }

    /// Chains `row` on; returns its `trace_seq` and chain value.
    pub(crate) fn push(&mut self, row: &PreparedRow) -> (i64, [u8; 32]) {
        self.frames += 1;
        self.head = chain_hash(&self.head, &row.hash);
        (self.frames, self.head)
    }

    /// The head as stored.
    pub(crate) fn head_hex(&self) -> String {
        to_hex(&self.head)
    }
}

/// The traces of `rows`, each once, in the order they first appear.
pub(crate) fn traces_of(rows: &[PreparedRow]) -> Vec<Uuid> {
    let mut traces: Vec<Uuid> = Vec::new();
    for row in rows {
        if !traces.contains(&row.trace_id) {
            traces.push(row.trace_id);
        }
    }
    traces
}

/// Hands each checkpoint (in `seq` order) its leaves (sorted by `seq`).
pub(crate) fn attach_leaves(checkpoints: &mut [StoredCheckpoint], leaves: Vec<(i64, Leaf)>) {
    let mut leaves = leaves.into_iter().peekable();
    for checkpoint in checkpoints {
        while let Some((seq, _)) = leaves.peek() {
            if *seq < checkpoint.seq {
                leaves.next();
            } else if *seq == checkpoint.seq {
                if let Some((_, leaf)) = leaves.next() {
                    checkpoint.leaves.push(leaf);
                }
            } else {
                break;
            }
        }
    }
}
