//! `rlp digest`: bring manifest.toml's size and BLAKE3 entries in line with
//! the bundle's files — and its `[shared_schemas."<id>"]` pins in line with
//! the shared registry files its `schema:<id>` references resolve to —
//! rewriting only those values (toml_edit keeps the author's comments,
//! order and layout).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use toml_edit::{DocumentMut, Item, Table, Value};

use crate::bundle::inventory::file_refusal;
use crate::bundle::manifest::{CAPS_KEY, Digest, MANIFEST_FILE, SHARED_SCHEMAS_KEY, TOOLS_KEY};
use crate::bundle::registry::Registries;
use crate::bundle::schema::SCHEMA_SCHEME;
use crate::bundle::tools::TOOLS_FILE;
use crate::integrity::walk::walk;

/// What digest did (or, with `--check`, would do) to one manifest entry: a
/// file's (named by its path) or a shared schema pin's (named `schema:<id>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A file that was not listed is now listed.
    Added(String),
    /// A listed file's size or digest changed.
    Updated(String),
    /// A listed file no longer exists; its entry is removed.
    Removed(String),
}

impl Change {
    /// The bundle path concerned.
    pub fn path(&self) -> &str {
        match self {
            Change::Added(p) | Change::Updated(p) | Change::Removed(p) => p,
        }
    }

    /// Whether the entry is a shared schema pin (`schema:<id>`).
    pub fn is_pin(&self) -> bool {
        self.path().starts_with(SCHEMA_SCHEME)
    }

    /// How `--check` names the problem: extra (unlisted), stale, missing.
    pub fn check_word(&self) -> &'static str {
        match self {
            Change::Added(_) => "extra",
            Change::Updated(_) => "stale",
            Change::Removed(_) => "missing",
        }
    }
}

/// Why digest could not run.
#[derive(Debug, thiserror::Error)]
pub enum DigestError {
    /// The folder has no manifest.toml.
    #[error("{0} has no manifest.toml")]
    NoManifest(PathBuf),
    /// manifest.toml is not valid TOML.
    #[error("{path}: invalid TOML: {message}")]
    Syntax {
        /// The manifest's path.
        path: PathBuf,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A table the rewrite needs has another type.
    #[error("{path}: `{key}` must be a table")]
    Shape {
        /// The manifest's path.
        path: PathBuf,
        /// The offending key.
        key: String,
    },
    /// The bundle holds entries that are not regular files.
    #[error("{path} cannot be part of a bundle: {why}")]
    Refused {
        /// The offending entry.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// manifest.toml could not be read, or is larger than a manifest may be.
    #[error("{source}")]
    Read {
        /// The manifest's path.
        path: PathBuf,
        /// The error.
        source: crate::fsutil::ReadError,
    },
    /// Reading a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// The outcome of planning a digest run.
#[derive(Debug)]
pub struct Plan {
    /// Entry changes, in path order.
    pub changes: Vec<Change>,
    /// The manifest text as it is.
    pub before: String,
    /// The manifest text with every entry up to date.
    pub after: String,
}

/// Size and digest of every file of the bundle, by path.
type Hashes = BTreeMap<String, (u64, Digest)>;

/// What `[shared_schemas]` should hold, by id: the size and digest of the
/// registry file a `schema:<id>` outside the bundle resolves to, or `None`
/// for one referenced but not found (or unreadable), whose pin is kept.
type Pins = BTreeMap<String, Option<(u64, Digest)>>;

/// The pins the bundle in `dir` needs, its shared schemas looked up in `registries`.
fn shared_pins(dir: &Path, registries: &Registries) -> Pins {
    let bundle = crate::bundle::load_with(dir, registries);
    bundle
        .shared
        .into_iter()
        .map(|(id, shared)| {
            let found = match shared.found {
                Some((_, Ok(file))) => Some((file.size, file.digest)),
                _ => None,
            };
            (id, found)
        })
        .collect()
}

/// Reads manifest.toml, which must be a regular file with a single name:
/// a link would make rlp read (and quote in its errors) a file outside
/// the bundle.
fn read_manifest(dir: &Path) -> Result<(PathBuf, String), DigestError> {
    let manifest_path = dir.join(MANIFEST_FILE);
    if let Some(why) = std::fs::symlink_metadata(&manifest_path).ok().as_ref().and_then(file_refusal) {
        return Err(DigestError::Refused { path: manifest_path, why });
    }
    match crate::fsutil::read_text_limited(&manifest_path, crate::integrity::verify::MAX_MANIFEST_BYTES) {
        Ok(text) => Ok((manifest_path, text)),
        Err(crate::fsutil::ReadError::Io(e))
            if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) =>
        {
            Err(DigestError::NoManifest(dir.to_path_buf()))
        }
        Err(source) => Err(DigestError::Read { path: manifest_path, source }),
    }
}

/// Walks the bundle (one parallel pass: links and devices refused, small
/// files hashed), then hashes the large files memory-mapped on every core.
fn hash_all(dir: &Path) -> Result<Hashes, DigestError> {
    let io = |e: crate::integrity::walk::WalkError| DigestError::Io { path: e.path, source: e.source };
    let mut found = walk(dir).map_err(io)?;
    if let Some(refused) = found.refused.first() {
        return Err(DigestError::Refused { path: dir.join(&refused.path), why: refused.why.clone() });
    }
    found.hash_large(dir, |_| true).map_err(io)?;
    Ok(found.files.into_iter().filter_map(|(path, facts)| facts.digest.map(|d| (path, (facts.size, d)))).collect())
}

/// One edit of the manifest document.
#[derive(Debug)]
enum Action {
    /// Update `[agent].<key>` (the entry binary).
    Entry { key: &'static str, size: u64, digest: Digest },
    /// Update `[artifacts.<key>]` (and give `tools` its `version`).
    Update { key: String, size: u64, digest: Digest, add_version: bool },
    /// Remove `[artifacts.<key>]`.
    Remove { key: String },
    /// Add `[artifacts.<key>]`.
    Add { key: String, path: String, size: u64, digest: Digest },
    /// Add or update `[shared_schemas."<id>"]`.
    Pin { id: String, size: u64, digest: Digest },
    /// Remove `[shared_schemas."<id>"]`.
    Unpin { id: String },
}

/// Whether an entry's `blake3` and `size` differ from the file's.
fn is_stale(entry: &dyn toml_edit::TableLike, size: u64, digest: &Digest) -> bool {
    let hex = digest.to_string();
    let same_digest = matches!(entry.get("blake3"), Some(Item::Value(v)) if v.as_str() == Some(hex.as_str()));
    let same_size = matches!(entry.get("size"), Some(Item::Value(v)) if v.as_integer() == Some(size as i64));
    !(same_digest && same_size)
}

/// Decides every change from the manifest as written and the files found.
fn decide(
    root: &Table,
    hashes: &Hashes,
    pins: &Pins,
    manifest_path: &Path,
) -> Result<(Vec<Change>, Vec<Action>), DigestError> {
    let shape = |key: &str| DigestError::Shape { path: manifest_path.to_path_buf(), key: key.to_string() };
    let caps_file = root.get("caps").and_then(|c| c.get("file")).and_then(Item::as_str).unwrap_or("policy.caps");
    let mut changes = Vec::new();
    let mut actions = Vec::new();
    let mut listed: HashSet<&str> = HashSet::new();

    // The entry binary, inside [agent].
    if let Some(agent) = root.get("agent").and_then(Item::as_table_like) {
        for key in ["entry_wasm", "entry_native"] {
            let Some(entry) = agent.get(key).and_then(Item::as_table_like) else { continue };
            let Some(path) = entry.get("path").and_then(Item::as_str) else { continue };
            if let Some((path, (size, digest))) = hashes.get_key_value(path) {
                if is_stale(entry, *size, digest) {
                    changes.push(Change::Updated(path.clone()));
                    actions.push(Action::Entry { key, size: *size, digest: *digest });
                }
                listed.insert(path);
            }
        }
    }

    // Existing entries: update or remove.
    let artifacts = match root.get("artifacts") {
        None => None,
        Some(item) => Some(item.as_table().ok_or_else(|| shape("artifacts"))?),
    };
    let mut keys: HashSet<String> =
        artifacts.map(|t| t.iter().map(|(k, _)| k.to_string()).collect()).unwrap_or_default();
    for (key, item) in artifacts.iter().flat_map(|t| t.iter()) {
        let entry = item.as_table_like().ok_or_else(|| shape(&format!("artifacts.{key}")))?;
        let path = entry.get("path").and_then(Item::as_str).unwrap_or(key);
        match hashes.get_key_value(path) {
            Some((path, _)) if listed.contains(path.as_str()) => {
                keys.remove(key);
                changes.push(Change::Removed(path.clone()));
                actions.push(Action::Remove { key: key.to_string() });
            }
            Some((path, (size, digest))) => {
                let add_version = key == TOOLS_KEY && !entry.contains_key("version");
                let stale = is_stale(entry, *size, digest);
                if stale {
                    changes.push(Change::Updated(path.clone()));
                }
                if stale || add_version {
                    actions.push(Action::Update { key: key.to_string(), size: *size, digest: *digest, add_version });
                }
                listed.insert(path);
            }
            None => {
                keys.remove(key);
                changes.push(Change::Removed(path.to_string()));
                actions.push(Action::Remove { key: key.to_string() });
            }
        }
    }

    // Unlisted files: add, tools.json and the caps file under their reserved keys.
    for (path, (size, digest)) in hashes {
        if listed.contains(path.as_str()) {
            continue;
        }
        let key = match path.as_str() {
            TOOLS_FILE if !keys.contains(TOOLS_KEY) => TOOLS_KEY,
            p if p == caps_file && !keys.contains(CAPS_KEY) => CAPS_KEY,
            p => p,
        };
        keys.insert(key.to_string());
        changes.push(Change::Added(path.clone()));
        actions.push(Action::Add { key: key.to_string(), path: path.clone(), size: *size, digest: *digest });
    }
    decide_pins(root, pins, manifest_path, &mut changes, &mut actions)?;
    changes.sort_by(|a, b| a.path().cmp(b.path()));
    Ok((changes, actions))
}

/// Decides the changes to `[shared_schemas]`: a pin per registry file found,
/// none for an id no longer referenced outside the bundle.
fn decide_pins(
    root: &Table,
    pins: &Pins,
    manifest_path: &Path,
    changes: &mut Vec<Change>,
    actions: &mut Vec<Action>,
) -> Result<(), DigestError> {
    let shape = |key: &str| DigestError::Shape { path: manifest_path.to_path_buf(), key: key.to_string() };
    let pinned = match root.get(SHARED_SCHEMAS_KEY) {
        None => None,
        Some(item) => Some(item.as_table().ok_or_else(|| shape(SHARED_SCHEMAS_KEY))?),
    };
    let mut seen = HashSet::new();
    for (id, item) in pinned.iter().flat_map(|t| t.iter()) {
        let entry = item.as_table_like().ok_or_else(|| shape(&format!("{SHARED_SCHEMAS_KEY}.{id}")))?;
        seen.insert(id);
        let reference = format!("{SCHEMA_SCHEME}{id}");
        match pins.get(id) {
            None => {
                changes.push(Change::Removed(reference));
                actions.push(Action::Unpin { id: id.to_string() });
            }
            Some(Some((size, digest))) if is_stale(entry, *size, digest) => {
                changes.push(Change::Updated(reference));
                actions.push(Action::Pin { id: id.to_string(), size: *size, digest: *digest });
            }
            Some(_) => {}
        }
    }
    for (id, found) in pins {
        if let Some((size, digest)) = found
            && !seen.contains(id.as_str())
        {
            changes.push(Change::Added(format!("{SCHEMA_SCHEME}{id}")));
            actions.push(Action::Pin { id: id.clone(), size: *size, digest: *digest });
        }
    }
    Ok(())
}

/// Applies the decided pins to `[shared_schemas]`, creating it when needed.
fn apply_pins(doc: &mut DocumentMut, actions: &[Action], manifest_path: &Path) -> Result<(), DigestError> {
    let shape = |key: &str| DigestError::Shape { path: manifest_path.to_path_buf(), key: key.to_string() };
    if !actions.iter().any(|a| matches!(a, Action::Pin { .. } | Action::Unpin { .. })) {
        return Ok(());
    }
    if !doc.contains_key(SHARED_SCHEMAS_KEY) {
        let mut table = Table::new();
        table.set_implicit(true);
        doc.insert(SHARED_SCHEMAS_KEY, Item::Table(table));
    }
    let pins = doc.get_mut(SHARED_SCHEMAS_KEY).and_then(Item::as_table_mut).ok_or_else(|| shape(SHARED_SCHEMAS_KEY))?;
    for action in actions {
        match action {
            Action::Pin { id, size, digest } => match pins.get_mut(id).and_then(Item::as_table_like_mut) {
                Some(entry) => {
                    set_digest(entry, *size, digest);
                }
                None => {
                    let mut table = Table::new();
                    table.insert("blake3", toml_edit::value(digest.to_string()));
                    table.insert("size", toml_edit::value(*size as i64));
                    pins.insert(id, Item::Table(table));
                }
            },
            Action::Unpin { id } => {
                pins.remove(id);
            }
            _ => {}
        }
    }
    if pins.is_empty() {
        doc.remove(SHARED_SCHEMAS_KEY);
    }
    Ok(())
}

/// Applies the decided edits, keeping every other byte's decoration.
fn apply(doc: &mut DocumentMut, actions: &[Action], manifest_path: &Path) -> Result<(), DigestError> {
    let shape = |key: &str| DigestError::Shape { path: manifest_path.to_path_buf(), key: key.to_string() };
    for action in actions {
        if let Action::Entry { key, size, digest } = action
            && let Some(entry) =
                doc.get_mut("agent").and_then(Item::as_table_like_mut).and_then(|a| a.get_mut(key)?.as_table_like_mut())
        {
            set_digest(entry, *size, digest);
        }
    }
    if !doc.contains_key("artifacts") {
        let mut table = Table::new();
        table.set_implicit(true);
        doc.insert("artifacts", Item::Table(table));
    }
    let artifacts = doc.get_mut("artifacts").and_then(Item::as_table_mut).ok_or_else(|| shape("artifacts"))?;
    artifacts.set_implicit(true);
    for action in actions {
        match action {
            Action::Entry { .. } => {}
            Action::Update { key, size, digest, add_version } => {
                let entry = artifacts
                    .get_mut(key)
                    .and_then(Item::as_table_like_mut)
                    .ok_or_else(|| shape(&format!("artifacts.{key}")))?;
                set_digest(entry, *size, digest);
                if *add_version {
                    append_value(entry, "version", Value::from(1));
                }
            }
            Action::Remove { key } => {
                artifacts.remove(key);
            }
            Action::Add { key, path, size, digest } => {
                let mut table = Table::new();
                table.insert("path", toml_edit::value(path.as_str()));
                table.insert("blake3", toml_edit::value(digest.to_string()));
                table.insert("size", toml_edit::value(*size as i64));
                if key == TOOLS_KEY {
                    table.insert("version", toml_edit::value(1));
                }
                artifacts.insert(key, Item::Table(table));
            }
            Action::Pin { .. } | Action::Unpin { .. } => {}
        }
    }
    apply_pins(doc, actions, manifest_path)
}

/// Computes the up-to-date manifest without writing anything; shared
/// schemas are looked up in `registries`.
pub fn plan(dir: &Path, registries: &Registries) -> Result<Plan, DigestError> {
    let (manifest_path, before) = read_manifest(dir)?;
    let (doc, hashes) = rayon::join(|| before.parse::<DocumentMut>(), || hash_all(dir));
    let mut doc = doc.map_err(|e| DigestError::Syntax { path: manifest_path.clone(), message: e.to_string() })?;
    let hashes = hashes?;
    let pins = shared_pins(dir, registries);
    let (changes, actions) = decide(doc.as_table(), &hashes, &pins, &manifest_path)?;
    if changes.is_empty() {
        return Ok(Plan { changes, after: before.clone(), before });
    }
    apply(&mut doc, &actions, &manifest_path)?;
    let mut after = doc.to_string();
    if !after.ends_with('\n') {
        after.push('\n');
    }
    let after = crate::fsutil::with_line_endings_of(&before, after);
    Ok(Plan { changes, before, after })
}

/// What [`plan`] would change, without building the new manifest text: the
/// fast path of `rlp digest --check` (the manifest is parsed while the
/// bundle is walked and hashed).
pub fn check(dir: &Path, registries: &Registries) -> Result<Vec<Change>, DigestError> {
    let (manifest_path, before) = read_manifest(dir)?;
    let (doc, hashes) = rayon::join(|| toml_edit::Document::parse(before.as_str()), || hash_all(dir));
    let doc = doc.map_err(|e| DigestError::Syntax { path: manifest_path.clone(), message: e.to_string() })?;
    let hashes = hashes?;
    let pins = shared_pins(dir, registries);
    Ok(decide(doc.as_table(), &hashes, &pins, &manifest_path)?.0)
}

/// Sets `blake3` and `size` on an entry, keeping each value's decoration
/// (spacing, trailing comments). Returns whether anything changed.
fn set_digest(entry: &mut dyn toml_edit::TableLike, size: u64, digest: &Digest) -> bool {
    let hex = digest.to_string();
    let mut changed = false;
    changed |= set_value(entry, "blake3", Value::from(hex.as_str()), |v| v.as_str() == Some(hex.as_str()));
    changed |= set_value(entry, "size", Value::from(size as i64), |v| v.as_integer() == Some(size as i64));
    changed
}

fn set_value(entry: &mut dyn toml_edit::TableLike, key: &str, new: Value, same: impl Fn(&Value) -> bool) -> bool {
    match entry.get_mut(key) {
        Some(Item::Value(old)) => {
            if same(old) {
                return false;
            }
            let decor = old.decor().clone();
            *old = new;
            *old.decor_mut() = decor;
            true
        }
        _ => {
            append_value(entry, key, new);
            true
        }
    }
}

/// A decoration that is only whitespace (never a comment), as text.
fn blank(raw: Option<&toml_edit::RawString>) -> Option<&str> {
    raw.and_then(|r| r.as_str()).filter(|s| s.trim().is_empty())
}

/// Adds `key = value` after an entry's last value, spaced like it: the
/// new key and value take the last one's whitespace around the key and after
/// `=`, and in an inline table the space before the closing brace (the last
/// value's suffix) moves to the new value — `{a=1}` becomes `{a=1,b=2}` and
/// `{ a = 1 }` becomes `{ a = 1, b = 2 }`. Comments are never copied.
fn append_value(entry: &mut dyn toml_edit::TableLike, key: &str, mut value: Value) {
    let mut key_decor = None;
    if let Some((last_key, Item::Value(last))) = entry.iter_mut().last() {
        let leaf = last_key.leaf_decor();
        key_decor = blank(leaf.prefix()).zip(blank(leaf.suffix())).map(|(p, s)| (p.to_owned(), s.to_owned()));
        if let Some(prefix) = blank(last.decor().prefix()) {
            value.decor_mut().set_prefix(prefix.to_owned());
        }
        if let Some(trailing) = blank(last.decor().suffix()).map(str::to_owned) {
            last.decor_mut().set_suffix("");
            value.decor_mut().set_suffix(trailing);
        }
    }
    entry.insert(key, Item::Value(value));
    if let (Some((prefix, suffix)), Some(mut new_key)) = (key_decor, entry.key_mut(key)) {
        new_key.leaf_decor_mut().set_prefix(prefix);
        new_key.leaf_decor_mut().set_suffix(suffix);
    }
}

/// Plans and, if anything changed, writes the manifest atomically.
pub fn write(dir: &Path, registries: &Registries) -> Result<Plan, DigestError> {
    let plan = plan(dir, registries)?;
    if plan.after != plan.before {
        let path = dir.join(MANIFEST_FILE);
        crate::fsutil::write_atomic(&path, plan.after.as_bytes(), None)
            .map_err(|source| DigestError::Io { path, source })?;
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A folder with an empty tools.json and policy.caps (no manifest yet).
    fn two_file_bundle() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("tools.json"), "{\"version\": 1, \"tools\": []}").unwrap();
        fs::write(dir.path().join("policy.caps"), "[capabilities]\n").unwrap();
        dir
    }

    #[test]
    fn keeps_comments_and_only_changes_digest_values() {
        let dir = two_file_bundle();
        let root = dir.path();
        let manifest = "# identity\n[agent]\nname   =  \"demo\"   # the name\nversion = \"0.1.0\"\n\n[artifacts.tools]\npath = \"tools.json\"\nblake3 = \"0000000000000000000000000000000000000000000000000000000000000000\"   # placeholder\nversion = 1\n";
        fs::write(root.join(MANIFEST_FILE), manifest).unwrap();
        let plan = write(root, &Registries::default()).unwrap();
        assert_eq!(plan.changes, vec![Change::Added("policy.caps".into()), Change::Updated("tools.json".into())]);
        let after = fs::read_to_string(root.join(MANIFEST_FILE)).unwrap();
        assert!(after.starts_with("# identity\n[agent]\nname   =  \"demo\"   # the name\n"), "{after}");
        assert!(after.contains("   # placeholder\n"), "{after}");
        assert!(after.contains("[artifacts.caps]\npath = \"policy.caps\"\n"), "{after}");
        let (_, findings) = crate::bundle::parse_manifest(&after);
        assert!(findings.is_empty(), "{findings:?}");
        // A second run changes nothing.
        assert!(write(root, &Registries::default()).unwrap().changes.is_empty());
    }

    #[test]
    fn keys_added_to_an_entry_follow_its_spacing() {
        let dir = two_file_bundle();
        let root = dir.path();
        let digest = |name: &str| crate::bundle::inventory::hash_bytes(&fs::read(root.join(name)).unwrap()).to_string();
        let (tools, caps) = (digest("tools.json"), digest("policy.caps"));
        for (entries, want) in [
            (
                "tools = { path = \"tools.json\", blake3 = \"00\" }\ncaps = {path=\"policy.caps\",blake3=\"00\"}\n",
                format!(
                    "tools = {{ path = \"tools.json\", blake3 = \"{tools}\", size = 27, version = 1 }}\ncaps = {{path=\"policy.caps\",blake3=\"{caps}\",size=15}}\n"
                ),
            ),
            (
                "[artifacts.tools]\npath = \"tools.json\"\n# the digest\nblake3 = \"00\" # stale\n[artifacts.caps]\n  path = \"policy.caps\"\n  blake3 = \"00\"\n",
                format!(
                    "[artifacts.tools]\npath = \"tools.json\"\n# the digest\nblake3 = \"{tools}\" # stale\nsize = 27\nversion = 1\n[artifacts.caps]\n  path = \"policy.caps\"\n  blake3 = \"{caps}\"\n  size = 15\n"
                ),
            ),
        ] {
            let table = if entries.starts_with('[') { "" } else { "[artifacts]\n" };
            let head = "[agent]\nname = \"d\"\nversion = \"0.1.0\"\n";
            fs::write(root.join(MANIFEST_FILE), format!("{head}{table}{entries}")).unwrap();
            write(root, &Registries::default()).unwrap();
            assert_eq!(fs::read_to_string(root.join(MANIFEST_FILE)).unwrap(), format!("{head}{table}{want}"));
        }
    }

    #[test]
    fn check_agrees_with_plan() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("bin")).unwrap();
        fs::write(root.join("tools.json"), "{}").unwrap();
        fs::write(root.join("tools"), "x").unwrap();
        fs::write(root.join("policy.caps"), "[capabilities]\n").unwrap();
        fs::write(root.join("bin/a.wasm"), "wasm").unwrap();
        fs::write(root.join("same.txt"), "same").unwrap();
        let same = crate::bundle::inventory::hash_bytes(b"same").to_string();
        let upper = same.to_uppercase();
        let manifests = [
            format!(
                "[agent]\nname = \"d\"\nversion = \"0.1.0\"\nentry_wasm = {{ path = \"bin/a.wasm\", blake3 = \"{same}\" }}\n[artifacts.\"same.txt\"]\npath = \"same.txt\"\nblake3 = \"{same}\"\nsize = 4\n[artifacts.again]\npath = \"same.txt\"\nblake3 = \"{same}\"\nsize = 4\n"
            ),
            format!(
                "[agent]\nname = \"d\"\nversion = \"0.1.0\"\n[artifacts.\"same.txt\"]\npath = \"same.txt\"\nblake3 = \"{upper}\"\nsize = 4\n[artifacts.tools]\npath = \"gone.json\"\nblake3 = \"{same}\"\n"
            ),
            format!(
                "[agent]\nname = \"d\"\nversion = \"0.1.0\"\n[artifacts.\"same.txt\"]\npath = \"same.txt\"\nblake3 = \"{same}\"\n[caps]\nfile = \"tools\"\n"
            ),
            format!(
                "[agent]\nname = \"d\"\nversion = \"0.1.0\"\nentry_native = {{ path = \"bin/missing\", blake3 = \"{same}\" }}\n[artifacts.\"same.txt\"]\nblake3 = \"{same}\"\nsize = 4\n"
            ),
            "artifacts = 3\n[agent]\nname = \"d\"\nversion = \"0.1.0\"\n".to_string(),
        ];
        for manifest in &manifests {
            fs::write(root.join(MANIFEST_FILE), manifest).unwrap();
            match (plan(root, &Registries::default()), check(root, &Registries::default())) {
                (Ok(plan), Ok(changes)) => {
                    assert_eq!(plan.changes, changes, "{manifest}");
                    assert!(!changes.is_empty());
                }
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                (a, b) => panic!("{manifest}: {a:?} vs {b:?}"),
            }
        }
        let plan = plan(root, &Registries::default()).unwrap_err();
        assert!(plan.to_string().ends_with("`artifacts` must be a table"), "{plan}");
    }
}
