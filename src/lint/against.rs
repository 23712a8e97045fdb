//! `rlp lint --against PREVIOUS`: what a release changes for the agents that
//! call its tools, against the release before it (a bundle folder or
//! archive), and the version bump that takes (seed 004: "keep ids stable; a
//! change is a breaking update").
//!
//! - **Breaking** (a major bump; a minor one before 1.0): a tool removed or
//!   renamed; for an input schema, a property newly required, a property's
//!   type or enum narrowed, a property removed from a schema that allows no
//!   other; for a result schema, a property removed or no longer required,
//!   a property's type changed.
//! - **Compatible additions** (a minor bump; a patch before 1.0): a tool
//!   added, an optional input property added, a result property added, any
//!   other change of a schema.
//! - Anything else (descriptions, confirmation, limits): a patch.
//!
//! Schemas are compared as written, `{"$ref": "schema:<id>"}` followed to the
//! file the bundle maps it to; only top-level properties are told apart.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Map, Value};

use crate::bundle::tools::{Tool, ToolsFile, Transport};

/// How much a change asks of a release's version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Bump {
    /// Nothing a caller can see.
    Patch,
    /// Something added.
    Minor,
    /// Something a caller relied on changed or went away.
    Major,
}

impl Bump {
    /// `major`, `minor` or `patch`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Bump::Patch => "patch",
            Bump::Minor => "minor",
            Bump::Major => "major",
        }
    }
}

/// One change between two releases.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Change {
    /// What it asks of the version.
    pub(crate) bump: Bump,
    /// What changed, in words.
    pub(crate) what: String,
}

/// A bundle's tools as a release has them: each tool with its schemas,
/// `$ref`s followed.
pub(crate) struct Release {
    /// `manifest.toml`'s version.
    pub(crate) version: Option<String>,
    tools: Vec<(Tool, Option<Value>, Option<Value>)>,
}

impl Release {
    /// The release in bundle folder `dir`; why not, when its manifest or
    /// tools.json does not read.
    pub(crate) fn read(dir: &Path) -> Result<Release, String> {
        let text = |name: &str| {
            std::fs::read_to_string(dir.join(name))
                .map_err(|e| format!("cannot read {}: {e}", dir.join(name).display()))
        };
        let (manifest, _) = crate::bundle::parse_manifest(&text("manifest.toml")?);
        let (tools, _) = crate::bundle::parse_tools(&text("tools.json")?);
        let tools: ToolsFile = tools.ok_or_else(|| format!("{} does not read", dir.join("tools.json").display()))?;
        let schema = |tool: &Tool, value: &Option<Value>| value.as_ref().map(|v| followed(dir, tool, v));
        let tools = tools
            .tools
            .into_iter()
            .map(|tool| {
                let (input, result) = (schema(&tool, &tool.input_schema), schema(&tool, &tool.result_schema));
                (tool, input, result)
            })
            .collect();
        Ok(Release { version: manifest.and_then(|m| m.version), tools })
    }

    fn get(&self, id: &str) -> Option<&(Tool, Option<Value>, Option<Value>)> {
        self.tools.iter().find(|(tool, _, _)| tool.id == id)
    }
}

/// `schema`, a `{"$ref": "schema:<id>"}` followed to the file `tool` maps
/// it to (as written when it does not read).
fn followed(dir: &Path, tool: &Tool, schema: &Value) -> Value {
    let reference = schema.get("$ref").and_then(Value::as_str);
    let path = reference.and_then(|r| tool.schema_refs.iter().find(|(id, _)| id == r)).map(|(_, path)| dir.join(path));
    path.and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_else(|| schema.clone())
}

/// Every change from `previous` to `current`, breaking ones first.
pub(crate) fn compare(previous: &Release, current: &Release) -> Vec<Change> {
    let mut changes = Vec::new();
    for (old, old_input, old_result) in &previous.tools {
        let Some((new, new_input, new_result)) = current.get(&old.id) else {
            let renamed = current.tools.iter().find(|(t, _, _)| previous.get(&t.id).is_none() && same_target(old, t));
            let what = match renamed {
                Some((to, _, _)) => format!("tool `{}` was renamed to `{}`", old.id, to.id),
                None => format!("tool `{}` was removed", old.id),
            };
            changes.push(Change { bump: Bump::Major, what });
            continue;
        };
        let id = &old.id;
        input_changes(id, old_input.as_ref(), new_input.as_ref(), &mut changes);
        result_changes(id, old_result.as_ref(), new_result.as_ref(), &mut changes);
        if old.description != new.description || old.summary != new.summary {
            changes.push(Change { bump: Bump::Patch, what: format!("tool `{id}`: its description changed") });
        }
    }
    for (new, _, _) in &current.tools {
        if previous.get(&new.id).is_none()
            && !changes.iter().any(|c| c.what.ends_with(&format!("renamed to `{}`", new.id)))
        {
            changes.push(Change { bump: Bump::Minor, what: format!("tool `{}` was added", new.id) });
        }
    }
    changes.sort_by_key(|c| std::cmp::Reverse(c.bump));
    changes
}

/// Whether two tools reach the same program or server tool.
fn same_target(a: &Tool, b: &Tool) -> bool {
    match (&a.transport, &b.transport) {
        (Some(Transport::Mcp { server: s1, tool: t1, .. }), Some(Transport::Mcp { server: s2, tool: t2, .. })) => {
            s1 == s2 && t1 == t2
        }
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// The top-level properties, `required` and `additionalProperties: false`
/// of an object schema.
fn shape(schema: Option<&Value>) -> (Map<String, Value>, BTreeSet<String>, bool) {
    let schema = schema.unwrap_or(&Value::Null);
    let properties = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    (properties, required, closed)
}

/// The types a property schema allows (`None`: any).
fn types(property: &Value) -> Option<BTreeSet<String>> {
    match property.get("type")? {
        Value::String(one) => Some([one.clone()].into()),
        Value::Array(many) => Some(many.iter().filter_map(Value::as_str).map(str::to_string).collect()),
        _ => None,
    }
}

/// Whether `new` allows every value of `old`'s types and enum.
fn still_accepts(old: &Value, new: &Value) -> bool {
    let wider = |a: Option<BTreeSet<String>>, b: Option<BTreeSet<String>>| match (a, b) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(a), Some(b)) => a.is_subset(&b) || (a.contains("integer") && b.contains("number") && a.len() == 1),
    };
    let enumerated = |v: &Value| v.get("enum").and_then(Value::as_array).cloned();
    let enum_ok = match (enumerated(old), enumerated(new)) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(a), Some(b)) => a.iter().all(|v| b.contains(v)),
    };
    wider(types(old), types(new)) && enum_ok
}

/// What changed in what callers send.
fn input_changes(id: &str, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<Change>) {
    let ((old_props, old_required, _), (new_props, new_required, new_closed)) = (shape(old), shape(new));
    let mut push = |bump, what: String| out.push(Change { bump, what: format!("tool `{id}` input: {what}") });
    for required in new_required.difference(&old_required) {
        push(Bump::Major, format!("`{required}` is now required"));
    }
    for (name, old_property) in &old_props {
        match new_props.get(name) {
            None if new_closed => push(Bump::Major, format!("`{name}` was removed and no other property is allowed")),
            None => push(Bump::Minor, format!("`{name}` was removed")),
            Some(new_property) if !still_accepts(old_property, new_property) => {
                push(Bump::Major, format!("`{name}` no longer accepts every value it did (type or enum narrowed)"))
            }
            Some(new_property) if new_property != old_property => push(Bump::Minor, format!("`{name}` changed")),
            Some(_) => {}
        }
    }
    for name in new_props.keys().filter(|n| !old_props.contains_key(*n) && !new_required.contains(*n)) {
        push(Bump::Minor, format!("optional `{name}` was added"));
    }
    if old != new && out.last().is_none_or(|c| !c.what.starts_with(&format!("tool `{id}` input"))) {
        out.push(Change { bump: Bump::Minor, what: format!("tool `{id}` input: its schema changed") });
    }
}

/// What changed in what callers receive.
fn result_changes(id: &str, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<Change>) {
    let ((old_props, old_required, _), (new_props, new_required, _)) = (shape(old), shape(new));
    let before = out.len();
    let mut push = |bump, what: String| out.push(Change { bump, what: format!("tool `{id}` result: {what}") });
    for (name, old_property) in &old_props {
        match new_props.get(name) {
            None => push(Bump::Major, format!("`{name}` was removed")),
            Some(new_property) if types(old_property) != types(new_property) => {
                push(Bump::Major, format!("`{name}` changed type"))
            }
            Some(_) => {}
        }
    }
    for gone in old_required.difference(&new_required) {
        push(Bump::Major, format!("`{gone}` is no longer always there"));
    }
    for name in new_props.keys().filter(|n| !old_props.contains_key(*n)) {
        push(Bump::Minor, format!("`{name}` was added"));
    }
    if old != new && out.len() == before {
        out.push(Change { bump: Bump::Minor, what: format!("tool `{id}` result: its schema changed") });
    }
}

/// The bump `changes` need.
pub(crate) fn needed(changes: &[Change]) -> Bump {
    changes.iter().map(|c| c.bump).max().unwrap_or(Bump::Patch)
}

/// Whether going from version `previous` to `current` allows changes that
/// need `bump`; why not, naming the version that would. Before 1.0 a minor
/// bump allows breaking changes and a patch one additions (as Cargo reads
/// them).
pub(crate) fn bumped_enough(previous: &str, current: &str, bump: Bump) -> Result<(), String> {
    let parse =
        |v: &str| semver::Version::parse(v).map_err(|e| format!("version `{v}` is not a semantic version: {e}"));
    let (old, new) = (parse(previous)?, parse(current)?);
    if new <= old {
        return Err(format!("version {current} is not after {previous}"));
    }
    let early = old.major == 0;
    let made = if new.major > old.major || (early && new.minor > old.minor) {
        Bump::Major
    } else if new.minor > old.minor || early {
        Bump::Minor
    } else {
        Bump::Patch
    };
    if made >= bump {
        return Ok(());
    }
    let next = match (bump, early) {
        (Bump::Major, false) => format!("{}.0.0", old.major + 1),
        (Bump::Major, true) | (Bump::Minor, false) => format!("{}.{}.0", old.major, old.minor + 1),
        _ => format!("{}.{}.{}", old.major, old.minor, old.patch + 1),
    };
    Err(format!(
        "version {previous} → {current} is too small a step for {} changes: release {next} or later",
        bump.as_str()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn release(version: &str, tools: Value) -> Release {
        let text = json!({"version": 1, "tools": tools}).to_string();
        let (file, _) = crate::bundle::parse_tools(&text);
        let tools = file
            .unwrap()
            .tools
            .into_iter()
            .map(|t| {
                let (i, r) = (t.input_schema.clone(), t.result_schema.clone());
                (t, i, r)
            })
            .collect();
        Release { version: Some(version.into()), tools }
    }

    fn tool(id: &str, input: Value, result: Value) -> Value {
        json!({"id": id, "description": "d", "transport": {"kind": "exec", "command": format!("/bin/{id}")},
               "input_schema": input, "result_schema": result})
    }

    fn object(properties: Value, required: &[&str]) -> Value {
        json!({"type": "object", "properties": properties, "required": required})
    }

    #[test]
    fn removed_renamed_and_narrowed_are_breaking_added_is_minor() {
        let before = release(
            "1.2.0",
            json!([
                tool(
                    "a.send",
                    object(json!({"to": {"type": "string"}, "cc": {"type": "string"}}), &["to"]),
                    object(json!({"id": {"type": "string"}}), &["id"])
                ),
                tool("a.gone", object(json!({}), &[]), json!({})),
            ]),
        );
        let mut moved = tool("a.gone_now", object(json!({}), &[]), json!({}));
        moved["transport"]["command"] = json!("/bin/a.gone");
        let after = release(
            "1.3.0",
            json!([
                tool(
                    "a.send",
                    object(
                        json!({"to": {"type": "string"}, "cc": {"type": "string"}, "bcc": {"type": "string"}}),
                        &["to", "cc"]
                    ),
                    object(json!({"id": {"type": "integer"}, "at": {"type": "string"}}), &["id"])
                ),
                moved,
                tool("a.new", object(json!({}), &[]), json!({})),
            ]),
        );
        let changes = compare(&before, &after);
        let said: Vec<(Bump, &str)> = changes.iter().map(|c| (c.bump, c.what.as_str())).collect();
        assert_eq!(
            said,
            [
                (Bump::Major, "tool `a.send` input: `cc` is now required"),
                (Bump::Major, "tool `a.send` result: `id` changed type"),
                (Bump::Major, "tool `a.gone` was renamed to `a.gone_now`"),
                (Bump::Minor, "tool `a.send` input: optional `bcc` was added"),
                (Bump::Minor, "tool `a.send` result: `at` was added"),
                (Bump::Minor, "tool `a.new` was added"),
            ]
        );
        assert_eq!(needed(&changes), Bump::Major);
        assert_eq!(
            bumped_enough("1.2.0", "1.3.0", Bump::Major).unwrap_err(),
            "version 1.2.0 → 1.3.0 is too small a step for major changes: release 2.0.0 or later"
        );
        assert!(bumped_enough("1.2.0", "2.0.0", Bump::Major).is_ok());
        assert!(bumped_enough("0.2.0", "0.3.0", Bump::Major).is_ok());
        assert_eq!(
            bumped_enough("0.2.0", "0.2.1", Bump::Major).unwrap_err(),
            "version 0.2.0 → 0.2.1 is too small a step for major changes: release 0.3.0 or later"
        );
        assert!(bumped_enough("0.2.0", "0.2.1", Bump::Minor).is_ok());
        assert_eq!(bumped_enough("1.0.0", "1.0.0", Bump::Patch).unwrap_err(), "version 1.0.0 is not after 1.0.0");
    }
}
