//! Trust verdicts kept between processes, so that `rlp tools call` on an
//! installed bundle does not hash the whole bundle again when nothing
//! changed since the last call.
//!
//! One small file per bundle in `$RUNLOOP_HOME/cache/trust/`, named after
//! the bundle's path, holding only a *successful* verdict (with the BLAKE3
//! of the manifest.toml verified) and the key it was
//! reached on: the BLAKE3 of the bundle's path and of the fingerprint of
//! every bundle file and of the trust policy (see
//! [`crate::runtime::trust_gate`]). Any change to the bundle or the policy
//! changes the key, and the bundle is verified again. A refusal is never
//! cached. A file that does not parse is ignored.
//!
//! The cache is as trustworthy as the home that holds it: whoever can write
//! it can also write the trust policy.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::bundle::manifest::Digest;
use crate::home::Home;
use crate::integrity::keys::KeyId;
use crate::integrity::trust::is_valid_anchor_name;
use crate::integrity::verify::Signer;
use crate::runtime::trust_gate::{Admission, Checked};

/// The first line of a cache file.
const MAGIC: &str = "rlp-trust-cache v2";
/// Largest cache file read.
const MAX_CACHE_BYTES: u64 = 1024;

/// The persisted verdict of one bundle.
#[derive(Debug)]
pub(crate) struct TrustCache {
    file: PathBuf,
}

/// What a verdict was reached on: the bundle's path and its fingerprint.
pub(crate) fn cache_key(root: &Path, fingerprint: &[u64]) -> blake3::Hash {
    let mut hasher = blake3::Hasher::new();
    hasher.update(root.as_os_str().as_encoded_bytes());
    hasher.update(&[0]);
    for value in fingerprint {
        hasher.update(&value.to_le_bytes());
    }
    hasher.finalize()
}

impl TrustCache {
    /// The cache of the bundle at `root` in `home`.
    pub(crate) fn new(home: &Home, root: &Path) -> TrustCache {
        let name = blake3::hash(root.as_os_str().as_encoded_bytes()).to_hex();
        TrustCache { file: home.root().join("cache").join("trust").join(&name[..32]) }
    }

    /// The verdict stored for `key`, if there is one.
    pub(crate) fn load(&self, key: &blake3::Hash) -> Option<Admission> {
        let bytes = crate::fsutil::read_limited(&self.file, MAX_CACHE_BYTES).ok()?;
        let text = std::str::from_utf8(&bytes).ok()?;
        let [checked, signer, manifest] = crate::kept::verdict_lines(text, MAGIC, key)?;
        let checked = match checked {
            "checked installed" => Checked::Installed,
            "checked signed" => Checked::Signed,
            _ => return None,
        };
        let signer = match signer.strip_prefix("signer ")? {
            "-" => None,
            text => {
                let (key_id, anchor) = text.split_once(' ')?;
                let key_id = key_id.parse::<KeyId>().ok()?;
                let anchor = match anchor {
                    "-" => None,
                    name if is_valid_anchor_name(name) => Some(name.to_string()),
                    _ => return None,
                };
                Some(Signer { key_id, anchor })
            }
        };
        // A signed working folder is never verified without a signer.
        if checked == Checked::Signed && signer.is_none() {
            return None;
        }
        let manifest = manifest.strip_prefix("manifest ")?.parse::<Digest>().ok()?;
        Some(Admission::Verified { checked, signer, manifest })
    }

    /// Stores a verdict for `key`; a cache that cannot be written is no
    /// error (the next call verifies again).
    pub(crate) fn store(&self, key: &blake3::Hash, admission: &Admission) {
        let Admission::Verified { checked, signer, manifest } = admission else { return };
        let checked = match checked {
            Checked::Installed => "installed",
            Checked::Signed => "signed",
        };
        let signer = match signer {
            None => "-".to_string(),
            Some(Signer { key_id, anchor }) => format!("{key_id} {}", anchor.as_deref().unwrap_or("-")),
        };
        let lines = [format!("checked {checked}"), format!("signer {signer}"), format!("manifest {manifest}")];
        let text = crate::kept::render(MAGIC, key, &lines.each_ref().map(String::as_str));
        let _ = self.write(text.as_bytes());
    }

    fn write(&self, bytes: &[u8]) -> std::io::Result<()> {
        let dir = self.file.parent().unwrap_or(Path::new("."));
        crate::fsutil::create_private_dir_all(dir)?;
        let (mut temp, _tracked) = crate::interrupt::temp_file_in(dir, ".rlp-trust-")?;
        temp.write_all(bytes)?;
        temp.persist(&self.file).map_err(|e| e.error)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    #[test]
    fn a_verdict_is_read_back_only_for_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path());
        let cache = TrustCache::new(&home, Path::new("/agents/mailer"));
        let key = cache_key(Path::new("/agents/mailer"), &[1, 2, 3]);
        let other = cache_key(Path::new("/agents/mailer"), &[1, 2, 4]);
        assert_ne!(key, other);
        assert_eq!(cache.load(&key), None);
        let signer = Signer { key_id: KeyId([0xab; 8]), anchor: Some("release".into()) };
        let manifest = Digest([0x5a; 32]);
        let admission = Admission::Verified { checked: Checked::Installed, signer: Some(signer), manifest };
        cache.store(&key, &admission);
        assert_eq!(cache.load(&key), Some(admission));
        assert_eq!(cache.load(&other), None);
        // Refusals and unchecked folders are never stored; damage is ignored.
        cache.store(&other, &Admission::Unchecked);
        assert_eq!(cache.load(&other), None);
        let text = fs::read_to_string(&cache.file).unwrap();
        fs::write(
            &cache.file,
            text.replace("checked installed", "checked signed").replace("abababababababab release", "-"),
        )
        .unwrap();
        assert_eq!(cache.load(&key), None, "a signed folder without a signer");
        fs::write(&cache.file, text.replace("abababababababab", "ABABABABABABABAB")).unwrap();
        assert_eq!(cache.load(&key), None);
    }
}
