//! `rlp tools import`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::json;

use crate::authoring::import::{DEFAULT_MAX_OUTPUT, Limits, Source, import};
use crate::authoring::target::BundleTarget;
use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, Printer, diagnostic, path_json, warning};
use crate::cli::tools::add::{grants_json, print_added_grants, print_warnings, warn_missing_grants};
use crate::text::terminal_safe_line;

/// Flags of `rlp tools import`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  rlp tools import agents/demo --exec \"$PWD/agents/demo/bin/greet\" --grant
  rlp tools import agents/demo --mcp time --cap fs:/opt/venvs -- /opt/venvs/time/bin/python -m mcp_server_time
  rlp tools import agents/demo --mcp tracker --url https://mcp.tracker.example/mcp --header 'Authorization=Bearer ${secret:tracker/token}'
  rlp tools import agents/demo --mcp-config ~/.config/Claude/claude_desktop_config.json --grant

--mcp starts the server (a stdio server sandboxed with the --cap grants) and adds each
tool it lists as NAME.<tool>, with its schemas, a pin of its definition and
requires_confirmation from its annotations (docs/bridge.md).

The binary is run as `CMD <blob> ARGS…` with a blob whose \"action\" is \"schema\"; it
prints {\"tools\": [<tools.json entry>, …]}. Tools are matched by id: new ones are
added; in existing ones the binary's transport and schemas are updated and the
fields edited in tools.json are kept (--replace: the binary wins for every field it
states). Tools it no longer describes are kept. See docs/authoring.md.")]
pub struct ImportArgs {
    /// The bundle folder.
    pub bundle: PathBuf,
    /// The tool binary's absolute path.
    #[arg(long, value_name = "CMD", required_unless_present_any = ["mcp", "mcp_config"], conflicts_with_all = ["mcp", "mcp_config"])]
    pub exec: Option<PathBuf>,
    /// An argument passed after the blob path (repeatable); kept in the tools' transport.
    #[arg(long = "arg", value_name = "A", allow_hyphen_values = true, requires = "exec")]
    pub args: Vec<String>,
    /// How long the binary gets to answer.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub timeout_ms: u64,
    /// Import the tools of the MCP server NAME: started as `-- COMMAND [ARGS…]`, or reached at --url.
    #[arg(long, value_name = "NAME", conflicts_with = "mcp_config")]
    pub mcp: Option<String>,
    /// The Streamable HTTP endpoint of the --mcp server.
    #[arg(long, value_name = "URL", requires = "mcp")]
    pub url: Option<String>,
    /// A header sent to the --url server, `K=V` (repeatable; V may hold `${secret:ID}`).
    #[arg(long = "header", value_name = "K=V", requires = "url")]
    pub headers: Vec<String>,
    /// An environment variable of the stdio server, `K=V` (repeatable; V may hold `${secret:ID}`).
    #[arg(long = "env", value_name = "K=V")]
    pub env: Vec<String>,
    /// A capability the server needs, e.g. `fs:/srv/notes` or `net:api.example.com` (repeatable).
    #[arg(long = "cap", value_name = "CAP")]
    pub caps: Vec<String>,
    /// A secret the server's env or headers use (repeatable).
    #[arg(long = "secret", value_name = "ID")]
    pub secrets: Vec<String>,
    /// Import every server of an MCP host's configuration (`mcpServers`, or an editor's `servers`).
    #[arg(long, value_name = "FILE", conflicts_with = "mcp")]
    pub mcp_config: Option<PathBuf>,
    /// Give each server tool its name on the server as its id (where it is a valid id), without the `NAME.` prefix.
    #[arg(long, conflicts_with = "exec")]
    pub bare_ids: bool,
    /// The stdio server's command and arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// Also grant what the tools need in policy.caps (otherwise the lines to add are printed).
    #[arg(long)]
    pub grant: bool,
    /// Let the binary's answer win for every field it states, edits in tools.json included.
    #[arg(long)]
    pub replace: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Runs `rlp tools import`.
pub(crate) fn run(args: &ImportArgs, ctx: &Context) -> CliResult {
    if args.timeout_ms == 0 {
        return Err(CliError::usage("--timeout-ms must be at least 1"));
    }
    let target = BundleTarget::open(&args.bundle)?;
    let Some(exec) = &args.exec else { return crate::cli::tools::import_mcp::run(args, ctx, &target) };
    let source = Source {
        command: exec.clone(),
        args: args.args.clone(),
        limits: Limits { timeout: Duration::from_millis(args.timeout_ms), max_output: DEFAULT_MAX_OUTPUT },
        sandbox: ctx.config()?.sandbox.value,
    };
    let imported = import(&target, &source, args.grant, args.replace)?;
    let human = matches!(args.format, Format::Human);
    for (id, _, fields) in imported.changes.iter().filter(|_| human) {
        let updated = (!fields.updated.is_empty()).then(|| format!("updated {}", fields.updated.join(", ")));
        let kept = (!fields.kept.is_empty()).then(|| format!("kept {} (edited in tools.json)", fields.kept.join(", ")));
        let parts: Vec<String> = updated.into_iter().chain(kept).collect();
        if !parts.is_empty() {
            diagnostic(&terminal_safe_line(&format!("{id}: {}", parts.join("; "))));
        }
    }
    for id in imported.not_described.iter().filter(|_| human) {
        diagnostic(&terminal_safe_line(&format!(
            "{id}: kept (no longer described by {}; remove it from tools.json if it is gone)",
            exec.display()
        )));
    }
    for (id, old, new) in &imported.retyped {
        warning(format_args!(
            "`{id}` was an {old} tool; the binary's answer makes it an {new} tool (grants it no longer needs stay in policy.caps until you remove them)"
        ));
    }
    print_warnings(&imported.warnings);
    warn_missing_grants(&target, &imported.grants, "rlp tools import");
    let mut out = Printer::stdout();
    match args.format {
        Format::Json => out.json(&json!({
            "bundle": path_json(&target.dir),
            "tools": imported.changes.iter().map(|(id, change, fields)| json!({
                "id": id,
                "change": change.as_str(),
                "updated": fields.updated,
                "kept": fields.kept,
            })).collect::<Vec<_>>(),
            "not_described": imported.not_described,
            "retyped": imported.retyped.iter().map(|(id, old, new)| json!({"id": id, "from": old, "to": new})).collect::<Vec<_>>(),
            "grants": grants_json(&target, &imported.grants),
        }))?,
        Format::Human => {
            for (id, change, _) in &imported.changes {
                out.line(format_args!("{:9} {id}", change.as_str()))?;
            }
            print_added_grants(&mut out, &target, &imported.grants)?;
        }
    }
    out.finish(Exit::Success)
}
