//! `rlp serve`: a bundle's tools over the Model Context Protocol, with the
//! runtime in the path (docs/serve.md).
//!
//! The one async module of rlp: a tokio runtime lives here, the MCP
//! protocol is the official Rust SDK's (`rmcp`), and every `tools/call`
//! runs the synchronous runtime pipeline on a blocking thread
//! ([`calls`]), so trust, capabilities, validation, secrets,
//! confirmation, questions, options, budgets, transports and recording are
//! exactly those of `rlp tools call`. Frames of concurrent calls are group
//! committed ([`crate::ledger::group`]).
//!
//! - [`handler`]: `tools/list` and `tools/call`; traces per session or per
//!   `_meta` `dev.runloop/trace_id`;
//! - the tool definitions and the search of `--expose core` are
//!   [`crate::discovery`]'s;
//! - [`calls`]: following a call, its outcome as MCP, progress;
//! - [`asking`]: confirmation and questions by elicitation, or by
//!   `InputRequiredResult` round trips ([`parked`]);
//! - [`http`]: Streamable HTTP with rlp's own token and `Origin` checks;
//! - [`inbound`]: the checks of one incoming message (fuzzed).

mod asking;
mod bridged;
mod calls;
pub mod handler;
pub mod http;
pub mod inbound;
mod logging;
mod parked;
mod tasks;

use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::discovery::Expose;
use crate::runtime::Runtime;
use crate::serve::handler::{Handler, Shared};
pub use crate::serve::http::ENDPOINT;

/// Largest incoming message: an HTTP request body (413 beyond), or one
/// line over stdio (dropped unanswered, the session goes on).
pub const MAX_MESSAGE_BYTES: usize = 4 << 20;

/// Where the server listens.
#[derive(Debug)]
pub enum Listen {
    /// JSON-RPC over standard input and output.
    Stdio,
    /// Streamable HTTP on a bound listener, with an optional bearer token.
    Http {
        /// The bound listener.
        listener: std::net::TcpListener,
        /// The token every request must carry.
        token: Option<String>,
        /// Most sessions held at once.
        max_sessions: usize,
    },
}

/// How a server runs.
#[derive(Debug)]
pub struct ServeOptions {
    /// Where it listens.
    pub listen: Listen,
    /// `--yes`: approve calls that need confirmation without asking.
    pub yes: bool,
    /// Most calls running at once.
    pub max_calls: usize,
    /// Which tools `tools/list` offers.
    pub expose: Expose,
    /// `--activate` (with [`Expose::Core`]): a discoverable tool joins a
    /// session's `tools/list` once described, and is called by name only then.
    pub activate: bool,
    /// The trace of calls that name none and belong to no session.
    pub run_trace: Uuid,
    /// `--task-after`: how long a call of a client that takes tasks
    /// (2026-07-28 extension) is answered in before it goes on as a task.
    pub task_after: std::time::Duration,
}

/// Serves `runtime`'s tools until the client goes away (stdio) or the
/// process is stopped (HTTP).
pub fn serve(runtime: Runtime, options: ServeOptions) -> std::io::Result<()> {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("rlp-serve")
        .max_blocking_threads(options.max_calls.max(1) + 4)
        .build()?;
    tokio.block_on(async move {
        let shared = Arc::new(
            Shared::new(Arc::new(runtime), &options)
                .map_err(|e| std::io::Error::other(format!("cannot list the tools: {e}")))?,
        );
        bridged::notices::start(&shared);
        match options.listen {
            Listen::Stdio => {
                let input = tasks::legacy::normalized_input(tokio::io::stdin(), MAX_MESSAGE_BYTES);
                #[expect(clippy::disallowed_methods, reason = "serving over stdio: the transport owns stdout")]
                let output = tokio::io::stdout();
                let stdio = tasks::legacy::Advertised(
                    AsyncRwTransport::new_server(input, output).with_max_line_length(MAX_MESSAGE_BYTES),
                );
                let service = match Handler::in_run_trace(shared).serve(stdio).await {
                    Ok(service) => service,
                    // The client went away before it began: nothing to serve.
                    Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
                    Err(e) => return Err(std::io::Error::other(format!("the MCP session did not start: {e}"))),
                };
                service.waiting().await.map_err(|e| std::io::Error::other(format!("the MCP session failed: {e}")))?;
                Ok(())
            }
            Listen::Http { listener, token, max_sessions } => {
                let stop = CancellationToken::new();
                http::serve(shared, http::HttpSettings { listener, token, max_sessions }, stop).await
            }
        }
    })
}
