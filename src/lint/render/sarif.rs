//! `--format sarif`: SARIF 2.1.0, for code-scanning dashboards.

use serde_json::{Value, json};

use crate::bundle::diag::{Code, Severity};
use crate::lint::BundleReport;

/// The SARIF log of every report, as one JSON document.
pub fn render(reports: &[BundleReport]) -> String {
    let rules: Vec<Value> = Code::ALL
        .iter()
        .map(|code| {
            json!({
                "id": code.as_str(),
                "name": code.name(),
                "shortDescription": {"text": code.summary()},
                "defaultConfiguration": {"level": level(code.severity())},
                "helpUri": format!("https://github.com/rlp-dev/rlp/blob/main/docs/lint.md#{}", code.as_str().to_lowercase()),
            })
        })
        .collect();
    let results: Vec<Value> = reports
        .iter()
        .flat_map(|r| r.findings.iter())
        .map(|located| {
            let f = &located.finding;
            let index = Code::ALL.iter().position(|c| *c == f.code).expect("every code is in the catalog");
            let text = match &f.help {
                Some(help) => format!("{} (help: {help})", f.message),
                None => f.message.clone(),
            };
            json!({
                "ruleId": f.code.as_str(),
                "ruleIndex": index,
                "level": level(f.severity),
                "message": {"text": text},
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": {"uri": f.file.display().to_string()},
                        "region": {"startLine": located.position.line, "startColumn": located.position.column},
                    }
                }],
            })
        })
        .collect();
    let log = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "rlp",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/rlp-dev/rlp",
                "rules": rules,
            }},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    });
    let mut text = serde_json::to_string_pretty(&log).expect("JSON values serialize");
    text.push('\n');
    text
}

fn level(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}
