//! Calls waiting for their final result, keyed by invocation id.
//!
//! Import, show and replay walk a trace once, in order; the only state they
//! keep is this table, so memory follows the number of calls in flight, not
//! the length of the trace. A call leaves the table at its final result (a
//! result frame that is not followed by a retry).

use std::collections::HashMap;

use uuid::Uuid;

/// A call waiting for its result.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Pending<T> {
    /// The call frame's position in the trace.
    pub position: u64,
    /// Whatever the walker keeps about the call.
    pub data: T,
}

/// The calls in flight.
#[derive(Debug)]
pub(crate) struct PendingCalls<T> {
    calls: HashMap<Uuid, Pending<T>>,
}

impl<T> Default for PendingCalls<T> {
    fn default() -> Self {
        PendingCalls { calls: HashMap::new() }
    }
}

impl<T> PendingCalls<T> {
    /// An empty table.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Registers a call; `Err(position)` of the earlier call when the
    /// invocation id is already waiting (the new call is not registered).
    pub(crate) fn open(&mut self, invocation_id: Uuid, position: u64, data: T) -> Result<(), u64> {
        if let Some(earlier) = self.calls.get(&invocation_id) {
            return Err(earlier.position);
        }
        self.calls.insert(invocation_id, Pending { position, data });
        Ok(())
    }

    /// The waiting call with this id.
    pub(crate) fn get(&self, invocation_id: &Uuid) -> Option<&Pending<T>> {
        self.calls.get(invocation_id)
    }

    /// The waiting call with this id, to update.
    pub(crate) fn get_mut(&mut self, invocation_id: &Uuid) -> Option<&mut Pending<T>> {
        self.calls.get_mut(invocation_id)
    }

    /// Removes the call (its final result arrived).
    pub(crate) fn close(&mut self, invocation_id: &Uuid) -> Option<Pending<T>> {
        self.calls.remove(invocation_id)
    }

    /// How many calls wait.
    pub(crate) fn len(&self) -> usize {
        self.calls.len()
    }

    /// The calls still waiting, by position (the end of a trace: calls
    /// without a final result).
    pub(crate) fn into_sorted(self) -> Vec<(Uuid, Pending<T>)> {
        let mut left: Vec<(Uuid, Pending<T>)> = self.calls.into_iter().collect();
        left.sort_by_key(|(id, p)| (p.position, *id));
        left
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_closes_and_sorts_leftovers() {
        let mut calls = PendingCalls::new();
        let (a, b, c) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        calls.open(c, 9, "c").unwrap();
        calls.open(a, 1, "a").unwrap();
        assert_eq!(calls.open(a, 4, "again"), Err(1));
        calls.open(b, 5, "b").unwrap();
        assert_eq!(calls.close(&a).map(|p| p.data), Some("a"));
        assert_eq!(calls.close(&a), None);
        assert_eq!(calls.len(), 2);
        let left: Vec<u64> = calls.into_sorted().into_iter().map(|(_, p)| p.position).collect();
        assert_eq!(left, [5, 9]);
    }
}
