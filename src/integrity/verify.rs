//! Verification of a bundle: sizes, digests, the exact file set, the
//! signature, then the trust policy — in that order, failing closed, naming
//! the first thing wrong.
//!
//! The checks run on [`Evidence`]: the manifest bytes, the signature bytes
//! and the size and digest of every file, however they were gathered (a
//! folder hashed in place by [`collect_dir`], or an archive hashed while it
//! streams through `pack::reader`).

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::bundle::capability::Capability;
use crate::bundle::diag::Severity;
use crate::bundle::inventory::hash_bytes;
use crate::bundle::manifest::{Digest, MANIFEST_FILE, Manifest, SIGNATURES_DIR};
use crate::bundle::policy::Policy;
use crate::bundle::registry::Registries;
use crate::integrity::failure::{Failure, Reason};
use crate::integrity::keys::{KeyId, PublicKey};
use crate::integrity::signature::{MAX_SIGNATURE_BYTES, ManifestSignature, SIGNATURE_FILE};
use crate::integrity::trust::TrustPolicy;
use crate::integrity::walk::{Walk, walk};

/// Largest manifest.toml read by verification.
pub const MAX_MANIFEST_BYTES: u64 = 16 << 20;
/// Largest policy file read by verification.
pub const MAX_POLICY_BYTES: u64 = 1 << 20;

/// Size and digest of one file as found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileFacts {
    /// Size in bytes.
    pub size: u64,
    /// BLAKE3 of the content (`None`: not hashed, e.g. an unlisted file).
    pub digest: Option<Digest>,
}

/// What verification needs from a bundle, however it was read.
#[derive(Clone, Debug)]
pub struct Evidence {
    /// manifest.toml, byte for byte.
    pub manifest_bytes: Vec<u8>,
    /// The parsed manifest.
    pub manifest: Manifest,
    /// SIGNATURES/manifest.sig, if present.
    pub signature: Option<Vec<u8>>,
    /// Every other file, by bundle path.
    pub files: BTreeMap<String, FileFacts>,
    /// The bundle's policy file (the manifest's `[caps] file`), if present.
    pub policy_text: Option<Vec<u8>>,
}

/// Who may have signed the bundle.
#[derive(Clone, Copy, Debug)]
pub enum Trust<'a> {
    /// Anchors, rules and revocations of a trust policy.
    Policy(&'a TrustPolicy),
    /// Exactly this key (`--key PUB`) instead of the anchors and rules;
    /// implies a signature is required. The policy's revocations still apply:
    /// a revoked key is refused whichever way it is named.
    Key(&'a PublicKey, &'a TrustPolicy),
    /// Any signer: a signature, when present, must be valid, and nothing is
    /// said about whom to trust. For moving an archive (`rlp bundle push`,
    /// `pull`), where the trust policy applies later, at install.
    Any,
}

/// How to verify.
#[derive(Clone, Copy, Debug)]
pub struct Options<'a> {
    /// The trust source.
    pub trust: Trust<'a>,
    /// Refuse a bundle without a signature.
    pub require_signature: bool,
    /// Check every `[shared_schemas]` pin against these registries (the
    /// host that will run the bundle); `None` leaves pins unchecked (moving
    /// an archive, where the host is not known yet).
    pub registries: Option<&'a Registries>,
}

/// Who signed a verified bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signer {
    /// The signing key's id.
    pub key_id: KeyId,
    /// The trust anchor it belongs to (`None` with `--key`).
    pub anchor: Option<String>,
}

/// A bundle that passed verification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// `[agent].name`.
    pub name: String,
    /// `[agent].version`.
    pub version: semver::Version,
    /// Number of files the manifest lists.
    pub files: usize,
    /// Their total size.
    pub bytes: u64,
    /// The signer, if signed.
    pub signer: Option<Signer>,
    /// The capabilities the bundle's policy requests.
    pub capabilities: Vec<Capability>,
}

/// Parses manifest bytes as verification reads them (see
/// [`crate::integrity::manifest_read`]).
pub fn parse_manifest(bytes: &[u8]) -> Result<Manifest, Failure> {
    crate::integrity::manifest_read::read_manifest(bytes)
}

/// Reads a regular, singly linked file of at most `limit` bytes (`shown` names it in messages).
pub fn read_regular(path: &Path, shown: &str, limit: u64) -> Result<Vec<u8>, Failure> {
    let meta = fs::symlink_metadata(path).map_err(|e| Failure::io(path, &e))?;
    if !meta.file_type().is_file() {
        return Err(Failure::new(Reason::NotRegular, format!("`{shown}` is not a regular file"))
            .with_help("bundles hold only regular files and folders"));
    }
    if meta.nlink() > 1 {
        return Err(Failure::new(Reason::NotRegular, format!("`{shown}` is a hard link"))
            .with_help("replace it with a copy that has a single name"));
    }
    if meta.len() > limit {
        return Err(Failure::new(Reason::Size, format!("`{shown}` is {} bytes; the limit is {limit}", meta.len())));
    }
    // Bounded too: the file may grow between the check and the read.
    crate::fsutil::read_limited(path, limit).map_err(|e| Failure::read(path, e, Reason::Size))
}

/// Reads `SIGNATURES/` of a folder: nothing, or exactly `manifest.sig`.
fn read_signatures(dir: &Path) -> Result<Option<Vec<u8>>, Failure> {
    let folder = dir.join(SIGNATURES_DIR);
    let meta = match fs::symlink_metadata(&folder) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Failure::io(&folder, &e)),
    };
    if !meta.file_type().is_dir() {
        return Err(Failure::new(Reason::NotRegular, format!("`{SIGNATURES_DIR}` is not a folder")));
    }
    for entry in fs::read_dir(&folder).map_err(|e| Failure::io(&folder, &e))? {
        let entry = entry.map_err(|e| Failure::io(&folder, &e))?;
        if entry.file_name() != "manifest.sig" {
            return Err(Failure::new(
                Reason::FileSet,
                format!("`{SIGNATURES_DIR}/{}` is not part of a bundle", entry.file_name().to_string_lossy()),
            )
            .with_help(format!("{SIGNATURES_DIR}/ holds only manifest.sig; remove the other entry")));
        }
    }
    match fs::symlink_metadata(dir.join(SIGNATURE_FILE)) {
        Ok(_) => read_regular(&dir.join(SIGNATURE_FILE), SIGNATURE_FILE, MAX_SIGNATURE_BYTES).map(Some),
        Err(_) => Ok(None),
    }
}

/// A bundle folder as found on disk.
#[derive(Debug)]
pub struct DirScan {
    /// manifest.toml, byte for byte.
    pub manifest_bytes: Vec<u8>,
    /// The parsed manifest.
    pub manifest: Manifest,
    /// The files (manifest.toml and SIGNATURES/ excluded), sorted; small
    /// files already hashed, large ones only measured.
    pub walk: Walk,
    /// SIGNATURES/manifest.sig, if present.
    pub signature: Option<Vec<u8>>,
}

/// Reads a bundle folder: the manifest is parsed while the folder is walked
/// and its small files hashed (in parallel); links and devices are refused,
/// then sizes are compared with the manifest. Large files are not hashed yet.
pub fn scan_dir(dir: &Path) -> Result<DirScan, Failure> {
    match fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return Err(Failure::new(Reason::Unreadable, format!("{} is not a bundle folder", dir.display()))),
        Err(e) => return Err(Failure::io(dir, &e)),
    }
    let manifest_path = dir.join(MANIFEST_FILE);
    if fs::symlink_metadata(&manifest_path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        return Err(Failure::new(Reason::Unreadable, format!("{} has no {MANIFEST_FILE}", dir.display()))
            .with_help("pass a bundle folder or a .bundle.tar.gz archive"));
    }
    let (manifest, walked) = rayon::join(
        || {
            let bytes = read_regular(&manifest_path, MANIFEST_FILE, MAX_MANIFEST_BYTES)?;
            let manifest = parse_manifest(&bytes);
            Ok::<_, Failure>((bytes, manifest))
        },
        || walk(dir),
    );
    let (manifest_bytes, manifest) = manifest?;
    let walk = walked.map_err(|e| Failure::io(&e.path, &e.source))?;
    if let Some(refused) = walk.refused.first() {
        return Err(Failure::new(
            Reason::NotRegular,
            format!("`{}` cannot be part of a bundle: {}", refused.path, refused.why),
        )
        .with_help("bundles hold only regular files and folders"));
    }
    let signature = read_signatures(dir)?;
    let manifest = manifest?;
    check_sizes(&manifest, |path| walk.get(path).map(|f| f.size))?;
    Ok(DirScan { manifest_bytes, manifest, walk, signature })
}

/// Gathers evidence from a bundle folder: [`scan_dir`], then the listed large
/// files hashed (memory-mapped, on every core).
pub fn collect_dir(dir: &Path) -> Result<Evidence, Failure> {
    let DirScan { manifest_bytes, manifest, mut walk, signature } = scan_dir(dir)?;
    let listed: HashSet<&str> = manifest.listed().map(|a| a.path.as_str()).collect();
    walk.hash_large(dir, |path| listed.contains(path)).map_err(|e| Failure::io(&e.path, &e.source))?;
    let caps_file = manifest.caps_file.clone();
    let mut policy_text = None;
    if listed.contains(caps_file.as_str()) && walk.get(&caps_file).is_some() {
        let text = read_regular(&dir.join(&caps_file), &caps_file, MAX_POLICY_BYTES)?;
        if walk.get(&caps_file).and_then(|f| f.digest) != Some(hash_bytes(&text)) {
            return Err(Failure::new(Reason::Digest, format!("`{caps_file}` changed while it was being verified"))
                .with_help("verify again once nothing is writing to the bundle"));
        }
        policy_text = Some(text);
    }
    let files: BTreeMap<String, FileFacts> = walk.files.into_iter().collect();
    Ok(Evidence { manifest_bytes, manifest, signature, files, policy_text })
}

/// The first listed file whose size differs from the manifest, in path order.
pub fn check_sizes(manifest: &Manifest, size_of: impl Fn(&str) -> Option<u64>) -> Result<(), Failure> {
    sizes_match(&sorted_listed(manifest), size_of)
}

/// Every listed file (artifacts and the entry binary), sorted by path.
fn sorted_listed(manifest: &Manifest) -> Vec<&crate::bundle::manifest::Artifact> {
    let mut listed: Vec<_> = manifest.listed().collect();
    listed.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    listed
}

fn sizes_match(
    listed: &[&crate::bundle::manifest::Artifact],
    size_of: impl Fn(&str) -> Option<u64>,
) -> Result<(), Failure> {
    for artifact in listed {
        if let (Some(want), Some(found)) = (artifact.size, size_of(&artifact.path))
            && want != found
        {
            return Err(Failure::new(
                Reason::Size,
                format!("`{}` is {found} bytes, but manifest.toml says {want}", artifact.path),
            )
            .with_help(
                "the file was changed after the manifest was written; restore it, or run `rlp digest` and sign again",
            ));
        }
    }
    Ok(())
}

/// Compares a file's digest with the one the manifest records (`want`);
/// `found = None` (not hashed) is not a mismatch.
pub fn check_digest(path: &str, want: Option<Digest>, found: Option<Digest>) -> Result<(), Failure> {
    let (Some(want), Some(found)) = (want, found) else { return Ok(()) };
    if want.is_placeholder() {
        return Err(Failure::new(
            Reason::Digest,
            format!("`{path}` carries the all-zero placeholder digest in manifest.toml"),
        )
        .with_help("build the file, run `rlp digest` and sign again"));
    }
    if found != want {
        return Err(Failure::new(
            Reason::Digest,
            format!("`{path}` does not match its BLAKE3 digest in manifest.toml"),
        )
        .with_help(
            "the file was changed after the manifest was written; restore it, or run `rlp digest` and sign again",
        ));
    }
    Ok(())
}

/// Runs every check on gathered evidence.
pub fn check(evidence: &Evidence, options: &Options<'_>) -> Result<Verified, Failure> {
    let manifest = &evidence.manifest;
    let listed = sorted_listed(manifest);
    sizes_match(&listed, |path| evidence.files.get(path).map(|f| f.size))?;
    for artifact in &listed {
        if let Some(facts) = evidence.files.get(&artifact.path) {
            check_digest(&artifact.path, artifact.blake3, facts.digest)?;
        }
    }

    for artifact in &listed {
        if !evidence.files.contains_key(&artifact.path) {
            return Err(Failure::new(
                Reason::FileSet,
                format!("`{}` is listed in manifest.toml but missing", artifact.path),
            )
            .with_help("restore the file, or remove its entry with `rlp digest` and sign again"));
        }
    }
    let listed_paths: HashSet<&str> = listed.iter().map(|a| a.path.as_str()).collect();
    for path in evidence.files.keys() {
        if !listed_paths.contains(path.as_str()) {
            return Err(Failure::new(
                Reason::FileSet,
                format!("`{path}` is in the bundle but not listed in manifest.toml"),
            )
            .with_help("remove it, or list it with `rlp digest` and sign again"));
        }
    }

    let signer = match &evidence.signature {
        None => {
            if options.require_signature || matches!(options.trust, Trust::Key(..)) {
                return Err(Failure::new(Reason::Unsigned, format!("the bundle is not signed (no {SIGNATURE_FILE})"))
                    .with_help("sign it with `rlp sign <bundle> --key <file.key>`"));
            }
            None
        }
        Some(bytes) => {
            let signature = ManifestSignature::parse(bytes).map_err(|why| {
                Failure::new(Reason::Signature, format!("{SIGNATURE_FILE} is malformed: {why}"))
                    .with_help("sign the bundle again with `rlp sign`")
            })?;
            let id = signature.key_id();
            if !signature.verify(&evidence.manifest_bytes) {
                return Err(Failure::new(
                    Reason::Signature,
                    format!("{SIGNATURE_FILE} does not match manifest.toml (signature by key {id})"),
                )
                .with_help(
                    "manifest.toml or the signature changed after signing; if the change is yours, sign again",
                ));
            }
            Some(check_trust(&signature, options)?)
        }
    };

    let capabilities = bundle_capabilities(evidence)?;
    if let (Some(signer), Trust::Policy(policy)) = (&signer, options.trust)
        && let Some(anchor) = signer.anchor.as_deref().and_then(|name| policy.anchor_named(name))
    {
        let rule = anchor.effective_rule();
        if let Some(cap) = rule.first_denied(&capabilities) {
            let what = if anchor.rule.is_some() {
                format!("its rule allows {}", rule.describe())
            } else {
                format!("it has no [rules.{}], so it allows no capability", anchor.name)
            };
            return Err(Failure::new(
                Reason::Capability,
                format!(
                    "the bundle requests `{cap}`, beyond what signer `{}` (key {}) may grant: {what}",
                    anchor.name, signer.key_id
                ),
            )
            .with_help(format!(
                "to trust this signer with it, run `rlp trust allow {} {}`; or sign the bundle with a key whose rule allows `{cap}`",
                anchor.name,
                if cap == Capability::Exec { "--exec".to_string() } else { format!("--add-caps {cap}") }
            )));
        }
    }

    if let Some(registries) = options.registries {
        check_pins(manifest, registries)?;
    }

    let name = manifest.name.clone().unwrap_or_default();
    let version =
        manifest.semver().ok_or_else(|| Failure::new(Reason::Manifest, "manifest.toml has no valid version"))?;
    Ok(Verified {
        name,
        version,
        files: listed.len(),
        bytes: listed.iter().filter_map(|a| evidence.files.get(&a.path)).map(|f| f.size).sum(),
        signer,
        capabilities,
    })
}

/// Checks that every shared schema the manifest pins is in `registries`
/// with the pinned size and digest: a bundle validates only with the
/// schemas its signer reviewed.
pub fn check_pins(manifest: &Manifest, registries: &Registries) -> Result<(), Failure> {
    for pin in &manifest.shared_schemas {
        let id = &pin.id;
        let Some(expected) = pin.blake3 else { continue };
        let lookup = registries.lookup(id);
        let (path, file) = match lookup.found {
            Some((path, Ok(file))) => (path, file),
            Some((path, Err(why))) => {
                return Err(Failure::new(
                    Reason::SharedSchema,
                    format!("the shared schema `schema:{id}` at {} cannot be used: {why}", path.display()),
                )
                .with_help("make it a regular UTF-8 JSON file: the one manifest.toml pins"));
            }
            None => {
                let searched = registries.searched(id);
                return Err(Failure::new(
                    Reason::SharedSchema,
                    format!(
                        "manifest.toml pins the shared schema `schema:{id}` (BLAKE3 {expected}), which is in no registry (searched {searched})"
                    ),
                )
                .with_help(format!(
                    "put the pinned `{id}.json` in the home's schemas/ folder or in a folder of `[schemas] registries` in config.toml"
                )));
            }
        };
        if file.digest != expected || pin.size.is_some_and(|size| size != file.size) {
            return Err(Failure::new(
                Reason::SharedSchema,
                format!(
                    "the shared schema `schema:{id}` changed: {} has BLAKE3 {}, manifest.toml pins {expected}",
                    path.display(),
                    file.digest
                ),
            )
            .with_help(
                "restore the pinned file; if the change is intended, the bundle's author reviews it, runs `rlp digest` and signs again",
            ));
        }
    }
    Ok(())
}

/// Checks a cryptographically valid signature's key against the trust source.
fn check_trust(signature: &ManifestSignature, options: &Options<'_>) -> Result<Signer, Failure> {
    let id = signature.key_id();
    match options.trust {
        Trust::Key(expected, policy) => {
            if signature.public != *expected {
                return Err(Failure::new(
                    Reason::Untrusted,
                    format!("the bundle is signed by key {id}, not by the expected key {}", expected.key_id()),
                )
                .with_help("check that --key names the signer's public key"));
            }
            check_not_revoked(id, policy)?;
            Ok(Signer { key_id: id, anchor: None })
        }
        Trust::Any => Ok(Signer { key_id: id, anchor: None }),
        Trust::Policy(policy) => {
            check_not_revoked(id, policy)?;
            let Some(anchor) = policy.anchor_with_key(&signature.public) else {
                return Err(Failure::new(
                    Reason::Untrusted,
                    format!("the bundle is signed by key {id}, which is not a trust anchor in trust-policy.toml"),
                )
                .with_help("if you trust this signer, add their key: `rlp trust add <their.pub> --name NAME`"));
            };
            Ok(Signer { key_id: id, anchor: Some(anchor.name.clone()) })
        }
    }
}

/// Refuses a key the trust policy revokes.
fn check_not_revoked(id: KeyId, policy: &TrustPolicy) -> Result<(), Failure> {
    if !policy.is_revoked(id) {
        return Ok(());
    }
    let named = policy.anchor_for(id).map(|a| format!(" (anchor `{}`)", a.name)).unwrap_or_default();
    Err(Failure::new(
        Reason::Revoked,
        format!("the bundle is signed by key {id}{named}, which is revoked in trust-policy.toml"),
    )
    .with_help("ask the publisher for a bundle signed with a key that is not revoked"))
}

/// The capabilities the bundle's policy file requests (none without one).
/// A policy file that is in the bundle but was not read as its policy
/// fails the check: the runtime would grant from it.
pub fn bundle_capabilities(evidence: &Evidence) -> Result<Vec<Capability>, Failure> {
    let file = &evidence.manifest.caps_file;
    let Some(bytes) = &evidence.policy_text else {
        if evidence.files.contains_key(file) {
            return Err(Failure::new(
                Reason::Manifest,
                format!("`{file}`, the bundle's policy (`[caps] file`), is not listed in manifest.toml"),
            )
            .with_help("run `rlp digest` on the bundle and sign it again"));
        }
        return Ok(Vec::new());
    };
    let invalid = |why: String| {
        Failure::new(Reason::Manifest, format!("{file} is invalid: {why}")).with_help("run `rlp lint` on the bundle")
    };
    let text = std::str::from_utf8(bytes).map_err(|_| invalid("not UTF-8".into()))?;
    let (grants, findings) = crate::bundle::parse_policy(text);
    if let Some(error) = findings.iter().find(|f| f.severity == Severity::Error) {
        return Err(invalid(error.message.clone()));
    }
    Ok(grants.map(|g| Policy::from_bundle(&g).capabilities()).unwrap_or_default())
}

/// Verifies a bundle folder.
pub fn verify_dir(dir: &Path, options: &Options<'_>) -> Result<Verified, Failure> {
    check(&collect_dir(dir)?, options)
}
