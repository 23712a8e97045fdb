//! One tool to add: built from `rlp tools add` flags, from a `--tool` spec
//! string, from a JSON object, or from the wizard's answers, and turned into a
//! tools.json entry plus any schema files it needs.
//!
//! The compact spec string is `key=value` items separated by `;`, e.g.
//!
//! ```text
//! id=mail.send;desc=Send mail;http=POST https://api.mail.example/send;
//! header=Authorization: Bearer ${secret:runloop/mail/key};confirm;tag=mail
//! ```
//!
//! Keys: `id`, `desc` (or `description`), `exec` (absolute command), `arg`
//! (repeatable), `http` (`METHOD URL`), `header` (`Name: value`, repeatable),
//! `input` / `result` (inline JSON Schema, `schema:<id>`, or empty for a
//! starter schema), `cap` and `secret` (repeatable), `confirm` (bare, or
//! `=true|false`), `tag` (repeatable), `tokens`, `usd`, `timeout_ms`. Write
//! `\;` for a `;` inside a value and `\\` for a backslash. A spec that starts
//! with `{` is a tools.json entry in JSON instead.

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

use serde_json::{Map, Value, json};

use crate::authoring::validate;
use crate::bundle::capability::{Capability, SecretId};
use crate::bundle::tools::secret_refs;
use crate::bundle::url_template::UrlTemplate;
use crate::bundle::value;

/// Where a tool's input or result schema comes from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum SchemaSource {
    /// A small starter schema written inline (an object; for an http tool's
    /// input, with a string property per URL placeholder).
    Starter,
    /// `{"$ref": "schema:<id>"}`; `schemas/<id>.json` is created with a
    /// starter schema when the bundle does not have it yet.
    Shared(String),
    /// A schema written out in full.
    Inline(Value),
}

impl SchemaSource {
    /// Parses an answer: empty (starter), `schema:<id>`, `@FILE`, or inline JSON.
    pub(crate) fn parse(text: &str) -> Result<SchemaSource, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(SchemaSource::Starter);
        }
        if let Some(id) = text.strip_prefix("schema:") {
            return validate::schema_id(id).map(SchemaSource::Shared);
        }
        if let Some(file) = text.strip_prefix('@') {
            let body =
                crate::fsutil::read_text_limited(Path::new(file), MAX_SCHEMA_FILE_BYTES).map_err(|e| match e {
                    crate::fsutil::ReadError::Io(e) => format!("cannot read schema file {file}: {e}"),
                    e => format!("{e}: pass a smaller schema file"),
                })?;
            return validate::inline_schema(&body).map(SchemaSource::Inline).map_err(|e| format!("{file}: {e}"));
        }
        validate::inline_schema(text).map(SchemaSource::Inline)
    }
}

/// How the tool is reached.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum TransportSpec {
    /// A local binary.
    Exec {
        /// Absolute path.
        command: String,
        /// Arguments after the blob path.
        args: Vec<String>,
    },
    /// An HTTP API.
    Http {
        /// Upper-case method.
        method: String,
        /// URL template.
        url: String,
        /// Static headers (values may hold `${secret:<id>}`).
        headers: Vec<(String, String)>,
    },
}

/// One tool, as the author described it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ToolSpec {
    /// `id`.
    pub id: String,
    /// `description`.
    pub description: String,
    /// `transport`.
    pub transport: TransportSpec,
    /// `input_schema`.
    pub input: SchemaSource,
    /// `result_schema`.
    pub result: SchemaSource,
    /// Declared `capabilities` (beyond those the transport and secrets imply).
    pub capabilities: Vec<Capability>,
    /// `secrets` (ids used in headers are added automatically).
    pub secrets: Vec<SecretId>,
    /// `requires_confirmation` (not given: [`confirm_by_default`]).
    pub confirm: bool,
    /// `budget.tokens`.
    pub budget_tokens: Option<u64>,
    /// `budget.usd`.
    pub budget_usd: Option<f64>,
    /// `observability.tags`.
    pub tags: Vec<String>,
    /// `timeout_ms`.
    pub timeout_ms: Option<u64>,
}

/// A `--tool` argument: a spec string or a JSON entry.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ToolDefinition {
    /// Described field by field.
    Spec(Box<ToolSpec>),
    /// A tools.json entry as written (missing schemas get starters).
    Entry(Map<String, Value>),
}

/// A tool entry ready to go into tools.json, with the schema files to create.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ToolDraft {
    /// The tools.json entry.
    pub entry: Map<String, Value>,
    /// New files: bundle path (`schemas/<id>.json`) and content.
    pub schema_files: Vec<(String, Value)>,
}

impl ToolDraft {
    /// The entry's id (empty if missing).
    pub(crate) fn id(&self) -> &str {
        self.entry.get("id").and_then(Value::as_str).unwrap_or_default()
    }
}

/// Largest schema file read for `@FILE`.
const MAX_SCHEMA_FILE_BYTES: u64 = 16 << 20;

/// The keys a spec string knows, for messages.
pub(crate) const SPEC_KEYS: &str =
    "id, desc, exec, arg, http, header, input, result, cap, secret, confirm, tag, tokens, usd, timeout_ms";

/// A `--tool` definition that cannot be used: what is wrong, and an example
/// of the part it is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DefinitionError {
    /// What is wrong; errors about a key start with that key in backticks.
    pub message: String,
    /// An example of a correct definition of that part.
    pub help: &'static str,
}

impl DefinitionError {
    /// An error in the JSON form.
    fn json(message: String) -> Self {
        DefinitionError {
            message,
            help: "give one tools.json entry as a JSON object, e.g. `{\"id\": \"…\", \"description\": \"…\", \"transport\": {…}}`",
        }
    }

    /// An error about the spec string's `key` (empty: about the whole string).
    fn about(key: &str, message: String) -> Self {
        let help = match key {
            "http" | "header" => {
                "write `id=…;desc=…;http=METHOD https://host/path`, adding `header=Name: value` as needed (see `rlp agent scaffold --help`)"
            }
            "exec" | "arg" => {
                "write `id=…;desc=…;exec=/abs/path`, adding `arg=…` as needed (see `rlp agent scaffold --help`)"
            }
            _ => {
                "write `id=…;desc=…;exec=/abs/path` or `id=…;desc=…;http=METHOD URL` (see `rlp agent scaffold --help`)"
            }
        };
        DefinitionError { message, help }
    }
}

impl fmt::Display for DefinitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl ToolDefinition {
    /// Parses a `--tool` argument.
    pub(crate) fn parse(text: &str) -> Result<ToolDefinition, DefinitionError> {
        if text.trim_start().starts_with('{') {
            let value = value::parse_json_text(text).map_err(|e| {
                DefinitionError::json(format!("the tool JSON is refused: {}", value::json_error_message(&e)))
            })?;
            match value {
                Value::Object(map) => Ok(ToolDefinition::Entry(map)),
                _ => Err(DefinitionError::json("the tool JSON must be an object (a tools.json entry)".into())),
            }
        } else {
            ToolSpec::parse(text).map(|s| ToolDefinition::Spec(Box::new(s)))
        }
    }

    /// The entry and its new schema files; `schema_exists(id)` says whether
    /// `schemas/<id>.json` is already in the bundle (or planned).
    pub(crate) fn into_draft(self, schema_exists: &dyn Fn(&str) -> bool) -> ToolDraft {
        match self {
            ToolDefinition::Spec(spec) => spec.to_draft(schema_exists),
            ToolDefinition::Entry(mut entry) => {
                let placeholders = entry
                    .get("transport")
                    .and_then(|t| t.get("url"))
                    .and_then(Value::as_str)
                    .and_then(|u| UrlTemplate::parse(u).ok())
                    .map(|u| u.placeholders().map(str::to_string).collect::<Vec<_>>())
                    .unwrap_or_default();
                if !entry.contains_key("input_schema") {
                    entry.insert("input_schema".into(), starter_input(&placeholders));
                }
                if !entry.contains_key("result_schema") {
                    entry.insert("result_schema".into(), starter_result());
                }
                ToolDraft { entry, schema_files: Vec::new() }
            }
        }
    }
}

/// Whether a tool's calls need an operator's approval when the author did
/// not say: yes for one that reaches the network (http, or a `net:`
/// capability) or uses secrets. The wizard offers it as the default answer;
/// flags and specs that leave it out get the same.
pub(crate) fn confirm_by_default(transport: &TransportSpec, secrets: &[SecretId], capabilities: &[Capability]) -> bool {
    matches!(transport, TransportSpec::Http { .. })
        || !secrets.is_empty()
        || capabilities.iter().any(|c| matches!(c, Capability::Net(_)))
}

/// The starter input schema: an object, with a required string property for
/// each URL placeholder.
pub(crate) fn starter_input(placeholders: &[String]) -> Value {
    let mut properties = Map::new();
    for name in placeholders {
        properties.insert(name.clone(), json!({"type": "string"}));
    }
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    if !placeholders.is_empty() {
        schema.insert("required".into(), json!(placeholders));
    }
    Value::Object(schema)
}

/// The starter result schema: any object.
pub(crate) fn starter_result() -> Value {
    json!({"type": "object"})
}

/// A tool being put together from flags, a spec string or the wizard's
/// answers: every field is `None` until given. [`ToolSpecBuilder::build`]
/// fills in the defaults (starter schemas, nothing declared, the
/// confirmation [`confirm_by_default`] gives) once the required fields are
/// there. The one way a [`ToolSpec`] is made.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ToolSpecBuilder {
    /// `id` (required).
    pub id: Option<String>,
    /// `description` (required).
    pub description: Option<String>,
    /// `transport` (required).
    pub transport: Option<TransportSpec>,
    /// `input_schema`.
    pub input: Option<SchemaSource>,
    /// `result_schema`.
    pub result: Option<SchemaSource>,
    /// Declared `capabilities`.
    pub capabilities: Option<Vec<Capability>>,
    /// `secrets`.
    pub secrets: Option<Vec<SecretId>>,
    /// `requires_confirmation`.
    pub confirm: Option<bool>,
    /// `observability.tags`.
    pub tags: Option<Vec<String>>,
    /// `budget.tokens` and `budget.usd` (given together: either may be empty).
    pub budget: Option<(Option<u64>, Option<f64>)>,
    /// `timeout_ms`.
    pub timeout_ms: Option<u64>,
}

/// A field a [`ToolSpec`] cannot do without.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RequiredField {
    /// `id`.
    Id,
    /// `description`.
    Description,
    /// `transport`.
    Transport,
}

impl ToolSpecBuilder {
    /// The required fields not given yet, in the order of the entry.
    pub(crate) fn missing(&self) -> Vec<RequiredField> {
        let mut missing = Vec::new();
        if self.id.is_none() {
            missing.push(RequiredField::Id);
        }
        if self.description.is_none() {
            missing.push(RequiredField::Description);
        }
        if self.transport.is_none() {
            missing.push(RequiredField::Transport);
        }
        missing
    }

    /// The tool, with defaults for what was not given; the required fields
    /// still missing otherwise.
    pub(crate) fn build(self) -> Result<ToolSpec, Vec<RequiredField>> {
        let missing = self.missing();
        let (Some(id), Some(description), Some(transport)) = (self.id, self.description, self.transport) else {
            return Err(missing);
        };
        let capabilities = self.capabilities.unwrap_or_default();
        let secrets = self.secrets.unwrap_or_default();
        let (budget_tokens, budget_usd) = self.budget.unwrap_or_default();
        Ok(ToolSpec {
            id,
            description,
            confirm: self.confirm.unwrap_or_else(|| confirm_by_default(&transport, &secrets, &capabilities)),
            transport,
            input: self.input.unwrap_or(SchemaSource::Starter),
            result: self.result.unwrap_or(SchemaSource::Starter),
            capabilities,
            secrets,
            budget_tokens,
            budget_usd,
            tags: self.tags.unwrap_or_default(),
            timeout_ms: self.timeout_ms,
        })
    }
}

/// The items of a spec string read so far: the tool, and the transport's
/// parts, which are put together once every item is read.
#[derive(Default)]
struct SpecItems {
    tool: ToolSpecBuilder,
    exec: Option<String>,
    args: Vec<String>,
    http: Option<(String, String)>,
    headers: Vec<(String, String)>,
}

impl SpecItems {
    /// Reads one `key=value` (or bare `key`) item.
    fn apply(&mut self, key: &str, value: Option<&str>) -> Result<(), String> {
        let need = || value.ok_or_else(|| format!("`{key}` needs a value: `{key}=…`"));
        let field = |e: String| format!("`{key}`: {e}");
        let tool = &mut self.tool;
        match key {
            "id" => tool.id = Some(validate::tool_id(need()?).map_err(field)?),
            "desc" | "description" => tool.description = Some(validate::tool_description(need()?).map_err(field)?),
            "exec" => self.exec = Some(validate::command(need()?).map_err(field)?),
            "arg" => self.args.push(need()?.to_string()),
            "http" => {
                let v = need()?;
                let (m, u) = v.split_once(char::is_whitespace).ok_or_else(|| {
                    format!("`http` takes `METHOD URL`, e.g. `http=GET https://api.example.com/x`, not `{v}`")
                })?;
                let method = validate::method(m).map_err(field)?;
                validate::url(u).map_err(field)?;
                self.http = Some((method, u.trim().to_string()));
            }
            "header" => self.headers.push(validate::header(need()?).map_err(field)?),
            "input" => tool.input = Some(SchemaSource::parse(need()?).map_err(field)?),
            "result" => tool.result = Some(SchemaSource::parse(need()?).map_err(field)?),
            "cap" => tool.capabilities.get_or_insert_default().push(validate::capability(need()?).map_err(field)?),
            "secret" => tool.secrets.get_or_insert_default().push(validate::secret(need()?).map_err(field)?),
            "confirm" => {
                tool.confirm = match value {
                    None | Some("true" | "yes") => Some(true),
                    Some("false" | "no") => Some(false),
                    Some(other) => return Err(format!("`confirm` is true or false, not `{other}`")),
                }
            }
            "tag" => tool.tags.get_or_insert_default().push(validate::tag(need()?).map_err(field)?),
            "tokens" => {
                tool.budget.get_or_insert_default().0 = Some(validate::positive(need()?, "tokens").map_err(field)?)
            }
            "usd" => tool.budget.get_or_insert_default().1 = Some(validate::usd(need()?).map_err(field)?),
            "timeout_ms" => tool.timeout_ms = Some(validate::positive(need()?, "timeout_ms").map_err(field)?),
            other => return Err(format!("unknown key `{other}` in the tool spec; known keys: {SPEC_KEYS}")),
        }
        Ok(())
    }

    /// The tool, once every item is read.
    fn finish(mut self) -> Result<ToolSpec, DefinitionError> {
        self.tool.transport = Some(match (self.exec, self.http) {
            (Some(command), None) => {
                if !self.headers.is_empty() {
                    return Err(DefinitionError::about("header", "`header` only applies to an http tool".into()));
                }
                TransportSpec::Exec { command, args: self.args }
            }
            (None, Some((method, url))) => {
                if !self.args.is_empty() {
                    return Err(DefinitionError::about("arg", "`arg` only applies to an exec tool".into()));
                }
                TransportSpec::Http { method, url, headers: self.headers }
            }
            (Some(_), Some(_)) => {
                let message = "a tool has one transport: give `exec=…` or `http=…`, not both";
                return Err(DefinitionError::about("", message.into()));
            }
            (None, None) => {
                let message = "the tool spec has no transport: add `exec=/abs/path` or `http=METHOD URL`";
                return Err(DefinitionError::about("", message.into()));
            }
        });
        self.tool.build().map_err(|missing| {
            let message = match missing.first() {
                Some(RequiredField::Id) => "the tool spec has no `id=…`",
                _ => "the tool spec has no `desc=…`",
            };
            DefinitionError::about("", message.into())
        })
    }
}

impl ToolSpec {
    /// Parses a compact spec string (see the module docs).
    pub(crate) fn parse(text: &str) -> Result<ToolSpec, DefinitionError> {
        let mut items = SpecItems::default();
        for item in split_items(text).map_err(|message| DefinitionError::about("", message))? {
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (item.trim(), None),
            };
            if key.is_empty() && value.is_none() {
                continue;
            }
            items.apply(key, value).map_err(|message| DefinitionError::about(key, message))?;
        }
        items.finish()
    }

    /// The URL placeholders of an http tool.
    fn placeholders(&self) -> Vec<String> {
        match &self.transport {
            TransportSpec::Http { url, .. } => {
                UrlTemplate::parse(url).map(|u| u.placeholders().map(str::to_string).collect()).unwrap_or_default()
            }
            TransportSpec::Exec { .. } => Vec::new(),
        }
    }

    /// The secrets: those listed, then those the headers use, without repeats.
    pub(crate) fn all_secrets(&self) -> Vec<SecretId> {
        let mut out = self.secrets.clone();
        if let TransportSpec::Http { headers, .. } = &self.transport {
            for (_, value) in headers {
                for id in secret_refs(value).unwrap_or_default() {
                    if let Ok(id) = id.parse::<SecretId>() {
                        out.push(id);
                    }
                }
            }
        }
        let mut seen = BTreeSet::new();
        out.retain(|s| seen.insert(s.clone()));
        out
    }

    /// The tools.json entry, in the documented key order, and the schema
    /// files to create.
    pub(crate) fn to_draft(&self, schema_exists: &dyn Fn(&str) -> bool) -> ToolDraft {
        let mut schema_files: Vec<(String, Value)> = Vec::new();
        let placeholders = self.placeholders();
        let mut schema = |source: &SchemaSource, starter: Value| match source {
            SchemaSource::Starter => starter,
            SchemaSource::Inline(value) => value.clone(),
            SchemaSource::Shared(id) => {
                let path = format!("schemas/{id}.json");
                if !schema_exists(id) && !schema_files.iter().any(|(p, _)| *p == path) {
                    schema_files.push((path, starter));
                }
                json!({"$ref": format!("schema:{id}")})
            }
        };
        let input_schema = schema(&self.input, starter_input(&placeholders));
        let result_schema = schema(&self.result, starter_result());

        let mut entry = Map::new();
        entry.insert("id".into(), json!(self.id));
        entry.insert("description".into(), json!(self.description));
        entry.insert("transport".into(), transport_value(&self.transport));
        entry.insert("input_schema".into(), input_schema);
        entry.insert("result_schema".into(), result_schema);
        if !self.capabilities.is_empty() {
            let caps: Vec<String> = self.capabilities.iter().map(Capability::to_string).collect();
            entry.insert("capabilities".into(), json!(caps));
        }
        let secrets = self.all_secrets();
        if !secrets.is_empty() {
            let ids: Vec<&str> = secrets.iter().map(SecretId::as_str).collect();
            entry.insert("secrets".into(), json!(ids));
        }
        entry.insert("requires_confirmation".into(), json!(self.confirm));
        if self.budget_tokens.is_some() || self.budget_usd.is_some() {
            let mut budget = Map::new();
            if let Some(tokens) = self.budget_tokens {
                budget.insert("tokens".into(), json!(tokens));
            }
            if let Some(usd) = self.budget_usd {
                budget.insert("usd".into(), json!(usd));
            }
            entry.insert("budget".into(), Value::Object(budget));
        }
        if !self.tags.is_empty() {
            entry.insert("observability".into(), json!({"tags": self.tags}));
        }
        if let Some(timeout) = self.timeout_ms {
            entry.insert("timeout_ms".into(), json!(timeout));
        }
        ToolDraft { entry, schema_files }
    }
}

/// The `transport` object of an entry.
pub(crate) fn transport_value(transport: &TransportSpec) -> Value {
    match transport {
        TransportSpec::Exec { command, args } => {
            let mut t = Map::new();
            t.insert("kind".into(), json!("exec"));
            t.insert("command".into(), json!(command));
            if !args.is_empty() {
                t.insert("args".into(), json!(args));
            }
            Value::Object(t)
        }
        TransportSpec::Http { method, url, headers } => {
            let mut t = Map::new();
            t.insert("kind".into(), json!("http"));
            t.insert("method".into(), json!(method));
            t.insert("url".into(), json!(url));
            if !headers.is_empty() {
                let map: Map<String, Value> = headers.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
                t.insert("headers".into(), Value::Object(map));
            }
            Value::Object(t)
        }
    }
}

/// Splits a spec at unescaped `;`, resolving `\;` and `\\`.
fn split_items(text: &str) -> Result<Vec<String>, String> {
    let mut items = Vec::new();
    let mut current = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(next @ (';' | '\\')) => current.push(next),
                Some(next) => {
                    current.push('\\');
                    current.push(next);
                }
                None => return Err("the tool spec ends with a lone `\\`".into()),
            },
            ';' => items.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    items.push(current);
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_compact_spec() {
        let spec = ToolSpec::parse(
            "id=mail.send;desc=Send mail\\; fast;http=post https://api.mail.example/u/{user};header=Authorization: Bearer ${secret:runloop/mail/key};confirm;tag=mail;input=;tokens=100",
        )
        .unwrap();
        assert_eq!(spec.description, "Send mail; fast");
        assert!(spec.confirm);
        let draft = spec.to_draft(&|_| false);
        assert_eq!(draft.entry["transport"]["method"], "POST");
        assert_eq!(draft.entry["secrets"], json!(["runloop/mail/key"]));
        assert_eq!(draft.entry["input_schema"]["required"], json!(["user"]));
        assert_eq!(draft.entry["budget"], json!({"tokens": 100}));
    }

    #[test]
    fn shared_schemas_are_created_once() {
        let spec = ToolSpec::parse("id=a;desc=A;exec=/bin/a;input=schema:a.in;result=schema:a.in").unwrap();
        let draft = spec.to_draft(&|_| false);
        assert_eq!(draft.schema_files.len(), 1);
        assert_eq!(draft.entry["input_schema"], json!({"$ref": "schema:a.in"}));
        assert!(spec.to_draft(&|id| id == "a.in").schema_files.is_empty());
    }

    #[test]
    fn refuses_bad_specs() {
        let err = |s: &str| ToolSpec::parse(s).unwrap_err().message;
        assert!(err("id=a;desc=A;exec=rel/path").contains("not an absolute path"));
        assert!(err("id=a;desc=A").contains("no transport"));
        assert!(err("id=a;desc=A;exec=/x;colour=red").contains("unknown key `colour`"));
        assert!(err("id=A;desc=A;exec=/x").contains("`id`"));
        assert!(err("id=a;desc=A;http=GET https://{h}/").contains("host"));
        assert!(matches!(ToolDefinition::parse("{\"id\": \"x\"}"), Ok(ToolDefinition::Entry(_))));
    }
}
