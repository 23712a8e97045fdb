//! Recorders for running calls without a ledger: [`NullRecorder`]
//! (benchmarks of the pipeline alone) and [`MemoryRecorder`] (tests). The
//! durable recorder is a ledger, which the caller opens and hands to the
//! runtime; all of them implement [`Recorder`].

use std::sync::Mutex;

use crate::event::{Record, RecordError, Recorder};

/// Records nothing (benchmarks of the pipeline without a ledger).
#[derive(Clone, Copy, Debug, Default)]
pub struct NullRecorder;

impl Recorder for NullRecorder {
    fn record(&self, _batch: &[Record]) -> Result<(), RecordError> {
        Ok(())
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
        let mut records = self.records.lock().map_err(|_| RecordError("the memory recorder is poisoned".into()))?;
        records.extend_from_slice(batch);
        Ok(())
    }
}
