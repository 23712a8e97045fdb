//! Bundles in OCI registries: `rlp bundle push`, `rlp bundle pull` and
//! `rlp agent install oci://…`.
//!
//! A packed archive travels unchanged as the one layer of an OCI artifact
//! ([`artifact`]). Both directions verify the archive itself — sizes,
//! digests, file set and a valid signature when there is one — so a
//! registry never receives or hands out a bundle rlp would not verify;
//! whom to trust is decided at install, by the trust policy.
//!
//! A pull writes nothing until the layer's digest and the archive's content
//! have been checked: the blob goes to a temporary file next to the
//! destination, which is renamed into place only then.

pub mod artifact;
pub(crate) mod credentials;
pub mod reference;
pub(crate) mod registry;

use std::collections::BTreeMap;
use std::io::{BufWriter, Cursor, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::integrity::failure::{Failure, Reason};
use crate::integrity::verify::{self, Options, Trust, Verified};
use crate::oci::artifact::{Labels, MAX_LAYER_BYTES};
use crate::oci::credentials::Credentials;
use crate::oci::reference::{OciReference, version_tag};
use crate::oci::registry::Registry;
use crate::pack::Progress;
use crate::pack::reader::{self, Encoding, Limits};

/// Where a transfer goes and how.
pub(crate) struct Remote<'a> {
    /// The registry reference.
    pub reference: OciReference,
    /// How to authenticate.
    pub credentials: &'a Credentials,
    /// Speak plain HTTP (a registry on this machine only).
    pub plain_http: bool,
}

/// A pushed archive.
#[derive(Debug)]
pub(crate) struct Pushed {
    /// The reference it was pushed to (with the tag it was given).
    pub reference: OciReference,
    /// The manifest's digest: `reference` by digest is this one push.
    pub manifest_digest: String,
    /// The layer's (the archive's) SHA-256 digest.
    pub layer_digest: String,
    /// The archive's size.
    pub bytes: u64,
    /// What was verified.
    pub verified: Verified,
}

/// A pulled archive.
#[derive(Debug)]
pub(crate) struct Pulled {
    /// Where it was written.
    pub path: PathBuf,
    /// The manifest's digest.
    pub manifest_digest: String,
    /// The layer's digest, checked.
    pub layer_digest: String,
    /// The archive's size.
    pub bytes: u64,
    /// What was verified.
    pub verified: Verified,
}

/// Verifies the archive at `archive` and pushes it. Without a tag in the
/// reference, the bundle's version is the tag.
pub(crate) fn push(archive: &Path, remote: Remote<'_>) -> Result<Pushed, Failure> {
    let data = crate::fsutil::read_limited(archive, MAX_LAYER_BYTES)
        .map_err(|e| Failure::read(archive, e, Reason::Archive))?;
    let evidence = reader::verify_archive(Cursor::new(&data), &Limits::default(), Encoding::Content)?;
    let verified =
        verify::check(&evidence, &Options { trust: Trust::Any, require_signature: false, registries: None })?;
    let labels = labels_of(&verified);
    let reference = remote.reference.or_tag(|| version_tag(&labels.version));
    let registry = Registry::new(&reference, remote.credentials, remote.plain_http)?;
    let layer_digest = artifact::sha256_digest(&data);
    let bytes = data.len() as u64;
    let file_name = format!("{}-{}.bundle.tar.gz", labels.name, labels.version);
    let manifest = artifact::manifest(layer_digest.clone(), bytes, &file_name, &labels);
    let manifest = serde_json::to_vec(&manifest)
        .map_err(|e| Failure::new(Reason::Unreadable, format!("cannot write the OCI manifest: {e}")))?;
    // The digest printed is the one of the bytes sent: what the tag names
    // now, whatever the registry answers or anyone pushes next.
    let manifest_digest = artifact::sha256_digest(&manifest);
    registry.push(&data, &layer_digest, manifest)?;
    Ok(Pushed { reference: reference.clone(), manifest_digest, layer_digest, bytes, verified })
}

/// Pulls the bundle `remote` names into `output` (default
/// `<name>-<version>.bundle.tar.gz` in the current folder).
pub(crate) fn pull(remote: Remote<'_>, output: Option<&Path>, progress: &dyn Progress) -> Result<Pulled, Failure> {
    let registry = Registry::new(&remote.reference, remote.credentials, remote.plain_http)?;
    let shown = remote.reference.to_string();
    let folder = match output.and_then(Path::parent) {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if let Some(path) = output {
        refuse_non_file(path)?;
    }
    let (manifest_bytes, manifest_digest) = registry.manifest()?;
    let layer = artifact::bundle_layer(&manifest_bytes, &shown)?;
    let (temp, _tracked) =
        crate::interrupt::temp_file_in(&folder, ".rlp-pull-").map_err(|e| Failure::io(&folder, &e))?;
    let mut out = BufWriter::with_capacity(1 << 20, temp.as_file());
    registry.blob(&layer.descriptor, layer.size, &mut out, progress)?;
    out.flush().map_err(|e| Failure::io(&folder, &e))?;
    drop(out);
    let file = temp.reopen().map_err(|e| Failure::io(&folder, &e))?;
    let evidence = reader::verify_archive(file, &Limits::default(), Encoding::Content)?;
    let verified =
        verify::check(&evidence, &Options { trust: Trust::Any, require_signature: false, registries: None })?;
    labels_agree(&layer.annotations, &verified, &shown)?;
    let path = match output {
        Some(path) => path.to_path_buf(),
        None => {
            let path = PathBuf::from(format!("{}-{}.bundle.tar.gz", verified.name, verified.version));
            refuse_non_file(&path)?;
            path
        }
    };
    let write_err = |e: std::io::Error| Failure::io(&path, &e);
    temp.as_file().set_permissions(std::fs::Permissions::from_mode(0o644)).map_err(write_err)?;
    temp.as_file().sync_all().map_err(write_err)?;
    temp.persist(&path).map_err(|e| write_err(e.error))?;
    crate::fsutil::sync_dir(&folder).map_err(|e| Failure::io(&folder, &e))?;
    Ok(Pulled { path, manifest_digest, layer_digest: layer.descriptor.digest, bytes: layer.size, verified })
}

fn labels_of(verified: &Verified) -> Labels {
    Labels {
        name: verified.name.clone(),
        version: verified.version.to_string(),
        signer: verified.signer.as_ref().map(|s| s.key_id.to_string()),
    }
}

/// Refuses annotations that describe another bundle than the archive holds
/// (every one rlp writes that is present is compared): listings would show
/// one bundle while another is installed.
fn labels_agree(annotations: &BTreeMap<String, String>, verified: &Verified, shown: &str) -> Result<(), Failure> {
    let held = labels_of(verified);
    let signer = held.signer.as_deref().unwrap_or("(none: unsigned)");
    let expected = [
        (artifact::NAME_ANNOTATION, held.name.as_str()),
        (artifact::TITLE_ANNOTATION, held.name.as_str()),
        (artifact::VERSION_ANNOTATION, held.version.as_str()),
        (artifact::OCI_VERSION_ANNOTATION, held.version.as_str()),
        (artifact::SIGNER_ANNOTATION, signer),
    ];
    for (key, want) in expected {
        // The signer annotation is absent for an unsigned bundle.
        let found = match annotations.get(key) {
            Some(found) => found.as_str(),
            None if key == artifact::SIGNER_ANNOTATION && annotations.contains_key(artifact::NAME_ANNOTATION) => {
                "(none: unsigned)"
            }
            None => continue,
        };
        if found != want {
            return Err(Failure::new(
                Reason::Manifest,
                format!(
                    "{shown}: the registry's annotation {key} says `{}`, but the archive holds `{want}`",
                    crate::text::ellipsize(&crate::text::terminal_safe_line(found), 120)
                ),
            )
            .with_help("the artifact was altered after `rlp bundle push`; push the bundle again"));
        }
    }
    Ok(())
}

/// Refuses to replace anything but a regular file.
fn refuse_non_file(path: &Path) -> Result<(), Failure> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.is_file() => Err(Failure::new(
            Reason::Usage,
            format!("{} exists and is not a regular file; the archive would replace it", path.display()),
        )
        .with_help("give the path of a new or existing archive file with -o")),
        _ => Ok(()),
    }
}
