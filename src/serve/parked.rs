//! Calls waiting for a client's answers between two requests (2026-07-28):
//! a call that asked with an `InputRequiredResult` is kept here under a
//! random, unguessable `requestState` until the client's retry resumes it.
//! The handle is only a key: nothing the client sends back is trusted
//! beyond finding the call.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use crate::serve::asking::ANSWER_WAIT;
use crate::serve::calls::Pending;

/// Parked calls by `requestState`.
#[derive(Default)]
pub(crate) struct Parked {
    calls: Mutex<HashMap<String, (Instant, Pending)>>,
}

impl Parked {
    /// Parks `pending`; returns its `requestState` (none when the system
    /// has no randomness to give). Calls parked longer than their answers
    /// are waited for are let go.
    pub(crate) fn park(&self, pending: Pending) -> Option<String> {
        let mut secret = [0u8; 16];
        getrandom::fill(&mut secret).ok()?;
        let state = format!("rlp-{}", secret.iter().map(|b| format!("{b:02x}")).collect::<String>());
        if let Ok(mut calls) = self.calls.lock() {
            calls.retain(|_, (since, _)| since.elapsed() < ANSWER_WAIT);
            calls.insert(state.clone(), (Instant::now(), pending));
        }
        Some(state)
    }

    /// Takes the call parked under `state`, if there is one.
    pub(crate) fn take(&self, state: &str) -> Option<Pending> {
        self.calls.lock().ok()?.remove(state).map(|(_, pending)| pending)
    }
}
