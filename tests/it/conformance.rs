//! The server scenarios of the MCP conformance suite against `rlp serve`
//! over HTTP, through `tests/conformance/run.sh`: the run fails when a
//! scenario that `tests/conformance/baseline.yml` does not list fails, or
//! when a listed one passes. The suite is installed with npm into this test
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
