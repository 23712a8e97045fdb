//! `manifest.toml`: the bundle's identity and the digest of every other file.

use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use crate::bundle::diag::{At, Code, Diagnostics};
use crate::bundle::pointer::Pointer;
use crate::bundle::reader::Fields;

/// The manifest's file name.
pub const MANIFEST_FILE: &str = "manifest.toml";
/// The folder holding signatures; never listed in the manifest.
pub const SIGNATURES_DIR: &str = "SIGNATURES";
/// The artifact key reserved for tools.json (upstream).
pub const TOOLS_KEY: &str = "tools";
/// The artifact key for policy.caps.
pub const CAPS_KEY: &str = "caps";
/// The table of shared schema pins: `[shared_schemas."<id>"]`.
pub const SHARED_SCHEMAS_KEY: &str = "shared_schemas";
/// The agent name pattern, for messages.
pub const NAME_PATTERN: &str = "^[a-z][a-z0-9_]*$";

/// A BLAKE3 digest.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    /// Whether this is the all-zero placeholder of a not-yet-built entry.
    pub fn is_placeholder(&self) -> bool {
        self.0 == [0; 32]
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({self})")
    }
}

impl FromStr for Digest {
    type Err = String;

    /// Parses 64 lower- or upper-case hex digits.
    fn from_str(text: &str) -> Result<Self, String> {
        if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("`{text}` is not a BLAKE3 digest (64 hex digits)"));
        }
        let mut bytes = [0u8; 32];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|e| e.to_string())?;
        }
        Ok(Digest(bytes))
    }
}

/// Whether `name` matches `^[a-z][a-z0-9_]*$`.
pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Whether an artifact path is relative, `/`-separated, made of
/// `[A-Za-z0-9._-]` segments and free of `.`/`..` segments.
pub fn is_valid_artifact_path(path: &str) -> bool {
    !path.is_empty()
        && path.split('/').all(|seg| {
            !seg.is_empty()
                && seg != "."
                && seg != ".."
                && seg.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        })
}

/// Why `path` cannot be a bundle's policy file (`[caps] file`), if it
/// cannot: the policy must be a file of its own that manifest.toml lists
/// with its digest, so that verification reads, and a signature covers,
/// the same text the runtime grants from.
pub fn caps_file_problem(path: &str) -> Option<String> {
    if !is_valid_artifact_path(path) {
        return Some(format!("`[caps] file` is `{path}`, which is not a relative path of `[A-Za-z0-9._-]` segments"));
    }
    let reserved = match path {
        MANIFEST_FILE => "the manifest itself",
        crate::bundle::tools::TOOLS_FILE => "the tools file",
        _ if path == SIGNATURES_DIR || path.starts_with(&format!("{SIGNATURES_DIR}/")) => "a signature",
        _ => return None,
    };
    Some(format!("`[caps] file` names `{path}`, {reserved}, which cannot hold the bundle's policy"))
}

/// The name field of a ustar header, the only tar form bundle archives use.
pub const USTAR_NAME_BYTES: usize = 100;
/// The prefix field of a ustar header.
pub const USTAR_PREFIX_BYTES: usize = 155;

/// How a tar entry name is stored in a ustar header: `Some(None)` when it
/// fits the name field whole, `Some(Some(i))` when it is split at the `/`
/// at byte `i` (the leftmost that leaves at most 100 bytes of name and 155
/// of prefix; a directory's trailing `/` never splits), `None` when it
/// cannot be stored at all.
pub fn ustar_split(name: &str) -> Option<Option<usize>> {
    let bytes = name.as_bytes();
    if bytes.len() <= USTAR_NAME_BYTES {
        return Some(None);
    }
    bytes[..bytes.len() - 1]
        .iter()
        .enumerate()
        .find(|(i, b)| **b == b'/' && bytes.len() - i - 1 <= USTAR_NAME_BYTES && *i <= USTAR_PREFIX_BYTES)
        .map(|(i, _)| Some(i))
}

/// The agent's entry binary kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// `wasm32-wasip1`, with `entry_wasm`.
    Wasm,
    /// `native-shim`, with `entry_native`.
    Native,
}

impl EntryKind {
    /// The key holding this kind's entry.
    pub fn entry_key(self) -> &'static str {
        match self {
            EntryKind::Wasm => "entry_wasm",
            EntryKind::Native => "entry_native",
        }
    }
}

/// One file the manifest lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Artifact {
    /// Where the entry sits in the manifest (for findings).
    pub at: Pointer,
    /// The path inside the bundle.
    pub path: String,
    /// The recorded digest, if any.
    pub blake3: Option<Digest>,
    /// The recorded size in bytes, if any (upstream manifests have none).
    pub size: Option<u64>,
}

/// `[shared_schemas."<id>"]`: the size and digest a `schema:<id>` found in a
/// shared registry must have to be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedPin {
    /// Where the entry sits in the manifest (for findings).
    pub at: Pointer,
    /// The schema id (after `schema:`).
    pub id: String,
    /// The pinned digest, if it loaded.
    pub blake3: Option<Digest>,
    /// The pinned size, if written.
    pub size: Option<u64>,
}

/// A loaded manifest. Fields that failed to load are `None`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// `[agent].name`.
    pub name: Option<String>,
    /// `[agent].version`, as written.
    pub version: Option<String>,
    /// `[agent].description`.
    pub description: Option<String>,
    /// `[agent].kind`.
    pub kind: Option<EntryKind>,
    /// `entry_wasm` or `entry_native`, whichever is present.
    pub entry: Option<Artifact>,
    /// `[caps].file`, default `policy.caps`.
    pub caps_file: String,
    /// `[artifacts.tools].version`, if written.
    pub tools_version: Option<u64>,
    /// Every `[artifacts.*]` entry, in manifest order.
    pub artifacts: Vec<Artifact>,
    /// Every `[shared_schemas."<id>"]` pin, in manifest order.
    pub shared_schemas: Vec<SharedPin>,
}

impl Manifest {
    /// The parsed SemVer version, if valid.
    pub fn semver(&self) -> Option<semver::Version> {
        self.version.as_deref().and_then(|v| semver::Version::parse(v).ok())
    }

    /// Every file the manifest lists (artifacts and the entry binary).
    pub fn listed(&self) -> impl Iterator<Item = &Artifact> {
        self.artifacts.iter().chain(self.entry.iter())
    }

    /// The pin of shared schema `id`, if any.
    pub fn shared_pin(&self, id: &str) -> Option<&SharedPin> {
        self.shared_schemas.iter().find(|p| p.id == id)
    }

    /// The artifact whose path is `path`.
    pub fn artifact_for(&self, path: &str) -> Option<&Artifact> {
        self.listed().find(|a| a.path == path)
    }

    /// Reads the manifest tree, reporting structural problems.
    pub fn from_value(root: &Value, diags: &mut Diagnostics) -> Option<Manifest> {
        let top = Fields::of(
            root,
            Pointer::root(),
            "the manifest",
            &["agent", "ports", "schemas", "caps", "artifacts", SHARED_SCHEMAS_KEY],
            diags,
        )?;
        top.finish(diags);
        let agent = top.table(
            "agent",
            "[agent]",
            &["name", "version", "description", "kind", "entry_wasm", "entry_native"],
            true,
            diags,
        );
        let mut manifest = Manifest {
            name: None,
            version: None,
            description: None,
            kind: None,
            entry: None,
            caps_file: "policy.caps".to_string(),
            tools_version: None,
            artifacts: Vec::new(),
            shared_schemas: Vec::new(),
        };
        if let Some(agent) = &agent {
            agent.finish(diags);
            manifest.name = agent.string("name", true, diags).map(str::to_string);
            manifest.version = agent.string("version", true, diags).map(str::to_string);
            manifest.description = agent.string("description", false, diags).map(str::to_string);
            manifest.kind = match agent.string("kind", false, diags) {
                None => None,
                Some("wasm32-wasip1") => Some(EntryKind::Wasm),
                Some("native-shim") => Some(EntryKind::Native),
                Some(other) => {
                    diags
                        .report(
                            Code::InvalidValue,
                            At::Value(agent.at("kind")),
                            format!("unknown agent kind `{other}`"),
                        )
                        .help("use `wasm32-wasip1` or `native-shim`, or remove `kind` for a tools-only bundle");
                    None
                }
            };
            for key in ["entry_wasm", "entry_native"] {
                if let Some(entry) = agent.table(key, "the entry binary", &["path", "blake3", "size"], false, diags) {
                    manifest.entry = read_artifact(&entry, diags);
                }
            }
        }
        if let Some(ports) = top.table("ports", "[ports]", &["in", "out"], false, diags) {
            ports.finish(diags);
            ports.strings("in", diags);
            ports.strings("out", diags);
        }
        if let Some(caps) = top.table("caps", "[caps]", &["file"], false, diags) {
            caps.finish(diags);
            if let Some(file) = caps.string("file", false, diags) {
                if let Some(problem) = caps_file_problem(file) {
                    diags
                        .report(Code::InvalidValue, At::Value(caps.at("file")), problem)
                        .help("keep the policy in a file of its own, e.g. `file = \"policy.caps\"`");
                }
                manifest.caps_file = file.to_string();
            }
        }
        if let Some(artifacts) = top.table("artifacts", "[artifacts]", &[], false, diags) {
            manifest.artifacts = read_artifacts(&artifacts, &mut manifest.tools_version, diags);
        }
        if let Some(pins) = top.table(SHARED_SCHEMAS_KEY, "[shared_schemas]", &[], false, diags) {
            manifest.shared_schemas = read_pins(&pins, diags);
        }
        Some(manifest)
    }
}

fn read_artifacts(artifacts: &Fields<'_>, tools_version: &mut Option<u64>, diags: &mut Diagnostics) -> Vec<Artifact> {
    let mut out = Vec::new();
    for key in artifacts.keys() {
        let known: &'static [&'static str] =
            if key == TOOLS_KEY { &["path", "blake3", "size", "version"] } else { &["path", "blake3", "size"] };
        let Some(entry) = artifacts.table(key, "the artifact entry", known, true, diags) else { continue };
        entry.finish(diags);
        if key == TOOLS_KEY {
            *tools_version = entry.integer("version", 0, u64::MAX >> 11, diags);
        }
        let Some(artifact) = read_artifact(&entry, diags) else { continue };
        let expected = match key.as_str() {
            TOOLS_KEY => Some("tools.json"),
            _ => None,
        };
        let key_mismatch = match expected {
            Some(path) => artifact.path != path,
            None => key != CAPS_KEY && *key != artifact.path,
        };
        if key_mismatch {
            let want = expected.unwrap_or(key);
            diags
                .report(
                    Code::InvalidValue,
                    At::Value(entry.at("path")),
                    format!("artifact `{key}` has path `{}`, but its key names `{want}`", artifact.path),
                )
                .help(format!("set `path = \"{want}\"`, or rename the table to the file's path"));
        }
        out.push(artifact);
    }
    out
}

fn read_pins(pins: &Fields<'_>, diags: &mut Diagnostics) -> Vec<SharedPin> {
    let mut out = Vec::new();
    for id in pins.keys() {
        let Some(entry) = pins.table(id, "the shared schema pin", &["blake3", "size"], true, diags) else { continue };
        entry.finish(diags);
        if !crate::bundle::schema::is_valid_schema_id(id) {
            diags
                .report(Code::InvalidValue, At::Key(pins.at(id)), crate::bundle::schema::invalid_schema_id(id))
                .help("pin ids as `rlp digest` writes them: `[shared_schemas.\"<id>\"]`");
            continue;
        }
        let blake3 = read_digest(&entry, diags);
        let size = entry.integer("size", 0, crate::bundle::value::MAX_SAFE_INTEGER as u64, diags);
        out.push(SharedPin { at: entry.pointer().clone(), id: id.clone(), blake3, size });
    }
    out
}

/// The required `blake3` of an entry.
fn read_digest(entry: &Fields<'_>, diags: &mut Diagnostics) -> Option<Digest> {
    entry.string("blake3", true, diags).and_then(|hex| match hex.parse::<Digest>() {
        Ok(digest) => Some(digest),
        Err(why) => {
            diags
                .report(Code::InvalidValue, At::Value(entry.at("blake3")), why)
                .help("run `rlp digest` to recompute every digest");
            None
        }
    })
}

fn read_artifact(entry: &Fields<'_>, diags: &mut Diagnostics) -> Option<Artifact> {
    let path = entry.string("path", true, diags)?;
    if !is_valid_artifact_path(path) {
        diags
            .report(
                Code::ArtifactPathInvalid,
                At::Value(entry.at("path")),
                format!("artifact path `{path}` is not allowed"),
            )
            .help("use a relative path of `/`-separated [A-Za-z0-9._-] segments, without `.` or `..`");
    } else if ustar_split(path).is_none() {
        diags
            .report(
                Code::ArtifactPathInvalid,
                At::Value(entry.at("path")),
                format!("artifact path `{path}` is too long to be stored in a bundle archive"),
            )
            .help(format!(
                "shorten it: the part after some `/` must fit in {USTAR_NAME_BYTES} bytes and the part before it in {USTAR_PREFIX_BYTES}"
            ));
    }
    let blake3 = read_digest(entry, diags);
    let size = entry.integer("size", 0, crate::bundle::value::MAX_SAFE_INTEGER as u64, diags);
    Some(Artifact { at: entry.pointer().clone(), path: path.to_string(), blake3, size })
}
