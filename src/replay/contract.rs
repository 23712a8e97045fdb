//! What a bundle promises today: which tools exist, and the input and result
//! schemas they are held to. Replay checks recorded calls against it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::event::placeholder::holds_placeholder;
use crate::home::Home;
use crate::runtime::recorder::NullRecorder;
use crate::runtime::{LoadError, Prepared, Runtime, RuntimeOptions};

/// Schema errors quoted for one value.
const QUOTED_ERRORS: usize = 3;

/// The tools of a bundle with their compiled schemas.
pub(crate) struct Contract {
    agent: String,
    version: Option<String>,
    /// The runtime's own compiled schemas, shared.
    tools: HashMap<String, Arc<Prepared>>,
}

impl std::fmt::Debug for Contract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut tools: Vec<&String> = self.tools.keys().collect();
        tools.sort();
        f.debug_struct("Contract").field("agent", &self.agent).field("tools", &tools).finish()
    }
}

/// The outcome of checking a value against a tool's schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Check {
    /// The value is valid.
    Valid,
    /// The value is not valid: the first errors, as `<pointer>: <message>`, sorted.
    Invalid(Vec<String>),
    /// The bundle has no such tool.
    MissingTool,
}

fn schema_errors(validator: &jsonschema::Validator, value: &Value) -> Check {
    if validator.is_valid(value) {
        return Check::Valid;
    }
    // A placeholder of a redacted export stands for any value.
    let mut errors: Vec<String> =
        crate::bundle::schema::error_lines_except(validator, value, holds_placeholder).collect();
    if errors.is_empty() {
        return Check::Valid;
    }
    errors.sort();
    errors.dedup();
    let total = errors.len();
    errors.truncate(QUOTED_ERRORS);
    if total > QUOTED_ERRORS {
        errors.push(format!("… and {} more", total - QUOTED_ERRORS));
    }
    Check::Invalid(errors)
}

impl Contract {
    /// Loads the bundle at `dir` the way the runtime does (a bundle with lint
    /// errors is refused; tools whose capabilities are not granted still
    /// count), then compiles every tool's schemas.
    pub(crate) fn load(dir: &Path, home: &Home) -> Result<Contract, LoadError> {
        let runtime = Runtime::load(dir, RuntimeOptions::new(home.clone(), Arc::new(NullRecorder)))?;
        Self::for_runtime(&runtime)
    }

    /// The contract of the bundle a runtime serves, sharing the schemas the
    /// runtime compiled.
    pub(crate) fn for_runtime(runtime: &Runtime) -> Result<Contract, LoadError> {
        let tools = runtime
            .tool_ids()
            .iter()
            .filter_map(|id| runtime.prepared(id).map(|p| (id.clone(), Arc::clone(p))))
            .collect();
        Ok(Contract { agent: runtime.agent().to_string(), version: runtime.version().map(str::to_string), tools })
    }

    /// A contract of agent `agent` without tools (every call is a
    /// `missing_tool`).
    #[cfg(test)]
    pub(crate) fn without_tools(agent: &str) -> Contract {
        Contract { agent: agent.into(), version: None, tools: HashMap::new() }
    }

    /// The agent's name.
    pub(crate) fn agent(&self) -> &str {
        &self.agent
    }

    /// The bundle's version, as written in manifest.toml.
    pub(crate) fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// Checks arguments against the tool's `input_schema`.
    pub(crate) fn check_args(&self, tool: &str, args: &Value) -> Check {
        match self.tools.get(tool) {
            Some(t) => schema_errors(&t.input, args),
            None => Check::MissingTool,
        }
    }

    /// The BLAKE3 of the tool's `input_schema` and `result_schema` today
    /// (as call and result frames record them), if the tool exists.
    pub(crate) fn schema_hashes(&self, tool: &str) -> Option<(&str, &str)> {
        self.tools.get(tool).map(|t| (t.input_schema.blake3.as_str(), t.result_schema.blake3.as_str()))
    }

    /// Checks a result against the tool's `result_schema`.
    pub(crate) fn check_result(&self, tool: &str, result: &Value) -> Check {
        match self.tools.get(tool) {
            Some(t) => schema_errors(&t.result, result),
            None => Check::MissingTool,
        }
    }
}
