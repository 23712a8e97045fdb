//! `[agents.<agent>.tools]` in a config file: the operator's `allow` and
//! `deny` lists of the agent's tools ([`tool_list`](super::tool_list)) and
//! each tool's options (`[agents.<agent>.tools."<tool id>".options]`).
//!
//! `allow` and `deny` are always the lists: a tool whose id is `allow` or
//! `deny` cannot take options from a config file (`--option` still gives them).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use crate::config::ConfigError;
use crate::config::tool_list::{FileList, LIST_KEYS, read_list};

/// What one file says under `[agents]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct AgentsLayer {
    /// `[agents.<agent>.tools."<tool id>".options]`, by agent, then tool id.
    pub options: BTreeMap<String, BTreeMap<String, Map<String, Value>>>,
    /// `[agents.<agent>.tools] allow` and `deny`, by agent.
    pub lists: BTreeMap<String, FileList>,
}

/// Reads the `[agents]` table of the file at `path`; anything it does not
/// know is ignored with a warning, a value of the wrong type is an error.
pub(crate) fn read_agents(
    path: &Path,
    agents: &toml::Table,
    warnings: &mut Vec<String>,
) -> Result<AgentsLayer, ConfigError> {
    let shown = path.display();
    let not_table = |what: String| ConfigError {
        message: format!("{shown}: `{what}` must be a table"),
        help: format!("write it as [{what}] with `name = value` lines below it"),
    };
    let mut layer = AgentsLayer::default();
    for (agent, entry) in agents {
        let entry = entry.as_table().ok_or_else(|| not_table(format!("agents.{agent}")))?;
        for (key, tools) in entry {
            if key != "tools" {
                warnings.push(format!("{shown}: unknown key `agents.{agent}.{key}` ignored"));
                continue;
            }
            let tools = tools.as_table().ok_or_else(|| not_table(format!("agents.{agent}.tools")))?;
            for (tool, settings) in tools {
                if LIST_KEYS.contains(&tool.as_str()) {
                    read_list(path, agent, tool, settings, layer.lists.entry(agent.clone()).or_default())?;
                    continue;
                }
                let at = format!("agents.{agent}.tools.\"{tool}\"");
                let settings = settings.as_table().ok_or_else(|| not_table(at.clone()))?;
                for (key, value) in settings {
                    if key != "options" {
                        warnings.push(format!("{shown}: unknown key `{at}.{key}` ignored"));
                        continue;
                    }
                    let table = value.as_table().ok_or_else(|| not_table(format!("{at}.options")))?;
                    let values = serde_json::to_value(table).map_err(|e| ConfigError {
                        message: format!("{shown}: `{at}.options` cannot be read: {e}"),
                        help: "write the options as plain TOML values".to_string(),
                    })?;
                    if let Value::Object(values) = values {
                        layer.options.entry(agent.clone()).or_default().insert(tool.clone(), values);
                    }
                }
            }
        }
    }
    Ok(layer)
}
