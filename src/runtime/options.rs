//! Tool options (docs/runtime.md "Options"): per-tool settings the
//! operator chooses, described by the tool's `options_schema`.
//!
//! Values come from, highest first: `--option KEY=VALUE`, the config files'
//! `[agents.<agent>.tools."<tool id>".options]`, the schema's top-level
//! property `default`s. The merged object is validated against the schema
//! before the tool runs. A tool without `options_schema` gets what it is
//! given free-form (seed 003: "each tool defines its own; unknown options
//! forwarded"), unvalidated but for their depth, and recorded alike.

use serde_json::{Map, Value};

use crate::bundle::value::{MAX_DATA_DEPTH, json_depth};
use crate::config::ConfiguredOptions;
use crate::runtime::call::Call;
use crate::runtime::error::{CallError, CallErrorKind};
use crate::runtime::validate::schema_errors;

/// Where the values of a tool's options come from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OptionSources<'a> {
    /// The tool's `options_schema`, if it has one.
    pub schema: Option<&'a Value>,
    /// What the config files set.
    pub configured: Option<&'a ConfiguredOptions>,
    /// What the call gives (`--option`).
    pub given: &'a Map<String, Value>,
}

/// The merged options of a call (not yet validated): `None` when nothing
/// is set for the tool (no schema defaults, no config, no `--option`).
pub(crate) fn merge(sources: OptionSources<'_>) -> Option<Map<String, Value>> {
    let mut merged = sources.schema.map(defaults).unwrap_or_default();
    if let Some(configured) = sources.configured {
        merged.extend(configured.values.clone());
    }
    merged.extend(sources.given.clone());
    (sources.schema.is_some() || !merged.is_empty()).then_some(merged)
}

impl Call<'_> {
    /// Step 2: the call's options, merged ([`merge`]) and validated against
    /// the tool's `options_schema` when it has one; `None` when none are set.
    /// Invalid options refuse the call before anything runs (exit 2).
    pub(crate) fn options_of(&mut self) -> Result<Option<Map<String, Value>>, CallError> {
        let (runtime, prepared) = (self.runtime, self.prepared);
        let tool = &prepared.tool;
        let journal = &mut self.journal;
        let sources = OptionSources {
            schema: tool.options_schema.as_ref(),
            configured: runtime.options().config.options_of(runtime.agent(), &tool.id),
            given: &self.request.options,
        };
        let merged = merge(sources);
        if let Some(merged) = &merged
            && json_depth(&Value::Object(merged.clone())) > MAX_DATA_DEPTH
        {
            return Err(journal.refuse(
                CallError::new(
                    CallErrorKind::InvalidInput,
                    format!(
                        "the options of `{}` nest arrays and objects more than {MAX_DATA_DEPTH} levels deep",
                        tool.id
                    ),
                )
                .help("flatten the options"),
            ));
        }
        if let (Some(merged), Some(validator)) = (&merged, &prepared.options)
            && let Some(errors) = schema_errors(validator, &Value::Object(merged.clone()))
        {
            return Err(journal.refuse(
                CallError::new(
                    CallErrorKind::InvalidInput,
                    format!("the options of `{}` do not match its options_schema: {errors}", tool.id),
                )
                .help(format!(
                    "fix --option, or [agents.{}.tools.\"{}\".options] in config.toml (see `rlp tools list`)",
                    runtime.agent(),
                    tool.id
                )),
            ));
        }
        Ok(merged)
    }
}

/// The `default` of each top-level property of an options schema.
pub(crate) fn defaults(schema: &Value) -> Map<String, Value> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else { return Map::new() };
    properties
        .iter()
        .filter_map(|(name, property)| property.get("default").map(|d| (name.clone(), d.clone())))
        .collect()
}

/// Reads one `--option KEY=VALUE`: the value is JSON when it reads as JSON,
/// else the text as a string.
pub(crate) fn parse_flag(text: &str) -> Result<(String, Value), String> {
    let (key, value) = text.split_once('=').ok_or_else(|| format!("`{text}` is not KEY=VALUE"))?;
    if key.is_empty() {
        return Err(format!("`{text}` has no key before `=`"));
    }
    let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_string()));
    Ok((key.to_string(), value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merges_defaults_config_and_flags_in_that_order() {
        let schema =
            json!({"type": "object", "properties": {"tone": {"default": "formal"}, "max": {"default": 3}, "cc": {}}});
        let configured = ConfiguredOptions {
            values: json!({"max": 5, "cc": "ops@x"}).as_object().unwrap().clone(),
            files: vec!["/h/config.toml".into()],
        };
        let given = json!({"cc": "me@x"}).as_object().unwrap().clone();
        let sources = OptionSources { schema: Some(&schema), configured: Some(&configured), given: &given };
        assert_eq!(Value::Object(merge(sources).unwrap()), json!({"tone": "formal", "max": 5, "cc": "me@x"}));
        let none = OptionSources { schema: None, configured: None, given: &Map::new() };
        assert_eq!(merge(none), None);
        // Without a schema, what is set is forwarded as it is.
        let free = merge(OptionSources { schema: None, configured: Some(&configured), given: &given }).unwrap();
        assert_eq!(Value::Object(free), json!({"max": 5, "cc": "me@x"}));
    }

    #[test]
    fn parses_flags() {
        assert_eq!(parse_flag("max=5").unwrap(), ("max".to_string(), json!(5)));
        assert_eq!(parse_flag("tone=formal").unwrap(), ("tone".to_string(), json!("formal")));
        assert_eq!(parse_flag("list=[1,2]").unwrap(), ("list".to_string(), json!([1, 2])));
        assert_eq!(parse_flag("x").unwrap_err(), "`x` is not KEY=VALUE");
        assert_eq!(parse_flag("=1").unwrap_err(), "`=1` has no key before `=`");
    }
}
