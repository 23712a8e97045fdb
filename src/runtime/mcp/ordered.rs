//! The transport under rlp's client of a server, which hands the server's
//! progress and log messages to the waiting call as they are received.
//!
//! The SDK runs each notification's handler as a task of its own, while an
//! answer goes straight to the request that waits for it: a message the
//! server sent just before its answer could reach the call after the
//! answer, and be lost, or be waited for. Read here, in the order the
//! server sent them, they are in the call's queue before its answer is.

use std::borrow::Cow;
use std::future::Future;

use rmcp::model::{JsonRpcMessage, JsonRpcNotification, ServerNotification};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use super::client::Listener;

/// A transport whose received progress and log messages go to
/// [`Listener`] before the SDK sees them.
pub(crate) struct Ordered<T> {
    inner: T,
    listener: Listener,
}

impl<T> Ordered<T> {
    /// `inner`, its progress and log messages heard by `listener`.
    pub(crate) fn new(inner: T, listener: Listener) -> Self {
        Ordered { inner, listener }
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
