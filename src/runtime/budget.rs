//! Budgets (docs/runtime.md "Budgets"): `budget.tokens` and `budget.usd`
//! are ceilings per trace on what a tool has consumed, as its result
//! frames record (`usage`). A call to a tool that has reached a ceiling in
//! its trace is refused before it runs.

use crate::bundle::tools::Tool;
use crate::event::{Decision, Usage};
use crate::runtime::call::Call;
use crate::runtime::error::{CallError, CallErrorKind};

/// The `capability` of the audit frame of a token budget decision.
pub(crate) const TOKENS_AUDIT: &str = "budget.tokens";
/// The `capability` of the audit frame of a cost budget decision.
pub(crate) const USD_AUDIT: &str = "budget.usd";

/// One ceiling and what is used of it, as numbers and as shown.
struct Ceiling {
    name: &'static str,
    spent: bool,
    used: String,
    limit: String,
}

fn ceilings(tool: &Tool, used: Usage) -> Vec<Ceiling> {
    let mut ceilings = Vec::new();
    if let Some(limit) = tool.budget_tokens {
        let used = used.tokens.unwrap_or(0);
        ceilings.push(Ceiling {
            name: TOKENS_AUDIT,
            spent: used >= limit,
            used: used.to_string(),
            limit: limit.to_string(),
        });
    }
    if let Some(limit) = tool.budget_usd {
        let used = used.usd.unwrap_or(0.0);
        ceilings.push(Ceiling {
            name: USD_AUDIT,
            spent: used >= limit,
            used: format!("{used}"),
            limit: format!("{limit}"),
        });
    }
    ceilings
}

impl Call<'_> {
    /// Step 2: the tool's budgets in this trace. Each ceiling's decision is
    /// an audit frame; a spent one refuses the call (exit 3). A new trace
    /// has used nothing; a ledger that cannot say what was used refuses
    /// the call too (a budget never fails open).
    pub(crate) fn check_budget(&mut self) -> Result<(), CallError> {
        let tool = self.tool();
        if tool.budget_tokens.is_none() && tool.budget_usd.is_none() {
            return Ok(());
        }
        let journal = &mut self.journal;
        let used = if self.request.trace_id.is_none() {
            Usage::default()
        } else {
            self.runtime.options().recorder.usage(journal.trace_id, &tool.id).map_err(|e| {
                journal.refuse(
                    CallError::new(
                        CallErrorKind::Recording,
                        format!("cannot read the usage of `{}` in its trace: {e}", tool.id),
                    )
                    .help("check that the ledger ($RUNLOOP_HOME/pog/events.sqlite) is readable")
                    .caused_by(e),
                )
            })?
        };
        let mut spent = Vec::new();
        for ceiling in ceilings(tool, used) {
            let reason = format!("{} of {} used in trace {}", ceiling.used, ceiling.limit, journal.trace_id);
            let decision = if ceiling.spent { Decision::Deny } else { Decision::Allow };
            journal.audit_named(ceiling.name, decision, &reason);
            if ceiling.spent {
                spent.push(format!("{} ({} of {} used)", ceiling.name, ceiling.used, ceiling.limit));
            }
        }
        if spent.is_empty() {
            return Ok(());
        }
        Err(journal.refuse(
            CallError::new(
                CallErrorKind::Refused,
                format!(
                    "budget spent: tool `{}` has reached its {} in trace {}",
                    tool.id,
                    spent.join(" and "),
                    journal.trace_id
                ),
            )
            .help("start a new trace (leave out --trace-id), or raise the budget in tools.json"),
        ))
    }
}
