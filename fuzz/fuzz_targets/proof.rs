//! Fuzzes inclusion proofs (`rlp trace verify --proof`): any bytes are read
//! and checked, or refused, without a panic; and a proof that holds must be
//! signed by the trusted key — mutations of a real proof never hold unless
//! they leave what is signed and proven intact.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rlp::integrity::keys::SecretKey;
use rlp::ledger::proof::{InclusionProof, check_export_hashes, check_proof};

fuzz_target!(|data: &[u8]| {
    let Ok(proof) = serde_json::from_slice::<InclusionProof>(data) else { return };
    let trusted = [SecretKey::from_seed(&[7; 32]).public()];
    if let Ok(proven) = check_proof(&proof, &trusted) {
        // Only the trusted key's checkpoints hold, and they cover what they say.
        assert_eq!(proven.frames, proof.frame_hashes.len() as u64);
        assert!(proven.frame.is_none_or(|n| n >= 1 && n <= proven.frames));
    }
    // An export of any length is compared without a panic.
    let export: Vec<[u8; 32]> = proof.frame_hashes.iter().take(3).map(|_| [0u8; 32]).collect();
    let _ = check_export_hashes(&proof, &export);
});
