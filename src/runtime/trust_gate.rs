//! Trust at call time: before each call, a bundle that carries a signature,
//! and every bundle installed under `$RUNLOOP_HOME/agents/`, is verified
//! again against the trust policy — sizes, digests, the file set, the
//! signature, revocations and the signer's rule — so that a key revoked,
//! a rule narrowed or a file changed after install refuses the call.
//!
//! An unsigned working folder outside the home is not checked (that is how
//! authors test); [`TrustGate::note`] says so.
//!
//! Verification hashes every file, so its verdict is kept while nothing it
//! depends on changes: the fingerprint is the inode, size, modification and
//! change times of every bundle file and of the trust policy. A change time
//! cannot be set from user space, so any write to any of them is seen. A
//! verdict is kept in the process, and a successful one also in the home
//! for the next process ([`crate::runtime::trust_cache`]).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::bundle::inventory::hash_bytes;
use crate::bundle::manifest::{Digest, MANIFEST_FILE, SIGNATURES_DIR};
use crate::event::Decision;
use crate::home::Home;
use crate::integrity::failure::{Failure, Reason};
use crate::integrity::trust::TrustPolicy;
use crate::integrity::verify::{self, Options, Signer, Trust};
use crate::runtime::error::{CallError, CallErrorKind};
use crate::runtime::journal::Journal;
use crate::runtime::trust_cache::{TrustCache, cache_key};

/// The `capability` of the audit frame ([`crate::event::EventKind::CapAudit`]) that records the trust gate's decision.
pub(crate) const TRUST_AUDIT: &str = "trust";

/// Deepest folder nesting fingerprinted (deeper bundles are never cached).
const MAX_FINGERPRINT_DEPTH: usize = 32;

/// Why a bundle is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Checked {
    /// It is installed under the home's `agents/`.
    Installed,
    /// It is a working folder that carries `SIGNATURES/manifest.sig`.
    Signed,
}

/// What the gate found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// An unsigned working folder outside the home: callable, not checked.
    Unchecked,
    /// Verified: installed or signed, within the trust policy.
    Verified {
        /// Why it was checked.
        checked: Checked,
        /// Who signed it (`None`: installed unsigned with `--allow-unsigned`).
        signer: Option<Signer>,
        /// BLAKE3 of the manifest.toml verified (whose digests cover every
        /// other file).
        manifest: Digest,
    },
}

/// What the runtime read of a bundle when it loaded it. A call is admitted
/// only when that is what the gate verifies: a file changed between the
/// load and the check (and perhaps changed back) would otherwise run
/// unverified bytes.
#[derive(Clone, Debug, Default)]
pub(crate) struct Loaded {
    /// BLAKE3 of manifest.toml as read (`None`: not read).
    pub(crate) manifest: Option<Digest>,
    /// The first other file read whose bytes are not those its digest in
    /// that manifest.toml names.
    pub(crate) differs: Option<String>,
}

impl Loaded {
    /// What was read of `bundle`: its manifest's digest, and the first
    /// bundle file read (the policy, tools.json, schemas) that does not
    /// match the digest that manifest lists for it.
    pub(crate) fn of(bundle: &crate::bundle::LoadedBundle) -> Loaded {
        let manifest = bundle.sources.get(MANIFEST_FILE).map(|source| hash_bytes(source.text().as_bytes()));
        let listed = |path: &str| {
            bundle.manifest.as_ref()?.listed().find(|artifact| artifact.path == path).and_then(|a| a.blake3)
        };
        let differs = bundle
            .sources
            .iter()
            // Shared schemas (absolute paths) are held to their pins at load.
            .filter(|(path, _)| path.as_str() != MANIFEST_FILE && !Path::new(path).is_absolute())
            .find(|(path, source)| listed(path) != Some(hash_bytes(source.text().as_bytes())))
            .map(|(path, _)| path.clone());
        Loaded { manifest, differs }
    }

    /// `admission`, when a verified bundle is the one that was read.
    fn agrees(&self, admission: Admission) -> Result<Admission, Failure> {
        let Admission::Verified { manifest, .. } = &admission else { return Ok(admission) };
        let changed = match &self.differs {
            Some(path) => format!("`{path}` as rlp loaded it does not match its digest in manifest.toml"),
            None if self.manifest.is_none() => "rlp could not read the bundle when it loaded it".to_string(),
            None if self.manifest != Some(*manifest) => "manifest.toml changed since rlp loaded the bundle".to_string(),
            None => return Ok(admission),
        };
        Err(Failure::new(Reason::Digest, format!("{changed}: rlp runs only the bundle it verifies"))
            .with_help("run the command again (restart `rlp serve`) to load the bundle as it is now"))
    }
}

/// One bundle's trust check, with its last verdict cached.
#[derive(Debug)]
pub(crate) struct TrustGate {
    root: PathBuf,
    folder_name: String,
    installed: bool,
    policy_file: PathBuf,
    cache: Mutex<Option<Verdict>>,
    persisted: TrustCache,
    loaded: Loaded,
}

/// A verdict and the fingerprint of what it was reached on.
#[derive(Debug)]
struct Verdict {
    fingerprint: Vec<u64>,
    outcome: Result<Admission, Failure>,
}

impl TrustGate {
    /// The gate for the bundle at `root` (absolute, canonical) under `home`.
    pub(crate) fn new(root: &Path, home: &Home) -> TrustGate {
        let installed = home.agents_dir().canonicalize().is_ok_and(|agents| root.parent() == Some(agents.as_path()));
        TrustGate {
            root: root.to_path_buf(),
            folder_name: root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            installed,
            policy_file: home.trust_policy_file(),
            cache: Mutex::new(None),
            persisted: TrustCache::new(home, root),
            loaded: Loaded::default(),
        }
    }

    /// The gate, admitting calls only to the bundle as `loaded` read it.
    pub(crate) fn expecting(self, loaded: Loaded) -> TrustGate {
        TrustGate { loaded, ..self }
    }

    /// Why the bundle is checked; `None` for an unsigned working folder (one
    /// look for `SIGNATURES/`). A folder that cannot be looked at is checked,
    /// and refused.
    fn checked(&self) -> Result<Option<Checked>, Failure> {
        if self.installed {
            return Ok(Some(Checked::Installed));
        }
        let signatures = self.root.join(SIGNATURES_DIR);
        match fs::symlink_metadata(&signatures) {
            Ok(_) => Ok(Some(Checked::Signed)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Failure::io(&signatures, &e)),
        }
    }

    /// A note for the person running an unchecked bundle, if it is one.
    pub(crate) fn note(&self) -> Option<String> {
        matches!(self.checked(), Ok(None)).then(|| {
            format!("{} is an unsigned working folder: it is not checked against the trust policy", self.root.display())
        })
    }

    /// Step 0 of a call: the bundle as it is now, against the trust policy
    /// as it is now. A verified bundle's allow event is recorded with the
    /// call; a refusal of agent `agent` is recorded at once.
    pub(crate) fn admit(&self, agent: &str, journal: &mut Journal<'_>) -> Result<(), CallError> {
        match self.check().and_then(|admission| self.loaded.agrees(admission)) {
            Ok(Admission::Unchecked) => Ok(()),
            Ok(Admission::Verified { checked, signer, .. }) => {
                let what = match checked {
                    Checked::Installed => "installed bundle verified",
                    Checked::Signed => "signed bundle verified",
                };
                let by = match signer {
                    Some(Signer { key_id, anchor: Some(anchor) }) => {
                        format!("signed by trust anchor `{anchor}` (key {key_id}), within its rule")
                    }
                    Some(Signer { key_id, anchor: None }) => format!("signed by key {key_id}"),
                    None => "unsigned (installed with --allow-unsigned)".to_string(),
                };
                journal.audit_named(TRUST_AUDIT, Decision::Allow, &format!("{what}: {by}"));
                Ok(())
            }
            Err(failure) => {
                journal.audit_named(TRUST_AUDIT, Decision::Deny, &failure.message);
                let error = CallError::new(
                    CallErrorKind::Refused,
                    format!("bundle `{agent}` is refused by the trust policy: {}", failure.message),
                );
                Err(journal.refuse(match failure.help {
                    Some(help) => error.help(help),
                    None => error,
                }))
            }
        }
    }

    /// Checks the bundle now (or reuses the verdict of an unchanged bundle).
    pub(crate) fn check(&self) -> Result<Admission, Failure> {
        let Some(checked) = self.checked()? else { return Ok(Admission::Unchecked) };
        let fingerprint = self.fingerprint();
        let mut cache = self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let (Some(now), Some(before)) = (&fingerprint, cache.as_ref())
            && *now == before.fingerprint
        {
            return before.outcome.clone();
        }
        // Another process may have verified the bundle as it is now.
        let key = fingerprint.as_deref().map(|f| cache_key(&self.root, f));
        let outcome = match key.as_ref().and_then(|key| self.persisted.load(key)) {
            Some(admission) => Ok(admission),
            None => {
                let outcome = self.verify(checked);
                if let (Some(key), Ok(admission)) = (&key, &outcome) {
                    self.persisted.store(key, admission);
                }
                outcome
            }
        };
        *cache = fingerprint.map(|fingerprint| Verdict { fingerprint, outcome: outcome.clone() });
        outcome
    }

    fn verify(&self, checked: Checked) -> Result<Admission, Failure> {
        let policy = TrustPolicy::load(&self.policy_file)?;
        let options =
            Options { trust: Trust::Policy(&policy), require_signature: checked == Checked::Signed, registries: None };
        let evidence = verify::collect_dir(&self.root).map_err(|f| with_call_help(f, checked))?;
        let verified = verify::check(&evidence, &options).map_err(|f| with_call_help(f, checked))?;
        if checked == Checked::Installed && verified.name != self.folder_name {
            return Err(Failure::new(
                Reason::Manifest,
                format!("the installed folder `{}` holds bundle `{}`", self.folder_name, verified.name),
            )
            .with_help("install the bundle again with `rlp agent install`"));
        }
        Ok(Admission::Verified { checked, signer: verified.signer, manifest: hash_bytes(&evidence.manifest_bytes) })
    }

    /// The metadata of every entry of the bundle and of the trust policy, in
    /// walk order; `None` when the bundle cannot be walked (never cached).
    fn fingerprint(&self) -> Option<Vec<u64>> {
        let mut out = Vec::with_capacity(64);
        push_meta(&mut out, fs::symlink_metadata(&self.policy_file).ok().as_ref());
        fingerprint_dir(&self.root, 0, &mut out).then_some(out)
    }
}

fn push_meta(out: &mut Vec<u64>, meta: Option<&fs::Metadata>) {
    match meta {
        None => out.push(u64::MAX),
        Some(m) => out.extend([
            m.dev(),
            m.ino(),
            m.mode().into(),
            m.nlink(),
            m.size(),
            m.mtime() as u64,
            m.mtime_nsec() as u64,
            m.ctime() as u64,
            m.ctime_nsec() as u64,
        ]),
    }
}

fn fingerprint_dir(dir: &Path, depth: usize, out: &mut Vec<u64>) -> bool {
    if depth > MAX_FINGERPRINT_DEPTH {
        return false;
    }
    let Ok(meta) = fs::symlink_metadata(dir) else { return false };
    push_meta(out, Some(&meta));
    let Ok(entries) = fs::read_dir(dir) else { return false };
    let mut entries: Vec<_> = match entries.collect::<Result<Vec<_>, _>>() {
        Ok(entries) => entries,
        Err(_) => return false,
    };
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        out.push(u64::MAX - 1);
        out.extend(entry.file_name().as_encoded_bytes().iter().map(|b| u64::from(*b)));
        let Ok(meta) = entry.metadata() else { return false };
        if meta.is_dir() {
            if !fingerprint_dir(&entry.path(), depth + 1, out) {
                return false;
            }
        } else {
            push_meta(out, Some(&meta));
        }
    }
    true
}

/// Adds what to do at call time to a verification failure.
fn with_call_help(failure: Failure, checked: Checked) -> Failure {
    let help = match (failure.reason, checked) {
        (Reason::Untrusted, Checked::Signed) => {
            "add the signer as a trust anchor (`rlp trust add <their.pub> --name NAME`), or remove SIGNATURES/ to call the folder as an unsigned working copy".to_string()
        }
        (Reason::Signature | Reason::Digest | Reason::Size | Reason::FileSet, Checked::Signed) => {
            "the bundle changed after it was signed: sign it again (`rlp digest`, then `rlp sign`), or remove SIGNATURES/ to call it as an unsigned working copy".to_string()
        }
        (Reason::Signature | Reason::Digest | Reason::Size | Reason::FileSet | Reason::NotRegular, Checked::Installed) => {
            "the installed bundle changed after it was installed: install it again from its signed archive (`rlp agent install --force`)".to_string()
        }
        _ => return failure,
    };
    failure.with_help(help)
}
