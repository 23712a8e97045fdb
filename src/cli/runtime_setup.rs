//! What `rlp tools call` and `rlp replay --mode live` share: a runtime set up
//! from the configuration layers, the home's ledger, a confirmer that fits
//! the terminal, and the bundle.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::cli::Context;
use crate::cli::exit::CliError;
use crate::cli::output::{diagnostic, stdin_is_terminal, warning};
use crate::config::{self, Flags};
use crate::runtime::confirm::{ConfirmRequest, Confirmation, Confirmer, NoTerminal, PreApproved, prompt_text};
use crate::runtime::recorder::Recorder;
use crate::runtime::secrets::EnvSecretResolver;
use crate::runtime::{LoadError, Runtime, RuntimeOptions};
use crate::trace::Ledger;

/// The flags that shape a runtime.
#[derive(Clone, Copy, Debug)]
pub struct RuntimeFlags<'a> {
    /// The bundle folder.
    pub bundle: &'a Path,
    /// `--yes`: approve calls that need confirmation.
    pub yes: bool,
    /// `--confirm-external-actions`.
    pub confirm_external_actions: Option<bool>,
}

/// Loads the configuration and the bundle into a runtime that records into
/// the home's ledger; prints the configuration's and the bundle's warnings.
/// Returns the ledger too, for commands that read back what they recorded.
pub fn load_runtime(flags: RuntimeFlags<'_>, ctx: &Context) -> Result<(Runtime, Arc<dyn Recorder>), CliError> {
    let loaded = config::load(&ctx.home, &Flags { confirm_external_actions: flags.confirm_external_actions })
        .map_err(|e| CliError::usage(e.message).with_help(e.help))?;
    warn(&loaded.warnings);
    let ledger: Arc<dyn Recorder> = Arc::new(Ledger::open_home(&ctx.home).map_err(|e| {
        CliError::problem(format!("cannot open the ledger: {e}"))
            .with_help("check that the runtime home (--home or $RUNLOOP_HOME) is writable")
    })?);
    let confirmer: Arc<dyn Confirmer> = if flags.yes {
        Arc::new(PreApproved)
    } else if stdin_is_terminal() && std::io::stderr().is_terminal() {
        Arc::new(TerminalConfirmer { lock: Mutex::new(()) })
    } else {
        Arc::new(NoTerminal)
    };
    let options = RuntimeOptions {
        home: ctx.home.clone(),
        config: loaded.config,
        secrets: Arc::new(EnvSecretResolver),
        recorder: ledger.clone(),
        confirmer,
    };
    let runtime = Runtime::load(flags.bundle, options).map_err(load_error)?;
    warn(runtime.warnings());
    if let Some(note) = runtime.trust_note() {
        diagnostic(&format!("note: {}", crate::text::terminal_safe(&note)));
    }
    Ok((runtime, ledger))
}

/// A bundle that cannot be loaded is a usage error (exit 2).
pub fn load_error(e: LoadError) -> CliError {
    let error = CliError::usage(e.message);
    match e.help {
        Some(help) => error.with_help(help),
        None => error,
    }
}

fn warn(lines: &[String]) {
    for line in lines {
        warning(line);
    }
}

/// Asks on the terminal (stderr), one prompt at a time.
struct TerminalConfirmer {
    lock: Mutex<()>,
}

impl Confirmer for TerminalConfirmer {
    fn confirm(&self, request: &ConfirmRequest<'_>) -> Confirmation {
        let _guard = self.lock.lock();
        let text = prompt_text(request);
        let (details, question) = text.rsplit_once('\n').unwrap_or(("", text.as_str()));
        diagnostic(&crate::text::terminal_safe(details));
        match dialoguer::Confirm::new().with_prompt(question).default(false).interact_opt() {
            Ok(Some(true)) => Confirmation { approved: true, by: "operator".into(), how: "terminal prompt".into() },
            Ok(_) => {
                Confirmation { approved: false, by: "operator".into(), how: "declined at the terminal prompt".into() }
            }
            Err(e) => Confirmation { approved: false, by: "runtime".into(), how: format!("the prompt failed: {e}") },
        }
    }
}
