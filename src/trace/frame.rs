//! Frames: the events of one trace, as read from the ledger or from a JSON
//! Lines export, with their payloads interpreted.
//!
//! A frame's *position* is its place in its trace, counting from 1 (every
//! kind counts: `cap.audit` and `tool.confirm` too). Positions are the same
//! whether the trace is read from a ledger or from its export, so a report
//! that names `#7` means the 7th line of the export.
//!
//! This module also holds the byte-level encoding shared by export, import
//! and verification: the row hash computed straight from canonical texts
//! ([`frame_hash`]) and the export line ([`write_frame_line`]).

use std::fmt;

use serde::Deserialize;
use serde_json::{Map, Value};
use uuid::Uuid;

/// `tool.call`: a call about to run (CT_TOOL_CALL).
pub const KIND_CALL: &str = "tool.call";
/// `tool.result`: the outcome of one attempt (CT_TOOL_RESULT).
pub const KIND_RESULT: &str = "tool.result";
/// `cap.audit`: an allow or deny decision about a capability.
pub const KIND_AUDIT: &str = "cap.audit";
/// `tool.confirm`: who approved or denied a call.
pub const KIND_CONFIRM: &str = "tool.confirm";
/// `trace.replay`: the first frame of a trace made by a live replay; names
/// the trace it replays (`replay_of`).
pub const KIND_REPLAY: &str = "trace.replay";

/// Every kind a trace may hold; anything else is refused on import.
pub const KNOWN_KINDS: &[&str] = &[KIND_CALL, KIND_RESULT, KIND_AUDIT, KIND_CONFIRM, KIND_REPLAY];

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

/// `{trace_id, msg_id, agent}` as read from a frame; any other key is refused.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameProvenance {
    /// The trace the frame belongs to.
    pub trace_id: Uuid,
    /// The frame's own id.
    pub msg_id: Uuid,
    /// The agent (bundle name).
    pub agent: String,
}

/// Actors other than `tool:<id>`.
pub const ACTORS: &[&str] = &["runtime", "operator", "config"];

/// Checks the columns every frame shares, wherever it was read from: `ts_ms`
/// is not negative, `actor` is `runtime`, `operator`, `config` or
/// `tool:<tool id>`, and `scope` is the agent of the provenance (both name
/// the agent that made the frame). The message names the field.
pub fn check_columns(ts_ms: i64, actor: &str, scope: &str, provenance: &FrameProvenance) -> Result<(), String> {
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

/// One frame with its payload interpreted.
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
    pub provenance: FrameProvenance,
    /// The interpreted payload (the kind is implied by the variant).
    pub body: Body,
}

impl TraceFrame {
    /// The `kind` column value.
    pub fn kind(&self) -> &'static str {
        self.body.kind()
    }
}

/// A recorded error (the `error` object of a `tool.result` payload).
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedError {
    /// `message`.
    pub message: String,
    /// `kind` (`tool`, `timeout`, …), when given.
    pub kind: Option<String>,
    /// The whole `error` object as recorded.
    pub raw: Value,
}

impl RecordedError {
    /// `retry_after_ms`: how long the runtime waited before the next attempt, when recorded.
    pub fn retry_after_ms(&self) -> Option<u64> {
        self.raw.get("retry_after_ms").and_then(Value::as_u64)
    }
}

/// What a call produced: a result or an error.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The tool's result.
    Result(Value),
    /// The tool failed.
    Error(RecordedError),
}

impl Outcome {
    /// `{"result": …}` or `{"error": …}`.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        match self {
            Outcome::Result(value) => map.insert("result".into(), value.clone()),
            Outcome::Error(error) => map.insert("error".into(), error.raw.clone()),
        };
        Value::Object(map)
    }

    /// `ok` or `error`.
    pub fn status(&self) -> &'static str {
        match self {
            Outcome::Result(_) => "ok",
            Outcome::Error(_) => "error",
        }
    }
}

/// A `tool.call` payload.
#[derive(Clone, Debug, PartialEq)]
pub struct CallBody {
    /// The invocation id.
    pub invocation_id: Uuid,
    /// The tool id.
    pub tool: String,
    /// The arguments.
    pub args: Value,
    /// `tags` (empty when absent).
    pub tags: Vec<String>,
}

/// A `tool.result` payload.
#[derive(Clone, Debug, PartialEq)]
pub struct ResultBody {
    /// The invocation this attempt belongs to.
    pub invocation_id: Uuid,
    /// The result or the error.
    pub outcome: Outcome,
    /// The attempt number (1 when absent).
    pub attempt: u64,
    /// Wall time of the attempt, when recorded.
    pub duration_ms: Option<u64>,
    /// Whether another attempt follows (`error.will_retry`).
    pub will_retry: bool,
}

/// A `cap.audit` payload.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditBody {
    /// The invocation id.
    pub invocation_id: Uuid,
    /// The tool id.
    pub tool: String,
    /// The capability string.
    pub capability: String,
    /// `allow` or `deny`.
    pub decision: String,
    /// Why.
    pub reason: String,
}

/// A `tool.confirm` payload.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfirmBody {
    /// The invocation id.
    pub invocation_id: Uuid,
    /// The tool id.
    pub tool: String,
    /// Whether the call was approved.
    pub approved: bool,
    /// Who decided.
    pub by: String,
    /// How.
    pub how: String,
}

/// A `trace.replay` payload: `{v, replay_of, mode}`.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayLinkBody {
    /// The trace that was replayed.
    pub replay_of: Uuid,
    /// The replay mode (`live`).
    pub mode: String,
}

/// A frame's payload, interpreted by kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    /// `tool.call`.
    Call(CallBody),
    /// `tool.result`.
    Result(ResultBody),
    /// `cap.audit`.
    Audit(AuditBody),
    /// `tool.confirm`.
    Confirm(ConfirmBody),
    /// `trace.replay`.
    ReplayLink(ReplayLinkBody),
}

fn field<'v>(map: &'v Map<String, Value>, key: &str) -> Result<&'v Value, String> {
    map.get(key).ok_or_else(|| format!("the payload has no `{key}`"))
}

fn string_field(map: &Map<String, Value>, key: &str) -> Result<String, String> {
    match field(map, key)? {
        Value::String(s) => Ok(s.clone()),
        _ => Err(format!("the payload's `{key}` is not a string")),
    }
}

fn uuid_field(map: &Map<String, Value>, key: &str) -> Result<Uuid, String> {
    let text = string_field(map, key)?;
    Uuid::parse_str(&text).map_err(|_| format!("the payload's `{key}` (`{text}`) is not a UUID"))
}

fn optional_u64(map: &Map<String, Value>, key: &str) -> Result<Option<u64>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| format!("the payload's `{key}` is not a non-negative integer")),
    }
}

impl Body {
    /// Interprets `payload` as a frame of `kind`; an error says which field
    /// is missing or of the wrong type.
    pub fn parse(kind: &str, payload: Value) -> Result<Body, String> {
        let Value::Object(mut map) = payload else {
            return Err("the payload is not a JSON object".into());
        };
        match kind {
            KIND_CALL => {
                let invocation_id = uuid_field(&map, "invocation_id")?;
                let tool = string_field(&map, "tool")?;
                let args = map.remove("args").ok_or("the payload has no `args`")?;
                let tags = match map.get("tags") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(items)) => items
                        .iter()
                        .map(|t| t.as_str().map(str::to_string).ok_or("the payload's `tags` holds a non-string"))
                        .collect::<Result<_, _>>()?,
                    Some(_) => return Err("the payload's `tags` is not an array".into()),
                };
                Ok(Body::Call(CallBody { invocation_id, tool, args, tags }))
            }
            KIND_RESULT => {
                let invocation_id = uuid_field(&map, "invocation_id")?;
                let attempt = optional_u64(&map, "attempt")?.unwrap_or(1);
                let duration_ms = optional_u64(&map, "duration_ms")?;
                let result = map.remove("result");
                let error = map.remove("error");
                let (outcome, will_retry) = match (result, error) {
                    (Some(result), None) => (Outcome::Result(result), false),
                    (None, Some(raw)) => {
                        let Value::Object(error) = &raw else {
                            return Err("the payload's `error` is not an object".into());
                        };
                        let message = match error.get("message") {
                            Some(Value::String(m)) => m.clone(),
                            _ => return Err("the payload's `error` has no string `message`".into()),
                        };
                        let kind = error.get("kind").and_then(Value::as_str).map(str::to_string);
                        let will_retry = error.get("will_retry").and_then(Value::as_bool).unwrap_or(false);
                        (Outcome::Error(RecordedError { message, kind, raw }), will_retry)
                    }
                    (Some(_), Some(_)) => return Err("the payload has both `result` and `error`".into()),
                    (None, None) => return Err("the payload has neither `result` nor `error`".into()),
                };
                Ok(Body::Result(ResultBody { invocation_id, outcome, attempt, duration_ms, will_retry }))
            }
            KIND_AUDIT => Ok(Body::Audit(AuditBody {
                invocation_id: uuid_field(&map, "invocation_id")?,
                tool: string_field(&map, "tool")?,
                capability: string_field(&map, "capability")?,
                decision: string_field(&map, "decision")?,
                reason: map.get("reason").and_then(Value::as_str).unwrap_or_default().to_string(),
            })),
            KIND_CONFIRM => Ok(Body::Confirm(ConfirmBody {
                invocation_id: uuid_field(&map, "invocation_id")?,
                tool: string_field(&map, "tool")?,
                approved: field(&map, "approved")?.as_bool().ok_or("the payload's `approved` is not true or false")?,
                by: map.get("by").and_then(Value::as_str).unwrap_or_default().to_string(),
                how: map.get("how").and_then(Value::as_str).unwrap_or_default().to_string(),
            })),
            KIND_REPLAY => Ok(Body::ReplayLink(ReplayLinkBody {
                replay_of: uuid_field(&map, "replay_of")?,
                mode: string_field(&map, "mode")?,
            })),
            other => Err(format!("unknown kind `{other}` (known: {})", KNOWN_KINDS.join(", "))),
        }
    }

    /// The `kind` column value.
    pub fn kind(&self) -> &'static str {
        match self {
            Body::Call(_) => KIND_CALL,
            Body::Result(_) => KIND_RESULT,
            Body::Audit(_) => KIND_AUDIT,
            Body::Confirm(_) => KIND_CONFIRM,
            Body::ReplayLink(_) => KIND_REPLAY,
        }
    }

    /// The invocation the frame belongs to (none for `trace.replay`).
    pub fn invocation_id(&self) -> Option<Uuid> {
        match self {
            Body::Call(c) => Some(c.invocation_id),
            Body::Result(r) => Some(r.invocation_id),
            Body::Audit(a) => Some(a.invocation_id),
            Body::Confirm(c) => Some(c.invocation_id),
            Body::ReplayLink(_) => None,
        }
    }
}

/// Appends `s` as an RFC 8785 JSON string: `"` and `\` escaped, the control
/// characters as `\b \t \n \f \r` or `\u00xx` (lower-case hex), everything
/// else as is.
pub fn push_json_string(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    let mut start = 0;
    for (i, byte) in s.bytes().enumerate() {
        let escape: Option<&str> = match byte {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            0x08 => Some("\\b"),
            b'\t' => Some("\\t"),
            b'\n' => Some("\\n"),
            0x0c => Some("\\f"),
            b'\r' => Some("\\r"),
            0..=0x1f => None,
            _ => continue,
        };
        out.push_str(&s[start..i]);
        match escape {
            Some(text) => out.push_str(text),
            None => {
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(byte >> 4)]));
                out.push(char::from(HEX[usize::from(byte & 0xf)]));
            }
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Largest integer JCS writes as plain digits (2^53).
const MAX_EXACT_INTEGER: i64 = 1 << 53;

/// Appends the RFC 8785 (JCS) canonical form of `value` to `out`: the same
/// text as [`crate::trace::event::canonical_json`], written directly
/// (members sorted by their UTF-16 code units, strings as in
/// [`push_json_string`], integers up to 2^53 as digits, every other number in
/// the ES6 form the canonicalizer gives).
pub fn push_canonical(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => {
            let limit = MAX_EXACT_INTEGER.unsigned_abs();
            match (n.as_i64(), n.as_u64()) {
                (Some(i), _) if i.unsigned_abs() <= limit => out.push_str(&i.to_string()),
                (_, Some(u)) if u <= limit => out.push_str(&u.to_string()),
                _ => match crate::trace::event::canonical_json(value) {
                    Ok(text) => out.push_str(&text),
                    Err(_) => out.push_str("null"),
                },
            }
        }
        Value::String(s) => push_json_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_canonical(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            if members.iter().all(|(k, _)| k.is_ascii()) {
                members.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            } else {
                members.sort_unstable_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            }
            out.push('{');
            for (i, (key, item)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_json_string(out, key);
                out.push(':');
                push_canonical(out, item);
            }
            out.push('}');
        }
    }
}

/// The RFC 8785 canonical text of `value` (see [`push_canonical`]).
pub fn canonical_text(value: &Value) -> String {
    let mut out = String::new();
    push_canonical(&mut out, value);
    out
}

/// `ts_ms` as RFC 8785 writes it (plain digits up to 2^53, ES6 number form beyond).
pub fn push_json_integer(out: &mut String, n: i64) {
    if n.unsigned_abs() <= MAX_EXACT_INTEGER.unsigned_abs() {
        out.push_str(&n.to_string());
    } else {
        match crate::trace::event::canonical_json(&Value::from(n)) {
            Ok(text) => out.push_str(&text),
            Err(_) => out.push_str(&n.to_string()),
        }
    }
}

/// The row hash of [`crate::trace::event`], computed from the stored texts:
/// BLAKE3 of `{"actor":…,"kind":…,"payload":<payload_json>,"provenance":<provenance_json>,"scope":…,"ts_ms":…}`.
///
/// Equal to [`crate::trace::event::row_hash`] when both texts are in RFC 8785
/// canonical form (as the ledger stores them); a text that is not canonical
/// gives another hash, which is how an edit that only re-formats a payload is
/// noticed. `buf` is scratch space, reused between calls.
pub fn frame_hash(
    buf: &mut String,
    ts_ms: i64,
    actor: &str,
    kind: &str,
    scope: &str,
    payload_json: &str,
    provenance_json: &str,
) -> [u8; 32] {
    buf.clear();
    buf.push_str("{\"actor\":");
    push_json_string(buf, actor);
    buf.push_str(",\"kind\":");
    push_json_string(buf, kind);
    buf.push_str(",\"payload\":");
    buf.push_str(payload_json);
    buf.push_str(",\"provenance\":");
    buf.push_str(provenance_json);
    buf.push_str(",\"scope\":");
    push_json_string(buf, scope);
    buf.push_str(",\"ts_ms\":");
    push_json_integer(buf, ts_ms);
    buf.push('}');
    *blake3::hash(buf.as_bytes()).as_bytes()
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

/// Appends one export line (with its newline) to `out`:
/// `{"id","ts_ms","actor","kind","scope","payload","provenance","hash_blake3","chain_blake3"}`,
/// in that order, with the payload and provenance embedded as JSON.
pub fn write_frame_line(out: &mut String, frame: &FrameLine<'_>) {
    use crate::trace::event::to_hex;
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

/// Shortens `text` to at most `max` characters, marking the cut with `…`.
pub fn ellipsize(text: &str, max: usize) -> String {
    match text.char_indices().nth(max.saturating_sub(1)) {
        Some((cut, _)) if text.chars().count() > max => format!("{}…", &text[..cut]),
        _ => text.to_string(),
    }
}

/// `2025-11-24T16:00:00.000Z` for milliseconds since the Unix epoch (UTC).
pub fn format_ts(ts_ms: i64) -> String {
    let secs = ts_ms.div_euclid(1000);
    let millis = ts_ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z", rem / 3600, (rem % 3600) / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::event::{canonical_json, row_hash};
    use serde_json::json;

    #[test]
    fn json_strings_match_rfc8785() {
        for s in ["plain", "q\"b\\s", "\u{1}\u{8}\t\n\u{b}\u{c}\r\u{1f}", "é ☃ \u{2028} \u{7f}", ""] {
            let mut out = String::new();
            push_json_string(&mut out, s);
            assert_eq!(out, canonical_json(&Value::from(s)).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn canonical_text_matches_the_canonicalizer() {
        let values = [
            json!({"b": [1, -2, 1.5, 1e21, 1e-7, 0.1, 9007199254740993u64, -9007199254740993i64, 123456789012345680000.0],
                   "a": {"z": null, "é": true, "\u{10000}": "x", "\u{ffff}": "y", "": false}, "A": "\u{1}\"\\"}),
            json!([]),
            json!({}),
            json!(-0.0),
            json!(9007199254740992u64),
            json!("plain"),
        ];
        for value in values {
            assert_eq!(canonical_text(&value), canonical_json(&value).unwrap(), "{value}");
        }
    }

    #[test]
    fn fast_hash_equals_the_ledger_row_hash() {
        let payload = json!({"v": 1, "args": {"b": [1.5, "x\u{1}"], "a": null}});
        let provenance = json!({"trace_id": "t", "msg_id": "m", "agent": "a\"b"});
        let mut buf = String::new();
        for ts in [0, 1_764_000_000_000, -5, i64::MAX, i64::MIN, 1 << 53, (1 << 53) + 1] {
            let expected = row_hash(ts, "tool:x\n", "tool.call", "sc\\ope", &payload, &provenance).unwrap();
            let got = frame_hash(
                &mut buf,
                ts,
                "tool:x\n",
                "tool.call",
                "sc\\ope",
                &canonical_json(&payload).unwrap(),
                &canonical_json(&provenance).unwrap(),
            );
            assert_eq!(got, expected, "ts {ts}");
        }
    }

    #[test]
    fn parses_bodies_and_names_missing_fields() {
        let id = Uuid::from_u128(7);
        let call = Body::parse(KIND_CALL, json!({"v": 1, "tool": "t", "args": {"a": 1}, "invocation_id": id})).unwrap();
        assert_eq!(
            call,
            Body::Call(CallBody { invocation_id: id, tool: "t".into(), args: json!({"a": 1}), tags: vec![] })
        );
        let retry = Body::parse(
            KIND_RESULT,
            json!({"invocation_id": id, "error": {"message": "busy", "kind": "tool", "will_retry": true}, "attempt": 1}),
        )
        .unwrap();
        let Body::Result(retry) = retry else { panic!("not a result") };
        assert!(retry.will_retry);
        assert_eq!(
            Body::parse(KIND_RESULT, json!({"invocation_id": id})).unwrap_err(),
            "the payload has neither `result` nor `error`"
        );
        assert_eq!(Body::parse(KIND_CALL, json!({"tool": "t"})).unwrap_err(), "the payload has no `invocation_id`");
        assert_eq!(
            Body::parse(KIND_CALL, json!({"invocation_id": "nope", "tool": "t", "args": 1})).unwrap_err(),
            "the payload's `invocation_id` (`nope`) is not a UUID"
        );
        assert_eq!(Body::parse(KIND_CALL, json!([1])).unwrap_err(), "the payload is not a JSON object");
        assert!(Body::parse("tool.inquiry", json!({})).unwrap_err().starts_with("unknown kind `tool.inquiry`"));
    }

    #[test]
    fn formats_times_and_shortens_text() {
        assert_eq!(format_ts(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_ts(1_764_000_000_123), "2025-11-24T16:00:00.123Z");
        assert_eq!(format_ts(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(format_ts(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(ellipsize("abcdef", 4), "abc…");
        assert_eq!(ellipsize("abcd", 4), "abcd");
        assert_eq!(ellipsize("ééééé", 3), "éé…");
    }
}
