//! Step 3 of a call: the tool's secrets, each from the runtime's
//! [`crate::secrets::SecretResolver`] and audited with the provider that
//! gave it (or failed to).

use crate::bundle::capability::{Capability, SecretId};
use crate::event::Decision;
use crate::runtime::call::Call;
use crate::runtime::error::{CallError, CallErrorKind};
use crate::secrets::{Resolution, SecretValue};

impl Call<'_> {
    /// Step 3: every secret of the tool, each audited with the provider
    /// that gave it; a missing one, or a provider that fails, refuses the call.
    pub(crate) fn resolve_secrets(&mut self) -> Result<Vec<(SecretId, SecretValue)>, CallError> {
        let tool = self.tool();
        let resolver = &self.runtime.options().secrets;
        let journal = &mut self.journal;
        let mut values = Vec::new();
        let mut missing = Vec::new();
        let mut help = Vec::new();
        let granted = std::mem::take(&mut journal.unresolved_secrets);
        for (_, id) in &tool.secrets {
            let cap = Capability::Secret(id.clone());
            let shown = cap.to_string();
            match resolver.resolve(id) {
                Ok(Resolution::Found { value, provider }) => {
                    let policy = granted.iter().find(|(c, _)| *c == cap).map_or("granted", |(_, reason)| reason);
                    let reason = format!("{policy}; the value came from the `{provider}` provider");
                    journal.audit_provided(&shown, Decision::Allow, &reason, Some(provider));
                    values.push((id.clone(), value));
                }
                Ok(Resolution::Missing { why, how }) => {
                    journal.audit(&cap, Decision::Deny, &format!("the secret is not available ({why})"));
                    missing.push(format!("`{id}` ({why})"));
                    help.push(format!("{how} (secret `{id}`)"));
                }
                Err(e) => {
                    journal.audit_provided(&shown, Decision::Deny, &e.message, Some(e.provider));
                    missing.push(format!("`{id}` ({})", e.message));
                    help.push(e.help);
                }
            }
        }
        if missing.is_empty() {
            return Ok(values);
        }
        Err(journal.refuse(
            CallError::new(
                CallErrorKind::Refused,
                format!("tool `{}` needs secrets that are not available: {}", tool.id, missing.join(", ")),
            )
            .help(format!("{}, then call again", help.join("; "))),
        ))
    }
}
