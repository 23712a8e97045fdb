//! Fuzzes what rlp reads of a registry: `oci://` references (typed by the
//! user) and the manifests a registry answers with (hostile). Neither may
//! panic; an accepted reference prints back as itself (lowercase host) and
//! parses again to the same value; a refused one never quotes what stands
//! before an `@` in its host (credentials); an accepted manifest is an rlp
//! bundle of exactly one layer whose size is within the limit.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rlp::oci::artifact::{ARTIFACT_TYPE, MAX_LAYER_BYTES, bundle_layer};
use rlp::oci::reference::OciReference;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        match OciReference::parse(text) {
            Ok(reference) => {
                let printed = reference.to_string();
                assert_eq!(OciReference::parse(&printed).unwrap(), reference);
                assert!(printed.eq_ignore_ascii_case(text) || printed.len() == text.len());
            }
            Err(failure) => {
                let rest = text.strip_prefix("oci://").unwrap_or(text);
                let host = rest.split('/').next().unwrap_or(rest);
                if let Some((userinfo, _)) = host.rsplit_once('@')
                    && userinfo.len() >= 6
                {
                    assert!(!failure.message.contains(userinfo), "{:?}", failure.message);
                }
            }
        }
    }
    if let Ok(layer) = bundle_layer(data, "oci://fuzz/x:y") {
        assert!((1..=MAX_LAYER_BYTES).contains(&layer.size));
        let manifest: serde_json::Value = serde_json::from_slice(data).unwrap();
        let kind = manifest.get("artifactType").or_else(|| manifest.get("config")?.get("mediaType"));
        assert_eq!(kind.and_then(|k| k.as_str()), Some(ARTIFACT_TYPE));
    }
});
