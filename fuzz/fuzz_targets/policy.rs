//! Fuzzes the policy.caps reader, and the effective policy built from it.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rlp::bundle::policy::Policy;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (grants, _findings) = rlp::bundle::parse_policy(text);
    if let Some(grants) = grants {
        let bundle = Policy::from_bundle(&grants);
        let over = Policy::from_override(&grants);
        let effective = bundle.intersect(&over);
        for cap in effective.capabilities() {
            assert!(bundle.allows(&cap), "intersection granted {cap} that the bundle policy does not");
        }
    }
});
