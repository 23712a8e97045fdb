//! Fuzzes the manifest.toml reader: any UTF-8 text must load or be reported,
//! never panic or hang.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (_manifest, _findings) = rlp::bundle::parse_manifest(text);
});
