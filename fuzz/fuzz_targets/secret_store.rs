//! Fuzzes the secret store's document (`$RUNLOOP_HOME/secrets/store.age`
//! once decrypted): any bytes are read or refused without a panic, a
//! refusal is in the reader's own words (a position, a version, an id; never
//! the document's text, which may hold values), and what is read
//! writes back to a document that reads as the same entries.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rlp::secrets::store::Contents;

fuzz_target!(|data: &[u8]| {
    let contents = match Contents::parse(data) {
        Ok(contents) => contents,
        Err(why) => {
            // Only the reader's own words: a position, a version, an id —
            // never the document's text, which may hold values.
            let own = [
                "its content is not a store document (line ",
                "it is version ",
                "it holds an entry named ",
                "it holds an empty value for ",
            ];
            assert!(own.iter().any(|start| why.starts_with(start)), "{why}");
            return;
        }
    };
    let written = contents.to_bytes();
    let again = Contents::parse(&written).expect("a written document reads back");
    assert_eq!(again.entries.len(), contents.entries.len());
    for ((id, entry), (id_again, entry_again)) in contents.entries.iter().zip(&again.entries) {
        assert_eq!(id, id_again);
        assert_eq!(entry.value.expose(), entry_again.value.expose());
        assert_eq!(entry.changed_ms, entry_again.changed_ms);
    }
});
