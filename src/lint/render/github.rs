//! `--format github`: workflow annotation commands, one line per finding.

use crate::lint::BundleReport;

/// Escapes the message part of a workflow command: `%` and every control
/// character (CR and LF as the runner expects, ESC and the rest so they never
/// reach a log viewer raw) are percent-encoded.
fn escape_data(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '%' || c.is_control() {
            out.push_str(&format!("%{:02X}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// Escapes a property value of a workflow command.
fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

/// `::error file=…,line=…,col=…,title=…::message` lines.
pub(super) fn render(reports: &[BundleReport]) -> String {
    let mut out = String::new();
    for located in reports.iter().flat_map(|r| r.findings.iter()) {
        let f = &located.finding;
        let message = match &f.help {
            Some(help) => format!("{} (help: {help})", f.message),
            None => f.message.clone(),
        };
        out.push_str(&format!(
            "::{} file={},line={},col={},title={}::{}\n",
            match f.severity {
                crate::bundle::diag::Severity::Note => "notice",
                severity => severity.as_str(),
            },
            escape_property(&f.file.display().to_string()),
            located.position.line,
            located.position.column,
            escape_property(&format!("{} {}", f.code, f.code.name())),
            escape_data(&message),
        ));
    }
    out
}
