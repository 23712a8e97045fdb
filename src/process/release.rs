//! Letting go of kernel objects off a call's path: a descriptor whose last
//! close does slow work — a private folder freed on a file system mounted
//! with `discard`, a tool's mount namespace torn down (an RCU grace period)
//! — is closed on a background thread instead of in the call.

use std::os::fd::OwnedFd;
use std::sync::OnceLock;
use std::sync::mpsc::{SyncSender, sync_channel};

/// Most descriptors waiting to be closed on the background thread.
const PENDING: usize = 64;
/// Stack size of that thread (it only closes descriptors).
const STACK: usize = 64 * 1024;

/// Closes `fd` on the background thread. When that thread falls behind by
/// [`PENDING`] descriptors, or cannot be started, `fd` is closed here.
pub(crate) fn later(fd: OwnedFd) {
    static RELEASER: OnceLock<Option<SyncSender<OwnedFd>>> = OnceLock::new();
    let releaser = RELEASER.get_or_init(|| {
        let (sender, receiver) = sync_channel::<OwnedFd>(PENDING);
        let thread = std::thread::Builder::new().name("rlp-release".into()).stack_size(STACK);
        thread.spawn(move || receiver.into_iter().for_each(drop)).ok().map(|_| sender)
    });
    if let Some(releaser) = releaser {
        // A full queue hands the descriptor back, and dropping it closes it here.
        let _ = releaser.try_send(fd);
    }
}
