//! `[agents.<agent>.tools]` in a config file: the operator's `allow` and
//! `deny` lists of the agent's tools ([`tool_list`](super::tool_list)),
//! each tool's options (`[agents.<agent>.tools."<tool id>".options]`) and
//! the fields of its calls a redacted export replaces
//! (`[agents.<agent>.tools."<tool id>"] redact = ["/args/to"]`, read by
//! `rlp trace export --redacted`).
//!
//! `allow` and `deny` are always the lists: a tool whose id is `allow` or
//! `deny` cannot take options or a redact list from a config file
//! (`--option` and `--redact` still give them).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::bundle::call_pointer::CallPointer;
use crate::config::tool_list::{FileList, LIST_KEYS, read_list};
use crate::config::{ConfigError, ConfigFile};

/// What one file says under `[agents]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct AgentsLayer {
    /// `[agents.<agent>.tools."<tool id>".options]`, by agent, then tool id.
    pub options: BTreeMap<String, BTreeMap<String, Map<String, Value>>>,
    /// `[agents.<agent>.tools] allow` and `deny`, by agent.
    pub lists: BTreeMap<String, FileList>,
    /// `[agents.<agent>.tools."<tool id>"] redact`, by agent, then tool id.
    pub redact: BTreeMap<String, BTreeMap<String, Vec<CallPointer>>>,
}

/// Reads the `[agents]` table of the config file `file`; anything it does
/// not know is ignored with a warning, a value of the wrong type is an error.
pub(crate) fn read_agents(
    file: ConfigFile<'_>,
    agents: &toml::Table,
    warnings: &mut Vec<String>,
) -> Result<AgentsLayer, ConfigError> {
    let not_table = |what: String| {
        file.error(
            &what,
            format!("`{what}` must be a table"),
            format!("write it as [{what}] with `name = value` lines below it"),
        )
    };
    let mut layer = AgentsLayer::default();
    for (agent, entry) in agents {
        let entry = entry.as_table().ok_or_else(|| not_table(format!("agents.{agent}")))?;
        for (key, tools) in entry {
            if key != "tools" {
                warnings.push(file.warning(
                    &format!("agents.\"{agent}\".\"{key}\""),
                    format!("unknown key `agents.{agent}.{key}` ignored"),
                ));
                continue;
            }
            let tools = tools.as_table().ok_or_else(|| not_table(format!("agents.{agent}.tools")))?;
            for (tool, settings) in tools {
                if LIST_KEYS.contains(&tool.as_str()) {
                    read_list(file, agent, tool, settings, layer.lists.entry(agent.clone()).or_default())?;
                    continue;
                }
                let at = format!("agents.{agent}.tools.\"{tool}\"");
                let settings = settings.as_table().ok_or_else(|| not_table(at.clone()))?;
                for (key, value) in settings {
                    match key.as_str() {
                        "options" => {
                            let values = read_options(file, &at, value)?;
                            layer.options.entry(agent.clone()).or_default().insert(tool.clone(), values);
                        }
                        "redact" => {
                            let pointers = read_redact(file, &at, value)?;
                            layer.redact.entry(agent.clone()).or_default().insert(tool.clone(), pointers);
                        }
                        _ => warnings.push(
                            file.warning(&format!("{at}.\"{key}\""), format!("unknown key `{at}.{key}` ignored")),
                        ),
                    }
                }
            }
        }
    }
    Ok(layer)
}

/// `<at>.options` of the config file `file`: a table of plain values.
fn read_options(file: ConfigFile<'_>, at: &str, value: &toml::Value) -> Result<Map<String, Value>, ConfigError> {
    let options = format!("{at}.options");
    let table = value.as_table().ok_or_else(|| {
        file.error(
            &options,
            format!("`{options}` must be a table"),
            format!("write it as [{options}] with `name = value` lines below it"),
        )
    })?;
    match serde_json::to_value(table) {
        Ok(Value::Object(values)) => Ok(values),
        Ok(_) => Ok(Map::new()),
        Err(e) => Err(file.error(
            &options,
            format!("`{options}` cannot be read: {e}"),
            "write the options as plain TOML values",
        )),
    }
}

/// `<at>.redact` of the config file `file`: a list of pointers into the
/// tool's calls, each starting with /args or /result.
fn read_redact(file: ConfigFile<'_>, at: &str, value: &toml::Value) -> Result<Vec<CallPointer>, ConfigError> {
    let help = || {
        format!(
            "write `redact = [\"/args/to\", \"/result/items/*/email\"]` under [{at}]: JSON Pointers into the tool's \
             arguments (/args) or result (/result), `*` for every member or element"
        )
    };
    let redact = format!("{at}.redact");
    let Some(items) = value.as_array() else {
        return Err(file.error(
            &redact,
            format!("`{redact}` must be an array of JSON Pointers, found {}", value.type_str()),
            help(),
        ));
    };
    let mut pointers = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let item_at = format!("{redact}[{i}]");
        let Some(text) = item.as_str() else {
            return Err(file.error(
                &item_at,
                format!("`{item_at}` must be a string, found {}", item.type_str()),
                help(),
            ));
        };
        let pointer = CallPointer::parse(text)
            .map_err(|e| file.error(&item_at, format!("`{item_at}`: {}", e.message), e.help))?;
        pointers.push(pointer);
    }
    Ok(pointers)
}
