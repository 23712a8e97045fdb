//! Letting go of kernel objects off a call's path: what does slow work when
//! it is dropped — a private folder freed on a file system mounted with
//! `discard`, a tool's mount namespace torn down (an RCU grace period) —
//! is dropped on a background thread instead of in the call.

use std::sync::OnceLock;
use std::sync::mpsc::{SyncSender, sync_channel};

/// Most values waiting to be dropped on the background thread.
const PENDING: usize = 64;
/// Stack size of that thread (it only closes descriptors).
const STACK: usize = 64 * 1024;

/// Something to drop later.
type Held = Box<dyn Send>;

/// Drops `value` on the background thread. When that thread falls behind
/// by [`PENDING`] values, or cannot be started, `value` is dropped here.
pub(crate) fn later(value: impl Send + 'static) {
    if let Some(releaser) = releaser() {
        // A full queue hands the value back, and it is dropped here.
        let _ = releaser.try_send(Box::new(value));
    }
}

/// Starts the background thread if it is not running yet: called while a
/// tool runs, so that a process making one call does not start it after
/// the tool has exited, on the call's path.
pub(crate) fn start() {
    releaser();
}

/// The sending end of the background thread's queue, the thread started
/// on the first call; `None` where it cannot be started.
fn releaser() -> Option<&'static SyncSender<Held>> {
    static RELEASER: OnceLock<Option<SyncSender<Held>>> = OnceLock::new();
    RELEASER
        .get_or_init(|| {
            let (sender, receiver) = sync_channel::<Held>(PENDING);
            let thread = std::thread::Builder::new().name("rlp-release".into()).stack_size(STACK);
            thread.spawn(move || receiver.into_iter().for_each(drop)).ok().map(|_| sender)
        })
        .as_ref()
}
