//! Confirmation of external actions: the question the runtime asks, and the
//! trait through which a person (or a flag) answers it.
//!
//! The library never touches a terminal: the CLI passes in a [`Confirmer`]
//! that prompts; tests and scripts pass [`PreApproved`] or [`NoTerminal`].

use serde_json::Value;
use uuid::Uuid;

use crate::event::{EventKind, PAYLOAD_VERSION, ToolConfirmPayload};
use crate::runtime::call::Call;
use crate::runtime::error::{CallError, CallErrorKind};
use crate::runtime::transport::Plan;

/// What the operator is asked to approve.
#[derive(Clone, Debug)]
pub struct ConfirmRequest<'a> {
    /// The tool id.
    pub tool: &'a str,
    /// The tool's description.
    pub description: &'a str,
    /// The arguments (secret values scrubbed).
    pub arguments: &'a Value,
    /// Where the call goes: `METHOD URL`, or the command line.
    pub target: &'a str,
    /// The invocation id.
    pub invocation_id: Uuid,
}

/// The answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Confirmation {
    /// Whether the call may go ahead.
    pub approved: bool,
    /// Who answered (`operator`).
    pub by: String,
    /// How (`terminal prompt`, `--yes`, `no terminal`).
    pub how: String,
}

/// Asks whether a call may go ahead. Must be callable from several threads.
pub trait Confirmer: Send + Sync {
    /// Decides on one call.
    fn confirm(&self, request: &ConfirmRequest<'_>) -> Confirmation;

    /// What to tell the caller when a call was not approved; `None` for
    /// the command line's advice (`--yes`).
    fn refusal_help(&self) -> Option<String> {
        None
    }
}

/// Approves every call (`--yes`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PreApproved;

impl Confirmer for PreApproved {
    fn confirm(&self, _request: &ConfirmRequest<'_>) -> Confirmation {
        Confirmation { approved: true, by: "operator".into(), how: "pre-approved (--yes)".into() }
    }
}

/// Denies every call: there is nobody to ask.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NoTerminal;

impl Confirmer for NoTerminal {
    fn confirm(&self, _request: &ConfirmRequest<'_>) -> Confirmation {
        Confirmation { approved: false, by: "runtime".into(), how: "no terminal to ask on, and no --yes".into() }
    }
}

impl<'r> Call<'r> {
    /// Who confirms this call: its context's confirmer, else the runtime's.
    fn confirmer(&self) -> &'r dyn Confirmer {
        self.context.confirmer.as_deref().unwrap_or(&*self.runtime.options().confirmer)
    }

    /// Step 4: a tool that needs confirmation is approved (or the config
    /// waives it); the answer is recorded, and a refusal ends the call.
    pub(crate) fn confirm(&mut self, plan: &impl Plan, shown_args: &Value) -> Result<(), CallError> {
        let tool = self.tool();
        if !tool.needs_confirmation() {
            return Ok(());
        }
        let answer = self.confirmation(plan, shown_args);
        let payload = ToolConfirmPayload {
            v: PAYLOAD_VERSION,
            tool: tool.id.clone(),
            invocation_id: self.journal.invocation_id,
            approved: answer.approved,
            by: answer.by.clone(),
            how: answer.how.clone(),
            tags: self.journal.tags.clone(),
        };
        self.journal.push(EventKind::ToolConfirm, answer.by.clone(), payload);
        if answer.approved {
            return Ok(());
        }
        let config = &self.runtime.options().config;
        let help = match (self.confirmer().refusal_help(), &config.confirm_required_by) {
            (Some(help), _) => help,
            (None, Some(path)) => format!("pass --yes to approve the call ({} requires confirmation)", path.display()),
            (None, None) => {
                "pass --yes to approve the call, or set security.confirm_external_actions = false".to_string()
            }
        };
        Err(self.journal.refuse(
            CallError::new(
                CallErrorKind::Refused,
                format!("tool `{}` requires confirmation and the call was not approved: {}", tool.id, answer.how),
            )
            .help(help),
        ))
    }

    /// The confirmer's answer, or the config's when it waives confirmation.
    fn confirmation(&self, plan: &impl Plan, shown_args: &Value) -> Confirmation {
        let tool = self.tool();
        let setting = &self.runtime.options().config.confirm_external_actions;
        if !setting.value {
            return Confirmation {
                approved: true,
                by: "config".into(),
                how: format!(
                    "not asked: security.confirm_external_actions = false ({})",
                    setting.source.shown("security")
                ),
            };
        }
        let target = self.journal.scrubber.scrub_string(&plan.target());
        self.confirmer().confirm(&ConfirmRequest {
            tool: &tool.id,
            description: &tool.description,
            arguments: shown_args,
            target: &target,
            invocation_id: self.journal.invocation_id,
        })
    }
}

/// Arguments up to this size (compact JSON) are shown indented.
const PRETTY_ARGUMENTS_BYTES: usize = 2048;
/// Larger arguments are shown as compact JSON cut at this many characters.
const SHOWN_ARGUMENTS_CHARS: usize = 16_384;

/// A call's arguments as a person approving it reads them: indented JSON
/// when small; else compact JSON, cut short with its full size named, so a
/// caller cannot make a prompt of hundreds of megabytes.
pub(crate) fn shown_arguments(arguments: &Value) -> String {
    let compact = arguments.to_string();
    if compact.len() <= PRETTY_ARGUMENTS_BYTES {
        return serde_json::to_string_pretty(arguments).unwrap_or(compact);
    }
    if compact.chars().count() <= SHOWN_ARGUMENTS_CHARS {
        return compact;
    }
    format!("{} ({} bytes in all)", crate::text::ellipsize(&compact, SHOWN_ARGUMENTS_CHARS), compact.len())
}

/// The text of the question, for prompting implementations.
pub(crate) fn prompt_text(request: &ConfirmRequest<'_>) -> String {
    let args = shown_arguments(request.arguments);
    let mut shown_args = String::new();
    for line in args.lines() {
        shown_args.push_str("\n    ");
        shown_args.push_str(line);
    }
    format!(
        "Tool `{}` wants to run: {}\n  target: {}\n  arguments:{shown_args}\nAllow this call?",
        request.tool, request.description, request.target
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prompt_shows_tool_target_and_arguments() {
        let args = json!({"to": "a@b.c"});
        let request = ConfirmRequest {
            tool: "mail.send",
            description: "Sends mail",
            arguments: &args,
            target: "POST https://api.mail.example/send",
            invocation_id: Uuid::nil(),
        };
        let text = prompt_text(&request);
        assert_eq!(
            text,
            "Tool `mail.send` wants to run: Sends mail\n  target: POST https://api.mail.example/send\n  arguments:\n    {\n      \"to\": \"a@b.c\"\n    }\nAllow this call?"
        );
        assert!(PreApproved.confirm(&request).approved);
        // Large arguments are cut short: the prompt stays small.
        let huge = json!({"list": vec![json!([[[[1]]]]); 200_000]});
        let shown = shown_arguments(&huge);
        assert!(shown.len() < 17_000 && !shown.contains('\n'), "{}", shown.len());
        assert!(shown.ends_with(&format!("… ({} bytes in all)", huge.to_string().len())), "{}", &shown[16_000..]);
        assert!(!NoTerminal.confirm(&request).approved);
    }
}
