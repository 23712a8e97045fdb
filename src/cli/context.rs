//! What every command receives besides its own flags: the runtime home,
//! the colour choice, `--ledger`, and the configuration — read once per
//! command, the first time a part of it needs a setting, and handed to
//! each part from here (the library never reads config files itself).

use std::sync::{Arc, OnceLock};

use crate::cli::exit::CliError;
use crate::cli::output::ColorChoice;
use crate::config::tool_list::ToolPattern;
use crate::config::{self, Config, ConfigError, Flags, Loaded, UrlText};
use crate::home::Home;
use crate::ledger::Location;
use crate::secrets::Providers;
use crate::secrets::store::AskPassphrase;

/// What every command receives besides its own flags.
#[derive(Debug)]
pub struct Context {
    /// The runtime home.
    pub home: Home,
    /// The colour choice.
    pub color: ColorChoice,
    /// `--ledger URL`, if given.
    pub ledger: Option<UrlText>,
    /// The config files and `RUNLOOP_*` variables, read on first use.
    loaded: OnceLock<Result<Loaded, ConfigError>>,
}

impl Context {
    /// The context of a command run with `home`, `color` and `--ledger`.
    pub fn new(home: Home, color: ColorChoice, ledger: Option<UrlText>) -> Self {
        Context { home, color, ledger, loaded: OnceLock::new() }
    }

    /// The layers below the command line, read on the first call.
    fn loaded(&self) -> Result<&Loaded, CliError> {
        match self.loaded.get_or_init(|| config::load(&self.home)) {
            Ok(loaded) => Ok(loaded),
            Err(e) => Err(e.clone().into()),
        }
    }

    /// The settings in force for this command, with `--ledger`.
    pub(crate) fn config(&self) -> Result<Config, CliError> {
        self.config_with(None, None)
    }

    /// The settings in force for a command that also takes
    /// `--confirm-external-actions` or `--tools`.
    pub(crate) fn config_with(
        &self,
        confirm_external_actions: Option<bool>,
        tools: Option<&[ToolPattern]>,
    ) -> Result<Config, CliError> {
        let flags =
            Flags { confirm_external_actions, ledger_url: self.ledger.clone(), tools: tools.map(<[_]>::to_vec) };
        Ok(self.loaded()?.config(&flags))
    }

    /// What the config files had that was ignored (unknown keys, `[policy]`
    /// outside the system config), for the commands that report it.
    pub(crate) fn config_warnings(&self) -> Result<&[String], CliError> {
        Ok(&self.loaded()?.warnings)
    }

    /// The shared schema registries: `[schemas] registries` of the config
    /// files, then the home's `schemas/`.
    pub(crate) fn registries(&self) -> Result<crate::bundle::registry::Registries, CliError> {
        Ok(self.config()?.registries(&self.home))
    }

    /// The ledger frames are recorded in and read from: `--ledger`, else
    /// `$RUNLOOP_LEDGER_URL`, else `[ledger] url` in the config files, else
    /// the home's SQLite file.
    pub(crate) fn ledger(&self) -> Result<Location, CliError> {
        let Some(url) = self.config()?.ledger_url else {
            return Ok(Location::of_home(&self.home));
        };
        Location::parse(url.value.as_str()).map_err(|why| {
            CliError::usage(format!("the ledger URL from {}: {why}", url.source.shown("ledger")))
                .with_help("write sqlite:///ABSOLUTE/PATH or postgres://USER@HOST[:PORT]/DATABASE (docs/fleet.md)")
        })
    }

    /// The secret providers the configuration names; `ask` asks for the
    /// file store's passphrase when it needs one.
    pub(crate) fn secret_providers(&self, ask: AskPassphrase) -> Result<Providers, CliError> {
        Ok(Providers::configured(&self.home, &self.config()?.secrets, ask)?)
    }
}

/// The secret providers `rlp` uses for `home` (its config.toml, then the
/// system config), for programs that resolve secrets the way rlp does. A
/// passphrase-protected store is opened with `passphrase_command` only:
/// nothing is asked on a terminal. The error says what is wrong with the
/// configuration, and what to do.
pub fn secret_providers(home: Home) -> Result<Providers, String> {
    let context = Context::new(home, ColorChoice::Never, None);
    let no_prompt: AskPassphrase = Arc::new(|_: &str, _: bool| Err("no one is asked here".to_string()));
    context.secret_providers(no_prompt).map_err(|e| match e.help {
        Some(help) => format!("{} ({help})", e.message),
        None => e.message,
    })
}
