//! What `rlp tools call`, `rlp replay --mode live`, `rlp serve` and the
//! commands that only show a bundle's tools share: a runtime set up from the
//! configuration layers, the home's ledger (none for those that only show),
//! a confirmer that fits the terminal, and the bundle.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use uuid::Uuid;

use crate::cli::Context;
use crate::cli::exit::CliError;
use crate::cli::output::{diagnostic, warning};
use crate::cli::terminal;
use crate::config::tool_list::ToolPattern;
use crate::event::{Record, RecordError, Recorder, Usage};
use crate::ledger::group::GroupCommit;
use crate::ledger::{LedgerStore, Location};
use crate::runtime::answer::{Answerer, NoAnswerer};
use crate::runtime::confirm::{Confirmer, NoTerminal, PreApproved};
use crate::runtime::recorder::NullRecorder;
use crate::runtime::{Runtime, RuntimeOptions};
use crate::sandbox::SandboxMode;

/// The flags that shape a runtime.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RuntimeFlags<'a> {
    /// The bundle folder.
    pub bundle: &'a Path,
    /// `--yes`: approve calls that need confirmation.
    pub yes: bool,
    /// `--confirm-external-actions`.
    pub confirm_external_actions: Option<bool>,
    /// `rlp serve --tools`: allow patterns over and above the config's lists.
    pub tools: Option<&'a [ToolPattern]>,
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
    /// --format mcp`, `tools search`): it runs no call, so it records
    /// nothing and needs no ledger (a read-only home will do).
    pub(crate) fn inspecting(bundle: &'a Path) -> Setup<'a> {
        Setup::Inspection(bundle)
    }
}

/// What a runtime is loaded for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Setup<'a> {
    /// Making calls, recorded in the home's ledger.
    Calls(RuntimeFlags<'a>),
    /// Showing the tools of the bundle at this path, without a ledger.
    Inspection(&'a Path),
}

impl<'a> From<RuntimeFlags<'a>> for Setup<'a> {
    fn from(flags: RuntimeFlags<'a>) -> Setup<'a> {
        Setup::Calls(flags)
    }
}

/// Loads the configuration and the bundle into a runtime that records into
/// the home's ledger (or, for an inspection, nowhere); prints the
/// configuration's and the bundle's warnings. Returns the recorder too, for
/// commands that read back what they recorded.
pub(crate) fn load_runtime<'a>(
    setup: impl Into<Setup<'a>>,
    ctx: &Context,
) -> Result<(Runtime, Arc<dyn Recorder>), CliError> {
    match setup.into() {
        Setup::Calls(flags) => load(flags, ctx, flags.serving),
        Setup::Inspection(bundle) => {
            let flags = RuntimeFlags {
                bundle,
                yes: false,
                confirm_external_actions: None,
                tools: None,
                ask_questions: false,
                serving: false,
            };
            load_with(flags, ctx, || Ok(Arc::new(NullRecorder)))
        }
    }
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

/// Loads the runtime recording into the home's ledger; `group_commit` puts
/// a [`GroupCommit`] writer in front of it.
fn load(flags: RuntimeFlags<'_>, ctx: &Context, group_commit: bool) -> Result<(Runtime, Arc<dyn Recorder>), CliError> {
    load_with(flags, ctx, || {
        let ledger: Arc<dyn LedgerStore> = match ctx.ledger()? {
            // A PostgreSQL ledger's own error says what to check (exit 2).
            location @ Location::Postgres(_) => location.open()?,
            location => location.open().map_err(|e| {
                // What lies at the ledger's path is named by the error itself (exit 2).
                if e.is_not_a_ledger() {
                    return e.into();
                }
                CliError::problem(format!("cannot open the ledger: {e}"))
                    .with_help("check that the runtime home (--home or $RUNLOOP_HOME) is writable")
            })?,
        }
        .into();
        if !group_commit {
            return Ok(ledger);
        }
        let writer = GroupCommit::start(ledger)
            .map_err(|e| CliError::problem(format!("cannot start the ledger writer: {e}")))?;
        Ok(Arc::new(writer))
    })
}

/// Loads the configuration, then the bundle into a runtime and the
/// kernel's verdict for the sandbox, while the recorder `recorder` opens
/// on a thread of its own (reading the ledger's journal, for one, takes
/// milliseconds); live spans go
/// in front of it when the OpenTelemetry variables turn them on. The
/// ledger's error, if any, is the one reported.
fn load_with(
    flags: RuntimeFlags<'_>,
    ctx: &Context,
    recorder: impl FnOnce() -> Result<Arc<dyn Recorder>, CliError> + Send,
) -> Result<(Runtime, Arc<dyn Recorder>), CliError> {
    let config = ctx.config_with(flags.confirm_external_actions, flags.tools)?;
    warn(ctx.config_warnings()?);
    let opening = Arc::new(Opening::default());
    let sandboxed = config.sandbox.value != SandboxMode::Off;
    let (runtime, traced) = std::thread::scope(|scope| {
        let ledger = scope.spawn(recorder);
        let runtime = load_bundle(flags, ctx, config, opening.clone());
        // The kernel's verdict, kept in the home, is read while the ledger
        // is still opening (the kernel is probed only where none is kept
        // for this context): a thread of its own costs a call more than that.
        if sandboxed && runtime.is_ok() {
            crate::sandbox::probe_kernel(&crate::sandbox::kernel_cache::KernelCache::new(&ctx.home));
        }
        let ledger = ledger.join().unwrap_or_else(|_| Err(CliError::problem("opening the ledger failed")))?;
        Ok::<_, CliError>((runtime?, crate::cli::spans::traced(ledger)))
    })?;
    let recorder = traced.recorder();
    // Nothing was recorded yet: the runtime records from here on.
    let _ = opening.0.set(recorder.clone());
    traced.loaded(&runtime);
    warn(runtime.warnings());
    if let Some(note) = runtime.trust_note() {
        diagnostic(&format!("note: {}", crate::text::terminal_safe(&note)));
    }
    Ok((runtime, recorder))
}

/// The bundle loaded into a runtime with `config`, recording into `recorder`.
fn load_bundle(
    flags: RuntimeFlags<'_>,
    ctx: &Context,
    config: crate::config::Config,
    recorder: Arc<Opening>,
) -> Result<Runtime, CliError> {
    let (confirmer, answerer): (Arc<dyn Confirmer>, Arc<dyn Answerer>) = if flags.serving {
        let confirmer: Arc<dyn Confirmer> = if flags.yes { Arc::new(PreApproved) } else { Arc::new(NoTerminal) };
        (confirmer, Arc::new(NoAnswerer))
    } else {
        (terminal::confirmer(flags.yes), terminal::answerer(flags.ask_questions))
    };
    let secrets = ctx.secret_providers(terminal::passphrase_asker())?;
    let options =
        RuntimeOptions { home: ctx.home.clone(), config, secrets: Arc::new(secrets), recorder, confirmer, answerer };
    let runtime = Runtime::load(flags.bundle, options)?;
    Ok(runtime)
}

/// What a runtime records into while its ledger is still opening
/// ([`load_with`]): the ledger, once it is open, which is before any call.
#[derive(Default)]
struct Opening(OnceLock<Arc<dyn Recorder>>);

impl Opening {
    fn ledger(&self) -> Result<&Arc<dyn Recorder>, RecordError> {
        self.0.get().ok_or_else(|| RecordError::new("the ledger is not open yet"))
    }
}

impl Recorder for Opening {
    fn record(&self, batch: &[Record]) -> Result<(), RecordError> {
        self.ledger()?.record(batch)
    }

    fn usage(&self, trace_id: Uuid, tool: &str) -> Result<Usage, RecordError> {
        self.ledger()?.usage(trace_id, tool)
    }
}

fn warn(lines: &[String]) {
    for line in lines {
        warning(line);
    }
}
