//! The frame hash and the hash chain (also in docs/runtime.md).
//!
//! - `hash_blake3` = hex(BLAKE3(JCS({"actor", "kind", "payload",
//!   "provenance", "scope", "ts_ms"}))): the frame's columns except `id` and
//!   the two hashes, with `payload` and `provenance` as JSON values. As both
//!   are stored in canonical form, the preimage is written straight from the
//!   stored texts ([`frame_hash`]).
//! - `chain_blake3` = hex(BLAKE3(prev || row)), where `row` is the 32 raw
//!   bytes of this frame's hash and `prev` the 32 raw bytes of the previous
//!   frame's chain value ([`GENESIS`] before the first).

use crate::event::canonical::{push_json_integer, push_json_string};

/// The chain value before the first frame.
pub(crate) const GENESIS: [u8; 32] = [0; 32];

/// The frame hash: BLAKE3 of
/// `{"actor":…,"kind":…,"payload":<payload_json>,"provenance":<provenance_json>,"scope":…,"ts_ms":…}`.
///
/// This is the RFC 8785 form of the frame when both texts are canonical (as
/// the ledger stores them); a text that is not canonical gives another hash,
/// which is how an edit that only re-formats a payload is noticed. `buf` is
/// scratch space, reused between calls.
pub(crate) fn frame_hash(
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

/// The chain value after a frame: BLAKE3(prev || row).
pub(crate) fn chain_hash(prev: &[u8; 32], row: &[u8; 32]) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new();
    hasher.update(prev);
    hasher.update(row);
    *hasher.finalize().as_bytes()
}

/// Lower-case hex of 32 bytes.
pub(crate) fn to_hex(bytes: &[u8; 32]) -> String {
    blake3::Hash::from_bytes(*bytes).to_hex().to_string()
}

/// Parses 64 hex digits.
pub(crate) fn from_hex(text: &str) -> Option<[u8; 32]> {
    blake3::Hash::from_hex(text).ok().map(|h| *h.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventKind;
    use crate::event::canonical::canonical_text;
    use serde_json::json;

    #[test]
    fn the_preimage_is_the_canonical_frame() {
        let payload = json!({"v": 1, "args": {"b": [1.5, "x\u{1}"], "a": null}});
        let provenance = json!({"trace_id": "t", "msg_id": "m", "agent": "a\"b"});
        let kind = EventKind::ToolCall.as_str();
        let mut buf = String::new();
        for ts in [0, 1_764_000_000_000, -5, i64::MAX, i64::MIN, 1 << 53, (1 << 53) + 1] {
            let whole = json!({"actor": "tool:x\n", "kind": kind, "payload": payload, "provenance": provenance,
                               "scope": "sc\\ope", "ts_ms": ts});
            let expected = *blake3::hash(canonical_text(&whole).as_bytes()).as_bytes();
            let got = frame_hash(
                &mut buf,
                ts,
                "tool:x\n",
                kind,
                "sc\\ope",
                &canonical_text(&payload),
                &canonical_text(&provenance),
            );
            assert_eq!(got, expected, "ts {ts}");
        }
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
