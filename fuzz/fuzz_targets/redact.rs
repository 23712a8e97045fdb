//! Fuzzes the redaction of an export (`rlp trace export --redact`): the
//! first line holds `--redact` values separated by spaces (those that do
//! not read are skipped, as the command refuses them), every other line a
//! frame payload, of kind `tool.call`, `tool.result` and `tool.hook` in
//! turn. Whatever the payloads hold, both passes finish without a panic,
//! every payload written is JSON, and the same input redacts to the same
//! text again.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rlp::ledger::redact::{Collector, Rule};

const KINDS: [&str; 3] = ["tool.call", "tool.result", "tool.hook"];

/// The redacted payloads (`None`: unchanged), or why the values cannot be
/// searched for.
fn redact(rules: &[Rule], payloads: &[&str]) -> Result<Vec<Option<String>>, String> {
    let mut collector = Collector::new(rules);
    for (i, payload) in payloads.iter().enumerate() {
        if collector.frame("agent", KINDS[i % 3], payload).is_err() {
            return Ok(Vec::new());
        }
    }
    let mut scrubber = collector.into_scrubber()?;
    let mut out = Vec::new();
    for (i, payload) in payloads.iter().enumerate() {
        out.push(scrubber.redact("agent", KINDS[i % 3], payload).expect("a payload read in the first pass reads again"));
    }
    Ok(out)
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut lines = text.lines();
    let rules: Vec<Rule> = lines.next().unwrap_or("").split(' ').filter_map(|t| Rule::parse(t).ok()).collect();
    let payloads: Vec<&str> = lines.collect();
    let once = redact(&rules, &payloads);
    if let Ok(written) = &once {
        for payload in written.iter().flatten() {
            assert!(serde_json::from_str::<serde_json::Value>(payload).is_ok(), "not JSON: {payload}");
        }
    }
    assert_eq!(once, redact(&rules, &payloads), "the same input redacted differently");
});
