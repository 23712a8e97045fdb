//! Replay reports, human and JSON.
//!
//! Both renderers are [`ReplaySink`]s. Calls and divergences are written, as
//! they arrive, to two spooled buffers (memory up to a few MiB, then an
//! anonymous temporary file), so a report of any length takes flat memory;
//! [`Report::write_to`] then writes the whole report at once, so a replay that
//! stops on an error prints nothing half-done.
//!
//! The JSON report is one document:
//!
//! ```json
//! {
//!   "mode": "strict", "trace_id": "…", "agent": "…",
//!   "bundle": {"name": "…", "version": "…"}, "new_trace_id": null,
//!   "calls": [{"position", "result_position", "invocation_id", "tool", "attempts", "status", "output", "divergences"}, …],
//!   "divergences": [{"kind", "position", "call_number", "invocation_id", "tool", "message", "details", "changes", "more_changes"}, …],
//!   "summary": {"frames", "calls", "ok", "errors", "diverged", "no_result", "divergences", "by_kind", "exchanges", "exchanges_by_kind"},
//!   "clean": true
//! }
//! ```
//!
//! with one call or divergence per line. Live reports add `recorded` (the
//! recorded outcome) to each call; `output` is then the new outcome. An
//! outcome is `{"result": …}` or `{"error": …}`, with `"content"` beside a
//! result when a bridged MCP server sent content blocks with it.
//!
//! The human report counts exchanges with bridged servers above its result
//! line, when there are any (`Exchanges with bridged servers: 3
//! (prompt.get 1, resource.read 2)`; live, they are `not re-run`).
//!
//! Human reports quote text from the trace and from tools (names, messages,
//! values); control characters in it are escaped
//! ([`crate::text::terminal_safe`]) so they cannot drive the terminal.

use std::io::{BufWriter, Read, Seek, SeekFrom, Write};

use serde_json::{Value, json};
use tempfile::SpooledTempFile;

use crate::event::Outcome;
use crate::replay::diff::{Change, ChangeOp};
use crate::replay::divergence::Divergence;
use crate::replay::replayer::{CallOutput, CallReplay, Mode, ReplayHeader, ReplaySink, Summary};
use crate::text::{ellipsize, plural, terminal_safe};

/// Bytes a spool keeps in memory before moving to a temporary file.
const SPOOL_IN_MEMORY: usize = 4 << 20;
/// Bytes buffered before a spool is written to.
const WRITE_BUFFER: usize = 256 << 10;
/// Characters of an output shown on a human call line.
const SHOWN_OUTPUT: usize = 96;

/// `human` or `json`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReportFormat {
    /// Readable text.
    Human,
    /// One JSON document.
    Json,
}

/// A replay report being built.
pub(crate) struct Report {
    format: ReportFormat,
    header: Option<ReplayHeader>,
    calls: BufWriter<SpooledTempFile>,
    call_count: u64,
    divergences: BufWriter<SpooledTempFile>,
    divergence_count: u64,
    summary: Option<Summary>,
}

impl std::fmt::Debug for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Report").field("format", &self.format).field("calls", &self.call_count).finish()
    }
}

fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn shown(output: Option<&CallOutput>) -> String {
    match output.map(|o| &o.outcome) {
        None => "(not run)".to_string(),
        Some(Outcome::Result(value)) => ellipsize(&compact(value), SHOWN_OUTPUT),
        Some(Outcome::Error(error)) => ellipsize(&format!("error: {}", error.error.message), SHOWN_OUTPUT),
    }
}

/// The indented lines listing `changes` (`changed /path: old → new`,
/// `added …`, `removed …`) and how many more there are; not yet
/// terminal-safe.
pub(crate) fn human_changes(changes: &[Change], more: u64) -> String {
    let mut text = String::new();
    for change in changes {
        let path = if change.path.is_empty() { "(root)" } else { change.path.as_str() };
        let value =
            |v: &Option<Value>| v.as_ref().map(|v| ellipsize(&compact(v), SHOWN_OUTPUT / 2)).unwrap_or_default();
        let line = match change.op {
            ChangeOp::Changed => format!("changed {path}: {} → {}", value(&change.recorded), value(&change.replayed)),
            ChangeOp::Added => format!("added   {path}: {}", value(&change.replayed)),
            ChangeOp::Removed => format!("removed {path}: {}", value(&change.recorded)),
        };
        text.push_str(&format!("            {line}\n"));
    }
    if more > 0 {
        text.push_str(&format!("            … and {more} more changes\n"));
    }
    text
}

impl Report {
    /// An empty report.
    pub(crate) fn new(format: ReportFormat) -> Self {
        Report {
            format,
            header: None,
            calls: BufWriter::with_capacity(WRITE_BUFFER, SpooledTempFile::new(SPOOL_IN_MEMORY)),
            call_count: 0,
            divergences: BufWriter::with_capacity(WRITE_BUFFER, SpooledTempFile::new(SPOOL_IN_MEMORY)),
            divergence_count: 0,
            summary: None,
        }
    }

    fn header_text(&self) -> String {
        let Some(h) = &self.header else { return String::new() };
        let version = h.bundle_version.as_deref().map(|v| format!(" {v}")).unwrap_or_default();
        let mut text = format!(
            "{} replay of trace {} (agent `{}`) against bundle {}{version}",
            if h.mode == Mode::Strict { "Strict" } else { "Live" },
            h.trace_id,
            h.agent,
            h.bundle
        );
        if let Some(new) = h.new_trace_id {
            text.push_str(&format!(", recorded as trace {new}"));
        }
        terminal_safe(&text).into_owned()
    }

    fn header_json(&self) -> Value {
        let Some(h) = &self.header else { return json!({}) };
        json!({
            "mode": h.mode.as_str(),
            "trace_id": h.trace_id,
            "agent": h.agent,
            "bundle": {"name": h.bundle, "version": h.bundle_version},
            "new_trace_id": h.new_trace_id,
        })
    }

    /// `Exchanges with bridged servers: N (kind n, …)` (`N, not re-run`
    /// live), or nothing when the trace has none.
    fn exchanges_text(&self, summary: &Summary) -> Option<String> {
        if summary.exchanges == 0 {
            return None;
        }
        let live = self.header.as_ref().is_some_and(|h| h.mode == Mode::Live);
        let kinds: Vec<String> = summary.exchanges_by_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
        Some(format!(
            "Exchanges with bridged servers: {}{} ({})",
            summary.exchanges,
            if live { ", not re-run" } else { "" },
            kinds.join(", ")
        ))
    }

    fn summary_text(summary: &Summary) -> String {
        let counts = format!(
            "{}, {} ({} ok, {} error, {} diverged, {} without result)",
            plural(summary.frames, "frame"),
            plural(summary.calls, "call"),
            summary.ok,
            summary.errors,
            summary.diverged,
            summary.no_result
        );
        if summary.is_clean() {
            return format!("Result: no divergence in {counts}");
        }
        let kinds: Vec<String> = summary.by_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
        format!("Result: {} ({}) in {counts}", plural(summary.divergences, "divergence"), kinds.join(", "))
    }

    fn human_divergence(d: &Divergence) -> String {
        let at = match (d.position, d.call_number) {
            (Some(p), _) => format!("#{p}"),
            (None, Some(n)) => format!("call {n}"),
            (None, None) => "-".to_string(),
        };
        let mut subject = Vec::new();
        if let Some(tool) = &d.tool {
            subject.push(tool.clone());
        }
        if let Some(id) = d.invocation_id {
            subject.push(format!("invocation {id}"));
        }
        let subject = if subject.is_empty() { String::new() } else { format!("{}: ", subject.join(", ")) };
        let mut text = format!("  {at:<7} {:<17} {subject}{}\n", d.kind.as_str(), d.message);
        for line in &d.details {
            text.push_str(&format!("            {line}\n"));
        }
        text.push_str(&human_changes(&d.changes, d.more_changes));
        terminal_safe(&text).into_owned()
    }

    fn human_call(call: &CallReplay) -> String {
        let at = match call.result_position {
            Some(r) => format!("#{} → #{r}", call.position),
            None => format!("#{}", call.position),
        };
        let mut text =
            format!("  {at:<15} {:<24} {:<9} {}", call.tool, call.status.as_str(), shown(call.output.as_ref()));
        if !call.divergences.is_empty() {
            let kinds: Vec<&str> = call.divergences.iter().map(|k| k.as_str()).collect();
            text.push_str(&format!("  [{}]", kinds.join(", ")));
        }
        text.push('\n');
        terminal_safe(&text).into_owned()
    }

    fn json_call(&self, call: &CallReplay) -> Value {
        let mut entry = json!({
            "position": call.position,
            "result_position": call.result_position,
            "invocation_id": call.invocation_id,
            "tool": call.tool,
            "attempts": call.attempts,
            "status": call.status.as_str(),
            "output": call.output.as_ref().map(CallOutput::to_json),
            "divergences": call.divergences.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
        });
        if self.header.as_ref().is_some_and(|h| h.mode == Mode::Live) {
            entry["recorded"] = call.recorded.as_ref().map(CallOutput::to_json).unwrap_or(Value::Null);
        }
        entry
    }

    /// Writes the finished report to `out`.
    pub(crate) fn write_to(mut self, out: &mut dyn Write) -> std::io::Result<()> {
        let summary = self.summary.take().unwrap_or_default();
        match self.format {
            ReportFormat::Human => {
                writeln!(out, "{}", self.header_text())?;
                writeln!(out)?;
                if self.call_count == 0 {
                    writeln!(out, "Calls: none")?;
                } else {
                    writeln!(out, "Calls:")?;
                    copy_spool(&mut self.calls, out)?;
                }
                writeln!(out)?;
                if self.divergence_count == 0 {
                    writeln!(out, "Divergences: none")?;
                } else {
                    writeln!(out, "Divergences:")?;
                    copy_spool(&mut self.divergences, out)?;
                }
                writeln!(out)?;
                if let Some(exchanges) = self.exchanges_text(&summary) {
                    writeln!(out, "{exchanges}")?;
                }
                writeln!(out, "{}", Self::summary_text(&summary))?;
            }
            ReportFormat::Json => {
                let header = self.header_json();
                writeln!(out, "{{")?;
                if let Value::Object(map) = &header {
                    for (key, value) in map {
                        writeln!(out, "  {}: {},", compact(&Value::String(key.clone())), compact(value))?;
                    }
                }
                write!(out, "  \"calls\": [")?;
                copy_spool(&mut self.calls, out)?;
                writeln!(out, "{}],", if self.call_count == 0 { "" } else { "\n  " })?;
                write!(out, "  \"divergences\": [")?;
                copy_spool(&mut self.divergences, out)?;
                writeln!(out, "{}],", if self.divergence_count == 0 { "" } else { "\n  " })?;
                let summary_json = serde_json::to_value(&summary).unwrap_or(Value::Null);
                writeln!(out, "  \"summary\": {},", compact(&summary_json))?;
                writeln!(out, "  \"clean\": {}", summary.is_clean())?;
                writeln!(out, "}}")?;
            }
        }
        out.flush()
    }
}

fn copy_spool(spool: &mut BufWriter<SpooledTempFile>, out: &mut dyn Write) -> std::io::Result<()> {
    spool.flush()?;
    let spool = spool.get_mut();
    spool.seek(SeekFrom::Start(0))?;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = spool.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        out.write_all(&buf[..n])?;
    }
}

impl ReplaySink for Report {
    fn start(&mut self, header: &ReplayHeader) -> std::io::Result<()> {
        self.header = Some(header.clone());
        Ok(())
    }

    fn call(&mut self, call: &CallReplay) -> std::io::Result<()> {
        let text = match self.format {
            ReportFormat::Human => Self::human_call(call),
            ReportFormat::Json => {
                let separator = if self.call_count == 0 { "\n    " } else { ",\n    " };
                format!("{separator}{}", compact(&self.json_call(call)))
            }
        };
        self.call_count += 1;
        self.calls.write_all(text.as_bytes())
    }

    fn divergence(&mut self, divergence: &Divergence) -> std::io::Result<()> {
        let text = match self.format {
            ReportFormat::Human => Self::human_divergence(divergence),
            ReportFormat::Json => {
                let separator = if self.divergence_count == 0 { "\n    " } else { ",\n    " };
                format!("{separator}{}", compact(&serde_json::to_value(divergence).unwrap_or(Value::Null)))
            }
        };
        self.divergence_count += 1;
        self.divergences.write_all(text.as_bytes())
    }

    fn finish(&mut self, summary: &Summary) -> std::io::Result<()> {
        self.summary = Some(summary.clone());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::replayer::CallStatus;
    use uuid::Uuid;

    fn header(mode: Mode) -> ReplayHeader {
        ReplayHeader {
            mode,
            trace_id: Uuid::nil(),
            agent: "desk".into(),
            bundle: "desk".into(),
            bundle_version: None,
            new_trace_id: None,
        }
    }

    /// A summary of a trace with `exchanges` exchanges: `resource.read`
    /// ones, and one `prompt.get`.
    fn summary(exchanges: u64) -> Summary {
        let mut summary = Summary { frames: exchanges + 2, calls: 1, ok: 1, ..Summary::default() };
        if exchanges > 0 {
            summary.exchanges = exchanges;
            summary.exchanges_by_kind = [("prompt.get", 1), ("resource.read", exchanges - 1)].into_iter().collect();
        }
        summary
    }

    /// The report of one call, recorded with content blocks.
    fn rendered(format: ReportFormat, mode: Mode, summary: &Summary) -> String {
        let output = CallOutput {
            outcome: Outcome::Result(json!({"ok": true})),
            content: Some(vec![json!({"type": "text", "text": "done"})]),
            annotations: Vec::new(),
        };
        let call = CallReplay {
            position: 1,
            result_position: Some(2),
            invocation_id: Uuid::nil(),
            tool: "shot".into(),
            attempts: 1,
            status: CallStatus::Ok,
            recorded: Some(output.clone()),
            output: Some(output),
            divergences: vec![],
        };
        let mut report = Report::new(format);
        report.start(&header(mode)).unwrap();
        report.call(&call).unwrap();
        report.finish(summary).unwrap();
        let mut out = Vec::new();
        report.write_to(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn exchanges_are_counted_above_the_result_line() {
        let strict = rendered(ReportFormat::Human, Mode::Strict, &summary(3));
        assert!(strict.ends_with(
            "Divergences: none\n\nExchanges with bridged servers: 3 (prompt.get 1, resource.read 2)\n\
             Result: no divergence in 5 frames, 1 call (1 ok, 0 error, 0 diverged, 0 without result)\n"
        ));
        let live = rendered(ReportFormat::Human, Mode::Live, &summary(2));
        assert!(live.contains("\nExchanges with bridged servers: 2, not re-run (prompt.get 1, resource.read 1)\n"));
        assert!(!rendered(ReportFormat::Human, Mode::Strict, &summary(0)).contains("Exchanges"));
        let json: Value = serde_json::from_str(&rendered(ReportFormat::Json, Mode::Strict, &summary(3))).unwrap();
        assert_eq!(json["summary"]["exchanges"], 3);
        assert_eq!(json["summary"]["exchanges_by_kind"], json!({"prompt.get": 1, "resource.read": 2}));
        let none: Value = serde_json::from_str(&rendered(ReportFormat::Json, Mode::Strict, &summary(0))).unwrap();
        assert_eq!(
            (none["summary"]["exchanges"].clone(), none["summary"]["exchanges_by_kind"].clone()),
            (json!(0), json!({}))
        );
    }

    #[test]
    fn a_call_output_carries_its_content_blocks() {
        let content = json!([{"type": "text", "text": "done"}]);
        let strict: Value = serde_json::from_str(&rendered(ReportFormat::Json, Mode::Strict, &summary(0))).unwrap();
        assert_eq!(strict["calls"][0]["output"], json!({"result": {"ok": true}, "content": content}));
        assert!(strict["calls"][0].get("recorded").is_none());
        let live: Value = serde_json::from_str(&rendered(ReportFormat::Json, Mode::Live, &summary(0))).unwrap();
        assert_eq!(live["calls"][0]["recorded"]["content"], content);
        assert_eq!(live["calls"][0]["output"]["content"], content);
    }
}
