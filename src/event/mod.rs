//! The event schema: what a frame is, below the runtime that writes frames
//! and the ledger that keeps them.
//!
//! - [`EventKind`] and [`Payload`] ([`kind`]): the kinds of frame, each with
//!   its payload type, from one table;
//! - [`payload`]: the payload types, written by the runtime and read back by
//!   export, `trace show` and replay, with [`Decision`] and [`Outcome`];
//! - [`record`]: a frame to append ([`Record`], [`Provenance`]) and the
//!   [`Recorder`] trait the runtime writes through;
//! - [`canonical`]: RFC 8785 canonical JSON, the one canonicaliser;
//! - [`hash`]: the frame hash and the hash chain;
//! - [`row`]: rows of the `events` table (`schema.sql`, the one table
//!   definition);
//! - [`frame`]: a frame of a trace as read back;
//! - [`traceparent`]: the W3C trace context a caller sends with a call;
//! - [`placeholder`]: the placeholders of a redacted export.
//!
//! The format is described for users in docs/runtime.md ("Ledger") and
//! docs/replay.md (the export).

pub mod canonical;
mod fields;
pub(crate) mod frame;
pub(crate) mod hash;
pub(crate) mod kind;
pub(crate) mod payload;
pub mod placeholder;
pub(crate) mod record;
pub(crate) mod row;
pub(crate) mod traceparent;

pub use kind::{EventKind, Payload};
pub use payload::{
    CapAuditPayload, CommandRecord, Decision, HookEffect, Outcome, PAYLOAD_VERSION, RecordedAnswer, RecordedError,
    ReplayAnswered, ReplayLinkPayload, ReplayMark, SandboxRecord, ServerExchangePayload, ServerRecord,
    ToolAnswerPayload, ToolCallPayload, ToolConfirmPayload, ToolDiscoverPayload, ToolError, ToolHookPayload,
    ToolInquiryPayload, ToolResultPayload, ToolSamplePayload, Usage,
};
pub use record::{Provenance, Record, RecordError, Recorder, now_ms};
pub use row::{Event, PreparedRow, RowError};
