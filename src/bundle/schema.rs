//! JSON Schemas of a bundle: `schema:<id>` resolution, `$ref` checks, and
//! validators that never touch the network.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::bundle::inventory::Inventory;
use crate::bundle::manifest::is_valid_artifact_path;
use crate::bundle::pointer::Pointer;
use crate::bundle::tools::{TOOLS_FILE, Tool};

/// The scheme of bundle-local schema ids.
pub(crate) const SCHEMA_SCHEME: &str = "schema:";

/// Whether `id` (the part after `schema:`) is a schema id: one file name
/// segment, so that it maps to `schemas/<id>.json`.
pub(crate) fn is_valid_schema_id(id: &str) -> bool {
    !id.is_empty() && !id.contains('/') && is_valid_artifact_path(&format!("schemas/{id}.json"))
}

/// The message for a `schema:<id>` whose id is not a schema id.
pub(crate) fn invalid_schema_id(id: &str) -> String {
    format!("`schema:{id}` is not a schema id (letters, digits, . _ -), e.g. `schema:mail.send.request.v1`")
}

/// The path `tool`'s `schema_refs` maps `reference` (`schema:<id>`) to, if any.
pub(crate) fn mapped_path<'a>(tool: Option<&'a Tool>, reference: &str) -> Option<&'a str> {
    let id = reference.strip_prefix(SCHEMA_SCHEME).unwrap_or(reference);
    tool?.schema_refs.iter().find(|(k, _)| k.strip_prefix(SCHEMA_SCHEME) == Some(id)).map(|(_, path)| path.as_str())
}

/// Why a `schema_refs` target cannot hold a schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TargetProblem {
    /// Not a `/`-separated path inside the bundle (`..`, absolute, odd characters).
    Outside,
    /// The bundle's tools.json.
    ToolsFile,
    /// Not a `.json` file.
    NotJson,
    /// No such file in the bundle.
    Missing,
}

impl TargetProblem {
    /// What is wrong, to follow "`schema:<id>` maps to `<path>`, which …".
    pub(crate) fn why(self) -> &'static str {
        match self {
            TargetProblem::Outside => "is not a path inside the bundle",
            TargetProblem::ToolsFile => "is the bundle's tool list, not a schema",
            TargetProblem::NotJson => "is not a `.json` file",
            TargetProblem::Missing => "is not in the bundle",
        }
    }

    /// How to fix it.
    pub(crate) fn help(self, path: &str) -> String {
        match self {
            TargetProblem::Outside => {
                "use a relative path of `/`-separated [A-Za-z0-9._-] segments, without `.` or `..`, e.g. `schemas/<id>.json`"
                    .to_string()
            }
            TargetProblem::ToolsFile | TargetProblem::NotJson => {
                "map the id to a JSON Schema file of the bundle, e.g. `schemas/<id>.json`".to_string()
            }
            TargetProblem::Missing => format!("create `{path}`, or fix the path"),
        }
    }
}

/// Why the `schema_refs` target `path` cannot be read as a schema, if it cannot.
pub(crate) fn target_problem(path: &str, inventory: &Inventory) -> Option<TargetProblem> {
    if !is_valid_artifact_path(path) {
        Some(TargetProblem::Outside)
    } else if path == TOOLS_FILE {
        Some(TargetProblem::ToolsFile)
    } else if !path.ends_with(".json") {
        Some(TargetProblem::NotJson)
    } else if inventory.get(path).is_none() {
        Some(TargetProblem::Missing)
    } else {
        None
    }
}

/// One `$ref` (or other keyword holding a string) found in a schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RefSite {
    /// Pointer of the value inside the document that holds it.
    pub at: Pointer,
    /// The value as written.
    pub target: String,
}

/// Every `$ref` / `$dynamicRef` in a schema document, with its pointer.
pub(crate) fn find_refs(schema: &Value, at: &Pointer, out: &mut Vec<RefSite>) {
    find_keywords(schema, at, &["$ref", "$dynamicRef"], out);
}

/// Every string value of one of `keywords` in a schema document, with its pointer.
fn find_keywords(schema: &Value, at: &Pointer, keywords: &[&str], out: &mut Vec<RefSite>) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    (keyword, Value::String(target)) if keywords.contains(&keyword) => {
                        out.push(RefSite { at: at.key(key), target: target.clone() })
                    }
                    // `enum`, `const` and `examples` hold data, not schemas.
                    ("enum" | "const" | "examples" | "default", _) => {}
                    _ => find_keywords(value, &at.key(key), keywords, out),
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                find_keywords(item, &at.index(i), keywords, out);
            }
        }
        _ => {}
    }
}

/// The meta-schema of the only JSON Schema dialect rlp reads.
pub(crate) const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// Every `$schema` in a schema document that names a dialect other than
/// 2020-12, with why: rlp never resolves another meta-schema.
pub(crate) fn foreign_dialects(schema: &Value, at: &Pointer) -> Vec<(Pointer, String)> {
    let mut sites = Vec::new();
    find_keywords(schema, at, &["$schema"], &mut sites);
    sites
        .into_iter()
        .filter(|site| site.target.strip_suffix('#').unwrap_or(&site.target) != DIALECT)
        .map(|site| (site.at, foreign_dialect(&site.target)))
        .collect()
}

/// The message for a `$schema` of another dialect.
pub(crate) fn foreign_dialect(uri: &str) -> String {
    let draft = ["draft-03", "draft-04", "draft-06", "draft-07", "2019-09", "2020-12"]
        .into_iter()
        .find(|draft| uri.contains(draft));
    match draft {
        Some("2020-12") => {
            format!("`$schema` is `{uri}`, not the 2020-12 meta-schema's URI; schemas are JSON Schema 2020-12")
        }
        Some(draft) => format!("`$schema` is JSON Schema {draft} (`{uri}`); schemas are JSON Schema 2020-12"),
        None => format!("`$schema` is `{uri}`, an unknown meta-schema; schemas are JSON Schema 2020-12"),
    }
}

/// How a `$ref` resolves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RefKind<'a> {
    /// Within the same document: a JSON pointer or an anchor fragment.
    Local(&'a str),
    /// Another schema of the bundle, with an optional fragment.
    Bundle {
        /// The `schema:<id>` part.
        reference: &'a str,
        /// The fragment after `#`, if any.
        fragment: Option<&'a str>,
    },
    /// Anything else (http, file, relative paths): never fetched.
    Remote,
}

/// Classifies a `$ref` target.
pub(crate) fn classify_ref(target: &str) -> RefKind<'_> {
    if let Some(fragment) = target.strip_prefix('#') {
        return RefKind::Local(fragment);
    }
    if target.starts_with(SCHEMA_SCHEME) {
        let (reference, fragment) = match target.split_once('#') {
            Some((r, f)) => (r, Some(f)),
            None => (target, None),
        };
        return RefKind::Bundle { reference, fragment };
    }
    RefKind::Remote
}

/// Whether a fragment (`/a/b` pointer, or a plain anchor name) resolves in `document`.
pub(crate) fn fragment_resolves(document: &Value, fragment: &str) -> bool {
    if fragment.is_empty() {
        return true;
    }
    if fragment.starts_with('/') {
        let decoded = percent_encoding::percent_decode_str(fragment).decode_utf8_lossy();
        return document.pointer(&decoded).is_some();
    }
    has_anchor(document, fragment)
}

fn has_anchor(value: &Value, name: &str) -> bool {
    match value {
        Value::Object(map) => {
            map.get("$anchor").and_then(Value::as_str) == Some(name)
                || map.get("$dynamicAnchor").and_then(Value::as_str) == Some(name)
                || map.values().any(|v| has_anchor(v, name))
        }
        Value::Array(items) => items.iter().any(|v| has_anchor(v, name)),
        _ => false,
    }
}

/// Answers `schema:<id>` lookups from the bundle's own files; refuses
/// everything else, so building a validator never reaches the network.
struct BundleRetriever {
    documents: Arc<HashMap<String, Value>>,
}

impl jsonschema::Retrieve for BundleRetriever {
    fn retrieve(&self, uri: &jsonschema::Uri<String>) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let key = uri.as_str().split('#').next().unwrap_or_default();
        self.documents.get(key).cloned().ok_or_else(|| {
            format!("`{}` is not a schema of this bundle; rlp never fetches schemas", uri.as_str()).into()
        })
    }
}

/// What is wrong with `value` against `validator`, one line per error:
/// `<JSON Pointer>: <message>` (`(root)` for the value itself).
pub(crate) fn error_lines<'a>(
    validator: &'a jsonschema::Validator,
    value: &'a Value,
) -> impl Iterator<Item = String> + 'a {
    error_lines_except(validator, value, |_| false)
}

/// [`error_lines`] without the errors about a value (the one at the
/// error's location) for which `excused` holds.
pub(crate) fn error_lines_except<'a>(
    validator: &'a jsonschema::Validator,
    value: &'a Value,
    excused: impl Fn(&Value) -> bool + 'a,
) -> impl Iterator<Item = String> + 'a {
    validator.iter_errors(value).filter(move |e| !excused(e.instance())).map(|e| format!("{}: {e}", error_location(&e)))
}

/// `(root)`, or the JSON Pointer of the value `error` is about.
pub(crate) fn error_location(error: &jsonschema::ValidationError<'_>) -> String {
    let at = error.instance_path().to_string();
    if at.is_empty() { "(root)".to_string() } else { at }
}

/// Schema errors quoted in one message; more are marked `…`.
pub(crate) const QUOTED_ERRORS: usize = 5;

/// The first [`QUOTED_ERRORS`] of `lines` joined by `; `, ending `; …` when
/// there are more; `None` when there are none.
pub(crate) fn quoted_errors(lines: impl IntoIterator<Item = String>) -> Option<String> {
    let lines: Vec<String> = lines.into_iter().take(QUOTED_ERRORS + 1).collect();
    if lines.is_empty() {
        return None;
    }
    let mut text = lines[..lines.len().min(QUOTED_ERRORS)].join("; ");
    if lines.len() > QUOTED_ERRORS {
        text.push_str("; …");
    }
    Some(text)
}

/// Builds a 2020-12 validator for `schema`, resolving `schema:<id>` from
/// `documents` (keyed by the full `schema:<id>` reference).
pub(crate) fn compile(schema: &Value, documents: Arc<HashMap<String, Value>>) -> Result<jsonschema::Validator, String> {
    if let Some((_, why)) = foreign_dialects(schema, &Pointer::root()).into_iter().next() {
        return Err(why);
    }
    jsonschema::draft202012::options()
        .with_retriever(BundleRetriever { documents })
        .should_validate_formats(false)
        .build(schema)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn excused_values_are_left_out_of_the_errors() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}, "e": {"enum": ["a"]}}});
        let validator = compile(&schema, Arc::default()).unwrap();
        let value = json!({"n": "x", "e": "b"});
        let all: Vec<String> = error_lines(&validator, &value).collect();
        assert_eq!(all.len(), 2, "{all:?}");
        let left: Vec<String> = error_lines_except(&validator, &value, |v| v == "x").collect();
        assert_eq!(left.len(), 1);
        assert!(left[0].starts_with("/e: "), "{left:?}");
    }

    #[test]
    fn classifies_and_finds_refs() {
        let schema = json!({"properties": {"a": {"$ref": "#/$defs/x"}, "b": {"$ref": "schema:y#/z"}, "c": {"enum": [{"$ref": "no"}]}}, "$defs": {"x": {}}});
        let mut refs = Vec::new();
        find_refs(&schema, &Pointer::root(), &mut refs);
        assert_eq!(refs.len(), 2);
        assert_eq!(refs[0].at.to_string(), "/properties/a/$ref");
        assert_eq!(classify_ref("#/$defs/x"), RefKind::Local("/$defs/x"));
        assert_eq!(classify_ref("schema:y#/z"), RefKind::Bundle { reference: "schema:y", fragment: Some("/z") });
        assert_eq!(classify_ref("http://evil/x.json"), RefKind::Remote);
        assert!(fragment_resolves(&schema, "/$defs/x"));
        assert!(!fragment_resolves(&schema, "/$defs/nope"));
    }

    #[test]
    fn compile_resolves_bundle_ids_and_refuses_remote() {
        let docs = Arc::new(HashMap::from([("schema:name".to_string(), json!({"type": "string"}))]));
        let validator = compile(&json!({"properties": {"n": {"$ref": "schema:name"}}}), docs.clone()).unwrap();
        assert!(validator.is_valid(&json!({"n": "x"})));
        assert!(!validator.is_valid(&json!({"n": 1})));
        let err = compile(&json!({"$ref": "http://127.0.0.1:1/x.json"}), docs).unwrap_err();
        assert!(err.contains("never fetches"), "{err}");
        let err = compile(&json!({"$schema": "http://json-schema.org/draft-07/schema#"}), Arc::default()).unwrap_err();
        assert_eq!(
            err,
            "`$schema` is JSON Schema draft-07 (`http://json-schema.org/draft-07/schema#`); schemas are JSON Schema 2020-12"
        );
    }
}
