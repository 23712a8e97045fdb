//! The server scenarios of the MCP conformance suite against `rlp serve`
//! over HTTP, through `tests/conformance/run.sh`: the run fails when a
//! scenario that `tests/conformance/baseline.yml` does not list fails, or
//! when a listed one passes. And in front of an MCP server, through
//! `tests/conformance/gateway.sh`: every scenario that passes against the
//! server directly passes through `rlp serve`. The suite is installed with npm into this test
//! binary's scratch folder (kept between runs); when npm cannot install it,
//! the test fails and says so.

use std::path::Path;
use std::process::Command;

use crate::support::{files, output};

#[test]
fn server_scenarios_fail_exactly_as_the_baseline_lists() {
    let out = Command::new(files::repo("tests/conformance/run.sh"))
        .arg(env!("CARGO_BIN_EXE_rlp"))
        .env("CONFORMANCE_WORK", Path::new(env!("CARGO_TARGET_TMPDIR")).join("conformance"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the MCP conformance run did not match tests/conformance/baseline.yml:\n{}",
        output::text(&out)
    );
    output::assert_contains(&output::stdout(&out), "Baseline check passed: all failures are expected.");
}

#[test]
fn every_scenario_a_server_passes_passes_through_rlp_serve_in_front_of_it() {
    let out = Command::new(files::repo("tests/conformance/gateway.sh"))
        .arg(env!("CARGO_BIN_EXE_rlp"))
        .env("CONFORMANCE_WORK", Path::new(env!("CARGO_TARGET_TMPDIR")).join("conformance-gateway"))
        .output()
        .unwrap();
    assert!(out.status.success(), "the conformance run through rlp serve lost scenarios:\n{}", output::text(&out));
    let stdout = output::stdout(&out);
    output::assert_contains(&stdout, "Every scenario that passes against the server passes through rlp serve.");
    // Every scenario of the suite (active and pending) passes both ways:
    // tools of every content type, logging, sampling, elicitation forms,
    // resources, templates, subscriptions, prompts and completions.
    output::assert_contains(&stdout, "32 of 32 scenarios pass against the server, 32 through rlp serve.");
    for scenario in [
        "tools-call-image",
        "tools-call-with-logging",
        "tools-call-sampling",
        "elicitation-sep1330-enums",
        "resources-read-binary",
        "resources-subscribe",
        "prompts-get-with-image",
        "completion-complete",
        "json-schema-2020-12",
    ] {
        let line = stdout.lines().find(|l| l.starts_with(scenario)).unwrap_or_default();
        assert_eq!(line.split_whitespace().collect::<Vec<_>>(), [scenario, "✓", "✓"], "{stdout}");
    }
}
