//! What the store holds once decrypted: a JSON document of entries.
//!
//! ```json
//! {"v": 1, "secrets": {"runloop/mail/key": {"value": "…", "changed_ms": 1764000000000}}}
//! ```
//!
//! Buffers that hold values are wiped when dropped.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

use crate::bundle::capability::SecretId;
use crate::secrets::SecretValue;

/// The version of the document.
const VERSION: u32 = 1;

/// One secret of the store.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The value.
    pub value: SecretValue,
    /// When it was last set, in milliseconds since the Unix epoch.
    pub changed_ms: i64,
}

/// Every secret of the store, by id.
#[derive(Clone, Debug, Default)]
pub struct Contents {
    /// The entries, sorted by id.
    pub entries: BTreeMap<SecretId, Entry>,
}

/// An entry as read: wiped when dropped.
#[derive(Deserialize, Zeroize, ZeroizeOnDrop)]
#[serde(deny_unknown_fields)]
struct StoredEntry {
    value: String,
    changed_ms: i64,
}

/// The document as read.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    v: u32,
    secrets: BTreeMap<String, StoredEntry>,
}

/// An entry as written, borrowing its value.
#[derive(Serialize)]
struct EntryOut<'a> {
    value: &'a str,
    changed_ms: i64,
}

/// The document as written.
#[derive(Serialize)]
struct Out<'a> {
    v: u32,
    secrets: BTreeMap<&'a str, EntryOut<'a>>,
}

impl Contents {
    /// Reads a decrypted document; the error says what is wrong with it
    /// (never quoting a value).
    pub fn parse(plain: &[u8]) -> Result<Contents, String> {
        let stored: Stored = serde_json::from_slice(plain).map_err(|e| {
            // serde's message can quote what it found: only its position is kept.
            format!("its content is not a store document (line {}, column {})", e.line(), e.column())
        })?;
        if stored.v != VERSION {
            return Err(format!("it is version {} of the store format; this rlp reads version {VERSION}", stored.v));
        }
        let mut entries = BTreeMap::new();
        for (id, entry) in &stored.secrets {
            let id: SecretId =
                id.parse().map_err(|_| format!("it holds an entry named {id:?}, which is not a secret id"))?;
            if entry.value.is_empty() {
                // rlp never stores one: an empty value would reach a tool as "no secret".
                return Err(format!("it holds an empty value for `{id}`"));
            }
            entries.insert(id, Entry { value: SecretValue::new(entry.value.as_str()), changed_ms: entry.changed_ms });
        }
        Ok(Contents { entries })
    }

    /// The document, in a buffer wiped when dropped.
    pub fn to_bytes(&self) -> Zeroizing<Vec<u8>> {
        let out = Out {
            v: VERSION,
            secrets: self
                .entries
                .iter()
                .map(|(id, e)| (id.as_str(), EntryOut { value: e.value.expose(), changed_ms: e.changed_ms }))
                .collect(),
        };
        // Room for every value escaped at its longest, so the buffer never
        // grows (a grown buffer leaves an unwiped copy behind).
        let room: usize = self.entries.iter().map(|(id, e)| id.as_str().len() + 6 * e.value.expose().len() + 64).sum();
        let mut bytes = Zeroizing::new(Vec::with_capacity(room + 32));
        // Writing to a Vec cannot fail, nor can serialising strings and numbers.
        let _ = serde_json::to_writer(&mut *bytes, &out);
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_damage() {
        let mut contents = Contents::default();
        let id: SecretId = "runloop/mail/key".parse().unwrap();
        contents.entries.insert(id.clone(), Entry { value: SecretValue::new("a\"b\\c/é"), changed_ms: 7 });
        let bytes = contents.to_bytes();
        assert_eq!(
            std::str::from_utf8(&bytes).unwrap(),
            r#"{"v":1,"secrets":{"runloop/mail/key":{"value":"a\"b\\c/é","changed_ms":7}}}"#
        );
        let back = Contents::parse(&bytes).unwrap();
        assert_eq!(back.entries[&id].value.expose(), "a\"b\\c/é");
        for (text, why) in [
            (
                r#"{"v":1,"secrets":{"runloop/mail/key":{"value":"hunter2"}}"#,
                "its content is not a store document (line 1, column 56)",
            ),
            (r#"{"v":2,"secrets":{}}"#, "it is version 2 of the store format; this rlp reads version 1"),
            (
                r#"{"v":1,"secrets":{"../x":{"value":"v","changed_ms":1}}}"#,
                "it holds an entry named \"../x\", which is not a secret id",
            ),
            (
                r#"{"v":1,"secrets":{"runloop/a/b":{"value":"","changed_ms":1}}}"#,
                "it holds an empty value for `runloop/a/b`",
            ),
        ] {
            let e = Contents::parse(text.as_bytes()).unwrap_err();
            assert_eq!(e, why);
            assert!(!e.contains("hunter2"));
        }
    }
}
