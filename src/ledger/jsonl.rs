//! JSON Lines, the export format of a trace: writing one frame per line
//! ([`write_frame_line`]) and reading them back, one frame at a time.
//!
//! Each line is one frame:
//!
//! ```json
//! {"id":1,"ts_ms":1764000000000,"actor":"runtime","kind":"<kind>","scope":"mailer",
//!  "payload":{…},"provenance":{"agent":"mailer","msg_id":"…","trace_id":"…"},
//!  "hash_blake3":"<64 hex>","chain_blake3":"<64 hex>"}
//! ```
//!
//! with `kind` one of [`crate::event::EventKind`] and the payload of that kind
//! ([`crate::event::payload`]).
//!
//! [`JsonlReader`] checks every line on its own: UTF-8, JSON syntax, no
//! unknown or missing field (in the frame and in its provenance), a known
//! kind, a payload of the right shape, the shared columns
//! ([`crate::event::frame::check_columns`]: `ts_ms`, `actor`, `scope`), one
//! trace per file, `id` equal to the line number, and — when present —
//! `hash_blake3` equal to the recomputed row hash and `chain_blake3` equal to
//! the chain over the file's frames. Pairing calls with results is the
//! caller's job ([`crate::ledger::pending`]). A bad line is reported with its
//! number and reading can go on, so a caller can list several problems.

use std::io::BufRead;

use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use crate::bundle::value::strip_position;
use crate::event::canonical::{canonical_text, push_json_string};
use crate::event::frame::{Origin, TraceFrame, check_columns};
use crate::event::hash::{GENESIS, chain_hash, frame_hash, from_hex, to_hex};
use crate::event::row::check_payload_depth;
use crate::event::{EventKind, Payload, PreparedRow, Provenance};
use crate::fsutil::{ReadError as BoundedError, human_size, read_line_limited};

/// Longest line read (a frame carries at most one tool result).
pub const MAX_LINE_BYTES: u64 = 64 << 20;

/// One frame read from a line, with what import stores.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadFrame {
    /// The frame (position = line number).
    pub frame: TraceFrame,
    /// The payload in RFC 8785 form.
    pub payload_json: String,
    /// The provenance in RFC 8785 form.
    pub provenance_json: String,
    /// The row hash, recomputed.
    pub hash: [u8; 32],
}

impl ReadFrame {
    /// The columns the ledger stores for the frame.
    pub fn into_row(self) -> PreparedRow {
        PreparedRow {
            ts_ms: self.frame.ts_ms,
            kind: self.frame.kind(),
            actor: self.frame.actor,
            scope: self.frame.scope,
            payload_json: self.payload_json,
            provenance_json: self.provenance_json,
            trace_id: self.frame.provenance.trace_id,
            hash: self.hash,
        }
    }
}

/// A line that cannot be read as a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineError {
    /// The line number, from 1.
    pub line: u64,
    /// What is wrong with it.
    pub message: String,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Why reading stopped or skipped a line.
#[derive(Debug)]
pub enum ReadError {
    /// The file could not be read; reading cannot go on.
    Io(std::io::Error),
    /// A line too long to read; reading cannot go on.
    Fatal(LineError),
    /// One bad line; the next call reads the next line.
    Line(LineError),
}

/// An export line as written, before any check.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFrame {
    pub(crate) id: Option<u64>,
    pub(crate) ts_ms: i64,
    pub(crate) actor: String,
    pub(crate) kind: String,
    pub(crate) scope: String,
    pub(crate) payload: Value,
    pub(crate) provenance: Value,
    pub(crate) hash_blake3: Option<String>,
    pub(crate) chain_blake3: Option<String>,
}

/// The columns of one exported frame.
#[derive(Clone, Copy, Debug)]
pub struct FrameLine<'a> {
    /// Position in the trace (the `id` field).
    pub position: u64,
    /// `ts_ms`.
    pub ts_ms: i64,
    /// `actor`.
    pub actor: &'a str,
    /// `kind`.
    pub kind: &'a str,
    /// `scope`.
    pub scope: &'a str,
    /// Canonical payload text.
    pub payload_json: &'a str,
    /// Canonical provenance text.
    pub provenance_json: &'a str,
    /// The row hash.
    pub hash: &'a [u8; 32],
    /// The trace-local chain value.
    pub chain: &'a [u8; 32],
}

impl<'a> FrameLine<'a> {
    /// The line of a ledger row at `position` of its trace, with its hash
    /// and its chain value there.
    pub fn of(event: &'a crate::event::Event, position: u64, hash: &'a [u8; 32], chain: &'a [u8; 32]) -> Self {
        FrameLine {
            position,
            ts_ms: event.ts_ms,
            actor: &event.actor,
            kind: &event.kind,
            scope: &event.scope,
            payload_json: &event.payload_json,
            provenance_json: &event.provenance_json,
            hash,
            chain,
        }
    }
}

/// Appends one export line (with its newline) to `out`:
/// `{"id","ts_ms","actor","kind","scope","payload","provenance","hash_blake3","chain_blake3"}`,
/// in that order, with the payload and provenance embedded as JSON.
pub fn write_frame_line(out: &mut String, frame: &FrameLine<'_>) {
    out.push_str("{\"id\":");
    out.push_str(&frame.position.to_string());
    out.push_str(",\"ts_ms\":");
    out.push_str(&frame.ts_ms.to_string());
    out.push_str(",\"actor\":");
    push_json_string(out, frame.actor);
    out.push_str(",\"kind\":");
    push_json_string(out, frame.kind);
    out.push_str(",\"scope\":");
    push_json_string(out, frame.scope);
    out.push_str(",\"payload\":");
    out.push_str(frame.payload_json);
    out.push_str(",\"provenance\":");
    out.push_str(frame.provenance_json);
    out.push_str(",\"hash_blake3\":\"");
    out.push_str(&to_hex(frame.hash));
    out.push_str("\",\"chain_blake3\":\"");
    out.push_str(&to_hex(frame.chain));
    out.push_str("\"}\n");
}

/// Reads frames from JSON Lines, checking each (see the module documentation).
#[derive(Debug)]
pub struct JsonlReader<R> {
    reader: R,
    line: u64,
    buf: Vec<u8>,
    scratch: String,
    trace: Option<(Uuid, u64)>,
    prev_chain: [u8; 32],
    done: bool,
}

/// The message of a serde_json error without its " at line L column C"
/// suffix (the line is the file's, not the parser's), with the column.
fn json_message(error: &serde_json::Error) -> String {
    let message = strip_position(&error.to_string());
    if error.column() > 0 { format!("{message} (column {})", error.column()) } else { message }
}

/// Refuses a UUID (`value`, at `field`) that is not written as rlp writes
/// one — lower case, with hyphens: the text is stored and hashed as written,
/// while the ledger looks traces up by that form, so any other spelling
/// (upper case, `urn:uuid:`, braces, no hyphens) would leave a trace no
/// command finds and `rlp trace verify` reports as damaged. Anything that is
/// no UUID at all is left to the checks of its field.
fn check_uuid_spelling(field: &str, value: &Value) -> Result<(), String> {
    let Some(text) = value.as_str() else { return Ok(()) };
    match Uuid::parse_str(text) {
        Ok(id) if id.to_string() != text => Err(format!(
            "`{field}` is `{text}`: write it `{id}`, in lower case with hyphens, the one spelling of a UUID the ledger \
             stores and looks up"
        )),
        _ => Ok(()),
    }
}

/// Whether the integer `n` is one an IEEE double holds exactly (every
/// integer up to 2^53, and the larger ones that are multiples of a power of
/// two); numbers written with a fraction or an exponent are read as doubles
/// already.
fn exact_as_double(n: &serde_json::Number) -> bool {
    match (n.as_u64(), n.as_i64()) {
        (Some(u), _) => (u as f64) as u128 == u128::from(u),
        (_, Some(i)) => (i as f64) as i128 == i128::from(i),
        _ => true,
    }
}

/// The first integer of `value` that an IEEE double cannot hold exactly,
/// with its place below `value` (`.attempt`, `.result.ids[3]`).
fn inexact_integer(value: &Value) -> Option<(String, &serde_json::Number)> {
    match value {
        Value::Number(n) if !exact_as_double(n) => Some((String::new(), n)),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| inexact_integer(item).map(|(place, n)| (format!("[{i}]{place}"), n))),
        Value::Object(members) => members.iter().find_map(|(key, item)| {
            let member = match !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                true => format!(".{key}"),
                false => format!("[{}]", Value::from(key.as_str())),
            };
            inexact_integer(item).map(|(place, n)| (format!("{member}{place}"), n))
        }),
        _ => None,
    }
}

/// Refuses a payload holding an integer the ledger cannot store exactly: it
/// stores the RFC 8785 form, whose numbers are IEEE doubles, so such an
/// integer would be rounded (`18446744073709551615` stored as
/// `18446744073709552000`) and the frame read back would no longer be the
/// one checked here. Called once the payload's depth is known to be bounded.
fn check_numbers_exact(payload: &Value) -> Result<(), String> {
    match inexact_integer(payload) {
        None => Ok(()),
        Some((place, n)) => Err(format!(
            "`payload{place}` is {n}, an integer the ledger cannot store exactly (it stores numbers as IEEE doubles, \
             as RFC 8785 does: integers up to 2^53 = 9007199254740992, and larger ones only when a double holds \
             them); write a number a double holds exactly"
        )),
    }
}

impl<R: BufRead> JsonlReader<R> {
    /// A reader over `reader`.
    pub fn new(reader: R) -> Self {
        JsonlReader {
            reader,
            line: 0,
            buf: Vec::new(),
            scratch: String::new(),
            trace: None,
            prev_chain: GENESIS,
            done: false,
        }
    }

    /// The number of the last line read.
    pub fn line(&self) -> u64 {
        self.line
    }

    /// The trace of the file (set by its first readable frame).
    pub fn trace_id(&self) -> Option<Uuid> {
        self.trace.map(|(id, _)| id)
    }

    /// The next frame; `Ok(None)` at the end of the file.
    pub fn next_frame(&mut self) -> Result<Option<ReadFrame>, ReadError> {
        if self.done {
            return Ok(None);
        }
        let line = self.line + 1;
        let read = read_line_limited(&mut self.reader, MAX_LINE_BYTES, &mut self.buf);
        let read = read.map_err(|e| {
            self.done = true;
            match e {
                BoundedError::Io(e) => ReadError::Io(e),
                BoundedError::TooLarge { limit, .. } => ReadError::Fatal(LineError {
                    line,
                    message: format!("the line is larger than {}; this is not a trace export", human_size(limit)),
                }),
            }
        })?;
        if read == 0 {
            self.done = true;
            return Ok(None);
        }
        self.line = line;
        let complete = self.buf.last() == Some(&b'\n');
        let mut bytes = self.buf.as_slice();
        if let Some(rest) = bytes.strip_suffix(b"\n") {
            bytes = rest.strip_suffix(b"\r").unwrap_or(rest);
        }
        let bad = |message: String| ReadError::Line(LineError { line, message });
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(bad("the line is empty; every line must hold one frame".into()));
        }
        let raw: RawFrame = serde_json::from_slice(bytes).map_err(|e| {
            let message = match e.classify() {
                serde_json::error::Category::Eof if !complete => format!(
                    "the frame is cut short ({}): the file is truncated; export the trace again",
                    json_message(&e)
                ),
                serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                    format!("not valid JSON: {}", json_message(&e))
                }
                _ => format!("not a frame: {}", json_message(&e)),
            };
            bad(message)
        })?;
        self.check(raw, line).map(Some).map_err(bad)
    }

    fn check(&mut self, raw: RawFrame, line: u64) -> Result<ReadFrame, String> {
        let kind: EventKind = raw.kind.parse()?;
        if let Some(id) = raw.id
            && id != line
        {
            return Err(format!(
                "`id` is {id} but this is frame {line} of the file: frames were removed, added or reordered"
            ));
        }
        let provenance = Provenance::deserialize(&raw.provenance)
            .map_err(|e| format!("`provenance` is not {{trace_id, msg_id, agent}}: {}", json_message(&e)))?;
        check_columns(raw.ts_ms, &raw.actor, &raw.scope, &provenance)?;
        for (field, value) in [
            ("provenance.trace_id", &raw.provenance["trace_id"]),
            ("provenance.msg_id", &raw.provenance["msg_id"]),
            ("payload.invocation_id", &raw.payload["invocation_id"]),
        ] {
            check_uuid_spelling(field, value)?;
        }
        match self.trace {
            None => self.trace = Some((provenance.trace_id, line)),
            Some((trace, first)) if trace != provenance.trace_id => {
                return Err(format!(
                    "the frame belongs to trace {} but line {first} to trace {trace}; a file holds one trace",
                    provenance.trace_id
                ));
            }
            Some(_) => {}
        }
        check_payload_depth(&raw.payload)?;
        check_numbers_exact(&raw.payload)?;
        let payload_json = canonical_text(&raw.payload);
        let provenance_json = canonical_text(&raw.provenance);
        let hash = frame_hash(
            &mut self.scratch,
            raw.ts_ms,
            &raw.actor,
            kind.as_str(),
            &raw.scope,
            &payload_json,
            &provenance_json,
        );
        let stored_hash = match &raw.hash_blake3 {
            None => hash,
            Some(text) => {
                let stored = from_hex(text).ok_or("`hash_blake3` is not 64 hex digits")?;
                if stored != hash {
                    // Keep the chain in step so one edit is reported once.
                    self.prev_chain = raw.chain_blake3.as_deref().and_then(from_hex).unwrap_or(self.prev_chain);
                    return Err(format!(
                        "`hash_blake3` does not match the frame's content (recomputed {}): the frame was edited",
                        to_hex(&hash)
                    ));
                }
                stored
            }
        };
        let chain = chain_hash(&self.prev_chain, &stored_hash);
        if let Some(text) = &raw.chain_blake3 {
            let stored = from_hex(text).ok_or("`chain_blake3` is not 64 hex digits")?;
            self.prev_chain = stored;
            if stored != chain {
                return Err("`chain_blake3` does not follow from the frame before it: a frame was removed, added or \
                            reordered, or edited together with its hash"
                    .into());
            }
        } else {
            self.prev_chain = chain;
        }
        let body = Payload::read(kind, raw.payload)?;
        Ok(ReadFrame {
            frame: TraceFrame {
                position: line,
                origin: Origin::Line(line),
                ts_ms: raw.ts_ms,
                actor: raw.actor,
                scope: raw.scope,
                provenance,
                body,
            },
            payload_json,
            provenance_json,
            hash,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TRACE: &str = "0197a000-0000-7000-8000-000000000001";
    const INV: &str = "0197a000-0000-7000-8000-0000000000aa";
    const CALL: &str = EventKind::ToolCall.as_str();
    const RESULT: &str = EventKind::ToolResult.as_str();
    const AUDIT: &str = EventKind::CapAudit.as_str();

    fn line(id: u64, kind: &str, payload: Value) -> String {
        let provenance =
            json!({"trace_id": TRACE, "msg_id": format!("0197a000-0000-7000-8000-{id:012}"), "agent": "a"});
        let frame = json!({"id": id, "ts_ms": 1000 + id, "actor": "runtime", "kind": kind, "scope": "a",
                           "payload": payload, "provenance": provenance});
        format!("{frame}\n")
    }

    fn read_all(text: &str) -> Vec<Result<ReadFrame, String>> {
        let mut reader = JsonlReader::new(text.as_bytes());
        let mut out = Vec::new();
        loop {
            match reader.next_frame() {
                Ok(Some(frame)) => out.push(Ok(frame)),
                Ok(None) => break,
                Err(ReadError::Line(e)) => out.push(Err(e.to_string())),
                Err(ReadError::Fatal(e)) => {
                    out.push(Err(e.to_string()));
                    break;
                }
                Err(ReadError::Io(e)) => panic!("{e}"),
            }
        }
        out
    }

    #[test]
    fn reads_frames_and_reports_bad_lines() {
        let text = [
            line(1, CALL, json!({"tool": "t", "args": {}, "invocation_id": INV})),
            "{\"id\": 2, \"ts_ms\": \n".to_string(),
            line(3, "tool.question", json!({})),
            line(4, RESULT, json!({"invocation_id": INV})),
            line(9, RESULT, json!({"invocation_id": INV, "result": 1})),
            "\n".to_string(),
            line(7, RESULT, json!({"invocation_id": INV, "result": 1})).replace("\"ts_ms\":1007,", ""),
            line(8, RESULT, json!({"invocation_id": INV, "result": 1})).replace(TRACE, INV),
            "{\"id\":9,\"ts_ms\":1".to_string(),
        ]
        .concat();
        let results = read_all(&text);
        assert!(results[0].is_ok());
        let errors: Vec<String> = results.into_iter().skip(1).map(|r| r.unwrap_err()).collect();
        assert_eq!(
            errors,
            [
                "line 2: not valid JSON: EOF while parsing a value (column 19)",
                &format!("line 3: {}", "tool.question".parse::<EventKind>().unwrap_err()),
                "line 4: the payload has neither `result` nor `error`",
                "line 5: `id` is 9 but this is frame 5 of the file: frames were removed, added or reordered",
                "line 6: the line is empty; every line must hold one frame",
                "line 7: not a frame: missing field `ts_ms` (column 262)",
                &format!(
                    "line 8: the frame belongs to trace {INV} but line 1 to trace {TRACE}; a file holds one trace"
                ),
                "line 9: the frame is cut short (EOF while parsing an object (column 17)): the file is truncated; \
                 export the trace again",
            ]
        );
    }

    #[test]
    fn integers_a_double_cannot_hold_are_named_by_their_place() {
        let exact = [json!(1u64 << 53), json!((1u64 << 53) + 2), json!(i64::MIN), json!(u64::MAX - 2047), json!(1e300)];
        for value in exact {
            assert_eq!(inexact_integer(&json!({"n": value})), None, "{value}");
        }
        for value in [json!((1u64 << 53) + 1), json!(-(1i64 << 53) - 1), json!(u64::MAX)] {
            let found = inexact_integer(&json!({"n": value})).map(|(place, n)| (place, n.to_string()));
            assert_eq!(found, Some((".n".to_string(), value.to_string())));
        }
        let nested = json!({"ok": 1, "a b": [0, {"x_1": [2, u64::MAX]}]});
        let found = inexact_integer(&nested).map(|(place, _)| place);
        assert_eq!(found.as_deref(), Some(r#"["a b"][1].x_1[1]"#));
    }

    #[test]
    fn checks_hashes_and_the_chain() {
        let payloads = [json!({"n": 1}), json!({"n": 2}), json!({"n": 3})];
        let mut text = String::new();
        let mut prev = GENESIS;
        let mut scratch = String::new();
        for (i, payload) in payloads.iter().enumerate() {
            let position = i as u64 + 1;
            let payload_json = canonical_text(&json!({"invocation_id": INV, "tool": "t", "capability": "exec",
                                                      "decision": "allow", "reason": payload.to_string()}));
            let provenance_json = canonical_text(&json!({"trace_id": TRACE, "msg_id": INV, "agent": "a"}));
            let hash = frame_hash(&mut scratch, 5, "runtime", AUDIT, "a", &payload_json, &provenance_json);
            let chain = chain_hash(&prev, &hash);
            prev = chain;
            write_frame_line(
                &mut text,
                &FrameLine {
                    position,
                    ts_ms: 5,
                    actor: "runtime",
                    kind: AUDIT,
                    scope: "a",
                    payload_json: &payload_json,
                    provenance_json: &provenance_json,
                    hash: &hash,
                    chain: &chain,
                },
            );
        }
        assert!(read_all(&text).iter().all(Result::is_ok));
        let edited = text.replacen("{\\\"n\\\":2}", "{\\\"n\\\":7}", 1);
        let errors: Vec<String> = read_all(&edited).into_iter().filter_map(Result::err).collect();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].starts_with("line 2: `hash_blake3` does not match"), "{errors:?}");
        let lines: Vec<&str> = text.lines().collect();
        let swapped = format!("{}\n{}\n{}\n", lines[0], lines[2].replace("\"id\":3", "\"id\":2"), lines[1]);
        let errors: Vec<String> = read_all(&swapped).into_iter().filter_map(Result::err).collect();
        assert!(errors[0].starts_with("line 2: `chain_blake3` does not follow"), "{errors:?}");
    }
}
