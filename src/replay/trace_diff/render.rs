//! The `rlp trace diff` reports, human and JSON, written in one go.
//!
//! The JSON report is one document, one divergence per line:
//!
//! ```json
//! {
//!   "baseline": {"input", "trace_id", "agent", "frames", "calls", "exchanges"},
//!   "candidate": {"input", "trace_id", "agent", "frames", "calls", "exchanges"},
//!   "calls": {"baseline": N, "candidate": M},
//!   "exchanges": {"baseline": N, "candidate": M},
//!   "alignment": "exact",
//!   "divergences": [{"kind", "tool", "baseline", "candidate", "message", "changes", "more_changes"}, …],
//!   "summary": {"divergences", "by_kind"},
//!   "clean": false
//! }
//! ```
//!
//! `baseline`/`candidate` of a divergence are `{"call", "position",
//! "result_position", "invocation_id"}` or `null`; a change is `{"op",
//! "path", "baseline", "candidate"}` (values absent when added or removed).
//! A divergence of exchanges has `"tool": null`, an `"exchange"` member
//! `{"kind", "server", "method"}`, and `baseline`/`candidate` `{"exchange",
//! "position"}`. Text from the traces is made terminal-safe in the human
//! report.

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::{Value, json};

use crate::replay::diff::Change;
use crate::replay::report::human_changes;
use crate::replay::trace_diff::digest::{CallDigest, ExchangeDigest, OutcomeDigest, Side};
use crate::replay::trace_diff::{DiffKind, Found, TraceDiff};
use crate::text::{plural, terminal_safe};

/// Calls of `side` as `call N (#P → #R, invocation I)`.
fn call_text(side: &Side, index: usize) -> String {
    let call = &side.calls[index];
    let frames = match call.result_position {
        Some(r) => format!("#{} → #{r}", call.position),
        None => format!("#{}", call.position),
    };
    format!("call {} ({frames}, invocation {})", index + 1, call.invocation_id)
}

/// Exchange `index` of `side` as `exchange N (#P, method)`.
fn exchange_text(side: &Side, index: usize) -> String {
    let exchange = &side.exchanges[index];
    format!("exchange {} (#{}, {})", index + 1, exchange.position, side.name(exchange.method))
}

/// Call or exchange `index` of `side` (by the kind of `d`) as text.
fn item_text(d: &Found, side: &Side, index: usize) -> String {
    if d.kind.is_exchange() { exchange_text(side, index) } else { call_text(side, index) }
}

fn outcome_text(side: &Side, call: &CallDigest) -> String {
    match call.outcome {
        OutcomeDigest::Result(_) => "succeeded".into(),
        OutcomeDigest::Error(kind) if side.name(kind).is_empty() => "failed".into(),
        OutcomeDigest::Error(kind) => format!("failed (`{}`)", side.name(kind)),
        OutcomeDigest::NoResult => "has no result".into(),
    }
}

impl TraceDiff {
    /// The tool of a divergence of calls (the baseline's for pairs); `None`
    /// for one of exchanges.
    fn tool(&self, d: &Found) -> Option<&str> {
        if d.kind.is_exchange() {
            return None;
        }
        match (d.baseline, d.candidate) {
            (Some(i), _) => Some(self.baseline.name(self.baseline.calls[i].tool)),
            (None, Some(j)) => Some(self.candidate.name(self.candidate.calls[j].tool)),
            (None, None) => Some(""),
        }
    }

    /// The exchange of a divergence of exchanges (the baseline's for
    /// pairs), with the side it is from; `None` for one of calls.
    fn exchange(&self, d: &Found) -> Option<(&Side, &ExchangeDigest)> {
        if !d.kind.is_exchange() {
            return None;
        }
        match (d.baseline, d.candidate) {
            (Some(i), _) => Some((&self.baseline, &self.baseline.exchanges[i])),
            (None, Some(j)) => Some((&self.candidate, &self.candidate.exchanges[j])),
            (None, None) => None,
        }
    }

    /// What a divergence is about: the tool, or the exchange's kind and
    /// server (`resource.read (files)`).
    fn subject(&self, d: &Found) -> String {
        match self.exchange(d) {
            Some((side, x)) => format!("{} ({})", x.kind, side.name(x.server)),
            None => self.tool(d).unwrap_or_default().to_string(),
        }
    }

    fn message(&self, d: &Found) -> String {
        let (b, c) = (d.baseline.map(|i| i + 1).unwrap_or(0), d.candidate.map(|j| j + 1).unwrap_or(0));
        let changes = plural(d.changes.len() as u64 + d.more_changes, "change");
        match d.kind {
            DiffKind::ExtraCall => format!("candidate call {c} is not in the baseline"),
            DiffKind::UnusedRecording => format!("baseline call {b} is not made by the candidate"),
            DiffKind::OrderDivergence => format!("baseline call {b} is made as candidate call {c}, in another order"),
            DiffKind::ArgsMismatch => {
                format!("baseline call {b} and candidate call {c} differ in arguments ({changes})")
            }
            DiffKind::ResultChanged => format!("baseline call {b} and candidate call {c} differ in result ({changes})"),
            DiffKind::ExtraExchange => format!("candidate exchange {c} is not in the baseline"),
            DiffKind::MissingExchange => format!("baseline exchange {b} is not in the candidate"),
            DiffKind::ResponseChanged => {
                format!("baseline exchange {b} and candidate exchange {c} differ in response ({changes})")
            }
            DiffKind::OutcomeChanged => {
                let (Some(i), Some(j)) = (d.baseline, d.candidate) else { return String::new() };
                format!(
                    "baseline call {b} {}, candidate call {c} {}",
                    outcome_text(&self.baseline, &self.baseline.calls[i]),
                    outcome_text(&self.candidate, &self.candidate.calls[j])
                )
            }
        }
    }

    fn by_kind(&self) -> BTreeMap<&'static str, u64> {
        let mut counts = BTreeMap::new();
        for d in &self.divergences {
            *counts.entry(d.kind.as_str()).or_insert(0) += 1;
        }
        counts
    }

    fn human_divergence(&self, d: &Found) -> String {
        let mut text = format!("  {:<17} {}: {}\n", d.kind.as_str(), self.subject(d), self.message(d));
        if let Some(i) = d.baseline {
            text.push_str(&format!("            baseline:  {}\n", item_text(d, &self.baseline, i)));
        }
        if let Some(j) = d.candidate {
            text.push_str(&format!("            candidate: {}\n", item_text(d, &self.candidate, j)));
        }
        text.push_str(&human_changes(&d.changes, d.more_changes));
        terminal_safe(&text).into_owned()
    }

    fn human_side(side: &Side) -> String {
        let mut text = format!(
            "{} (trace {}, agent `{}`): {}, {}",
            side.label,
            side.trace_id,
            side.agent,
            plural(side.frames, "frame"),
            plural(side.calls.len() as u64, "call")
        );
        if !side.exchanges.is_empty() {
            text.push_str(&format!(", {} with bridged servers", plural(side.exchanges.len() as u64, "exchange")));
        }
        terminal_safe(&text).into_owned()
    }

    /// Writes the human report.
    pub(crate) fn write_human(&self, out: &mut dyn Write) -> std::io::Result<()> {
        writeln!(out, "Baseline:  {}", Self::human_side(&self.baseline))?;
        writeln!(out, "Candidate: {}", Self::human_side(&self.candidate))?;
        if self.greedy {
            writeln!(
                out,
                "Alignment: greedy (the tool or exchange sequences differ in more than {} places; they were paired by \
                 position)",
                super::align::MAX_EDITS
            )?;
        }
        writeln!(out)?;
        if self.divergences.is_empty() {
            writeln!(out, "Divergences: none")?;
        } else {
            writeln!(out, "Divergences:")?;
            for d in &self.divergences {
                out.write_all(self.human_divergence(d).as_bytes())?;
            }
        }
        writeln!(out)?;
        let calls = format!(
            "{} and {}",
            plural(self.baseline.calls.len() as u64, "baseline call"),
            plural(self.candidate.calls.len() as u64, "candidate call")
        );
        if self.is_clean() {
            writeln!(out, "Result: no divergence between {calls}")?;
        } else {
            let kinds: Vec<String> = self.by_kind().iter().map(|(k, n)| format!("{k} {n}")).collect();
            writeln!(
                out,
                "Result: {} ({}) between {calls}",
                plural(self.divergences.len() as u64, "divergence"),
                kinds.join(", ")
            )?;
        }
        out.flush()
    }

    fn json_side(side: &Side) -> Value {
        json!({
            "input": side.label,
            "trace_id": side.trace_id,
            "agent": side.agent,
            "frames": side.frames,
            "calls": side.calls.len(),
            "exchanges": side.exchanges.len(),
        })
    }

    /// The call or exchange `index` of `side`, by the kind of `d`.
    fn json_item(d: &Found, side: &Side, index: Option<usize>) -> Value {
        match index {
            Some(index) if d.kind.is_exchange() => {
                json!({"exchange": index + 1, "position": side.exchanges[index].position})
            }
            index => Self::json_call(side, index),
        }
    }

    fn json_call(side: &Side, index: Option<usize>) -> Value {
        let Some(index) = index else { return Value::Null };
        let call = &side.calls[index];
        json!({
            "call": index + 1,
            "position": call.position,
            "result_position": call.result_position,
            "invocation_id": call.invocation_id,
        })
    }

    fn json_change(change: &Change) -> Value {
        let mut entry = json!({"op": change.op.as_str(), "path": change.path});
        if let Some(value) = &change.recorded {
            entry["baseline"] = value.clone();
        }
        if let Some(value) = &change.replayed {
            entry["candidate"] = value.clone();
        }
        entry
    }

    /// One divergence; one of exchanges names its exchange after `tool`.
    fn json_divergence(&self, d: &Found) -> Value {
        let mut entry = json!({"kind": d.kind.as_str(), "tool": self.tool(d)});
        if let Some((side, x)) = self.exchange(d) {
            entry["exchange"] =
                json!({"kind": x.kind.as_str(), "server": side.name(x.server), "method": side.name(x.method)});
        }
        entry["baseline"] = Self::json_item(d, &self.baseline, d.baseline);
        entry["candidate"] = Self::json_item(d, &self.candidate, d.candidate);
        entry["message"] = Value::String(self.message(d));
        entry["changes"] = d.changes.iter().map(Self::json_change).collect();
        entry["more_changes"] = json!(d.more_changes);
        entry
    }

    /// Writes the JSON report.
    pub(crate) fn write_json(&self, out: &mut dyn Write) -> std::io::Result<()> {
        writeln!(out, "{{")?;
        writeln!(out, "  \"baseline\": {},", Self::json_side(&self.baseline))?;
        writeln!(out, "  \"candidate\": {},", Self::json_side(&self.candidate))?;
        let calls = json!({"baseline": self.baseline.calls.len(), "candidate": self.candidate.calls.len()});
        writeln!(out, "  \"calls\": {calls},")?;
        let exchanges = json!({"baseline": self.baseline.exchanges.len(), "candidate": self.candidate.exchanges.len()});
        writeln!(out, "  \"exchanges\": {exchanges},")?;
        writeln!(out, "  \"alignment\": {},", json!(if self.greedy { "greedy" } else { "exact" }))?;
        write!(out, "  \"divergences\": [")?;
        for (n, d) in self.divergences.iter().enumerate() {
            write!(out, "{}{}", if n == 0 { "\n    " } else { ",\n    " }, self.json_divergence(d))?;
        }
        writeln!(out, "{}],", if self.divergences.is_empty() { "" } else { "\n  " })?;
        let summary = json!({"divergences": self.divergences.len(), "by_kind": self.by_kind()});
        writeln!(out, "  \"summary\": {summary},")?;
        writeln!(out, "  \"clean\": {}", self.is_clean())?;
        writeln!(out, "}}")?;
        out.flush()
    }
}
