//! Exporting one trace from the ledger as JSON Lines (streaming).
//!
//! Each row of the trace becomes one line (see [`crate::ledger::jsonl`]):
//! the row's columns, with `id` renumbered as the frame's position in the
//! trace (row ids belong to one ledger; positions survive an import into
//! another) and `chain_blake3` recomputed over the trace's own frames from 32
//! zero bytes, so the file checks its own order. `hash_blake3` is the row hash
//! as stored. Every row of the trace is checked first, against its hash and
//! its place in the trace's chain in the ledger, and the trace against where
//! its head row and checkpoints say it ends ([`crate::ledger::checked`]): an
//! edited row, or frames removed, reordered or added, stop the export, so
//! the chain it writes is never a fresh one over a damaged trace.
//!
//! A redacted export ([`export_redacted`]) replaces chosen values by
//! placeholders ([`crate::ledger::redact`]): it reads the trace twice, and a
//! frame it changed carries the row hash of its new content.

use std::collections::HashSet;
use std::io::Write;
use std::ops::ControlFlow;

use serde::de::IgnoredAny;
use uuid::Uuid;

use crate::error::{Exit, Reportable};
use crate::event::Event;
use crate::event::hash::{GENESIS, chain_hash, frame_hash};
use crate::ledger::checked::{CheckedReadError, Damage, for_each_checked_row};
use crate::ledger::jsonl::{FrameLine, write_frame_line};
use crate::ledger::redact::{Collector, RedactionReport, Rule};
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
    /// A row does not match its hash or its JSON does not parse, or the
    /// trace's chain does not check out.
    #[error(transparent)]
    Edited(Damage),
    /// The output could not be written.
    #[error("cannot write the export: {0}")]
    Write(std::io::Error),
    /// The values to redact cannot be searched for (too many, too large).
    #[error("cannot redact the trace: {0}")]
    Redaction(String),
}

/// Exit 2 for what cannot be read; 1 for an edited row or an output that
/// cannot be written.
impl Reportable for ExportError {
    fn class(&self) -> Exit {
        match self {
            ExportError::Ledger(_) | ExportError::NoSuchTrace(_) => Exit::Usage,
            ExportError::Edited(_) | ExportError::Write(_) | ExportError::Redaction(_) => Exit::Problems,
        }
    }

    fn message(&self) -> String {
        match self {
            ExportError::Ledger(e) => e.message(),
            ExportError::Edited(_) | ExportError::Redaction(_) => format!("{self}; nothing was exported"),
            _ => self.to_string(),
        }
    }

    fn help(&self) -> Option<String> {
        match self {
            ExportError::Ledger(e) => e.help(),
            ExportError::NoSuchTrace(_) => {
                Some("`rlp trace list` shows the traces of this home; pass --home for another".into())
            }
            ExportError::Edited(_) => Some(crate::ledger::EDITED_ROW_HELP.into()),
            ExportError::Write(_) => None,
            ExportError::Redaction(_) => {
                Some("redact fewer or smaller fields (--redact, the config's redact lists)".into())
            }
        }
    }
}

/// The `invocation_id` of a payload, when it has one.
fn invocation_of(payload_json: &str) -> Option<Uuid> {
    let payload: serde_json::Value = serde_json::from_str(payload_json).ok()?;
    Uuid::parse_str(payload.get("invocation_id")?.as_str()?).ok()
}

impl From<CheckedReadError> for ExportError {
    fn from(e: CheckedReadError) -> ExportError {
        match e {
            CheckedReadError::Ledger(e) => ExportError::Ledger(e),
            CheckedReadError::Damaged(damage) => ExportError::Edited(damage),
        }
    }
}

/// The edited-row error of `event`.
fn edited(event: &Event, message: impl std::fmt::Display) -> ExportError {
    ExportError::Edited(Damage::Row { row: event.id, message: message.to_string() })
}

/// What is done with each exported row: the row and its checked hash.
type ExportedRow<'f> = dyn FnMut(&Event, [u8; 32]) -> Result<(), ExportError> + 'f;

/// Calls `f` with each row of `trace_id` that is exported (with `only`,
/// those of the invocations named; at most `limit`), every row of the trace
/// checked first ([`for_each_checked_row`]: its hash, its place in the
/// trace's chain, the trace's end) and each given with its hash; returns the
/// number of rows given.
fn for_each_exported(
    ledger: &dyn LedgerStore,
    trace_id: &Uuid,
    only: Option<&HashSet<Uuid>>,
    limit: Option<u64>,
    f: &mut ExportedRow<'_>,
) -> Result<u64, ExportError> {
    let mut given = 0u64;
    let mut failure = None;
    for_each_checked_row(ledger, trace_id, &mut |event, hash| {
        if limit.is_some_and(|limit| given >= limit) {
            return ControlFlow::Break(());
        }
        let done = check_json(&event).and_then(|()| {
            if only.is_some_and(|only| !invocation_of(&event.payload_json).is_some_and(|id| only.contains(&id))) {
                return Ok(());
            }
            given += 1;
            f(&event, hash)
        });
        match done {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                failure = Some(e);
                ControlFlow::Break(())
            }
        }
    })?;
    match failure {
        Some(failure) => Err(failure),
        None if given == 0 => Err(ExportError::NoSuchTrace(*trace_id)),
        None => Ok(given),
    }
}

/// Whether the row's JSON columns read.
fn check_json(event: &Event) -> Result<(), ExportError> {
    for (column, text) in [("payload_json", &event.payload_json), ("provenance_json", &event.provenance_json)] {
        serde_json::from_str::<IgnoredAny>(text).map_err(|e| edited(event, format!("{column} is not JSON: {e}")))?;
    }
    Ok(())
}

/// Writes frames as export lines, numbering and chaining them.
struct LineWriter<'o> {
    out: &'o mut dyn Write,
    position: u64,
    prev: [u8; 32],
    line: String,
}

impl<'o> LineWriter<'o> {
    fn new(out: &'o mut dyn Write) -> Self {
        LineWriter { out, position: 0, prev: GENESIS, line: String::new() }
    }

    /// Writes the next frame: `event` with its payload text and row hash.
    fn write(&mut self, event: &Event, payload_json: &str, hash: &[u8; 32]) -> Result<(), ExportError> {
        self.position += 1;
        let chain = chain_hash(&self.prev, hash);
        self.prev = chain;
        self.line.clear();
        let frame = FrameLine { payload_json, ..FrameLine::of(event, self.position, hash, &chain) };
        write_frame_line(&mut self.line, &frame);
        self.out.write_all(self.line.as_bytes()).map_err(ExportError::Write)
    }

    fn finish(self) -> Result<u64, ExportError> {
        self.out.flush().map_err(ExportError::Write)?;
        Ok(self.position)
    }
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
    let mut writer = LineWriter::new(out);
    for_each_exported(ledger, trace_id, only, None, &mut |event, hash| {
        writer.write(event, &event.payload_json, &hash)
    })?;
    writer.finish()
}

/// A redacted export: the number of frames written, and what redaction did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedactedExport {
    /// The frames written.
    pub frames: u64,
    /// What redaction did.
    pub redaction: RedactionReport,
}

/// Writes the frames of `trace_id` as [`export_trace`] does, with the
/// values `rules` name replaced by placeholders ([`crate::ledger::redact`]):
/// one pass to number them, one to write. A frame whose payload changed
/// gets the row hash of its new payload; the others keep theirs.
pub fn export_redacted(
    ledger: &dyn LedgerStore,
    trace_id: &Uuid,
    only: Option<&HashSet<Uuid>>,
    rules: &[Rule],
    out: &mut dyn Write,
) -> Result<RedactedExport, ExportError> {
    let mut collector = Collector::new(rules);
    let read = for_each_exported(ledger, trace_id, only, None, &mut |event, _| {
        let agent = event.provenance().map_err(|e| edited(event, e))?.agent;
        collector.frame(&agent, &event.kind, &event.payload_json).map_err(|e| edited(event, e))
    })?;
    let mut scrubber = collector.into_scrubber().map_err(ExportError::Redaction)?;
    let mut writer = LineWriter::new(out);
    let mut scratch = String::new();
    // Only the frames numbered: rows appended meanwhile are left for another export.
    for_each_exported(ledger, trace_id, only, Some(read), &mut |event, hash| {
        let agent = event.provenance().map_err(|e| edited(event, e))?.agent;
        match scrubber.redact(&agent, &event.kind, &event.payload_json).map_err(|e| edited(event, e))? {
            None => writer.write(event, &event.payload_json, &hash),
            Some(payload_json) => {
                let hash = frame_hash(
                    &mut scratch,
                    event.ts_ms,
                    &event.actor,
                    &event.kind,
                    &event.scope,
                    &payload_json,
                    &event.provenance_json,
                );
                writer.write(event, &payload_json, &hash)
            }
        }
    })?;
    Ok(RedactedExport { frames: writer.finish()?, redaction: scrubber.finish() })
}
