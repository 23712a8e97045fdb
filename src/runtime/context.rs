//! What one call brings besides its request: who confirms it and answers
//! its tool's questions (over MCP, the client that made the call), how it is
//! cancelled, and who hears of its progress. The runtime's own
//! [`crate::runtime::RuntimeOptions`] fill in whatever a call leaves out.

use std::fmt;
use std::sync::Arc;

use crate::process::cancel::Cancel;
use crate::runtime::answer::Answerer;
use crate::runtime::confirm::Confirmer;

/// A step of a call, as [`ProgressSink`]s hear of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// An attempt starts (1, 2, … of at most `of`).
    AttemptStarted {
        /// The attempt number, from 1.
        attempt: u32,
        /// The most attempts the tool allows.
        of: u32,
    },
    /// An attempt ended (`ok`: it produced a result or questions).
    AttemptEnded {
        /// The attempt number, from 1.
        attempt: u32,
        /// The most attempts the tool allows.
        of: u32,
        /// Whether it succeeded.
        ok: bool,
    },
}

/// Hears of a call's progress. Called from the call's thread.
pub trait ProgressSink: Send + Sync {
    /// One step.
    fn progress(&self, step: Progress);
}

/// The per-call parts of a call (all optional).
#[derive(Clone, Default)]
pub struct CallContext {
    /// Confirms this call instead of the runtime's confirmer.
    pub confirmer: Option<Arc<dyn Confirmer>>,
    /// Answers this call's questions instead of the runtime's answerer.
    pub answerer: Option<Arc<dyn Answerer>>,
    /// Cancels the call: a running tool is killed with everything it
    /// started, and the result is recorded as cancelled.
    pub cancel: Option<Cancel>,
    /// Hears of each attempt's start and end.
    pub progress: Option<Arc<dyn ProgressSink>>,
}

impl CallContext {
    /// Tells the progress sink, if any.
    pub(crate) fn report(&self, step: Progress) {
        if let Some(sink) = &self.progress {
            sink.progress(step);
        }
    }

    /// Whether the call was cancelled.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(Cancel::is_cancelled)
    }
}

impl fmt::Debug for CallContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallContext")
            .field("confirmer", &self.confirmer.is_some())
            .field("answerer", &self.answerer.is_some())
            .field("cancel", &self.cancel)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}
