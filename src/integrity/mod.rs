//! Integrity: manifest digests, Ed25519 keys and signatures, the trust policy.

pub mod digest;
