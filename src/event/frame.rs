//! Frames: the events of one trace, as read from a ledger or from a JSON
//! Lines export, with their payloads typed ([`Payload`]).
//!
//! A frame's *position* is its place in its trace, counting from 1 (every
//! kind counts, audits and confirmations too). Positions are the same
//! whether the trace is read from a ledger or from its export, so a report
//! that names `#7` means the 7th line of the export.

use std::fmt;

use crate::event::{EventKind, Payload, Provenance};

/// Where a frame was read from, for messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A ledger row (its `id`).
    Row(i64),
    /// A line of a JSON Lines file (from 1).
    Line(u64),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Row(id) => write!(f, "ledger row {id}"),
            Origin::Line(line) => write!(f, "line {line}"),
        }
    }
}

/// Actors other than `tool:<id>`.
pub(crate) const ACTORS: &[&str] = &["runtime", "operator", "config"];

/// Checks the columns every frame shares, wherever it was read from: `ts_ms`
/// is not negative, `actor` is `runtime`, `operator`, `config` or
/// `tool:<tool id>`, and `scope` is the agent of the provenance (both name
/// the agent that made the frame). The message names the field.
pub(crate) fn check_columns(ts_ms: i64, actor: &str, scope: &str, provenance: &Provenance) -> Result<(), String> {
    if ts_ms < 0 {
        return Err(format!("`ts_ms` is {ts_ms}: a time is milliseconds since the Unix epoch and cannot be negative"));
    }
    let known =
        ACTORS.contains(&actor) || actor.strip_prefix("tool:").is_some_and(crate::bundle::tools::is_valid_tool_id);
    if !known {
        return Err(format!("`actor` is `{actor}`; it must be `runtime`, `operator`, `config` or `tool:<tool id>`"));
    }
    if scope != provenance.agent {
        return Err(format!(
            "`scope` is `{scope}` but `provenance.agent` is `{}`; both name the agent that made the frame",
            provenance.agent
        ));
    }
    Ok(())
}

/// One frame with its payload typed.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceFrame {
    /// Place in the trace, from 1.
    pub position: u64,
    /// Where it was read from.
    pub origin: Origin,
    /// Milliseconds since the Unix epoch.
    pub ts_ms: i64,
    /// Who produced it.
    pub actor: String,
    /// The scope (agent name).
    pub scope: String,
    /// The provenance.
    pub provenance: Provenance,
    /// The payload (the kind is implied by the variant).
    pub body: Payload,
}

impl TraceFrame {
    /// The kind.
    pub fn kind(&self) -> EventKind {
        self.body.kind()
    }
}
