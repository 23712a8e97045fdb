//! `rlp digest`: bring manifest.toml's size and BLAKE3 entries in line with
//! the bundle's files, rewriting only those values (toml_edit keeps the
//! author's comments, order and layout).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use toml_edit::{DocumentMut, Item, Table, Value};

use crate::bundle::inventory::{Inventory, hash_file};
use crate::bundle::manifest::{CAPS_KEY, Digest, MANIFEST_FILE, TOOLS_KEY};
use crate::bundle::tools::TOOLS_FILE;

/// What digest did (or, with `--check`, would do) to one manifest entry.
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

/// Computes the up-to-date manifest without writing anything.
pub fn plan(dir: &Path) -> Result<Plan, DigestError> {
    let manifest_path = dir.join(MANIFEST_FILE);
    let before = match std::fs::read_to_string(&manifest_path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(DigestError::NoManifest(dir.to_path_buf())),
        Err(source) => return Err(DigestError::Io { path: manifest_path, source }),
    };
    let mut doc: DocumentMut = before.parse().map_err(|e: toml_edit::TomlError| DigestError::Syntax {
        path: manifest_path.clone(),
        message: e.to_string(),
    })?;
    let inventory = Inventory::scan(dir).map_err(|source| DigestError::Io { path: dir.to_path_buf(), source })?;
    if let Some(refused) = inventory.refused.first() {
        return Err(DigestError::Refused { path: dir.join(&refused.path), why: refused.why.clone() });
    }
    let hashes: BTreeMap<String, (u64, Digest)> = inventory
        .files
        .par_iter()
        .map(|f| hash_file(&dir.join(&f.path)).map(|h| (f.path.clone(), h)).map_err(|e| (f.path.clone(), e)))
        .collect::<Result<_, _>>()
        .map_err(|(path, source)| DigestError::Io { path: dir.join(path), source })?;
    let shape = |key: &str| DigestError::Shape { path: manifest_path.clone(), key: key.to_string() };

    let caps_file =
        doc.get("caps").and_then(|c| c.get("file")).and_then(Item::as_str).unwrap_or("policy.caps").to_string();
    let mut changes = Vec::new();
    let mut listed: HashMap<String, ()> = HashMap::new();

    // The entry binary, inside [agent].
    if let Some(agent) = doc.get_mut("agent").and_then(Item::as_table_like_mut) {
        for key in ["entry_wasm", "entry_native"] {
            let Some(entry) = agent.get_mut(key).and_then(Item::as_table_like_mut) else { continue };
            let Some(path) = entry.get("path").and_then(Item::as_str).map(str::to_string) else { continue };
            if let Some((size, digest)) = hashes.get(&path) {
                if set_digest(entry, *size, digest) {
                    changes.push(Change::Updated(path.clone()));
                }
                listed.insert(path, ());
            }
        }
    }

    if !doc.contains_key("artifacts") {
        let mut table = Table::new();
        table.set_implicit(true);
        doc.insert("artifacts", Item::Table(table));
    }
    let artifacts = doc.get_mut("artifacts").and_then(Item::as_table_mut).ok_or_else(|| shape("artifacts"))?;
    artifacts.set_implicit(true);

    // Existing entries: update or remove.
    let keys: Vec<String> = artifacts.iter().map(|(k, _)| k.to_string()).collect();
    for key in keys {
        let Some(entry) = artifacts.get_mut(&key).and_then(Item::as_table_like_mut) else {
            return Err(shape(&format!("artifacts.{key}")));
        };
        let path = entry.get("path").and_then(Item::as_str).map(str::to_string).unwrap_or_else(|| key.clone());
        match hashes.get(&path) {
            Some(_) if listed.contains_key(&path) => {
                artifacts.remove(&key);
                changes.push(Change::Removed(path));
            }
            Some((size, digest)) => {
                if key == TOOLS_KEY && !entry.contains_key("version") {
                    entry.insert("version", toml_edit::value(1));
                }
                if set_digest(entry, *size, digest) {
                    changes.push(Change::Updated(path.clone()));
                }
                listed.insert(path, ());
            }
            None => {
                artifacts.remove(&key);
                changes.push(Change::Removed(path));
            }
        }
    }

    // Unlisted files: add, tools.json and the caps file under their reserved keys.
    for (path, (size, digest)) in &hashes {
        if listed.contains_key(path) {
            continue;
        }
        let key = match path.as_str() {
            TOOLS_FILE if !artifacts.contains_key(TOOLS_KEY) => TOOLS_KEY,
            p if p == caps_file && !artifacts.contains_key(CAPS_KEY) => CAPS_KEY,
            p => p,
        };
        let mut table = Table::new();
        table.insert("path", toml_edit::value(path.as_str()));
        table.insert("blake3", toml_edit::value(digest.to_string()));
        table.insert("size", toml_edit::value(*size as i64));
        if key == TOOLS_KEY {
            table.insert("version", toml_edit::value(1));
        }
        artifacts.insert(key, Item::Table(table));
        changes.push(Change::Added(path.clone()));
    }
    changes.sort_by(|a, b| a.path().cmp(b.path()));
    let mut after = doc.to_string();
    if !after.ends_with('\n') {
        after.push('\n');
    }
    if changes.is_empty() {
        after = before.clone();
    }
    Ok(Plan { changes, before, after })
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
            entry.insert(key, Item::Value(new));
            true
        }
    }
}

/// Plans and, if anything changed, writes the manifest atomically.
pub fn write(dir: &Path) -> Result<Plan, DigestError> {
    let plan = plan(dir)?;
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

    #[test]
    fn keeps_comments_and_only_changes_digest_values() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("tools.json"), "{\"version\": 1, \"tools\": []}").unwrap();
        fs::write(root.join("policy.caps"), "[capabilities]\n").unwrap();
        let manifest = "# identity\n[agent]\nname   =  \"demo\"   # the name\nversion = \"0.1.0\"\n\n[artifacts.tools]\npath = \"tools.json\"\nblake3 = \"0000000000000000000000000000000000000000000000000000000000000000\"   # placeholder\nversion = 1\n";
        fs::write(root.join(MANIFEST_FILE), manifest).unwrap();
        let plan = write(root).unwrap();
        assert_eq!(plan.changes, vec![Change::Added("policy.caps".into()), Change::Updated("tools.json".into())]);
        let after = fs::read_to_string(root.join(MANIFEST_FILE)).unwrap();
        assert!(after.starts_with("# identity\n[agent]\nname   =  \"demo\"   # the name\n"), "{after}");
        assert!(after.contains("   # placeholder\n"), "{after}");
        assert!(after.contains("[artifacts.caps]\npath = \"policy.caps\"\n"), "{after}");
        let (_, findings) = crate::bundle::parse_manifest(&after);
        assert!(findings.is_empty(), "{findings:?}");
        // A second run changes nothing.
        assert!(write(root).unwrap().changes.is_empty());
    }
}
