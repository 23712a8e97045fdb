//! The tool-call pipeline: exposure, input validation, secrets,
//! confirmation, recording, transports (exec, http), result validation.
//!
//! A [`Runtime`] loads a bundle once (refusing one that has lint errors),
//! compiles its schemas, and then serves any number of [`Runtime::call`]s,
//! from several threads at once. Each call runs, in order:
//!
//! 1. expose: every capability the tool needs is in bundle policy ∩ operator
//!    override (each decision an audit frame);
//! 2. validate the arguments against `input_schema`, the budget (`budget`
//!    ceilings against the usage recorded in the trace) and the options
//!    (`options_schema`);
//! 3. resolve the tool's secrets;
//! 4. confirm (when the tool asks for it and the config does not waive it);
//! 5. record the call frame durably, then execute;
//!    a tool that asks questions (`needs_input`) gets answers (given with
//!    the call, else from the [`answer::Answerer`]) recorded as inquiry
//!    and answer frames, and runs again with them ([`questions`]);
//! 6. validate the result against `result_schema`;
//! 7. record the result frame durably, then return the result.
//!
//! One call is a `call::Call`: it owns what the call brings and its frames
//! (`journal::Journal`), and each step is a method of it, in the module of
//! its step. The transports (`exec`, `http`) are dispatched in one place,
//! `transport`; the attempts and retries are `attempts`.
//!
//! Frames ([`crate::event`]) go to a [`Recorder`] given in [`RuntimeOptions`].
//!
//! Secret values are scrubbed from every record, message and result.

pub(crate) mod asking;
pub(crate) mod attempts;
pub(crate) mod budget;
pub(crate) mod call;
pub mod context;
pub mod envelope;
pub(crate) mod error;
pub(crate) mod exec;
pub mod exposure;
pub(crate) mod hooks;
pub(crate) mod http;
pub(crate) mod invalid_args;
pub(crate) mod journal;
pub(crate) mod mcp;
pub(crate) mod options;
pub mod recorded;
pub mod recorder;
pub(crate) mod scrub;
pub(crate) mod secret_resolution;
pub(crate) mod transport;
pub(crate) mod trust_cache;
pub(crate) mod trust_gate;
pub(crate) mod validate;

// The public paths of asking's parts (library users, the CLI's terminal and
// the fuzz targets name them so).
pub use asking::{answer, confirm, questions};

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::bundle::LoadedBundle;
use crate::bundle::diag::{Code, Severity};
use crate::bundle::registry::Registries;
use crate::bundle::servers::Server;
use crate::bundle::tools::Tool;
use crate::config::Config;
use crate::config::tool_list::ToolList;
use crate::error::{Exit, Reportable};
use crate::event::canonical::canonical_text;
use crate::event::{EventKind, Record, RecordError, Recorder};
use crate::home::Home;
use crate::runtime::asking::answer::{Answerer, NoAnswerer};
use crate::runtime::asking::confirm::{Confirmer, NoTerminal};
use crate::runtime::call::{Call, NO_CONTEXT};
use crate::runtime::exposure::EffectivePolicy;
use crate::runtime::http::ClientError;
use crate::runtime::journal::Journal;
use crate::runtime::trust_gate::{Loaded, TrustGate};
use crate::secrets::{Providers, SecretResolver};
use crate::text::plural;
use uuid::Uuid;

pub use crate::process::cancel::Cancel;
pub use crate::runtime::call::{CallOutcome, CallRequest};
pub use crate::runtime::context::{CallContext, Progress, ProgressSink, Sampler};
pub use crate::runtime::error::{CallError, CallErrorKind};
pub use crate::runtime::hooks::Annotation;

/// Most calls one process runs at once (`rlp tools call --batch --jobs`,
/// `rlp serve --max-calls`): each one's process group and private folder
/// must fit the signal handler's slots, so a fatal signal cleans up after
/// every one of them.
pub const MAX_CONCURRENT_CALLS: usize = 256;
const _: () = assert!(crate::interrupt::SLOTS >= 2 * MAX_CONCURRENT_CALLS + 64);

/// How many lint findings a load refusal quotes.
const QUOTED_FINDINGS: usize = 5;

/// What a runtime is built with.
pub struct RuntimeOptions {
    /// The runtime home (operator overrides live there).
    pub home: Home,
    /// The settings in force (confirmation).
    pub config: Config,
    /// Where secret values come from.
    pub secrets: Arc<dyn SecretResolver>,
    /// Where events go.
    pub recorder: Arc<dyn Recorder>,
    /// Who approves calls that need confirmation.
    pub confirmer: Arc<dyn Confirmer>,
    /// Who answers the questions tools ask (after the answers a call
    /// brings itself).
    pub answerer: Arc<dyn Answerer>,
}

impl RuntimeOptions {
    /// Defaults: default config, secrets from the environment, no one to
    /// confirm (calls that need confirmation are refused) and no one to
    /// answer questions (a call whose tool asks one fails unless it brings
    /// the answer).
    pub fn new(home: Home, recorder: Arc<dyn Recorder>) -> Self {
        RuntimeOptions {
            home,
            config: Config::default(),
            secrets: Arc::new(Providers::default()),
            recorder,
            confirmer: Arc::new(NoTerminal),
            answerer: Arc::new(NoAnswerer),
        }
    }
}

impl fmt::Debug for RuntimeOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeOptions").field("home", &self.home).field("config", &self.config).finish_non_exhaustive()
    }
}

/// Why a bundle could not be loaded (exit 2).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct LoadError {
    /// What is wrong (several lines for lint findings).
    pub message: String,
    /// What to do.
    pub help: Option<String>,
}

impl Reportable for LoadError {
    fn class(&self) -> Exit {
        Exit::Usage
    }

    fn help(&self) -> Option<String> {
        self.help.clone()
    }
}

/// A tool ready to call: its entry and its compiled schemas.
pub(crate) struct Prepared {
    pub(crate) tool: Tool,
    pub(crate) input: jsonschema::Validator,
    pub(crate) result: jsonschema::Validator,
    /// The compiled `options_schema`, if the tool has one.
    pub(crate) options: Option<jsonschema::Validator>,
    pub(crate) input_schema: SchemaId,
    pub(crate) result_schema: SchemaId,
}

/// How a call's frames name one of its tool's schemas: the reference as
/// written (`schema:<id>`, or `inline`) and the BLAKE3 of the RFC 8785 form
/// of the schema it resolves to.
pub(crate) struct SchemaId {
    pub(crate) reference: String,
    pub(crate) blake3: String,
    /// The schema it resolves to (what MCP clients are shown).
    pub(crate) resolved: Value,
}

/// A loaded bundle serving tool calls. `Send + Sync`: share it with `Arc`.
pub struct Runtime {
    root: PathBuf,
    agent: String,
    version: Option<String>,
    tools: HashMap<String, Arc<Prepared>>,
    tool_ids: Vec<String>,
    policy: EffectivePolicy,
    tool_list: ToolList,
    options: RuntimeOptions,
    http: OnceLock<Result<reqwest::blocking::Client, ClientError>>,
    warnings: Vec<String>,
    gate: TrustGate,
    /// The MCP servers of the bundle's `mcp` tools.
    servers: Vec<Server>,
    /// The sessions with them.
    bridge: mcp::session::Bridge,
    /// Where calls are answered from instead of run (a replay).
    recording: Option<Arc<dyn recorded::Recording>>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("root", &self.root)
            .field("agent", &self.agent)
            .field("tools", &self.tool_ids)
            .finish()
    }
}

/// Lint codes that do not stop a load: a tool whose capabilities are not
/// granted is simply not exposed, and calling it is refused (exit 3) with a
/// deny audit frame ([`crate::event::EventKind::CapAudit`]).
const RUNTIME_ENFORCED: &[Code] = &[Code::CapabilityNotGranted, Code::SecretNotGranted];

fn schema_ref(schema: &Value) -> String {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => reference.to_string(),
        None => "inline".to_string(),
    }
}

impl Runtime {
    /// Loads the bundle at `dir`: checks it against the trust policy (see
    /// [`trust_gate`]), lints it (refusing errors), reads the operator
    /// override, and compiles every tool's schemas.
    ///
    /// A bundle the trust policy refuses still loads (without its tools when
    /// it cannot be read): every call to it is refused (exit 3) and recorded
    /// as a deny audit frame, whatever else is wrong with it; strict
    /// replay, which runs nothing, still sees its tools.
    pub fn load(dir: &Path, options: RuntimeOptions) -> Result<Runtime, LoadError> {
        let root = dir.canonicalize().map_err(|e| LoadError {
            message: format!("cannot resolve the bundle folder {}: {e}", dir.display()),
            help: None,
        })?;
        let gate = TrustGate::new(&root, &options.home);
        // The gate runs at every call; here it only decides what a bundle
        // that cannot be read becomes: refused at every call, with a
        // deny audit frame, when the trust policy refuses it too.
        let contents = match Contents::read(dir, &options.home, &options.config.registries(&options.home)) {
            Ok(contents) => contents,
            Err(_) if gate.check().is_err() => Contents::unread(&root),
            Err(e) => return Err(e),
        };
        let Contents { agent, version, tools, tool_ids, policy, warnings, servers, loaded } = contents;
        let gate = gate.expecting(loaded);
        let tool_list = options.config.tool_list(&agent);
        Ok(Runtime {
            root,
            agent,
            version,
            tools,
            tool_ids,
            policy,
            tool_list,
            options,
            http: OnceLock::new(),
            warnings,
            gate,
            servers,
            bridge: mcp::session::Bridge::default(),
            recording: None,
        })
    }

    /// The runtime answering every call from `recording` instead of
    /// running it ([`recorded`]).
    pub fn answering_from(mut self, recording: Arc<dyn recorded::Recording>) -> Runtime {
        self.recording = Some(recording);
        self
    }

    /// Where calls are answered from, under a replay.
    pub(crate) fn recording(&self) -> Option<&dyn recorded::Recording> {
        self.recording.as_deref()
    }

    /// The agent's name.
    pub fn agent(&self) -> &str {
        &self.agent
    }

    /// The bundle's version, as written in manifest.toml.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// The bundle folder (absolute).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The tool ids, in tools.json order.
    pub fn tool_ids(&self) -> &[String] {
        &self.tool_ids
    }

    /// A tool's entry.
    pub fn tool(&self, id: &str) -> Option<&Tool> {
        self.tools.get(id).map(|p| &p.tool)
    }

    /// The policy enforced.
    pub fn policy(&self) -> &EffectivePolicy {
        &self.policy
    }

    /// The operator's lists of the agent's tools (config.toml, `--tools`).
    pub fn tool_list(&self) -> &ToolList {
        &self.tool_list
    }

    /// A tool's input and result schemas, each resolved from its
    /// `schema:<id>` reference when it is one.
    pub fn resolved_schemas(&self, id: &str) -> Option<(&Value, &Value)> {
        self.tools.get(id).map(|p| (&p.input_schema.resolved, &p.result_schema.resolved))
    }

    /// Things noticed while loading (ignored override entries).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Says so when the bundle is an unsigned working folder, which is not
    /// checked against the trust policy.
    pub fn trust_note(&self) -> Option<String> {
        self.gate.note()
    }

    pub(crate) fn gate(&self) -> &TrustGate {
        &self.gate
    }

    pub(crate) fn prepared(&self, id: &str) -> Option<&Arc<Prepared>> {
        self.tools.get(id)
    }

    pub(crate) fn options(&self) -> &RuntimeOptions {
        &self.options
    }

    /// The bundle's `servers`, in tools.json order.
    pub fn servers(&self) -> &[Server] {
        &self.servers
    }

    /// A server of the bundle's `servers`.
    pub(crate) fn server(&self, name: &str) -> Option<&Server> {
        self.servers.iter().find(|s| s.name == name)
    }

    /// The sessions with the bundle's MCP servers.
    pub(crate) fn bridge(&self) -> &mcp::session::Bridge {
        &self.bridge
    }

    /// The HTTP client every call shares, set up at the first http call.
    pub(crate) fn http_client(&self) -> Result<&reqwest::blocking::Client, &ClientError> {
        self.http.get_or_init(http::client).as_ref()
    }

    /// Runs one call through the whole pipeline, confirmed and answered by
    /// the runtime's own confirmer and answerer.
    pub fn call(&self, request: &CallRequest) -> Result<CallOutcome, CallError> {
        self.call_in(request, &NO_CONTEXT)
    }

    /// Runs one call through the whole pipeline with what `context` brings
    /// (its confirmer and answerer, cancellation, progress).
    pub fn call_in(&self, request: &CallRequest, context: &CallContext) -> Result<CallOutcome, CallError> {
        Call::open(self, request, context)?.run()
    }

    /// Checks the bundle against the trust policy before anything of a
    /// recorded trace runs again (live replay); a refusal is recorded in
    /// `trace_id` as a deny audit frame for tool `*`.
    pub fn check_trust(&self, trace_id: Uuid) -> Result<(), CallError> {
        let mut journal = Journal::new(&*self.options.recorder, &self.agent, "*", Some(trace_id));
        self.gate.admit(&self.agent, &mut journal)
    }

    /// Records one frame of `kind` that belongs to no call (a discovery, an
    /// exchange with a bridged server) in trace `trace_id`, durably.
    pub fn record_frame(
        &self,
        trace_id: Uuid,
        kind: EventKind,
        payload: &impl serde::Serialize,
    ) -> Result<(), RecordError> {
        let payload = serde_json::to_value(payload).unwrap_or(Value::Null);
        let record = Record::now(kind, "runtime", self.agent(), trace_id, payload);
        self.options.recorder.record(&[record])
    }
}

/// What a runtime reads from a bundle: its identity, its tools with their
/// compiled schemas, and the policy in force.
struct Contents {
    agent: String,
    version: Option<String>,
    tools: HashMap<String, Arc<Prepared>>,
    tool_ids: Vec<String>,
    policy: EffectivePolicy,
    warnings: Vec<String>,
    servers: Vec<Server>,
    loaded: Loaded,
}

impl Contents {
    /// Lints the bundle at `dir` (refusing errors, among them a shared
    /// schema of `registries` that is not pinned or differs from its pin),
    /// reads the operator override in `home`, and compiles every tool's
    /// schemas.
    fn read(dir: &Path, home: &Home, registries: &Registries) -> Result<Contents, LoadError> {
        let report = crate::lint::lint_bundle(dir, registries);
        refuse_lint_errors(dir, &report.findings)?;
        let bundle = report.bundle;
        let version = bundle.manifest.as_ref().and_then(|m| m.version.clone());
        let agent = bundle.manifest.as_ref().and_then(|m| m.name.clone()).ok_or_else(|| LoadError {
            message: format!("bundle {} has no agent name", dir.display()),
            help: Some("set `name` under [agent] in manifest.toml".into()),
        })?;
        let mut warnings = Vec::new();
        let policy = read_policy(&bundle, &agent, home, &mut warnings)?;
        let mut tools = HashMap::new();
        let mut tool_ids = Vec::new();
        for tool in bundle.tool_list() {
            let prepared = prepare(dir, &bundle, tool)?;
            tool_ids.push(tool.id.clone());
            tools.insert(tool.id.clone(), Arc::new(prepared));
        }
        let servers = bundle.tools.as_ref().map(|file| file.servers.clone()).unwrap_or_default();
        let loaded = Loaded::of(&bundle);
        Ok(Contents { agent, version, tools, tool_ids, policy, warnings, servers, loaded })
    }

    /// Nothing of a bundle that could not be read: its agent named after its
    /// manifest or its folder, no tools.
    fn unread(root: &Path) -> Contents {
        Contents {
            agent: agent_name_of(root),
            version: None,
            tools: HashMap::new(),
            tool_ids: Vec::new(),
            policy: EffectivePolicy::new(crate::bundle::policy::Policy::empty()),
            warnings: Vec::new(),
            servers: Vec::new(),
            loaded: Loaded::default(),
        }
    }
}

/// Refuses a bundle with lint errors (those the runtime does not enforce
/// itself), quoting the first few.
fn refuse_lint_errors(dir: &Path, findings: &[crate::lint::Located]) -> Result<(), LoadError> {
    let errors: Vec<_> = findings
        .iter()
        .filter(|l| l.finding.severity == Severity::Error && !RUNTIME_ENFORCED.contains(&l.finding.code))
        .collect();
    if errors.is_empty() {
        return Ok(());
    }
    let mut message =
        format!("bundle {} has {} and cannot be loaded:", dir.display(), plural(errors.len(), "lint error"));
    for located in errors.iter().take(QUOTED_FINDINGS) {
        message.push_str(&format!(
            "\n  {}:{}:{}: {} {}",
            located.finding.file.display(),
            located.position.line,
            located.position.column,
            located.finding.code,
            located.finding.message
        ));
    }
    if errors.len() > QUOTED_FINDINGS {
        message.push_str(&format!("\n  … and {} more", errors.len() - QUOTED_FINDINGS));
    }
    Err(LoadError { message, help: Some(format!("run `rlp lint {}` for details", dir.display())) })
}

/// The bundle's policy under the operator override of `agent` in `home`,
/// if there is one (its warnings go to `warnings`).
fn read_policy(
    bundle: &LoadedBundle,
    agent: &str,
    home: &Home,
    warnings: &mut Vec<String>,
) -> Result<EffectivePolicy, LoadError> {
    let path = home.override_file(agent);
    match crate::fsutil::read_text_limited(&path, crate::home::MAX_OVERRIDE_BYTES) {
        Ok(text) => {
            let (policy, w) = exposure::apply_override(bundle.policy(), &path, &text)
                .map_err(|message| LoadError { message, help: Some("fix the override file, or remove it".into()) })?;
            warnings.extend(w);
            Ok(policy)
        }
        Err(e) if e.is_not_found() => Ok(EffectivePolicy::new(bundle.policy())),
        Err(crate::fsutil::ReadError::Io(e)) => Err(LoadError {
            message: format!("cannot read the operator override {}: {e}", path.display()),
            help: Some("fix its permissions, or remove it".into()),
        }),
        Err(e) => Err(LoadError { message: format!("the operator override {e}"), help: e.help() }),
    }
}

/// A tool of the bundle at `dir` with its schemas compiled and identified.
fn prepare(dir: &Path, bundle: &LoadedBundle, tool: &Tool) -> Result<Prepared, LoadError> {
    let documents = bundle.schema_documents(Some(tool));
    let compile = |key: &str, schema: Option<&Value>| {
        let schema = schema.ok_or_else(|| LoadError {
            message: format!("tool `{}` has no `{key}`", tool.id),
            help: Some(format!("add `{key}` to the tool in tools.json")),
        })?;
        crate::bundle::schema::compile(schema, documents.clone()).map_err(|e| LoadError {
            message: format!("tool `{}`: `{key}` does not compile: {e}", tool.id),
            help: Some(format!("run `rlp lint {}`", dir.display())),
        })
    };
    let input = compile("input_schema", tool.input_schema.as_ref())?;
    let result = compile("result_schema", tool.result_schema.as_ref())?;
    let options = match &tool.options_schema {
        Some(schema) => Some(compile("options_schema", Some(schema))?),
        None => None,
    };
    let identify = |schema: Option<&Value>| {
        let schema = schema.cloned().unwrap_or(Value::Bool(true));
        let resolved = bundle.resolve_schema(tool, &schema).cloned().unwrap_or(schema.clone());
        let canonical = canonical_text(&resolved);
        SchemaId {
            reference: schema_ref(&schema),
            blake3: blake3::hash(canonical.as_bytes()).to_hex().to_string(),
            resolved,
        }
    };
    Ok(Prepared {
        tool: tool.clone(),
        input,
        result,
        options,
        input_schema: identify(tool.input_schema.as_ref()),
        result_schema: identify(tool.result_schema.as_ref()),
    })
}

/// The agent's name as its manifest says, else the folder's name (for the
/// records of a bundle refused before it was read).
fn agent_name_of(root: &Path) -> String {
    use crate::bundle::manifest::MANIFEST_FILE;
    use crate::integrity::verify::{MAX_MANIFEST_BYTES, read_regular};
    read_regular(&root.join(MANIFEST_FILE), MANIFEST_FILE, MAX_MANIFEST_BYTES)
        .ok()
        .and_then(|bytes| crate::integrity::verify::parse_manifest(&bytes).ok())
        .and_then(|m| m.name)
        .unwrap_or_else(|| root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Runtime>();
    }
}
