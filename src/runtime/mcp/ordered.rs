//! The transport under rlp's client of a server, which hands the server's
//! progress and log messages to the waiting call as they are received, and
//! stops reading a server that floods rlp with requests.
//!
//! The SDK runs each notification's handler as a task of its own, while an
//! answer goes straight to the request that waits for it: a message the
//! server sent just before its answer could reach the call after the
//! answer, and be lost, or be waited for. Read here, in the order the
//! server sent them, they are in the call's queue before its answer is.

use std::borrow::Cow;
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use rmcp::model::{JsonRpcMessage, JsonRpcNotification, ServerNotification};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use super::client::Listener;

/// Requests (`ping`, sampling, elicitation, `roots/list`) a server may send
/// at once, and per second after that. The SDK answers each on a task of
/// its own, whose answer waits until the server reads it: a server that
/// sends requests without reading would grow rlp's memory without bound.
const REQUEST_BURST: f64 = 1024.0;
/// (See [`REQUEST_BURST`].)
const REQUESTS_PER_SECOND: f64 = 256.0;

/// A transport whose received progress and log messages go to
/// [`Listener`] before the SDK sees them, and that ends (the session with
/// it) when the server sends requests past [`REQUEST_BURST`] and
/// [`REQUESTS_PER_SECOND`], saying why in `stopped`.
pub(crate) struct Ordered<T> {
    inner: T,
    listener: Listener,
    requests: Budget,
    stopped: Arc<OnceLock<String>>,
}

impl<T> Ordered<T> {
    /// `inner`, its progress and log messages heard by `listener`; why it
    /// stopped reading, if it did, in `stopped`.
    pub(crate) fn new(inner: T, listener: Listener, stopped: Arc<OnceLock<String>>) -> Self {
        Ordered { inner, listener, requests: Budget::new(REQUEST_BURST, REQUESTS_PER_SECOND), stopped }
    }
}

/// A token bucket: `burst` at once, refilled at `rate` a second.
struct Budget {
    burst: f64,
    rate: f64,
    left: f64,
    at: Instant,
}

impl Budget {
    fn new(burst: f64, rate: f64) -> Budget {
        Budget { burst, rate, left: burst, at: Instant::now() }
    }

    /// Takes one; false when none is left.
    fn take(&mut self, now: Instant) -> bool {
        let refill = now.saturating_duration_since(self.at).as_secs_f64() * self.rate;
        self.left = (self.left + refill).min(self.burst);
        self.at = now;
        if self.left < 1.0 {
            return false;
        }
        self.left -= 1.0;
        true
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Ordered<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await?;
        if matches!(message, JsonRpcMessage::Request(_)) && !self.requests.take(Instant::now()) {
            let _ = self.stopped.set(format!(
                "sent requests faster than rlp answers them (over {REQUEST_BURST} at once, or {REQUESTS_PER_SECOND} a second after that), so rlp stopped reading it"
            ));
            return None;
        }
        if let JsonRpcMessage::Notification(JsonRpcNotification { notification, .. }) = &message {
            match notification {
                ServerNotification::ProgressNotification(progress) => self.listener.progress(&progress.params),
                ServerNotification::LoggingMessageNotification(log) => self.listener.log(&log.params),
                _ => {}
            }
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_budget_gives_its_burst_then_its_rate() {
        let start = Instant::now();
        let mut budget = Budget::new(3.0, 2.0);
        assert!((0..3).all(|_| budget.take(start)));
        assert!(!budget.take(start));
        // Half a second brings one back; a long pause no more than the burst.
        assert!(budget.take(start + Duration::from_millis(500)));
        assert!(!budget.take(start + Duration::from_millis(500)));
        let later = start + Duration::from_secs(60);
        assert!((0..3).all(|_| budget.take(later)));
        assert!(!budget.take(later));
    }
}
