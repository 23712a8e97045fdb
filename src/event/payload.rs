//! The payload of each kind of frame: what the runtime writes and what
//! replay, export and `trace show` read back, as one set of types.
//!
//! Payloads carry `v` ([`PAYLOAD_VERSION`]). Reading is as forgiving as it
//! needs to be for traces written by hand or by older versions: `v`,
//! `input_schema`, `tags`, `attempt`, `duration_ms`, `reason`, `by` and `how`
//! may be absent, and fields rlp does not read back are ignored when they
//! have another type. Unknown fields are ignored.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{DeserializeOwned, Error as _, IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use uuid::Uuid;

use crate::event::fields;

/// Version of every payload written by this runtime (`v`).
pub const PAYLOAD_VERSION: u64 = 1;

fn payload_version() -> u64 {
    PAYLOAD_VERSION
}

/// Payload of a call frame ([`crate::event::EventKind::ToolCall`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCallPayload {
    /// Payload version (1).
    #[serde(default = "payload_version", deserialize_with = "fields::lenient")]
    pub v: u64,
    /// The invocation id (UUIDv7), shared by the call's other frames.
    #[serde(deserialize_with = "fields::uuid")]
    pub invocation_id: Uuid,
    /// The tool id.
    #[serde(deserialize_with = "fields::text")]
    pub tool: String,
    /// The arguments (scrubbed).
    pub args: Value,
    /// The input schema reference: `schema:<id>` as written, or `inline`.
    #[serde(default, deserialize_with = "fields::lenient")]
    pub input_schema: String,
    /// BLAKE3 (hex) of the RFC 8785 form of the input schema the arguments
    /// were validated against (the referenced document for a `$ref`).
    #[serde(default, deserialize_with = "fields::lenient")]
    pub input_schema_blake3: String,
    /// The call's tags: the tool's `observability.tags`, then those given
    /// for the call (`--tag`).
    #[serde(default, deserialize_with = "fields::tags")]
    pub tags: Vec<String>,
    /// The operator's options for the tool (`options_schema`), merged and
    /// validated; absent when the tool takes none.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::lenient")]
    pub options: Option<Value>,
    /// The kernel sandbox an exec tool ran in (absent for http tools and in
    /// traces written before rlp sandboxed tools).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::lenient")]
    pub sandbox: Option<Box<SandboxRecord>>,
    /// The W3C `traceparent` the caller sent (MCP `_meta`), when it sent
    /// a well-formed one.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::lenient")]
    pub traceparent: Option<String>,
    /// An exec tool's program named with `${bundle}`: the form as written
    /// and the path it resolved to for this call (absent for a command
    /// written as an absolute path, which is its own record).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::lenient")]
    pub command: Option<CommandRecord>,
    /// The MCP server an `mcp` tool's call went to: who it said it is at
    /// the handshake.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::lenient")]
    pub server: Option<Box<ServerRecord>>,
    /// How a replay answered the call (`rlp serve --replay`, `rlp tools
    /// call --replay`); absent for a call that was simply made.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::lenient")]
    pub replay: Option<Box<ReplayMark>>,
}

/// How a replay answered a call, as its call frame records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayMark {
    /// `recording` (answered from the recorded call named here), `live`
    /// (no recording matched; the call ran for real) or `unmatched` (no
    /// recording matched, and the call failed; the closest recorded call
    /// is named here, if there is one).
    pub answered: ReplayAnswered,
    /// The recorded trace.
    pub trace_id: Uuid,
    /// The recorded invocation: the one that answered, or the closest one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invocation_id: Option<Uuid>,
    /// The position of that invocation's call frame in the recorded trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
}

/// What answered a call under replay ([`ReplayMark::answered`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplayAnswered {
    /// The recorded call.
    Recording,
    /// The tool itself (`--fallback live`).
    Live,
    /// Nothing: the call failed.
    Unmatched,
}

impl ReplayAnswered {
    /// `recording`, `live` or `unmatched`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReplayAnswered::Recording => "recording",
            ReplayAnswered::Live => "live",
            ReplayAnswered::Unmatched => "unmatched",
        }
    }
}

/// The MCP server of a call, as its call frame records it: what the server
/// said of itself at the handshake.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerRecord {
    /// Its `serverInfo.name`.
    pub name: String,
    /// Its `serverInfo.version`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The protocol revision agreed on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

/// A program named relative to the bundle's folder, as a call frame records
/// it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandRecord {
    /// As tools.json writes it (`${bundle}/bin/greet`).
    pub written: String,
    /// The path it named at this call.
    pub resolved: String,
}

/// The kernel sandbox of an exec call, as its call frame records it
/// (docs/sandbox.md).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SandboxRecord {
    /// `runtime.sandbox` in force: `required`, `best-effort` or `off`.
    pub mode: String,
    /// Whether the tool ran confined at all.
    pub confined: bool,
    /// The Landlock ABI applied (0: none).
    pub landlock_abi: u32,
    /// What the tool may read (and execute): `system` (the folders
    /// docs/sandbox.md lists), then its program and the bundle.
    pub read: Vec<String>,
    /// What it may read and write: `$TMPDIR` (its private folder), then its
    /// `fs` grants.
    pub write: Vec<String>,
    /// The network: `none`, `allowlist` (only `net_allow`) or `unrestricted`.
    pub net: String,
    /// The `net` grants it may reach.
    pub net_allow: Vec<String>,
    /// Whether the seccomp filter was loaded.
    pub seccomp: bool,
    /// `max_memory_bytes`, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_memory_bytes: Option<u64>,
    /// `max_processes`, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_processes: Option<u64>,
    /// What the kernel could not enforce.
    pub gaps: Vec<String>,
    /// The namespaces the tool ran in (`mount`, `pid`, `ipc`, and `user`
    /// when rlp is not root); empty where the kernel gave none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// How the call's processes end with it: `pid-namespace` (the kernel
    /// ends them all when the tool ends) or `sweep` (rlp finds and kills
    /// them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<String>,
    /// Who the tool ran as: its uid, and the capabilities it kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
}

/// What one attempt consumed, as the tool reported it in its success
/// envelope (`usage`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Model tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Cost in US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
}

impl Usage {
    /// Whether it reports nothing.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_none() && self.usd.is_none()
    }

    /// The sum of two usages (a side that reports nothing adds nothing).
    pub fn plus(self, other: Usage) -> Usage {
        let sum_tokens = match (self.tokens, other.tokens) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        };
        let sum_usd = match (self.usd, other.usd) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
        Usage { tokens: sum_tokens, usd: sum_usd }
    }
}

/// The error half of a result payload, as the runtime writes it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolError {
    /// What went wrong (scrubbed).
    #[serde(deserialize_with = "fields::text")]
    pub message: String,
    /// A stable class: `tool`, `timeout`, `output_too_large`, `invalid_result`,
    /// `needs_input`, `transport`, `http_status`, `refused`.
    #[serde(default, deserialize_with = "fields::lenient")]
    pub kind: String,
    /// Whether the tool said a retry may succeed.
    #[serde(default, deserialize_with = "fields::lenient")]
    pub transient: bool,
    /// How long the tool asked to wait before a retry.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::lenient")]
    pub retry_after_ms: Option<u64>,
    /// The HTTP status, for http tools.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::lenient")]
    pub status: Option<u16>,
    /// Whether another attempt follows this one.
    #[serde(default, deserialize_with = "fields::lenient")]
    pub will_retry: bool,
}

/// A tool error as read back from a result frame: its fields, and the
/// object exactly as recorded (what reports, `trace show` and live replay
/// comparisons show).
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedError {
    /// The fields rlp reads.
    pub error: ToolError,
    /// The whole `error` object as recorded.
    pub raw: Value,
}

impl RecordedError {
    /// An error that is only a message (`{"message": …}`).
    pub fn from_message(message: String) -> Self {
        let raw = serde_json::json!({ "message": message });
        RecordedError { error: ToolError { message, ..ToolError::default() }, raw }
    }
}

impl Serialize for RecordedError {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.raw.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RecordedError {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Value::deserialize(deserializer)?;
        if !raw.is_object() {
            return Err(D::Error::custom("is not an object"));
        }
        if !raw.get("message").is_some_and(Value::is_string) {
            return Err(D::Error::custom("has no string `message`"));
        }
        let error = ToolError::deserialize(&raw).map_err(D::Error::custom)?;
        Ok(RecordedError { error, raw })
    }
}

/// What one attempt produced: a result or an error (`E`: [`RecordedError`]
/// when read back, the default; [`ToolError`] when written).
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome<E = RecordedError> {
    /// The tool's result (scrubbed).
    Result(Value),
    /// The tool failed.
    Error(E),
}

impl<E: Serialize> Outcome<E> {
    /// `{"result": …}` or `{"error": …}`, the members of the payload.
    pub fn to_json(&self) -> Value {
        let mut map = serde_json::Map::new();
        let (key, value) = match self {
            Outcome::Result(value) => ("result", value.clone()),
            Outcome::Error(error) => ("error", serde_json::to_value(error).unwrap_or(Value::Null)),
        };
        map.insert(key.into(), value);
        Value::Object(map)
    }
}

impl<E> Outcome<E> {
    /// `ok` or `error`.
    pub fn status(&self) -> &'static str {
        match self {
            Outcome::Result(_) => "ok",
            Outcome::Error(_) => "error",
        }
    }
}

/// Payload of a result frame ([`crate::event::EventKind::ToolResult`]):
/// exactly one of `result` and `error`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(bound(serialize = "E: Serialize", deserialize = "E: DeserializeOwned"))]
pub struct ToolResultPayload<E = RecordedError> {
    /// Payload version (1).
    #[serde(default = "payload_version", deserialize_with = "fields::lenient")]
    pub v: u64,
    /// The invocation this attempt belongs to.
    #[serde(deserialize_with = "fields::uuid")]
    pub invocation_id: Uuid,
    /// The tool id (empty in traces written before result frames named it).
    #[serde(default, deserialize_with = "fields::lenient")]
    pub tool: String,
    /// `result` or `error`.
    #[serde(flatten, with = "outcome_members")]
    pub outcome: Outcome<E>,
    /// The attempt number, from 1 (1 when absent).
    #[serde(default = "fields::first_attempt", deserialize_with = "fields::attempt")]
    pub attempt: u64,
    /// Wall time of this attempt in milliseconds (absent in some hand-written traces).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::count")]
    pub duration_ms: Option<u64>,
    /// The result schema reference: `schema:<id>` as written, or `inline`.
    #[serde(default, deserialize_with = "fields::lenient")]
    pub result_schema: String,
    /// BLAKE3 (hex) of the RFC 8785 form of the result schema the result
    /// was validated against (the referenced document for a `$ref`).
    #[serde(default, deserialize_with = "fields::lenient")]
    pub result_schema_blake3: String,
    /// What the attempt consumed, when the tool said.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::lenient")]
    pub usage: Option<Usage>,
    /// The content blocks an MCP server sent beside its structured result
    /// (binary data past a bound by digest: `crate::runtime::mcp::content`).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::lenient")]
    pub content: Option<Vec<Value>>,
    /// The call's tags (absent when it has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "fields::tags")]
    pub tags: Vec<String>,
    /// The W3C `traceparent` the caller sent (MCP `_meta`), when it sent
    /// a well-formed one.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::lenient")]
    pub traceparent: Option<String>,
}

impl ToolResultPayload {
    /// Whether another attempt follows this one (`error.will_retry`).
    pub fn will_retry(&self) -> bool {
        matches!(&self.outcome, Outcome::Error(e) if e.error.will_retry)
    }
}

/// The `result` or `error` member of a result payload.
mod outcome_members {
    use super::*;

    pub(super) fn serialize<E: Serialize, S: Serializer>(
        outcome: &Outcome<E>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        match outcome {
            Outcome::Result(value) => map.serialize_entry("result", value)?,
            Outcome::Error(error) => map.serialize_entry("error", error)?,
        }
        map.end()
    }

    pub(super) fn deserialize<'de, E: DeserializeOwned, D: Deserializer<'de>>(d: D) -> Result<Outcome<E>, D::Error> {
        d.deserialize_map(OutcomeVisitor(PhantomData))
    }

    struct OutcomeVisitor<E>(PhantomData<E>);

    impl<'de, E: DeserializeOwned> Visitor<'de> for OutcomeVisitor<E> {
        type Value = Outcome<E>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a `result` or an `error`")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Outcome<E>, A::Error> {
            let (mut result, mut error) = (None, None);
            while let Some(key) = map.next_key::<String>()? {
                match key.as_str() {
                    "result" => result = Some(map.next_value::<Value>()?),
                    "error" => error = Some(map.next_value::<Value>()?),
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            match (result, error) {
                (Some(result), None) => Ok(Outcome::Result(result)),
                (None, Some(error)) => E::deserialize(error)
                    .map(Outcome::Error)
                    .map_err(|e| A::Error::custom(format!("the payload's `error` {e}"))),
                (Some(_), Some(_)) => Err(A::Error::custom("the payload has both `result` and `error`")),
                (None, None) => Err(A::Error::custom("the payload has neither `result` nor `error`")),
            }
        }
    }
}

/// An allow or deny decision (`allow`, `deny`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Allowed.
    Allow,
    /// Denied.
    Deny,
}

impl Decision {
    /// Both decisions.
    pub const ALL: &'static [Decision] = &[Decision::Allow, Decision::Deny];

    /// `allow` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl Serialize for Decision {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Decision {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = fields::text(deserializer)?;
        Decision::ALL.iter().copied().find(|d| d.as_str() == text).ok_or_else(|| {
            let known: Vec<String> = Decision::ALL.iter().map(|d| format!("`{}`", d.as_str())).collect();
            D::Error::custom(format!("(`{text}`) is not {}", known.join(" or ")))
        })
    }
}

/// Payload of an audit frame ([`crate::event::EventKind::CapAudit`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapAuditPayload {
    /// Payload version (1).
    #[serde(default = "payload_version", deserialize_with = "fields::lenient")]
    pub v: u64,
    /// The invocation id.
    #[serde(deserialize_with = "fields::uuid")]
    pub invocation_id: Uuid,
    /// The tool id.
    #[serde(deserialize_with = "fields::text")]
    pub tool: String,
    /// The capability string, e.g. `net:api.example.com:443`.
    #[serde(deserialize_with = "fields::text")]
    pub capability: String,
    /// allow or deny.
    pub decision: Decision,
    /// Why (which grant allowed it, or what is missing).
    #[serde(default, deserialize_with = "fields::lenient")]
    pub reason: String,
    /// For a `secrets:<id>` capability: the secret provider that gave the
    /// value (allow), or that failed (deny). Never the value.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::lenient")]
    pub provider: Option<String>,
    /// The call's tags (absent when it has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "fields::tags")]
    pub tags: Vec<String>,
}

/// Payload of a confirmation frame ([`crate::event::EventKind::ToolConfirm`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolConfirmPayload {
    /// Payload version (1).
    #[serde(default = "payload_version", deserialize_with = "fields::lenient")]
    pub v: u64,
    /// The invocation id.
    #[serde(deserialize_with = "fields::uuid")]
    pub invocation_id: Uuid,
    /// The tool id.
    #[serde(deserialize_with = "fields::text")]
    pub tool: String,
    /// Whether the call may go ahead.
    #[serde(deserialize_with = "fields::flag")]
    pub approved: bool,
    /// Who decided (`operator`, `config`).
    #[serde(default, deserialize_with = "fields::lenient")]
    pub by: String,
    /// How (`terminal prompt`, `--yes`, `no terminal`, the setting that waived it).
    #[serde(default, deserialize_with = "fields::lenient")]
    pub how: String,
    /// The call's tags (absent when it has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "fields::tags")]
    pub tags: Vec<String>,
}

/// Payload of a question frame ([`crate::event::EventKind::ToolInquiry`]):
/// what a tool asked before it could go on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolInquiryPayload {
    /// Payload version (1).
    #[serde(default = "payload_version", deserialize_with = "fields::lenient")]
    pub v: u64,
    /// The invocation id.
    #[serde(deserialize_with = "fields::uuid")]
    pub invocation_id: Uuid,
    /// The tool id.
    #[serde(deserialize_with = "fields::text")]
    pub tool: String,
    /// The attempt that asked.
    #[serde(default = "fields::first_attempt", deserialize_with = "fields::attempt")]
    pub attempt: u64,
    /// The questions, as the tool wrote them (`id`, `text`, `schema`, `default`).
    #[serde(default, deserialize_with = "fields::lenient")]
    pub questions: Vec<Value>,
    /// The call's tags (absent when it has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "fields::tags")]
    pub tags: Vec<String>,
}

/// A model completion an MCP server asked for during a call
/// (`sampling/createMessage`): what it asked, and whether rlp relayed it to
/// its own client (`rlp serve`) or refused it, with the answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSamplePayload {
    /// Payload version (1).
    #[serde(default = "payload_version", deserialize_with = "fields::lenient")]
    pub v: u64,
    /// The invocation id.
    #[serde(deserialize_with = "fields::uuid")]
    pub invocation_id: Uuid,
    /// The tool id.
    #[serde(deserialize_with = "fields::text")]
    pub tool: String,
    /// The attempt during which the server asked.
    #[serde(default = "fields::first_attempt", deserialize_with = "fields::attempt")]
    pub attempt: u64,
    /// The request's params, scrubbed.
    #[serde(default, deserialize_with = "fields::lenient")]
    pub request: Value,
    /// Whether it was relayed to rlp's client.
    #[serde(default, deserialize_with = "fields::lenient")]
    pub relayed: bool,
    /// The answer handed to the server, scrubbed.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::lenient")]
    pub response: Option<Value>,
    /// Why there is no answer.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::lenient")]
    pub error: Option<String>,
    /// The call's tags (absent when it has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "fields::tags")]
    pub tags: Vec<String>,
}

/// One after-call hook's work on a call's result (config.toml
/// `[[hooks.after_call]]`), recorded before the call's final
/// [`ToolResultPayload`], which keeps the result as the tool returned it.
/// What the caller saw is that result after every hook of the call, in
/// order: the last `result` and `content` a hook gave, the annotations of
/// all of them, or an error where one withheld it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolHookPayload {
    /// Payload version (1).
    #[serde(default = "payload_version", deserialize_with = "fields::lenient")]
    pub v: u64,
    /// The invocation id.
    #[serde(deserialize_with = "fields::uuid")]
    pub invocation_id: Uuid,
    /// The tool id.
    #[serde(deserialize_with = "fields::text")]
    pub tool: String,
    /// The hook's name.
    #[serde(deserialize_with = "fields::text")]
    pub hook: String,
    /// Its command: the program, then its arguments.
    #[serde(default, deserialize_with = "fields::lenient")]
    pub command: Vec<String>,
    /// What it did: [`HookEffect`].
    pub effect: HookEffect,
    /// The result it gave in place of the one it received.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::lenient")]
    pub result: Option<Value>,
    /// The content blocks it gave in place of those it received.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::lenient")]
    pub content: Option<Vec<Value>>,
    /// The notes it added for the caller.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "fields::lenient")]
    pub annotations: Vec<String>,
    /// Why it withheld the result, or how it failed.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::lenient")]
    pub reason: Option<String>,
    /// How long it ran, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::count")]
    pub duration_ms: Option<u64>,
    /// The call's tags (absent when it has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "fields::tags")]
    pub tags: Vec<String>,
}

/// What an after-call hook did to a result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookEffect {
    /// Nothing: the result went on as it was.
    Unchanged,
    /// It added notes, and changed nothing else.
    Annotated,
    /// It gave another result or other content blocks (and maybe notes).
    Replaced,
    /// It withheld the result: the caller got an error saying why.
    Withheld,
    /// It failed, and the caller got an error (`on_failure = "withhold"`).
    FailedWithheld,
    /// It failed, and the result went on as it was (`on_failure = "pass"`).
    FailedPassed,
}

impl HookEffect {
    /// As frames write it.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEffect::Unchanged => "unchanged",
            HookEffect::Annotated => "annotated",
            HookEffect::Replaced => "replaced",
            HookEffect::Withheld => "withheld",
            HookEffect::FailedWithheld => "failed_withheld",
            HookEffect::FailedPassed => "failed_passed",
        }
    }

    /// Whether the caller got an error instead of the result.
    pub fn withholds(self) -> bool {
        matches!(self, HookEffect::Withheld | HookEffect::FailedWithheld)
    }
}

/// One answer to a tool's question, as recorded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedAnswer {
    /// The question id.
    #[serde(deserialize_with = "fields::text")]
    pub id: String,
    /// The answer.
    pub value: Value,
    /// Where it came from: `flag` (`--answer`), `terminal`, `mcp` or `replay`.
    #[serde(default, deserialize_with = "fields::lenient")]
    pub source: String,
}

/// Payload of an answer frame ([`crate::event::EventKind::ToolAnswer`]):
/// the answers to the questions of the inquiry before it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolAnswerPayload {
    /// Payload version (1).
    #[serde(default = "payload_version", deserialize_with = "fields::lenient")]
    pub v: u64,
    /// The invocation id.
    #[serde(deserialize_with = "fields::uuid")]
    pub invocation_id: Uuid,
    /// The tool id.
    #[serde(deserialize_with = "fields::text")]
    pub tool: String,
    /// The attempt whose questions these answer.
    #[serde(default = "fields::first_attempt", deserialize_with = "fields::attempt")]
    pub attempt: u64,
    /// The answers, in the order of the questions.
    #[serde(default, deserialize_with = "fields::lenient")]
    pub answers: Vec<RecordedAnswer>,
    /// The call's tags (absent when it has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "fields::tags")]
    pub tags: Vec<String>,
}

/// Payload of a replay link frame ([`crate::event::EventKind::TraceReplay`]),
/// the first frame of a trace made by a live replay.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplayLinkPayload {
    /// Payload version (1).
    #[serde(default = "payload_version", deserialize_with = "fields::lenient")]
    pub v: u64,
    /// The trace that was replayed.
    #[serde(deserialize_with = "fields::uuid")]
    pub replay_of: Uuid,
    /// The replay mode (`live`).
    #[serde(deserialize_with = "fields::text")]
    pub mode: String,
    /// The agent named by the replayed trace.
    #[serde(default, deserialize_with = "fields::lenient")]
    pub recorded_agent: String,
}

/// Payload of a discovery frame ([`crate::event::EventKind::ToolDiscover`]):
/// what a client of `rlp serve --expose core` searched for or asked to see,
/// and the tools it was shown, so a replay knows what the model saw.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolDiscoverPayload {
    /// Payload version (1).
    #[serde(default = "payload_version", deserialize_with = "fields::lenient")]
    pub v: u64,
    /// `search` or `describe`.
    #[serde(deserialize_with = "fields::text")]
    pub action: String,
    /// The search's query.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::lenient")]
    pub query: Option<String>,
    /// The search's category filter.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::lenient")]
    pub category: Option<String>,
    /// The search's limit.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::count")]
    pub limit: Option<u64>,
    /// The tools shown, in the order shown: the search's results, or the
    /// tools described.
    #[serde(default, deserialize_with = "fields::tags")]
    pub ids: Vec<String>,
    /// Ids asked to be described that name no tool offered.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "fields::tags")]
    pub unknown: Vec<String>,
}

/// Payload of the frames of what passes between a client of `rlp serve`
/// and a bridged server besides tool calls ([`crate::event::EventKind`]
/// `resource.*`, `prompt.*`, `completion.complete`, `server.changed`): the
/// request as the client sent it and the answer as the client got it (both
/// scrubbed; binary contents past a bound by digest), or why there was
/// none. Recorded before the answer is sent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerExchangePayload {
    /// Payload version (1).
    #[serde(default = "payload_version", deserialize_with = "fields::lenient")]
    pub v: u64,
    /// The server's name (its key in tools.json's `servers`).
    #[serde(deserialize_with = "fields::text")]
    pub server: String,
    /// The MCP method (`resources/read`, `notifications/resources/updated`, …).
    #[serde(deserialize_with = "fields::text")]
    pub method: String,
    /// The request's params, or the notification's, as rlp's client sent or got them.
    #[serde(default, deserialize_with = "fields::lenient")]
    pub request: Value,
    /// The answer as rlp's client got it (names as served).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::lenient")]
    pub response: Option<Value>,
    /// Why there is no answer.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::lenient")]
    pub error: Option<String>,
    /// What the server asked while it answered (elicitation, sampling):
    /// `{method, request, response | error}` each, scrubbed.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "fields::lenient")]
    pub asked: Vec<Value>,
    /// How long the server took, in milliseconds (requests only).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "fields::count")]
    pub duration_ms: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_payload_has_result_or_error() {
        let id = Uuid::now_v7();
        let ok = ToolResultPayload {
            v: 1,
            invocation_id: id,
            tool: "t".into(),
            outcome: Outcome::Result(serde_json::json!({"a": 1})),
            attempt: 1,
            duration_ms: Some(3),
            result_schema: "inline".into(),
            result_schema_blake3: "00".into(),
            usage: Some(Usage { tokens: Some(600), usd: None }),
            content: None,
            tags: vec!["team=mail".into()],
            traceparent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into()),
        };
        let value = serde_json::to_value(&ok).unwrap();
        assert!(value.get("error").is_none());
        assert_eq!(value["result"]["a"], 1);
        assert_eq!(value["usage"], serde_json::json!({"tokens": 600}));
        let back: ToolResultPayload = serde_json::from_value(value).unwrap();
        assert_eq!(back, ok);
    }
}
