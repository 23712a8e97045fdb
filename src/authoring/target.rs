//! The bundle an authoring command edits: its folder, name and policy file.

use std::path::{Path, PathBuf};

use crate::authoring::AuthoringError;
use crate::bundle::manifest::{MANIFEST_FILE, is_valid_artifact_path};

/// A bundle folder open for editing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BundleTarget {
    /// The folder, as named on the command line.
    pub dir: PathBuf,
    /// `[agent].name`, else the folder name.
    pub name: String,
    /// The policy file (`[caps].file`, default `policy.caps`).
    pub caps_path: PathBuf,
}

impl BundleTarget {
    /// Opens `dir`: it must hold a manifest.toml whose digests `rlp digest`
    /// can rewrite. The temporary files that an edit of the bundle killed
    /// outright left in it are removed first (they are no bundle files).
    pub(crate) fn open(dir: &Path) -> Result<BundleTarget, AuthoringError> {
        let manifest = dir.join(MANIFEST_FILE);
        let text = match crate::fsutil::read_text_limited(&manifest, crate::integrity::verify::MAX_MANIFEST_BYTES) {
            Ok(text) => text,
            Err(crate::fsutil::ReadError::Io(e)) => {
                return Err(AuthoringError::usage(format!(
                    "{} is not a bundle: cannot read {}: {e}",
                    dir.display(),
                    manifest.display()
                ))
                .with_help("name a bundle folder (one with manifest.toml), or create one with `rlp agent scaffold`"));
            }
            Err(e) => return Err(AuthoringError::read(&manifest, e)),
        };
        crate::leftovers::sweep_tree(dir, &[crate::fsutil::TEMP_PREFIX], crate::leftovers::Kind::File);
        crate::integrity::digest::plan(dir, &Default::default()).map_err(|e| {
            AuthoringError::usage(format!("{e}"))
                .with_help(format!("fix it first; `rlp lint {}` shows where", dir.display()))
        })?;
        let (manifest, _) = crate::bundle::parse_manifest(&text);
        let folder = dir
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default();
        let name = manifest.as_ref().and_then(|m| m.name.clone()).unwrap_or(folder);
        let caps_file = manifest.map_or("policy.caps".to_string(), |m| m.caps_file);
        if !is_valid_artifact_path(&caps_file) {
            return Err(AuthoringError::usage(format!(
                "{}: [caps].file `{caps_file}` is not a bundle path",
                manifest_display(dir)
            )));
        }
        Ok(BundleTarget { dir: dir.to_path_buf(), name, caps_path: dir.join(caps_file) })
    }

    /// Brings manifest.toml's digests up to date.
    pub(crate) fn redigest(&self) -> Result<(), AuthoringError> {
        crate::integrity::digest::write(&self.dir, &Default::default())
            .map(|_| ())
            .map_err(|e| AuthoringError::failed(format!("the files were written but digest failed: {e}")))
    }
}

fn manifest_display(dir: &Path) -> String {
    dir.join(MANIFEST_FILE).display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temporary_file_of_an_atomic_write_is_never_a_bundle_path() {
        assert!(!is_valid_artifact_path(&format!("{}4242-AbCdEf.tmp", crate::fsutil::TEMP_PREFIX)));
    }
}
