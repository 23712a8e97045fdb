//! What the integration tests share, one module per job: the test folder rlp
//! runs in, bundles written by hand, the ledger read back, process output,
//! processes and signals, files, an HTTP server, an OpenTelemetry
//! collector's receiver, a pseudo-terminal, the command tree, whole-output
//! snapshots, and the MCP servers the bridge tests run.

pub mod bridge;
pub mod bundle;
pub mod cli;
pub mod files;
pub mod http;
pub mod ledger;
pub mod mcp;
pub mod otlp;
pub mod output;
pub mod postgres;
pub mod process;
pub mod pty;
pub mod registry;
pub mod snapshot;
pub mod testdir;

pub(crate) use snapshot::{rlp_snapshot, text_snapshot};
pub use testdir::{HANG_GUARD, TestDir};
