//! Inclusion proofs (docs/fleet.md, "Proving a frame to a third party"):
//! that a trace's frames — and one frame in full, when asked — are what a
//! signed checkpoint covers, checkable offline with nothing but the proof,
//! the signer's public key and, optionally, the trace's export.
//!
//! A proof holds the hashes of the trace's frames up to the count the
//! checkpoint's leaf gives, the frame asked for (as `rlp trace export`
//! writes a line), the leaf's Merkle audit path and the checkpoint (its
//! statement and signature). Checking it folds the hashes into the trace's
//! chain, rebuilds the leaf, follows the path to the root and checks the
//! signature over the statement that names that root.

use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::event::canonical::canonical_text;
use crate::event::hash::{GENESIS, chain_hash, frame_hash, from_hex, to_hex};
use crate::integrity::keys::PublicKey;
use crate::ledger::checkpoint::{Statement, check_checkpoint, leaf_bytes, leaf_hashes, signature_holds};
use crate::ledger::jsonl::{FrameLine, RawFrame, write_frame_line};
use crate::ledger::layout::{Leaf, StoredCheckpoint};
use crate::ledger::merkle;
use crate::ledger::verify::IDENTITY_GONE;
use crate::ledger::{LedgerError, LedgerStore, Snapshot};

/// The `format` of the proofs this rlp writes.
pub const FORMAT: &str = "rlp-inclusion-proof/1";

/// A checkpoint as a proof carries it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvenCheckpoint {
    /// The statement's canonical text.
    pub statement: String,
    /// Its signature (base64).
    pub signature: String,
}

/// An inclusion proof.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InclusionProof {
    /// [`FORMAT`].
    pub format: String,
    /// The trace.
    pub trace_id: String,
    /// The hashes of frames 1 to N of the trace (hex), N being the count
    /// the checkpoint covers.
    pub frame_hashes: Vec<String>,
    /// The frame proven in full (an export line), when one was asked for.
    pub frame: Option<Value>,
    /// The leaf's index in the checkpoint's Merkle tree.
    pub leaf_index: u64,
    /// The sibling hashes from the leaf up to the root (hex).
    pub audit_path: Vec<String>,
    /// The checkpoint.
    pub checkpoint: ProvenCheckpoint,
}

/// Why no proof could be made.
#[derive(Debug, thiserror::Error)]
pub enum ProveError {
    /// The ledger could not be read.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// No checkpoint covers the trace (or that frame of it) yet.
    #[error("{0}")]
    NotCovered(String),
    /// The ledger does not agree with the checkpoint, or the checkpoint
    /// does not check out.
    #[error("{0}")]
    Edited(String),
    /// The trace has no such frame.
    #[error("{0}")]
    NoFrame(String),
}

/// Makes the proof for `trace_id` from the newest checkpoint covering it
/// (and `frame`, a position from 1, when one is asked for). That
/// checkpoint must check out here — signed by one of `trusted`, its root
/// over its stored leaves — or no proof is made.
pub fn prove(
    store: &dyn LedgerStore,
    trace_id: &Uuid,
    frame: Option<i64>,
    trusted: &[PublicKey],
) -> Result<InclusionProof, ProveError> {
    let trace = trace_id.to_string();
    let _snapshot = Snapshot::of(store)?;
    if let (Some(n), Some(head)) = (frame, store.trace_head(trace_id)?)
        && n > head.frames
    {
        return Err(ProveError::NoFrame(format!("the trace has {} frames: there is no frame {n}", head.frames)));
    }
    let checkpoints = store.checkpoints_of(trace_id)?;
    let leaf_of = |c: &StoredCheckpoint| c.leaves.iter().position(|l| l.trace_id == trace);
    let chosen =
        checkpoints.last().filter(|c| frame.is_none_or(|n| leaf_of(c).is_some_and(|i| c.leaves[i].frames >= n)));
    let Some(checkpoint) = chosen else {
        let what = frame.map_or_else(|| "the trace".to_string(), |n| format!("frame {n} of the trace"));
        return Err(ProveError::NotCovered(format!(
            "no checkpoint covers {what} yet: run `rlp trace checkpoint`, then prove it"
        )));
    };
    let info = store.info()?.ok_or_else(|| ProveError::Edited(format!("{IDENTITY_GONE}; run `rlp trace verify`")))?;
    check_checkpoint(checkpoint, &info, None, trusted).map_err(|why| {
        ProveError::Edited(format!(
            "checkpoint #{}, the newest covering the trace, does not check out: {why}; run `rlp trace verify`",
            checkpoint.seq
        ))
    })?;
    let Some(index) = leaf_of(checkpoint) else {
        unreachable!("checkpoints_of gives checkpoints with a leaf of the trace")
    };
    let leaf = &checkpoint.leaves[index];
    let mut hashes = Vec::new();
    let mut chain = GENESIS;
    let mut proven = None;
    let mut scratch = String::new();
    let mut problem = None;
    store.for_each_in_trace_from(trace_id, 1, &mut |event| {
        if event.trace_seq.unwrap_or(0) > leaf.frames {
            return ControlFlow::Break(());
        }
        let hash = match event.check_hash(&mut scratch) {
            Ok(hash) => hash,
            Err(e) => {
                problem = Some(format!("ledger row {}: {e}", event.id));
                return ControlFlow::Break(());
            }
        };
        chain = chain_hash(&chain, &hash);
        hashes.push(to_hex(&hash));
        if frame == event.trace_seq {
            let mut line = String::new();
            write_frame_line(
                &mut line,
                &FrameLine::of(&event, u64::try_from(hashes.len()).unwrap_or(0), &hash, &chain),
            );
            proven = serde_json::from_str(&line).ok();
        }
        ControlFlow::Continue(())
    })?;
    if let Some(problem) = problem {
        return Err(ProveError::Edited(format!("{problem}; run `rlp trace verify`")));
    }
    if hashes.len() as i64 != leaf.frames || to_hex(&chain) != leaf.head {
        return Err(ProveError::Edited(format!(
            "the trace's frames no longer give what checkpoint #{} signed; run `rlp trace verify`",
            checkpoint.seq
        )));
    }
    let leaves = leaf_hashes(&checkpoint.leaves);
    let path = merkle::audit_path(index, &leaves).unwrap_or_default();
    Ok(InclusionProof {
        format: FORMAT.into(),
        trace_id: trace,
        frame_hashes: hashes,
        frame: proven,
        leaf_index: index as u64,
        audit_path: path.iter().map(to_hex).collect(),
        checkpoint: ProvenCheckpoint {
            statement: checkpoint.statement.clone(),
            signature: checkpoint.signature.clone(),
        },
    })
}

/// What a proof shows, once checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Proven {
    /// The trace.
    pub trace_id: String,
    /// Frames covered (1 to this).
    pub frames: u64,
    /// The frame proven in full, when the proof holds one.
    pub frame: Option<u64>,
    /// The checkpoint's number.
    pub checkpoint: i64,
    /// When it was made (milliseconds since the Unix epoch).
    pub ts_ms: i64,
    /// The ledger it belongs to.
    pub ledger: String,
    /// The signer's key id.
    pub key_id: String,
}

/// Checks `proof` offline; `trusted` are the keys whose checkpoints count.
pub fn check_proof(proof: &InclusionProof, trusted: &[PublicKey]) -> Result<Proven, String> {
    if proof.format != FORMAT {
        return Err(format!("this is not an rlp inclusion proof (format `{}`, not `{FORMAT}`)", proof.format));
    }
    let statement = Statement::parse(&proof.checkpoint.statement)?;
    let key = PublicKey::parse(&statement.key).map_err(|why| format!("the checkpoint's key does not read: {why}"))?;
    if !signature_holds(&key, &proof.checkpoint.statement, &proof.checkpoint.signature) {
        return Err(format!("the checkpoint's signature does not verify with its key {}", key.key_id()));
    }
    if !trusted.contains(&key) {
        return Err(format!(
            "the checkpoint is signed by key {}, which is not among the keys trusted here: pass the ledger's \
             checkpoint key with --key FILE.pub",
            key.key_id()
        ));
    }
    let mut chain = GENESIS;
    for (i, hex) in proof.frame_hashes.iter().enumerate() {
        let hash = from_hex(hex).ok_or_else(|| format!("frame hash {} is not 64 hex digits", i + 1))?;
        chain = chain_hash(&chain, &hash);
    }
    let leaf = Leaf {
        trace_id: proof.trace_id.clone(),
        frames: i64::try_from(proof.frame_hashes.len()).map_err(|_| "too many frames".to_string())?,
        head: to_hex(&chain),
    };
    let path = proof
        .audit_path
        .iter()
        .map(|hex| from_hex(hex).ok_or_else(|| "an audit path hash is not 64 hex digits".to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let root = merkle::root_from_path(
        &merkle::leaf_hash(leaf_bytes(&leaf).as_bytes()),
        proof.leaf_index,
        statement.traces,
        &path,
    );
    if root.map(|r| to_hex(&r)) != Some(statement.root.clone()) {
        return Err(format!(
            "the trace's {} frames do not lead to the root checkpoint #{} signed: the proof was altered, or it is \
             not this trace's",
            proof.frame_hashes.len(),
            statement.seq
        ));
    }
    let frame =
        proof.frame.as_ref().map(|frame| check_frame(frame, &proof.frame_hashes, &proof.trace_id)).transpose()?;
    Ok(Proven {
        trace_id: proof.trace_id.clone(),
        frames: proof.frame_hashes.len() as u64,
        frame,
        checkpoint: statement.seq,
        ts_ms: statement.ts_ms,
        ledger: statement.ledger,
        key_id: key.key_id().to_string(),
    })
}

/// Checks a proven frame (an export line) against the frame hashes; its position.
fn check_frame(frame: &Value, hashes: &[String], trace_id: &str) -> Result<u64, String> {
    let line: RawFrame =
        serde_json::from_value(frame.clone()).map_err(|e| format!("the proven frame does not read: {e}"))?;
    let id = line.id.ok_or("the proven frame has no `id` (its position in the trace)")?;
    let hash = frame_hash(
        &mut String::new(),
        line.ts_ms,
        &line.actor,
        &line.kind,
        &line.scope,
        &canonical_text(&line.payload),
        &canonical_text(&line.provenance),
    );
    let position = usize::try_from(id).unwrap_or(usize::MAX);
    if line.provenance.get("trace_id").and_then(Value::as_str) != Some(trace_id) {
        return Err("the proven frame belongs to another trace".into());
    }
    if position == 0 || hashes.get(position - 1).map(String::as_str) != Some(to_hex(&hash).as_str()) {
        return Err(format!("the proven frame is not frame {id} of the trace the checkpoint covers"));
    }
    if line.hash_blake3.as_deref() != Some(to_hex(&hash).as_str()) {
        return Err("the proven frame's hash_blake3 is not its content's hash".into());
    }
    let chain = hashes[..position]
        .iter()
        .try_fold(GENESIS, |chain, hex| from_hex(hex).map(|h| chain_hash(&chain, &h)))
        .ok_or_else(|| "a frame hash is not 64 hex digits".to_string())?;
    if line.chain_blake3.as_deref() != Some(to_hex(&chain).as_str()) {
        return Err("the proven frame's chain_blake3 is not its place in the trace's chain".into());
    }
    Ok(id)
}

/// Checks that the frames of an export (their hashes, in order) are the
/// proof's; the export may go past what the checkpoint covers. Returns how
/// many frames of the export the proof covers.
pub fn check_export_hashes(proof: &InclusionProof, export: &[[u8; 32]]) -> Result<u64, String> {
    for (i, (expected, got)) in proof.frame_hashes.iter().zip(export).enumerate() {
        if *expected != to_hex(got) {
            return Err(format!("frame {} of the export is not the one the checkpoint covers: it was changed", i + 1));
        }
    }
    if export.len() < proof.frame_hashes.len() {
        return Err(format!(
            "the export holds {} frames, the checkpoint covers {}: frames were removed from it",
            export.len(),
            proof.frame_hashes.len()
        ));
    }
    Ok(proof.frame_hashes.len() as u64)
}
