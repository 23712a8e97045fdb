//! `rlp secrets set | list | rm`: the age-encrypted secret store of the
//! runtime home (`$RUNLOOP_HOME/secrets/store.age`, see [`crate::secrets::store`]).

use std::io::{IsTerminal, Read};

use clap::{Args, Subcommand};
use serde_json::json;
use zeroize::Zeroize;

use crate::bundle::capability::SecretId;
use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, Printer, path_json, warning};
use crate::cli::terminal;
use crate::config::{self, Flags};
use crate::secrets::command::MAX_VALUE_BYTES;
use crate::secrets::config::ProviderKind;
use crate::secrets::store::{Entry, Store};
use crate::secrets::{ProviderError, SecretValue};
use crate::text::{format_ts, plural};

/// `rlp secrets …`
#[derive(Debug, Subcommand)]
pub enum SecretsCommand {
    /// Store a secret: the value from stdin, or a hidden prompt (never from the command line).
    Set(SetArgs),
    /// List the stored secrets: ids and when each last changed, never values.
    List(ListArgs),
    /// Remove a secret from the store.
    Rm(RmArgs),
}

/// Flags of `rlp secrets set`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  rlp secrets set runloop/mail/smtp_api_key          (asks twice, without echo)\n  pass show mail/smtp | rlp secrets set runloop/mail/smtp_api_key\n\nThe value is read from stdin when stdin is not a terminal (one trailing newline is\ndropped), else asked for without echo, twice. It is never taken from the command line,\nwhere other users and shell history would see it. The store is encrypted with age to\n$RUNLOOP_HOME/secrets/identity.txt (made, mode 0600, on first use) or a passphrase\n([secrets.file] in config.toml). Calls read it when `file` is in [secrets] providers.\nExit codes: 0 stored, 2 a bad id or value, or a store that cannot be read or written."
)]
pub struct SetArgs {
    /// The secret id (`runloop/<scope>/<name>`), as tools.json names it.
    #[arg(value_name = "ID")]
    pub id: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Flags of `rlp secrets list`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  rlp secrets list\n  rlp secrets list --format json\n\nShows ids, the provider (`file`) and when each was last set; never a value.\nExit codes: 0 listed, 2 a store that cannot be read (damaged, or another key)."
)]
pub struct ListArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Flags of `rlp secrets rm`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  rlp secrets rm runloop/mail/smtp_api_key\n\nCalls that need the secret are refused afterwards (exit 3) unless a later provider has it.\nExit codes: 0 removed, 1 not in the store, 2 a bad id or a store that cannot be read or written."
)]
pub struct RmArgs {
    /// The secret id.
    #[arg(value_name = "ID")]
    pub id: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Runs a `secrets` subcommand.
pub(crate) fn run(command: SecretsCommand, ctx: &Context) -> CliResult {
    let loaded = config::load(&ctx.home, &Flags::default())?;
    for line in &loaded.warnings {
        warning(line);
    }
    let settings = &loaded.config.secrets;
    let store = Store::of_home(&ctx.home, settings.file.clone(), terminal::passphrase_asker());
    let unused = !settings.providers.value.contains(&ProviderKind::File);
    let note_unused = || {
        if unused {
            warning(format_args!(
                "the `file` provider is not in [secrets] providers ({}), so calls do not read this store; \
                 add it, e.g. `providers = [\"file\", \"env\"]` under [secrets] in {}",
                settings.providers.source.shown("secrets"),
                ctx.home.config_file().display()
            ));
        }
    };
    match command {
        SecretsCommand::Set(args) => {
            let id = parse_id(&args.id)?;
            let value = read_value(&id)?;
            let changed_ms = crate::event::now_ms();
            let replaced = store
                .update(|contents| contents.entries.insert(id.clone(), Entry { value, changed_ms }).is_some())
                .map_err(store_error)?;
            note_unused();
            let path = store.path();
            let human = format!(
                "{} `{id}` in {} (encrypted)",
                if replaced { "replaced" } else { "stored" },
                path.display()
            );
            let json = json!({"id": id.as_str(), "provider": "file", "store": path_json(&path), "replaced": replaced, "changed": format_ts(changed_ms)});
            let mut out = Printer::stdout();
            out.report(args.format, &human, &json)?;
            out.finish(Exit::Success)
        }
        SecretsCommand::List(args) => {
            let contents = store.load().map_err(store_error)?.unwrap_or_default();
            note_unused();
            let path = store.path();
            let mut out = Printer::stdout();
            match args.format {
                Format::Json => {
                    let secrets: Vec<_> = contents
                        .entries
                        .iter()
                        .map(|(id, e)| json!({"id": id.as_str(), "provider": "file", "changed": format_ts(e.changed_ms)}))
                        .collect();
                    out.json(&json!({"store": path_json(&path), "secrets": secrets}))?;
                }
                Format::Human if contents.entries.is_empty() => {
                    out.line(format_args!(
                        "no secrets in {}; add one with `rlp secrets set <id>`",
                        path.display()
                    ))?;
                }
                Format::Human => {
                    let width = contents.entries.keys().map(|id| id.as_str().len()).max().unwrap_or(0).max(2);
                    out.line(format_args!("{:width$}  PROVIDER  CHANGED", "ID"))?;
                    for (id, entry) in &contents.entries {
                        out.line(format_args!("{:width$}  file      {}", id.as_str(), format_ts(entry.changed_ms)))?;
                    }
                    out.line(format_args!("{} in {}", plural(contents.entries.len(), "secret"), path.display()))?;
                }
            }
            out.finish(Exit::Success)
        }
        SecretsCommand::Rm(args) => {
            let id = parse_id(&args.id)?;
            let path = store.path();
            if store.load().map_err(store_error)?.is_none_or(|c| !c.entries.contains_key(&id)) {
                return Err(CliError::problem(format!("`{id}` is not in {}", path.display()))
                    .with_help("see the stored ids with `rlp secrets list`"));
            }
            let removed = store.update(|contents| contents.entries.remove(&id).is_some()).map_err(store_error)?;
            if !removed {
                return Err(CliError::problem(format!("`{id}` is not in {} (it was removed meanwhile)", path.display())));
            }
            let human = format!("removed `{id}` from {}", path.display());
            let json = json!({"id": id.as_str(), "provider": "file", "store": path_json(&path), "removed": true});
            let mut out = Printer::stdout();
            out.report(args.format, &human, &json)?;
            out.finish(Exit::Success)
        }
    }
}

fn parse_id(text: &str) -> Result<SecretId, CliError> {
    text.parse().map_err(|why: String| {
        CliError::usage(why).with_help("name the secret as the tool's `secrets` list in tools.json does")
    })
}

fn store_error(e: ProviderError) -> CliError {
    CliError::usage(e.message).with_help(e.help)
}

/// The value to store: stdin when it is not a terminal (less one trailing
/// newline), else a hidden prompt asked twice.
fn read_value(id: &SecretId) -> Result<SecretValue, CliError> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return terminal::hidden_value(&format!("Value of {id}"), true)
            .map_err(|why| CliError::usage(format!("cannot ask for the value: {why}")));
    }
    let mut bytes = Vec::with_capacity(MAX_VALUE_BYTES as usize + 2);
    let read = stdin.lock().take(MAX_VALUE_BYTES + 1).read_to_end(&mut bytes);
    let fail = |bytes: &mut Vec<u8>, message: String| {
        bytes.zeroize();
        Err(CliError::usage(message))
    };
    if let Err(e) = read {
        return fail(&mut bytes, format!("cannot read the value from stdin: {e}"));
    }
    if bytes.len() as u64 > MAX_VALUE_BYTES {
        return fail(&mut bytes, format!("the value on stdin is longer than {MAX_VALUE_BYTES} bytes"));
    }
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
    }
    if bytes.is_empty() {
        return Err(CliError::usage("the value on stdin is empty")
            .with_help(format!("pipe the value in, e.g. `printf %s \"$VALUE\" | rlp secrets set {id}`")));
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok(SecretValue::new(text)),
        Err(e) => fail(&mut e.into_bytes(), "the value on stdin is not UTF-8 text".to_string()),
    }
}
