//! The command-line interface: one module per command group. Each turns its
//! flags into library calls and renders the outcome; `main.rs` only calls
//! [`main`].

pub(crate) mod agent;
pub(crate) mod bundle;
pub(crate) mod context;
pub(crate) mod deferred;
pub(crate) mod digest;
pub(crate) mod exit;
pub(crate) mod keygen;
pub(crate) mod lint;
pub(crate) mod man;
pub(crate) mod mcpb;
pub(crate) mod output;
pub(crate) mod registry;
pub(crate) mod replay;
pub(crate) mod replaying;
pub(crate) mod runtime_setup;
pub(crate) mod secrets;
pub(crate) mod serve;
pub(crate) mod sign;
pub(crate) mod spans;
pub(crate) mod terminal;
pub(crate) mod tools;
pub(crate) mod trace;
pub(crate) mod trust;

pub use context::{Context, secret_providers};

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use crate::cli::deferred::Deferred;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{ColorChoice, Printer, diagnostic};
use crate::home::Home;

/// rlp: author, check, seal, run and replay agent bundles.
#[derive(Debug, Parser)]
#[command(name = "rlp", version, about, long_about = None, propagate_version = true, after_help = "\
Examples:
  rlp agent scaffold hello --example --non-interactive   # agents/hello/, a runnable tool in it
  rlp lint agents/                                       # every bundle (the CI gate)
  rlp tools call agents/hello hello.greet --args '{\"name\": \"Ada\"}'
  rlp trace show last                                    # the newest trace of the ledger
  rlp replay last --bundle agents/hello                  # the same, replayed against the bundle
  rlp keygen --out keys --name hello                     # once: a signing key pair
  rlp digest agents/hello && rlp sign agents/hello --key keys/hello.key

Exit codes: 0 success, 1 problems found, 2 usage or unreadable input, 3 refused by policy.")]
pub struct Cli {
    /// Runtime home (default: $RUNLOOP_HOME, else ~/.runloop).
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// When to use colour.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub color: ColorChoice,
    /// The ledger: sqlite:///PATH or postgres://USER@HOST[:PORT]/DB (default: $RUNLOOP_LEDGER_URL, [ledger] url
    /// in config.toml, else the home's SQLite file).
    #[arg(long, global = true, value_name = "URL")]
    pub ledger: Option<crate::config::UrlText>,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands, each built when the command line enters it ([`Deferred`]).
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create, install and list agent bundles.
    #[command(subcommand)]
    Agent(Deferred<agent::AgentCommand>),
    /// Add, import, list and call a bundle's tools.
    #[command(subcommand)]
    Tools(Deferred<tools::ToolsCommand>),
    /// Check bundles: syntax, tools, schemas, grants, digests (the CI gate).
    Lint(Deferred<lint::LintArgs>),
    /// Write (or check) the size and BLAKE3 digest of every bundle file into manifest.toml.
    Digest(Deferred<digest::DigestArgs>),
    /// Create an Ed25519 key pair for signing bundles.
    Keygen(Deferred<keygen::KeygenArgs>),
    /// Sign a bundle's manifest (SIGNATURES/manifest.sig).
    Sign(Deferred<sign::SignArgs>),
    /// Pack bundles into reproducible archives, verify them, move them through OCI registries, export MCP Bundles.
    #[command(subcommand)]
    Bundle(Deferred<bundle::BundleCommand>),
    /// Manage the trust policy: anchors, rules and revoked keys.
    #[command(subcommand)]
    Trust(Deferred<trust::TrustCommand>),
    /// Store, list and remove secrets in the encrypted store of the runtime home.
    #[command(subcommand)]
    Secrets(Deferred<secrets::SecretsCommand>),
    /// Inspect, export, import and verify recorded traces.
    #[command(subcommand)]
    Trace(Deferred<trace::TraceCommand>),
    /// Replay a recorded trace against a bundle and report every divergence.
    Replay(Deferred<replay::ReplayArgs>),
    /// Serve a bundle's tools over the Model Context Protocol (stdio or HTTP).
    Serve(Deferred<serve::ServeArgs>),
    /// Print or install man pages (from the same definitions as --help).
    Man(Deferred<man::ManArgs>),
    /// Print a shell completion script.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// The whole command tree, every command built (what completion scripts and
/// man pages show; parsing builds only the commands it enters).
pub fn command_tree() -> clap::Command {
    deferred::build_eagerly();
    let mut tree = Cli::command();
    tree.build();
    tree
}

/// Parses the command line, runs the command and returns the exit code.
pub fn main() -> ExitCode {
    // Interrupted, rlp kills the tools it runs and removes its temporary files.
    let _ = crate::interrupt::install();
    // What the library has to say besides results and errors goes to stderr.
    crate::notice::install(output::notice);
    // What the tools it runs leave behind is reparented to rlp, reaped and swept.
    let _ = crate::process::become_subreaper();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return parse_failed(&e),
    };
    let home = match Home::resolve(cli.home.as_deref()) {
        Ok(home) => home,
        Err(e) => return finish(Err(e.into()), cli.color),
    };
    let context = Context::new(home, cli.color, cli.ledger);
    let result = run(cli.command, &context);
    finish(result, context.color)
}

fn run(command: Command, ctx: &Context) -> CliResult {
    match command {
        Command::Agent(Deferred(cmd)) => agent::run(cmd, ctx),
        Command::Tools(Deferred(cmd)) => tools::run(cmd, ctx),
        Command::Lint(Deferred(args)) => lint::run(&args, ctx),
        Command::Digest(Deferred(args)) => digest::run(&args, ctx),
        Command::Keygen(Deferred(args)) => keygen::run(&args, ctx),
        Command::Sign(Deferred(args)) => sign::run(&args, ctx),
        Command::Bundle(Deferred(cmd)) => bundle::run(cmd, ctx),
        Command::Trust(Deferred(cmd)) => trust::run(cmd, ctx),
        Command::Secrets(Deferred(cmd)) => secrets::run(cmd, ctx),
        Command::Trace(Deferred(cmd)) => trace::run(cmd, ctx),
        Command::Replay(Deferred(args)) => replay::run(&args, ctx),
        Command::Serve(Deferred(args)) => serve::run(&args, ctx),
        Command::Man(Deferred(args)) => man::run(&args, ctx),
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command_tree(), "rlp", &mut script);
            Printer::stdout().finish_with(&String::from_utf8_lossy(&script), Exit::Success)
        }
    }
}

/// A command line clap did not run: `--help` and `--version` print through
/// the [`Printer`] (so a closed or full stdout is handled like any result);
/// usage errors go to stderr with clap's exit code (2).
fn parse_failed(e: &clap::Error) -> ExitCode {
    if e.use_stderr() {
        let _ = e.print();
        return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
    }
    let rendered = e.render();
    let text = if ColorChoice::Auto.stdout() { rendered.ansi().to_string() } else { rendered.to_string() };
    finish(Printer::stdout().finish_with(&text, Exit::Success), ColorChoice::Auto)
}

/// Prints an error (if any) the standard way and maps it to an exit code.
pub fn finish(result: CliResult, color: ColorChoice) -> ExitCode {
    crate::interrupt::settle();
    match result {
        Ok(exit) => exit.into(),
        Err(error) => {
            if !error.is_quiet() {
                print_error(&error, color.stderr());
            }
            error.exit.into()
        }
    }
}

/// Prints an error on stderr ([`CliError::render`]).
pub fn print_error(error: &CliError, color: bool) {
    diagnostic(&error.render(color));
}
