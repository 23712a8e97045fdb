//! Live spans: a [`Recorder`] put in front of the one the runtime records
//! into. Each batch goes to that recorder first — durability is exactly as
//! without spans — and only once it is recorded are its frames assembled
//! into invocations; an invocation that ends becomes a span, queued for the
//! collector. Nothing here waits for the network.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use serde_json::Value;
use uuid::Uuid;

use crate::event::{EventKind, Payload, Record, RecordError, Recorder, Usage};
use crate::telemetry::Warn;
use crate::telemetry::assemble::Assembler;
use crate::telemetry::pipeline::Pipeline;
use crate::telemetry::settings::Settings;
use crate::telemetry::span::{Frame, SpanOptions, span};

/// Most invocations assembled at once (four times the most calls a
/// process runs at once, 256); past it, the oldest is dropped without a
/// span.
const MAX_OPEN: usize = 1024;

/// A recorder that records into another, then makes a span of every call
/// that ends.
pub struct SpanRecorder {
    inner: Arc<dyn Recorder>,
    assembler: Mutex<Assembler>,
    pipeline: Pipeline,
    capture_content: bool,
    bundle_version: OnceLock<String>,
}

impl std::fmt::Debug for SpanRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpanRecorder").field("pipeline", &self.pipeline).finish_non_exhaustive()
    }
}

impl SpanRecorder {
    /// Records into `inner` and sends spans where `settings` say; `warn`
    /// prints the one warning that the collector cannot be reached. Fails
    /// only when the HTTP client or the exporter cannot be made.
    pub fn start(inner: Arc<dyn Recorder>, settings: &Settings, warn: Warn) -> Result<SpanRecorder, String> {
        Ok(SpanRecorder {
            inner,
            assembler: Mutex::new(Assembler::bounded(MAX_OPEN)),
            pipeline: Pipeline::start(settings, warn)?,
            capture_content: settings.capture_content(),
            bundle_version: OnceLock::new(),
        })
    }

    /// The version of the bundle the calls run, once it is loaded
    /// (`rlp.bundle.version`); the first one given stays.
    pub fn set_bundle_version(&self, version: &str) {
        let _ = self.bundle_version.set(version.to_string());
    }
}

impl Recorder for SpanRecorder {
    fn record(&self, batch: &[Record]) -> Result<(), RecordError> {
        self.inner.record(batch)?;
        let ended = {
            let mut assembler = self.assembler.lock().unwrap_or_else(PoisonError::into_inner);
            let mut touched: Vec<Uuid> = Vec::new();
            let mut ended = Vec::new();
            for record in batch {
                let Some(frame) = frame_of(record, self.capture_content) else { continue };
                if let Some(id) = frame.body.invocation_id()
                    && !touched.contains(&id)
                {
                    touched.push(id);
                }
                ended.extend(assembler.add(record.provenance.trace_id, &record.provenance.agent, frame));
            }
            ended.extend(assembler.end_batch(&touched));
            ended
        };
        let options = SpanOptions {
            capture_content: self.capture_content,
            bundle_version: self.bundle_version.get().map(String::as_str),
        };
        for invocation in ended {
            self.pipeline.send(span(&invocation, &options));
        }
        Ok(())
    }

    fn usage(&self, trace_id: Uuid, tool: &str) -> Result<Usage, RecordError> {
        self.inner.usage(trace_id, tool)
    }
}

/// `record` as a frame of an invocation; `None` for a frame of none (a
/// replay link, a discovery, an exchange with a bridged server) or a payload that does not read. Without
/// content capture, the arguments and the result are left out before the
/// payload is read (the span would not show them).
fn frame_of(record: &Record, capture_content: bool) -> Option<Frame> {
    let content = match record.kind {
        EventKind::TraceReplay | EventKind::ToolDiscover => return None,
        EventKind::ToolCall if !capture_content => Some("args"),
        EventKind::ToolResult if !capture_content => Some("result"),
        _ => None,
    };
    let payload = match (content, &record.payload) {
        (Some(content), Value::Object(members)) => Value::Object(
            members.iter().map(|(k, v)| (k.clone(), if k == content { Value::Null } else { v.clone() })).collect(),
        ),
        (_, payload) => payload.clone(),
    };
    let body = Payload::read(record.kind, payload).ok()?;
    // An exchange with a bridged server belongs to no invocation either.
    body.invocation_id()?;
    Some(Frame { ts_ms: record.ts_ms, body })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Keeps what it records, or refuses everything.
    #[derive(Default)]
    struct Kept {
        records: Mutex<Vec<Record>>,
        refuse: bool,
    }

    impl Recorder for Kept {
        fn record(&self, batch: &[Record]) -> Result<(), RecordError> {
            if self.refuse {
                return Err(RecordError::new("the disk is full"));
            }
            self.records.lock().unwrap().extend_from_slice(batch);
            Ok(())
        }

        fn usage(&self, _trace_id: Uuid, _tool: &str) -> Result<Usage, RecordError> {
            Ok(Usage { tokens: Some(7), usd: None })
        }
    }

    fn recorder(inner: Arc<Kept>) -> SpanRecorder {
        let settings =
            Settings::live(|name| (name == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| "http://127.0.0.1:9".into()));
        SpanRecorder::start(inner, &settings.settings.unwrap(), Arc::new(|_: &str| {})).unwrap()
    }

    fn call(invocation: Uuid) -> Vec<Record> {
        let trace = Uuid::from_u128(1);
        vec![
            Record::now(
                EventKind::CapAudit,
                "runtime",
                "a",
                trace,
                json!({"tool": "t", "capability": "exec", "decision": "allow", "invocation_id": invocation}),
            ),
            Record::now(
                EventKind::ToolCall,
                "runtime",
                "a",
                trace,
                json!({"tool": "t", "args": {"secretless": "content"}, "invocation_id": invocation}),
            ),
        ]
    }

    #[test]
    fn frames_are_recorded_first_and_assembled_only_once_recorded() {
        let inner = Arc::new(Kept::default());
        let spans = recorder(inner.clone());
        let batch = call(Uuid::from_u128(2));
        spans.record(&batch).unwrap();
        assert_eq!(*inner.records.lock().unwrap(), batch);
        assert_eq!(spans.usage(Uuid::from_u128(1), "t").unwrap().tokens, Some(7));
        let open = spans.assembler.lock().unwrap().drain();
        assert_eq!(open.iter().map(|i| i.frames.len()).collect::<Vec<_>>(), [2]);

        let refusing = Arc::new(Kept { refuse: true, ..Kept::default() });
        let spans = recorder(refusing);
        let refused = spans.record(&call(Uuid::from_u128(3)));
        assert_eq!(refused, Err(RecordError::new("the disk is full")));
        assert!(spans.assembler.lock().unwrap().drain().is_empty(), "a span never shows an unrecorded frame");
    }

    #[test]
    fn without_capture_the_content_is_left_out_before_reading() {
        let record = &call(Uuid::from_u128(4))[1];
        let Some(Frame { body: Payload::ToolCall(plain), .. }) = frame_of(record, false) else { panic!() };
        assert_eq!(plain.args, Value::Null);
        let Some(Frame { body: Payload::ToolCall(captured), .. }) = frame_of(record, true) else { panic!() };
        assert_eq!(captured.args, json!({"secretless": "content"}));
        let discovery =
            Record::now(EventKind::ToolDiscover, "runtime", "a", Uuid::from_u128(1), json!({"action": "search"}));
        assert_eq!(frame_of(&discovery, true), None);
        let unreadable = Record::now(EventKind::ToolCall, "runtime", "a", Uuid::from_u128(1), json!([1]));
        assert_eq!(frame_of(&unreadable, false), None);
    }
}
