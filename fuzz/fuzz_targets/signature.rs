//! Fuzzes the `SIGNATURES/manifest.sig` reader bundle verification uses, on
//! any bytes. A file it accepts must be written back byte for byte (the
//! format has one spelling, so there is nothing it may normalise), and
//! checking it against a signed manifest must not panic; only the key that
//! really signed that manifest may verify.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rlp::integrity::signature::ManifestSignature;

/// A manifest.toml signed by `rlp sign` (the seeds `release.sig` and
/// `dev.sig` are its signatures).
const MANIFEST: &[u8] = include_bytes!("signed_manifest.toml");
/// The public keys of those two signatures.
const SIGNERS: [&str; 2] =
    ["ed25519:QrAB9KrRkP1+OpkTfjHttwIi7EAL4Ex23tlcb9mGX0g=", "ed25519:CZPX1s7rIILbvCiat5a7he0saTLc1oO5N2Jie4UD1Ys="];

fuzz_target!(|data: &[u8]| {
    let Ok(signature) = ManifestSignature::parse(data) else { return };
    let rendered = signature.render();
    assert_eq!(rendered.as_bytes(), data, "a signature file that parses is not written back as it was");
    assert_eq!(ManifestSignature::parse(rendered.as_bytes()).as_ref(), Ok(&signature));
    if signature.verify(MANIFEST) {
        assert!(SIGNERS.contains(&signature.public.to_string().as_str()), "{} verifies", signature.public);
    }
});
