//! OpenTelemetry spans of tool calls (docs/fleet.md): with the
//! standard `OTEL_EXPORTER_OTLP_*` variables set, every call becomes an
//! `execute_tool {tool id}` span after the GenAI semantic conventions,
//! sent over OTLP/HTTP (protobuf) to a collector; a recorded trace can be
//! sent after the fact (`rlp trace export --otlp`).
//!
//! - `settings`: the variables, read and checked (a value that cannot be
//!   used is a warning, never a failure);
//! - `span`: the one function that turns the frames of one invocation into
//!   its span, live and after the fact alike;
//! - `assemble`: frames grouped into invocations, each handed over when it
//!   ends;
//! - `collector`: the HTTP client (rlp's own reqwest) behind the exporter;
//! - `pipeline`: the exporter and the batch processor of live spans, the
//!   one warning when the collector cannot be reached, the bounded wait at
//!   the end of a command;
//! - [`SpanRecorder`] (`live`): the recorder put in front of the ledger;
//! - `export`: a recorded trace sent span by span.
//!
//! Spans are built from frames only, after the runtime scrubbed them of
//! secret values; content (arguments, results, messages) goes out only
//! with `RLP_OTEL_CAPTURE_CONTENT=true`. Sending never blocks a call: live
//! spans wait in a bounded queue that a thread of the SDK drains.

mod assemble;
mod collector;
mod export;
mod live;
mod pipeline;
mod settings;
mod span;

use std::sync::Arc;

pub(crate) use export::{SendError, TraceSender};
pub use live::SpanRecorder;
pub use settings::{Reading, Settings, process_env};

/// Prints one warning line (the text after `warning: `); the CLI prints it
/// the rlp way, on stderr.
pub type Warn = Arc<dyn Fn(&str) + Send + Sync>;
