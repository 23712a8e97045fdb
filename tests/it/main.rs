//! The integration tests of rlp, in one test binary: each module covers one
//! area end to end with real `rlp` processes on real files.
//!
//! Run one area with `cargo test --test it <area>::`, e.g.
//! `cargo test --test it runtime::`.

// A test binary: its support code is `pub` for the test modules, and tests
// set up real files and processes, and report what they measure, directly.
#![allow(unreachable_pub, clippy::disallowed_methods, clippy::print_stdout, clippy::print_stderr)]

mod support;

mod authoring;
mod batch;
mod bridge;
mod bridge_import;
mod calls;
mod ci_gate;
mod cli;
mod conformance;
mod discovery;
mod first_hour;
mod fleet_ledger;
mod gateway;
mod hooks;
mod io;
mod lint;
mod mcpb;
mod oci;
mod otel;
mod postgres;
mod redact;
mod replay;
mod replay_serve;
mod runtime;
mod sandbox;
mod sandbox_escapes;
mod schemas;
mod seal;
mod secret_providers;
mod secrets;
mod serve;
mod serve_durability;
mod shared_schemas;
mod tasks;
mod tidy;
mod trace_diff;
mod travel;
mod upstream;
