//! Checkpoints: signed statements that tie the per-trace chains together
//! (docs/fleet.md, "Checkpoints").
//!
//! Checkpoint `k` covers every trace whose head moved since checkpoint
//! `k-1`: one leaf per trace, `{"frames":N,"head":"<hex>","trace_id":"…"}`
//! in RFC 8785 form, sorted by trace id, under an RFC 6962 Merkle tree
//! ([`crate::ledger::merkle`]). Its [`Statement`] names the ledger, its
//! number, the hash of the statement before it, the root, the count of
//! leaves, the legacy chain's seal and the signer's public key; it is
//! signed with Ed25519 over a domain prefix and its canonical text.
//!
//! Making one ([`make_checkpoint`]) reads the head rows no checkpoint
//! covers yet, checks each such trace's new frames (hashes, positions and
//! links, from the head the previous checkpoint sealed) before it signs, so
//! a checkpoint never vouches for a row that was already edited; a trace
//! that does not check out is left out and reported.

use std::collections::HashMap;
use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};

use crate::event::canonical::canonical_text;
use crate::event::hash::{GENESIS, from_hex, to_hex};
use crate::integrity::keys::{PublicKey, SecretKey, b64_decode_exact, b64_encode};
use crate::ledger::layout::{Leaf, LedgerInfo, StoredCheckpoint, TraceChain, TraceHead};
use crate::ledger::merkle;
use crate::ledger::verify::{Problem, TraceWalker, trace_of, verified_coverage};
use crate::ledger::{LedgerError, LedgerStore, Snapshot};

/// The `format` of the statements this rlp writes.
pub const FORMAT: &str = "rlp-checkpoint/1";
/// What a checkpoint signature signs before the statement.
const DOMAIN: &[u8] = b"rlp-checkpoint-v1\n";
/// How often a checkpoint is tried again when another one took its number.
const MAX_TRIES: u32 = 20;

/// The legacy chain as a statement seals it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LegacySeal {
    /// Rows of the legacy chain.
    pub rows: u64,
    /// Its last chain value.
    pub head: String,
}

/// What a checkpoint says, signed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Statement {
    /// [`FORMAT`].
    pub format: String,
    /// The ledger's id.
    pub ledger: String,
    /// The checkpoint's number, from 1.
    pub seq: i64,
    /// BLAKE3 of the previous statement's text (64 zeros before the first).
    pub prev: String,
    /// When it was made (milliseconds since the Unix epoch).
    pub ts_ms: i64,
    /// The Merkle root over the leaves (hex).
    pub root: String,
    /// How many leaves (traces) it covers.
    pub traces: u64,
    /// The legacy chain's seal.
    pub legacy: LegacySeal,
    /// The signer's public key (`ed25519:<base64>`).
    pub key: String,
}

impl Statement {
    /// The canonical text that is signed and stored.
    pub fn text(&self) -> String {
        canonical_text(&serde_json::to_value(self).unwrap_or_default())
    }

    /// Reads a stored statement; it must be in canonical form.
    pub fn parse(text: &str) -> Result<Statement, String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("the statement is not JSON: {e}"))?;
        let statement: Statement =
            serde_json::from_value(value.clone()).map_err(|e| format!("the statement does not read: {e}"))?;
        if canonical_text(&value) != text {
            return Err("the statement is not in canonical form".into());
        }
        if statement.format != FORMAT {
            return Err(format!("the statement's format is `{}`, not `{FORMAT}`", statement.format));
        }
        Ok(statement)
    }
}

/// The hash of a statement's text: what the next statement's `prev` names.
pub fn statement_hash(text: &str) -> String {
    blake3::hash(text.as_bytes()).to_hex().to_string()
}

/// A leaf's bytes: its RFC 8785 form.
pub fn leaf_bytes(leaf: &Leaf) -> String {
    canonical_text(&serde_json::to_value(leaf).unwrap_or_default())
}

/// The leaf hashes of `leaves`, in order.
pub fn leaf_hashes(leaves: &[Leaf]) -> Vec<[u8; 32]> {
    leaves.iter().map(|leaf| merkle::leaf_hash(leaf_bytes(leaf).as_bytes())).collect()
}

/// The signed message.
fn message(statement: &str) -> Vec<u8> {
    [DOMAIN, statement.as_bytes()].concat()
}

/// Whether `signature` (base64) is `key`'s signature of `statement`.
pub fn signature_holds(key: &PublicKey, statement: &str, signature: &str) -> bool {
    let Ok(bytes) = b64_decode_exact::<64>(signature) else {
        return false;
    };
    let signature = ed25519_dalek::Signature::from_bytes(&bytes);
    key.verifying_key().verify_strict(&message(statement), &signature).is_ok()
}

/// What is wrong with a stored checkpoint, checked on its own and, when
/// `prev` is given, against the one before it (`Some(hash)` of its
/// statement, or `None` when this should be the first).
pub fn check_checkpoint(
    checkpoint: &StoredCheckpoint,
    info: &LedgerInfo,
    prev: Option<Option<&str>>,
    trusted: &[PublicKey],
) -> Result<Statement, String> {
    let statement = check_statement(checkpoint, info, prev, trusted, checkpoint.leaves.len() as u64)?;
    check_root(checkpoint, &statement)?;
    Ok(statement)
}

/// [`check_checkpoint`] without reading the leaves: everything but the
/// root, with `stored_leaves` the count of leaves stored for it.
pub fn check_statement(
    checkpoint: &StoredCheckpoint,
    info: &LedgerInfo,
    prev: Option<Option<&str>>,
    trusted: &[PublicKey],
    stored_leaves: u64,
) -> Result<Statement, String> {
    let statement = Statement::parse(&checkpoint.statement)?;
    if statement.seq != checkpoint.seq {
        return Err(format!("its statement says it is checkpoint #{}", statement.seq));
    }
    if statement.ledger != info.ledger_id {
        return Err(format!("it was made for ledger {}, not this one ({})", statement.ledger, info.ledger_id));
    }
    if let Some(prev) = prev
        && statement.prev != prev.map_or_else(|| to_hex(&GENESIS), str::to_string)
    {
        return Err(match prev {
            Some(_) => "it does not follow from the checkpoint before it (checkpoints were removed, replaced or \
                        reordered)"
                .into(),
            None => "it is the first checkpoint stored, but its statement follows another one (checkpoints \
                     were removed)"
                .into(),
        });
    }
    let key = PublicKey::parse(&statement.key).map_err(|why| format!("its key does not read: {why}"))?;
    if !signature_holds(&key, &checkpoint.statement, &checkpoint.signature) {
        return Err(format!("its signature does not verify with its key {}", key.key_id()));
    }
    if !trusted.contains(&key) {
        return Err(format!(
            "it is signed by key {}, which is not trusted here (trust the key that makes this ledger's \
             checkpoints: [ledger] checkpoint_keys in config.toml, or --key)",
            key.key_id()
        ));
    }
    let seal = LegacySeal { rows: info.legacy_rows, head: info.legacy_head.clone() };
    if statement.legacy != seal {
        return Err(format!(
            "it seals a legacy chain of {} rows ending {}, but the ledger's seal says {} rows ending {}",
            statement.legacy.rows, statement.legacy.head, seal.rows, seal.head
        ));
    }
    if statement.traces != stored_leaves {
        return Err(format!(
            "its statement covers {} traces, but {stored_leaves} leaves are stored (leaves were removed or added)",
            statement.traces
        ));
    }
    Ok(statement)
}

/// Whether a checkpoint's stored leaves give the root its statement signed.
pub fn check_root(checkpoint: &StoredCheckpoint, statement: &Statement) -> Result<(), String> {
    match to_hex(&merkle::root(&leaf_hashes(&checkpoint.leaves))) == statement.root {
        true => Ok(()),
        false => Err("its stored leaves do not give its signed root (a leaf was edited, removed or added)".into()),
    }
}

/// What [`make_checkpoint`] did.
#[derive(Clone, Debug)]
pub struct Made {
    /// The checkpoint written, or `None` when nothing was new since the last
    /// (or the checkpoints already there do not check out: `broken`).
    pub checkpoint: Option<StoredCheckpoint>,
    /// The newest checkpoint's number (the one written, or the last).
    pub latest: Option<i64>,
    /// New frames the checkpoint covers.
    pub frames: u64,
    /// Traces left out because their new frames do not check out.
    pub refused: Vec<Problem>,
    /// Why no checkpoint was made on top of those in the ledger: each one
    /// must be signed by a trusted key, its root must be its stored leaves'
    /// and its place in the chain of checkpoints must hold.
    pub broken: Vec<Problem>,
    /// Head rows the run read for the sweep: every one for a sweep, its
    /// slice's for a slice, none when it read only the marked ones.
    pub swept: u64,
}

/// Makes the next checkpoint of `store`, signed with `key`, from scratch:
/// a [`Checkpointer`]'s first run, a sweep.
pub fn make_checkpoint(
    store: &dyn LedgerStore,
    key: &SecretKey,
    trusted: &[PublicKey],
    now_ms: i64,
) -> Result<Made, LedgerError> {
    Checkpointer::new(key, trusted).run(store, now_ms, Reach::Sweep)
}

/// Which traces a checkpoint run looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Every head row, and the traces the frames themselves name: nothing
    /// a writer keeps can hide a trace from it.
    Sweep,
    /// The head rows the appends marked as grown (a hint the database
    /// holds, [`LedgerStore::marked_heads`]), its cost following the traces
    /// that grew.
    Marked,
    /// The marked head rows, and a slice of a sweep: the next `traces` head
    /// rows by trace id after where the last slice ended, and the traces
    /// the frames name in that span; after the last head row, the next
    /// slice starts again from the first. A sweep spread over many runs,
    /// so no run holds the next checkpoint up for a whole one.
    Slice {
        /// Head rows to read.
        traces: usize,
    },
}

/// Where a sweep made in slices stands.
#[derive(Clone, Debug, Default)]
struct SweepCursor {
    /// The last trace id the slices read (`None` before the first).
    after: Option<String>,
    /// Head rows read since the pass began.
    read: u64,
    /// Head rows the last whole pass (a sweep, or slices from the first
    /// head row to the last) read.
    last_pass: Option<u64>,
}

/// Makes checkpoints, one run after another, signed with one key.
///
/// Nothing the database says about coverage is taken on trust — not a head
/// row's `sealed` count, not a list of traces to seal: the checkpoints are
/// verified before a run builds on them (signed by the key or one of
/// `trusted`, each root over its stored leaves, linked without gaps), and
/// each head row is compared with the newest leaf of its trace among them.
/// A trace's new frames are checked from the chain value that leaf signed,
/// so a checkpoint never vouches for a covered frame edited since. When the
/// checkpoints there do not check out, none is made (`broken`).
///
/// What was verified is kept between runs: a run reads only the checkpoints
/// made since (another checkpointer's) and, short of a sweep, the head rows
/// marked as grown.
pub struct Checkpointer<'k> {
    key: &'k SecretKey,
    trusted: Vec<PublicKey>,
    /// The newest checkpoint verified: its number and statement hash.
    verified: Option<(i64, String)>,
    /// Each trace's newest leaf among the checkpoints verified.
    coverage: HashMap<String, TraceChain>,
    /// How far the slices of the sweep have come.
    sweep: SweepCursor,
}

impl<'k> Checkpointer<'k> {
    /// A checkpointer signing with `key`, trusting its own checkpoints and
    /// those of `trusted`; it has verified nothing yet.
    pub fn new(key: &'k SecretKey, trusted: &[PublicKey]) -> Checkpointer<'k> {
        let trusted = trusted.iter().cloned().chain([key.public()]).collect();
        Checkpointer { key, trusted, verified: None, coverage: HashMap::new(), sweep: SweepCursor::default() }
    }

    /// How many head rows the last whole sweep read (one run's, or its
    /// slices' from the first head row to the last): what sizes the
    /// slices, so that a whole pass takes the runs it is given.
    pub fn traces_per_pass(&self) -> Option<u64> {
        self.sweep.last_pass
    }

    /// Makes the next checkpoint: every trace within `reach` whose head
    /// moved past what the checkpoints cover, each checked first. Nothing is
    /// written when no trace moved (and a checkpoint exists). Another
    /// checkpointer writing at the same time is waited out and the work
    /// done again on top of its checkpoint.
    pub fn run(&mut self, store: &dyn LedgerStore, now_ms: i64, reach: Reach) -> Result<Made, LedgerError> {
        for _ in 0..MAX_TRIES {
            let (info, planned) = {
                // One state of the ledger: frames appended meanwhile are the next run's.
                let _snapshot = Snapshot::of(store)?;
                let latest = self.verified.as_ref().map(|(seq, _)| *seq);
                let refuse =
                    |broken| Made { checkpoint: None, latest, frames: 0, refused: Vec::new(), broken, swept: 0 };
                let Some(info) = store.info()? else {
                    return Ok(refuse(vec![Problem::identity_gone()]));
                };
                if let Err(broken) = self.catch_up(store, &info)? {
                    return Ok(refuse(broken));
                }
                (info, self.check_new_frames(store, reach)?)
            };
            let latest = self.verified.clone();
            let Planned { leaves, frames, refused, cursor, swept } = planned;
            if leaves.is_empty() && latest.is_some() {
                self.sweep = cursor;
                let latest = latest.map(|(seq, _)| seq);
                return Ok(Made { checkpoint: None, latest, frames: 0, refused, broken: Vec::new(), swept });
            }
            let seq = latest.as_ref().map_or(1, |(seq, _)| seq + 1);
            let statement = Statement {
                format: FORMAT.into(),
                ledger: info.ledger_id.clone(),
                seq,
                prev: latest.map_or_else(|| to_hex(&GENESIS), |(_, hash)| hash),
                ts_ms: now_ms,
                root: to_hex(&merkle::root(&leaf_hashes(&leaves))),
                traces: leaves.len() as u64,
                legacy: LegacySeal { rows: info.legacy_rows, head: info.legacy_head.clone() },
                key: self.key.public().to_string(),
            };
            let text = statement.text();
            let signature = b64_encode(&self.key.sign(&message(&text)).to_bytes());
            let checkpoint = StoredCheckpoint { seq, statement: text, signature, leaves };
            if store.write_checkpoint(&checkpoint)? {
                self.sweep = cursor;
                self.remember(&checkpoint);
                return Ok(Made {
                    latest: Some(seq),
                    checkpoint: Some(checkpoint),
                    frames,
                    refused,
                    broken: Vec::new(),
                    swept,
                });
            }
        }
        Err(LedgerError::Invalid {
            path: store.location().to_string().into(),
            message: format!("other checkpoints kept taking the next number ({MAX_TRIES} tries); try again"),
        })
    }

    /// Verifies the checkpoints stored since the newest one this
    /// checkpointer verified (all of them, the first time), and takes in
    /// their leaves; or says what does not check out.
    fn catch_up(
        &mut self,
        store: &dyn LedgerStore,
        info: &LedgerInfo,
    ) -> Result<Result<(), Vec<Problem>>, LedgerError> {
        let checkpoints = store.checkpoints_from(self.verified.as_ref().map_or(i64::MIN, |(seq, _)| *seq))?;
        let new = match &self.verified {
            None => &checkpoints[..],
            Some((seq, hash)) => match checkpoints.first() {
                Some(first) if first.seq == *seq && statement_hash(&first.statement) == *hash => &checkpoints[1..],
                _ => {
                    return Ok(Err(vec![Problem::checkpoint(
                        *seq,
                        "it was verified by this checkpointer, and is now gone or replaced; the ledger was edited",
                    )]));
                }
            },
        };
        let coverage = match verified_coverage(new, self.verified.clone(), info, &self.trusted) {
            Ok(coverage) => coverage,
            Err(broken) => return Ok(Err(broken)),
        };
        for (trace_id, chain) in coverage {
            self.cover(trace_id, chain);
        }
        if let Some(newest) = new.last() {
            self.verified = Some((newest.seq, statement_hash(&newest.statement)));
        }
        Ok(Ok(()))
    }

    /// Takes in a checkpoint this checkpointer wrote.
    fn remember(&mut self, checkpoint: &StoredCheckpoint) {
        for leaf in &checkpoint.leaves {
            if let Some(head) = from_hex(&leaf.head) {
                self.cover(leaf.trace_id.clone(), TraceChain { frames: leaf.frames, head });
            }
        }
        self.verified = Some((checkpoint.seq, statement_hash(&checkpoint.statement)));
    }

    fn cover(&mut self, trace_id: String, chain: TraceChain) {
        let newest = self.coverage.entry(trace_id).or_insert(chain);
        if chain.frames >= newest.frames {
            *newest = chain;
        }
    }

    /// Compares the head rows within `reach` with the newest leaf of their
    /// traces; checks the frames of every trace that moved past it (one
    /// pass over them, trace by trace): the leaves to sign, the new frames
    /// they cover, the traces left out with why, and where the sweep stands
    /// once the run is done.
    fn check_new_frames(&self, store: &dyn LedgerStore, reach: Reach) -> Result<Planned, LedgerError> {
        let (mut moved, mut refused) = (Vec::new(), Vec::new());
        let mut cursor = self.sweep.clone();
        let mut swept = 0;
        let mut classify = |head: TraceHead| {
            let covered = self.coverage.get(&head.trace_id).copied().unwrap_or(TraceChain::EMPTY);
            if head.frames < covered.frames {
                refused.push(Problem::trace(
                    &head.trace_id,
                    &format!(
                        "its head row counts {} frames, and a checkpoint covered {}: the ledger was edited",
                        head.frames, covered.frames
                    ),
                ));
            } else if head.frames == covered.frames {
                if head.head != to_hex(&covered.head) {
                    refused.push(Problem::trace(
                        &head.trace_id,
                        "its head row's chain value is not the one a checkpoint covered: the ledger was edited",
                    ));
                }
            } else {
                moved.push(Moved { head: TraceHead { sealed: covered.frames, ..head }, covered });
            }
        };
        // A head row removed would hide its trace from the head rows: the
        // frames themselves say which traces there are.
        let headless = match reach {
            Reach::Sweep => {
                store.for_each_head(&mut |head| {
                    swept += 1;
                    classify(head);
                    ControlFlow::Continue(())
                })?;
                cursor = SweepCursor { last_pass: Some(swept), ..SweepCursor::default() };
                store.headless_traces(None, None)?
            }
            Reach::Marked => {
                store.marked_heads()?.into_iter().for_each(&mut classify);
                Vec::new()
            }
            Reach::Slice { traces } => {
                let traces = traces.max(1);
                let from = cursor.after.take();
                let slice = store.heads_after(from.as_deref(), traces)?;
                let upto = slice.last().filter(|_| slice.len() >= traces).map(|head| head.trace_id.clone());
                swept = slice.len() as u64;
                cursor.read += swept;
                match &upto {
                    Some(last) => cursor.after = Some(last.clone()),
                    None => cursor = SweepCursor { last_pass: Some(cursor.read), ..SweepCursor::default() },
                }
                // A trace both marked and in the slice is checked once.
                let sliced: std::collections::HashSet<String> = slice.iter().map(|h| h.trace_id.clone()).collect();
                let marked = store.marked_heads()?.into_iter().filter(|head| !sliced.contains(&head.trace_id));
                slice.into_iter().chain(marked).for_each(&mut classify);
                store.headless_traces(from.as_deref(), upto.as_deref())?
            }
        };
        for trace_id in headless {
            refused.push(Problem::trace(
                &trace_id,
                "the trace has frames but no head row in rlp_traces: it was removed; the ledger was edited",
            ));
        }
        let (leaves, frames, more_refused) = check_moved(store, &moved)?;
        refused.extend(more_refused);
        Ok(Planned { leaves, frames, refused, cursor, swept })
    }
}

/// What a run found.
struct Planned {
    /// The leaves to sign.
    leaves: Vec<Leaf>,
    /// The new frames they cover.
    frames: u64,
    /// The traces left out, with why.
    refused: Vec<Problem>,
    /// Where the sweep stands once the run is done.
    cursor: SweepCursor,
    /// Head rows read for the sweep.
    swept: u64,
}

/// A trace whose head moved past what the checkpoints cover, and where
/// its check starts: the chain its newest leaf signed.
struct Moved {
    /// Its head row, `sealed` set to the frames the leaf counted.
    head: TraceHead,
    covered: TraceChain,
}

/// Checks the new frames of the traces that `moved` (one pass over them,
/// trace by trace): the leaves to sign, the new frames they cover, and the
/// traces left out with why.
fn check_moved(store: &dyn LedgerStore, moved: &[Moved]) -> Result<(Vec<Leaf>, u64, Vec<Problem>), LedgerError> {
    let mut refused = Vec::new();
    let heads: Vec<TraceHead> = moved.iter().map(|m| m.head.clone()).collect();
    let index: HashMap<&str, usize> = heads.iter().enumerate().map(|(i, h)| (h.trace_id.as_str(), i)).collect();
    // A trace's walk starts at its first frame, or at the last frame a
    // checkpoint covered, whose chain value must be the one it signed.
    let mut walkers: Vec<Option<TraceWalker>> = moved
        .iter()
        .map(|m| (m.covered.frames == 0).then(|| TraceWalker::starting_at(&m.head.trace_id, TraceChain::EMPTY)))
        .collect();
    store.for_each_unsealed_row(&heads, &mut |event| {
        let Some(&i) = trace_of(&event).and_then(|trace| index.get(trace.as_str()).copied()).as_ref() else {
            return ControlFlow::Continue(());
        };
        let (m, seq) = (&moved[i], event.trace_seq.unwrap_or(0));
        match &mut walkers[i] {
            _ if seq > m.head.frames => {}
            Some(walker) => walker.row(&event),
            None if seq == m.covered.frames && from_hex(&event.chain_blake3) == Some(m.covered.head) => {
                walkers[i] = Some(TraceWalker::starting_at(&m.head.trace_id, m.covered));
            }
            None => {}
        }
        ControlFlow::Continue(())
    })?;
    let (mut leaves, mut frames) = (Vec::with_capacity(moved.len()), 0u64);
    for (m, walker) in moved.iter().zip(walkers) {
        let Some(walker) = walker else {
            refused.push(Problem::trace(
                &m.head.trace_id,
                &format!(
                    "frame {} of the trace, the last a checkpoint covered, is missing or not the one it signed; \
                     the ledger was edited",
                    m.covered.frames
                ),
            ));
            continue;
        };
        let problems = walker.finish(Some(&m.head));
        if !problems.is_empty() {
            refused.extend(problems);
            continue;
        }
        frames += u64::try_from(m.head.frames.saturating_sub(m.covered.frames)).unwrap_or(0);
        leaves.push(Leaf { trace_id: m.head.trace_id.clone(), frames: m.head.frames, head: m.head.head.clone() });
    }
    Ok((leaves, frames, refused))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_reads_back_only_in_canonical_form() {
        let key = SecretKey::from_seed(&[7; 32]);
        let statement = Statement {
            format: FORMAT.into(),
            ledger: "l".into(),
            seq: 1,
            prev: to_hex(&GENESIS),
            ts_ms: 5,
            root: to_hex(&merkle::root(&[])),
            traces: 0,
            legacy: LegacySeal { rows: 0, head: to_hex(&GENESIS) },
            key: key.public().to_string(),
        };
        let text = statement.text();
        assert_eq!(Statement::parse(&text).unwrap(), statement);
        assert!(Statement::parse(&text.replace(",", ", ")).unwrap_err().contains("canonical"));
        let signature = b64_encode(&key.sign(&message(&text)).to_bytes());
        assert!(signature_holds(&key.public(), &text, &signature));
        assert!(!signature_holds(&key.public(), &text.replace("\"seq\":1", "\"seq\":2"), &signature));
        assert!(!signature_holds(&SecretKey::from_seed(&[8; 32]).public(), &text, &signature));
    }
}
