//! `rlp bundle export-mcpb`: an MCP Bundle (`.mcpb`, manifest_version
//! 0.3), the zip a desktop MCP host installs in one step. It holds
//! `manifest.json`, the running rlp executable as `server/rlp`, and every
//! file of the bundle under `bundle/<name>/` (manifest.toml and its
//! signature included; a bundle folder bears the agent's name); its server
//! is `rlp serve --stdio` on that folder.
//!
//! The bundle must be ready to pack ([`sealable`]): digests up to date, lint
//! clean, a signature that matches. Each bundle file's BLAKE3 is checked
//! against the manifest while it is copied, so a file changed meanwhile is
//! caught. The zip is reproducible: entries sorted by name, every time stamp
//! 1980-01-01, modes 0644 or 0755, Unix as the creating system, deflated by
//! the pinned encoder; the same bundle and the same rlp give the same bytes.
//! It is written atomically, as a pack archive is.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Seek, Write};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, System, ZipWriter};

use crate::bundle::capability::SecretId;
use crate::bundle::command::{Programs, bundle_form};
use crate::bundle::manifest::{Digest, Manifest};
use crate::bundle::tools::{Tool, Transport};
use crate::integrity::failure::{Failure, Reason};
use crate::integrity::keys::KeyId;
use crate::pack::Progress;
use crate::pack::format::Kind;
use crate::pack::writer::{Plan, copy_exact, plan, write_atomically};

/// The MCPB manifest version written.
const MANIFEST_VERSION: &str = "0.3";

/// Where the rlp executable sits in the archive.
const SERVER_ENTRY: &str = "server/rlp";

/// The folder of the archive that holds the bundle's folder, `<name>/`.
const BUNDLE_FOLDER: &str = "bundle";

/// The MCPB manifest's name in the archive.
const MANIFEST_JSON: &str = "manifest.json";

/// The prefix of the temporary file the archive is written to.
const TEMP_PREFIX: &str = ".rlp-mcpb-";

/// The bundle's folder in the archive: `bundle/<name>` (lint requires a
/// bundle's folder to bear its name).
fn bundle_folder(name: &str) -> String {
    format!("{BUNDLE_FOLDER}/{name}")
}

/// A written MCP Bundle.
#[derive(Debug)]
pub(crate) struct Exported {
    /// Where it was written.
    pub path: PathBuf,
    /// `[agent].name`.
    pub name: String,
    /// `[agent].version`.
    pub version: String,
    /// Number of tools offered.
    pub tools: usize,
    /// Number of distinct secrets the host asks for.
    pub secrets: usize,
    /// Archive size in bytes.
    pub bytes: u64,
    /// The key of the bundle's signature, kept in the archive.
    pub signed_by: Option<KeyId>,
    /// What will not work on another machine as it does here.
    pub warnings: Vec<String>,
}

/// The `user_config` key of a secret: its environment variable in lower
/// case (distinct ids have distinct variables, of `A-Z`, `0-9` and `_`
/// only, so distinct keys too).
fn user_config_key(id: &SecretId) -> String {
    id.env_var().to_ascii_lowercase()
}

/// The platform rlp was built for, as MCPB names it.
fn platform() -> Option<&'static str> {
    if cfg!(target_os = "linux") {
        Some("linux")
    } else if cfg!(target_os = "macos") {
        Some("darwin")
    } else {
        None
    }
}

/// Every secret the tools declare, with the tools that use it, by id.
fn secrets(tools: &[Tool]) -> BTreeMap<&SecretId, Vec<&str>> {
    let mut out: BTreeMap<&SecretId, Vec<&str>> = BTreeMap::new();
    for tool in tools {
        for (_, id) in &tool.secrets {
            let users = out.entry(id).or_default();
            if !users.contains(&tool.id.as_str()) {
                users.push(&tool.id);
            }
        }
    }
    out
}

/// The MCPB manifest of a bundle whose manifest is `manifest`, whose tools
/// are `tools` and whose signature is by `signed_by`.
fn manifest_json(manifest: &Manifest, tools: &[Tool], signed_by: Option<KeyId>) -> Value {
    let name = manifest.name.clone().unwrap_or_default();
    let version = manifest.version.clone().unwrap_or_default();
    let description = match manifest.description.as_deref().map(str::trim) {
        Some(text) if !text.is_empty() => text.to_string(),
        _ => format!("The tools of the agent bundle {name}, served by rlp"),
    };
    // manifest.toml names no author; the signer is who vouches for the bundle.
    let author = match signed_by {
        Some(id) => format!("rlp key {id}"),
        None => "unknown (unsigned rlp bundle)".to_string(),
    };
    let mut env = Map::new();
    let mut user_config = Map::new();
    for (id, users) in secrets(tools) {
        let key = user_config_key(id);
        env.insert(id.env_var(), json!(format!("${{user_config.{key}}}")));
        user_config.insert(
            key,
            json!({
                "type": "string",
                "title": id.as_str(),
                "description": format!(
                    "The secret `{id}` that {}; rlp reads it from {}.",
                    match users.as_slice() {
                        [one] => format!("the tool {one} uses"),
                        all => format!("the tools {} use", all.join(", ")),
                    },
                    id.env_var()
                ),
                "sensitive": true,
                "required": true,
            }),
        );
    }
    let mut mcp_config = json!({
        "command": format!("${{__dirname}}/{SERVER_ENTRY}"),
        "args": ["serve", "--stdio", format!("${{__dirname}}/{}", bundle_folder(&name))],
    });
    if !env.is_empty() {
        mcp_config["env"] = Value::Object(env);
    }
    let mut out = json!({
        "manifest_version": MANIFEST_VERSION,
        "name": name,
        "version": version,
        "description": description,
        "author": {"name": author},
        "server": {"type": "binary", "entry_point": SERVER_ENTRY, "mcp_config": mcp_config},
        "tools": tools.iter().map(|t| json!({"name": t.id, "description": t.description})).collect::<Vec<_>>(),
    });
    if !user_config.is_empty() {
        out["user_config"] = Value::Object(user_config);
    }
    if let Some(platform) = platform() {
        out["compatibility"] = json!({"platforms": [platform]});
    }
    out
}

/// Warnings for exec tools whose program lies inside the bundle folder but
/// is named by an absolute path: on the host that runs the path of the
/// host's machine, not the archive's copy (`${bundle}/…` travels with it).
fn programs_inside(dir: &Path, tools: &[Tool]) -> Vec<String> {
    let Ok(root) = dir.canonicalize() else { return Vec::new() };
    tools
        .iter()
        .flat_map(|tool| {
            let programs = tool.transport.as_ref().and_then(Transport::programs).map(Programs::all).unwrap_or_default();
            programs.into_iter().filter(|(_, c)| c.starts_with('/')).filter_map(|(_, command)| {
                let form = bundle_form(Path::new(command), &root)?;
                Some(format!(
                    "tool `{}` runs {command}, inside the bundle folder: the host runs that path of its own \
                     machine, not the copy in the .mcpb; write `command` as `{form}` so that it names the copy \
                     wherever the bundle is",
                    tool.id
                ))
            })
        })
        .collect()
}

/// Warnings for exec tools with no program for the platform of the `rlp`
/// the `.mcpb` holds (the one it runs on): a host would be refused their
/// calls. A bundle's per-platform programs are chosen by that `rlp` at each
/// call, so the `.mcpb` needs no `platform_overrides` of its own.
fn programs_missing_here(tools: &[Tool]) -> Vec<String> {
    let here = crate::bundle::command::this_platform();
    tools
        .iter()
        .filter_map(|tool| {
            let transport = tool.transport.as_ref()?;
            transport.programs().filter(|p| p.for_platform(&here).is_none()).map(|_| {
                format!(
                    "tool `{}` carries no program for {here}, the platform of the rlp in the .mcpb: a host's calls \
                     to it are refused; add `\"{here}\"` to its `transport.platforms`",
                    tool.id
                )
            })
        })
        .collect()
}

/// What an archive entry holds.
enum Content {
    /// These bytes.
    Bytes(Vec<u8>),
    /// The regular file at `path` (shown as `shown`), of the entry's size,
    /// whose BLAKE3 must be `digest` when given.
    File { path: PathBuf, shown: String, digest: Option<Digest> },
}

/// One archive entry.
struct Entry {
    content: Content,
    /// 0o644, or 0o755 for an executable.
    mode: u32,
    /// Its size in bytes (for a file, as listed).
    size: u64,
}

/// The entries of the archive, by name: the MCPB manifest, the rlp
/// executable at `rlp`, and the files of `plan` (manifest.toml and the
/// signature included, each to match the digest it was checked with).
fn entries(dir: &Path, plan: &Plan, manifest_json: Vec<u8>, rlp: PathBuf) -> Result<BTreeMap<String, Entry>, Failure> {
    let folder = bundle_folder(&plan.name);
    let mut out = BTreeMap::new();
    out.insert(
        MANIFEST_JSON.to_string(),
        Entry { size: manifest_json.len() as u64, content: Content::Bytes(manifest_json), mode: 0o644 },
    );
    let meta = std::fs::metadata(&rlp).map_err(|e| Failure::io(&rlp, &e))?;
    if !meta.is_file() {
        return Err(Failure::new(
            Reason::Unreadable,
            format!("{} (the rlp executable) is not a regular file", rlp.display()),
        ));
    }
    let shown = rlp.display().to_string();
    out.insert(
        SERVER_ENTRY.to_string(),
        Entry { content: Content::File { path: rlp, shown, digest: None }, mode: 0o755, size: meta.len() },
    );
    for entry in &plan.entries {
        let Kind::File { executable } = entry.kind else { continue };
        let content = Content::File { path: dir.join(&entry.path), shown: entry.path.clone(), digest: entry.digest };
        let mode = if executable { 0o755 } else { 0o644 };
        out.insert(format!("{folder}/{}", entry.path), Entry { content, mode, size: entry.size });
    }
    Ok(out)
}

/// A failure of the zip writer on `output`.
fn zip_failure(output: &Path, error: zip::result::ZipError) -> Failure {
    match error {
        zip::result::ZipError::Io(e) => Failure::io(output, &e),
        e => Failure::new(Reason::Archive, format!("cannot write {}: {e}", output.display())),
    }
}

/// Writes `entries` as a zip into `file`; returns its size in bytes.
fn write_zip(
    entries: &BTreeMap<String, Entry>,
    file: &mut File,
    output: &Path,
    progress: &dyn Progress,
) -> Result<u64, Failure> {
    let mut zip = ZipWriter::new(BufWriter::with_capacity(1 << 20, file));
    let mut buffer = vec![0u8; 1 << 16];
    let base = SimpleFileOptions::default()
        .compression_method(CompressionMethod::Deflated)
        .compression_level(Some(6))
        .last_modified_time(DateTime::default())
        .system(System::Unix);
    for (name, entry) in entries {
        let options = base.unix_permissions(entry.mode).large_file(entry.size >= u64::from(u32::MAX));
        zip.start_file(name.as_str(), options).map_err(|e| zip_failure(output, e))?;
        match &entry.content {
            Content::Bytes(bytes) => zip.write_all(bytes).map_err(|e| Failure::io(output, &e))?,
            Content::File { path, shown, digest } => {
                let out_err = |e: io::Error| Failure::io(output, &e);
                copy_exact(path, shown, entry.size, *digest, &mut zip, &out_err, &mut buffer, progress, "export")?;
            }
        }
    }
    let buffered = zip.finish().map_err(|e| zip_failure(output, e))?;
    let file = buffered.into_inner().map_err(|e| Failure::io(output, e.error()))?;
    file.stream_position().map_err(|e| Failure::io(output, &e))
}

/// Exports the bundle folder `dir` as an MCP Bundle to `output` (default
/// `./<name>-<version>.mcpb`).
pub(crate) fn export(
    dir: &Path,
    output: Option<PathBuf>,
    registries: &crate::bundle::registry::Registries,
    progress: &dyn Progress,
) -> Result<Exported, Failure> {
    let plan = plan(dir, None, "export", registries)?;
    // The tools come from the tools.json whose digest was just checked; a
    // bundle that no longer loads cleanly is not exported.
    let loaded = crate::bundle::load_with(dir, registries);
    if let Some(error) = loaded.findings.iter().find(|f| f.severity == crate::bundle::diag::Severity::Error) {
        return Err(Failure::new(
            Reason::Lint,
            format!("the bundle changed while it was being exported: {}", error.message),
        )
        .with_help("export again once nothing is writing to the bundle"));
    }
    let tools = loaded.tool_list();
    let name = plan.name.clone();
    let version = plan.version.clone();
    let path = output.unwrap_or_else(|| PathBuf::from(format!("{name}-{version}.mcpb")));
    // The executable itself, not a link to it (a package manager's bin/ link).
    let rlp = std::env::current_exe().and_then(std::fs::canonicalize).map_err(|e| {
        Failure::new(Reason::Unreadable, format!("cannot find the rlp executable to put in the archive: {e}"))
    })?;
    let document = manifest_json(&plan.manifest, tools, plan.signed_by);
    let mut manifest_bytes = serde_json::to_vec_pretty(&document).unwrap_or_default();
    manifest_bytes.push(b'\n');
    let entries = entries(dir, &plan, manifest_bytes, rlp)?;
    progress.start(entries.values().filter(|e| matches!(e.content, Content::File { .. })).map(|e| e.size).sum());
    let written = write_atomically(dir, &path, TEMP_PREFIX, "", |file| write_zip(&entries, file, &path, progress));
    progress.finish();
    Ok(Exported {
        bytes: written?,
        tools: tools.len(),
        secrets: secrets(tools).len(),
        warnings: programs_inside(dir, tools).into_iter().chain(programs_missing_here(tools)).collect(),
        signed_by: plan.signed_by,
        path,
        name,
        version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(id: &str, secrets: &[&str]) -> Tool {
        let tools = json!({"version": 1, "tools": [{
            "id": id, "description": format!("does {id}"),
            "transport": {"kind": "exec", "command": "/bin/true"},
            "input_schema": {"type": "object"}, "result_schema": {}, "secrets": secrets,
        }]});
        let (file, findings) = crate::bundle::parse_tools(&tools.to_string());
        assert!(findings.is_empty(), "{findings:?}");
        file.unwrap().tools.remove(0)
    }

    fn manifest(description: Option<&str>) -> Manifest {
        let mut text = "[agent]\nname = \"vault\"\nversion = \"1.2.0\"\n".to_string();
        if let Some(description) = description {
            text.push_str(&format!("description = \"{description}\"\n"));
        }
        crate::bundle::parse_manifest(&text).0.unwrap()
    }

    #[test]
    fn each_distinct_secret_is_one_sensitive_setting_passed_as_its_variable() {
        let tools = [
            tool("vault.read", &["runloop/vault/api-key"]),
            tool("vault.write", &["runloop/vault/api-key", "mail.smtp.key"]),
        ];
        let doc = manifest_json(&manifest(Some("Reads the vault")), &tools, None);
        assert_eq!(
            doc["server"]["mcp_config"]["env"],
            json!({"MAIL__SMTP__KEY": "${user_config.mail__smtp__key}",
                   "RUNLOOP__VAULT_SAPI_HKEY": "${user_config.runloop__vault_sapi_hkey}"})
        );
        let setting = &doc["user_config"]["runloop__vault_sapi_hkey"];
        assert_eq!(setting["title"], "runloop/vault/api-key");
        assert_eq!(
            setting["description"],
            "The secret `runloop/vault/api-key` that the tools vault.read, vault.write use; rlp reads it from RUNLOOP__VAULT_SAPI_HKEY."
        );
        assert_eq!((setting["sensitive"].clone(), setting["required"].clone()), (json!(true), json!(true)));
        assert_eq!(
            doc["user_config"]["mail__smtp__key"]["description"],
            "The secret `mail.smtp.key` that the tool vault.write uses; rlp reads it from MAIL__SMTP__KEY."
        );
        assert_eq!(doc["description"], "Reads the vault");
        assert_eq!(
            doc["server"]["mcp_config"]["args"],
            json!(["serve", "--stdio", "${__dirname}/bundle/vault"]),
            "the bundle folder bears the agent's name"
        );
    }

    #[test]
    fn without_secrets_a_description_or_a_signature_the_manifest_says_so() {
        let doc = manifest_json(&manifest(Some("  ")), &[tool("vault.list", &[])], None);
        assert_eq!(doc["description"], "The tools of the agent bundle vault, served by rlp");
        assert_eq!(doc["author"], json!({"name": "unknown (unsigned rlp bundle)"}));
        assert!(doc.get("user_config").is_none() && doc["server"]["mcp_config"].get("env").is_none(), "{doc}");
        let signed = manifest_json(&manifest(None), &[], Some(KeyId([0xab; 8])));
        assert_eq!(signed["author"], json!({"name": "rlp key abababababababab"}));
        assert_eq!(signed["tools"], json!([]));
    }
}
