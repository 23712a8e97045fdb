//! The terminal as the concurrent calls of a batch share it: one prompt at
//! a time, confirmation or question alike, and no result printed in the
//! middle of one.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::runtime::CallContext;
use crate::runtime::answer::{AnswerRequest, Answerer, GivenAnswer};
use crate::runtime::confirm::{ConfirmRequest, Confirmation, Confirmer};

/// The confirmer and answerer of a batch's calls, behind one lock.
pub(super) struct Screen {
    lock: Mutex<()>,
    confirmer: Arc<dyn Confirmer>,
    answerer: Arc<dyn Answerer>,
}

impl Screen {
    /// Serialises `confirmer` and `answerer` (the terminal's, as for one call).
    pub(super) fn new(confirmer: Arc<dyn Confirmer>, answerer: Arc<dyn Answerer>) -> Arc<Screen> {
        Arc::new(Screen { lock: Mutex::new(()), confirmer, answerer })
    }

    /// Holds the terminal until the guard is dropped: no prompt starts meanwhile.
    pub(super) fn hold(&self) -> MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What each call of the batch runs with: this screen to confirm and answer.
    pub(super) fn context(self: &Arc<Self>) -> CallContext {
        CallContext {
            confirmer: Some(Arc::clone(self) as Arc<dyn Confirmer>),
            answerer: Some(Arc::clone(self) as Arc<dyn Answerer>),
            ..CallContext::default()
        }
    }
}

impl Confirmer for Screen {
    fn confirm(&self, request: &ConfirmRequest<'_>) -> Confirmation {
        let _held = self.hold();
        self.confirmer.confirm(request)
    }

    fn refusal_help(&self) -> Option<String> {
        self.confirmer.refusal_help()
    }
}

impl Answerer for Screen {
    fn answer(&self, request: &AnswerRequest<'_>) -> Vec<GivenAnswer> {
        let _held = self.hold();
        self.answerer.answer(request)
    }

    fn unanswered_help(&self) -> Option<String> {
        self.answerer.unanswered_help()
    }
}
