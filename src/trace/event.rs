//! Ledger rows: canonical payloads, the row hash and the hash chain.
//!
//! Definitions (also in docs/runtime.md):
//!
//! - `payload_json` and `provenance_json` are RFC 8785 (JCS) canonical JSON.
//! - `hash_blake3` = hex(BLAKE3(JCS({"actor", "kind", "payload", "provenance",
//!   "scope", "ts_ms"}))), the object holding the row's columns except `id` and
//!   the two hashes, with `payload` and `provenance` as JSON values (not strings).
//! - `chain_blake3` = hex(BLAKE3(prev || row)), where `row` is the 32 raw
//!   bytes of this row's hash and `prev` the 32 raw bytes of the previous
//!   row's `chain_blake3` (32 zero bytes for the first row).

use serde_json::{Value, json};

use crate::bundle::value::{MAX_DATA_DEPTH, json_depth};
use crate::runtime::recorder::{Provenance, Record};
use crate::trace::frame::frame_hash;

/// The chain value before the first row.
pub const GENESIS: [u8; 32] = [0; 32];

/// One stored row of the `events` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Row id (ascending in append order).
    pub id: i64,
    /// Milliseconds since the Unix epoch.
    pub ts_ms: i64,
    /// Who produced the event.
    pub actor: String,
    /// The kind, e.g. `tool.call`.
    pub kind: String,
    /// The scope (agent name).
    pub scope: String,
    /// The payload, RFC 8785 canonical JSON.
    pub payload_json: String,
    /// The provenance `{trace_id, msg_id, agent}`, RFC 8785 canonical JSON.
    pub provenance_json: String,
    /// Hex BLAKE3 of the row (see the module documentation).
    pub hash_blake3: String,
    /// Hex BLAKE3 chain value.
    pub chain_blake3: String,
}

impl Event {
    /// The payload as a JSON value.
    pub fn payload(&self) -> Result<Value, String> {
        serde_json::from_str(&self.payload_json).map_err(|e| format!("event {}: payload is not JSON: {e}", self.id))
    }

    /// The provenance.
    pub fn provenance(&self) -> Result<Provenance, String> {
        serde_json::from_str(&self.provenance_json)
            .map_err(|e| format!("event {}: provenance is not valid: {e}", self.id))
    }

    /// Checks the row against its stored `hash_blake3`, as export, show and
    /// replay do for each row they read: the hash is recomputed from the
    /// stored texts with [`frame_hash`] (one BLAKE3 pass, no JSON parsing;
    /// `scratch` is reused between rows). Returns the hash, or what is wrong.
    pub fn check_hash(&self, scratch: &mut String) -> Result<[u8; 32], String> {
        let hash = frame_hash(
            scratch,
            self.ts_ms,
            &self.actor,
            &self.kind,
            &self.scope,
            &self.payload_json,
            &self.provenance_json,
        );
        if from_hex(&self.hash_blake3) != Some(hash) {
            return Err("the row does not match its hash_blake3: the ledger was edited".into());
        }
        Ok(hash)
    }

    /// Recomputes this row's hash from its columns; an error when the stored
    /// JSON is not canonical (and so cannot have been hashed as stored).
    pub fn computed_hash(&self) -> Result<[u8; 32], String> {
        let payload = self.payload()?;
        let provenance: Value = serde_json::from_str(&self.provenance_json)
            .map_err(|e| format!("event {}: provenance is not JSON: {e}", self.id))?;
        if canonical_json(&payload)? != self.payload_json {
            return Err(format!("event {}: payload_json is not in canonical form", self.id));
        }
        if canonical_json(&provenance)? != self.provenance_json {
            return Err(format!("event {}: provenance_json is not in canonical form", self.id));
        }
        row_hash(self.ts_ms, &self.actor, &self.kind, &self.scope, &payload, &provenance)
    }
}

/// RFC 8785 canonical JSON text of a value.
pub fn canonical_json(value: &Value) -> Result<String, String> {
    serde_json_canonicalizer::to_string(value).map_err(|e| format!("cannot canonicalize JSON: {e}"))
}

/// The row hash over the columns except `id` and the hashes.
pub fn row_hash(
    ts_ms: i64,
    actor: &str,
    kind: &str,
    scope: &str,
    payload: &Value,
    provenance: &Value,
) -> Result<[u8; 32], String> {
    let preimage = json!({
        "actor": actor,
        "kind": kind,
        "payload": payload,
        "provenance": provenance,
        "scope": scope,
        "ts_ms": ts_ms,
    });
    let bytes = serde_json_canonicalizer::to_vec(&preimage).map_err(|e| format!("cannot canonicalize JSON: {e}"))?;
    Ok(*blake3::hash(&bytes).as_bytes())
}

/// The chain value after a row: BLAKE3(prev || row).
pub fn chain_hash(prev: &[u8; 32], row: &[u8; 32]) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new();
    hasher.update(prev);
    hasher.update(row);
    *hasher.finalize().as_bytes()
}

/// Lower-case hex of 32 bytes.
pub fn to_hex(bytes: &[u8; 32]) -> String {
    blake3::Hash::from_bytes(*bytes).to_hex().to_string()
}

/// Parses 64 hex digits.
pub fn from_hex(text: &str) -> Option<[u8; 32]> {
    blake3::Hash::from_hex(text).ok().map(|h| *h.as_bytes())
}

/// A record's columns, ready to insert: canonical texts and the row hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedRow {
    /// `ts_ms`.
    pub ts_ms: i64,
    /// `actor`.
    pub actor: String,
    /// `kind`.
    pub kind: String,
    /// `scope`.
    pub scope: String,
    /// `payload_json`.
    pub payload_json: String,
    /// `provenance_json`.
    pub provenance_json: String,
    /// The row hash (raw).
    pub hash: [u8; 32],
}

/// The deepest payload the ledger records or imports: tool data at its
/// deepest ([`MAX_DATA_DEPTH`]) inside the payload object.
pub const MAX_PAYLOAD_DEPTH: usize = MAX_DATA_DEPTH + 1;

/// Refuses a payload nested deeper than [`MAX_PAYLOAD_DEPTH`]: what the
/// ledger holds must read back whole (trace show, replay, export, import).
pub fn check_payload_depth(payload: &Value) -> Result<(), String> {
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
        let hash = row_hash(record.ts_ms, &record.actor, &record.kind, &record.scope, &record.payload, &provenance)?;
        Ok(PreparedRow {
            ts_ms: record.ts_ms,
            actor: record.actor.clone(),
            kind: record.kind.clone(),
            scope: record.scope.clone(),
            payload_json: canonical_json(&record.payload)?,
            provenance_json: canonical_json(&provenance)?,
            hash,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn record() -> Record {
        Record {
            ts_ms: 1_764_000_000_000,
            actor: "runtime".into(),
            kind: "tool.call".into(),
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
            r#"{{"actor":"runtime","kind":"tool.call","payload":{},"provenance":{},"scope":"mailer","ts_ms":1764000000000}}"#,
            row.payload_json, row.provenance_json
        );
        assert_eq!(row.hash, *blake3::hash(preimage.as_bytes()).as_bytes());
        let event = Event {
            id: 1,
            ts_ms: row.ts_ms,
            actor: row.actor.clone(),
            kind: row.kind.clone(),
            scope: row.scope.clone(),
            payload_json: row.payload_json.clone(),
            provenance_json: row.provenance_json.clone(),
            hash_blake3: to_hex(&row.hash),
            chain_blake3: to_hex(&chain_hash(&GENESIS, &row.hash)),
        };
        assert_eq!(event.computed_hash().unwrap(), row.hash);
        let mut edited = event.clone();
        edited.payload_json = edited.payload_json.replace("\"b\":2", "\"b\":3");
        assert_ne!(edited.computed_hash().unwrap(), row.hash);
        let mut spaced = event;
        spaced.payload_json = spaced.payload_json.replace(',', ", ");
        assert!(spaced.computed_hash().unwrap_err().contains("canonical"));
    }

    #[test]
    fn chain_depends_on_order() {
        let a = [1u8; 32];
        let b = [2u8; 32];
        let ab = chain_hash(&chain_hash(&GENESIS, &a), &b);
        let ba = chain_hash(&chain_hash(&GENESIS, &b), &a);
        assert_ne!(ab, ba);
        assert_eq!(from_hex(&to_hex(&ab)), Some(ab));
        assert_eq!(from_hex("zz"), None);
    }
}
