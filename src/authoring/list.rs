//! `rlp tools list`: each tool with its transport, what it needs, and whether
//! the effective policy (the bundle's policy.caps ∩ the operator override
//! `$RUNLOOP_HOME/caps/overrides/<name>.toml`, when there is one) and the
//! operator's lists of config.toml expose it (as `runtime::exposure` decides).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::authoring::AuthoringError;
use crate::authoring::policy_edit::needed_by;
use crate::bundle::diag::Severity;
use crate::bundle::policy::Policy;
use crate::bundle::tools::{Discoverability, TOOLS_FILE, Tool, Transport};
use crate::config::{Config, ConfiguredOptions};
use crate::event::SandboxRecord;
use crate::home::Home;
use crate::runtime::exposure::decide_listed;
use crate::sandbox::{Grants, SandboxMode, SandboxPlan};
use crate::text::terminal_safe_line;

/// One tool, as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Row {
    /// The id.
    pub id: String,
    /// `exec /path/cmd args…` or `http METHOD host[:port]`.
    pub transport: String,
    /// The transport as JSON (`kind`, `command`/`args` or `method`/`url`/`host`).
    pub transport_json: Value,
    /// Capabilities needed, declared and implied.
    pub capabilities: Vec<String>,
    /// Secret ids.
    pub secrets: Vec<String>,
    /// `requires_confirmation`.
    pub confirm: bool,
    /// `category`.
    pub category: Option<String>,
    /// `discoverability` is `core`.
    pub core: bool,
    /// Needed capabilities the effective policy does not grant.
    pub missing: Vec<String>,
    /// Why the operator's lists do not expose the tool, if they do not.
    pub unlisted: Option<String>,
    /// The kernel sandbox of an exec tool: a brief account and the record
    /// its call frames would carry.
    pub sandbox: Option<(String, SandboxRecord)>,
    /// The tool's options and their current values (`None`: it takes none).
    pub options: Option<Vec<OptionValue>>,
}

/// One option of a tool, as a call without `--option` would get it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OptionValue {
    /// The option's name.
    pub name: String,
    /// Its value, if any layer sets one.
    pub value: Option<Value>,
    /// Where the value comes from: `config` or `default` (`unset` without one).
    pub source: &'static str,
}

/// The options of `tool` as config files and its schema set them.
fn option_values(tool: &Tool, configured: Option<&ConfiguredOptions>) -> Option<Vec<OptionValue>> {
    let schema = tool.options_schema.as_ref()?;
    let defaults = crate::runtime::options::defaults(schema);
    let properties = schema.get("properties").and_then(Value::as_object);
    let mut names: Vec<String> = properties.map(|p| p.keys().cloned().collect()).unwrap_or_default();
    for name in configured.map(|c| c.values.keys()).into_iter().flatten() {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    let values = names
        .into_iter()
        .map(|name| {
            let set = configured.and_then(|c| c.values.get(&name));
            let (value, source) = match (set, defaults.get(&name)) {
                (Some(value), _) => (Some(value.clone()), "config"),
                (None, Some(value)) => (Some(value.clone()), "default"),
                (None, None) => (None, "unset"),
            };
            OptionValue { name, value, source }
        })
        .collect();
    Some(values)
}

/// A bundle's tools and the policy they were checked against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Listing {
    /// The rows, in tools.json order.
    pub rows: Vec<Row>,
    /// The bundle's policy file (bundle path).
    pub policy_file: String,
    /// The operator override applied, if one exists.
    pub override_file: Option<PathBuf>,
    /// Where the operator's lists of the agent's tools are, if any is set.
    pub lists: Option<String>,
    /// How many tools the bundle has (`rows` may be filtered).
    pub total: usize,
}

/// Lists the tools of the bundle at `dir`, with the sandbox each exec tool
/// gets under `config`'s `runtime.sandbox` and the options it gets from
/// `config`'s tool options.
pub(crate) fn list(dir: &Path, home: &Home, config: &Config) -> Result<Listing, AuthoringError> {
    if !dir.join(crate::bundle::manifest::MANIFEST_FILE).is_file() {
        return Err(AuthoringError::usage(format!("{} is not a bundle (no manifest.toml)", dir.display()))
            .with_help("name a bundle folder, e.g. agents/mailer"));
    }
    let bundle = crate::bundle::load(dir);
    if bundle.tools.is_none() && dir.join(TOOLS_FILE).exists() {
        return Err(AuthoringError::usage(format!("{} cannot be read", dir.join(TOOLS_FILE).display()))
            .with_help(format!("`rlp lint {}` shows what is wrong", dir.display())));
    }
    let name = bundle.manifest.as_ref().and_then(|m| m.name.clone()).or_else(|| bundle.folder_name());
    let mut policy = bundle.policy();
    let mut override_file = None;
    let agent = name.clone().unwrap_or_default();
    if let Some(name) = name.filter(|n| crate::bundle::manifest::is_valid_name(n)) {
        let path = home.override_file(&name);
        if let Some(over) = read_override(&path)? {
            policy = policy.intersect(&over);
            override_file = Some(path);
        }
    }
    // The sandbox names the bundle as the runtime does: by its absolute path.
    let root = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let tool_list = config.tool_list(&agent);
    let rows = bundle
        .tool_list()
        .iter()
        .map(|tool| {
            let mut row = row(tool, &policy, &root, config.sandbox.value);
            row.options = option_values(tool, config.options_of(&agent, &tool.id));
            row.unlisted = decide_listed(&tool_list, &tool.id).filter(|d| d.denied_by.is_some()).map(|d| d.reason);
            row
        })
        .collect();
    let policy_file = bundle.manifest.as_ref().map_or("policy.caps".to_string(), |m| m.caps_file.clone());
    let total = bundle.tool_list().len();
    let lists = (!tool_list.is_empty()).then(|| tool_list.places());
    Ok(Listing { rows, policy_file, override_file, lists, total })
}

/// Reads an operator override; a missing file is `None`.
fn read_override(path: &Path) -> Result<Option<Policy>, AuthoringError> {
    let text = match crate::fsutil::read_text_limited(path, crate::home::MAX_OVERRIDE_BYTES) {
        Ok(text) => text,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(AuthoringError::read(path, e)),
    };
    let (grants, findings) = crate::bundle::parse_policy(&text);
    let errors: Vec<String> = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| format!("{}: {}", f.code, f.message))
        .collect();
    match grants {
        Some(grants) if errors.is_empty() => Ok(Some(Policy::from_override(&grants))),
        _ => Err(AuthoringError::usage(format!("{} is not a valid override: {}", path.display(), errors.join("; ")))
            .with_help("it has the schema of policy.caps ([capabilities] with fs, net, …); fix or remove it")),
    }
}

fn row(tool: &Tool, policy: &Policy, bundle: &Path, mode: SandboxMode) -> Row {
    let needed = needed_by(tool);
    let (transport, transport_json) = match &tool.transport {
        Some(Transport::Exec { programs, args }) => {
            let here = crate::bundle::command::this_platform();
            let mut shown = format!("exec {}", programs.for_platform(&here).unwrap_or("(none for this platform)"));
            for arg in args {
                shown.push(' ');
                shown.push_str(arg);
            }
            let mut json = json!({"kind": "exec", "command": programs.command, "args": args});
            if !programs.platforms.is_empty() {
                let map: serde_json::Map<String, serde_json::Value> =
                    programs.platforms.iter().map(|(_, target, c)| (target.clone(), json!(c))).collect();
                json["platforms"] = serde_json::Value::Object(map);
            }
            (shown, json)
        }
        Some(Transport::Http { method, url: Some(url), .. }) => (
            format!("http {method} {}", url.suggested_grant()),
            json!({"kind": "http", "method": method, "url": url.as_str(), "host": url.suggested_grant()}),
        ),
        Some(Transport::Http { method, url: None, .. }) => {
            (format!("http {method} (invalid URL)"), json!({"kind": "http", "method": method, "url": null}))
        }
        Some(Transport::Mcp { server, tool, definition_blake3, .. }) => (
            format!("mcp {server} {tool}"),
            json!({"kind": "mcp", "server": server, "tool": tool, "definition_blake3": definition_blake3}),
        ),
        None => ("(invalid transport)".to_string(), Value::Null),
    };
    Row {
        id: tool.id.clone(),
        transport,
        transport_json,
        capabilities: needed.iter().map(|n| n.shown()).collect(),
        secrets: tool.secrets.iter().map(|(_, s)| s.to_string()).collect(),
        confirm: tool.needs_confirmation(),
        category: tool.category.clone(),
        core: tool.discoverability == Discoverability::Core,
        missing: needed.iter().filter(|n| !policy.allows(&n.capability)).map(|n| n.shown()).collect(),
        unlisted: None,
        sandbox: match &tool.transport {
            Some(Transport::Exec { programs, .. }) => {
                let here = crate::bundle::command::this_platform();
                let program = crate::bundle::command::resolve(programs.for_platform(&here).unwrap_or_default(), bundle);
                let plan = SandboxPlan::new(mode, &Grants::of(tool, Path::new(&program), bundle));
                Some((plan.brief(), plan.record().clone()))
            }
            _ => None,
        },
        options: None,
    }
}

impl Row {
    /// `core` or `discoverable`.
    pub(crate) fn discoverability(&self) -> &'static str {
        if self.core { "core" } else { "discoverable" }
    }

    /// Whether the tool is exposed.
    pub(crate) fn is_exposed(&self) -> bool {
        self.missing.is_empty() && self.unlisted.is_none()
    }

    /// `yes`, or `no: ` and why (`missing <caps>`, the operator's list).
    pub(crate) fn exposed(&self) -> String {
        let mut why = Vec::new();
        if !self.missing.is_empty() {
            why.push(format!("missing {}", self.missing.join(", ")));
        }
        why.extend(self.unlisted.clone());
        if why.is_empty() { "yes".to_string() } else { format!("no: {}", why.join("; ")) }
    }
}

impl Listing {
    /// Keeps only the rows of `category` (compared without case) and, with
    /// `core_only`, the core tools.
    pub(crate) fn filter(&mut self, category: Option<&str>, core_only: bool) {
        self.rows.retain(|row| {
            category.is_none_or(|c| row.category.as_deref().is_some_and(|rc| rc.eq_ignore_ascii_case(c)))
                && (!core_only || row.core)
        });
    }

    /// The table printed by `--format human`.
    pub(crate) fn render_human(&self) -> String {
        if self.total == 0 {
            return "no tools (add one with `rlp tools add` or `rlp tools import`)\n".to_string();
        }
        let dash = |items: &[String]| if items.is_empty() { "-".to_string() } else { items.join(", ") };
        let safe = |cell: String| terminal_safe_line(&cell).into_owned();
        let mut table: Vec<[String; 9]> = vec![
            ["ID", "CATEGORY", "DISCOVERY", "TRANSPORT", "CAPABILITIES", "SECRETS", "CONFIRM", "EXPOSED", "SANDBOX"]
                .map(str::to_string),
        ];
        for row in &self.rows {
            table.push(
                [
                    row.id.clone(),
                    row.category.clone().unwrap_or_else(|| "-".into()),
                    row.discoverability().to_string(),
                    row.transport.clone(),
                    dash(&row.capabilities),
                    dash(&row.secrets),
                    if row.confirm { "yes" } else { "no" }.to_string(),
                    row.exposed(),
                    row.sandbox.as_ref().map_or_else(|| "-".to_string(), |(brief, _)| brief.clone()),
                ]
                .map(safe),
            );
        }
        let widths: Vec<usize> =
            (0..9).map(|c| table.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
        let mut out = String::new();
        for r in &table {
            let mut line = String::new();
            for (c, cell) in r.iter().enumerate() {
                line.push_str(cell);
                if c + 1 < r.len() {
                    line.extend(std::iter::repeat_n(' ', widths[c] - cell.chars().count() + 2));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        let exposed = self.rows.iter().filter(|r| r.is_exposed()).count();
        let mut tools = if self.total == 1 { "1 tool".to_string() } else { format!("{} tools", self.total) };
        if self.rows.len() != self.total {
            tools = format!("{} of {tools} shown", self.rows.len());
        }
        let mut policy = match &self.override_file {
            Some(path) => format!("{} ∩ {}", self.policy_file, path.display()),
            None => self.policy_file.clone(),
        };
        if let Some(lists) = &self.lists {
            policy.push_str(&format!(" and the operator's list {lists}"));
        }
        out.push_str(&format!("\n{tools}, {exposed} exposed by {policy}\n"));
        let with_options: Vec<(&str, &[OptionValue])> =
            self.rows.iter().filter_map(|r| r.options.as_deref().map(|o| (r.id.as_str(), o))).collect();
        if !with_options.is_empty() {
            out.push_str("\nOptions (--option overrides them for a call):\n");
            for (id, options) in with_options {
                let shown: Vec<String> = options
                    .iter()
                    .map(|o| match &o.value {
                        Some(value) => format!("{} = {value} ({})", o.name, o.source),
                        None => format!("{} unset", o.name),
                    })
                    .collect();
                let shown = if shown.is_empty() { "none".to_string() } else { shown.join(", ") };
                out.push_str(&terminal_safe_line(&format!("  {id}: {shown}")));
                out.push('\n');
            }
        }
        out
    }

    /// The document printed by `--format json`.
    pub(crate) fn to_json(&self) -> Value {
        let tools: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                json!({
                    "id": r.id,
                    "transport": r.transport_json,
                    "capabilities": r.capabilities,
                    "secrets": r.secrets,
                    "requires_confirmation": r.confirm,
                    "category": r.category,
                    "discoverability": r.discoverability(),
                    "exposed": r.is_exposed(),
                    "missing": r.missing,
                    "unlisted": r.unlisted,
                    "sandbox": r.sandbox.as_ref().map(|(_, record)| record),
                    "options": r.options.as_ref().map(|options| {
                        options
                            .iter()
                            .map(|o| (o.name.clone(), json!({"value": o.value, "source": o.source})))
                            .collect::<serde_json::Map<String, Value>>()
                    }),
                })
            })
            .collect();
        json!({
            "tools": tools,
            "policy": self.policy_file,
            "override": self.override_file.as_ref().map(|p| p.display().to_string()),
            "operator_list": self.lists,
        })
    }
}
