//! Fuzzes the bundle archive reader: any bytes must be read or refused with
//! an error, within the limits, never panic or hang. What the reader accepts
//! then goes through the verification checks as well.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rlp::integrity::trust::TrustPolicy;
use rlp::integrity::verify::{self, Options, Trust};
use rlp::pack::reader::{Limits, scan_archive};

fuzz_target!(|data: &[u8]| {
    // Small limits keep every run fast; the checks are the same.
    let limits = Limits {
        max_entries: 64,
        max_file_bytes: 1 << 20,
        max_total_bytes: 4 << 20,
        max_ratio: 64,
        ratio_floor: 1 << 20,
    };
    if let Ok(evidence) = scan_archive(data, &limits) {
        let policy = TrustPolicy::default();
        let _ = verify::check(&evidence, &Options { trust: Trust::Policy(&policy), require_signature: false });
    }
});
