//! RLP302–RLP304: every schema is valid JSON Schema and every `$ref` resolves
//! inside the bundle.

use serde_json::Value;

use crate::bundle::LoadedBundle;
use crate::bundle::diag::{At, Code, Diagnostics, Finding};
use crate::bundle::pointer::Pointer;
use crate::bundle::schema::{
    DIALECT, RefKind, SCHEMA_SCHEME, classify_ref, find_refs, foreign_dialects, fragment_resolves, invalid_schema_id,
    is_valid_schema_id, mapped_path, schema_path, target_problem,
};
use crate::bundle::tools::{TOOLS_FILE, Tool};

pub(super) fn check(bundle: &LoadedBundle, out: &mut Vec<Finding>) {
    let mut diags = Diagnostics::new(bundle.display_path(TOOLS_FILE));
    for tool in bundle.tool_list() {
        for key in ["input_schema", "result_schema", "options_schema"] {
            let schema = match key {
                "input_schema" => &tool.input_schema,
                "result_schema" => &tool.result_schema,
                _ => &tool.options_schema,
            };
            if let Some(schema) = schema {
                check_document(bundle, Some(tool), schema, &tool.at.key(key), &mut diags);
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
    for (path, document) in &bundle.schemas {
        let mut diags = Diagnostics::new(bundle.display_path(path));
        check_document(bundle, None, document, &Pointer::root(), &mut diags);
        out.extend(diags.into_findings());
    }
}

/// Checks a `$ref` to `schema:<id>[#fragment]`. A reference through a
/// broken `schema_refs` mapping is reported once, at the mapping; one to a
/// file that is not valid JSON, once, as that file's syntax error.
fn check_bundle_ref(
    bundle: &LoadedBundle,
    tool: Option<&Tool>,
    target: &str,
    reference: &str,
    fragment: Option<&str>,
    at_ref: At,
    diags: &mut Diagnostics,
) {
    let path = match mapped_path(tool, reference) {
        Some(path) if target_problem(path, &bundle.inventory).is_some() => return,
        Some(path) => path.to_string(),
        None => {
            let id = reference.strip_prefix(SCHEMA_SCHEME).unwrap_or(reference);
            if !is_valid_schema_id(id) {
                diags
                    .report(Code::SchemaRefUnresolved, at_ref, invalid_schema_id(id))
                    .help("name a file of `schemas/` without its `.json`, or map the id in the tool's `schema_refs`");
                return;
            }
            schema_path(None, reference)
        }
    };
    match bundle.schemas.get(&path) {
        None if bundle.inventory.get(&path).is_some() => {}
        None => {
            diags
                .report(
                    Code::SchemaRefUnresolved,
                    at_ref,
                    format!("`{reference}` resolves to `{path}`, which is not in the bundle"),
                )
                .help(format!(
                    "create `{path}` (and list it with `rlp digest`), or map the id in the tool's `schema_refs`"
                ));
        }
        Some(document) if !fragment_resolves(document, fragment.unwrap_or_default()) => {
            diags
                .report(Code::SchemaRefUnresolved, at_ref, format!("`{target}` points at nothing in `{path}`"))
                .help("fix the fragment after `#`");
        }
        Some(_) => {}
    }
}

/// Checks one schema document found at `at` in the current file.
fn check_document(bundle: &LoadedBundle, tool: Option<&Tool>, schema: &Value, at: &Pointer, diags: &mut Diagnostics) {
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
                check_bundle_ref(bundle, tool, &site.target, reference, fragment, at_ref, diags)
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
