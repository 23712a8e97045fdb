//! What `rlp tools call`, `rlp replay --mode live` and `rlp serve` share: a
//! runtime set up from the configuration layers, the home's ledger, a
//! confirmer that fits the terminal, and the bundle.

use std::path::Path;
use std::sync::Arc;

use crate::cli::Context;
use crate::cli::exit::CliError;
use crate::cli::output::{diagnostic, warning};
use crate::cli::terminal;
use crate::config::{self, Flags};
use crate::event::Recorder;
use crate::ledger::group::GroupCommit;
use crate::ledger::{LedgerStore, Location};
use crate::runtime::answer::{Answerer, NoAnswerer};
use crate::runtime::confirm::{Confirmer, NoTerminal, PreApproved};
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
    /// `rlp serve`: never a terminal prompt (standard input may carry the
    /// protocol; each call brings its own asker), and frames of concurrent
    /// calls group-committed.
    pub serving: bool,
}

impl<'a> RuntimeFlags<'a> {
    /// A runtime that only shows what the bundle offers (`tools list
    /// --format mcp`, `tools search`): it runs no call.
    pub(crate) fn inspecting(bundle: &'a Path) -> RuntimeFlags<'a> {
        RuntimeFlags { bundle, yes: false, confirm_external_actions: None, ask_questions: false, serving: false }
    }
}

/// Loads the configuration and the bundle into a runtime that records into
/// the home's ledger; prints the configuration's and the bundle's warnings.
/// Returns the ledger too, for commands that read back what they recorded.
pub(crate) fn load_runtime(flags: RuntimeFlags<'_>, ctx: &Context) -> Result<(Runtime, Arc<dyn Recorder>), CliError> {
    load(flags, ctx, flags.serving)
}

/// [`load_runtime`] for a command that makes many calls at once from the
/// terminal (`rlp tools call --batch`): confirmation and questions as for
/// one call (the terminal's prompts take turns, [`terminal::hold_prompts`]),
/// frames of concurrent calls group-committed as under `rlp serve`.
pub(crate) fn load_concurrent_runtime(
    flags: RuntimeFlags<'_>,
    ctx: &Context,
) -> Result<(Runtime, Arc<dyn Recorder>), CliError> {
    load(flags, ctx, true)
}

/// Loads the runtime; `group_commit` puts a [`GroupCommit`] writer in
/// front of the ledger.
fn load(flags: RuntimeFlags<'_>, ctx: &Context, group_commit: bool) -> Result<(Runtime, Arc<dyn Recorder>), CliError> {
    let loaded = config::load(&ctx.home, &Flags { confirm_external_actions: flags.confirm_external_actions })?;
    warn(&loaded.warnings);
    let ledger: Arc<dyn LedgerStore> = Location::of_home(&ctx.home)
        .open()
        .map_err(|e| {
            CliError::problem(format!("cannot open the ledger: {e}"))
                .with_help("check that the runtime home (--home or $RUNLOOP_HOME) is writable")
        })?
        .into();
    let ledger: Arc<dyn Recorder> = if group_commit {
        Arc::new(
            GroupCommit::start(ledger)
                .map_err(|e| CliError::problem(format!("cannot start the ledger writer: {e}")))?,
        )
    } else {
        ledger
    };
    let (confirmer, answerer): (Arc<dyn Confirmer>, Arc<dyn Answerer>) = if flags.serving {
        let confirmer: Arc<dyn Confirmer> = if flags.yes { Arc::new(PreApproved) } else { Arc::new(NoTerminal) };
        (confirmer, Arc::new(NoAnswerer))
    } else {
        (terminal::confirmer(flags.yes), terminal::answerer(flags.ask_questions))
    };
    let options = RuntimeOptions {
        home: ctx.home.clone(),
        config: loaded.config,
        secrets: Arc::new(EnvSecretResolver),
        recorder: ledger.clone(),
        confirmer,
        answerer,
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
