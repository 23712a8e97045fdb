//! manifest.toml as verification reads it: the identity and every listed
//! file, read straight from the TOML document (no span index or JSON tree),
//! so that checking a bundle of 10,000 files is dominated by hashing them.
//!
//! Every field verification depends on is checked as strictly as `rlp lint`
//! checks it: `[agent]` name (`^[a-z][a-z0-9_]*$`) and SemVer version,
//! `kind`, the entry binary, `[caps] file`, and each `[artifacts.*]` entry
//! (path syntax, 64-hex digest, size within ±(2^53−1), the key naming the
//! path), and each `[shared_schemas."<id>"]` pin. Keys verification does not read (`[ports]`, `[schemas]`, unknown
//! keys) are lint's business and are not looked at here.

use toml_edit::{Item, TableLike};

use crate::bundle::manifest::{
    Artifact, CAPS_KEY, Digest, EntryKind, MANIFEST_FILE, Manifest, NAME_PATTERN, SHARED_SCHEMAS_KEY, SharedPin,
    TOOLS_KEY, is_valid_artifact_path, is_valid_name,
};
use crate::bundle::pointer::Pointer;
use crate::integrity::failure::{Failure, Reason};

/// The largest integer a manifest may hold (2^53 − 1).
const MAX_SAFE: i64 = (1 << 53) - 1;

fn invalid(why: impl std::fmt::Display) -> Failure {
    Failure::new(Reason::Manifest, format!("{MANIFEST_FILE} is invalid: {why}"))
        .with_help("run `rlp lint` on the bundle to see where")
}

fn table<'a>(item: &'a Item, what: &str) -> Result<&'a dyn TableLike, Failure> {
    item.as_table_like().ok_or_else(|| invalid(format!("{what} must be a table")))
}

fn string<'a>(table: &'a dyn TableLike, key: &str, what: &str) -> Result<Option<&'a str>, Failure> {
    match table.get(key) {
        None => Ok(None),
        Some(item) => item.as_str().map(Some).ok_or_else(|| invalid(format!("{what} `{key}` must be a string"))),
    }
}

fn integer(table: &dyn TableLike, key: &str, what: &str) -> Result<Option<u64>, Failure> {
    match table.get(key) {
        None => Ok(None),
        Some(item) => match item.as_integer() {
            Some(n) if (0..=MAX_SAFE).contains(&n) => Ok(Some(n as u64)),
            _ => Err(invalid(format!("{what} `{key}` must be a whole number from 0 to {MAX_SAFE}"))),
        },
    }
}

fn artifact(entry: &dyn TableLike, at: Pointer, what: &str) -> Result<Artifact, Failure> {
    let path = string(entry, "path", what)?.ok_or_else(|| invalid(format!("{what} has no `path`")))?;
    if !is_valid_artifact_path(path) {
        return Err(invalid(format!("artifact path `{path}` is not allowed")));
    }
    let hex = string(entry, "blake3", what)?.ok_or_else(|| invalid(format!("{what} has no `blake3`")))?;
    let blake3 = hex.parse::<Digest>().map_err(invalid)?;
    let size = integer(entry, "size", what)?;
    Ok(Artifact { at, path: path.to_string(), blake3: Some(blake3), size })
}

/// Reads manifest bytes.
pub(crate) fn read_manifest(bytes: &[u8]) -> Result<Manifest, Failure> {
    let text = std::str::from_utf8(bytes).map_err(|e| invalid(format!("not UTF-8 (at byte {})", e.valid_up_to())))?;
    let doc = toml_edit::Document::parse(text).map_err(|e| invalid(e.message().trim_end()))?;
    let root = doc.as_table();
    let agent = table(root.get("agent").ok_or_else(|| invalid("[agent] is missing"))?, "[agent]")?;
    let name = string(agent, "name", "[agent]")?.ok_or_else(|| invalid("[agent] has no name"))?;
    if !is_valid_name(name) {
        return Err(invalid(format!("agent name `{name}` does not match {NAME_PATTERN}")));
    }
    let version = string(agent, "version", "[agent]")?.ok_or_else(|| invalid("[agent] has no version"))?;
    if semver::Version::parse(version).is_err() {
        return Err(invalid(format!("version `{version}` is not SemVer")));
    }
    let description = string(agent, "description", "[agent]")?.map(str::to_string);
    let kind = match string(agent, "kind", "[agent]")? {
        None => None,
        Some("wasm32-wasip1") => Some(EntryKind::Wasm),
        Some("native-shim") => Some(EntryKind::Native),
        Some(other) => return Err(invalid(format!("unknown agent kind `{other}`"))),
    };
    let mut entry = None;
    for key in ["entry_wasm", "entry_native"] {
        if let Some(item) = agent.get(key) {
            let what = format!("[agent] `{key}`");
            let at = Pointer::root().key("agent").key(key);
            entry = Some(artifact(table(item, &what)?, at, &what)?);
        }
    }
    let mut caps_file = "policy.caps".to_string();
    if let Some(item) = root.get("caps")
        && let Some(file) = string(table(item, "[caps]")?, "file", "[caps]")?
    {
        if let Some(problem) = crate::bundle::manifest::caps_file_problem(file) {
            return Err(invalid(problem));
        }
        caps_file = file.to_string();
    }
    let mut tools_version = None;
    let mut artifacts = Vec::new();
    if let Some(item) = root.get("artifacts") {
        for (key, item) in table(item, "[artifacts]")?.iter() {
            let what = format!("[artifacts.{key}]");
            let entry = table(item, &what)?;
            if key == TOOLS_KEY {
                tools_version = integer(entry, "version", &what)?;
            }
            let artifact = artifact(entry, Pointer::root().key("artifacts").key(key), &what)?;
            let expected = if key == TOOLS_KEY { Some("tools.json") } else { None };
            let mismatch = match expected {
                Some(path) => artifact.path != path,
                None => key != CAPS_KEY && key != artifact.path,
            };
            if mismatch {
                return Err(invalid(format!(
                    "artifact `{key}` has path `{}`, but its key names `{}`",
                    artifact.path,
                    expected.unwrap_or(key)
                )));
            }
            artifacts.push(artifact);
        }
    }
    let mut shared_schemas = Vec::new();
    if let Some(item) = root.get(SHARED_SCHEMAS_KEY) {
        for (id, item) in table(item, "[shared_schemas]")?.iter() {
            let what = format!("[shared_schemas.\"{id}\"]");
            if !crate::bundle::schema::is_valid_schema_id(id) {
                return Err(invalid(crate::bundle::schema::invalid_schema_id(id)));
            }
            let entry = table(item, &what)?;
            let hex = string(entry, "blake3", &what)?.ok_or_else(|| invalid(format!("{what} has no `blake3`")))?;
            shared_schemas.push(SharedPin {
                at: Pointer::root().key(SHARED_SCHEMAS_KEY).key(id),
                id: id.to_string(),
                blake3: Some(hex.parse::<Digest>().map_err(invalid)?),
                size: integer(entry, "size", &what)?,
            });
        }
    }
    Ok(Manifest {
        name: Some(name.to_string()),
        version: Some(version.to_string()),
        description,
        kind,
        entry,
        caps_file,
        tools_version,
        artifacts,
        shared_schemas,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_the_loader_reads_and_refuses_its_errors() {
        let text = "# c\n[agent]\nname = \"mailer\"\nversion = \"0.1.0\"\nkind = \"wasm32-wasip1\"\nentry_wasm = { path = \"bin/m.wasm\", blake3 = \"0000000000000000000000000000000000000000000000000000000000000001\", size = 3 }\n[caps]\nfile = \"policy.caps\"\n[artifacts.tools]\npath = \"tools.json\"\nblake3 = \"00000000000000000000000000000000000000000000000000000000000000aa\"\nsize = 12\nversion = 1\n[artifacts.caps]\npath = \"policy.caps\"\nblake3 = \"00000000000000000000000000000000000000000000000000000000000000bb\"\n[shared_schemas.\"mail.address.v1\"]\nblake3 = \"00000000000000000000000000000000000000000000000000000000000000cc\"\nsize = 40\n";
        let fast = read_manifest(text.as_bytes()).unwrap();
        let (slow, findings) = crate::bundle::parse_manifest(text);
        assert!(findings.is_empty(), "{findings:?}");
        assert_eq!(Some(fast), slow);
        for (bad, why) in [
            ("[agent]\nname = \"Mailer\"\nversion = \"0.1.0\"\n", "agent name `Mailer`"),
            ("[agent]\nname = \"m\"\nversion = \"1\"\n", "not SemVer"),
            (
                "[agent]\nname = \"m\"\nversion = \"0.1.0\"\n[artifacts.\"a.txt\"]\npath = \"b.txt\"\nblake3 = \"00\"\n",
                "not a BLAKE3",
            ),
            (
                "[agent]\nname = \"m\"\nversion = \"0.1.0\"\n[artifacts.\"a.txt\"]\npath = \"../a.txt\"\nblake3 = \"00\"\n",
                "is not allowed",
            ),
            (
                "[agent]\nname = \"m\"\nversion = \"0.1.0\"\n[artifacts.x]\npath = \"y\"\nblake3 = \"0000000000000000000000000000000000000000000000000000000000000000\"\n",
                "its key names `x`",
            ),
            ("[agent]\nname = \"m\"\nversion = \"0.1.0\"\nname = \"n\"\n", "duplicate key"),
            (
                "[agent]\nname = \"m\"\nversion = \"0.1.0\"\n[shared_schemas.\"../x\"]\nblake3 = \"00\"\n",
                "not a schema id",
            ),
            ("[agent]\nname = \"m\"\nversion = \"0.1.0\"\n[shared_schemas.x]\nblake3 = \"00\"\n", "not a BLAKE3"),
            (
                "[agent]\nname = \"m\"\nversion = \"0.1.0\"\n[artifacts.tools]\npath = \"tools.json\"\nblake3 = \"0000000000000000000000000000000000000000000000000000000000000000\"\nsize = 9007199254740992\n",
                "whole number",
            ),
        ] {
            let err = read_manifest(bad.as_bytes()).unwrap_err();
            assert!(err.message.contains(why), "{bad:?}: {}", err.message);
            // The name and version rules are lint rules; everything else the loader refuses too.
            if !why.contains("agent name") && !why.contains("SemVer") {
                let slow = crate::bundle::parse_manifest(bad).1;
                assert!(slow.iter().any(|f| f.severity == crate::bundle::diag::Severity::Error), "{bad:?}: {slow:?}");
            }
        }
    }
}
