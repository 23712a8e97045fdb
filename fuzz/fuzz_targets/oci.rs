//! Fuzzes what rlp reads of a registry: `oci://` references (typed by the
//! user) and the manifests a registry answers with (hostile). Neither may
//! panic; an accepted reference prints back as itself (lowercase host) and
//! parses again to the same value; a refused one never quotes what may be
//! credentials (everything before its last `@` that does not start a
//! digest); an accepted manifest is an rlp bundle of exactly one layer
//! whose size is within the limit.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rlp::oci::artifact::{ARTIFACT_TYPE, MAX_LAYER_BYTES, bundle_layer};
use rlp::oci::reference::{OciReference, userinfo_end};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        match OciReference::parse(text) {
            Ok(reference) => {
                let printed = reference.to_string();
                assert_eq!(OciReference::parse(&printed).unwrap(), reference);
                assert!(printed.eq_ignore_ascii_case(text));
            }
            Err(failure) => {
                let rest = text.strip_prefix("oci://").unwrap_or(text);
                if let Some(at) = userinfo_end(rest) {
                    let userinfo = &rest[..at];
                    // Long enough to tell apart, and found nowhere else in the
                    // text; rlp's own words may hold the same letters, so the
                    // message for the same text with other credentials of
                    // that length must hold them too.
                    if userinfo.len() >= 6 && text.matches(userinfo).count() == 1 {
                        let other = text.replacen(userinfo, &"Z".repeat(userinfo.len()), 1);
                        let own_words = OciReference::parse(&other).err().is_some_and(|f| f.message.contains(userinfo));
                        assert!(!failure.message.contains(userinfo) || own_words, "{:?}", failure.message);
                    }
                }
            }
        }
    }
    if let Ok(layer) = bundle_layer(data, "oci://fuzz/x:y") {
        assert!((1..=MAX_LAYER_BYTES).contains(&layer.size));
        // (A field rlp does not read may hold what a JSON value cannot, such
        // as a lone surrogate escape; the reader skips it unread.)
        if let Ok(manifest) = serde_json::from_slice::<serde_json::Value>(data) {
            let kind = manifest.get("artifactType").or_else(|| manifest.get("config")?.get("mediaType"));
            assert_eq!(kind.and_then(|k| k.as_str()), Some(ARTIFACT_TYPE));
        }
    }
});
