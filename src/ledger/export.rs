//! Exporting one trace from the ledger as JSON Lines (streaming).
//!
//! Each row of the trace becomes one line (see [`crate::ledger::jsonl`]):
//! the row's columns, with `id` renumbered as the frame's position in the
//! trace (row ids belong to one ledger; positions survive an import into
//! another) and `chain_blake3` recomputed over the trace's own frames from 32
//! zero bytes, so the file checks its own order. `hash_blake3` is the row hash
//! as stored; every row is checked against it first, and an edited row stops
//! the export.

use std::collections::HashSet;
use std::io::Write;
use std::ops::ControlFlow;

use serde::de::IgnoredAny;
use uuid::Uuid;

use crate::error::{Exit, Reportable};
use crate::event::hash::{GENESIS, chain_hash};
use crate::ledger::jsonl::{FrameLine, write_frame_line};
use crate::ledger::{LedgerError, LedgerStore};

/// Why an export stopped.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The ledger could not be read.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// No row belongs to the trace.
    #[error("the ledger has no trace {0}")]
    NoSuchTrace(Uuid),
    /// A row does not match its hash, or its JSON does not parse.
    #[error("ledger row {row}: {message}")]
    Edited {
        /// The row id.
        row: i64,
        /// What is wrong.
        message: String,
    },
    /// The output could not be written.
    #[error("cannot write the export: {0}")]
    Write(std::io::Error),
}

/// Exit 2 for what cannot be read; 1 for an edited row or an output that
/// cannot be written.
impl Reportable for ExportError {
    fn class(&self) -> Exit {
        match self {
            ExportError::Ledger(_) | ExportError::NoSuchTrace(_) => Exit::Usage,
            ExportError::Edited { .. } | ExportError::Write(_) => Exit::Problems,
        }
    }

    fn message(&self) -> String {
        match self {
            ExportError::Ledger(e) => e.message(),
            ExportError::Edited { .. } => format!("{self}; nothing was exported"),
            _ => self.to_string(),
        }
    }

    fn help(&self) -> Option<String> {
        match self {
            ExportError::Ledger(e) => e.help(),
            ExportError::NoSuchTrace(_) => {
                Some("`rlp trace list` shows the traces of this home; pass --home for another".into())
            }
            ExportError::Edited { .. } => Some(crate::ledger::EDITED_ROW_HELP.into()),
            ExportError::Write(_) => None,
        }
    }
}

/// The `invocation_id` of a payload, when it has one.
fn invocation_of(payload_json: &str) -> Option<Uuid> {
    let payload: serde_json::Value = serde_json::from_str(payload_json).ok()?;
    Uuid::parse_str(payload.get("invocation_id")?.as_str()?).ok()
}

/// Writes every frame of `trace_id` to `out`, one line each (with `only`,
/// just the frames of those invocations: a partial trace, numbered and
/// chained on its own); returns the number of frames written.
pub fn export_trace(
    ledger: &dyn LedgerStore,
    trace_id: &Uuid,
    only: Option<&HashSet<Uuid>>,
    out: &mut dyn Write,
) -> Result<u64, ExportError> {
    let mut frames = 0u64;
    let mut prev = GENESIS;
    let mut scratch = String::new();
    let mut line = String::new();
    let mut failure = None;
    ledger.for_each_in_trace(trace_id, &mut |event| {
        let hash = match event.check_hash(&mut scratch) {
            Ok(hash) => hash,
            Err(message) => {
                failure = Some(ExportError::Edited { row: event.id, message: message.to_string() });
                return ControlFlow::Break(());
            }
        };
        for (column, text) in [("payload_json", &event.payload_json), ("provenance_json", &event.provenance_json)] {
            if let Err(e) = serde_json::from_str::<IgnoredAny>(text) {
                failure = Some(ExportError::Edited { row: event.id, message: format!("{column} is not JSON: {e}") });
                return ControlFlow::Break(());
            }
        }
        if only.is_some_and(|only| !invocation_of(&event.payload_json).is_some_and(|id| only.contains(&id))) {
            return ControlFlow::Continue(());
        }
        frames += 1;
        let chain = chain_hash(&prev, &hash);
        prev = chain;
        line.clear();
        write_frame_line(&mut line, &FrameLine::of(&event, frames, &hash, &chain));
        if let Err(e) = out.write_all(line.as_bytes()) {
            failure = Some(ExportError::Write(e));
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    })?;
    if let Some(failure) = failure {
        return Err(failure);
    }
    if frames == 0 {
        return Err(ExportError::NoSuchTrace(*trace_id));
    }
    out.flush().map_err(ExportError::Write)?;
    Ok(frames)
}
