//! `rlp agent install` and `rlp agent list`: verified bundles in
//! `$RUNLOOP_HOME/agents/<name>`.
//!
//! Install procedure:
//!
//! 1. An archive is streamed and verified completely (entries, sizes,
//!    digests, file set, signature, trust policy, version) without writing
//!    anything: a hostile or refused archive never touches the disk.
//! 2. The source (folder or archive) is copied or extracted into a fresh
//!    private staging folder `agents/.staging-<pid>-<random>`, every file hashed on
//!    the way in; the staged copy — not the source — is verified again.
//! 3. The version is compared with the installed one: a lower version is a
//!    rollback and refused; the same one needs `--force`.
//! 4. The staged files and folders are synced to disk; the staging folder is
//!    renamed to `agents/<name>` and `agents/` is synced. An installed copy is
//!    replaced in one step: the staging folder and `agents/<name>` swap
//!    places (`renameat2(RENAME_EXCHANGE)`), then the replaced copy, now in
//!    the staging folder, is removed. At every instant one whole copy, the
//!    old or the new, is installed.
//!
//! On any failure the staging folder is removed (it is a temporary folder
//! that deletes itself, also when the process unwinds). One left by an
//! install that was killed is removed by the next install, once no process
//! has the pid its name records.
//!
//! A file system that cannot swap two folders (NFS, kernels before 3.15)
//! replaces in two renames: the installed copy aside to
//! `agents/.old-<pid>-<random>-<name>`, then the new one in. An install
//! killed between the two leaves no `agents/<name>`; the next install puts
//! the copy set aside back before it removes anything.

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustix::process::geteuid;

use crate::bundle::manifest::MANIFEST_FILE;
use crate::bundle::registry::Registries;
use crate::home::Home;
use crate::integrity::failure::{Failure, Reason};
use crate::integrity::signature::SIGNATURE_FILE;
use crate::integrity::trust::TrustPolicy;
use crate::integrity::verify::{self, Evidence, FileFacts, MAX_POLICY_BYTES, Options, Trust, Verified};
use crate::pack::extract::DirSink;
use crate::pack::reader::{self, Limits, Sink};

/// How to install.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct InstallOptions {
    /// Accept a bundle without a signature.
    pub allow_unsigned: bool,
    /// Replace an installed copy of the same version.
    pub force: bool,
}

/// An installed bundle.
#[derive(Debug)]
pub(crate) struct Installed {
    /// What was verified.
    pub verified: Verified,
    /// Where it now lives.
    pub path: PathBuf,
    /// The version it replaced, if any.
    pub replaced: Option<semver::Version>,
}

/// A private folder for an archive to install that is still to be fetched
/// (`rlp agent install oci://…`): `agents/.staging-<pid>-…`, removed when
/// dropped, by the interrupt handler on a signal, or by the next install's
/// sweep when the process was killed.
pub(crate) fn download_folder(home: &Home) -> Result<(tempfile::TempDir, crate::interrupt::Tracked), Failure> {
    let agents = home.agents_dir();
    crate::fsutil::create_private_dir_all(&agents).map_err(|e| Failure::io(&agents, &e))?;
    let folder = tempfile::Builder::new()
        .prefix(&format!("{STAGING_PREFIX}{}-", std::process::id()))
        .permissions(fs::Permissions::from_mode(0o700))
        .tempdir_in(&agents)
        .map_err(|e| Failure::io(&agents, &e))?;
    let tracked = crate::interrupt::track_dir(folder.path());
    Ok((folder, tracked))
}

/// Installs a bundle folder or archive into `home`.
/// Every shared schema the bundle pins must be in `registries` as pinned.
pub(crate) fn install(
    home: &Home,
    source: &Path,
    options: InstallOptions,
    registries: &Registries,
) -> Result<Installed, Failure> {
    let meta = fs::metadata(source).map_err(|e| Failure::io(source, &e))?;
    let policy = TrustPolicy::load(&home.trust_policy_file())?;
    let agents = home.agents_dir();
    crate::fsutil::create_private_dir_all(&agents).map_err(|e| Failure::io(&agents, &e))?;
    // First, so that what an interrupted install set aside counts as installed.
    sweep_leftovers(&agents);
    let check_options = Options {
        trust: Trust::Policy(&policy),
        require_signature: !options.allow_unsigned,
        registries: Some(registries),
    };
    let hint = |f: Failure| match f.reason {
        Reason::Unsigned => f.with_help("sign it (`rlp sign`), or pass --allow-unsigned to install it anyway"),
        _ => f,
    };
    // An archive is verified completely before anything is written.
    let checked_manifest = if meta.is_dir() {
        None
    } else {
        let file = File::open(source).map_err(|e| Failure::io(source, &e))?;
        let evidence = reader::read_archive(file, &Limits::default(), &mut reader::Discard)?;
        let verified = verify::check(&evidence, &check_options).map_err(hint)?;
        replaced_version(&agents.join(&verified.name), &verified, options.force)?;
        Some(evidence.manifest_bytes)
    };
    let staging = tempfile::Builder::new()
        .prefix(&format!("{STAGING_PREFIX}{}-", std::process::id()))
        .permissions(fs::Permissions::from_mode(0o700))
        .tempdir_in(&agents)
        .map_err(|e| Failure::io(&agents, &e))?;
    let mut sink = DirSink::new(staging.path());
    let evidence = if meta.is_dir() {
        copy_dir(source, &mut sink)?
    } else {
        let file = File::open(source).map_err(|e| Failure::io(source, &e))?;
        reader::read_archive_content(file, &Limits::default(), &mut sink)?
    };
    if checked_manifest.is_some_and(|bytes| bytes != evidence.manifest_bytes) {
        return Err(Failure::new(
            Reason::Archive,
            format!("{} changed while it was being installed", source.display()),
        ));
    }
    // The staged copy itself is what counts.
    let verified = verify::check(&evidence, &check_options).map_err(hint)?;

    let target = agents.join(&verified.name);
    let replaced = replaced_version(&target, &verified, options.force)?;

    sink.sync().map_err(|e| Failure::io(staging.path(), &e))?;
    fs::set_permissions(staging.path(), fs::Permissions::from_mode(0o755))
        .map_err(|e| Failure::io(staging.path(), &e))?;
    move_into_place(staging.path(), &target, &agents, &verified.name)?;
    let _ = staging.keep();
    crate::fsutil::sync_dir(&agents).map_err(|e| Failure::io(&agents, &e))?;
    Ok(Installed { verified, path: target, replaced })
}

/// Decides whether `verified` may replace what is installed at `target`:
/// the replaced version, `None` if nothing is installed, or a refusal
/// (rollback, or the same version without `force`).
fn replaced_version(target: &Path, verified: &Verified, force: bool) -> Result<Option<semver::Version>, Failure> {
    Ok(match installed_version(target)? {
        None => None,
        // SemVer precedence: build metadata (`+build.5`) does not order versions.
        Some(Ok(old)) if verified.version.cmp_precedence(&old).is_lt() => {
            return Err(Failure::new(
                Reason::Rollback,
                format!("{} {old} is installed; refusing to roll back to {}", verified.name, verified.version),
            )
            .with_help(format!("to downgrade on purpose, remove {} first", target.display())));
        }
        Some(Ok(old)) if verified.version.cmp_precedence(&old).is_eq() && !force => {
            return Err(Failure::new(Reason::Usage, format!("{} {old} is already installed", verified.name))
                .with_help("pass --force to install it again"));
        }
        Some(Ok(old)) => Some(old),
        Some(Err(why)) if !force => {
            return Err(Failure::new(
                Reason::Usage,
                format!("the installed copy at {} is unreadable: {why}", target.display()),
            )
            .with_help("pass --force to replace it"));
        }
        Some(Err(_)) => None,
    })
}

/// The version installed at `target`: `None` if nothing is there,
/// `Some(Err)` if something is there but its manifest cannot be read.
fn installed_version(target: &Path) -> Result<Option<Result<semver::Version, String>>, Failure> {
    match fs::symlink_metadata(target) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Failure::io(target, &e)),
        Ok(meta) if !meta.is_dir() => return Ok(Some(Err("it is not a folder".into()))),
        Ok(_) => {}
    }
    let bytes = match verify::read_regular(&target.join(MANIFEST_FILE), MANIFEST_FILE, verify::MAX_MANIFEST_BYTES) {
        Ok(bytes) => bytes,
        Err(f) => return Ok(Some(Err(f.message))),
    };
    Ok(Some(
        verify::parse_manifest(&bytes)
            .map(|m| m.semver().unwrap_or(semver::Version::new(0, 0, 0)))
            .map_err(|f| f.message),
    ))
}

/// Puts `staged` at `target`, replacing what is there (a folder named
/// `name` in `agents`): the two swap places in one step, and the replaced
/// copy, now at `staged`, is removed. Where the file system cannot swap,
/// [`replace_in_two_steps`].
fn move_into_place(staged: &Path, target: &Path, agents: &Path, name: &str) -> Result<(), Failure> {
    if fs::symlink_metadata(target).is_err() {
        return fs::rename(staged, target).map_err(|e| Failure::io(target, &e));
    }
    match crate::fsutil::exchange(staged, target) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::Unsupported => return replace_in_two_steps(staged, target, agents, name),
        Err(e) => return Err(Failure::io(target, &e)),
    }
    crate::fsutil::sync_dir(agents).map_err(|e| Failure::io(agents, &e))?;
    remove_entry(staged);
    Ok(())
}

/// Replaces `target` with `staged` in two renames, for a file system that
/// cannot swap them: `target` aside to `.old-<pid>-<random>-<name>` (which
/// [`sweep_leftovers`] puts back if the process dies before the second),
/// then `staged` in; the aside copy is put back if the second rename fails,
/// and removed once the new copy is in place.
fn replace_in_two_steps(staged: &Path, target: &Path, agents: &Path, name: &str) -> Result<(), Failure> {
    let random = getrandom::u64().map_err(|e| Failure::new(Reason::Unreadable, format!("no random source: {e}")))?;
    let aside_path = agents.join(format!("{ASIDE_PREFIX}{}-{random:016x}-{name}", std::process::id()));
    fs::rename(target, &aside_path).map_err(|e| Failure::io(target, &e))?;
    if let Err(e) = fs::rename(staged, target) {
        let _ = fs::rename(&aside_path, target);
        return Err(Failure::io(target, &e));
    }
    crate::fsutil::sync_dir(agents).map_err(|e| Failure::io(agents, &e))?;
    // The new copy is in place; a leftover is skipped by `agent list` and swept later.
    remove_entry(&aside_path);
    Ok(())
}

/// Prefix of a staging folder: `.staging-<pid>-<random>`.
const STAGING_PREFIX: &str = ".staging-";
/// Prefix of an installed copy set aside while it is replaced:
/// `.old-<pid>-<random>-<name>`.
const ASIDE_PREFIX: &str = ".old-";

/// Cleans up after installs interrupted for good (killed, power lost) in
/// `agents/`, for the entries whose process, named in the entry, no longer
/// runs: a copy set aside whose `agents/<name>` is missing is put back
/// first (the replacement never finished, so the old copy is still the
/// installed one); then staging folders and copies set aside are removed.
fn sweep_leftovers(agents: &Path) {
    for aside in crate::leftovers::dead_entries(agents, &[ASIDE_PREFIX]) {
        let Some(target) = aside_target(&aside) else { continue };
        let owned_folder = fs::symlink_metadata(&aside).is_ok_and(|m| m.is_dir() && m.uid() == geteuid().as_raw());
        if owned_folder && fs::symlink_metadata(&target).is_err_and(|e| e.kind() == io::ErrorKind::NotFound) {
            let _ = fs::rename(&aside, &target);
        }
    }
    crate::leftovers::sweep(agents, &[STAGING_PREFIX, ASIDE_PREFIX], crate::leftovers::Kind::Any);
}

/// Where a copy set aside (`.old-<pid>-<random>-<name>`) was installed:
/// `agents/<name>`, or `None` for a name of another form.
fn aside_target(aside: &Path) -> Option<PathBuf> {
    let file_name = aside.file_name()?.to_str()?;
    let mut parts = file_name.strip_prefix(ASIDE_PREFIX)?.splitn(3, '-');
    let (_pid, _random, name) = (parts.next()?, parts.next()?, parts.next()?);
    (!name.is_empty() && !name.starts_with('.')).then(|| aside.with_file_name(name))
}

/// Removes a folder with its contents, or a file.
fn remove_entry(path: &Path) {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => drop(fs::remove_dir_all(path)),
        Ok(_) => drop(fs::remove_file(path)),
        Err(_) => {}
    }
}

/// Copies a bundle folder into `sink`, hashing every listed file on the way
/// (unlisted files are not copied; verification reports them).
pub(crate) fn copy_dir(dir: &Path, sink: &mut dyn Sink) -> Result<Evidence, Failure> {
    let scan = verify::scan_dir(dir)?;
    let sink_err = |path: &str, e: io::Error| Failure::new(Reason::Unreadable, format!("cannot stage `{path}`: {e}"));
    sink.begin_file(MANIFEST_FILE, false).map_err(|e| sink_err(MANIFEST_FILE, e))?;
    sink.write(&scan.manifest_bytes).map_err(|e| sink_err(MANIFEST_FILE, e))?;
    sink.end_file().map_err(|e| sink_err(MANIFEST_FILE, e))?;
    if let Some(bytes) = &scan.signature {
        sink.begin_file(SIGNATURE_FILE, false).map_err(|e| sink_err(SIGNATURE_FILE, e))?;
        sink.write(bytes).map_err(|e| sink_err(SIGNATURE_FILE, e))?;
        sink.end_file().map_err(|e| sink_err(SIGNATURE_FILE, e))?;
    }
    let listed: std::collections::HashSet<&str> = scan.manifest.listed().map(|a| a.path.as_str()).collect();
    let caps_file = scan.manifest.caps_file.as_str();
    let mut files = std::collections::BTreeMap::new();
    let mut policy_text = None;
    let mut buffer = vec![0u8; 1 << 16];
    for (path, facts) in &scan.walk.files {
        if !listed.contains(path.as_str()) {
            files.insert(path.clone(), FileFacts { size: facts.size, digest: None });
            continue;
        }
        let full = dir.join(path);
        let mut file = File::open(&full).map_err(|e| Failure::io(&full, &e))?;
        let executable = file.metadata().map_err(|e| Failure::io(&full, &e))?.permissions().mode() & 0o100 != 0;
        sink.begin_file(path, executable).map_err(|e| sink_err(path, e))?;
        let keep = path == caps_file && facts.size <= MAX_POLICY_BYTES;
        let mut kept = Vec::new();
        let mut hasher = blake3::Hasher::new();
        let mut size = 0u64;
        loop {
            let n = match file.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Failure::io(&full, &e)),
            };
            hasher.update(&buffer[..n]);
            if keep {
                kept.extend_from_slice(&buffer[..n]);
            }
            sink.write(&buffer[..n]).map_err(|e| sink_err(path, e))?;
            size += n as u64;
        }
        sink.end_file().map_err(|e| sink_err(path, e))?;
        if keep {
            policy_text = Some(kept);
        }
        let digest = crate::bundle::manifest::Digest(*hasher.finalize().as_bytes());
        files.insert(path.clone(), FileFacts { size, digest: Some(digest) });
    }
    Ok(Evidence {
        manifest_bytes: scan.manifest_bytes,
        manifest: scan.manifest,
        signature: scan.signature,
        files,
        policy_text,
    })
}

/// The state of one installed bundle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// Verified and signed by a trusted, unrevoked key within its rule.
    Ok,
    /// Verified, but carries no signature.
    Unsigned,
    /// A file's size or digest differs from the manifest.
    DigestMismatch,
    /// Files were added, removed or replaced by links.
    FilesChanged,
    /// The signature does not match the manifest.
    BadSignature,
    /// Signed by a key that is not a trust anchor.
    Untrusted,
    /// Signed by a revoked key.
    Revoked,
    /// Requests capabilities beyond the signer's rule.
    CapabilitiesBeyondRule,
    /// The manifest is unreadable, or the folder name differs from its name.
    Invalid,
}

impl Status {
    /// The label shown and written to JSON.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Unsigned => "unsigned",
            Status::DigestMismatch => "digest mismatch",
            Status::FilesChanged => "files changed",
            Status::BadSignature => "bad signature",
            Status::Untrusted => "untrusted",
            Status::Revoked => "revoked",
            Status::CapabilitiesBeyondRule => "capabilities beyond rule",
            Status::Invalid => "invalid",
        }
    }

    /// Whether the bundle may be used as it is (ok, or unsigned).
    pub(crate) fn is_usable(self) -> bool {
        matches!(self, Status::Ok | Status::Unsigned)
    }

    fn of(failure: &Failure) -> Status {
        match failure.reason {
            Reason::Size | Reason::Digest => Status::DigestMismatch,
            Reason::FileSet | Reason::NotRegular => Status::FilesChanged,
            Reason::Signature => Status::BadSignature,
            Reason::Untrusted => Status::Untrusted,
            Reason::Revoked => Status::Revoked,
            Reason::Capability => Status::CapabilitiesBeyondRule,
            _ => Status::Invalid,
        }
    }
}

/// One row of `rlp agent list`.
#[derive(Debug)]
pub(crate) struct Listed {
    /// The folder name under `agents/`.
    pub name: String,
    /// The manifest's version, if readable.
    pub version: Option<String>,
    /// Its verification status.
    pub status: Status,
    /// What verification said (empty when ok).
    pub detail: String,
    /// The signer, when verification got that far.
    pub signer: Option<verify::Signer>,
}

/// Re-verifies every installed bundle against the trust policy.
pub(crate) fn list(home: &Home) -> Result<Vec<Listed>, Failure> {
    let policy = TrustPolicy::load(&home.trust_policy_file())?;
    let agents = home.agents_dir();
    let mut names: Vec<String> = match fs::read_dir(&agents) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter(|name| !name.starts_with('.'))
            .collect(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(Failure::io(&agents, &e)),
    };
    names.sort();
    let options = Options { trust: Trust::Policy(&policy), require_signature: false, registries: None };
    Ok(names
        .into_iter()
        .map(|name| {
            let dir = agents.join(&name);
            let version = crate::fsutil::read_limited(&dir.join(MANIFEST_FILE), verify::MAX_MANIFEST_BYTES)
                .ok()
                .and_then(|bytes| verify::parse_manifest(&bytes).ok())
                .and_then(|m| m.version);
            match verify::verify_dir(&dir, &options) {
                Ok(v) if v.name != name => Listed {
                    name,
                    version,
                    status: Status::Invalid,
                    detail: format!("the folder holds bundle `{}`", v.name),
                    signer: v.signer,
                },
                Ok(v) => Listed {
                    name,
                    version,
                    status: if v.signer.is_some() { Status::Ok } else { Status::Unsigned },
                    detail: String::new(),
                    signer: v.signer,
                },
                Err(f) => Listed { name, version, status: Status::of(&f), detail: f.message, signer: None },
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `agents/` holding an installed `demo` (an `old` file) and a staged
    /// copy (a `new` file).
    fn installed_and_staged() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let agents = tempfile::tempdir().unwrap();
        let (target, staged) = (agents.path().join("demo"), agents.path().join(".staging-1-x"));
        for (dir, file) in [(&target, "old"), (&staged, "new")] {
            fs::create_dir(dir).unwrap();
            fs::write(dir.join(file), "").unwrap();
        }
        (agents, target, staged)
    }

    /// The names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn a_replaced_copy_is_gone_once_the_new_one_is_in_place_by_either_way() {
        type Replace = fn(&Path, &Path, &Path, &str) -> Result<(), Failure>;
        for replace in [move_into_place as Replace, replace_in_two_steps] {
            let (agents, target, staged) = installed_and_staged();
            replace(&staged, &target, agents.path(), "demo").unwrap();
            assert_eq!(names(agents.path()), ["demo"]);
            assert_eq!(names(&target), ["new"]);
        }
    }

    #[test]
    fn only_a_copy_set_aside_names_where_it_was_installed() {
        let agents = Path::new("/home/agents");
        assert_eq!(aside_target(&agents.join(".old-12-00ff-my-agent")), Some(agents.join("my-agent")));
        assert_eq!(aside_target(&agents.join(".old-12-00ff")), None, "an aside name without the agent's");
        assert_eq!(aside_target(&agents.join(".old-12-00ff-.hidden")), None);
        assert_eq!(aside_target(&agents.join(".staging-12-00ff-demo")), None);
    }
}
