//! Reading traces: the list of traces in a ledger, and the frames of one
//! trace from a ledger or from a JSON Lines file, streamed in order; and
//! the tag filter of `rlp trace list|show|export --tag`.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use crate::error::{Exit, Reportable};
use crate::event::frame::{Origin, TraceFrame, check_columns};
use crate::event::{Event, EventKind, Payload, Provenance};
use crate::ledger::checked::{CheckedReadError, Damage, for_each_checked_row};
use crate::ledger::jsonl::{JsonlReader, LineError, ReadError};
use crate::ledger::{LedgerError, Location};

/// The agents of a trace, sorted, from the JSON array the list queries
/// aggregate them into (an agent name may hold any character, a comma
/// among them); a frame without an agent adds none, and one whose agent a
/// hand-edited row made another JSON value shows that value's JSON text.
pub(crate) fn agents_of(aggregated: Option<&str>) -> Vec<String> {
    let listed: Vec<serde_json::Value> =
        aggregated.and_then(|text| serde_json::from_str(text).ok()).unwrap_or_default();
    let mut agents: Vec<String> = listed
        .into_iter()
        .filter_map(|agent| match agent {
            serde_json::Value::Null => None,
            serde_json::Value::String(name) => Some(name),
            other => Some(other.to_string()),
        })
        .collect();
    agents.sort();
    agents.dedup();
    agents
}

/// One trace in the ledger, as `rlp trace list` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TraceSummary {
    /// The trace id (as stored).
    pub trace_id: String,
    /// The agents whose frames are in the trace, sorted.
    pub agents: Vec<String>,
    /// Time of the first frame (ms since the Unix epoch).
    pub first_ts_ms: i64,
    /// Time of the last frame.
    pub last_ts_ms: i64,
    /// Frames of every kind.
    pub frames: u64,
    /// Call frames.
    pub calls: u64,
    /// Calls whose final result is an error.
    pub errors: u64,
    /// Invocations refused by policy or not confirmed (no call frame).
    pub refused: u64,
    /// The trace this one replays (live replay), if any.
    pub replay_of: Option<String>,
}

/// Calls `f` with every trace in the ledger, oldest first (by first row),
/// until it breaks; returns how many it was called with. A ledger that does
/// not exist yet has none.
pub fn list_traces(ledger: &Location, mut f: impl FnMut(TraceSummary) -> ControlFlow<()>) -> Result<u64, LedgerError> {
    match ledger.open_if_exists()? {
        Some(store) => store.for_each_trace(&mut f),
        None => Ok(0),
    }
}

/// The id of `ledger`'s newest trace (the one [`list_traces`] gives last);
/// `None` when there is no ledger or no trace.
pub fn newest_trace(ledger: &Location) -> Result<Option<String>, LedgerError> {
    match ledger.open_if_exists()? {
        Some(store) => store.newest_trace(),
        None => Ok(None),
    }
}

/// Where a trace is read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceInput {
    /// One trace of a ledger.
    Ledger {
        /// The ledger.
        ledger: Location,
        /// The trace.
        trace_id: Uuid,
    },
    /// A JSON Lines export (one trace).
    File(PathBuf),
}

impl std::fmt::Display for TraceInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TraceInput::Ledger { trace_id, .. } => write!(f, "trace {trace_id}"),
            TraceInput::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// There is no ledger yet.
    #[error("there is no ledger at {0} (no call has been recorded in this home)")]
    NoLedger(Location),
    /// The ledger has no frame of the trace.
    #[error("the ledger {ledger} has no trace {trace_id}")]
    NoSuchTrace {
        /// The trace asked for.
        trace_id: Uuid,
        /// The ledger.
        ledger: Location,
    },
    /// The file holds no frame.
    #[error("{0} holds no frame")]
    EmptyFile(PathBuf),
    /// The ledger could not be read.
    #[error(transparent)]
    Ledger(LedgerError),
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A line of the file is not a valid frame.
    #[error("{path}: {error}")]
    BadLine {
        /// The file.
        path: PathBuf,
        /// The line and what is wrong.
        error: LineError,
    },
    /// A ledger row of the trace does not match its hash, or the trace's
    /// chain does not check out (the ledger was edited).
    #[error(transparent)]
    Edited(Damage),
    /// A ledger row of the trace cannot be read as a frame.
    #[error("ledger row {row}: {message}")]
    BadRow {
        /// The row id.
        row: i64,
        /// What is wrong.
        message: String,
    },
}

impl From<CheckedReadError> for InputError {
    fn from(e: CheckedReadError) -> InputError {
        match e {
            CheckedReadError::Ledger(e) => InputError::Ledger(e),
            CheckedReadError::Damaged(damage) => InputError::Edited(damage),
        }
    }
}

/// Exit 2, except a trace that does not check out (1).
impl Reportable for InputError {
    fn class(&self) -> Exit {
        match self {
            InputError::Edited(_) => Exit::Problems,
            _ => Exit::Usage,
        }
    }

    fn message(&self) -> String {
        match self {
            InputError::Ledger(e) => e.message(),
            _ => self.to_string(),
        }
    }

    fn help(&self) -> Option<String> {
        let help = match self {
            InputError::NoLedger(_) => "record calls with `rlp tools call`, or pass --home to use another runtime home",
            InputError::NoSuchTrace { .. } => "`rlp trace list` shows the traces of this home; pass --home for another",
            InputError::EmptyFile(_) | InputError::Io { .. } => "pass a file written by `rlp trace export`",
            InputError::BadLine { .. } => "export the trace again; `rlp trace import` lists every problem of a file",
            InputError::Edited(_) => crate::ledger::EDITED_ROW_HELP,
            InputError::BadRow { .. } => "run `rlp trace verify` to see what was changed in the ledger",
            InputError::Ledger(e) => return e.help(),
        };
        Some(help.into())
    }
}

/// Interprets a ledger row as the frame at `position`, with the checks a
/// line of an export gets (payload shape, provenance fields, shared columns).
pub fn frame_from_event(event: Event, position: u64) -> Result<TraceFrame, InputError> {
    frame_and_payload(event, position).map(|(frame, _)| frame)
}

/// [`frame_from_event`], with the row's payload text.
fn frame_and_payload(event: Event, position: u64) -> Result<(TraceFrame, String), InputError> {
    let bad = |message: String| InputError::BadRow { row: event.id, message };
    let payload: Value =
        serde_json::from_str(&event.payload_json).map_err(|e| bad(format!("payload_json is not JSON: {e}")))?;
    let provenance: Provenance = serde_json::from_str(&event.provenance_json)
        .map_err(|e| bad(format!("provenance_json is not {{trace_id, msg_id, agent}}: {e}")))?;
    check_columns(event.ts_ms, &event.actor, &event.scope, &provenance).map_err(bad)?;
    let kind: EventKind = event.kind.parse().map_err(bad)?;
    let body = Payload::read(kind, payload).map_err(bad)?;
    let frame = TraceFrame {
        position,
        origin: Origin::Row(event.id),
        ts_ms: event.ts_ms,
        actor: event.actor,
        scope: event.scope,
        provenance,
        body,
    };
    Ok((frame, event.payload_json))
}

/// Calls `f` with every frame of the trace, in order (streaming; stops on
/// `Break`); returns the number of frames read. An unknown trace, an empty
/// file, a frame that cannot be read, and a trace from the ledger that does
/// not check out (each row against its hash and its place in the trace's
/// chain as it is read, the trace's end once all are:
/// [`crate::ledger::checked`]) are errors.
pub fn for_each_frame(input: &TraceInput, mut f: impl FnMut(TraceFrame) -> ControlFlow<()>) -> Result<u64, InputError> {
    for_each_frame_with_payload(input, |frame, _| f(frame))
}

/// [`for_each_frame`], with each frame's payload as recorded (JSON text).
fn for_each_frame_with_payload(
    input: &TraceInput,
    mut f: impl FnMut(TraceFrame, &str) -> ControlFlow<()>,
) -> Result<u64, InputError> {
    match input {
        TraceInput::Ledger { ledger, trace_id } => {
            let store = ledger
                .open_if_exists()
                .map_err(InputError::Ledger)?
                .ok_or_else(|| InputError::NoLedger(ledger.clone()))?;
            let mut position = 0u64;
            let mut failure = None;
            for_each_checked_row(&*store, trace_id, &mut |event, _| {
                position += 1;
                match frame_and_payload(event, position) {
                    Ok((frame, payload)) => f(frame, &payload),
                    Err(e) => {
                        failure = Some(e);
                        ControlFlow::Break(())
                    }
                }
            })?;
            if let Some(failure) = failure {
                return Err(failure);
            }
            if position == 0 {
                return Err(InputError::NoSuchTrace { trace_id: *trace_id, ledger: ledger.clone() });
            }
            Ok(position)
        }
        TraceInput::File(path) => {
            let io = |source| InputError::Io { path: path.clone(), source };
            let file = std::fs::File::open(path).map_err(io)?;
            if file.metadata().map_err(io)?.is_dir() {
                return Err(io(std::io::Error::new(std::io::ErrorKind::IsADirectory, "it is a folder")));
            }
            let mut reader = JsonlReader::new(std::io::BufReader::with_capacity(1 << 20, file));
            let mut frames = 0;
            loop {
                match reader.next_frame() {
                    Ok(Some(read)) => {
                        frames += 1;
                        if f(read.frame, &read.payload_json).is_break() {
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(ReadError::Line(error) | ReadError::Fatal(error)) => {
                        return Err(InputError::BadLine { path: path.clone(), error });
                    }
                    Err(ReadError::Io(source)) => return Err(InputError::Io { path: path.clone(), source }),
                }
            }
            if frames == 0 {
                return Err(InputError::EmptyFile(path.clone()));
            }
            Ok(frames)
        }
    }
}

/// Whether `payload`'s `tags` member (an array of strings) holds every tag
/// of `wanted` (a payload without `tags` holds none). The one tag match of
/// `rlp trace list|show|export --tag`.
pub fn carries_tags(payload: &Value, wanted: &[String]) -> bool {
    let tags = payload.get("tags").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    wanted.iter().all(|tag| tags.iter().any(|t| t.as_str() == Some(tag)))
}

fn payload_carries_tags(payload_json: &str, wanted: &[String]) -> bool {
    serde_json::from_str::<Value>(payload_json).is_ok_and(|payload| carries_tags(&payload, wanted))
}

/// Whether some frame of the trace carries every tag of `wanted`.
pub fn trace_carries_tags(input: &TraceInput, wanted: &[String]) -> Result<bool, InputError> {
    let mut found = false;
    for_each_frame_with_payload(input, |_, payload| {
        found = payload_carries_tags(payload, wanted);
        if found { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    })?;
    Ok(found)
}

/// The invocations of the trace with at least one frame carrying every tag
/// of `wanted` (`trace show|export --tag` keep all the frames of these
/// invocations, and no other frame).
pub fn tagged_invocations(input: &TraceInput, wanted: &[String]) -> Result<HashSet<Uuid>, InputError> {
    let mut tagged = HashSet::new();
    for_each_frame_with_payload(input, |frame, payload| {
        if let Some(id) = frame.body.invocation_id()
            && !tagged.contains(&id)
            && payload_carries_tags(payload, wanted)
        {
            tagged.insert(id);
        }
        ControlFlow::Continue(())
    })?;
    Ok(tagged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Record;
    use crate::ledger::{LedgerStore, SqliteLedger};
    use serde_json::json;

    fn record(trace: Uuid, kind: EventKind, ts: i64, payload: Value) -> Record {
        Record {
            ts_ms: ts,
            actor: "runtime".into(),
            kind,
            scope: "a".into(),
            payload,
            provenance: Provenance { trace_id: trace, msg_id: Uuid::now_v7(), agent: "a".into() },
        }
    }

    #[test]
    fn tags_match_when_every_wanted_tag_is_there() {
        let wanted = |tags: &[&str]| tags.iter().map(|t| t.to_string()).collect::<Vec<_>>();
        let payload = json!({"tags": ["mail", "team=mail", 3]});
        assert!(carries_tags(&payload, &wanted(&["mail"])));
        assert!(carries_tags(&payload, &wanted(&["team=mail", "mail"])));
        assert!(!carries_tags(&payload, &wanted(&["mail", "external"])));
        assert!(!carries_tags(&payload, &wanted(&["3"])));
        assert!(!carries_tags(&json!({"tags": "mail"}), &wanted(&["mail"])));
        assert!(!carries_tags(&json!({}), &wanted(&["mail"])));
        assert!(carries_tags(&json!({}), &[]));
    }

    #[test]
    fn lists_traces_with_counts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.sqlite");
        let location = Location::Sqlite(path.clone());
        assert_eq!(list_traces(&location, |_| panic!("no trace expected")).unwrap(), 0);
        let ledger = SqliteLedger::open(&path).unwrap();
        let (t1, t2) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let (i1, i2, i3) = (Uuid::from_u128(11), Uuid::from_u128(12), Uuid::from_u128(13));
        ledger
            .append(&[
                record(t2, EventKind::ToolCall, 10, json!({"tool": "x", "args": {}, "invocation_id": i1})),
                record(t1, EventKind::ToolCall, 20, json!({"tool": "x", "args": {}, "invocation_id": i2})),
                record(
                    t2,
                    EventKind::ToolResult,
                    30,
                    json!({"invocation_id": i1, "error": {"message": "m", "will_retry": true}}),
                ),
                record(t2, EventKind::ToolResult, 40, json!({"invocation_id": i1, "error": {"message": "m"}})),
                record(t2, EventKind::CapAudit, 50, json!({"invocation_id": i3, "decision": "deny"})),
                record(t2, EventKind::CapAudit, 51, json!({"invocation_id": i3, "decision": "deny"})),
            ])
            .unwrap();
        let mut seen = Vec::new();
        assert_eq!(
            list_traces(&location, |t| {
                seen.push(t);
                ControlFlow::Continue(())
            })
            .unwrap(),
            2
        );
        assert_eq!(seen[0].trace_id, t2.to_string());
        assert_eq!((seen[0].frames, seen[0].calls, seen[0].errors, seen[0].refused), (5, 1, 1, 1));
        assert_eq!((seen[0].first_ts_ms, seen[0].last_ts_ms), (10, 51));
        assert_eq!(seen[1].agents, ["a"]);
        assert_eq!((seen[1].frames, seen[1].errors), (1, 0));
    }

    /// An agent name is listed whole, whatever it holds (an imported trace
    /// may name any agent), and each once.
    #[test]
    fn agents_with_commas_are_listed_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.sqlite");
        let ledger = SqliteLedger::open(&path).unwrap();
        let trace = Uuid::from_u128(1);
        let by = |agent: &str| {
            let mut frame = record(trace, EventKind::ToolCall, 10, json!({}));
            frame.provenance.agent = agent.into();
            frame
        };
        ledger.append(&[by("mail, the agent"), by("a"), by("mail, the agent"), by("\"quoted\"")]).unwrap();
        let mut seen = Vec::new();
        list_traces(&Location::Sqlite(path), |t| {
            seen.push(t);
            ControlFlow::Continue(())
        })
        .unwrap();
        assert_eq!(seen[0].agents, ["\"quoted\"", "a", "mail, the agent"]);
        assert_eq!(agents_of(Some(r#"["b", null, 3, "a"]"#)), ["3", "a", "b"]);
        assert_eq!(agents_of(None), Vec::<String>::new());
    }
}
