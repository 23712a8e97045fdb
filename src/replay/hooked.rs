//! What the caller saw of a recorded call whose after-call hooks ran: the
//! `tool.hook` frames before its final `tool.result` ([`crate::runtime::hooks`])
//! applied to the result the tool returned, as the runtime applied them.

use crate::event::{HookEffect, Outcome, RecordedError, ToolHookPayload};
use crate::replay::replayer::CallOutput;
use crate::runtime::hooks::withheld_message;

/// The hooks' work on one call, frame by frame.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct HookView {
    hooks: Vec<ToolHookPayload>,
}

impl HookView {
    /// Adds the work of one hook (frames in trace order).
    pub(crate) fn add(&mut self, hook: ToolHookPayload) {
        self.hooks.push(hook);
    }

    /// `recorded`, the tool's outcome, as the caller saw it after the hooks.
    pub(crate) fn apply(self, mut recorded: CallOutput) -> CallOutput {
        if !matches!(recorded.outcome, Outcome::Result(_)) {
            return recorded;
        }
        for hook in self.hooks {
            if hook.effect.withholds() {
                let why = hook.reason.as_deref().unwrap_or_default();
                let message = withheld_message(&hook.tool, &hook.hook, hook.effect, why);
                return CallOutput::bare(Outcome::Error(RecordedError::from_message(message)));
            }
            if hook.effect == HookEffect::FailedPassed {
                continue;
            }
            if let Some(result) = hook.result {
                recorded.outcome = Outcome::Result(result);
            }
            if let Some(content) = hook.content {
                recorded.content = Some(content);
            }
            recorded.annotations.extend(hook.annotations);
        }
        recorded
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use uuid::Uuid;

    use super::*;

    fn hook(name: &str, effect: HookEffect) -> ToolHookPayload {
        ToolHookPayload {
            v: 1,
            invocation_id: Uuid::nil(),
            tool: "mail.read".into(),
            hook: name.into(),
            command: vec!["/bin/h".into()],
            effect,
            result: None,
            content: None,
            annotations: Vec::new(),
            reason: None,
            duration_ms: Some(3),
            tags: Vec::new(),
        }
    }

    #[test]
    fn hooks_apply_in_order_and_a_withholding_one_ends_it() {
        let recorded = CallOutput::bare(Outcome::Result(json!({"to": "ada@example.com"})));
        let mut view = HookView::default();
        view.add(ToolHookPayload { result: Some(json!({"to": "[redacted]"})), ..hook("redact", HookEffect::Replaced) });
        view.add(ToolHookPayload { annotations: vec!["checked".into()], ..hook("audit", HookEffect::Annotated) });
        view.add(ToolHookPayload { reason: Some("down".into()), ..hook("flaky", HookEffect::FailedPassed) });
        let seen = view.clone().apply(recorded.clone());
        assert_eq!(seen.outcome, Outcome::Result(json!({"to": "[redacted]"})));
        assert_eq!(seen.annotations, ["checked"]);

        view.add(ToolHookPayload { reason: Some("card number".into()), ..hook("dlp", HookEffect::Withheld) });
        let Outcome::Error(error) = view.apply(recorded).outcome else { panic!("withheld") };
        assert_eq!(error.error.message, "the result of `mail.read` was withheld by the hook `dlp`: card number");
    }
}
