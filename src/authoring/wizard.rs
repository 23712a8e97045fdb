//! The questions of `rlp agent scaffold` and `rlp tools add`, asked through
//! [`Ask`]. Every answer is checked as it is typed, with the bundle model's
//! own checks; a question that a flag already answered is not asked.

use std::path::{Path, PathBuf};

use crate::authoring::AuthoringError;
use crate::authoring::ask::Ask;
use crate::authoring::check::check_drafts;
use crate::authoring::policy_edit::Needed;
use crate::authoring::scaffold::{AgentPlan, default_description};
use crate::authoring::spec::{
    SchemaSource, ToolDefinition, ToolDraft, ToolSpec, ToolSpecBuilder, TransportSpec, confirm_by_default,
};
use crate::authoring::validate;
use crate::bundle::capability::{Capability, NetTarget, SecretId};
use crate::bundle::tools::HTTP_METHODS;

/// Agent-level answers given as flags; `None` means "ask".
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct AgentPreset {
    /// `--description`.
    pub description: Option<String>,
    /// `--model` (empty: none).
    pub model: Option<String>,
    /// `--model-secret`.
    pub model_secret: Option<SecretId>,
    /// `--cap-fs`.
    pub fs: Option<Vec<PathBuf>>,
    /// `--cap-net`.
    pub net: Option<Vec<NetTarget>>,
    /// `--cap-kb-read`: `Some(None)` is every domain (`*`).
    pub kb_read: Option<Option<Vec<String>>>,
    /// `--cap-kb-write`.
    pub kb_write: Option<Option<Vec<String>>>,
    /// `--cap-exec`.
    pub exec: Option<bool>,
    /// `--cap-time`.
    pub time: Option<bool>,
}

impl AgentPreset {
    /// The plan these answers make, with defaults for everything not given.
    pub(crate) fn into_plan(self, name: &str, tools: Vec<ToolDefinition>) -> AgentPlan {
        let mut plan = AgentPlan::new(name);
        if let Some(description) = self.description {
            plan.description = description;
        }
        plan.model = self.model.filter(|m| !m.is_empty());
        plan.model_secret = self.model_secret;
        let mut grants = Vec::new();
        let mut add = |capability: Capability| grants.push(Needed { capability, net_hint: None });
        self.fs.unwrap_or_default().into_iter().for_each(|p| add(Capability::Fs(p)));
        self.net.unwrap_or_default().into_iter().for_each(|t| add(Capability::Net(t)));
        for (scope, make) in [
            (self.kb_read, Capability::KbRead as fn(Option<String>) -> Capability),
            (self.kb_write, Capability::KbWrite),
        ] {
            match scope {
                None => {}
                Some(None) => add(make(None)),
                Some(Some(domains)) => domains.into_iter().for_each(|d| add(make(Some(d)))),
            }
        }
        if self.time == Some(true) {
            add(Capability::Time);
        }
        if self.exec == Some(true) {
            add(Capability::Exec);
        }
        plan.grants = grants;
        plan.tools = tools;
        plan
    }
}

/// A model id: one line of printable characters.
pub(crate) fn model_id(text: &str) -> Result<String, String> {
    let text = text.trim();
    if text.chars().any(char::is_control) {
        Err("the model id must be one line without control characters".into())
    } else {
        Ok(text.to_string())
    }
}

fn ok<T>(r: Result<T, String>) -> Result<(), String> {
    r.map(|_| ())
}

/// Asks the agent-level questions the preset leaves open, then offers to add
/// tools (after those given as `--tool`), and returns the plan.
pub(crate) fn agent(
    ask: &mut dyn Ask,
    name: &str,
    mut preset: AgentPreset,
    tools: Vec<ToolDefinition>,
) -> Result<AgentPlan, AuthoringError> {
    ask.say(&format!("Creating the agent bundle `{name}`. Press Enter to take the value in [brackets]."));
    if preset.description.is_none() {
        let default = default_description(name);
        let answer = ask.text("Description", Some(&default), &|s| ok(validate::agent_description(s)))?;
        preset.description = Some(answer.trim().to_string());
    }
    if preset.model.is_none() {
        let answer = ask.text("Model id (empty for none)", None, &|s| ok(model_id(s)))?;
        preset.model = Some(answer.trim().to_string());
    }
    let has_model = preset.model.as_deref().is_some_and(|m| !m.is_empty());
    if has_model && preset.model_secret.is_none() {
        let answer =
            ask.text("Secret holding the model's API key (runloop/<scope>/<name>, empty for none)", None, &|s| {
                if s.trim().is_empty() { Ok(()) } else { ok(validate::secret(s)) }
            })?;
        preset.model_secret = validate::secret(&answer).ok();
    }
    ask.say("Capabilities the agent is granted (policy.caps); tools add what they need on their own.");
    if preset.fs.is_none() {
        let answer =
            ask.text("Directories it may read and write (fs: absolute paths, comma-separated)", None, &|s| {
                ok(validate::each(s, validate::fs_root))
            })?;
        preset.fs = Some(validate::each(&answer, validate::fs_root).unwrap_or_default());
    }
    if preset.net.is_none() {
        let answer = ask.text("Hosts it may reach (net: host or host:port, comma-separated)", None, &|s| {
            ok(validate::each(s, validate::net_host))
        })?;
        preset.net = Some(validate::each(&answer, validate::net_host).unwrap_or_default());
    }
    if preset.kb_read.is_none() {
        let answer = ask.text("Knowledge-base domains it may read (comma-separated, * for all)", None, &|s| {
            ok(validate::kb_scope(s))
        })?;
        preset.kb_read = validate::kb_scope(&answer).ok().filter(|s| s.as_ref().is_none_or(|d| !d.is_empty()));
    }
    if preset.kb_write.is_none() {
        let answer = ask.text("Knowledge-base domains it may write (comma-separated, * for all)", None, &|s| {
            ok(validate::kb_scope(s))
        })?;
        preset.kb_write = validate::kb_scope(&answer).ok().filter(|s| s.as_ref().is_none_or(|d| !d.is_empty()));
    }
    if preset.exec.is_none() {
        preset.exec = Some(ask.confirm("May it run exec tools (exec)?", false)?);
    }
    let mut plan = preset.into_plan(name, tools);
    let mut drafts = plan.drafts()?;
    while ask.confirm("Add a tool?", drafts.is_empty())? {
        let taken: Vec<String> = drafts.iter().map(|d| d.id().to_string()).collect();
        let planned: Vec<String> = drafts.iter().flat_map(|d| d.schema_files.iter().map(|(p, _)| p.clone())).collect();
        let exists = |id: &str| planned.contains(&format!("schemas/{id}.json"));
        let spec = tool(ask, &taken, ToolSpecBuilder::default())?;
        let draft = spec.to_draft(&exists);
        let shown = serde_json::to_string_pretty(&serde_json::Value::Object(draft.entry.clone())).unwrap_or_default();
        ask.say(&shown);
        if !ask.confirm("Add this tool?", true)? {
            ask.say(&format!("Tool `{}` left out.", spec.id));
            continue;
        }
        let staging = tempfile::tempdir().map_err(|e| AuthoringError::usage(format!("temporary folder: {e}")))?;
        let mut all: Vec<&ToolDraft> = drafts.iter().collect();
        all.push(&draft);
        match check_drafts(staging.path(), &all) {
            Ok(_) => {
                ask.say(&format!("Tool `{}` added.", spec.id));
                plan.tools.push(ToolDefinition::Spec(Box::new(spec)));
                drafts.push(draft);
            }
            Err(e) => ask.say(&format!("Tool `{}` not added: {}", spec.id, e.message)),
        }
    }
    Ok(plan)
}

/// Asks for one tool, skipping the fields `tool` already holds. `taken` are
/// the ids already in use.
pub(crate) fn tool(ask: &mut dyn Ask, taken: &[String], mut tool: ToolSpecBuilder) -> Result<ToolSpec, AuthoringError> {
    if tool.id.is_none() {
        let id = ask.text("Tool id (e.g. mail.send)", None, &|s| {
            let id = validate::tool_id(s.trim())?;
            if taken.contains(&id) { Err(format!("a tool `{id}` already exists; choose another id")) } else { Ok(()) }
        })?;
        tool.id = Some(id.trim().to_string());
    }
    if tool.description.is_none() {
        let answer = ask.text("What it does (one line)", None, &|s| ok(validate::tool_description(s)))?;
        tool.description = Some(answer.trim().to_string());
    }
    let transport = match tool.transport.take() {
        Some(t) => t,
        None => ask_transport(ask)?,
    };
    let placeholders = match &transport {
        TransportSpec::Http { url, .. } => {
            validate::url(url).map(|u| u.placeholders().map(str::to_string).collect::<Vec<_>>()).unwrap_or_default()
        }
        TransportSpec::Exec { .. } => Vec::new(),
    };
    let schema_prompt =
        |what: &str| format!("{what} schema (Enter: a starter schema; schema:<id>: a shared file; or inline JSON)");
    if tool.input.is_none() {
        if !placeholders.is_empty() {
            ask.say(&format!(
                "The starter input schema has a string property for each URL placeholder: {}.",
                placeholders.join(", ")
            ));
        }
        let answer = ask.text(&schema_prompt("Input"), None, &|s| ok(SchemaSource::parse(s)))?;
        tool.input = Some(SchemaSource::parse(&answer).map_err(AuthoringError::usage)?);
    }
    if tool.result.is_none() {
        let answer = ask.text(&schema_prompt("Result"), None, &|s| ok(SchemaSource::parse(s)))?;
        tool.result = Some(SchemaSource::parse(&answer).map_err(AuthoringError::usage)?);
    }
    if tool.secrets.is_none() {
        let answer = ask.text("Secrets it uses (runloop/<scope>/<name>, comma-separated)", None, &|s| {
            ok(validate::each(s, validate::secret))
        })?;
        tool.secrets = Some(validate::each(&answer, validate::secret).map_err(AuthoringError::usage)?);
    }
    if tool.capabilities.is_none() {
        let answer = ask.text(
            "Other capabilities it needs (e.g. fs:/data, kb_read:notes; its transport and secrets are added for you)",
            None,
            &|s| ok(validate::each(s, validate::capability)),
        )?;
        tool.capabilities = Some(validate::each(&answer, validate::capability).map_err(AuthoringError::usage)?);
    }
    if tool.confirm.is_none() {
        let secrets = tool.secrets.as_deref().unwrap_or_default();
        let capabilities = tool.capabilities.as_deref().unwrap_or_default();
        tool.confirm = Some(ask.confirm(
            "Ask an operator to approve each call (requires_confirmation)?",
            confirm_by_default(&transport, secrets, capabilities),
        )?);
    }
    if tool.budget.is_none() {
        let tokens = ask.text("Budget: tokens per call (empty for none)", None, &|s| {
            if s.trim().is_empty() { Ok(()) } else { ok(validate::positive(s, "tokens")) }
        })?;
        let usd = ask.text("Budget: US dollars per call (empty for none)", None, &|s| {
            if s.trim().is_empty() { Ok(()) } else { ok(validate::usd(s)) }
        })?;
        tool.budget = Some((validate::positive(&tokens, "tokens").ok(), validate::usd(&usd).ok()));
    }
    if tool.tags.is_none() {
        let answer = ask.text("Tags for traces (comma-separated)", None, &|s| ok(validate::each(s, validate::tag)))?;
        tool.tags = Some(validate::each(&answer, validate::tag).map_err(AuthoringError::usage)?);
    }
    tool.transport = Some(transport);
    tool.build().map_err(|_| AuthoringError::usage("the tool is missing its id, description or transport"))
}

fn ask_transport(ask: &mut dyn Ask) -> Result<TransportSpec, AuthoringError> {
    let kind = ask.select("How is it reached?", &["exec: a local binary", "http: an HTTP API"], 0)?;
    if kind == 0 {
        let command = ask.text("Absolute path of the binary", None, &|s| ok(validate::command(s)))?;
        let args = ask.text("Arguments after the blob path (space-separated, empty for none)", None, &|_| Ok(()))?;
        return Ok(TransportSpec::Exec {
            command: command.trim().to_string(),
            args: args.split_whitespace().map(str::to_string).collect(),
        });
    }
    let method = HTTP_METHODS[ask.select("HTTP method", HTTP_METHODS, 0)?.min(HTTP_METHODS.len() - 1)].to_string();
    let url =
        ask.text("URL template (placeholders like {id} only in the path and query)", None, &|s| ok(validate::url(s)))?;
    let mut headers: Vec<(String, String)> = Vec::new();
    loop {
        let answer = ask.text("Header `Name: value` (${secret:<id>} allowed; empty when done)", None, &|s| {
            if s.trim().is_empty() { Ok(()) } else { ok(validate::header(s)) }
        })?;
        if answer.trim().is_empty() {
            break;
        }
        headers.push(validate::header(&answer).map_err(AuthoringError::usage)?);
    }
    Ok(TransportSpec::Http { method, url: url.trim().to_string(), headers })
}

/// Asks for one tool for `rlp tools add`, and checks it like lint would.
pub(crate) fn tool_for_bundle(
    ask: &mut dyn Ask,
    bundle_dir: &Path,
    taken: &[String],
    given: ToolSpecBuilder,
) -> Result<ToolDraft, AuthoringError> {
    let spec = tool(ask, taken, given)?;
    let draft = spec.to_draft(&|id| bundle_dir.join("schemas").join(format!("{id}.json")).exists());
    check_drafts(bundle_dir, &[&draft])?;
    Ok(draft)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authoring::ask::Scripted;

    #[test]
    fn scripted_wizard_builds_a_plan() {
        let mut ask = Scripted::new([
            "",                  // description: default
            "claude-x",          // model
            "runloop/model/key", // model secret
            "/srv/data",         // fs
            "",                  // net
            "*",                 // kb read
            "",                  // kb write
            "n",                 // exec
            "y",                 // add a tool
            "demo.get",          // id
            "Fetch a thing",     // description
            "1",                 // http
            "GET",               // method
            "https://api.example.com/things/{id}",
            "Authorization: Bearer ${secret:runloop/api/token}",
            "",    // headers done
            "",    // input: starter
            "",    // result: starter
            "",    // secrets
            "",    // caps
            "",    // confirm: default yes
            "",    // tokens
            "",    // usd
            "api", // tags
            "",    // add this tool: yes
            "n",   // no more tools
        ]);
        let plan = agent(&mut ask, "demo", AgentPreset::default(), Vec::new()).unwrap();
        assert_eq!(plan.description, "demo agent");
        assert_eq!(plan.model.as_deref(), Some("claude-x"));
        assert_eq!(plan.tools.len(), 1);
        let drafts = plan.drafts().unwrap();
        assert_eq!(drafts[0].entry["requires_confirmation"], true);
        assert_eq!(drafts[0].entry["input_schema"]["required"], serde_json::json!(["id"]));
        let grants: Vec<String> = plan.all_grants(&drafts).iter().map(Needed::shown).collect();
        assert_eq!(
            grants,
            [
                "fs:/srv/data",
                "kb_read",
                "model",
                "secrets:runloop/model/key",
                "net:api.example.com",
                "secrets:runloop/api/token"
            ]
        );
    }

    #[test]
    fn a_later_tool_can_share_a_schema_an_earlier_one_created() {
        let tool = |id: &str| {
            vec![
                "y".to_string(),
                id.to_string(),
                "Does things".into(),
                "0".into(),
                "/bin/true".into(),
                "".into(),
                "schema:shared.in".into(),
                "".into(),
                "".into(),
                "".into(),
                "".into(),
                "".into(),
                "".into(),
                "".into(),
                "".into(),
            ]
        };
        let mut answers: Vec<String> =
            vec!["A".into(), "".into(), "".into(), "".into(), "".into(), "".into(), "".into()];
        answers.extend(tool("a.one"));
        answers.extend(tool("a.two"));
        answers.push("n".into());
        let mut ask = Scripted::new(answers);
        let plan = agent(&mut ask, "demo", AgentPreset::default(), Vec::new()).unwrap();
        assert_eq!(plan.tools.len(), 2, "{:?}", ask.transcript);
        let drafts = plan.drafts().unwrap();
        assert_eq!(drafts[0].schema_files.len(), 1);
        assert!(drafts[1].schema_files.is_empty());
    }
}
