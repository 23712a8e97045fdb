//! MCP logging for the client of `rlp serve`: the level it sets
//! (`logging/setLevel`) and which log messages of bridged servers pass it.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The protocol's levels, least severe first (RFC 5424's order).
const LEVELS: [&str; 8] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

/// How severe `level` is (its place in [`LEVELS`]); an unknown level is
/// taken as `info`.
fn severity(level: &str) -> usize {
    LEVELS.iter().position(|l| *l == level).unwrap_or(1)
}

/// The least severe level a session's client wants: every level until it
/// sets one, as the reference SDKs do.
#[derive(Debug, Default)]
pub(crate) struct LogThreshold(AtomicUsize);

impl LogThreshold {
    /// Sets the threshold to `level` (`debug` … `emergency`).
    pub(crate) fn set(&self, level: &str) {
        self.0.store(severity(level), Ordering::Relaxed);
    }

    /// Whether a message at `level` goes to the client.
    pub(crate) fn passes(&self, level: &str) -> bool {
        severity(level) >= self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_level_passes_until_one_is_set_then_only_as_severe_or_more() {
        let threshold = LogThreshold::default();
        assert!(threshold.passes("debug"));
        threshold.set("warning");
        assert!(!threshold.passes("info"));
        assert!(threshold.passes("warning"));
        assert!(threshold.passes("emergency"));
        assert!(!threshold.passes("made-up"));
    }
}
