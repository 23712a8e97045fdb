//! RLP302–RLP307: every schema is valid JSON Schema, every `$ref` resolves
//! inside the bundle or to a shared registry file its manifest pins, and
//! each shared schema says where it was found.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use crate::bundle::diag::{At, Code, Diagnostics, Finding};
use crate::bundle::manifest::MANIFEST_FILE;
use crate::bundle::pointer::Pointer;
use crate::bundle::schema::{
    DIALECT, RefKind, classify_ref, find_refs, foreign_dialects, fragment_resolves, invalid_schema_id, target_problem,
};
use crate::bundle::tools::{TOOLS_FILE, Tool};
use crate::bundle::{LoadedBundle, PinState, Resolved, Shared};

/// The first place each shared schema id is referenced from: its file and
/// the `$ref`, where its findings are reported once.
type Sites = BTreeMap<String, (PathBuf, At)>;

pub(super) fn check(bundle: &LoadedBundle, out: &mut Vec<Finding>) {
    let mut sites = Sites::new();
    let mut diags = Diagnostics::new(bundle.display_path(TOOLS_FILE));
    for tool in bundle.tool_list() {
        for key in ["input_schema", "result_schema", "options_schema"] {
            let schema = match key {
                "input_schema" => &tool.input_schema,
                "result_schema" => &tool.result_schema,
                _ => &tool.options_schema,
            };
            if let Some(schema) = schema {
                check_document(bundle, Some(tool), schema, &tool.at.key(key), &mut diags, &mut sites);
            }
        }
        for (reference, path) in &tool.schema_refs {
            if let Some(problem) = target_problem(path, &bundle.inventory) {
                diags
                    .report(
                        Code::SchemaRefUnresolved,
                        At::Value(tool.at.key("schema_refs").key(reference)),
                        format!("`{reference}` maps to `{path}`, which {}", problem.why()),
                    )
                    .help(problem.help(path));
            }
        }
    }
    out.extend(diags.into_findings());
    let documents = bundle
        .schemas
        .iter()
        .map(|(path, document)| (bundle.display_path(path), document))
        .chain(bundle.shared.values().filter_map(|s| Some((s.found.as_ref()?.0.clone(), s.document.as_ref()?))));
    for (file, document) in documents {
        let mut diags = Diagnostics::new(file);
        check_document(bundle, None, document, &Pointer::root(), &mut diags, &mut sites);
        out.extend(diags.into_findings());
    }
    for (id, (file, at)) in sites {
        if let Some(shared) = bundle.shared.get(&id) {
            check_shared(bundle, &id, shared, file, at, out);
        }
    }
}

/// Reports, once per id, where a shared schema was found, whether its pin
/// allows it, or where it was looked for in vain.
fn check_shared(bundle: &LoadedBundle, id: &str, shared: &Shared, file: PathBuf, at: At, out: &mut Vec<Finding>) {
    let mut diags = Diagnostics::new(file);
    let digest_command = format!("rlp digest {}", bundle.dir.display());
    let pin = bundle.manifest.as_ref().and_then(|m| m.shared_pin(id));
    match &shared.found {
        None => {
            let searched = bundle.registries.searched(id);
            let pinned = match pin.and_then(|p| p.blake3) {
                Some(digest) => format!("; manifest.toml pins it (BLAKE3 {digest}): put that file in a registry"),
                None => String::new(),
            };
            diags
                .report(
                    Code::SchemaRefUnresolved,
                    at,
                    format!("`schema:{id}` is neither in the bundle nor in a shared schema registry"),
                )
                .help(format!(
                    "searched `schemas/{id}.json` in the bundle, then {searched}{pinned}; create `schemas/{id}.json` (and list it with `rlp digest`), add `{id}.json` to a registry, or map the id in the tool's `schema_refs`"
                ));
        }
        Some((path, Err(why))) => {
            diags
                .report(
                    Code::SchemaRefUnresolved,
                    at,
                    format!(
                        "`schema:{id}` resolves to the shared registry file {}, which cannot be used: {why}",
                        path.display()
                    ),
                )
                .help("make it a regular UTF-8 JSON file of at most 256 MiB, or remove it")
                .resolved(path);
        }
        Some((path, Ok(_))) => match shared.pin {
            PinState::Matches | PinState::NoFile => {
                let finding = diags
                    .report(
                        Code::SharedSchemaResolved,
                        at,
                        format!(
                            "`schema:{id}` is not in the bundle; it resolves to the shared registry file {}, pinned in manifest.toml",
                            path.display()
                        ),
                    )
                    .resolved(path);
                if !shared.shadowed.is_empty() {
                    let shadowed: Vec<String> = shared.shadowed.iter().map(|p| p.display().to_string()).collect();
                    finding.help(format!("it shadows {}: the first registry holding an id wins", shadowed.join(", ")));
                }
            }
            PinState::Unpinned => {
                diags
                    .report(
                        Code::SharedSchemaUnpinned,
                        at,
                        format!(
                            "`schema:{id}` resolves to the shared registry file {}, which manifest.toml does not pin",
                            path.display()
                        ),
                    )
                    .help(format!(
                        "review the file, then run `{digest_command}` to pin its size and BLAKE3 (and sign again): a shared schema is used only when the manifest pins it"
                    ))
                    .resolved(path);
            }
            PinState::Changed { expected, found } => {
                let mut pin_diags = Diagnostics::new(bundle.display_path(MANIFEST_FILE));
                let at = pin.map_or(At::File, |p| At::Value(p.at.key("blake3")));
                pin_diags
                    .report(
                        Code::SharedSchemaChanged,
                        at,
                        format!(
                            "the shared schema `schema:{id}` changed: {} has BLAKE3 {found}, manifest.toml pins {expected}",
                            path.display()
                        ),
                    )
                    .help(format!(
                        "review the change; if it is intended, run `{digest_command}` (and sign again), otherwise restore the pinned file"
                    ))
                    .resolved(path);
                out.extend(pin_diags.into_findings());
            }
        },
    }
    out.extend(diags.into_findings());
}

/// Checks a `$ref` to `schema:<id>[#fragment]`. A reference through a
/// broken `schema_refs` mapping is reported once, at the mapping; one to a
/// file that is not valid JSON, once, as that file's syntax error; one to a
/// shared schema, once per id (its first site goes to `sites`).
#[allow(clippy::too_many_arguments)]
fn check_bundle_ref(
    bundle: &LoadedBundle,
    tool: Option<&Tool>,
    target: &str,
    reference: &str,
    fragment: Option<&str>,
    at_ref: At,
    diags: &mut Diagnostics,
    sites: &mut Sites,
) {
    let (document, shown) = match bundle.locate_schema(tool, reference) {
        Resolved::InvalidId(id) => {
            diags
                .report(Code::SchemaRefUnresolved, at_ref, invalid_schema_id(id))
                .help("name a file of `schemas/` without its `.json`, or map the id in the tool's `schema_refs`");
            return;
        }
        Resolved::Bundle { path, mapped: true, .. } if target_problem(path, &bundle.inventory).is_some() => return,
        Resolved::Bundle { document: None, .. } => return,
        Resolved::Bundle { path, document: Some(document), .. } => (document, format!("`{path}`")),
        Resolved::Missing(path) => return missing(reference, &path, at_ref, diags),
        Resolved::Shared(id, Shared { found: None, .. }) if bundle.registries.is_empty() => {
            return missing(reference, &format!("schemas/{id}.json"), at_ref, diags);
        }
        Resolved::Shared(id, shared) => {
            sites.entry(id.to_string()).or_insert_with(|| (diags.file().to_path_buf(), at_ref.clone()));
            match (&shared.document, &shared.found) {
                (Some(document), Some((path, _))) => (document, path.display().to_string()),
                _ => return,
            }
        }
    };
    if !fragment_resolves(document, fragment.unwrap_or_default()) {
        diags
            .report(Code::SchemaRefUnresolved, at_ref, format!("`{target}` points at nothing in {shown}"))
            .help("fix the fragment after `#`");
    }
}

/// A `schema:<id>` found nowhere, with no registry to search: the bundle
/// path that would hold it.
fn missing(reference: &str, path: &str, at_ref: At, diags: &mut Diagnostics) {
    diags
        .report(
            Code::SchemaRefUnresolved,
            at_ref,
            format!("`{reference}` resolves to `{path}`, which is not in the bundle"),
        )
        .help(format!("create `{path}` (and list it with `rlp digest`), or map the id in the tool's `schema_refs`"));
}

/// Checks one schema document found at `at` in the current file.
fn check_document(
    bundle: &LoadedBundle,
    tool: Option<&Tool>,
    schema: &Value,
    at: &Pointer,
    diags: &mut Diagnostics,
    sites: &mut Sites,
) {
    let foreign = foreign_dialects(schema, at);
    for (pointer, why) in &foreign {
        diags
            .report(Code::SchemaInvalid, At::Value(pointer.clone()), why.clone())
            .help(format!("remove `$schema`, or set it to `{DIALECT}`"));
    }
    if !foreign.is_empty() {
        return;
    }
    if let Err(error) = jsonschema::meta::validate(schema) {
        let inner = Pointer::parse(error.instance_path().as_str()).unwrap_or_default();
        let mut pointer = at.clone();
        for segment in inner.segments() {
            pointer = match segment {
                crate::bundle::pointer::Segment::Key(k) => pointer.key(k.clone()),
                crate::bundle::pointer::Segment::Index(i) => pointer.index(*i),
            };
        }
        diags
            .report(Code::SchemaInvalid, At::Value(pointer), format!("not a valid JSON Schema: {error}"))
            .help("see https://json-schema.org/draft/2020-12 for the keyword's allowed values");
        return;
    }
    let mut refs = Vec::new();
    find_refs(schema, at, &mut refs);
    for site in refs {
        let at_ref = At::Value(site.at.clone());
        match classify_ref(&site.target) {
            RefKind::Local(fragment) => {
                if !fragment_resolves(schema, fragment) {
                    diags
                        .report(
                            Code::SchemaRefUnresolved,
                            at_ref,
                            format!("`{}` points at nothing in this schema", site.target),
                        )
                        .help("fix the JSON pointer, or add the definition under `$defs`");
                }
            }
            RefKind::Bundle { reference, fragment } => {
                check_bundle_ref(bundle, tool, &site.target, reference, fragment, at_ref, diags, sites)
            }
            RefKind::Remote => {
                diags
                    .report(
                        Code::SchemaRefRemote,
                        at_ref,
                        format!("`{}` points outside the bundle; rlp never fetches schemas", site.target),
                    )
                    .help("copy the schema into `schemas/<id>.json` and reference it as `schema:<id>`");
            }
        }
    }
}
