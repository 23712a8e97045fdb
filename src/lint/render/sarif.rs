//! `--format sarif`: SARIF 2.1.0, for code-scanning dashboards.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_encode};
use serde_json::{Value, json};

use crate::bundle::diag::{Code, Severity};
use crate::lint::BundleReport;

/// Bytes kept as they are in an artifact URI: RFC 3986 unreserved characters
/// and the `/` between segments. Everything else — `:` included, which would
/// read as a scheme in a relative reference — is percent-encoded.
const URI_KEPT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~').remove(b'/');

/// `path` as a URI reference (relative when the path is): every byte of a
/// segment outside the unreserved set is percent-encoded, `/` is kept.
fn artifact_uri(path: &Path) -> String {
    percent_encode(path.as_os_str().as_bytes(), URI_KEPT).to_string()
}

/// The SARIF log of every report, as one JSON document.
pub(super) fn render(reports: &[BundleReport]) -> String {
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
                        "artifactLocation": {"uri": artifact_uri(&f.file)},
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
        Severity::Note => "note",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_uris_are_percent_encoded_path_segments() {
        assert_eq!(artifact_uri(Path::new("agents/demo/tools.json")), "agents/demo/tools.json");
        assert_eq!(artifact_uri(Path::new("we,ird:dir\n/s1/tools.json")), "we%2Cird%3Adir%0A/s1/tools.json");
        assert_eq!(artifact_uri(Path::new("a b/%/ü.json")), "a%20b/%25/%C3%BC.json");
    }
}
