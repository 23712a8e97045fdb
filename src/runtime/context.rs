//! What one call brings besides its request: who confirms it and answers
//! its tool's questions (over MCP, the client that made the call), how it is
//! cancelled, and who hears of its progress. The runtime's own
//! [`crate::runtime::RuntimeOptions`] fill in whatever a call leaves out.

use std::fmt;
use std::sync::Arc;

use crate::process::cancel::Cancel;
use crate::runtime::answer::Answerer;
use crate::runtime::confirm::Confirmer;

/// A step of a call, or what its MCP server says on the way, as
/// [`ProgressSink`]s hear of it.
#[derive(Clone, Debug, PartialEq)]
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
    /// The MCP server of the call reported progress during an attempt.
    Reported {
        /// The attempt number, from 1.
        attempt: u32,
        /// How far, as the server counts.
        progress: f64,
        /// Out of how much, when it says.
        total: Option<f64>,
        /// What it says (scrubbed).
        message: Option<String>,
    },
    /// The MCP server of the call sent a log message during an attempt
    /// (`notifications/message`).
    Logged {
        /// Its level, as the protocol names it (`debug` … `emergency`).
        level: String,
        /// The logger that sent it, when it says.
        logger: Option<String>,
        /// What it says (scrubbed).
        data: serde_json::Value,
    },
}

/// Asks a model on behalf of an MCP server during a call
/// (`sampling/createMessage`): `rlp serve` relays to its client.
pub trait Sampler: Send + Sync {
    /// Answers the request's params with a `CreateMessageResult`, or says
    /// why not.
    fn sample(&self, request: &serde_json::Value) -> Result<serde_json::Value, String>;
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
    /// Asks a model for an MCP server that wants one; without it, sampling
    /// is refused.
    pub sampler: Option<Arc<dyn Sampler>>,
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
            .field("sampler", &self.sampler.is_some())
            .finish()
    }
}
