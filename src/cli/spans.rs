//! Live spans for the commands that make calls (`tools call`, `serve`,
//! live replay): the span recorder put in front of the ledger when the
//! OpenTelemetry variables turn spans on (docs/fleet.md), its
//! warnings printed the rlp way.

use std::sync::Arc;

use crate::cli::output::warning;
use crate::event::Recorder;
use crate::runtime::Runtime;
use crate::telemetry::{Settings, SpanRecorder, process_env};

/// A recorder, with live spans in front of it when they are on.
pub(crate) struct Traced {
    recorder: Arc<dyn Recorder>,
    spans: Option<Arc<SpanRecorder>>,
}

/// `recorder`, with live spans in front of it when the variables turn them
/// on; a variable that cannot be used is a warning, never an error.
pub(crate) fn traced(recorder: Arc<dyn Recorder>) -> Traced {
    let reading = Settings::live(process_env);
    for line in &reading.warnings {
        warning(line);
    }
    let Some(settings) = reading.settings else { return Traced { recorder, spans: None } };
    match SpanRecorder::start(recorder.clone(), &settings, Arc::new(|line: &str| warning(line))) {
        Ok(spans) => {
            let spans = Arc::new(spans);
            Traced { recorder: spans.clone(), spans: Some(spans) }
        }
        Err(why) => {
            warning(format!("{why}; spans are off"));
            Traced { recorder, spans: None }
        }
    }
}

impl Traced {
    /// The recorder the runtime records into.
    pub(crate) fn recorder(&self) -> Arc<dyn Recorder> {
        self.recorder.clone()
    }

    /// Tells the spans the version of the bundle `runtime` loaded.
    pub(crate) fn loaded(&self, runtime: &Runtime) {
        if let (Some(spans), Some(version)) = (&self.spans, runtime.version()) {
            spans.set_bundle_version(version);
        }
    }
}
