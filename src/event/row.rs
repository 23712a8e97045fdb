//! Rows of the `events` table (defined in `src/event/schema.sql`): a stored
//! row as read back ([`Event`]) and a record made ready to insert
//! ([`PreparedRow`]).
//!
//! `payload_json` and `provenance_json` are RFC 8785 canonical JSON
//! ([`crate::event::canonical`]); `hash_blake3` and `chain_blake3` are
//! defined in [`crate::event::hash`].

use serde_json::Value;
use uuid::Uuid;

use crate::bundle::value::{MAX_DATA_DEPTH, json_depth};
use crate::event::canonical::canonical_text;
use crate::event::hash::{frame_hash, from_hex};
use crate::event::{EventKind, Provenance, Record};

/// One stored row of the `events` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Row id (ascending in append order).
    pub id: i64,
    /// Milliseconds since the Unix epoch.
    pub ts_ms: i64,
    /// Who produced the frame.
    pub actor: String,
    /// The kind, as stored (see [`EventKind`]).
    pub kind: String,
    /// The scope (agent name).
    pub scope: String,
    /// The payload, RFC 8785 canonical JSON.
    pub payload_json: String,
    /// The provenance `{trace_id, msg_id, agent}`, RFC 8785 canonical JSON.
    pub provenance_json: String,
    /// Hex BLAKE3 of the row (see [`crate::event::hash`]).
    pub hash_blake3: String,
    /// Hex BLAKE3 chain value (empty for rows written before the chain existed).
    pub chain_blake3: String,
    /// The frame's position in its trace's own chain, from 1; `None` for a
    /// row of the legacy chain (written before ledgers chained each trace
    /// on its own, docs/fleet.md "Verifiable without one line").
    pub trace_seq: Option<i64>,
}

/// What is wrong with a stored row: its texts do not read, or do not hash
/// to what it says. Any of these means the ledger was edited (or damaged).
#[derive(Debug, thiserror::Error)]
pub enum RowError {
    /// A JSON column does not read as what it holds.
    #[error("event {row}: {column} is not {what}: {source}")]
    Unreadable {
        /// The row id.
        row: i64,
        /// `payload` or `provenance`.
        column: &'static str,
        /// What it should be (`JSON`, `valid`).
        what: &'static str,
        /// The reader's error.
        source: serde_json::Error,
    },
    /// A JSON column is not in the canonical form it was hashed in.
    #[error("event {row}: {column} is not in canonical form")]
    NotCanonical {
        /// The row id.
        row: i64,
        /// `payload_json` or `provenance_json`.
        column: &'static str,
    },
    /// The stored texts do not hash to the row's `hash_blake3`.
    #[error("the row does not match its hash_blake3: the ledger was edited")]
    HashMismatch,
}

impl Event {
    /// The payload as a JSON value.
    pub fn payload(&self) -> Result<Value, RowError> {
        serde_json::from_str(&self.payload_json).map_err(|source| RowError::Unreadable {
            row: self.id,
            column: "payload",
            what: "JSON",
            source,
        })
    }

    /// The provenance.
    pub fn provenance(&self) -> Result<Provenance, RowError> {
        serde_json::from_str(&self.provenance_json).map_err(|source| RowError::Unreadable {
            row: self.id,
            column: "provenance",
            what: "valid",
            source,
        })
    }

    /// The row hash recomputed from the stored texts (one BLAKE3 pass, no
    /// JSON parsing; `scratch` is reused between rows).
    pub fn stored_text_hash(&self, scratch: &mut String) -> [u8; 32] {
        frame_hash(scratch, self.ts_ms, &self.actor, &self.kind, &self.scope, &self.payload_json, &self.provenance_json)
    }

    /// Checks the row against its stored `hash_blake3`, as export, show and
    /// replay do for each row they read. Returns the hash, or what is wrong.
    pub fn check_hash(&self, scratch: &mut String) -> Result<[u8; 32], RowError> {
        let hash = self.stored_text_hash(scratch);
        if from_hex(&self.hash_blake3) != Some(hash) {
            return Err(RowError::HashMismatch);
        }
        Ok(hash)
    }

    /// Recomputes this row's hash from its columns; an error when the stored
    /// JSON is not canonical (and so cannot have been hashed as stored).
    pub fn computed_hash(&self) -> Result<[u8; 32], RowError> {
        let payload = self.payload()?;
        let provenance: Value = serde_json::from_str(&self.provenance_json).map_err(|source| RowError::Unreadable {
            row: self.id,
            column: "provenance",
            what: "JSON",
            source,
        })?;
        if canonical_text(&payload) != self.payload_json {
            return Err(RowError::NotCanonical { row: self.id, column: "payload_json" });
        }
        if canonical_text(&provenance) != self.provenance_json {
            return Err(RowError::NotCanonical { row: self.id, column: "provenance_json" });
        }
        Ok(self.stored_text_hash(&mut String::new()))
    }
}

/// A record's columns, ready to insert: canonical texts and the row hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedRow {
    /// `ts_ms`.
    pub ts_ms: i64,
    /// `actor`.
    pub actor: String,
    /// `kind`.
    pub kind: EventKind,
    /// `scope`.
    pub scope: String,
    /// `payload_json`.
    pub payload_json: String,
    /// `provenance_json`.
    pub provenance_json: String,
    /// The trace the frame belongs to (from its provenance).
    pub trace_id: Uuid,
    /// The row hash (raw).
    pub hash: [u8; 32],
}

/// The deepest payload the ledger records or imports: tool data at its
/// deepest ([`MAX_DATA_DEPTH`]) inside the payload object.
pub(crate) const MAX_PAYLOAD_DEPTH: usize = MAX_DATA_DEPTH + 1;

/// Refuses a payload nested deeper than [`MAX_PAYLOAD_DEPTH`]: what the
/// ledger holds must read back whole (trace show, replay, export, import).
pub(crate) fn check_payload_depth(payload: &Value) -> Result<(), String> {
    let depth = json_depth(payload);
    if depth > MAX_PAYLOAD_DEPTH {
        return Err(format!(
            "the payload nests arrays and objects {depth} levels deep; the ledger holds at most {MAX_PAYLOAD_DEPTH} (tool data at most {MAX_DATA_DEPTH})"
        ));
    }
    Ok(())
}

impl PreparedRow {
    /// Canonicalizes a record and computes its row hash.
    pub fn from_record(record: &Record) -> Result<PreparedRow, String> {
        check_payload_depth(&record.payload)?;
        let provenance = serde_json::to_value(&record.provenance).map_err(|e| e.to_string())?;
        let payload_json = canonical_text(&record.payload);
        let provenance_json = canonical_text(&provenance);
        let hash = frame_hash(
            &mut String::new(),
            record.ts_ms,
            &record.actor,
            record.kind.as_str(),
            &record.scope,
            &payload_json,
            &provenance_json,
        );
        Ok(PreparedRow {
            ts_ms: record.ts_ms,
            actor: record.actor.clone(),
            kind: record.kind,
            scope: record.scope.clone(),
            payload_json,
            provenance_json,
            trace_id: record.provenance.trace_id,
            hash,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::hash::{GENESIS, chain_hash, to_hex};
    use serde_json::json;
    use uuid::Uuid;

    fn record() -> Record {
        Record {
            ts_ms: 1_764_000_000_000,
            actor: "runtime".into(),
            kind: EventKind::ToolCall,
            scope: "mailer".into(),
            payload: json!({"v": 1, "tool": "t", "args": {"b": 2, "a": [1.0, "é"]}}),
            provenance: Provenance { trace_id: Uuid::from_u128(1), msg_id: Uuid::from_u128(2), agent: "mailer".into() },
        }
    }

    #[test]
    fn payloads_are_canonical() {
        let row = PreparedRow::from_record(&record()).unwrap();
        assert_eq!(row.payload_json, r#"{"args":{"a":[1,"é"],"b":2},"tool":"t","v":1}"#);
        assert_eq!(
            row.provenance_json,
            r#"{"agent":"mailer","msg_id":"00000000-0000-0000-0000-000000000002","trace_id":"00000000-0000-0000-0000-000000000001"}"#
        );
    }

    #[test]
    fn row_hash_is_blake3_of_the_canonical_row() {
        let row = PreparedRow::from_record(&record()).unwrap();
        let preimage = format!(
            r#"{{"actor":"runtime","kind":"{}","payload":{},"provenance":{},"scope":"mailer","ts_ms":1764000000000}}"#,
            EventKind::ToolCall,
            row.payload_json,
            row.provenance_json
        );
        assert_eq!(row.hash, *blake3::hash(preimage.as_bytes()).as_bytes());
        let event = Event {
            id: 1,
            ts_ms: row.ts_ms,
            actor: row.actor.clone(),
            kind: row.kind.to_string(),
            scope: row.scope.clone(),
            payload_json: row.payload_json.clone(),
            provenance_json: row.provenance_json.clone(),
            hash_blake3: to_hex(&row.hash),
            chain_blake3: to_hex(&chain_hash(&GENESIS, &row.hash)),
            trace_seq: Some(1),
        };
        assert_eq!(event.computed_hash().unwrap(), row.hash);
        assert_eq!(event.check_hash(&mut String::new()).unwrap(), row.hash);
        let mut edited = event.clone();
        edited.payload_json = edited.payload_json.replace("\"b\":2", "\"b\":3");
        assert_ne!(edited.computed_hash().unwrap(), row.hash);
        let mut spaced = event;
        spaced.payload_json = spaced.payload_json.replace(',', ", ");
        assert!(matches!(spaced.computed_hash(), Err(RowError::NotCanonical { column: "payload_json", .. })));
    }
}
