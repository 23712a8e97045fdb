//! Verifying the ledger (docs/fleet.md, "Verifiable without one line"):
//! every row hash, every trace's chain, the head rows, the checkpoints and
//! the legacy chain — or one trace and the checkpoints that cover it.
//!
//! Each kind of tampering is reported where it happened:
//!
//! - `edited`: a row's columns no longer give its `hash_blake3`;
//! - `removed`: frames are missing inside a trace (its positions jump), or
//!   legacy rows are missing (row ids jump and the legacy chain breaks);
//! - `chain`: a link breaks without a gap — rows were reordered or
//!   repeated, or a row was edited together with its hash;
//! - `truncated`: frames are missing at the end of a trace, below what its
//!   head row or a checkpoint counts; `trace_removed`: a whole trace is;
//! - `head`: a head row does not match its trace's frames;
//! - `checkpoint`: a checkpoint does not check out (signature, signer,
//!   Merkle root, sequence, the ledger it names);
//! - `malformed`: a stored hash is not 64 hex digits, or a row is missing
//!   its chain value;
//! - `identity`: the ledger's own row (its id, the legacy seal) is gone.
//!
//! A full verify is linear: one pass over the rows, trace by trace, the
//! traces checked in parallel; the head rows and checkpoint leaves are held
//! in memory (about 100 bytes a trace).

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::mpsc;

use rayon::prelude::*;
use serde::Serialize;
use uuid::Uuid;

use crate::event::Event;
use crate::event::hash::{GENESIS, chain_hash, from_hex, to_hex};
use crate::integrity::keys::PublicKey;
use crate::ledger::checkpoint::{Statement, check_checkpoint, check_root, check_statement, statement_hash};
use crate::ledger::layout::{Leaf, LedgerInfo, MAX_FRAMES, StoredCheckpoint, TraceChain, TraceHead};
use crate::ledger::{LedgerError, LedgerStore, Location, Snapshot};

/// What a ledger whose identity row was deleted is told.
pub(crate) const IDENTITY_GONE: &str =
    "the ledger's own row (rlp_ledger: its id and the legacy chain's seal) is gone: the ledger was edited";

/// Problems listed before the rest are only counted.
pub(crate) const MAX_LISTED_PROBLEMS: usize = 100;
/// Rows handed to the parallel checkers at a time.
const CHUNK_ROWS: usize = 4096;

/// What is wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// The row's content does not give its hash.
    Edited,
    /// Frames or rows before this one were deleted.
    Removed,
    /// A link breaks without a gap.
    Chain,
    /// A hash or chain value is not 64 hex digits, or the chain is missing.
    Malformed,
    /// Frames are missing at the end of a trace or of the legacy chain.
    Truncated,
    /// A whole trace is missing.
    TraceRemoved,
    /// A head row does not match its trace.
    Head,
    /// A checkpoint does not check out.
    Checkpoint,
    /// The ledger's own row — its id and the legacy chain's seal — is gone.
    Identity,
}

/// One thing that does not check out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The row id, when it is about a row.
    pub row: Option<i64>,
    /// The row's kind column.
    pub kind: Option<String>,
    /// The trace it is about (when known).
    pub trace_id: Option<String>,
    /// The checkpoint it is about.
    pub checkpoint: Option<i64>,
    /// The class of problem.
    pub problem: ProblemKind,
    /// What is wrong, in words.
    pub message: String,
}

impl Problem {
    fn of_row(event: &Event, trace_id: Option<String>, problem: ProblemKind, message: String) -> Problem {
        Problem { row: Some(event.id), kind: Some(event.kind.clone()), trace_id, checkpoint: None, problem, message }
    }

    fn of_trace(trace_id: &str, problem: ProblemKind, message: String) -> Problem {
        Problem { row: None, kind: None, trace_id: Some(trace_id.to_string()), checkpoint: None, problem, message }
    }

    /// A problem with a trace's head row.
    pub(crate) fn trace(trace_id: &str, message: &str) -> Problem {
        Problem::of_trace(trace_id, ProblemKind::Head, message.to_string())
    }

    /// A problem with checkpoint `seq`.
    pub(crate) fn checkpoint(seq: i64, message: &str) -> Problem {
        Problem::of_checkpoint(seq, message.to_string())
    }

    /// The ledger's identity row is gone.
    pub(crate) fn identity_gone() -> Problem {
        Problem::of_ledger(ProblemKind::Identity, IDENTITY_GONE.to_string())
    }

    fn of_ledger(problem: ProblemKind, message: String) -> Problem {
        Problem { row: None, kind: None, trace_id: None, checkpoint: None, problem, message }
    }

    fn of_checkpoint(seq: i64, message: String) -> Problem {
        Problem {
            row: None,
            kind: None,
            trace_id: None,
            checkpoint: Some(seq),
            problem: ProblemKind::Checkpoint,
            message,
        }
    }

    /// Rows first (by id), then traces, then checkpoints.
    fn order_key(&self) -> (i64, String, i64) {
        (self.row.unwrap_or(i64::MAX), self.trace_id.clone().unwrap_or_default(), self.checkpoint.unwrap_or(0))
    }
}

/// The newest checkpoint, as a report names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckpointSummary {
    /// Its number.
    pub seq: i64,
    /// When it was made (milliseconds since the Unix epoch).
    pub ts_ms: i64,
    /// BLAKE3 of its statement: keep it elsewhere to notice checkpoints removed later.
    pub hash: String,
    /// The signer's key id.
    pub key_id: String,
}

/// The outcome of a verify.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// The ledger.
    pub ledger: Location,
    /// The one trace verified, or `None` for the whole ledger.
    pub trace_id: Option<String>,
    /// Rows read.
    pub rows: u64,
    /// Traces with frames in per-trace chains.
    pub traces: u64,
    /// Rows of the legacy chain read (rows written before per-trace chains).
    pub legacy_rows: u64,
    /// Leading legacy rows without a chain value (upstream databases), not checked.
    pub unchained: u64,
    /// Checkpoints read.
    pub checkpoints: u64,
    /// Those that check out.
    pub checkpoints_intact: u64,
    /// The newest checkpoint read.
    pub latest_checkpoint: Option<CheckpointSummary>,
    /// Frames no checkpoint covers yet (their loss with their trace's head
    /// row would go unnoticed until the next checkpoint).
    pub uncovered_frames: u64,
    /// The first problems.
    pub problems: Vec<Problem>,
    /// Problems beyond those listed.
    pub more_problems: u64,
}

impl VerifyReport {
    /// Whether everything checks out.
    pub fn is_intact(&self) -> bool {
        self.problems.is_empty()
    }

    /// The first problem listed.
    pub fn first_problem(&self) -> Option<&Problem> {
        self.problems.first()
    }
}

/// Problems, bounded: the first [`MAX_LISTED_PROBLEMS`] by place, the rest counted.
#[derive(Default)]
struct Problems {
    listed: Vec<Problem>,
    more: u64,
}

impl Problems {
    fn extend(&mut self, problems: impl IntoIterator<Item = Problem>) {
        self.listed.extend(problems);
        if self.listed.len() > 4 * MAX_LISTED_PROBLEMS {
            self.trim();
        }
    }

    fn trim(&mut self) {
        self.listed.sort_by_key(Problem::order_key);
        if self.listed.len() > MAX_LISTED_PROBLEMS {
            self.more += (self.listed.len() - MAX_LISTED_PROBLEMS) as u64;
            self.listed.truncate(MAX_LISTED_PROBLEMS);
        }
    }
}

#[derive(serde::Deserialize)]
struct TraceOnly {
    trace_id: String,
}

/// The trace a row claims to belong to.
pub(crate) fn trace_of(event: &Event) -> Option<String> {
    serde_json::from_str::<TraceOnly>(&event.provenance_json).ok().map(|p| p.trace_id)
}

/// Checks a row's content against its stored hash; the hash to link with.
fn check_row_hash(event: &Event, scratch: &mut String, problems: &mut Vec<Problem>) -> [u8; 32] {
    let computed = event.stored_text_hash(scratch);
    let stored = from_hex(&event.hash_blake3);
    if stored != Some(computed) {
        let message = match (stored, event.computed_hash()) {
            (None, _) => "hash_blake3 is not 64 hex digits".to_string(),
            (Some(_), Err(why)) => format!("{why}: the row was edited"),
            (Some(_), Ok(_)) => "the row's content does not match its hash_blake3: the row was edited".to_string(),
        };
        let kind = if stored.is_none() { ProblemKind::Malformed } else { ProblemKind::Edited };
        problems.push(Problem::of_row(event, trace_of(event), kind, message));
    }
    stored.unwrap_or(computed)
}

/// A leaf of a checkpoint, as the trace it covers is checked against it.
#[derive(Clone, Debug)]
pub(crate) struct LeafRef {
    checkpoint: i64,
    frames: i64,
    head: String,
}

impl LeafRef {
    /// `leaf`, of checkpoint `checkpoint`.
    pub(crate) fn of(checkpoint: i64, leaf: Leaf) -> LeafRef {
        LeafRef { checkpoint, frames: leaf.frames, head: leaf.head }
    }
}

/// Walks the rows of one trace's chain, in row order, from a known state.
pub(crate) struct TraceWalker {
    trace_id: String,
    chain: TraceChain,
    leaves: Vec<LeafRef>,
    rows: u64,
    problems: Vec<Problem>,
    scratch: String,
}

impl TraceWalker {
    /// A walk of `trace_id` from `start` (the empty chain, or what a
    /// checkpoint sealed).
    pub(crate) fn starting_at(trace_id: &str, start: TraceChain) -> TraceWalker {
        TraceWalker {
            trace_id: trace_id.to_string(),
            chain: start,
            leaves: Vec::new(),
            rows: 0,
            problems: Vec::new(),
            scratch: String::new(),
        }
    }

    /// The walk, checking the trace against the checkpoints' `leaves` of it too.
    pub(crate) fn with_leaves(mut self, leaves: Vec<LeafRef>) -> TraceWalker {
        self.leaves = leaves;
        self
    }

    fn problem(&mut self, event: &Event, kind: ProblemKind, message: String) {
        self.problems.push(Problem::of_row(event, Some(self.trace_id.clone()), kind, message));
    }

    /// Checks the next row.
    pub(crate) fn row(&mut self, event: &Event) {
        let hash = check_row_hash(event, &mut self.scratch, &mut self.problems);
        self.link(event, hash);
    }

    /// The first problem found so far.
    pub(crate) fn first_problem(&self) -> Option<&Problem> {
        self.problems.first()
    }

    /// Checks the next row's place in the chain, its content's hash (or
    /// its stored one, when that does not match) being `hash`.
    pub(crate) fn link(&mut self, event: &Event, hash: [u8; 32]) {
        self.rows += 1;
        let Some(seq) = event.trace_seq else {
            self.problem(event, ProblemKind::Malformed, "the row has no position in its trace's chain".into());
            return;
        };
        if !(1..=MAX_FRAMES).contains(&seq) {
            self.problem(event, ProblemKind::Malformed, format!("trace_seq {seq} is not a position rlp writes"));
            return;
        }
        let Some(stored_chain) = from_hex(&event.chain_blake3) else {
            self.problem(event, ProblemKind::Malformed, "chain_blake3 is not 64 hex digits".into());
            self.chain = TraceChain { frames: seq.max(self.chain.frames), head: self.chain.head };
            return;
        };
        let expected = self.chain.frames + 1;
        if seq == expected {
            if chain_hash(&self.chain.head, &hash) != stored_chain {
                let message = match seq {
                    1 => "chain_blake3 of the trace's first frame does not start from the genesis value: it was \
                          edited together with its hash"
                        .to_string(),
                    _ => format!(
                        "chain_blake3 does not follow from frame {} of the trace: rows were reordered, or this \
                         row was edited together with its hash",
                        seq - 1
                    ),
                };
                self.problem(event, ProblemKind::Chain, message);
            }
        } else if seq > expected {
            let missing = match seq - 1 == expected {
                true => format!("frame {expected} of the trace is missing before this row"),
                false => format!("frames {expected} to {} of the trace are missing before this row", seq - 1),
            };
            self.problem(event, ProblemKind::Removed, format!("{missing}: removed, or rows were reordered"));
        } else {
            self.problem(
                event,
                ProblemKind::Chain,
                format!(
                    "this row is frame {seq} of the trace, after frame {}: rows were reordered or repeated",
                    self.chain.frames
                ),
            );
        }
        if seq >= expected {
            self.chain = TraceChain { frames: seq, head: stored_chain };
        }
        for leaf in self.leaves.iter().filter(|leaf| leaf.frames == seq) {
            if leaf.head != event.chain_blake3 {
                let problem = Problem::of_row(
                    event,
                    Some(self.trace_id.clone()),
                    ProblemKind::Chain,
                    format!(
                        "frame {seq} of the trace is not the one checkpoint #{} signed: the trace was rewritten up \
                         to here",
                        leaf.checkpoint
                    ),
                );
                self.problems.push(problem);
            }
        }
    }

    /// Frames of the trace's chain walked so far (the last position seen).
    pub(crate) fn frames(&self) -> i64 {
        self.chain.frames
    }

    /// What is missing when the trace ends at the frames walked but
    /// `counted` were counted.
    fn removed(&self, counted: i64) -> (ProblemKind, String) {
        let frames = self.chain.frames;
        match frames {
            0 => (ProblemKind::TraceRemoved, format!("every frame of the trace ({counted}) was removed")),
            _ if counted == frames + 1 => {
                (ProblemKind::Truncated, format!("frame {counted} of the trace, its last, was removed"))
            }
            _ => (
                ProblemKind::Truncated,
                format!("frames {} to {counted} of the trace, its last, were removed", frames + 1),
            ),
        }
    }

    /// Names the frames the checkpoints' leaves count past the last one walked.
    fn check_end_against_leaves(&mut self) {
        let frames = self.chain.frames;
        if let Some(leaf) = self.leaves.iter().filter(|leaf| leaf.frames > frames).max_by_key(|leaf| leaf.frames) {
            let (kind, what) = self.removed(leaf.frames);
            let message = format!("{what}: checkpoint #{} covered {} frames", leaf.checkpoint, leaf.frames);
            self.problems.push(Problem {
                checkpoint: Some(leaf.checkpoint),
                ..Problem::of_trace(&self.trace_id, kind, message)
            });
        }
    }

    /// The problems found, with what the checkpoints' leaves say the trace
    /// should end with (its head row left out).
    pub(crate) fn finish_leaves(mut self) -> Vec<Problem> {
        self.check_end_against_leaves();
        self.problems
    }

    /// The problems found, with what the head row and the checkpoints'
    /// leaves say the trace should end with.
    pub(crate) fn finish(mut self, head: Option<&TraceHead>) -> Vec<Problem> {
        self.check_end_against_leaves();
        let frames = self.chain.frames;
        match head {
            None if self.rows > 0 => self.problems.push(Problem::of_trace(
                &self.trace_id,
                ProblemKind::Head,
                "the trace has frames but no head row in rlp_traces: it was removed".into(),
            )),
            None => {}
            Some(head) if head.frames > frames => {
                let (kind, what) = self.removed(head.frames);
                let message = format!("{what}: its head row counts {} frames", head.frames);
                self.problems.push(Problem::of_trace(&self.trace_id, kind, message));
            }
            Some(head) if head.frames < frames => self.problems.push(Problem::of_trace(
                &self.trace_id,
                ProblemKind::Head,
                format!(
                    "the trace has {frames} frames but its head row counts {}: frames were added without moving \
                     the head, or the head was moved back",
                    head.frames
                ),
            )),
            Some(head) if head.head != to_hex(&self.chain.head) && frames > 0 => self.problems.push(Problem::of_trace(
                &self.trace_id,
                ProblemKind::Head,
                "the head row's chain value is not the last frame's: the head or the last frame was edited".into(),
            )),
            Some(_) => {}
        }
        self.problems
    }
}

/// Walks the legacy chain (rows before per-trace chains), in row order.
struct LegacyWalker {
    rows: u64,
    unchained: u64,
    prev_chain: Option<[u8; 32]>,
    prev_id: Option<i64>,
    problems: Vec<Problem>,
    scratch: String,
}

impl LegacyWalker {
    fn problem(&mut self, event: &Event, problem: ProblemKind, message: String) {
        self.problems.push(Problem::of_row(event, trace_of(event), problem, message));
    }

    fn row(&mut self, event: &Event) {
        self.rows += 1;
        let prev_id = self.prev_id.replace(event.id);
        if event.chain_blake3.is_empty() {
            if self.prev_chain.is_some() {
                self.problem(event, ProblemKind::Malformed, "the row has no chain value after chained rows".into());
            } else {
                self.unchained += 1;
            }
            return;
        }
        let link = check_row_hash(event, &mut self.scratch, &mut self.problems);
        let Some(chain) = from_hex(&event.chain_blake3) else {
            self.problem(event, ProblemKind::Malformed, "chain_blake3 is not 64 hex digits".into());
            return;
        };
        let prev = self.prev_chain.replace(chain);
        if chain_hash(&prev.unwrap_or(GENESIS), &link) == chain {
            return;
        }
        match prev_id {
            Some(before) if event.id > before.saturating_add(1) => {
                let (first, last) = (before.saturating_add(1), event.id.saturating_sub(1));
                let missing = match first == last {
                    true => format!("row {first} is missing"),
                    false => format!("rows {first} to {last} are missing"),
                };
                self.problem(
                    event,
                    ProblemKind::Removed,
                    format!("{missing}: rows of the legacy chain were removed before this one (the chain breaks here)"),
                );
            }
            Some(before) => self.problem(
                event,
                ProblemKind::Chain,
                format!(
                    "chain_blake3 does not follow from row {before}: rows were reordered, or this row was edited \
                     together with its hash"
                ),
            ),
            None => self.problem(
                event,
                ProblemKind::Chain,
                "chain_blake3 of the first row does not start from the genesis value: rows before it were \
                 removed, or it was edited"
                    .into(),
            ),
        }
    }

    /// The problems, with the seal the upgrade left (its row count and
    /// head), when it is known.
    fn finish(mut self, info: Option<&LedgerInfo>) -> Vec<Problem> {
        let head = self.prev_chain.map_or_else(|| to_hex(&GENESIS), |c| to_hex(&c));
        let Some(info) = info else { return self.problems };
        if self.rows < info.legacy_rows {
            self.problems.push(Problem::of_ledger(
                ProblemKind::Truncated,
                format!(
                    "the legacy chain has {} rows, but {} were sealed at the upgrade: rows were removed",
                    self.rows, info.legacy_rows
                ),
            ));
        } else if self.rows > info.legacy_rows || (info.legacy_rows > 0 && head != info.legacy_head) {
            self.problems.push(Problem::of_ledger(
                ProblemKind::Chain,
                format!(
                    "the legacy chain ({} rows, ending {head}) is not the one sealed at the upgrade ({} rows, \
                     ending {}): rows were added or edited",
                    self.rows, info.legacy_rows, info.legacy_head
                ),
            ));
        }
        self.problems
    }
}

/// Checks the checkpoints in order (each on its own and linked to the one
/// before, the first to `after`: the number and statement hash of the one
/// before it, or `None` for the genesis value); returns the leaves by trace
/// and the newest checkpoint's summary. With `counts` (the leaves each has
/// stored), their leaves are not read: everything but their roots is checked.
fn check_checkpoints(
    checkpoints: &[StoredCheckpoint],
    counts: Option<&[u64]>,
    info: &LedgerInfo,
    trusted: &[PublicKey],
    after: Option<(i64, String)>,
    problems: &mut Problems,
) -> (HashMap<String, Vec<LeafRef>>, Option<CheckpointSummary>, u64) {
    let mut leaves: HashMap<String, Vec<LeafRef>> = HashMap::new();
    let mut latest = None;
    let mut intact = 0;
    let mut prev = after;
    for (i, checkpoint) in checkpoints.iter().enumerate() {
        if let Some((before, _)) = &prev
            && checkpoint.seq != before + 1
        {
            let (first, last) = (before.saturating_add(1), checkpoint.seq.saturating_sub(1));
            let missing = match first == last {
                true => format!("checkpoint #{first} is missing"),
                false => format!("checkpoints #{first} to #{last} are missing"),
            };
            problems.extend([Problem::of_checkpoint(checkpoint.seq, missing)]);
        }
        let expected_prev = Some(prev.as_ref().map(|(_, hash)| hash.as_str()));
        let checked = match counts {
            Some(counts) => {
                check_statement(checkpoint, info, expected_prev, trusted, counts.get(i).copied().unwrap_or(0))
            }
            None => check_checkpoint(checkpoint, info, expected_prev, trusted),
        };
        match checked {
            Ok(statement) => {
                intact += 1;
                let key_id = PublicKey::parse(&statement.key).map(|k| k.key_id().to_string()).unwrap_or_default();
                latest = Some(CheckpointSummary {
                    seq: checkpoint.seq,
                    ts_ms: statement.ts_ms,
                    hash: statement_hash(&checkpoint.statement),
                    key_id,
                });
            }
            Err(message) => problems.extend([Problem::of_checkpoint(checkpoint.seq, message)]),
        }
        for leaf in &checkpoint.leaves {
            leaves.entry(leaf.trace_id.clone()).or_default().push(LeafRef {
                checkpoint: checkpoint.seq,
                frames: leaf.frames,
                head: leaf.head.clone(),
            });
        }
        prev = Some((checkpoint.seq, statement_hash(&checkpoint.statement)));
    }
    (leaves, latest, intact)
}

/// The chain each trace's newest leaf signed, when every checkpoint of
/// `checkpoints` checks out (signed by one of `trusted`, its root over its
/// stored leaves, linked to the one before and the first to `after` — the
/// number and statement hash of the checkpoint before them, or `None` when
/// they start from the first); otherwise what does not.
pub(crate) fn verified_coverage(
    checkpoints: &[StoredCheckpoint],
    after: Option<(i64, String)>,
    info: &LedgerInfo,
    trusted: &[PublicKey],
) -> Result<HashMap<String, TraceChain>, Vec<Problem>> {
    let mut problems = Problems::default();
    let (leaves, _, _) = check_checkpoints(checkpoints, None, info, trusted, after, &mut problems);
    problems.trim();
    if !problems.listed.is_empty() {
        return Err(problems.listed);
    }
    let mut coverage = HashMap::with_capacity(leaves.len());
    for (trace_id, leaves) in leaves {
        let newest = leaves
            .iter()
            .max_by_key(|leaf| leaf.frames)
            .and_then(|leaf| from_hex(&leaf.head).map(|head| TraceChain { frames: leaf.frames, head }));
        match newest {
            Some(chain) => {
                coverage.insert(trace_id, chain);
            }
            None => {
                return Err(vec![Problem::of_trace(
                    &trace_id,
                    ProblemKind::Head,
                    "a checkpoint's leaf of the trace has no valid chain value".into(),
                )]);
            }
        }
    }
    Ok(coverage)
}

/// What a verify is handed besides the ledger.
#[derive(Clone, Debug, Default)]
pub struct VerifyOptions {
    /// The keys whose checkpoints are trusted.
    pub trusted: Vec<PublicKey>,
    /// Only this trace (and the checkpoints that cover it).
    pub trace: Option<Uuid>,
}

/// Verifies `store` (the whole ledger, or one trace: see [`VerifyOptions`]).
pub fn verify(store: &dyn LedgerStore, options: &VerifyOptions) -> Result<VerifyReport, LedgerError> {
    // Head rows, frames and checkpoints read as they stood together: a
    // writer appending meanwhile is neither seen half nor taken for an edit.
    let _snapshot = Snapshot::of(store)?;
    match options.trace {
        Some(trace) => verify_trace(store, &trace, &options.trusted),
        None => verify_all(store, &options.trusted),
    }
}

fn empty_report(store: &dyn LedgerStore, trace_id: Option<String>) -> VerifyReport {
    VerifyReport {
        ledger: store.location().clone(),
        trace_id,
        rows: 0,
        traces: 0,
        legacy_rows: 0,
        unchained: 0,
        checkpoints: 0,
        checkpoints_intact: 0,
        latest_checkpoint: None,
        uncovered_frames: 0,
        problems: Vec::new(),
        more_problems: 0,
    }
}

/// A row with what the parallel pass found: the hash to link it with, the
/// trace it names, and the problems with its content.
struct HashedRow {
    event: Event,
    hash: [u8; 32],
    trace: String,
    problems: Vec<Problem>,
}

impl HashedRow {
    fn of(event: Event) -> HashedRow {
        let mut problems = Vec::new();
        let hash = check_row_hash(&event, &mut String::new(), &mut problems);
        let trace = trace_of(&event).unwrap_or_default();
        HashedRow { event, hash, trace, problems }
    }
}

/// The sequential half of a full verify: rows (hashed in parallel) come in
/// trace by trace; one trace's walker at a time.
struct ChainPass<'a> {
    heads: &'a mut HashMap<String, TraceHead>,
    leaves: &'a mut HashMap<String, Vec<LeafRef>>,
    walker: Option<TraceWalker>,
    traces: u64,
    problems: Problems,
}

impl ChainPass<'_> {
    fn row(&mut self, row: HashedRow) {
        self.problems.extend(row.problems);
        if self.walker.as_ref().is_none_or(|w| w.trace_id != row.trace) {
            self.finish_trace();
            self.traces += 1;
            let leaves = self.leaves.remove(&row.trace).unwrap_or_default();
            self.walker = Some(TraceWalker::starting_at(&row.trace, TraceChain::EMPTY).with_leaves(leaves));
        }
        if let Some(walker) = self.walker.as_mut() {
            walker.link(&row.event, row.hash);
        }
    }

    fn finish_trace(&mut self) {
        if let Some(walker) = self.walker.take() {
            let head = self.heads.remove(&walker.trace_id);
            self.problems.extend(walker.finish(head.as_ref()));
        }
    }
}

fn verify_all(store: &dyn LedgerStore, trusted: &[PublicKey]) -> Result<VerifyReport, LedgerError> {
    let mut report = empty_report(store, None);
    let mut problems = Problems::default();
    let checkpoints = store.checkpoints()?;
    let info = identity(store.info()?, &checkpoints, &mut problems);

    let mut legacy = LegacyWalker {
        rows: 0,
        unchained: 0,
        prev_chain: None,
        prev_id: None,
        problems: Vec::new(),
        scratch: String::new(),
    };
    store.for_each_legacy(&mut |event| {
        legacy.row(&event);
        ControlFlow::Continue(())
    })?;
    report.legacy_rows = legacy.rows;
    report.unchained = legacy.unchained;
    problems.extend(legacy.finish(info.as_ref()));

    let info = info.unwrap_or_else(unknown_ledger);
    report.checkpoints = checkpoints.len() as u64;
    let (mut leaves, latest, intact) = check_checkpoints(&checkpoints, None, &info, trusted, None, &mut problems);
    report.latest_checkpoint = latest;
    report.checkpoints_intact = intact;
    drop(checkpoints);

    let mut heads = HashMap::new();
    store.for_each_head(&mut |head| {
        report.uncovered_frames += u64::try_from(head.frames.saturating_sub(head.sealed)).unwrap_or(0);
        heads.insert(head.trace_id.clone(), head);
        ControlFlow::Continue(())
    })?;
    let sealed_problems = check_sealed(&heads, &leaves);
    problems.extend(sealed_problems);

    // One reader; each chunk of rows hashed in parallel, then linked in order.
    let (sender, receiver) = mpsc::sync_channel::<Vec<Event>>(2);
    let mut pass = ChainPass { heads: &mut heads, leaves: &mut leaves, walker: None, traces: 0, problems };
    let (rows_read, pass) = std::thread::scope(|scope| {
        let checker = scope.spawn(move || {
            for chunk in receiver {
                let hashed: Vec<HashedRow> = chunk.into_par_iter().map(HashedRow::of).collect();
                for row in hashed {
                    pass.row(row);
                }
            }
            pass.finish_trace();
            pass
        });
        let mut chunk = Vec::with_capacity(CHUNK_ROWS);
        let mut rows_read = 0u64;
        let read = store.for_each_chained(&mut |event| {
            rows_read += 1;
            chunk.push(event);
            if chunk.len() >= CHUNK_ROWS {
                let _ = sender.send(std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK_ROWS)));
            }
            ControlFlow::Continue(())
        });
        let _ = sender.send(chunk);
        drop(sender);
        let pass = checker.join().map_err(|_| LedgerError::Invalid {
            path: store.location().to_string().into(),
            message: "a verifying thread panicked".into(),
        });
        read.and(pass).map(|pass| (rows_read, pass))
    })?;
    report.rows = report.legacy_rows + rows_read;
    report.traces = pass.traces;
    let mut problems = pass.problems;

    // Traces a head row or a checkpoint names, with no row left.
    for (trace_id, head) in heads {
        let trace_leaves = leaves.remove(&trace_id).unwrap_or_default();
        problems.extend(
            TraceWalker::starting_at(&trace_id, TraceChain::EMPTY).with_leaves(trace_leaves).finish(Some(&head)),
        );
    }
    for (trace_id, trace_leaves) in leaves {
        problems.extend(TraceWalker::starting_at(&trace_id, TraceChain::EMPTY).with_leaves(trace_leaves).finish(None));
    }
    problems.trim();
    report.problems = problems.listed;
    report.more_problems = problems.more;
    Ok(report)
}

/// The ledger's identity row; when it is gone — only an edit of the
/// database removes it — the removal is named and what the newest
/// checkpoint signed of it stands in (its own signature is checked with the
/// rest), or nothing when no checkpoint says.
fn identity(
    found: Option<LedgerInfo>,
    checkpoints: &[StoredCheckpoint],
    problems: &mut Problems,
) -> Option<LedgerInfo> {
    if found.is_some() {
        return found;
    }
    let signed = checkpoints.iter().rev().find_map(|c| Statement::parse(&c.statement).ok());
    let known = match &signed {
        Some(statement) => format!("what checkpoint #{} signed of it is checked instead", statement.seq),
        None => "no checkpoint says what it held, so the legacy chain's seal is not checked".to_string(),
    };
    problems.extend([Problem::of_ledger(ProblemKind::Identity, format!("{IDENTITY_GONE}; {known}"))]);
    signed.map(|s| LedgerInfo { ledger_id: s.ledger, legacy_rows: s.legacy.rows, legacy_head: s.legacy.head })
}

/// Stands in for an identity nobody knows: no checkpoint can match it.
fn unknown_ledger() -> LedgerInfo {
    LedgerInfo { ledger_id: String::new(), legacy_rows: 0, legacy_head: String::new() }
}

/// A head row's `sealed` count must be what the newest leaf of its trace
/// says: a lower one would hide frames from the next checkpoint.
fn check_sealed(heads: &HashMap<String, TraceHead>, leaves: &HashMap<String, Vec<LeafRef>>) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (trace_id, head) in heads {
        let covered = leaves.get(trace_id).and_then(|l| l.iter().map(|leaf| leaf.frames).max()).unwrap_or(0);
        if head.sealed != covered {
            problems.push(Problem::of_trace(
                trace_id,
                ProblemKind::Head,
                format!(
                    "the head row says checkpoints covered {} frames, the checkpoints' leaves say {covered}: the \
                     head row, or a checkpoint, was edited",
                    head.sealed
                ),
            ));
        }
    }
    problems
}

fn verify_trace(store: &dyn LedgerStore, trace: &Uuid, trusted: &[PublicKey]) -> Result<VerifyReport, LedgerError> {
    let trace_id = trace.to_string();
    let mut report = empty_report(store, Some(trace_id.clone()));
    let mut problems = Problems::default();

    // Every checkpoint's statement, signature, place in the chain and count
    // of stored leaves (a leaf of this trace removed shows there); the
    // roots of those that cover the trace, over their leaves.
    let (statements, counts) = store.checkpoint_statements()?;
    let identity = identity(store.info()?, &statements, &mut problems);
    let legacy_sealed = identity.as_ref().map(|info| info.legacy_rows);
    let info = identity.unwrap_or_else(unknown_ledger);
    let (_, latest, _) = check_checkpoints(&statements, Some(&counts), &info, trusted, None, &mut problems);
    report.latest_checkpoint = latest;
    let covering = store.checkpoints_of(trace)?;
    report.checkpoints = covering.len() as u64;
    let mut leaves = Vec::new();
    let mut covering_seqs = Vec::new();
    for checkpoint in covering {
        if let Ok(statement) = Statement::parse(&checkpoint.statement)
            && let Err(message) = check_root(&checkpoint, &statement)
        {
            problems.extend([Problem::of_checkpoint(checkpoint.seq, message)]);
        }
        covering_seqs.push(checkpoint.seq);
        for leaf in checkpoint.leaves.into_iter().filter(|leaf| leaf.trace_id == trace_id) {
            leaves.push(LeafRef::of(checkpoint.seq, leaf));
        }
    }
    let broken: std::collections::HashSet<i64> = problems.listed.iter().filter_map(|p| p.checkpoint).collect();
    report.checkpoints_intact = covering_seqs.iter().filter(|seq| !broken.contains(seq)).count() as u64;
    let head = store.trace_head(trace)?;
    let covered = leaves.iter().map(|leaf| leaf.frames).max().unwrap_or(0);
    report.uncovered_frames = head.as_ref().map_or(0, |h| u64::try_from(h.frames.saturating_sub(covered)).unwrap_or(0));
    if let Some(head) = &head {
        problems.extend(check_sealed(
            &HashMap::from([(trace_id.clone(), head.clone())]),
            &HashMap::from([(trace_id.clone(), leaves.clone())]),
        ));
    }

    // Frames of the trace recorded before per-trace chains: each row's
    // hash here; their links are the legacy chain's (a full verify).
    let mut walker = TraceWalker::starting_at(&trace_id, TraceChain::EMPTY).with_leaves(leaves);
    let mut scratch = String::new();
    let mut legacy_problems = Vec::new();
    store.for_each_in_trace(trace, &mut |event| {
        match event.trace_seq {
            None => {
                report.legacy_rows += 1;
                check_row_hash(&event, &mut scratch, &mut legacy_problems);
            }
            Some(_) => walker.row(&event),
        }
        ControlFlow::Continue(())
    })?;
    // More rows outside any per-trace chain than the upgrade sealed: rows
    // taken out of their chain (a whole verify names the legacy chain grown).
    if let Some(sealed) = legacy_sealed.filter(|sealed| report.legacy_rows > *sealed) {
        legacy_problems.push(Problem::of_trace(
            &trace_id,
            ProblemKind::Malformed,
            format!(
                "{} of the trace's rows have no place in a per-trace chain, more than the {sealed} rows of the \
                 legacy chain sealed at the upgrade: rows were taken out of their chain",
                report.legacy_rows
            ),
        ));
    }
    report.rows = walker.rows + report.legacy_rows;
    report.traces = u64::from(walker.rows > 0 || head.is_some());
    problems.extend(legacy_problems);
    problems.extend(walker.finish(head.as_ref()));
    problems.trim();
    report.problems = problems.listed;
    report.more_problems = problems.more;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::hash::frame_hash;
    use crate::event::{EventKind, Provenance, Record};
    use crate::integrity::keys::SecretKey;
    use crate::ledger::SqliteLedger;
    use crate::ledger::checkpoint::make_checkpoint;
    use rusqlite::{Connection, params};
    use serde_json::json;
    use std::path::Path;

    fn record(trace: u128, n: i64) -> Record {
        Record {
            ts_ms: 1000 + n,
            actor: "runtime".into(),
            kind: EventKind::CapAudit,
            scope: "a".into(),
            payload: json!({"n": n, "s": "é\u{1}"}),
            provenance: Provenance {
                trace_id: Uuid::from_u128(trace),
                msg_id: Uuid::from_u128(n as u128),
                agent: "a".into(),
            },
        }
    }

    fn kinds(report: &VerifyReport) -> Vec<(Option<i64>, Option<String>, ProblemKind)> {
        report.problems.iter().map(|p| (p.row, p.trace_id.clone(), p.problem)).collect()
    }

    fn trace(n: u128) -> Option<String> {
        Some(Uuid::from_u128(n).to_string())
    }

    /// Three traces of three frames each, interleaved, and a checkpoint over them.
    fn ledger(dir: &Path) -> (SqliteLedger, SecretKey) {
        let ledger = SqliteLedger::open(&dir.join("events.sqlite")).unwrap();
        for n in 1..=3 {
            for t in 1..=3 {
                ledger.append(&[record(t, n)]).unwrap();
            }
        }
        let key = SecretKey::from_seed(&[1; 32]);
        make_checkpoint(&ledger, &key, &[], 5).unwrap();
        (ledger, key)
    }

    fn trusting(key: &SecretKey) -> VerifyOptions {
        VerifyOptions { trusted: vec![key.public()], trace: None }
    }

    #[test]
    fn an_intact_ledger_and_each_of_its_traces_verify() {
        let dir = tempfile::tempdir().unwrap();
        let (ledger, key) = ledger(dir.path());
        let report = verify(&ledger, &trusting(&key)).unwrap();
        assert!(report.is_intact(), "{report:?}");
        assert_eq!((report.rows, report.traces, report.checkpoints, report.uncovered_frames), (9, 3, 1, 0));
        let one = VerifyOptions { trace: Some(Uuid::from_u128(2)), ..trusting(&key) };
        let report = verify(&ledger, &one).unwrap();
        assert!(report.is_intact(), "{report:?}");
        assert_eq!((report.rows, report.checkpoints), (3, 1));
        // Untrusted, the checkpoint is a problem.
        let report = verify(&ledger, &VerifyOptions::default()).unwrap();
        assert_eq!(kinds(&report), [(None, None, ProblemKind::Checkpoint)]);
        assert!(report.problems[0].message.contains("not trusted"), "{}", report.problems[0].message);
    }

    #[test]
    fn names_each_edit_removal_and_reordering_and_what_checkpoints_lost() {
        let dir = tempfile::tempdir().unwrap();
        let (ledger, key) = ledger(dir.path());
        ledger.append(&[record(4, 1), record(4, 2)]).unwrap();
        let conn = Connection::open(ledger.path()).unwrap();
        // Trace 1 (rows 1, 4, 7): row 4 edited. Trace 2 (rows 2, 5, 8): row 5
        // removed. Trace 3 (rows 3, 6, 9): its last row removed with its head
        // moved back. Trace 4 (not checkpointed): removed whole, head and all.
        conn.execute_batch(
            "UPDATE events SET payload_json = replace(payload_json, '\"n\":2', '\"n\":7') WHERE id = 4;
             DELETE FROM events WHERE id = 5;
             DELETE FROM events WHERE id = 9;
             UPDATE rlp_traces SET frames = 2, head = (SELECT chain_blake3 FROM events WHERE id = 6)
              WHERE trace_id = '00000000-0000-0000-0000-000000000003';
             DELETE FROM events WHERE id > 9;
             DELETE FROM rlp_traces WHERE trace_id = '00000000-0000-0000-0000-000000000004';",
        )
        .unwrap();
        let report = verify(&ledger, &trusting(&key)).unwrap();
        assert_eq!(
            kinds(&report),
            [
                (Some(4), trace(1), ProblemKind::Edited),
                (Some(8), trace(2), ProblemKind::Removed),
                (None, trace(3), ProblemKind::Truncated),
            ],
            "{report:#?}"
        );
        assert_eq!(
            report.problems[2].message,
            "frame 3 of the trace, its last, was removed: checkpoint #1 covered 3 frames"
        );
        // The whole uncheckpointed trace went unnoticed: that is the window.
        // Swapping two rows of a trace breaks it where the order changed.
        conn.execute_batch(
            "UPDATE events SET id = 100 WHERE id = 1; UPDATE events SET id = 1 WHERE id = 7; UPDATE events SET id = 7 WHERE id = 100;",
        )
        .unwrap();
        let report = verify(&ledger, &trusting(&key)).unwrap();
        assert!(report.problems.iter().any(|p| p.row == Some(7) && p.problem == ProblemKind::Chain), "{report:#?}");
    }

    #[test]
    fn counts_and_positions_past_any_rlp_writes_are_named_never_overflowed() {
        let dir = tempfile::tempdir().unwrap();
        let (ledger, key) = ledger(dir.path());
        let conn = Connection::open(ledger.path()).unwrap();
        conn.execute_batch(
            "UPDATE events SET trace_seq = 9223372036854775807 WHERE id = 1;
             UPDATE rlp_traces SET frames = 9223372036854775807, sealed = -9223372036854775808
              WHERE trace_id = '00000000-0000-0000-0000-000000000002';
             UPDATE rlp_checkpoints SET seq = -9223372036854775808;",
        )
        .unwrap();
        let report = verify(&ledger, &trusting(&key)).unwrap();
        assert!(report.problems.iter().any(|p| p.row == Some(1) && p.problem == ProblemKind::Malformed), "{report:#?}");
        assert!(report.problems.iter().any(|p| p.trace_id == trace(2)), "{report:#?}");
        // Appending to a trace whose head holds such a count is refused, not wrapped.
        let refused = ledger.append(&[record(2, 9)]).unwrap_err();
        assert!(refused.to_string().contains("the ledger was edited"), "{refused}");
        let key2 = SecretKey::from_seed(&[3; 32]);
        assert!(make_checkpoint(&ledger, &key2, &[], 1).is_ok());
    }

    #[test]
    fn a_trace_removed_after_its_checkpoint_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let (ledger, key) = ledger(dir.path());
        let conn = Connection::open(ledger.path()).unwrap();
        conn.execute_batch(
            "DELETE FROM events WHERE json_extract(provenance_json, '$.trace_id') = '00000000-0000-0000-0000-000000000002';
             DELETE FROM rlp_traces WHERE trace_id = '00000000-0000-0000-0000-000000000002';",
        )
        .unwrap();
        let report = verify(&ledger, &trusting(&key)).unwrap();
        assert_eq!(kinds(&report), [(None, trace(2), ProblemKind::TraceRemoved)]);
        // Removing its leaf too breaks the checkpoint's signed root.
        conn.execute("DELETE FROM rlp_checkpoint_leaves WHERE trace_id = ?1", [Uuid::from_u128(2).to_string()])
            .unwrap();
        conn.execute("UPDATE rlp_checkpoints SET statement = replace(statement, '\"traces\":3', '\"traces\":2')", [])
            .unwrap();
        let report = verify(&ledger, &trusting(&key)).unwrap();
        assert_eq!(kinds(&report), [(None, None, ProblemKind::Checkpoint)]);
        assert!(report.problems[0].message.contains("signature"), "{}", report.problems[0].message);
    }

    #[test]
    fn a_trace_taken_out_of_its_chain_is_named_by_either_verify() {
        let dir = tempfile::tempdir().unwrap();
        let (ledger, key) = ledger(dir.path());
        ledger.append(&[record(7, 1)]).unwrap();
        ledger.append(&[record(7, 2)]).unwrap();
        let seven = Uuid::from_u128(7).to_string();
        let conn = Connection::open(ledger.path()).unwrap();
        conn.execute_batch("PRAGMA ignore_check_constraints = ON").unwrap();
        conn.execute(
            "UPDATE events SET trace_seq = NULL, chain_blake3 = NULL WHERE json_extract(provenance_json, '$.trace_id') = ?1",
            [&seven],
        )
        .unwrap();
        conn.execute("DELETE FROM rlp_traces WHERE trace_id = ?1", [&seven]).unwrap();
        let report = verify(&ledger, &trusting(&key)).unwrap();
        assert_eq!(kinds(&report), [(None, None, ProblemKind::Chain)]);
        let one = VerifyOptions { trace: Some(Uuid::from_u128(7)), ..trusting(&key) };
        let report = verify(&ledger, &one).unwrap();
        assert_eq!(kinds(&report), [(None, trace(7), ProblemKind::Malformed)]);
        assert!(report.problems[0].message.starts_with("2 of the trace's rows have no place"));
    }

    #[test]
    fn the_ledgers_own_row_deleted_is_named_and_no_checkpoint_builds_on_it() {
        let dir = tempfile::tempdir().unwrap();
        let (ledger, key) = ledger(dir.path());
        ledger.append(&[record(1, 4)]).unwrap();
        Connection::open(ledger.path()).unwrap().execute("DELETE FROM rlp_ledger", []).unwrap();
        let identity = [(None, None, ProblemKind::Identity)];
        let report = verify(&ledger, &trusting(&key)).unwrap();
        assert_eq!(kinds(&report), identity);
        assert!(report.problems[0].message.ends_with("what checkpoint #1 signed of it is checked instead"));
        let one = VerifyOptions { trace: Some(Uuid::from_u128(1)), ..trusting(&key) };
        assert_eq!(kinds(&verify(&ledger, &one).unwrap()), identity);
        let made = make_checkpoint(&ledger, &key, &[], 6).unwrap();
        assert!(made.checkpoint.is_none());
        assert_eq!(made.broken, [Problem::identity_gone()]);
        let proof = crate::ledger::proof::prove(&ledger, &Uuid::from_u128(1), None, &[key.public()]);
        assert!(matches!(proof, Err(crate::ledger::proof::ProveError::Edited(m)) if m.starts_with(IDENTITY_GONE)));

        // With no checkpoint to say what it held, the legacy seal goes unchecked.
        let bare = SqliteLedger::open(&dir.path().join("bare.sqlite")).unwrap();
        bare.append(&[record(1, 1)]).unwrap();
        Connection::open(bare.path()).unwrap().execute("DELETE FROM rlp_ledger", []).unwrap();
        let report = verify(&bare, &trusting(&key)).unwrap();
        assert_eq!(kinds(&report), identity);
        assert!(report.problems[0].message.ends_with("the legacy chain's seal is not checked"));
    }

    #[test]
    fn a_ledger_from_before_per_trace_chains_keeps_its_chain_verifiable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.sqlite");
        // The table and the one ledger-wide chain as rlp wrote them before.
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, ts_ms INTEGER NOT NULL, actor TEXT NOT NULL,
               kind TEXT NOT NULL, scope TEXT NOT NULL, payload_json TEXT NOT NULL, provenance_json TEXT NOT NULL,
               hash_blake3 TEXT NOT NULL, chain_blake3 TEXT);",
        )
        .unwrap();
        let mut chain = GENESIS;
        for n in 1..=4 {
            let row = crate::event::PreparedRow::from_record(&record(u128::from(n % 2 == 0), n)).unwrap();
            let hash = frame_hash(
                &mut String::new(),
                row.ts_ms,
                &row.actor,
                row.kind.as_str(),
                &row.scope,
                &row.payload_json,
                &row.provenance_json,
            );
            chain = chain_hash(&chain, &hash);
            conn.execute(
                "INSERT INTO events (ts_ms, actor, kind, scope, payload_json, provenance_json, hash_blake3, chain_blake3)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![row.ts_ms, row.actor, row.kind.as_str(), row.scope, row.payload_json, row.provenance_json, to_hex(&hash), to_hex(&chain)],
            )
            .unwrap();
        }
        let ledger = SqliteLedger::open(&path).unwrap();
        assert_eq!(ledger.info().unwrap().unwrap().legacy_rows, 4);
        assert_eq!(ledger.info().unwrap().unwrap().legacy_head, to_hex(&chain));
        ledger.append(&[record(0, 5), record(7, 6)]).unwrap();
        let key = SecretKey::from_seed(&[2; 32]);
        make_checkpoint(&ledger, &key, &[], 9).unwrap();
        let report = verify(&ledger, &trusting(&key)).unwrap();
        assert!(report.is_intact(), "{report:#?}");
        assert_eq!((report.rows, report.legacy_rows, report.traces), (6, 4, 2));
        // An older rlp cannot extend the legacy chain behind the new layout's back.
        let refused = conn.execute(
            "INSERT INTO events (ts_ms, actor, kind, scope, payload_json, provenance_json, hash_blake3) VALUES (1, 'a', 'k', 's', '{}', '{}', 'h')",
            [],
        );
        assert!(refused.unwrap_err().to_string().contains("upgrade rlp"));
        // Its last legacy row removed: the seal says so.
        conn.execute("DELETE FROM events WHERE id = 4", []).unwrap();
        let report = verify(&ledger, &trusting(&key)).unwrap();
        assert_eq!(kinds(&report), [(None, None, ProblemKind::Truncated)], "{report:#?}");
    }

    const TRACE_1: &str = "00000000-0000-0000-0000-000000000001";

    #[test]
    fn a_checkpoint_builds_only_on_what_the_checkpoints_signed() {
        let dir = tempfile::tempdir().unwrap();
        let (ledger, key) = ledger(dir.path());
        // Trace 1 rewritten with consistent hashes, chain and head (frame 2
        // replaced, a frame 4 added) and its `sealed` count reset.
        let forged = SqliteLedger::open(&dir.path().join("forged.sqlite")).unwrap();
        for n in [1, 7, 3, 4] {
            forged.append(&[record(1, n)]).unwrap();
        }
        drop(forged);
        // Trace 2 grows, its head row claiming the new frames sealed;
        // trace 3 grows, its head row removed.
        ledger.append(&[record(2, 4), record(3, 4)]).unwrap();
        let conn = Connection::open(ledger.path()).unwrap();
        let columns = "ts_ms, actor, kind, scope, payload_json, provenance_json, hash_blake3, chain_blake3";
        conn.execute_batch(&format!(
            "ATTACH '{}' AS f;
             UPDATE events SET ({columns}) = (SELECT {columns} FROM f.events AS g WHERE g.trace_seq = events.trace_seq)
              WHERE json_extract(provenance_json, '$.trace_id') = '{TRACE_1}';
             INSERT INTO events ({columns}, trace_seq) SELECT {columns}, trace_seq FROM f.events WHERE trace_seq = 4;
             UPDATE rlp_traces SET (frames, head, sealed) = (SELECT frames, head, 0 FROM f.rlp_traces)
              WHERE trace_id = '{TRACE_1}';
             DETACH f;
             UPDATE rlp_traces SET sealed = frames WHERE trace_id = '00000000-0000-0000-0000-000000000002';
             DELETE FROM rlp_traces WHERE trace_id = '00000000-0000-0000-0000-000000000003';",
            dir.path().join("forged.sqlite").display()
        ))
        .unwrap();
        let made = make_checkpoint(&ledger, &key, &[], 6).unwrap();
        let signed: Vec<&str> = made.checkpoint.as_ref().unwrap().leaves.iter().map(|l| l.trace_id.as_str()).collect();
        assert_eq!(signed, [trace(2).unwrap()], "{made:#?}");
        let refused: Vec<(Option<String>, &str)> =
            made.refused.iter().map(|p| (p.trace_id.clone(), p.message.as_str())).collect();
        assert_eq!(
            refused,
            [
                (trace(3), "the trace has frames but no head row in rlp_traces: it was removed; the ledger was edited"),
                (
                    trace(1),
                    "frame 3 of the trace, the last a checkpoint covered, is missing or not the one it signed; the \
                     ledger was edited"
                ),
            ],
            "{made:#?}"
        );
        // A checkpoint that does not check out is never built on.
        conn.execute("UPDATE rlp_checkpoints SET signature = 'AAAA' WHERE seq = 1", []).unwrap();
        let made = make_checkpoint(&ledger, &key, &[], 7).unwrap();
        assert!(made.checkpoint.is_none(), "{made:#?}");
        assert_eq!(made.broken.len(), 1, "{made:#?}");
        assert_eq!(made.broken[0].checkpoint, Some(1));
    }

    #[test]
    fn one_trace_verify_finds_its_leaf_or_a_checkpoint_removed() {
        let dir = tempfile::tempdir().unwrap();
        let (ledger, key) = ledger(dir.path());
        ledger.append(&[record(1, 4)]).unwrap();
        make_checkpoint(&ledger, &key, &[], 6).unwrap();
        let one = |n: u128| VerifyOptions { trace: Some(Uuid::from_u128(n)), ..trusting(&key) };
        let conn = Connection::open(ledger.path()).unwrap();
        conn.execute("DELETE FROM rlp_checkpoint_leaves WHERE seq = 2 AND trace_id = ?1", [TRACE_1]).unwrap();
        let report = verify(&ledger, &one(1)).unwrap();
        assert!(
            report.problems.iter().any(|p| p.checkpoint == Some(2) && p.message.contains("leaves were removed")),
            "{report:#?}"
        );
        conn.execute("DELETE FROM rlp_checkpoints WHERE seq = 1", []).unwrap();
        let report = verify(&ledger, &one(2)).unwrap();
        assert!(report.problems.iter().any(|p| p.problem == ProblemKind::Checkpoint), "{report:#?}");
    }

    #[test]
    fn a_verify_while_writers_append_sees_one_state_of_the_ledger() {
        let dir = tempfile::tempdir().unwrap();
        let (ledger, key) = ledger(dir.path());
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            for writer in 0..3u128 {
                let (path, stop) = (ledger.path().to_path_buf(), &stop);
                scope.spawn(move || {
                    let store = SqliteLedger::open(&path).unwrap();
                    for n in 1.. {
                        if stop.load(std::sync::atomic::Ordering::Relaxed) {
                            break;
                        }
                        store.append(&[record(10 + writer, n), record(20, n)]).unwrap();
                    }
                });
            }
            for _ in 0..40 {
                let report = verify(&ledger, &trusting(&key)).unwrap();
                let one = verify(&ledger, &VerifyOptions { trace: Some(Uuid::from_u128(20)), ..trusting(&key) });
                if !report.is_intact() || !one.as_ref().unwrap().is_intact() {
                    stop.store(true, std::sync::atomic::Ordering::Relaxed);
                    panic!("{report:#?} {one:#?}");
                }
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
    }

    #[test]
    fn a_checkpointer_between_sweeps_reads_what_was_marked_and_keeps_what_it_verified() {
        use crate::ledger::checkpoint::{Checkpointer, Reach};
        let dir = tempfile::tempdir().unwrap();
        let (ledger, key) = ledger(dir.path());
        let other = SecretKey::from_seed(&[2; 32]);
        let mut checkpointer = Checkpointer::new(&key, &[other.public()]);
        let made = checkpointer.run(&ledger, 6, Reach::Sweep).unwrap();
        assert_eq!((made.checkpoint.is_none(), made.latest), (true, Some(1)), "{made:#?}");
        // Trace 1 grows with its head row claiming it sealed: a run between
        // sweeps misses it, the next sweep seals it.
        ledger.append(&[record(1, 4)]).unwrap();
        let conn = Connection::open(ledger.path()).unwrap();
        conn.execute("UPDATE rlp_traces SET sealed = frames WHERE trace_id = ?1", [TRACE_1]).unwrap();
        assert!(checkpointer.run(&ledger, 7, Reach::Marked).unwrap().checkpoint.is_none());
        let made = checkpointer.run(&ledger, 8, Reach::Sweep).unwrap();
        assert_eq!(made.checkpoint.map(|c| (c.seq, c.leaves.len())), Some((2, 1)));
        // Another trusted checkpointer's checkpoint is verified and built on.
        ledger.append(&[record(2, 4)]).unwrap();
        make_checkpoint(&ledger, &other, &[key.public()], 9).unwrap();
        ledger.append(&[record(3, 4)]).unwrap();
        let made = checkpointer.run(&ledger, 10, Reach::Marked).unwrap();
        assert_eq!(made.checkpoint.map(|c| (c.seq, c.leaves[0].trace_id.clone())), Some((4, trace(3).unwrap())));
        // A checkpoint it verified, removed behind its back, stops it.
        conn.execute_batch(
            "DELETE FROM rlp_checkpoints WHERE seq = 4; DELETE FROM rlp_checkpoint_leaves WHERE seq = 4;",
        )
        .unwrap();
        let made = checkpointer.run(&ledger, 11, Reach::Marked).unwrap();
        assert_eq!(made.broken.iter().map(|p| p.checkpoint).collect::<Vec<_>>(), [Some(4)], "{made:#?}");
    }

    #[test]
    fn frames_of_an_empty_trace_id_without_a_head_row_are_named_by_a_sweep_and_by_a_slice() {
        use crate::ledger::checkpoint::{Checkpointer, Reach};
        let dir = tempfile::tempdir().unwrap();
        let (ledger, key) = ledger(dir.path());
        Connection::open(ledger.path())
            .unwrap()
            .execute_batch(
                "INSERT INTO events (ts_ms, actor, kind, scope, payload_json, provenance_json, hash_blake3,
                   chain_blake3, trace_seq)
                 SELECT ts_ms, actor, kind, scope, payload_json, json_set(provenance_json, '$.trace_id', ''),
                   hash_blake3, chain_blake3, trace_seq FROM events WHERE id = 1",
            )
            .unwrap();
        let named = |made: crate::ledger::checkpoint::Made| -> Vec<Option<String>> {
            made.refused.into_iter().map(|p| p.trace_id).collect()
        };
        assert_eq!(named(make_checkpoint(&ledger, &key, &[], 6).unwrap()), [Some(String::new())]);
        let mut checkpointer = Checkpointer::new(&key, &[]);
        checkpointer.run(&ledger, 7, Reach::Sweep).unwrap();
        assert_eq!(named(checkpointer.run(&ledger, 8, Reach::Slice { traces: 2 }).unwrap()), [Some(String::new())]);
    }

    #[test]
    fn a_sweep_in_slices_reaches_every_trace_once_a_pass() {
        use crate::ledger::checkpoint::{Checkpointer, Reach};
        let dir = tempfile::tempdir().unwrap();
        let (ledger, key) = ledger(dir.path());
        for t in 4..=6 {
            ledger.append(&[record(t, 1)]).unwrap();
        }
        let mut checkpointer = Checkpointer::new(&key, &[]);
        let made = checkpointer.run(&ledger, 6, Reach::Sweep).unwrap();
        assert_eq!(made.checkpoint.map(|c| c.leaves.len()), Some(3));
        assert_eq!(checkpointer.traces_per_pass(), Some(6));
        // Trace 2 grows unmarked; trace 5's head row is removed.
        ledger.append(&[record(2, 4)]).unwrap();
        let conn = Connection::open(ledger.path()).unwrap();
        conn.execute("UPDATE rlp_traces SET sealed = frames WHERE trace_id = ?1", [trace(2)]).unwrap();
        conn.execute("DELETE FROM rlp_traces WHERE trace_id = ?1", [trace(5)]).unwrap();
        let slice = Reach::Slice { traces: 2 };
        let refused = |made: &crate::ledger::checkpoint::Made| -> Vec<Option<String>> {
            made.refused.iter().map(|p| p.trace_id.clone()).collect()
        };
        // Traces 1 and 2: trace 2 sealed.
        let made = checkpointer.run(&ledger, 7, slice).unwrap();
        assert_eq!(
            made.checkpoint.map(|c| c.leaves.iter().map(|l| l.trace_id.clone()).collect()),
            Some(vec![Uuid::from_u128(2).to_string()])
        );
        // Traces 3 and 4, then 6 and the rest of the id space: trace 5 named there.
        let made = checkpointer.run(&ledger, 8, slice).unwrap();
        assert_eq!((made.checkpoint.is_none(), refused(&made)), (true, vec![]));
        assert_eq!(checkpointer.traces_per_pass(), Some(6));
        let made = checkpointer.run(&ledger, 9, slice).unwrap();
        assert_eq!(refused(&made), [trace(5)]);
        assert_eq!(checkpointer.traces_per_pass(), Some(5), "a pass of the five head rows left");
        // The next pass starts again from the first trace, grown unmarked.
        ledger.append(&[record(1, 4)]).unwrap();
        conn.execute("UPDATE rlp_traces SET sealed = frames WHERE trace_id = ?1", [trace(1)]).unwrap();
        let made = checkpointer.run(&ledger, 10, slice).unwrap();
        assert_eq!(made.checkpoint.map(|c| c.leaves[0].trace_id.clone()), trace(1));
    }
}
