//! `rlp serve`: a bundle's tools over the Model Context Protocol.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;

use clap::Args;
use uuid::Uuid;

use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{diagnostic, warning};
use crate::cli::replaying::{self, ReplayFlags};
use crate::cli::runtime_setup::{RuntimeFlags, load_runtime};
use crate::config::tool_list::ToolPattern;
use crate::discovery::{Expose, meta};
use crate::fsutil::{PrivateFileError, read_private};
use crate::runtime::{MAX_CONCURRENT_CALLS, Runtime};
use crate::serve::{ENDPOINT, Listen, ServeOptions};

/// Largest token file read.
const MAX_TOKEN_BYTES: u64 = 4096;
/// Fewest characters a bearer token may have.
const MIN_TOKEN_CHARS: usize = 16;

/// Flags of `rlp serve`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  rlp serve agents/demo                 # over stdio, for an MCP host that starts it
  rlp serve agents/demo --expose core
  rlp serve agents/demo --tools 'demo.*'      # only the tools matching a pattern (repeatable)
  rlp serve agents/demo --http 127.0.0.1:8931
  rlp serve agents/demo --http 0.0.0.0:8931 --token-file /etc/rlp/token
  rlp serve agents/demo --task-after 500      # calls past 0.5 s go on as MCP tasks
  rlp serve agents/demo --replay golden.jsonl --match any-order   # exit 1: no client made the recorded calls

--expose core lists only the tools marked \"discoverability\": \"core\" and three meta-tools,
rlp.search_tools, rlp.describe_tools and rlp.call_tool, that find, show and call the rest
(docs/discovery.md); `rlp tools list --format mcp --expose core` prints that list.

--tools narrows what is exposed to the tools matching one of its patterns (tool ids with `*`
for any run of characters, dots included), within the operator's lists of config.toml
([agents.<agent>.tools] allow/deny) and the policy: a tool outside them is not listed, not
found by search, and a call to it is refused with a cap.audit deny frame naming the list.

Every tools/call runs through the runtime (trust, capabilities, validation, secrets,
confirmation, questions, options, budgets, recording). Calls that need confirmation are
asked over MCP (elicitation) unless --yes approves them. Diagnostics go to stderr: the
server-run trace id, and with --http the address it listens on. See docs/serve.md.

Tool calls may run as MCP tasks, polled by the client: 2025-11-25 clients ask for one
(`task` in tools/call); for 2026-07-28 clients declaring io.modelcontextprotocol/tasks, a
tool marked \"long_running\": true runs as a task at once, any other call once it outlasts
--task-after. Other clients get every result as before (docs/serve.md, \"Tasks\").

--replay TRACE answers every tools/call from a recorded trace (an id, `last`, or a file of
`rlp trace export`) instead of running the tool: no network, no secrets, no side effects.
A call no recording answers gets an error result naming the closest recorded call and the
argument paths that differ, or runs for real with --fallback live. The run is a trace of its
own, each call marked with the recorded call that answered it: `rlp trace diff RECORDED last`
is the regression report (docs/replay.md).

Exit codes: 0 the client went away, 1 the server failed (with --replay: or a call matched no
recording, or a recorded call was never made), 2 bad flags or an invalid bundle.")]
pub struct ServeArgs {
    /// The bundle folder.
    pub bundle: PathBuf,
    /// Serve JSON-RPC over standard input and output (the default).
    #[arg(long, conflicts_with = "http")]
    pub stdio: bool,
    /// Serve Streamable HTTP at /mcp on this address (port 0 picks one; it is printed on stderr).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// A file holding the bearer token HTTP requests must carry (required off loopback).
    #[arg(long, value_name = "FILE", requires = "http")]
    pub token_file: Option<PathBuf>,
    /// Which tools tools/list offers: every exposed tool, or the core ones and the meta-tools
    /// that search, describe and call the rest.
    #[arg(long, value_enum, default_value_t = Expose::All)]
    pub expose: Expose,
    /// With --expose core: a discoverable tool joins a session's tools/list once the session
    /// describes it (rlp.describe_tools), and cannot be called by name before.
    #[arg(long, requires = "expose")]
    pub activate: bool,
    /// Expose only the tools matching one of these patterns (repeatable, or comma-separated):
    /// tool ids with `*` for any run of characters, e.g. 'issues.*'; within config.toml's lists.
    #[arg(long, value_name = "PATTERN", value_delimiter = ',')]
    pub tools: Vec<ToolPattern>,
    /// Approve calls that need confirmation without asking.
    #[arg(long)]
    pub yes: bool,
    /// Most calls running at once (1 to 256; default: cores × 4).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=MAX_CONCURRENT_CALLS as i64))]
    pub max_calls: Option<u16>,
    /// Most MCP sessions held at once over HTTP (2025-11-25 clients); a client that would open
    /// one more gets 503 with Retry-After until one ends or idles out (5 minutes).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_SESSIONS, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_sessions: u16,
    /// Milliseconds a call of a client that takes tasks (2026-07-28 extension) is answered in
    /// before it goes on as a task (0: every call is a task).
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_TASK_AFTER_MS)]
    pub task_after: u64,
    #[command(flatten)]
    pub replay: ReplayFlags,
}

/// `--task-after` unless given: calls that outlast two seconds go on as tasks.
const DEFAULT_TASK_AFTER_MS: u64 = 2000;

/// Most HTTP sessions held at once, unless `--max-sessions` says: about
/// 14 MiB of session state at most.
const DEFAULT_MAX_SESSIONS: u16 = 256;

/// Reads the bearer token: the file's first line, trimmed.
fn read_token(path: &std::path::Path) -> Result<String, CliError> {
    let bytes = read_private(path, MAX_TOKEN_BYTES).map_err(|e| match e {
        PrivateFileError::Shared(mode) => CliError::usage(format!(
            "the token file {} is readable by other users (mode {mode:04o}); refusing to use it",
            path.display()
        ))
        .with_help(format!("run `chmod 600 {}`, and replace the token if others may have read it", path.display())),
        e => CliError::usage(format!("cannot read the token file {}: {e}", path.display()))
            .with_help("write the token on one line of a file only you can read (chmod 600)"),
    })?;
    let text = String::from_utf8(bytes).map_err(|_| {
        CliError::usage(format!("the token file {} is not UTF-8 text", path.display()))
            .with_help("write the token on one line of a file only you can read (chmod 600)")
    })?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.chars().count() < MIN_TOKEN_CHARS || token.chars().any(char::is_control) {
        return Err(CliError::usage(format!(
            "the token in {} is not a usable bearer token (at least {MIN_TOKEN_CHARS} characters, no control characters)",
            path.display()
        ))
        .with_help("generate one, e.g. `head -c 32 /dev/urandom | base64 > token`"));
    }
    Ok(token)
}

/// The token of an HTTP server on `addr`, refusing a non-loopback address
/// without one.
fn token_for(addr: SocketAddr, token_file: Option<&std::path::Path>) -> Result<Option<String>, CliError> {
    let token = token_file.map(read_token).transpose()?;
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(CliError::usage(format!(
            "refusing to serve on {addr} without a token: only loopback addresses are served without one"
        ))
        .with_help("pass --token-file FILE (clients then send `Authorization: Bearer <token>`), or bind 127.0.0.1"));
    }
    Ok(token)
}

/// Binds the HTTP listener and says where it listens.
fn listen(addr: SocketAddr, token: Option<String>, max_sessions: u16) -> Result<Listen, CliError> {
    let listener = TcpListener::bind(addr)
        .map_err(|e| CliError::problem(format!("cannot listen on {addr}: {e}")).with_help("pick another port, or 0"))?;
    let bound = listener.local_addr().map_err(|e| CliError::problem(format!("cannot read the bound address: {e}")))?;
    diagnostic(&format!("rlp serve: listening on http://{bound}{ENDPOINT}"));
    Ok(Listen::Http { listener, token, max_sessions: usize::from(max_sessions) })
}

/// Under `--expose core`, a bundle tool named like a meta-tool would be
/// hidden behind it: refused.
pub(crate) fn refuse_meta_names(runtime: &Runtime) -> Result<(), CliError> {
    match [meta::SEARCH, meta::DESCRIBE, meta::CALL].into_iter().find(|name| runtime.tool(name).is_some()) {
        Some(name) => Err(CliError::usage(format!(
            "tool `{name}` of bundle `{}` has the name of a meta-tool of --expose core",
            runtime.agent()
        ))
        .with_help(
            "rename the tool in tools.json (ids starting with `rlp.` are best left to rlp), or serve with --expose all",
        )),
        None => Ok(()),
    }
}

/// Runs `rlp serve`.
pub(crate) fn run(args: &ServeArgs, ctx: &Context) -> CliResult {
    let token = match args.http {
        Some(addr) => token_for(addr, args.token_file.as_deref())?,
        None => None,
    };
    let flags = RuntimeFlags {
        bundle: &args.bundle,
        yes: args.yes,
        confirm_external_actions: None,
        tools: (!args.tools.is_empty()).then_some(args.tools.as_slice()),
        ask_questions: false,
        serving: true,
    };
    let recorded = args.replay.load(ctx, true)?;
    let (mut runtime, _) = load_runtime(flags, ctx)?;
    if let Some(recorded) = &recorded {
        runtime = runtime.answering_from(recorded.clone());
    }
    for pattern in args.tools.iter().filter(|p| !runtime.tool_ids().iter().any(|id| p.matches(id))) {
        warning(format!("--tools {pattern} matches no tool of bundle `{}`", runtime.agent()));
    }
    if args.expose == Expose::Core {
        refuse_meta_names(&runtime)?;
    }
    let listen = match args.http {
        Some(addr) => listen(addr, token, args.max_sessions)?,
        None => Listen::Stdio,
    };
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let max_calls = args.max_calls.map_or((cores * 4).min(MAX_CONCURRENT_CALLS), usize::from);
    let run_trace = Uuid::now_v7();
    diagnostic(&format!("rlp serve: trace {run_trace}"));
    if let Some(recorded) = &recorded {
        replaying::link(&runtime, run_trace, recorded)?;
        diagnostic(&format!("rlp serve: answering every call from the recording of trace {}", recorded.trace_id()));
    }
    if args.activate && args.expose != Expose::Core {
        return Err(CliError::usage("--activate works with --expose core only")
            .with_help("serve with --expose core --activate, or without --activate"));
    }
    let options = ServeOptions {
        listen,
        yes: args.yes,
        max_calls,
        expose: args.expose,
        activate: args.activate,
        run_trace,
        task_after: std::time::Duration::from_millis(args.task_after),
    };
    crate::serve::serve(runtime, options).map_err(|e| CliError::problem(format!("rlp serve stopped: {e}")))?;
    Ok(recorded.map_or(Exit::Success, |recorded| replaying::report(&recorded.end())))
}
