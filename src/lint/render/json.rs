//! `--format json`: one array of findings.

use serde_json::{Value, json};

use crate::lint::{BundleReport, Located};

/// One finding as the documented JSON object.
pub(crate) fn finding_json(located: &Located) -> Value {
    let f = &located.finding;
    let mut value = json!({
        "code": f.code.as_str(),
        "rule": f.code.name(),
        "severity": f.severity.as_str(),
        "file": f.file.display().to_string(),
        "line": located.position.line,
        "column": located.position.column,
        "message": f.message,
        "help": f.help,
    });
    if let Some(path) = &f.resolved {
        value["resolved"] = json!(format!("registry:{}", path.display()));
    }
    value
}

/// Every finding of every report, as a pretty JSON array.
pub(super) fn render(reports: &[BundleReport]) -> String {
    let all: Vec<Value> = reports.iter().flat_map(|r| r.findings.iter().map(finding_json)).collect();
    let mut text = serde_json::to_string_pretty(&all).expect("JSON values serialize");
    text.push('\n');
    text
}
