//! `rlp agent scaffold`: the wizard (or flags) → a new bundle folder.
//!

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use crate::authoring::AuthoringError;
use crate::authoring::ask::Ask;
use crate::authoring::example::{self, Example, Interpreter};
use crate::authoring::scaffold::{AgentPlan, Scaffolded, scaffold};
use crate::authoring::spec::ToolDefinition;
use crate::authoring::validate;
use crate::authoring::wizard::{self, AgentPreset};
use crate::bundle::diag::Severity;
use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, Printer, diagnostic, path_json};
use crate::cli::terminal::{TerminalAsk, stdin_is_terminal};
use crate::lint::render;

/// Flags of `rlp agent scaffold`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  rlp agent scaffold greeter --example --non-interactive   # with a runnable tool, greeter.greet
  rlp agent scaffold notes --non-interactive --description 'Keeps notes' \\
      --cap-net api.notes.example
  rlp agent scaffold tasks --non-interactive --root other-agents \\
      --tool 'id=tasks.list;desc=Lists tasks;exec=/usr/local/bin/tasks_tool'

Without --non-interactive, a wizard asks on the terminal for what the flags leave out
(with --example too).

--tool takes `key=value` items separated by `;`: id, desc, exec, arg, http (METHOD URL),
header (Name: value), input, result (inline JSON, schema:<id>, or empty for a starter),
cap, secret, confirm, tag, tokens, usd, timeout_ms; or a tools.json entry as JSON.
See docs/authoring.md.")]
pub struct ScaffoldArgs {
    /// The agent's name (`^[a-z][a-z0-9_]*$`); the bundle folder gets this name.
    pub name: String,
    /// Folder that receives the bundle.
    #[arg(long, default_value = "agents", value_name = "DIR")]
    pub root: PathBuf,
    /// Ask nothing; build the bundle from flags and defaults.
    #[arg(long)]
    pub non_interactive: bool,
    /// Replace an existing bundle folder.
    #[arg(long)]
    pub force: bool,
    /// The answers to the wizard's agent-level questions.
    #[command(flatten)]
    pub answers: Box<AgentAnswers>,
    /// A tool to add (repeatable): a `key=value;…` spec or a JSON tools.json entry.
    #[arg(long = "tool", value_name = "SPEC")]
    pub tools: Vec<String>,
    /// Add a runnable example tool, `<name>.greet` (a script in bin/), to call, trace and replay at once.
    #[arg(long)]
    pub example: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// The wizard's agent-level answers as flags.
#[derive(Debug, Args)]
pub struct AgentAnswers {
    /// One-line description (default: `<name> agent`).
    #[arg(long, value_name = "TEXT")]
    pub description: Option<String>,
    /// The model the agent uses (recorded in README.md; grants `model`).
    #[arg(long, value_name = "ID")]
    pub model: Option<String>,
    /// The secret holding the model's API key (`runloop/<scope>/<name>`; granted in policy.caps).
    #[arg(long, value_name = "SECRET_ID")]
    pub model_secret: Option<String>,
    /// Directories the agent may read and write (comma-separated absolute paths).
    #[arg(long, value_name = "DIRS")]
    pub cap_fs: Option<String>,
    /// Hosts the agent may reach (comma-separated `host` or `host:port`).
    #[arg(long, value_name = "HOSTS")]
    pub cap_net: Option<String>,
    /// Knowledge-base domains it may read (comma-separated, or `*` for all).
    #[arg(long, value_name = "DOMAINS")]
    pub cap_kb_read: Option<String>,
    /// Knowledge-base domains it may write (comma-separated, or `*` for all).
    #[arg(long, value_name = "DOMAINS")]
    pub cap_kb_write: Option<String>,
    /// Grant `exec` (exec tools also grant it on their own).
    #[arg(long)]
    pub cap_exec: bool,
    /// Grant `time` (reading the clock).
    #[arg(long)]
    pub cap_time: bool,
}

/// Runs `rlp agent scaffold`.
pub(crate) fn run(args: &ScaffoldArgs, ctx: &Context) -> CliResult {
    validate::agent_name(&args.name).map_err(|e| CliError::usage(e).with_help("e.g. `rlp agent scaffold mailer`"))?;
    let target = args.root.join(&args.name);
    if !args.force && std::fs::symlink_metadata(&target).is_ok() {
        return Err(CliError::usage(format!("{} already exists; nothing was changed", target.display()))
            .with_help("pass --force to replace it, or choose another name or --root"));
    }
    let preset = preset(&args.answers)?;
    let tools = args
        .tools
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            ToolDefinition::parse(spec)
                .map_err(|e| CliError::usage(format!("--tool #{}: {e}", i + 1)).with_help(e.help))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let example = args.example.then(|| example_tool(&args.name)).transpose()?;
    let tools = example.iter().map(|e| e.tool.clone()).chain(tools).collect();
    // With --example every answer has a default: without a terminal to ask
    // on, those defaults are taken rather than refusing.
    let defaults_for_example = args.example && !args.non_interactive && !stdin_is_terminal();
    if defaults_for_example {
        diagnostic("note: no terminal to ask on: the example bundle takes the defaults (--non-interactive)");
    }
    let mut plan: AgentPlan = if args.non_interactive || defaults_for_example {
        preset.into_plan(&args.name, tools)
    } else if !stdin_is_terminal() {
        return Err(CliError::usage("no terminal to ask the wizard's questions on").with_help(
            "pass --non-interactive, with --description, --model, --model-secret, --cap-fs, --cap-net, \
             --cap-kb-read, --cap-kb-write, --cap-exec and --tool for the answers",
        ));
    } else {
        let mut ask = TerminalAsk::new(ctx.color.stderr());
        let plan = wizard::agent(&mut ask, &args.name, preset, tools)?;
        if !ask.confirm(&format!("Create {}?", target.display()), true).map_err(AuthoringError::from)? {
            diagnostic("Nothing was created.");
            return Ok(Exit::Success);
        }
        plan
    };
    plan.example_script = example.map(|e| e.script);
    let done = scaffold(&plan, &args.root, args.force)?;
    match args.format {
        Format::Human => print_summary(&done, &plan, ctx.color.stdout()),
        Format::Json => print_json(&done, &plan),
    }
}

/// The example tool for the bundle that will be `target`, its script for
/// the interpreter this machine has.
fn example_tool(name: &str) -> Result<Example, CliError> {
    let interpreter = Interpreter::detect().ok_or_else(|| {
        CliError::usage("--example: neither /bin/sh nor python3 (on PATH) is here to run the example tool")
            .with_help("scaffold without --example and add a tool of your own with `rlp tools add`")
    })?;
    Ok(Example::new(name, &interpreter))
}

/// The summary as one JSON document: the folder, its files, its tools and
/// the lint findings.
fn print_json(done: &Scaffolded, plan: &AgentPlan) -> CliResult {
    let errors = done.report.count(Severity::Error);
    let document = json!({
        "bundle": path_json(&done.dir),
        "replaced": done.replaced,
        "files": done.files,
        "tools": plan.tools.len(),
        "lint": {
            "errors": errors,
            "warnings": done.report.count(Severity::Warning),
            "findings": done.report.findings.iter().map(render::finding_json).collect::<Vec<_>>(),
        },
    });
    let mut out = Printer::stdout();
    out.json(&document)?;
    out.finish(if errors > 0 { Exit::Problems } else { Exit::Success })
}

/// The agent-level answers given as flags.
fn preset(args: &AgentAnswers) -> Result<AgentPreset, CliError> {
    let flag = |name: &'static str| move |e: String| CliError::usage(format!("--{name}: {e}"));
    Ok(AgentPreset {
        description: args
            .description
            .as_deref()
            .map(validate::agent_description)
            .transpose()
            .map_err(flag("description"))?,
        model: args.model.as_deref().map(wizard::model_id).transpose().map_err(flag("model"))?,
        model_secret: args.model_secret.as_deref().map(validate::secret).transpose().map_err(flag("model-secret"))?,
        fs: args.cap_fs.as_deref().map(|s| validate::each(s, validate::fs_root)).transpose().map_err(flag("cap-fs"))?,
        net: args
            .cap_net
            .as_deref()
            .map(|s| validate::each(s, validate::net_host))
            .transpose()
            .map_err(flag("cap-net"))?,
        kb_read: args.cap_kb_read.as_deref().map(validate::kb_scope).transpose().map_err(flag("cap-kb-read"))?,
        kb_write: args.cap_kb_write.as_deref().map(validate::kb_scope).transpose().map_err(flag("cap-kb-write"))?,
        exec: args.cap_exec.then_some(true),
        time: args.cap_time.then_some(true),
    })
}

/// Prints what was created, the lint result and the next commands.
fn print_summary(done: &Scaffolded, plan: &AgentPlan, color: bool) -> CliResult {
    let dir = done.dir.display().to_string();
    let tools = match plan.tools.len() {
        1 => "1 tool".to_string(),
        n => format!("{n} tools"),
    };
    let verb = if done.replaced { "Replaced" } else { "Created" };
    let mut out = format!("{verb} {dir}/ ({tools})\n");
    for file in &done.files {
        out.push_str(&format!("  {file}\n"));
    }
    let errors = done.report.count(Severity::Error);
    let warnings = done.report.count(Severity::Warning);
    out.push('\n');
    if !done.report.findings.is_empty() {
        out.push_str(&render::human(std::slice::from_ref(&done.report), color));
    }
    out.push_str(&format!("Lint: {}\n", render::problems(errors, warnings, 0)));
    let exit = if errors > 0 { Exit::Problems } else { Exit::Success };
    out.push_str("\nNext:\n");
    let mut steps: Vec<(String, &str)> = Vec::new();
    if plan.tools.is_empty() {
        steps.push((format!("rlp tools add {dir} --id <id> --description '…' --exec /abs/path"), "add a tool"));
    }
    if plan.example_script.is_some() {
        let id = example::tool_id(&plan.name);
        steps.push((format!("rlp tools call {dir} {id} --args '{{\"name\": \"Ada\"}}'"), "call the example tool"));
    }
    steps.extend([
        (format!("rlp lint {dir}"), "check it (the CI gate)"),
        (format!("rlp digest {dir}"), "after editing any file"),
        ("rlp keygen --out keys --name release".to_string(), "once: a signing key pair"),
        (format!("rlp sign {dir} --key keys/release.key"), "sign the manifest"),
        (format!("rlp bundle pack {dir} --key keys/release.key"), "a reproducible archive"),
    ]);
    let width = steps.iter().map(|(c, _)| c.chars().count()).max().unwrap_or(0);
    for (command, why) in steps {
        let pad = " ".repeat(width - command.chars().count());
        out.push_str(&format!("  {command}{pad}   # {why}\n"));
    }
    Printer::stdout().finish_with(&out, exit)
}
