//! rustc-style output: the source line, a marker under the offending value,
//! and the hint.

use std::ops::Range;

use codespan_reporting::diagnostic::{Diagnostic, Label, Severity as CsSeverity};
use codespan_reporting::files::{Files, SimpleFiles};
use codespan_reporting::term::{self, Config, Styles, StylesWriter, termcolor};

use crate::bundle::diag::Severity;
use crate::lint::render::excerpt::Excerpt;
use crate::lint::{BundleReport, Located};
use crate::text::terminal_safe_line;

/// Renders every finding of every report.
pub(crate) fn render(reports: &[BundleReport], color: bool) -> String {
    let mut out = String::new();
    for report in reports {
        render_report(report, color, &mut out);
    }
    out
}

fn render_report(report: &BundleReport, color: bool, out: &mut String) {
    let mut files = SimpleFiles::new();
    let ids: Vec<(std::path::PathBuf, usize)> = report
        .bundle
        .sources
        .values()
        .map(|s| {
            (
                s.path().to_path_buf(),
                files.add(terminal_safe_line(&s.path().display().to_string()).into_owned(), s.text()),
            )
        })
        .collect();
    for located in &report.findings {
        let file_id = ids.iter().find(|(p, _)| *p == located.finding.file).map(|(_, id)| *id);
        let rendered = match (file_id, &located.span) {
            (Some(id), Some(span)) => {
                let file = files.get(id).ok();
                match file.and_then(|f| Excerpt::cut(f.name(), f.source(), span, located.position.line)) {
                    Some((excerpt, span)) => emit(&excerpt, (), span, located, color),
                    None => emit(&files, id, span.clone(), located, color),
                }
            }
            _ => None,
        };
        out.push_str(&rendered.unwrap_or_else(|| plain(located, color)));
    }
}

/// One finding quoting `span` of `file`, or `None` if codespan cannot render it.
fn emit<'f, F: Files<'f>>(
    files: &'f F,
    file: F::FileId,
    span: Range<usize>,
    located: &Located,
    color: bool,
) -> Option<String> {
    let diagnostic = diagnostic(located).with_labels(vec![Label::primary(file, span)]);
    let config = Config::default();
    if color {
        let mut buffer = termcolor::Buffer::ansi();
        let styles = Styles::default();
        let mut writer = StylesWriter::new(&mut buffer, &styles);
        term::emit_to_write_style(&mut writer, &config, files, &diagnostic).ok()?;
        Some(String::from_utf8_lossy(buffer.as_slice()).into_owned())
    } else {
        term::emit_into_string(&config, files, &diagnostic).ok()
    }
}

fn diagnostic<Id>(located: &Located) -> Diagnostic<Id> {
    let f = &located.finding;
    let severity = match f.severity {
        Severity::Error => CsSeverity::Error,
        Severity::Warning => CsSeverity::Warning,
        Severity::Note => CsSeverity::Note,
    };
    let mut notes = Vec::new();
    if let Some(help) = &f.help {
        notes.push(format!("help: {}", terminal_safe_line(help)));
    }
    Diagnostic::new(severity).with_code(f.code.as_str()).with_message(terminal_safe_line(&f.message)).with_notes(notes)
}

/// A finding without a source line to quote (a whole file, an unreadable one).
fn plain(located: &Located, color: bool) -> String {
    let f = &located.finding;
    let (sev, blue, bold, reset) = match (color, f.severity) {
        (false, _) => ("", "", "", ""),
        (true, Severity::Error) => ("\x1b[1;31m", "\x1b[1;34m", "\x1b[1m", "\x1b[0m"),
        (true, Severity::Warning) => ("\x1b[1;33m", "\x1b[1;34m", "\x1b[1m", "\x1b[0m"),
        (true, Severity::Note) => ("\x1b[1;32m", "\x1b[1;34m", "\x1b[1m", "\x1b[0m"),
    };
    let mut text = format!(
        "{sev}{}[{}]{reset}{bold}: {}{reset}\n  {blue}┌─{reset} {}\n",
        f.severity.as_str(),
        f.code,
        terminal_safe_line(&f.message),
        terminal_safe_line(&f.file.display().to_string())
    );
    if let Some(help) = &f.help {
        text.push_str(&format!("  {blue}={reset} help: {}\n", terminal_safe_line(help)));
    }
    text.push('\n');
    text
}
