//! Configuration layers and the settings the runtime reads.
//!
//! Precedence, highest first: command-line flags, `RUNLOOP_*` environment
//! variables, `$RUNLOOP_HOME/config.toml`, the system config, built-in
//! defaults. The system config is `/etc/runloop/config.toml`, always read;
//! `RUNLOOP_SYSTEM_CONFIG` may name a second system file (tests, packaged
//! installs with another prefix), read after it — it adds a layer and never
//! replaces or removes the first. A `[policy]` table in either system file
//! is a hard limit: nothing may loosen it (with `[policy]
//! confirm_external_actions = true`, nothing turns confirmation off).
//!
//! ```toml
//! [security]
//! confirm_external_actions = true   # ask before tools with requires_confirmation run
//!
//! [runtime]
//! sandbox = "best-effort"           # "required" | "best-effort" | "off" (exec tools)
//!
//! [secrets]
//! providers = ["env"]               # where secret values come from, in order (see crate::secrets)
//!
//! [ledger]
//! url = "postgres://rlp@db.internal/rlp"   # default: the home's SQLite file (see crate::ledger)
//! checkpoint_keys = ["keys/fleet-ledger.pub"]  # whose checkpoints `rlp trace verify` trusts (docs/fleet.md)
//!
//! [schemas]
//! registries = ["../shared-schemas"]  # folders of <id>.json searched for `schema:<id>` (see crate::bundle::registry)
//!
//! [agents.github.tools]             # the operator's list of an agent's tools (see tool_list)
//! allow = ["issues.*", "repos.get"] # only these
//! deny = ["*.delete"]               # never these
//!
//! [agents.github.tools."issues.get"]  # one tool's settings (see agents)
//! redact = ["/result/user/email"]   # replaced by `rlp trace export --redacted`
//!
//! [policy]                          # system config only
//! confirm_external_actions = true
//! sandbox = "required"              # a floor: nothing weaker is used
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::bundle::call_pointer::CallPointer;
use crate::bundle::registry::{Origin, Registries, Registry};
use crate::bundle::source::{SourceFile, Syntax};
use crate::error::{Exit, Reportable};
use crate::home::Home;
use crate::integrity::keys::PublicKey;
use crate::sandbox::SandboxMode;

pub(crate) mod agents;
pub(crate) mod hooks;
pub(crate) mod secrets;
pub(crate) mod tool_list;

use secrets::{SecretsConfig, SecretsLayer};
use tool_list::{FileList, Patterns, ToolList, ToolPattern};

/// The environment variable that names a second system config file, read
/// after [`DEFAULT_SYSTEM_CONFIG`] (never instead of it).
pub(crate) const SYSTEM_CONFIG_ENV: &str = "RUNLOOP_SYSTEM_CONFIG";
/// The system config file.
pub(crate) const DEFAULT_SYSTEM_CONFIG: &str = "/etc/runloop/config.toml";
/// The environment variable for `security.confirm_external_actions`.
pub(crate) const CONFIRM_ENV: &str = "RUNLOOP_SECURITY_CONFIRM_EXTERNAL_ACTIONS";
/// The environment variable for `runtime.sandbox`.
pub(crate) const SANDBOX_ENV: &str = "RUNLOOP_RUNTIME_SANDBOX";
/// The environment variable for `ledger.url`.
pub(crate) const LEDGER_ENV: &str = "RUNLOOP_LEDGER_URL";
/// Largest config file read.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// A ledger URL as written, which may hold a password: its `Debug` shows
/// none of it (what is shown of a URL is `ledger::Location`'s display).
#[derive(Clone, PartialEq, Eq)]
pub struct UrlText(String);

impl UrlText {
    /// The URL as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for UrlText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UrlText([redacted])")
    }
}

impl std::str::FromStr for UrlText {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<UrlText, Self::Err> {
        Ok(UrlText(text.to_string()))
    }
}

/// Where a setting's value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// The built-in default.
    Default,
    /// The system config file.
    SystemConfig(PathBuf),
    /// The system config's `[policy]` table (a hard limit).
    SystemPolicy(PathBuf),
    /// The home's config.toml.
    UserConfig(PathBuf),
    /// An environment variable.
    Env(String),
    /// A command-line flag.
    Flag(String),
}

impl Source {
    /// Where a setting of config table `section` came from, in words.
    pub fn shown(&self, section: &str) -> String {
        match self {
            Source::Default => "the default".to_string(),
            Source::SystemConfig(p) | Source::UserConfig(p) => format!("[{section}] in {}", p.display()),
            Source::SystemPolicy(p) => format!("[policy] in {}", p.display()),
            Source::Env(name) => format!("the environment variable {name}"),
            Source::Flag(flag) => format!("the flag {flag}"),
        }
    }
}

/// A value and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting<T> {
    /// The value in force.
    pub value: T,
    /// The layer that set it.
    pub source: Source,
}

/// The settings in force.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// `security.confirm_external_actions`: ask before tools that set
    /// `requires_confirmation` run (default true).
    pub confirm_external_actions: Setting<bool>,
    /// Set when the system `[policy]` requires confirmation (it cannot be
    /// turned off by any lower layer).
    pub confirm_required_by: Option<PathBuf>,
    /// `runtime.sandbox`: how exec tools are confined (default best-effort).
    pub sandbox: Setting<SandboxMode>,
    /// `[agents.<agent>.tools."<tool id>".options]`: the operator's tool
    /// options, by agent, then tool id (a later file's value for a key
    /// replaces an earlier one's).
    pub tool_options: BTreeMap<String, BTreeMap<String, ConfiguredOptions>>,
    /// `[agents.<agent>.tools] allow` and `deny`: the operator's lists, by
    /// agent, from every config file that sets one.
    pub tool_lists: BTreeMap<String, ToolList>,
    /// `[agents.<agent>.tools."<tool id>"] redact`: the fields of the tool's
    /// calls a redacted export replaces, by agent, then tool id (every
    /// config file's pointers, the system files' first, each once).
    pub tool_redactions: BTreeMap<String, BTreeMap<String, Vec<CallPointer>>>,
    /// `rlp serve --tools`: allow patterns for the agent served.
    pub tools_flag: Option<Patterns>,
    /// `[secrets]`: where secret values come from.
    pub(crate) secrets: SecretsConfig,
    /// `ledger.url`: where frames are recorded (none: the home's SQLite file).
    pub ledger_url: Option<Setting<UrlText>>,
    /// `ledger.checkpoint_keys` of every config file: the keys whose
    /// checkpoints are trusted.
    pub checkpoint_keys: Vec<PublicKey>,
    /// `[[hooks.after_call]]` of every config file, the system files' first.
    pub after_call_hooks: Vec<hooks::AfterCallHook>,
    /// `[schemas] registries`: the shared schema folders, in the order they
    /// are searched (the home's config.toml, then the system files), each
    /// with the config file that names it.
    pub schema_registries: Vec<ConfiguredRegistry>,
}

/// A shared schema folder named by `[schemas] registries`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfiguredRegistry {
    /// The folder (a relative path as written is joined to the config file's folder).
    pub dir: PathBuf,
    /// The config file that names it.
    pub file: PathBuf,
}

/// The options config files set for one tool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfiguredOptions {
    /// The values, by option name.
    pub values: Map<String, Value>,
    /// The files that set them, in the order they were read.
    pub files: Vec<PathBuf>,
}

impl Config {
    /// The shared schema registries of this host: `[schemas] registries`
    /// of its config files, then the home's `schemas/`.
    pub fn registries(&self, home: &Home) -> Registries {
        let mut list: Vec<Registry> = self
            .schema_registries
            .iter()
            .map(|r| Registry { dir: r.dir.clone(), origin: Origin::Config(r.file.clone()) })
            .collect();
        list.push(Registry { dir: home.schemas_dir(), origin: Origin::Home });
        Registries::new(list)
    }

    /// The options config files set for `tool` of `agent`, if any.
    pub fn options_of(&self, agent: &str, tool: &str) -> Option<&ConfiguredOptions> {
        self.tool_options.get(agent)?.get(tool)
    }

    /// The operator's lists of `agent`'s tools: those of the config files,
    /// then `--tools` (empty when none is set).
    pub fn tool_list(&self, agent: &str) -> ToolList {
        let mut list = self.tool_lists.get(agent).cloned().unwrap_or_default();
        list.allow.extend(self.tools_flag.clone());
        list
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            confirm_external_actions: Setting { value: true, source: Source::Default },
            confirm_required_by: None,
            sandbox: Setting { value: SandboxMode::default(), source: Source::Default },
            tool_options: BTreeMap::new(),
            tool_lists: BTreeMap::new(),
            tool_redactions: BTreeMap::new(),
            tools_flag: None,
            secrets: SecretsConfig::default(),
            ledger_url: None,
            checkpoint_keys: Vec::new(),
            after_call_hooks: Vec::new(),
            schema_registries: Vec::new(),
        }
    }
}

/// Settings given as command-line flags (the highest layer).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Flags {
    /// `--confirm-external-actions true|false`.
    pub confirm_external_actions: Option<bool>,
    /// `--ledger URL`.
    pub ledger_url: Option<UrlText>,
    /// `rlp serve --tools PATTERN`.
    pub tools: Option<Vec<ToolPattern>>,
}

/// One config file's settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FileLayer {
    /// The file.
    pub path: PathBuf,
    /// `[security] confirm_external_actions`.
    pub confirm_external_actions: Option<bool>,
    /// `[policy] confirm_external_actions`.
    pub policy_confirm_external_actions: Option<bool>,
    /// `[runtime] sandbox`.
    pub sandbox: Option<SandboxMode>,
    /// `[policy] sandbox`: the weakest mode allowed.
    pub policy_sandbox: Option<SandboxMode>,
    /// `[agents.<agent>.tools."<tool id>".options]`, by agent, then tool id.
    pub tool_options: BTreeMap<String, BTreeMap<String, Map<String, Value>>>,
    /// `[agents.<agent>.tools] allow` and `deny`, by agent.
    pub tool_lists: BTreeMap<String, FileList>,
    /// `[agents.<agent>.tools."<tool id>"] redact`, by agent, then tool id.
    pub tool_redactions: BTreeMap<String, BTreeMap<String, Vec<CallPointer>>>,
    /// `[secrets]`.
    pub secrets: SecretsLayer,
    /// `[ledger] url`.
    pub ledger_url: Option<UrlText>,
    /// `[ledger] checkpoint_keys`, read.
    pub checkpoint_keys: Vec<PublicKey>,
    /// `[[hooks.after_call]]`.
    pub after_call_hooks: Vec<hooks::AfterCallHook>,
    /// `[schemas] registries`, each joined to the file's folder when relative.
    pub schema_registries: Vec<PathBuf>,
}

/// A config problem that stops the command (exit 2).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub(crate) struct ConfigError {
    /// What is wrong (names the file or variable).
    pub message: String,
    /// How to fix it.
    pub help: String,
}

impl Reportable for ConfigError {
    fn class(&self) -> Exit {
        Exit::Usage
    }

    fn help(&self) -> Option<String> {
        Some(self.help.clone())
    }
}

/// The settings and any warnings met while reading them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Loaded {
    /// The system files that exist, in the order they are read.
    system: Vec<FileLayer>,
    /// The home's config.toml, if it exists.
    user: Option<FileLayer>,
    /// The `RUNLOOP_*` variables.
    env: EnvLayer,
    /// Whether the home has a secret store (`rlp secrets set` made one):
    /// the default providers then read it after the environment.
    secret_store: bool,
    /// Things ignored (unknown keys, `[policy]` outside the system config).
    pub warnings: Vec<String>,
}

impl Loaded {
    /// The settings in force under a command's `flags` (pure: the files and
    /// the environment were read by [`load`]).
    pub(crate) fn config(&self, flags: &Flags) -> Config {
        let mut config = resolve(&self.system, self.user.as_ref(), &self.env, flags);
        if self.secret_store {
            config.secrets.read_store_by_default();
        }
        config
    }
}

/// Parses a boolean the way environment variables write one.
pub(crate) fn parse_bool(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// The tables a config file may hold.
const TABLES: [&str; 8] = ["security", "runtime", "policy", "ledger", "secrets", "hooks", "schemas", "agents"];

/// A config file being read: its path, and its text for the positions
/// its problems are shown at.
#[derive(Clone, Copy)]
pub(crate) struct ConfigFile<'a> {
    /// Where the file is.
    pub path: &'a Path,
    /// What it holds.
    pub text: &'a str,
    /// Where its keys and values lie, found on its first problem.
    places: &'a Places<'a>,
}

/// Where the keys and values of one config file lie: its text parsed
/// again with spans, and its lines, made once, on the file's first problem
/// to show, and shared by the rest (a file of many unknown keys is not
/// parsed again for each).
#[derive(Default)]
pub(crate) struct Places<'a>(std::cell::OnceCell<(Option<toml_edit::Document<&'a str>>, SourceFile)>);

impl<'a> ConfigFile<'a> {
    /// The config file `path` holding `text`, its positions found with `places`.
    pub(crate) fn new(path: &'a Path, text: &'a str, places: &'a Places<'a>) -> Self {
        ConfigFile { path, text, places }
    }

    /// `file:line:column` of the value at `at`, a dotted key path as
    /// problems name it (`hooks.after_call[1]`, `agents.mail.tools."mail.send".redact[0]`):
    /// of the deepest part of it the file holds (`:1:1` for none).
    pub(crate) fn at(&self, at: &str) -> String {
        self.position(at, Part::Value)
    }

    /// A problem with the value at `at` (see [`ConfigFile::at`]): `message`
    /// after its position.
    pub(crate) fn error(&self, at: &str, message: impl std::fmt::Display, help: impl Into<String>) -> ConfigError {
        ConfigError { message: format!("{}: {message}", self.at(at)), help: help.into() }
    }

    /// A warning about the key at `at` (a dotted key path, as for
    /// [`ConfigFile::at`]), such as one rlp does not know and ignores:
    /// `message` after the position of the key itself.
    pub(crate) fn warning(&self, at: &str, message: impl std::fmt::Display) -> String {
        format!("{}: {message}", self.position(at, Part::Key))
    }

    /// `file:line:column` of `part` of the entry at the dotted key path `at`.
    fn position(&self, at: &str, part: Part) -> String {
        let (document, _) = self.places();
        let span = document.as_ref().and_then(|document| span_of(document, &key_path(at), part));
        self.at_offset(span.map_or(0, |span| span.start))
    }

    /// `file:line:column` of the byte `offset` of the text.
    fn at_offset(&self, offset: usize) -> String {
        let position = self.places().1.position(offset);
        format!("{}:{}:{}", self.path.display(), position.line, position.column)
    }

    /// The text parsed with spans (none if it does not parse), and its lines.
    fn places(&self) -> &'a (Option<toml_edit::Document<&'a str>>, SourceFile) {
        self.places.0.get_or_init(|| {
            let source = SourceFile::new(self.path, self.text.to_string(), Syntax::Toml);
            (toml_edit::Document::parse(self.text).ok(), source)
        })
    }
}

/// One step of a dotted key path: a key, or an index into an array.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// The steps of a dotted key path: keys between dots (a quoted one may
/// hold dots), each followed by any number of `[index]`.
fn key_path(at: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut rest = at;
    while !rest.is_empty() {
        rest = rest.strip_prefix('.').unwrap_or(rest);
        if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted.find('"').unwrap_or(quoted.len());
            steps.push(Step::Key(quoted[..end].to_string()));
            rest = quoted.get(end + 1..).unwrap_or("");
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            steps.push(Step::Key(rest[..end].to_string()));
            rest = &rest[end..];
        }
        while let Some(index) = rest.strip_prefix('[') {
            let end = index.find(']').unwrap_or(index.len());
            match index[..end].parse() {
                Ok(i) => steps.push(Step::Index(i)),
                Err(_) => return steps,
            }
            rest = index.get(end + 1..).unwrap_or("");
        }
    }
    steps
}

/// Which part of a `key = value` entry a position is wanted for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Key,
    Value,
}

/// A place in a parsed config file that a key path steps through.
#[derive(Clone, Copy)]
enum Node<'d> {
    Item(&'d toml_edit::Item),
    Table(&'d toml_edit::Table),
    Value(&'d toml_edit::Value),
}

impl<'d> Node<'d> {
    fn span(self) -> Option<std::ops::Range<usize>> {
        match self {
            Node::Item(item) => item.span(),
            Node::Table(table) => table.span(),
            Node::Value(value) => value.span(),
        }
    }

    /// The key `key` of this table and the entry under it.
    fn entry(self, key: &str) -> Option<(&'d toml_edit::Key, Node<'d>)> {
        let table: &'d dyn toml_edit::TableLike = match self {
            Node::Item(item) => item.as_table_like()?,
            Node::Table(table) => table,
            Node::Value(value) => value.as_inline_table()?,
        };
        table.get_key_value(key).map(|(key, item)| (key, Node::Item(item)))
    }

    /// Element `i` of this array (of tables, or of values).
    fn element(self, i: usize) -> Option<Node<'d>> {
        match self {
            Node::Item(toml_edit::Item::ArrayOfTables(tables)) => tables.get(i).map(Node::Table),
            Node::Item(toml_edit::Item::Value(toml_edit::Value::Array(array)))
            | Node::Value(toml_edit::Value::Array(array)) => array.get(i).map(Node::Value),
            _ => None,
        }
    }
}

/// The span of the deepest value along `steps` that `document` holds, or
/// of its key when `part` is [`Part::Key`] and the last step found is a key.
/// The walk only borrows: the document is never copied.
fn span_of(document: &toml_edit::Document<&str>, steps: &[Step], part: Part) -> Option<std::ops::Range<usize>> {
    let mut node = Node::Item(document.as_item());
    let mut span = None;
    for step in steps {
        let (key, next) = match step {
            Step::Key(key) => match node.entry(key) {
                Some((key, next)) => (Some(key), next),
                None => break,
            },
            Step::Index(i) => match node.element(*i) {
                Some(next) => (None, next),
                None => break,
            },
        };
        span = match (part, key) {
            (Part::Key, Some(key)) => key.span(),
            _ => next.span(),
        }
        .or(span);
        node = next;
    }
    span
}

/// Parses one config file's text. `system` says whether `[policy]` is honoured.
pub(crate) fn parse_file(path: &Path, text: &str, system: bool) -> Result<(FileLayer, Vec<String>), ConfigError> {
    let shown = path.display();
    let places = Places::default();
    let file = ConfigFile::new(path, text, &places);
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| ConfigError {
        message: format!(
            "{}: not valid TOML: {}",
            file.at_offset(e.span().map_or(0, |span| span.start)),
            e.message().trim_end()
        ),
        help: format!("fix the syntax of {shown} at this position"),
    })?;
    let mut layer = FileLayer { path: path.to_path_buf(), ..FileLayer::default() };
    let mut warnings = Vec::new();
    let flag = |section: &str, key: &str, value: &toml::Value| -> Result<bool, ConfigError> {
        value.as_bool().ok_or_else(|| ConfigError {
            message: format!(
                "{}: `{section}.{key}` must be true or false, found {}",
                file.at(&format!("{section}.{key}")),
                value.type_str()
            ),
            help: format!("write `{key} = true` or `{key} = false` under [{section}]"),
        })
    };
    let mode = |section: &str, value: &toml::Value| -> Result<SandboxMode, ConfigError> {
        value.as_str().and_then(|text| text.parse().ok()).ok_or_else(|| ConfigError {
            message: format!(
                "{}: `{section}.sandbox` must be \"required\", \"best-effort\" or \"off\", found {value}",
                file.at(&format!("{section}.sandbox"))
            ),
            help: format!("write `sandbox = \"best-effort\"` (or \"required\", \"off\") under [{section}]"),
        })
    };
    for (section, value) in &table {
        let Some(entries) = value.as_table() else {
            if !TABLES.contains(&section.as_str()) {
                warnings.push(file.warning(&format!("\"{section}\""), format!("unknown key `{section}` ignored")));
                continue;
            }
            // A known table written as a value would drop its settings (a
            // system `policy = "required"`, every hook): it stops the command.
            return Err(ConfigError {
                message: format!("{}: `{section}` must be a table, found {}", file.at(section), value.type_str()),
                help: format!(
                    "write `{}` on a line of its own, its keys on the lines below it (docs/runtime.md, \"Configuration\")",
                    match section.as_str() {
                        "hooks" => "[[hooks.after_call]]".to_string(),
                        "agents" => "[agents.<agent>.tools]".to_string(),
                        _ => format!("[{section}]"),
                    }
                ),
            });
        };
        if section == "agents" {
            let agents = agents::read_agents(file, entries, &mut warnings)?;
            layer.tool_options = agents.options;
            layer.tool_lists = agents.lists;
            layer.tool_redactions = agents.redact;
            continue;
        }
        if section == "secrets" {
            layer.secrets = secrets::parse(file, entries, &mut warnings)?;
            continue;
        }
        if section == "hooks" {
            layer.after_call_hooks = hooks::parse(file, entries, &mut warnings)?;
            continue;
        }
        if section == "schemas" {
            layer.schema_registries = schema_registries(file, entries, &mut warnings)?;
            continue;
        }
        if !TABLES.contains(&section.as_str()) {
            warnings.push(file.warning(&format!("\"{section}\""), format!("unknown table `[{section}]` ignored")));
            continue;
        }
        if section == "policy" && !system {
            warnings.push(file.warning(
                "policy",
                format!("`[policy]` is honoured only in the system config ({DEFAULT_SYSTEM_CONFIG}); ignored"),
            ));
            continue;
        }
        for (key, value) in entries {
            match (section.as_str(), key.as_str()) {
                ("security", "confirm_external_actions") => {
                    layer.confirm_external_actions = Some(flag(section, key, value)?);
                }
                ("policy", "confirm_external_actions") => {
                    layer.policy_confirm_external_actions = Some(flag(section, key, value)?);
                }
                ("runtime", "sandbox") => layer.sandbox = Some(mode(section, value)?),
                ("policy", "sandbox") => layer.policy_sandbox = Some(mode(section, value)?),
                ("ledger", "url") => {
                    let url = value.as_str().ok_or_else(|| ConfigError {
                        message: format!(
                            "{}: `ledger.url` must be a string, found {}",
                            file.at("ledger.url"),
                            value.type_str()
                        ),
                        help: "write `url = \"postgres://USER@HOST/DATABASE\"` (or \"sqlite:///PATH\") under [ledger]"
                            .to_string(),
                    })?;
                    layer.ledger_url = Some(UrlText(url.to_string()));
                }
                ("ledger", "checkpoint_keys") => layer.checkpoint_keys = checkpoint_keys(file, value)?,
                _ => warnings.push(
                    file.warning(&format!("{section}.\"{key}\""), format!("unknown key `{section}.{key}` ignored")),
                ),
            }
        }
    }
    Ok((layer, warnings))
}

/// `[ledger] checkpoint_keys` of the config file `file`: each a public key
/// (`ed25519:<base64>`) or a `.pub` file (a relative path from the file's folder).
fn checkpoint_keys(file: ConfigFile<'_>, value: &toml::Value) -> Result<Vec<PublicKey>, ConfigError> {
    let help = || {
        "write `checkpoint_keys = [\"ed25519:…\", \"keys/ledger.pub\"]` under [ledger]: the public keys (or \
         `.pub` files) of whoever makes the ledger's checkpoints"
            .to_string()
    };
    let Some(items) = value.as_array() else {
        return Err(file.error(
            "ledger.checkpoint_keys",
            format!("`ledger.checkpoint_keys` must be a list, found {}", value.type_str()),
            help(),
        ));
    };
    let mut keys = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("ledger.checkpoint_keys[{i}]");
        let Some(text) = item.as_str() else {
            return Err(file.error(&at, format!("`{at}` must be a string, found {}", item.type_str()), help()));
        };
        let key = match text.starts_with("ed25519:") {
            true => PublicKey::parse(text).map_err(|why| format!("`{at}`: {why}")),
            false => PublicKey::load(&file.path.parent().unwrap_or(Path::new("")).join(text))
                .map_err(|e| format!("`{at}`: {}", e.message)),
        };
        keys.push(key.map_err(|message| file.error(&at, message, help()))?);
    }
    Ok(keys)
}

/// `[schemas]` of the config file `file`: `registries`, a list of folders,
/// relative ones joined to the file's folder.
fn schema_registries(
    file: ConfigFile<'_>,
    entries: &toml::Table,
    warnings: &mut Vec<String>,
) -> Result<Vec<PathBuf>, ConfigError> {
    let help = || {
        "write `registries = [\"/srv/schemas\", \"shared-schemas\"]` under [schemas]: folders holding `<id>.json` files, relative ones to the config file's folder".to_string()
    };
    let mut dirs = Vec::new();
    for (key, value) in entries {
        if key != "registries" {
            warnings.push(file.warning(&format!("schemas.\"{key}\""), format!("unknown key `schemas.{key}` ignored")));
            continue;
        }
        let Some(items) = value.as_array() else {
            return Err(file.error(
                "schemas.registries",
                format!("`schemas.registries` must be an array of folder paths, found {}", value.type_str()),
                help(),
            ));
        };
        for (i, item) in items.iter().enumerate() {
            let at = format!("schemas.registries[{i}]");
            let dir = match item.as_str() {
                Some(dir) if !dir.is_empty() => dir,
                Some(_) => return Err(file.error(&at, format!("`{at}` is empty"), help())),
                None => {
                    return Err(file.error(&at, format!("`{at}` must be a string, found {}", item.type_str()), help()));
                }
            };
            // Shown and searched as the real folder when it exists (`..` resolved).
            let joined = file.path.parent().unwrap_or(Path::new("")).join(dir);
            dirs.push(std::fs::canonicalize(&joined).unwrap_or(joined));
        }
    }
    Ok(dirs)
}

/// Combines the layers (pure: no files or environment read). `system` holds
/// the system files that exist, in the order they are read.
pub(crate) fn resolve(system: &[FileLayer], user: Option<&FileLayer>, env: &EnvLayer, flags: &Flags) -> Config {
    let mut config = Config::default();
    resolve_sandbox(&mut config, system, user, env.sandbox);
    for layer in system {
        config.secrets.apply(&layer.secrets, Source::SystemConfig(layer.path.clone()));
    }
    if let Some(user) = user {
        config.secrets.apply(&user.secrets, Source::UserConfig(user.path.clone()));
    }
    let ledger_layers = system
        .iter()
        .map(|l| (l.ledger_url.clone(), Source::SystemConfig(l.path.clone())))
        .chain(user.map(|l| (l.ledger_url.clone(), Source::UserConfig(l.path.clone()))))
        .chain([
            (env.ledger_url.clone(), Source::Env(LEDGER_ENV.to_string())),
            (flags.ledger_url.clone(), Source::Flag("--ledger".to_string())),
        ]);
    for (value, source) in ledger_layers {
        if let Some(value) = value {
            config.ledger_url = Some(Setting { value, source });
        }
    }
    config.after_call_hooks =
        system.iter().chain(user).flat_map(|layer| layer.after_call_hooks.iter().cloned()).collect();
    let file_sources = system
        .iter()
        .map(|l| (l, Source::SystemConfig(l.path.clone())))
        .chain(user.map(|l| (l, Source::UserConfig(l.path.clone()))));
    for (layer, source) in file_sources {
        for (agent, list) in &layer.tool_lists {
            config.tool_lists.entry(agent.clone()).or_default().add(list, &source);
        }
    }
    config.checkpoint_keys = system.iter().chain(user).flat_map(|l| l.checkpoint_keys.iter().copied()).collect();
    config.schema_registries = user
        .into_iter()
        .chain(system)
        .flat_map(|l| {
            l.schema_registries.iter().map(|dir| ConfiguredRegistry { dir: dir.clone(), file: l.path.clone() })
        })
        .collect();
    config.tools_flag =
        flags.tools.clone().map(|patterns| Patterns { patterns, source: Source::Flag("--tools".to_string()) });
    for layer in system.iter().chain(user) {
        for (agent, tools) in &layer.tool_options {
            for (tool, values) in tools {
                let configured = config.tool_options.entry(agent.clone()).or_default().entry(tool.clone()).or_default();
                configured.values.extend(values.clone());
                configured.files.push(layer.path.clone());
            }
        }
    }
    for layer in system.iter().chain(user) {
        for (agent, tools) in &layer.tool_redactions {
            for (tool, pointers) in tools {
                let list = config.tool_redactions.entry(agent.clone()).or_default().entry(tool.clone()).or_default();
                for pointer in pointers {
                    if !list.contains(pointer) {
                        list.push(pointer.clone());
                    }
                }
            }
        }
    }
    let mut set = |value: Option<bool>, source: Source| {
        if let Some(value) = value {
            config.confirm_external_actions = Setting { value, source };
        }
    };
    for layer in system {
        set(layer.confirm_external_actions, Source::SystemConfig(layer.path.clone()));
    }
    if let Some(user) = user {
        set(user.confirm_external_actions, Source::UserConfig(user.path.clone()));
    }
    set(env.confirm_external_actions, Source::Env(CONFIRM_ENV.to_string()));
    set(flags.confirm_external_actions, Source::Flag("--confirm-external-actions".to_string()));
    if let Some(layer) = system.iter().find(|l| l.policy_confirm_external_actions == Some(true)) {
        config.confirm_required_by = Some(layer.path.clone());
        if !config.confirm_external_actions.value {
            config.confirm_external_actions = Setting { value: true, source: Source::SystemPolicy(layer.path.clone()) };
        }
    }
    config
}

/// `runtime.sandbox` from the layers; the strongest system `[policy]` floor
/// wins over any weaker choice.
fn resolve_sandbox(config: &mut Config, system: &[FileLayer], user: Option<&FileLayer>, env: Option<SandboxMode>) {
    let layers = system
        .iter()
        .map(|l| (l.sandbox, Source::SystemConfig(l.path.clone())))
        .chain(user.map(|l| (l.sandbox, Source::UserConfig(l.path.clone()))))
        .chain(std::iter::once((env, Source::Env(SANDBOX_ENV.to_string()))));
    for (value, source) in layers {
        if let Some(value) = value {
            config.sandbox = Setting { value, source };
        }
    }
    let floor = system.iter().filter_map(|l| l.policy_sandbox.map(|mode| (mode, &l.path))).max_by_key(|(m, _)| *m);
    if let Some((floor, path)) = floor
        && config.sandbox.value < floor
    {
        config.sandbox = Setting { value: floor, source: Source::SystemPolicy(path.clone()) };
    }
}

/// Settings read from the environment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct EnvLayer {
    /// `RUNLOOP_SECURITY_CONFIRM_EXTERNAL_ACTIONS`.
    pub confirm_external_actions: Option<bool>,
    /// `RUNLOOP_RUNTIME_SANDBOX`.
    pub sandbox: Option<SandboxMode>,
    /// `RUNLOOP_LEDGER_URL`.
    pub ledger_url: Option<UrlText>,
}

/// The system config files, in the order they are read:
/// `/etc/runloop/config.toml`, then the file `extra` names (the value of
/// `$RUNLOOP_SYSTEM_CONFIG`), if any and if it is another file.
pub(crate) fn system_config_paths(extra: Option<&std::ffi::OsStr>) -> Vec<PathBuf> {
    let mut paths = vec![PathBuf::from(DEFAULT_SYSTEM_CONFIG)];
    if let Some(extra) = extra.filter(|v| !v.is_empty()).map(PathBuf::from)
        && extra != paths[0]
    {
        paths.push(extra);
    }
    paths
}

fn read_optional(path: &Path) -> Result<Option<String>, ConfigError> {
    let unreadable = |e: std::io::Error| ConfigError {
        message: format!("cannot read {}: {e}", path.display()),
        help: "fix the file's permissions, or remove it".to_string(),
    };
    match crate::fsutil::read_text_limited(path, MAX_CONFIG_BYTES) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(crate::fsutil::ReadError::Io(e)) => Err(unreadable(e)),
        Err(e) => Err(ConfigError { message: e.to_string(), help: "shorten the file".to_string() }),
    }
}

/// Reads the layers below the command line: the system config, the home's
/// config.toml and the environment. The CLI calls it once per command
/// (`cli::context`); [`Loaded::config`] adds the command's flags.
pub(crate) fn load(home: &Home) -> Result<Loaded, ConfigError> {
    let mut warnings = Vec::new();
    let mut system = Vec::new();
    for path in system_config_paths(std::env::var_os(SYSTEM_CONFIG_ENV).as_deref()) {
        if let Some(text) = read_optional(&path)? {
            let (layer, w) = parse_file(&path, &text, true)?;
            warnings.extend(w);
            system.push(layer);
        }
    }
    let user_path = home.config_file();
    let user = match read_optional(&user_path)? {
        Some(text) => {
            let (layer, w) = parse_file(&user_path, &text, false)?;
            warnings.extend(w);
            Some(layer)
        }
        None => None,
    };
    let confirm_external_actions = match std::env::var(CONFIRM_ENV) {
        Ok(text) if !text.is_empty() => Some(parse_bool(&text).ok_or_else(|| ConfigError {
            message: format!("{CONFIRM_ENV}=`{text}` is not a boolean"),
            help: format!("set {CONFIRM_ENV} to true or false, or unset it"),
        })?),
        _ => None,
    };
    let sandbox = match std::env::var(SANDBOX_ENV) {
        Ok(text) if !text.is_empty() => Some(text.parse().map_err(|why| ConfigError {
            message: format!("{SANDBOX_ENV}: {why}"),
            help: format!("set {SANDBOX_ENV} to required, best-effort or off, or unset it"),
        })?),
        _ => None,
    };
    let ledger_url = std::env::var(LEDGER_ENV).ok().filter(|url| !url.is_empty()).map(UrlText);
    let env = EnvLayer { confirm_external_actions, sandbox, ledger_url };
    let secret_store = home.secret_store_file().is_file();
    Ok(Loaded { system, user, env, secret_store, warnings })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_confirm(on: bool) -> EnvLayer {
        EnvLayer { confirm_external_actions: Some(on), ..EnvLayer::default() }
    }

    fn layer(path: &str, text: &str, system: bool) -> FileLayer {
        parse_file(Path::new(path), text, system).unwrap().0
    }

    #[test]
    fn defaults_to_confirming() {
        let config = resolve(&[], None, &EnvLayer::default(), &Flags::default());
        assert!(config.confirm_external_actions.value);
        assert_eq!(config.confirm_external_actions.source, Source::Default);
    }

    #[test]
    fn higher_layers_win() {
        let system = layer("/etc/s.toml", "[security]\nconfirm_external_actions = false\n", true);
        let user = layer("/h/config.toml", "[security]\nconfirm_external_actions = true\n", false);
        let c = resolve(std::slice::from_ref(&system), None, &EnvLayer::default(), &Flags::default());
        assert_eq!(
            c.confirm_external_actions,
            Setting { value: false, source: Source::SystemConfig("/etc/s.toml".into()) }
        );
        let c = resolve(std::slice::from_ref(&system), Some(&user), &EnvLayer::default(), &Flags::default());
        assert!(c.confirm_external_actions.value);
        let c = resolve(std::slice::from_ref(&system), Some(&user), &env_confirm(false), &Flags::default());
        assert_eq!(c.confirm_external_actions.source, Source::Env(CONFIRM_ENV.into()));
        assert!(!c.confirm_external_actions.value);
        let c = resolve(
            &[],
            Some(&user),
            &env_confirm(false),
            &Flags { confirm_external_actions: Some(true), ..Flags::default() },
        );
        assert!(c.confirm_external_actions.value);
        assert!(matches!(c.confirm_external_actions.source, Source::Flag(_)));
    }

    #[test]
    fn system_policy_is_a_hard_limit() {
        let system = layer("/etc/s.toml", "[policy]\nconfirm_external_actions = true\n", true);
        let user = layer("/h/config.toml", "[security]\nconfirm_external_actions = false\n", false);
        let c = resolve(
            std::slice::from_ref(&system),
            Some(&user),
            &env_confirm(false),
            &Flags { confirm_external_actions: Some(false), ..Flags::default() },
        );
        assert!(c.confirm_external_actions.value);
        assert_eq!(c.confirm_external_actions.source, Source::SystemPolicy("/etc/s.toml".into()));
        assert_eq!(c.confirm_required_by, Some(PathBuf::from("/etc/s.toml")));
        // A policy of `false` limits nothing.
        let lax = layer("/etc/s.toml", "[policy]\nconfirm_external_actions = false\n", true);
        assert!(!resolve(&[lax], Some(&user), &EnvLayer::default(), &Flags::default()).confirm_external_actions.value);
    }

    #[test]
    fn the_variable_adds_a_system_layer_and_never_drops_the_real_one() {
        let etc = PathBuf::from(DEFAULT_SYSTEM_CONFIG);
        assert_eq!(system_config_paths(None), vec![etc.clone()]);
        assert_eq!(system_config_paths(Some("".as_ref())), vec![etc.clone()]);
        assert_eq!(system_config_paths(Some("/dev/null".as_ref())), [etc.clone(), "/dev/null".into()]);
        assert_eq!(system_config_paths(Some(DEFAULT_SYSTEM_CONFIG.as_ref())), vec![etc.clone()]);
        // /etc requires confirmation; a second system file that says otherwise cannot lift it.
        let strict = layer(DEFAULT_SYSTEM_CONFIG, "[policy]\nconfirm_external_actions = true\n", true);
        let lax = layer(
            "/tmp/x.toml",
            "[policy]\nconfirm_external_actions = false\n[security]\nconfirm_external_actions = false\n",
            true,
        );
        let c = resolve(
            &[strict, lax],
            None,
            &EnvLayer::default(),
            &Flags { confirm_external_actions: Some(false), ..Flags::default() },
        );
        assert!(c.confirm_external_actions.value);
        assert_eq!(c.confirm_required_by, Some(etc.clone()));
        assert_eq!(c.confirm_external_actions.source, Source::SystemPolicy(etc));
    }

    #[test]
    fn policy_outside_the_system_config_is_ignored() {
        let (user, warnings) =
            parse_file(Path::new("/h/config.toml"), "[policy]\nconfirm_external_actions = true\n", false).unwrap();
        assert_eq!(user.policy_confirm_external_actions, None);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("only in the system config"), "{warnings:?}");
    }

    #[test]
    fn an_ignored_key_is_shown_where_it_is_written() {
        let text = "[agents.mail]\ncolour = 1\n[agents.mail.tools.\"mail.send\"]\n  shade = 2\n\
                    [hooks]\nbefore = []\n[secrets.cmd]\ncommand = [\"pass\"]\n\"odd.key\" = 1\n[schemas]\nmore = 1\n";
        let (_, warnings) = parse_file(Path::new("/h/c.toml"), text, false).unwrap();
        assert_eq!(
            warnings,
            [
                "/h/c.toml:2:1: unknown key `agents.mail.colour` ignored",
                "/h/c.toml:4:3: unknown key `agents.mail.tools.\"mail.send\".shade` ignored",
                "/h/c.toml:6:1: unknown key `hooks.before` ignored (hooks are `[[hooks.after_call]]` tables)",
                "/h/c.toml:11:1: unknown key `schemas.more` ignored",
                "/h/c.toml:9:1: unknown key `secrets.cmd.odd.key` ignored",
            ]
        );
    }

    #[test]
    fn a_file_is_parsed_for_positions_once_and_only_for_a_problem() {
        let text = "[runtime]\na = 1\nb = 2\n";
        let places = Places::default();
        let file = ConfigFile::new(Path::new("/h/c.toml"), text, &places);
        assert!(places.0.get().is_none(), "nothing is parsed again before a problem");
        assert_eq!(file.warning("runtime.a", "a"), "/h/c.toml:2:1: a");
        let first = std::ptr::from_ref(places.0.get().unwrap());
        assert_eq!(file.warning("runtime.b", "b"), "/h/c.toml:3:1: b");
        assert_eq!(file.at("runtime.b"), "/h/c.toml:3:5");
        assert_eq!(std::ptr::from_ref(places.0.get().unwrap()), first);
    }

    #[test]
    fn reports_bad_files() {
        let err =
            parse_file(Path::new("/h/c.toml"), "[security]\nconfirm_external_actions = \"no\"\n", false).unwrap_err();
        assert_eq!(
            err.message,
            "/h/c.toml:2:28: `security.confirm_external_actions` must be true or false, found string"
        );
        let err = parse_file(Path::new("/h/c.toml"), "\n[security", false).unwrap_err();
        assert_eq!(err.message, "/h/c.toml:2:10: not valid TOML: unclosed table, expected `]`");
        let (_, warnings) =
            parse_file(Path::new("/h/c.toml"), "z = 3\n[security]\nother = 1\n[x]\ny = 2\n", false).unwrap();
        assert_eq!(
            warnings,
            [
                "/h/c.toml:3:1: unknown key `security.other` ignored",
                "/h/c.toml:4:2: unknown table `[x]` ignored",
                "/h/c.toml:1:1: unknown key `z` ignored",
            ]
        );
        assert_eq!(parse_bool("FALSE"), Some(false));
        assert_eq!(parse_bool("maybe"), None);
    }

    #[test]
    fn a_known_table_written_as_a_value_stops_the_command() {
        let cases = [
            ("policy = \"required\"\n", "1:10: `policy` must be a table, found string"),
            ("# after-call hooks\n\nhooks = 1\n[security]\n", "3:9: `hooks` must be a table, found integer"),
        ];
        for (text, error) in cases {
            let err = parse_file(Path::new("/etc/c.toml"), text, true).unwrap_err();
            assert_eq!(err.message, format!("/etc/c.toml:{error}"));
        }
    }

    #[test]
    fn the_sandbox_mode_comes_from_the_highest_layer_above_the_system_floor() {
        let default = resolve(&[], None, &EnvLayer::default(), &Flags::default());
        assert_eq!(default.sandbox, Setting { value: SandboxMode::BestEffort, source: Source::Default });
        let user = layer("/h/config.toml", "[runtime]\nsandbox = \"off\"\n", false);
        let c = resolve(&[], Some(&user), &EnvLayer::default(), &Flags::default());
        assert_eq!(c.sandbox, Setting { value: SandboxMode::Off, source: Source::UserConfig("/h/config.toml".into()) });
        let env = EnvLayer { sandbox: Some(SandboxMode::Required), ..EnvLayer::default() };
        assert_eq!(resolve(&[], Some(&user), &env, &Flags::default()).sandbox.value, SandboxMode::Required);
        let floor = layer("/etc/s.toml", "[policy]\nsandbox = \"required\"\n", true);
        let c = resolve(std::slice::from_ref(&floor), Some(&user), &EnvLayer::default(), &Flags::default());
        assert_eq!(
            c.sandbox,
            Setting { value: SandboxMode::Required, source: Source::SystemPolicy("/etc/s.toml".into()) }
        );
        assert_eq!(c.sandbox.source.shown("runtime"), "[policy] in /etc/s.toml");
        assert_eq!(Source::UserConfig("/h/c.toml".into()).shown("runtime"), "[runtime] in /h/c.toml");
        let err = parse_file(Path::new("/h/c.toml"), "[runtime]\nsandbox = \"strict\"\n", false).unwrap_err();
        assert_eq!(
            err.message,
            "/h/c.toml:2:11: `runtime.sandbox` must be \"required\", \"best-effort\" or \"off\", found \"strict\""
        );
        let (user, warnings) = parse_file(Path::new("/h/c.toml"), "[policy]\nsandbox = \"required\"\n", false).unwrap();
        assert_eq!((user.policy_sandbox, warnings.len()), (None, 1));
    }

    #[test]
    fn agents_tools_reads_the_operators_lists_beside_tool_options() {
        let text = r#"
[agents.github.tools]
allow = ["issues.*", "repos.get"]
deny = ["*.delete"]

[agents.github.tools."issues.create".options]
labels = ["triage"]

[agents.mailer.tools]
allow = []
"#;
        let (layer, warnings) = parse_file(Path::new("/h/c.toml"), text, false).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let github = &layer.tool_lists["github"];
        fn shown(p: &[ToolPattern]) -> Vec<&str> {
            p.iter().map(ToolPattern::as_str).collect()
        }
        assert_eq!(shown(github.allow.as_deref().unwrap()), ["issues.*", "repos.get"]);
        assert_eq!(shown(&github.deny), ["*.delete"]);
        assert_eq!(layer.tool_options["github"]["issues.create"]["labels"], serde_json::json!(["triage"]));
        assert!(!layer.tool_options["github"].contains_key("allow"));
        assert_eq!(layer.tool_lists["mailer"].allow, Some(Vec::new()));
        assert_eq!(layer.tool_lists["mailer"].deny, Vec::new());
    }

    #[test]
    fn a_key_path_reads_quoted_keys_and_indexes() {
        let key = |k: &str| Step::Key(k.to_string());
        assert_eq!(key_path("ledger.url"), [key("ledger"), key("url")]);
        assert_eq!(
            key_path("agents.mail.tools.\"mail.send\".redact[2]"),
            [key("agents"), key("mail"), key("tools"), key("mail.send"), key("redact"), Step::Index(2)]
        );
        assert_eq!(
            key_path("hooks.after_call[1].command[0]"),
            [key("hooks"), key("after_call"), Step::Index(1), key("command"), Step::Index(0)]
        );
        // What is not a path stops where it stops being one.
        assert_eq!(key_path("a[x].b"), [key("a")]);
        assert_eq!(key_path(""), []);
        let places = Places::default();
        let file = ConfigFile::new(Path::new("/c.toml"), "[a]\nb = [1, 2]\n", &places);
        assert_eq!(file.at("a.b[1]"), "/c.toml:2:9");
        assert_eq!(file.at("a.missing"), "/c.toml:1:1");
        assert_eq!(file.at("nothing"), "/c.toml:1:1");
    }

    #[test]
    fn a_bad_list_names_the_file_and_key() {
        let error = |text: &str| parse_file(Path::new("/h/c.toml"), text, false).unwrap_err();
        let e = error("[agents.github.tools]\nallow = \"issues.*\"\n");
        assert_eq!(
            e.message,
            "/h/c.toml:2:9: `agents.github.tools.allow` must be an array of tool-id patterns, found string"
        );
        assert_eq!(
            e.help,
            "write `allow = [\"issues.*\", \"repos.get\"]` under [agents.github.tools]; `allow` and `deny` there are the operator's lists, never tool ids"
        );
        // A table named like a list is not a tool's settings.
        let e = error("[agents.github.tools.deny.options]\nx = 1\n");
        assert_eq!(
            e.message,
            "/h/c.toml:1:22: `agents.github.tools.deny` must be an array of tool-id patterns, found table"
        );
        let e = error("[agents.github.tools]\ndeny = [\"a.b\", 3]\n");
        assert_eq!(e.message, "/h/c.toml:2:16: `agents.github.tools.deny[1]` must be a string, found integer");
        let e = error("[agents.github.tools]\nallow = [\"Issues.*\"]\n");
        assert_eq!(
            e.message,
            "/h/c.toml:2:10: `agents.github.tools.allow[0]`: `Issues.*` is not a tool-id pattern: write a tool id (lowercase names joined by dots) with `*` for any run of characters"
        );
        assert!(e.help.contains("\"*.delete\""), "{}", e.help);
    }

    #[test]
    fn redact_lists_are_read_beside_options_and_add_up_across_files() {
        let system = layer(
            "/etc/s.toml",
            "[agents.mailer.tools.\"mail.send\"]\nredact = [\"/args/to\", \"/result/items/*/email\"]\n",
            true,
        );
        let text = "[agents.mailer.tools.\"mail.send\"]\nredact = [\"/args/to\", \"/args/cc\"]\n\
                    [agents.mailer.tools.\"mail.send\".options]\nsignature = \"Ada\"\n";
        let (user, warnings) = parse_file(Path::new("/h/config.toml"), text, false).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(user.tool_options["mailer"]["mail.send"]["signature"], "Ada");
        let c = resolve(&[system], Some(&user), &EnvLayer::default(), &Flags::default());
        let shown: Vec<&str> = c.tool_redactions["mailer"]["mail.send"].iter().map(CallPointer::as_str).collect();
        assert_eq!(shown, ["/args/to", "/result/items/*/email", "/args/cc"]);
    }

    #[test]
    fn a_bad_redact_list_names_the_file_and_key() {
        let error = |text: &str| parse_file(Path::new("/h/c.toml"), text, false).unwrap_err();
        let e = error("[agents.mailer.tools.\"mail.send\"]\nredact = \"/args/to\"\n");
        assert_eq!(
            e.message,
            "/h/c.toml:2:10: `agents.mailer.tools.\"mail.send\".redact` must be an array of JSON Pointers, found string"
        );
        assert!(
            e.help.starts_with(
                "write `redact = [\"/args/to\", \"/result/items/*/email\"]` under [agents.mailer.tools.\"mail.send\"]"
            ),
            "{}",
            e.help
        );
        let e = error("[agents.mailer.tools.\"mail.send\"]\nredact = [\"/args/to\", 3]\n");
        assert_eq!(
            e.message,
            "/h/c.toml:2:23: `agents.mailer.tools.\"mail.send\".redact[1]` must be a string, found integer"
        );
        let e = error("[agents.mailer.tools.\"mail.send\"]\nredact = [\"args/to\"]\n");
        assert_eq!(
            e.message,
            "/h/c.toml:2:11: `agents.mailer.tools.\"mail.send\".redact[0]`: `args/to` does not start with /args or /result"
        );
        assert!(e.help.starts_with("write `/args/to`"), "{}", e.help);
        let e = error("[agents.mailer.tools.\"mail.send\"]\nredact = [\"/args/a~b\"]\n");
        assert!(
            e.message.ends_with("`/args/a~b` is not a JSON Pointer: `~` must be followed by 0 or 1"),
            "{}",
            e.message
        );
    }

    #[test]
    fn every_layer_of_the_lists_narrows_and_none_widens() {
        let system =
            layer("/etc/s.toml", "[agents.github.tools]\nallow = [\"issues.*\"]\ndeny = [\"*.delete\"]\n", true);
        // The home tries to widen the allow list and to lift the deny: it can only add.
        let user = layer("/h/config.toml", "[agents.github.tools]\nallow = [\"*\"]\ndeny = [\"issues.lock\"]\n", false);
        let flags = Flags { tools: Some(vec!["issues.list".parse().unwrap()]), ..Flags::default() };
        let c = resolve(std::slice::from_ref(&system), Some(&user), &EnvLayer::default(), &flags);
        let list = c.tool_list("github");
        let sources: Vec<&Source> = list.allow.iter().map(|p| &p.source).collect();
        assert_eq!(
            sources,
            [
                &Source::SystemConfig("/etc/s.toml".into()),
                &Source::UserConfig("/h/config.toml".into()),
                &Source::Flag("--tools".into())
            ]
        );
        assert_eq!(list.deny.len(), 2);
        assert_eq!(list.places(), "in /etc/s.toml, in /h/config.toml, of --tools");
        // Another agent has only the flag's list; without it, none.
        assert_eq!(c.tool_list("mailer").allow.len(), 1);
        let c = resolve(&[system], Some(&user), &EnvLayer::default(), &Flags::default());
        assert!(c.tool_list("mailer").is_empty());
        assert_eq!(c.tool_list("github").allow.len(), 2);
    }
}
