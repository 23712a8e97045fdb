//! Recorders for running calls without a ledger: [`NullRecorder`]
//! (benchmarks of the pipeline alone) and [`MemoryRecorder`] (tests). The
//! durable recorder is a ledger, which the caller opens and hands to the
//! runtime; all of them implement [`Recorder`].

use std::sync::Mutex;

use uuid::Uuid;

use crate::event::{EventKind, Record, RecordError, Recorder, Usage};

/// Records nothing (benchmarks of the pipeline without a ledger): every
/// trace has used nothing of any budget.
#[derive(Clone, Copy, Debug, Default)]
pub struct NullRecorder;

impl Recorder for NullRecorder {
    fn record(&self, _batch: &[Record]) -> Result<(), RecordError> {
        Ok(())
    }

    fn usage(&self, _trace_id: Uuid, _tool: &str) -> Result<Usage, RecordError> {
        Ok(Usage::default())
    }
}

/// Keeps records in memory (tests).
#[derive(Debug, Default)]
pub struct MemoryRecorder {
    records: Mutex<Vec<Record>>,
}

impl MemoryRecorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of everything recorded so far, in order.
    pub fn records(&self) -> Vec<Record> {
        self.records.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Recorder for MemoryRecorder {
    fn record(&self, batch: &[Record]) -> Result<(), RecordError> {
        let mut records = self.records.lock().map_err(|_| RecordError::new("the memory recorder is poisoned"))?;
        records.extend_from_slice(batch);
        Ok(())
    }

    fn usage(&self, trace_id: Uuid, tool: &str) -> Result<Usage, RecordError> {
        let records = self.records.lock().map_err(|_| RecordError::new("the memory recorder is poisoned"))?;
        let used = records
            .iter()
            .filter(|r| r.kind == EventKind::ToolResult && r.provenance.trace_id == trace_id)
            .filter(|r| r.payload.get("tool").and_then(serde_json::Value::as_str) == Some(tool))
            .filter_map(|r| r.payload.get("usage").and_then(|u| serde_json::from_value::<Usage>(u.clone()).ok()))
            .fold(Usage::default(), Usage::plus);
        Ok(used)
    }
}
