//! The kinds of frame, each with the type of its payload: one table, so a
//! new kind is one line here (and its payload type in
//! [`crate::event::payload`]).

use std::fmt;
use std::str::FromStr;

use serde_json::Value;
use uuid::Uuid;

use crate::event::fields;
use crate::event::payload::{
    CapAuditPayload, ReplayLinkPayload, ServerExchangePayload, ToolAnswerPayload, ToolCallPayload, ToolConfirmPayload,
    ToolDiscoverPayload, ToolHookPayload, ToolInquiryPayload, ToolResultPayload, ToolSamplePayload,
};

/// Content type id of a tool call frame (CT_TOOL_CALL).
pub(crate) const CT_TOOL_CALL: u16 = 0x0003;
/// Content type id of a tool result frame (CT_TOOL_RESULT).
pub(crate) const CT_TOOL_RESULT: u16 = 0x0004;

/// Defines [`EventKind`] and [`Payload`] from one table:
/// `Variant = "kind column value", content type id, payload type;`.
macro_rules! frame_kinds {
    ($($(#[doc = $doc:literal])* $variant:ident = $name:literal, $schema_id:expr, $payload:ty;)+) => {
        /// What a frame records: its `kind` column.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum EventKind {
            $($(#[doc = $doc])* $variant,)+
        }

        impl EventKind {
            /// Every kind, in the order messages list them.
            pub const ALL: &'static [EventKind] = &[$(EventKind::$variant),+];

            /// The `kind` column value.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(EventKind::$variant => $name,)+
                }
            }

            /// The frame content type id, for the kinds that have one.
            pub fn schema_id(self) -> Option<u16> {
                match self {
                    $(EventKind::$variant => $schema_id,)+
                }
            }
        }

        /// A frame's payload as read back, typed by its kind.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Payload {
            $($(#[doc = $doc])* $variant($payload),)+
        }

        impl Payload {
            /// The kind of frame that carries this payload.
            pub fn kind(&self) -> EventKind {
                match self {
                    $(Payload::$variant(_) => EventKind::$variant,)+
                }
            }

            /// Reads `payload` as the payload of a frame of `kind`; an error
            /// names the field that is missing or of the wrong type.
            pub fn read(kind: EventKind, payload: Value) -> Result<Payload, String> {
                match kind {
                    $(EventKind::$variant => fields::read(payload).map(Payload::$variant),)+
                }
            }
        }
    };
}

frame_kinds! {
    /// A call about to run.
    ToolCall = "tool.call", Some(CT_TOOL_CALL), ToolCallPayload;
    /// The outcome of one attempt.
    ToolResult = "tool.result", Some(CT_TOOL_RESULT), ToolResultPayload;
    /// One allow or deny decision about a capability.
    CapAudit = "cap.audit", None, CapAuditPayload;
    /// Who approved or denied a call, and how.
    ToolConfirm = "tool.confirm", None, ToolConfirmPayload;
    /// The questions a tool asked (`needs_input`).
    ToolInquiry = "tool.inquiry", None, ToolInquiryPayload;
    /// The answers given to them, and where each came from.
    ToolAnswer = "tool.answer", None, ToolAnswerPayload;
    /// A model completion an MCP server asked for during a call, relayed or refused.
    ToolSample = "tool.sample", None, ToolSamplePayload;
    /// What an after-call hook did to a call's result (before its final `tool.result`).
    ToolHook = "tool.hook", None, ToolHookPayload;
    /// The first frame of a trace made by a live replay: names the trace it replays.
    TraceReplay = "trace.replay", None, ReplayLinkPayload;
    /// A search or description of tools (`rlp serve --expose core`): what the client was shown.
    ToolDiscover = "tool.discover", None, ToolDiscoverPayload;
    /// A bridged server's resources listed (`resources/list`) for a client of `rlp serve`.
    ResourceList = "resource.list", None, ServerExchangePayload;
    /// A bridged server's resource templates listed (`resources/templates/list`).
    ResourceTemplates = "resource.templates", None, ServerExchangePayload;
    /// A resource of a bridged server read (`resources/read`).
    ResourceRead = "resource.read", None, ServerExchangePayload;
    /// A subscription to a bridged server's resource begun or ended (`resources/subscribe`, `resources/unsubscribe`).
    ResourceSubscribe = "resource.subscribe", None, ServerExchangePayload;
    /// A bridged server said a subscribed resource changed (`notifications/resources/updated`), passed on.
    ResourceUpdated = "resource.updated", None, ServerExchangePayload;
    /// A bridged server's prompts listed (`prompts/list`).
    PromptList = "prompt.list", None, ServerExchangePayload;
    /// A prompt of a bridged server got (`prompts/get`).
    PromptGet = "prompt.get", None, ServerExchangePayload;
    /// Completions of a prompt's or resource template's argument (`completion/complete`).
    CompletionComplete = "completion.complete", None, ServerExchangePayload;
    /// A bridged server said its tools, resources or prompts changed (`notifications/*/list_changed`).
    ServerChanged = "server.changed", None, ServerExchangePayload;
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A kind equals its `kind` column value.
impl PartialEq<&str> for EventKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl FromStr for EventKind {
    type Err = String;

    /// The kind named by a `kind` column value; the error lists the known kinds.
    fn from_str(text: &str) -> Result<EventKind, String> {
        EventKind::ALL.iter().copied().find(|k| k.as_str() == text).ok_or_else(|| {
            let known: Vec<&str> = EventKind::ALL.iter().map(|k| k.as_str()).collect();
            format!("unknown kind `{text}` (known: {})", known.join(", "))
        })
    }
}

impl Payload {
    /// The invocation the frame belongs to (none for a replay link).
    pub fn invocation_id(&self) -> Option<Uuid> {
        match self {
            Payload::ToolCall(call) => Some(call.invocation_id),
            Payload::ToolResult(result) => Some(result.invocation_id),
            Payload::CapAudit(audit) => Some(audit.invocation_id),
            Payload::ToolConfirm(confirm) => Some(confirm.invocation_id),
            Payload::ToolInquiry(inquiry) => Some(inquiry.invocation_id),
            Payload::ToolAnswer(answer) => Some(answer.invocation_id),
            Payload::ToolSample(sample) => Some(sample.invocation_id),
            Payload::ToolHook(hook) => Some(hook.invocation_id),
            _ => None,
        }
    }

    /// What passed between a client of `rlp serve` and a bridged server, for
    /// the frames that record it (`resource.*`, `prompt.*`,
    /// `completion.complete`, `server.changed`).
    pub fn exchange(&self) -> Option<&ServerExchangePayload> {
        match self {
            Payload::ResourceList(exchange)
            | Payload::ResourceTemplates(exchange)
            | Payload::ResourceRead(exchange)
            | Payload::ResourceSubscribe(exchange)
            | Payload::ResourceUpdated(exchange)
            | Payload::PromptList(exchange)
            | Payload::PromptGet(exchange)
            | Payload::CompletionComplete(exchange)
            | Payload::ServerChanged(exchange) => Some(exchange),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::payload::{Outcome, PAYLOAD_VERSION};
    use serde_json::json;

    #[test]
    fn kinds_round_trip() {
        for kind in EventKind::ALL {
            assert_eq!(kind.as_str().parse::<EventKind>(), Ok(*kind));
        }
        assert_eq!(EventKind::ToolCall.schema_id(), Some(0x0003));
        assert_eq!(EventKind::ToolResult.schema_id(), Some(0x0004));
        let unknown = "tool.question".parse::<EventKind>().unwrap_err();
        let known: Vec<&str> = EventKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(unknown, format!("unknown kind `tool.question` (known: {})", known.join(", ")));
    }

    #[test]
    fn reads_payloads_and_names_missing_fields() {
        let id = Uuid::from_u128(7);
        let call =
            Payload::read(EventKind::ToolCall, json!({"v": 1, "tool": "t", "args": {"a": 1}, "invocation_id": id}))
                .unwrap();
        assert_eq!(
            call,
            Payload::ToolCall(ToolCallPayload {
                v: PAYLOAD_VERSION,
                invocation_id: id,
                tool: "t".into(),
                args: json!({"a": 1}),
                input_schema: String::new(),
                input_schema_blake3: String::new(),
                tags: vec![],
                options: None,
                sandbox: None,
                traceparent: None,
                command: None,
                server: None,
                replay: None,
            })
        );
        let retry = Payload::read(
            EventKind::ToolResult,
            json!({"invocation_id": id, "error": {"message": "busy", "kind": "tool", "will_retry": true}, "attempt": 1}),
        )
        .unwrap();
        let Payload::ToolResult(retry) = retry else { panic!("not a result") };
        assert!(retry.will_retry());
        assert!(matches!(&retry.outcome, Outcome::Error(e) if e.error.message == "busy"));
        let result = |payload| Payload::read(EventKind::ToolResult, payload).unwrap_err();
        assert_eq!(result(json!({"invocation_id": id})), "the payload has neither `result` nor `error`");
        assert_eq!(
            result(json!({"invocation_id": id, "result": 1, "error": {"message": "m"}})),
            "the payload has both `result` and `error`"
        );
        assert_eq!(result(json!({"invocation_id": id, "error": "m"})), "the payload's `error` is not an object");
        assert_eq!(
            result(json!({"invocation_id": id, "error": {"message": 1}})),
            "the payload's `error` has no string `message`"
        );
        assert_eq!(
            result(json!({"invocation_id": id, "result": null, "attempt": -1})),
            "the payload's `attempt` is not a non-negative integer"
        );
        let call = |payload| Payload::read(EventKind::ToolCall, payload).unwrap_err();
        assert_eq!(call(json!({"tool": "t"})), "the payload has no `invocation_id`");
        assert_eq!(
            call(json!({"invocation_id": "nope", "tool": "t", "args": 1})),
            "the payload's `invocation_id` (`nope`) is not a UUID"
        );
        assert_eq!(call(json!({"invocation_id": id, "tool": 1, "args": 1})), "the payload's `tool` is not a string");
        assert_eq!(
            call(json!({"invocation_id": id, "tool": "t", "args": 1, "tags": [1]})),
            "the payload's `tags` holds a non-string"
        );
        assert_eq!(call(json!([1])), "the payload is not a JSON object");
        let confirm = Payload::read(EventKind::ToolConfirm, json!({"invocation_id": id, "tool": "t", "approved": "y"}));
        assert_eq!(confirm.unwrap_err(), "the payload's `approved` is not true or false");
        let audit = Payload::read(
            EventKind::CapAudit,
            json!({"invocation_id": id, "tool": "t", "capability": "exec", "decision": "maybe"}),
        );
        assert_eq!(audit.unwrap_err(), "the payload's `decision` (`maybe`) is not `allow` or `deny`");
    }
}
