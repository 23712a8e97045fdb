//! What the integration tests share, one module per job: the sandbox rlp
//! runs in, bundles written by hand, the ledger read back, process output,
//! processes and signals, files, an HTTP server, an OpenTelemetry
//! collector's receiver and a pseudo-terminal.

pub mod bundle;
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
pub mod sandbox;

pub use sandbox::{HANG_GUARD, Sandbox};
