//! What `rlp tools call` and `rlp replay --mode live` share: a runtime set up
//! from the configuration layers, the home's ledger, a confirmer that fits
//! the terminal, and the bundle.

use std::path::Path;
use std::sync::Arc;

use crate::cli::Context;
use crate::cli::exit::CliError;
use crate::cli::output::{diagnostic, warning};
use crate::cli::terminal;
use crate::config::{self, Flags};
use crate::event::Recorder;
use crate::ledger::{LedgerStore, Location};
use crate::runtime::secrets::EnvSecretResolver;
use crate::runtime::{Runtime, RuntimeOptions};

/// The flags that shape a runtime.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RuntimeFlags<'a> {
    /// The bundle folder.
    pub bundle: &'a Path,
    /// `--yes`: approve calls that need confirmation.
    pub yes: bool,
    /// `--confirm-external-actions`.
    pub confirm_external_actions: Option<bool>,
    /// Whether the person at the terminal answers tools' questions (live
    /// replay answers only from the recording).
    pub ask_questions: bool,
}

/// Loads the configuration and the bundle into a runtime that records into
/// the home's ledger; prints the configuration's and the bundle's warnings.
/// Returns the ledger too, for commands that read back what they recorded.
pub(crate) fn load_runtime(flags: RuntimeFlags<'_>, ctx: &Context) -> Result<(Runtime, Arc<dyn Recorder>), CliError> {
    let loaded = config::load(&ctx.home, &Flags { confirm_external_actions: flags.confirm_external_actions })?;
    warn(&loaded.warnings);
    let ledger: Arc<dyn LedgerStore> = Location::of_home(&ctx.home)
        .open()
        .map_err(|e| {
            CliError::problem(format!("cannot open the ledger: {e}"))
                .with_help("check that the runtime home (--home or $RUNLOOP_HOME) is writable")
        })?
        .into();
    let ledger: Arc<dyn Recorder> = ledger;
    let options = RuntimeOptions {
        home: ctx.home.clone(),
        config: loaded.config,
        secrets: Arc::new(EnvSecretResolver),
        recorder: ledger.clone(),
        confirmer: terminal::confirmer(flags.yes),
        answerer: terminal::answerer(flags.ask_questions),
    };
    let runtime = Runtime::load(flags.bundle, options)?;
    warn(runtime.warnings());
    if let Some(note) = runtime.trust_note() {
        diagnostic(&format!("note: {}", crate::text::terminal_safe(&note)));
    }
    Ok((runtime, ledger))
}

fn warn(lines: &[String]) {
    for line in lines {
        warning(line);
    }
}
