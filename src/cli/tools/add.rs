//! `rlp tools add`.

use std::path::PathBuf;

use clap::Args;
use serde_json::{Value, json};

use crate::authoring::add::{GrantOutcome, add};
use crate::authoring::check::EntryFinding;
use crate::authoring::spec::{RequiredField, SchemaSource, ToolSpecBuilder, TransportSpec};
use crate::authoring::target::BundleTarget;
use crate::authoring::tools_file::ToolsDoc;
use crate::authoring::validate;
use crate::authoring::wizard;
use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, OutputError, Printer, diagnostic, path_json, warning};
use crate::cli::terminal::{TerminalAsk, stdin_is_terminal};

/// Flags of `rlp tools add`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  rlp tools add agents/notes --id notes.search --description 'Searches the notes' \\
      --exec /usr/local/bin/notes_tool --grant
  rlp tools add agents/notes --id notes.add --description 'Adds a note' \\
      --http POST https://api.notes.example/notes \\
      --header 'Authorization: Bearer ${secret:runloop/notes/token}' --confirm --grant

Without --id, --description and a transport, asks for what is missing on a terminal.
Schemas: inline JSON, @FILE, schema:<id> (creates schemas/<id>.json), or nothing for a starter.")]
pub struct AddArgs {
    /// The bundle folder.
    pub bundle: PathBuf,
    /// The tool's fields.
    #[command(flatten)]
    pub tool: Box<ToolFlags>,
    /// Also grant what the tool needs in policy.caps (otherwise the lines to add are printed).
    #[arg(long)]
    pub grant: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// The fields of the new tool, as flags.
#[derive(Debug, Args)]
pub struct ToolFlags {
    /// Tool id (`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`), e.g. `mail.send`.
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
    /// One line: what the tool does (the model reads it).
    #[arg(long, value_name = "TEXT")]
    pub description: Option<String>,
    /// exec transport: the tool binary's absolute path.
    #[arg(long, value_name = "CMD", conflicts_with = "http")]
    pub exec: Option<String>,
    /// An argument passed after the blob path (repeatable; exec only).
    #[arg(long = "arg", value_name = "A", allow_hyphen_values = true, conflicts_with = "http")]
    pub args: Vec<String>,
    /// http transport: method and URL template, e.g. `--http GET https://api.x/items/{id}`.
    #[arg(long, num_args = 2, value_names = ["METHOD", "URL"])]
    pub http: Option<Vec<String>>,
    /// A static header `Name: value`, may hold `${secret:<id>}` (repeatable; http only).
    #[arg(long = "header", value_name = "K:V", conflicts_with = "exec")]
    pub headers: Vec<String>,
    /// Input schema: inline JSON, @FILE, or schema:<id> (default: a starter schema).
    #[arg(long, value_name = "JSON|@FILE")]
    pub input_schema: Option<String>,
    /// Result schema: inline JSON, @FILE, or schema:<id> (default: any object).
    #[arg(long, value_name = "JSON|@FILE")]
    pub result_schema: Option<String>,
    /// A capability the tool needs beyond those its transport and secrets imply (repeatable).
    #[arg(long = "cap", value_name = "C")]
    pub caps: Vec<String>,
    /// A secret id the tool uses, `runloop/<scope>/<name>` (repeatable).
    #[arg(long = "secret", value_name = "ID")]
    pub secrets: Vec<String>,
    /// Ask an operator to approve each call (`requires_confirmation`; the
    /// default for http tools and tools with secrets).
    #[arg(long)]
    pub confirm: bool,
    /// Record that calls need no approval (`"requires_confirmation": false`).
    #[arg(long, conflicts_with = "confirm")]
    pub no_confirm: bool,
    /// A tag for traces and audit records (repeatable).
    #[arg(long = "tag", value_name = "T")]
    pub tags: Vec<String>,
    /// Per-call timeout (`timeout_ms`, default 30000).
    #[arg(long, value_name = "N")]
    pub timeout_ms: Option<u64>,
    /// Token budget per call (`budget.tokens`).
    #[arg(long, value_name = "N")]
    pub budget_tokens: Option<u64>,
    /// US-dollar budget per call (`budget.usd`).
    #[arg(long, value_name = "USD")]
    pub budget_usd: Option<f64>,
}

/// Runs `rlp tools add`.
pub(crate) fn run(args: &AddArgs, ctx: &Context) -> CliResult {
    let target = BundleTarget::open(&args.bundle)?;
    let given = given(&args.tool)?;
    let taken: Vec<String> = ToolsDoc::read(&target.dir)?
        .entries()
        .filter_map(|e| e.get("id").and_then(|v| v.as_str()).map(str::to_string))
        .collect();
    let draft = match given.clone().build() {
        Ok(spec) => spec.to_draft(&|id| target.dir.join("schemas").join(format!("{id}.json")).exists()),
        Err(_) if stdin_is_terminal() => {
            let mut ask = TerminalAsk::new(ctx.color.stderr());
            wizard::tool_for_bundle(&mut ask, &target.dir, &taken, given)?
        }
        Err(missing) => {
            let flags: Vec<&str> = missing
                .iter()
                .map(|field| match field {
                    RequiredField::Id => "--id",
                    RequiredField::Description => "--description",
                    RequiredField::Transport => "--exec or --http",
                })
                .collect();
            return Err(CliError::usage(format!("missing {}, and there is no terminal to ask on", flags.join(", ")))
                .with_help("pass --id, --description and --exec CMD (or --http METHOD URL)"));
        }
    };
    let added = add(&target, draft, args.grant)?;
    let tools_file = target.dir.join(crate::bundle::tools::TOOLS_FILE);
    print_warnings(&added.warnings);
    warn_missing_grants(&target, &added.grants, "rlp tools add");
    let mut out = Printer::stdout();
    match args.format {
        Format::Json => out.json(&json!({
            "bundle": path_json(&target.dir),
            "tool": added.id,
            "tools_file": path_json(&tools_file),
            "schema_files": added.schema_files.iter().map(|p| path_json(&target.dir.join(p))).collect::<Vec<_>>(),
            "grants": grants_json(&target, &added.grants),
        }))?,
        Format::Human => {
            out.line(format_args!("added tool `{}` to {}", added.id, tools_file.display()))?;
            for path in &added.schema_files {
                out.line(format_args!("created {} (a starter schema: fill it in)", target.dir.join(path).display()))?;
            }
            print_added_grants(&mut out, &target, &added.grants)?;
        }
    }
    out.finish(Exit::Success)
}

/// The tool fields given as flags, each checked.
fn given(args: &ToolFlags) -> Result<ToolSpecBuilder, CliError> {
    let flag = |name: &'static str| move |e: String| CliError::usage(format!("--{name}: {e}"));
    let transport = match (&args.exec, &args.http) {
        (Some(command), _) => Some(TransportSpec::Exec {
            command: validate::command(command).map_err(flag("exec"))?,
            args: args.args.clone(),
        }),
        (None, Some(http)) => {
            let [method, url] = http.as_slice() else {
                return Err(CliError::usage(
                    "--http takes a method and a URL, e.g. --http GET https://api.x/items/{id}",
                ));
            };
            validate::url(url).map_err(flag("http"))?;
            let headers =
                args.headers.iter().map(|h| validate::header(h)).collect::<Result<_, _>>().map_err(flag("header"))?;
            Some(TransportSpec::Http {
                method: validate::method(method).map_err(flag("http"))?,
                url: url.clone(),
                headers,
            })
        }
        (None, None) => None,
    };
    let schema = |text: &Option<String>, name: &'static str| {
        text.as_deref().map(SchemaSource::parse).transpose().map_err(flag(name))
    };
    let budget = match (args.budget_tokens, args.budget_usd) {
        (None, None) => None,
        (tokens, usd) => {
            if let Some(usd) = usd {
                validate::usd(&usd.to_string()).map_err(flag("budget-usd"))?;
            }
            if tokens == Some(0) {
                return Err(CliError::usage("--budget-tokens: must be a positive whole number"));
            }
            Some((tokens, usd))
        }
    };
    let some_if = |given: bool| given.then_some(());
    Ok(ToolSpecBuilder {
        id: args.id.as_deref().map(validate::tool_id).transpose().map_err(flag("id"))?,
        description: args
            .description
            .as_deref()
            .map(validate::tool_description)
            .transpose()
            .map_err(flag("description"))?,
        transport,
        input: schema(&args.input_schema, "input-schema")?,
        result: schema(&args.result_schema, "result-schema")?,
        capabilities: some_if(!args.caps.is_empty())
            .map(|_| args.caps.iter().map(|c| validate::capability(c)).collect::<Result<Vec<_>, _>>())
            .transpose()
            .map_err(flag("cap"))?,
        secrets: some_if(!args.secrets.is_empty())
            .map(|_| args.secrets.iter().map(|s| validate::secret(s)).collect::<Result<Vec<_>, _>>())
            .transpose()
            .map_err(flag("secret"))?,
        confirm: args.confirm.then_some(true).or(args.no_confirm.then_some(false)),
        tags: some_if(!args.tags.is_empty())
            .map(|_| args.tags.iter().map(|t| validate::tag(t)).collect::<Result<Vec<_>, _>>())
            .transpose()
            .map_err(flag("tag"))?,
        budget,
        timeout_ms: match args.timeout_ms {
            Some(0) => return Err(CliError::usage("--timeout-ms: must be a positive whole number")),
            other => other,
        },
    })
}

/// Lint warnings about new entries, on stderr.
pub(crate) fn print_warnings(warnings: &[EntryFinding]) {
    for warning in warnings {
        diagnostic(&warning.to_string());
    }
}

/// The grants written to policy.caps (with `--grant`), for people.
pub(crate) fn print_added_grants(
    out: &mut Printer,
    target: &BundleTarget,
    grants: &GrantOutcome,
) -> Result<(), OutputError> {
    if !grants.added.is_empty() {
        out.line(format_args!("granted in {}:", target.caps_path.display()))?;
        for line in &grants.added {
            out.line(format_args!("  {line}"))?;
        }
    }
    Ok(())
}

/// The grants added and still missing, as the `grants` object of the JSON
/// report.
pub(crate) fn grants_json(target: &BundleTarget, grants: &GrantOutcome) -> Value {
    json!({
        "policy": path_json(&target.caps_path),
        "added": grants.added,
        "missing": grants.missing.iter().map(|n| json!({"capability": n.shown(), "line": n.line()})).collect::<Vec<_>>(),
    })
}

/// A warning on stderr naming the grants still missing, with the lines to
/// add and the flag that does it for you.
pub(crate) fn warn_missing_grants(target: &BundleTarget, grants: &GrantOutcome, command: &str) {
    if grants.missing.is_empty() {
        return;
    }
    let caps = target.caps_path.display();
    let shown: Vec<String> = grants.missing.iter().map(|n| format!("`{}`", n.shown())).collect();
    let mut text = format!(
        "{caps} does not grant {}: the tool is not exposed until it does, and `rlp lint` reports it\n",
        shown.join(", ")
    );
    text.push_str(&format!("  add under [capabilities] in {caps} (merging lists that share a key):\n"));
    for needed in &grants.missing {
        text.push_str(&format!("    {}\n", needed.line()));
    }
    text.push_str(&format!(
        "  then run `rlp digest {}`; or pass --grant to `{command}` to do both",
        target.dir.display()
    ));
    warning(text);
}
