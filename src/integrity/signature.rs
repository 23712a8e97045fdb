//! `SIGNATURES/manifest.sig`: a detached Ed25519 signature over the exact
//! bytes of manifest.toml.
//!
//! The file is four lines, each ended by `\n`, nothing else:
//!
//! ```text
//! rlp-signature v1
//! key-id <16 lower-case hex digits>
//! public-key ed25519:<base64 public key>
//! signature <base64 of the 64-byte signature>
//! ```
//!
//! The signed message is `b"rlp-bundle-manifest-v1\0"` followed by the
//! manifest's bytes (domain separation: a signature made for anything else
//! never verifies as a manifest signature). `key-id` must be the id of
//! `public-key`. Verification uses strict Ed25519 (`verify_strict`); there is
//! no algorithm negotiation. Carrying the public key lets a verifier tell a
//! damaged signature (exit 1) from a valid one by an unknown signer (exit 3);
//! trust comes only from the trust policy or `--key`, never from the file.

use std::path::Path;

use crate::bundle::manifest::SIGNATURES_DIR;
use crate::bundle::registry::Registries;
use crate::integrity::failure::{Failure, Reason};
use crate::integrity::keys::{KeyId, PublicKey, SecretKey, b64_decode_exact, b64_encode};

/// The signature file, relative to the bundle.
pub const SIGNATURE_FILE: &str = "SIGNATURES/manifest.sig";
/// The domain-separation prefix of the signed message.
pub const DOMAIN: &[u8] = b"rlp-bundle-manifest-v1\0";
/// The first line of a signature file.
const MAGIC: &str = "rlp-signature v1";
/// Largest signature file read.
pub const MAX_SIGNATURE_BYTES: u64 = 1024;

/// A parsed manifest signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestSignature {
    /// The signer's public key.
    pub public: PublicKey,
    /// The Ed25519 signature.
    pub signature: ed25519_dalek::Signature,
}

impl ManifestSignature {
    /// The signer's key id.
    pub fn key_id(&self) -> KeyId {
        self.public.key_id()
    }

    /// Signs manifest bytes.
    pub fn sign(key: &SecretKey, manifest: &[u8]) -> ManifestSignature {
        ManifestSignature { public: key.public(), signature: key.sign(&message(manifest)) }
    }

    /// The file text.
    pub fn render(&self) -> String {
        format!(
            "{MAGIC}\nkey-id {}\npublic-key {}\nsignature {}\n",
            self.key_id(),
            self.public,
            b64_encode(&self.signature.to_bytes())
        )
    }

    /// Parses the file strictly: exactly the four lines, in order.
    pub fn parse(bytes: &[u8]) -> Result<ManifestSignature, String> {
        if bytes.len() as u64 > MAX_SIGNATURE_BYTES {
            return Err(format!("it is larger than {MAX_SIGNATURE_BYTES} bytes"));
        }
        let text = std::str::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_string())?;
        let Some(body) = text.strip_suffix('\n') else {
            return Err("the last line does not end with a newline".into());
        };
        let lines: Vec<&str> = body.split('\n').collect();
        let [magic, key_id, public, signature] = lines.as_slice() else {
            return Err(format!("expected 4 lines, found {}", lines.len()));
        };
        if *magic != MAGIC {
            return Err(format!("line 1 must be `{MAGIC}`"));
        }
        let key_id = field(key_id, 2, "key-id")?.parse::<KeyId>().map_err(|e| format!("line 2: {e}"))?;
        let public = PublicKey::parse(field(public, 3, "public-key")?).map_err(|e| format!("line 3: {e}"))?;
        let signature =
            b64_decode_exact::<64>(field(signature, 4, "signature")?).map_err(|e| format!("line 4: {e}"))?;
        let signature = ed25519_dalek::Signature::from_bytes(&signature);
        if public.key_id() != key_id {
            return Err(format!("line 2: key id {key_id} is not the id of the public key on line 3"));
        }
        Ok(ManifestSignature { public, signature })
    }

    /// Checks the signature over manifest bytes (strict Ed25519).
    pub fn verify(&self, manifest: &[u8]) -> bool {
        self.public.verifying_key().verify_strict(&message(manifest), &self.signature).is_ok()
    }
}

/// The value of a `name value` line.
fn field<'a>(line: &'a str, n: usize, name: &str) -> Result<&'a str, String> {
    line.strip_prefix(name)
        .and_then(|rest| rest.strip_prefix(' '))
        .ok_or_else(|| format!("line {n} must be `{name} <value>`"))
}

/// The signed message: the domain prefix, then the manifest bytes.
pub fn message(manifest: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(DOMAIN.len() + manifest.len());
    out.extend_from_slice(DOMAIN);
    out.extend_from_slice(manifest);
    out
}

/// What `rlp sign` did.
#[derive(Debug)]
pub struct Signed {
    /// The signature written.
    pub signature: ManifestSignature,
    /// Where it was written.
    pub path: std::path::PathBuf,
}

/// Signs a bundle folder: refuses stale digests, then writes
/// `SIGNATURES/manifest.sig` atomically over the exact manifest bytes
/// checked. Shared schemas are found in `registries`.
pub fn sign_bundle(dir: &Path, key: &SecretKey, registries: &Registries) -> Result<Signed, Failure> {
    let plan = crate::integrity::ready::check_ready(dir, "sign", registries)?;
    let signatures = dir.join(SIGNATURES_DIR);
    match std::fs::symlink_metadata(&signatures) {
        Ok(meta) if !meta.file_type().is_dir() => {
            return Err(Failure::new(Reason::NotRegular, format!("{} is not a folder", signatures.display()))
                .with_help("remove it; `rlp sign` creates SIGNATURES/ itself"));
        }
        Ok(_) => {
            let entries = std::fs::read_dir(&signatures).map_err(|e| Failure::io(&signatures, &e))?;
            if let Some(extra) = entries.filter_map(Result::ok).find(|e| e.path() != dir.join(SIGNATURE_FILE)) {
                let name = format!("{SIGNATURES_DIR}/{}", extra.file_name().to_string_lossy());
                return Err(Failure::new(
                    Reason::FileSet,
                    format!("`{name}` is not part of a bundle: {SIGNATURES_DIR}/ holds only manifest.sig"),
                )
                .with_help(format!("remove `{name}`; `rlp bundle verify` would refuse the bundle with it")));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir(&signatures).map_err(|e| Failure::io(&signatures, &e))?;
        }
        Err(e) => return Err(Failure::io(&signatures, &e)),
    }
    let signature = ManifestSignature::sign(key, plan.before.as_bytes());
    let path = dir.join(SIGNATURE_FILE);
    if std::fs::symlink_metadata(&path).is_ok_and(|m| !m.file_type().is_file()) {
        return Err(Failure::new(Reason::NotRegular, format!("{} is not a regular file", path.display()))
            .with_help("remove it and sign again"));
    }
    crate::fsutil::write_atomic(&path, signature.render().as_bytes(), Some(0o644))
        .map_err(|e| Failure::io(&path, &e))?;
    Ok(Signed { signature, path })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_parses_and_verifies_strictly() {
        let key = SecretKey::from_seed(&[3; 32]);
        let sig = ManifestSignature::sign(&key, b"[agent]\n");
        let text = sig.render();
        let parsed = ManifestSignature::parse(text.as_bytes()).unwrap();
        assert_eq!(parsed, sig);
        assert!(parsed.verify(b"[agent]\n"));
        assert!(!parsed.verify(b"[agent]\n\n"));
        // Without the domain prefix the same key's signature does not verify.
        let raw = ManifestSignature { public: key.public(), signature: key.sign(b"[agent]\n") };
        assert!(!raw.verify(b"[agent]\n"));
        for bad in [
            text.replace("v1", "v2"),
            text.trim_end().to_string(),
            format!("{text}\n"),
            text.replace("key-id ", "key-id  "),
            text.replace('\n', "\r\n"),
        ] {
            assert!(ManifestSignature::parse(bad.as_bytes()).is_err(), "{bad:?}");
        }
        let other = SecretKey::from_seed(&[4; 32]).public();
        let swapped = text.replace(&key.public().key_id().to_string(), &other.key_id().to_string());
        assert!(ManifestSignature::parse(swapped.as_bytes()).unwrap_err().contains("key id"));
    }
}
