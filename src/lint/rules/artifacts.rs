//! RLP501–RLP506: the manifest lists exactly the bundle's files, with the
//! right sizes and digests, and the bundle holds only regular files.

use std::collections::HashSet;

use rayon::prelude::*;

use crate::bundle::LoadedBundle;
use crate::bundle::diag::{At, Code, Diagnostics, Finding};
use crate::bundle::inventory::hash_file;
use crate::bundle::manifest::{Artifact, MANIFEST_FILE, is_valid_artifact_path};

/// Listed files of fewer bytes than this in all are hashed on the calling
/// thread, more on every core.
const PARALLEL_HASH_BYTES: u64 = 1 << 20;

/// A listed file with the all-zero placeholder digest is one not built yet:
/// RLP505 (a warning) whether or not it exists. Any other listed file that
/// is absent is RLP501.
fn report_placeholder_or_missing(bundle: &LoadedBundle, artifact: &Artifact, diags: &mut Diagnostics) {
    if artifact.blake3.is_some_and(|d| d.is_placeholder()) {
        diags
            .report(
                Code::ArtifactPlaceholderDigest,
                At::Value(artifact.at.key("blake3")),
                format!("`{}` carries the all-zero placeholder digest", artifact.path),
            )
            .help("build the file and run `rlp digest`; `rlp bundle pack` refuses placeholders");
    } else if bundle.inventory.get(&artifact.path).is_none()
        && !bundle.inventory.refused.iter().any(|r| r.path == artifact.path)
    {
        diags
            .report(
                Code::ArtifactMissing,
                At::Value(artifact.at.key("path")),
                format!("`{}` is listed but not in the bundle", artifact.path),
            )
            .help("restore the file, or remove its entry and run `rlp digest`");
    }
}

/// Checks the file set, sizes and digests against the manifest.
pub(crate) fn check(bundle: &LoadedBundle, out: &mut Vec<Finding>) {
    for refused in &bundle.inventory.refused {
        let mut diags = Diagnostics::new(bundle.display_path(&refused.path));
        diags
            .report(
                Code::NonRegularFile,
                At::File,
                format!("`{}` cannot be part of a bundle: {}", refused.path, refused.why),
            )
            .help(if crate::fsutil::is_leftover_temp(&refused.path) {
                crate::fsutil::LEFTOVER_TEMP_HELP
            } else {
                "replace it with a regular file, or remove it"
            });
        out.extend(diags.into_findings());
    }
    let Some(manifest) = &bundle.manifest else { return };
    let mut diags = Diagnostics::new(bundle.display_path(MANIFEST_FILE));
    let listed: Vec<&Artifact> = manifest.listed().filter(|artifact| is_valid_artifact_path(&artifact.path)).collect();
    for artifact in &listed {
        report_placeholder_or_missing(bundle, artifact, &mut diags);
    }
    let to_hash: Vec<&Artifact> = listed
        .iter()
        .copied()
        .filter(|a| a.blake3.is_some_and(|d| !d.is_placeholder()) && bundle.inventory.get(&a.path).is_some())
        .collect();
    let hash = |a: &Artifact| hash_file(&bundle.dir.join(&a.path));
    // A bundle of a few small files is hashed faster than threads start
    // (and those threads would then compete with the call for the cores).
    let bytes: u64 = to_hash.iter().filter_map(|a| bundle.inventory.get(&a.path)).map(|f| f.size).sum();
    let hashed: Vec<_> = if bytes < PARALLEL_HASH_BYTES {
        to_hash.into_iter().map(|a| (a, hash(a))).collect()
    } else {
        to_hash.into_par_iter().map(|a| (a, hash(a))).collect()
    };
    for (artifact, result) in hashed {
        match result {
            Err(e) => {
                diags.report(
                    Code::Unreadable,
                    At::Value(artifact.at.key("path")),
                    format!("cannot read `{}`: {e}", artifact.path),
                );
            }
            Ok((size, digest)) => {
                if let Some(listed) = artifact.size
                    && listed != size
                {
                    diags
                        .report(
                            Code::ArtifactSizeMismatch,
                            At::Value(artifact.at.key("size")),
                            format!("`{}` is {size} bytes, the manifest says {listed}", artifact.path),
                        )
                        .help("run `rlp digest` if the change is intended");
                } else if artifact.blake3 != Some(digest) {
                    diags
                        .report(
                            Code::ArtifactDigestMismatch,
                            At::Value(artifact.at.key("blake3")),
                            format!(
                                "`{}` has BLAKE3 {digest}, the manifest says {}",
                                artifact.path,
                                artifact.blake3.expect("filtered")
                            ),
                        )
                        .help("run `rlp digest` if the change is intended");
                }
            }
        }
    }
    out.extend(diags.into_findings());
    let listed: HashSet<&str> = manifest.listed().map(|a| a.path.as_str()).collect();
    for file in &bundle.inventory.files {
        if !listed.contains(file.path.as_str()) {
            let mut diags = Diagnostics::new(bundle.display_path(&file.path));
            // Upstream manifests name the policy in `[caps] file` and digest
            // nothing but tools.json and the entry binary.
            let (message, why) = if file.path == manifest.caps_file {
                (
                    format!(
                        "`{}` is the bundle's policy (`[caps] file`) but has no digest in manifest.toml",
                        file.path
                    ),
                    ": rlp digests every file, so that a signature covers the policy too",
                )
            } else {
                (format!("`{}` is in the bundle but not listed in manifest.toml", file.path), "")
            };
            diags
                .report(Code::ArtifactUnlisted, At::File, message)
                .help(format!("run `rlp digest {}` to list it with its digest{why}", bundle.dir.display()));
            out.extend(diags.into_findings());
        }
    }
}
