//! `rlp secrets set | list | rm`: the age-encrypted secret store of the
//! runtime home (`$RUNLOOP_HOME/secrets/store.age`, see [`crate::secrets::store`]).

use std::io::{IsTerminal, Read};
use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::json;
use zeroize::Zeroize;

use crate::bundle::capability::SecretId;
use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, Printer, path_json, warning};
use crate::cli::terminal;
use crate::config::Source;
use crate::config::secrets::{ProviderKind, SecretsConfig, StoreKey};
use crate::secrets::command::MAX_VALUE_BYTES;
#[cfg(feature = "keyring")]
use crate::secrets::keyring::Keyring;
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
    after_help = "Examples:\n  printf %s sk-example | rlp secrets set runloop/mail/smtp_api_key\n  pass show mail/smtp | rlp secrets set runloop/mail/smtp_api_key   # from a password manager\n  rlp secrets set runloop/mail/smtp_api_key   # on a terminal: asks twice, without echo\n\nThe value is read from stdin when stdin is not a terminal (one trailing newline is\ndropped), else asked for without echo, twice. It is never taken from the command line,\nwhere other users and shell history would see it. The store is encrypted with age to\n$RUNLOOP_HOME/secrets/identity.txt (made, mode 0600, on first use) or a passphrase\n([secrets.file] in config.toml). Calls read it when `file` is in [secrets] providers.\nExit codes: 0 stored, 2 a bad id or value, or a store that cannot be read or written."
)]
pub struct SetArgs {
    /// The secret id (`runloop/<scope>/<name>`), as tools.json names it.
    #[arg(value_name = "ID")]
    pub id: String,
    /// Where to store it.
    #[arg(long, value_enum, default_value_t = Writable::File)]
    pub provider: Writable,
    /// Read the value from this file (e.g. a mounted secret) instead of
    /// stdin or a prompt; one trailing newline is dropped.
    #[arg(long, value_name = "FILE")]
    pub from_file: Option<PathBuf>,
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
    /// List only this provider's secrets (default: the file store, and the
    /// keyring when `keyring` is in [secrets] providers).
    #[arg(long, value_enum)]
    pub provider: Option<Writable>,
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
    /// Where to remove it from.
    #[arg(long, value_enum, default_value_t = Writable::File)]
    pub provider: Writable,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// A provider rlp can write to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Writable {
    /// The age-encrypted store of the runtime home.
    File,
    /// The desktop's Secret Service.
    Keyring,
}

/// Runs a `secrets` subcommand.
pub(crate) fn run(command: SecretsCommand, ctx: &Context) -> CliResult {
    for line in ctx.config_warnings()? {
        warning(line);
    }
    let config = ctx.config()?;
    let settings = &config.secrets;
    let open = |choice: Writable| Target::open(choice, ctx, settings);
    match command {
        SecretsCommand::Set(args) => {
            let target = open(args.provider)?;
            let id = parse_id(&args.id)?;
            // A store that cannot be written is found before a value is typed.
            target.list().map_err(store_error)?;
            let value = match &args.from_file {
                Some(path) => value_from_file(path)?,
                None => read_value(&id)?,
            };
            let fresh_identity = target.identity_file().filter(|file| !file.exists());
            let changed_ms = crate::event::now_ms();
            let replaced = target.set(&id, value, changed_ms).map_err(store_error)?;
            target.note_unused(ctx);
            let mut human = format!("{} `{id}` in {}", if replaced { "replaced" } else { "stored" }, target.location());
            if let Some(identity) = fresh_identity.filter(|file| file.exists()) {
                human.push_str(&format!(
                    "\ncreated the store's key {} (mode 0600): back it up; without it the store cannot be read",
                    identity.display()
                ));
            }
            let json = json!({
                "id": id.as_str(), "provider": target.name(), "store": target.location_json(),
                "replaced": replaced, "changed": format_ts(changed_ms),
            });
            let mut out = Printer::stdout();
            out.report(args.format, &human, &json)?;
            out.finish(Exit::Success)
        }
        SecretsCommand::List(args) => {
            let mut targets = vec![open(args.provider.unwrap_or(Writable::File))?];
            // Unless one is named, the file store and the configured keyring.
            if args.provider.is_none() && settings.providers.value.contains(&ProviderKind::Keyring) {
                targets.push(open(Writable::Keyring)?);
            }
            let mut listed = Vec::new();
            let mut shown = Vec::new();
            for (i, target) in targets.into_iter().enumerate() {
                match target.list() {
                    Ok(ids) => listed.extend(ids.into_iter().map(|(id, changed_ms)| (id, target.name(), changed_ms))),
                    // The keyring, listed because it is configured: its
                    // absence is worth a word, not a failure.
                    Err(e) if i > 0 => {
                        warning(format_args!("{}; its secrets are not listed", e.message));
                        continue;
                    }
                    Err(e) => return Err(store_error(e)),
                }
                target.note_unused(ctx);
                shown.push(target);
            }
            listed.sort();
            print_list(&listed, &shown, args.format)
        }
        SecretsCommand::Rm(args) => {
            let target = open(args.provider)?;
            let id = parse_id(&args.id)?;
            if !target.remove(&id).map_err(store_error)? {
                return Err(CliError::problem(format!("`{id}` is not in {}", target.location()))
                    .with_help("see the stored ids with `rlp secrets list`"));
            }
            let human = format!("removed `{id}` from {}", target.location());
            let json =
                json!({"id": id.as_str(), "provider": target.name(), "store": target.location_json(), "removed": true});
            let mut out = Printer::stdout();
            out.report(args.format, &human, &json)?;
            out.finish(Exit::Success)
        }
    }
}

/// Prints `rlp secrets list`: `(id, provider, last change)` rows, never a value.
fn print_list(listed: &[(SecretId, &str, Option<i64>)], targets: &[Target<'_>], format: Format) -> CliResult {
    let changed = |ms: &Option<i64>| ms.map(format_ts);
    let mut out = Printer::stdout();
    match format {
        Format::Json => {
            let secrets: Vec<_> = listed
                .iter()
                .map(|(id, provider, ms)| json!({"id": id.as_str(), "provider": provider, "changed": changed(ms)}))
                .collect();
            let stores: Vec<_> =
                targets.iter().map(|t| json!({"provider": t.name(), "store": t.location_json()})).collect();
            out.json(&json!({"stores": stores, "secrets": secrets}))?;
        }
        Format::Human => {
            let places: Vec<String> = targets.iter().map(Target::location).collect();
            if listed.is_empty() {
                out.line(format_args!("no secrets in {}; add one with `rlp secrets set <id>`", places.join(" or ")))?;
            } else {
                let width = listed.iter().map(|(id, _, _)| id.as_str().len()).max().unwrap_or(0).max(2);
                out.line(format_args!("{:width$}  PROVIDER  CHANGED", "ID"))?;
                for (id, provider, ms) in listed {
                    let when = changed(ms).unwrap_or_else(|| "-".to_string());
                    out.line(format_args!("{:width$}  {provider:8}  {when}", id.as_str()))?;
                }
                out.line(format_args!("{} in {}", plural(listed.len(), "secret"), places.join(" and ")))?;
            }
        }
    }
    out.finish(Exit::Success)
}

/// A provider `rlp secrets` writes to, opened, with the settings in force.
struct Target<'a> {
    place: Place,
    settings: &'a SecretsConfig,
}

/// Where a [`Target`] keeps secrets.
enum Place {
    /// The file store.
    File(Store),
    /// The keyring.
    #[cfg(feature = "keyring")]
    Keyring(Keyring),
}

impl<'a> Target<'a> {
    fn open(choice: Writable, ctx: &Context, settings: &'a SecretsConfig) -> Result<Target<'a>, CliError> {
        let place = match choice {
            Writable::File => {
                Place::File(Store::of_home(&ctx.home, settings.file.clone(), terminal::passphrase_asker()))
            }
            #[cfg(feature = "keyring")]
            Writable::Keyring => Place::Keyring(Keyring::new()),
            #[cfg(not(feature = "keyring"))]
            Writable::Keyring => {
                return Err(CliError::usage("this rlp was built without the keyring provider")
                    .with_help("build rlp with `--features keyring`, or use the file store"));
            }
        };
        Ok(Target { place, settings })
    }

    fn kind(&self) -> ProviderKind {
        match self.place {
            Place::File(_) => ProviderKind::File,
            #[cfg(feature = "keyring")]
            Place::Keyring(_) => ProviderKind::Keyring,
        }
    }

    fn name(&self) -> &'static str {
        match self.kind() {
            ProviderKind::File => "file",
            _ => "keyring",
        }
    }

    /// Where the secrets are, in words.
    fn location(&self) -> String {
        match &self.place {
            Place::File(store) => format!("{} (encrypted)", store.path().display()),
            #[cfg(feature = "keyring")]
            Place::Keyring(_) => "the keyring (Secret Service)".to_string(),
        }
    }

    fn location_json(&self) -> serde_json::Value {
        match &self.place {
            Place::File(store) => path_json(&store.path()),
            #[cfg(feature = "keyring")]
            Place::Keyring(_) => json!("secret-service"),
        }
    }

    /// The file store's identity file, when it uses one.
    fn identity_file(&self) -> Option<PathBuf> {
        match &self.place {
            Place::File(store) if self.settings.file == StoreKey::Identity => Some(store.identity_file().to_path_buf()),
            _ => None,
        }
    }

    /// Stores `value` as `id`; true when it replaced a value.
    fn set(&self, id: &SecretId, value: SecretValue, changed_ms: i64) -> Result<bool, ProviderError> {
        match &self.place {
            Place::File(store) => {
                store.update(|contents| contents.entries.insert(id.clone(), Entry { value, changed_ms }).is_some())
            }
            #[cfg(feature = "keyring")]
            Place::Keyring(keyring) => {
                let replaced = keyring.ids()?.contains(id);
                keyring.set(id, &value)?;
                Ok(replaced)
            }
        }
    }

    /// Removes `id`; false when it was not there.
    fn remove(&self, id: &SecretId) -> Result<bool, ProviderError> {
        match &self.place {
            Place::File(store) => {
                if store.load()?.is_none_or(|contents| !contents.entries.contains_key(id)) {
                    return Ok(false);
                }
                store.update(|contents| contents.entries.remove(id).is_some())
            }
            #[cfg(feature = "keyring")]
            Place::Keyring(keyring) => keyring.remove(id),
        }
    }

    /// The ids it holds, with when each last changed where it is known.
    fn list(&self) -> Result<Vec<(SecretId, Option<i64>)>, ProviderError> {
        match &self.place {
            Place::File(store) => Ok(store
                .load()?
                .map(|contents| contents.entries.into_iter().map(|(id, e)| (id, Some(e.changed_ms))).collect())
                .unwrap_or_default()),
            #[cfg(feature = "keyring")]
            Place::Keyring(keyring) => Ok(keyring.ids()?.into_iter().map(|id| (id, None)).collect()),
        }
    }

    /// Warns when calls do not read this provider (by default they read
    /// the file store once it exists).
    fn note_unused(&self, ctx: &Context) {
        let providers = &self.settings.providers;
        let by_default = providers.source == Source::Default && self.kind() == ProviderKind::File;
        if !by_default && !providers.value.contains(&self.kind()) {
            warning(format_args!(
                "calls do not read the `{name}` provider: it is not in [secrets] providers (from {}); \
                 to use it, write `providers = [\"{name}\", \"env\"]` under [secrets] in {}",
                providers.source.shown("secrets"),
                ctx.home.config_file().display(),
                name = self.name(),
            ));
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
    let hint = format!("pipe the value in, e.g. `printf %s \"$VALUE\" | rlp secrets set {id}`");
    value_from(stdin.lock(), "stdin", &hint)
}

/// The value held by the file `path` (less one trailing newline).
fn value_from_file(path: &std::path::Path) -> Result<SecretValue, CliError> {
    let file = std::fs::File::open(path)
        .map_err(|e| CliError::usage(format!("cannot read {}: {e}", path.display())).with_help("check the path"))?;
    value_from(file, &path.display().to_string(), "write the value into the file")
}

/// The value `reader` holds: UTF-8, not empty, at most [`MAX_VALUE_BYTES`]
/// (one trailing newline dropped); `hint` is the help for an empty one.
/// Every buffer is wiped.
fn value_from(reader: impl Read, what: &str, hint: &str) -> Result<SecretValue, CliError> {
    let mut bytes = Vec::with_capacity(MAX_VALUE_BYTES as usize + 2);
    let read = reader.take(MAX_VALUE_BYTES + 1).read_to_end(&mut bytes);
    let fail = |bytes: &mut Vec<u8>, message: String| {
        bytes.zeroize();
        Err(CliError::usage(message))
    };
    if let Err(e) = read {
        return fail(&mut bytes, format!("cannot read the value from {what}: {e}"));
    }
    if bytes.len() as u64 > MAX_VALUE_BYTES {
        return fail(&mut bytes, format!("the value on {what} is longer than {MAX_VALUE_BYTES} bytes"));
    }
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
    }
    if bytes.is_empty() {
        return Err(CliError::usage(format!("the value on {what} is empty")).with_help(hint));
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok(SecretValue::new(text)),
        Err(e) => fail(&mut e.into_bytes(), format!("the value on {what} is not UTF-8 text")),
    }
}
