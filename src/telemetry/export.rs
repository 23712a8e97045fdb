//! A recorded trace sent after the fact (`rlp trace export --otlp`): its
//! frames are assembled into invocations as they are read, and each one's
//! span — the same span a live call gives — is sent in batches straight
//! to the exporter, waiting for each answer. The first batch the collector
//! refuses or does not answer stops the export with an error.

use opentelemetry_sdk::trace::{SpanData, SpanExporter};

use crate::event::frame::TraceFrame;
use crate::telemetry::assemble::Assembler;
use crate::telemetry::collector::Collector;
use crate::telemetry::pipeline::exporter;
use crate::telemetry::settings::Settings;
use crate::telemetry::span::{Frame, SpanOptions, span};

/// Why spans could not be sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SendError {
    /// The endpoint, without credentials.
    pub endpoint: String,
    /// What went wrong.
    pub why: String,
    /// Spans the collector accepted before.
    pub sent: u64,
}

/// Sends the spans of one recorded trace.
#[derive(Debug)]
pub(crate) struct TraceSender {
    assembler: Assembler,
    exporter: opentelemetry_otlp::SpanExporter,
    collector: Collector,
    endpoint: String,
    batch_size: usize,
    capture_content: bool,
    pending: Vec<SpanData>,
    sent: u64,
}

impl TraceSender {
    /// A sender to `settings`' collector.
    pub(crate) fn new(settings: &Settings) -> Result<TraceSender, String> {
        let collector = Collector::new(settings.timeout)?;
        Ok(TraceSender {
            assembler: Assembler::unbounded(),
            exporter: exporter(settings, collector.clone())?,
            collector,
            endpoint: settings.endpoint().to_string(),
            batch_size: settings.batch.max_export_batch_size,
            capture_content: settings.capture_content(),
            pending: Vec::new(),
            sent: 0,
        })
    }

    /// Adds the next frame of the trace; sends a batch once one is full.
    pub(crate) fn add(&mut self, frame: TraceFrame) -> Result<(), SendError> {
        let (trace_id, agent) = (frame.provenance.trace_id, frame.provenance.agent);
        let frame = Frame { ts_ms: frame.ts_ms, body: frame.body };
        if let Some(invocation) = self.assembler.add(trace_id, &agent, frame) {
            self.pending.push(span(&invocation, &self.options()));
        }
        if self.pending.len() >= self.batch_size { self.flush() } else { Ok(()) }
    }

    /// Sends what is left — calls refused before they ran, and calls
    /// without a result, as well — and returns how many spans were sent.
    pub(crate) fn finish(mut self) -> Result<u64, SendError> {
        let options = self.options();
        let left: Vec<SpanData> = self.assembler.drain().iter().map(|invocation| span(invocation, &options)).collect();
        for span in left {
            self.pending.push(span);
            if self.pending.len() >= self.batch_size {
                self.flush()?;
            }
        }
        self.flush()?;
        Ok(self.sent)
    }

    fn options(&self) -> SpanOptions<'static> {
        SpanOptions { capture_content: self.capture_content, bundle_version: None }
    }

    /// Sends the pending spans and waits for the collector's answer.
    fn flush(&mut self) -> Result<(), SendError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.pending);
        let count = batch.len() as u64;
        match futures_executor::block_on(self.exporter.export(batch)) {
            Ok(()) => {
                self.sent += count;
                Ok(())
            }
            Err(e) => Err(SendError {
                endpoint: self.endpoint.clone(),
                why: self.collector.take_failure().unwrap_or_else(|| e.to_string()),
                sent: self.sent,
            }),
        }
    }
}
