//! From spans to a collector: the OTLP/HTTP exporter (protobuf, over the
//! [`Collector`] client), and for live spans the SDK's batch processor in
//! front of it — a bounded queue drained by a thread of its own, so a call
//! only ever hands a span to the queue, and a full queue drops the span.
//!
//! The first time spans cannot be delivered, one warning says so, naming
//! the endpoint without credentials. When the live pipeline is dropped (the
//! command ends) it sends what is queued, waiting at most [`EXIT_WAIT`].

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SpanData, SpanExporter, SpanProcessor};

use crate::telemetry::Warn;
use crate::telemetry::collector::Collector;
use crate::telemetry::settings::Settings;

/// The longest a command waits at its end for queued spans to be sent.
pub(crate) const EXIT_WAIT: Duration = Duration::from_secs(2);

/// The OTLP/HTTP protobuf exporter to `settings`' endpoint over
/// `collector`, with the resource the OpenTelemetry variables describe
/// (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, read by the SDK).
pub(crate) fn exporter(settings: &Settings, collector: Collector) -> Result<opentelemetry_otlp::SpanExporter, String> {
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(collector)
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(settings.endpoint().as_str())
        .with_timeout(settings.timeout)
        .build()
        // The builder's error quotes the URL it was given: not shown.
        .map_err(|_| {
            format!("cannot send spans to {}: the exporter does not take this endpoint", settings.endpoint())
        })?;
    exporter.set_resource(&Resource::builder().build());
    Ok(exporter)
}

/// Says once that spans cannot be delivered.
pub(crate) struct Alarm {
    /// The endpoint as messages show it.
    endpoint: String,
    warn: Warn,
    /// Whether it has spoken (held while it speaks, so that a command
    /// ending meanwhile waits for the line).
    raised: Mutex<bool>,
}

impl Alarm {
    fn new(endpoint: String, warn: Warn) -> Self {
        Alarm { endpoint, warn, raised: Mutex::new(false) }
    }

    /// Warns that spans cannot be sent (`cannot send spans to <endpoint>:
    /// <what>`) — the first time only.
    fn raise(&self, what: &str) {
        let mut raised = self.raised.lock().unwrap_or_else(PoisonError::into_inner);
        if !*raised {
            *raised = true;
            (self.warn)(&format!("cannot send spans to {}: {what}", self.endpoint));
        }
    }
}

/// The exporter of live spans, raising the alarm when an export fails.
#[derive(Debug)]
struct Watched {
    inner: opentelemetry_otlp::SpanExporter,
    collector: Collector,
    alarm: Arc<Alarm>,
}

impl std::fmt::Debug for Alarm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Alarm").field("endpoint", &self.endpoint).finish_non_exhaustive()
    }
}

impl SpanExporter for Watched {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let result = self.inner.export(batch).await;
        if let Err(e) = &result {
            let why = self.collector.take_failure().unwrap_or_else(|| e.to_string());
            self.alarm.raise(&format!("{why}; spans are dropped while it cannot be reached"));
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// Live spans on their way: a bounded queue, sent in batches by a thread.
#[derive(Debug)]
pub(crate) struct Pipeline {
    processor: BatchSpanProcessor,
    alarm: Arc<Alarm>,
}

impl Pipeline {
    /// Starts the pipeline to `settings`' collector; `warn` prints the one
    /// warning that spans cannot be delivered.
    pub(crate) fn start(settings: &Settings, warn: Warn) -> Result<Pipeline, String> {
        let collector = Collector::new(settings.timeout)?;
        let alarm = Arc::new(Alarm::new(settings.endpoint().to_string(), warn));
        let watched = Watched { inner: exporter(settings, collector.clone())?, collector, alarm: alarm.clone() };
        let batch = BatchConfigBuilder::default()
            .with_max_queue_size(settings.batch.max_queue_size)
            .with_max_export_batch_size(settings.batch.max_export_batch_size)
            .with_scheduled_delay(settings.batch.scheduled_delay)
            .build();
        let processor = BatchSpanProcessor::builder(watched).with_batch_config(batch).build();
        Ok(Pipeline { processor, alarm })
    }

    /// Queues `span`; never waits (a full queue drops it).
    pub(crate) fn send(&self, span: SpanData) {
        self.processor.on_end(span);
    }
}

impl Drop for Pipeline {
    /// Sends what is queued, waiting at most [`EXIT_WAIT`]; a collector
    /// that does not answer in time is warned about (once).
    fn drop(&mut self) {
        match self.processor.shutdown_with_timeout(EXIT_WAIT) {
            Ok(()) => {}
            Err(OTelSdkError::Timeout(waited)) => self.alarm.raise(&format!(
                "sending did not finish within {} s of the command's end; the spans not yet sent are dropped",
                waited.as_secs()
            )),
            Err(e) => self.alarm.raise(&format!("{e}; the spans not yet sent are dropped")),
        }
    }
}
