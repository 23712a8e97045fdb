//! Fuzzes the bundle archive reader: any bytes must be read or refused with
//! an error, within the limits, never panic or hang. What the reader accepts
//! then goes through the verification checks as well. The default
//! verification (content only, chunks inflated in parallel) must agree with
//! the sequential content reader, and accept whatever the canonical reader
//! accepts.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rlp::integrity::trust::TrustPolicy;
use rlp::integrity::verify::{self, Options, Trust};
use rlp::pack::reader::{Discard, Encoding, Limits, read_archive_content, scan_archive, verify_archive};

fuzz_target!(|data: &[u8]| {
    // Small limits keep every run fast; the checks are the same.
    let limits = Limits {
        max_entries: 64,
        max_file_bytes: 1 << 20,
        max_total_bytes: 4 << 20,
        max_ratio: 64,
        ratio_floor: 1 << 20,
    };
    let canonical = scan_archive(data, &limits);
    let parallel = verify_archive(std::io::Cursor::new(data), &limits, Encoding::Content);
    let sequential = read_archive_content(data, &limits, &mut Discard);
    match (&parallel, &sequential) {
        (Ok(p), Ok(s)) => {
            assert!(p.manifest_bytes == s.manifest_bytes && p.files == s.files && p.signature == s.signature)
        }
        (Err(p), Err(s)) => assert_eq!(p.message, s.message),
        _ => panic!("parallel {:?} but sequential {:?}", parallel.is_ok(), sequential.is_ok()),
    }
    assert!(canonical.is_err() || parallel.is_ok());
    if let Ok(evidence) = canonical {
        let policy = TrustPolicy::default();
        let _ = verify::check(
            &evidence,
            &Options { trust: Trust::Policy(&policy), require_signature: false, registries: None },
        );
    }
});
