//! A bounded pool of threads working through a list in order, whose results
//! are handed on in input order as soon as every earlier one is.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError, mpsc};

/// How far, in items a thread, the work may run ahead of the results handed
/// on: item `i` starts only once `i < handed on + WINDOW_PER_JOB * jobs`, so
/// a slow early item holds back a bounded number of later results.
const WINDOW_PER_JOB: usize = 4;

/// Where the handing on stands, as the threads wait on it.
struct Progress {
    /// Results handed on so far.
    emitted: usize,
    /// `emit` returned `Break`: no further item starts.
    stopped: bool,
}

/// The progress the threads wait on, and its signal.
struct Gate {
    progress: Mutex<Progress>,
    moved: Condvar,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until item `index` is within `window` of the results handed
    /// on; false once the pool stopped.
    fn admit(&self, index: usize, window: usize) -> bool {
        let mut progress = self.lock();
        while !progress.stopped && index >= progress.emitted.saturating_add(window) {
            progress = self.moved.wait(progress).unwrap_or_else(PoisonError::into_inner);
        }
        !progress.stopped
    }

    /// Records the results handed on, and whether the pool stopped; wakes
    /// the waiting threads.
    fn advance(&self, emitted: usize, stopped: bool) {
        let mut progress = self.lock();
        progress.emitted = emitted;
        progress.stopped |= stopped;
        drop(progress);
        self.moved.notify_all();
    }
}

/// Runs `work` on every item of `items`, at most `jobs` at once: that many
/// scoped threads take the items in turn from a shared queue, none more than
/// [`WINDOW_PER_JOB`] × `jobs` items ahead of the results handed on. Hands
/// each result to `emit` (on the calling thread) in input order, as soon as
/// the results of all earlier items have been handed on. Once `emit`
/// returns `Break`, no further item starts; those already running finish,
/// unheard (`emit` may make them end early, e.g. by cancelling them).
///
/// Fails only when not one thread could be started.
pub(super) fn run_in_order<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    work: impl Fn(&T) -> R + Sync,
    mut emit: impl FnMut(&T, R) -> ControlFlow<()>,
) -> std::io::Result<()> {
    let next = AtomicUsize::new(0);
    let gate = Gate { progress: Mutex::new(Progress { emitted: 0, stopped: false }), moved: Condvar::new() };
    let window = jobs.saturating_mul(WINDOW_PER_JOB);
    let (sender, results) = mpsc::channel();
    std::thread::scope(|scope| {
        let mut started = 0;
        for _ in 0..jobs.min(items.len()) {
            let (next, gate, work, sender) = (&next, &gate, &work, sender.clone());
            let worker = move || {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(index) else { break };
                    if !gate.admit(index, window) || sender.send((index, work(item))).is_err() {
                        break;
                    }
                }
            };
            match std::thread::Builder::new().name("rlp-batch".into()).spawn_scoped(scope, worker) {
                Ok(_) => started += 1,
                Err(e) if started == 0 => return Err(e),
                Err(_) => break,
            }
        }
        drop(sender);
        let mut done: Vec<Option<R>> = items.iter().map(|_| None).collect();
        let (mut emitted, mut stopped) = (0, false);
        for (index, result) in results {
            done[index] = Some(result);
            let before = emitted;
            while let Some(result) = done.get_mut(emitted).and_then(Option::take) {
                if !stopped && emit(&items[emitted], result).is_break() {
                    stopped = true;
                }
                emitted += 1;
            }
            if emitted != before {
                gate.advance(emitted, stopped);
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emits_in_input_order_with_at_most_jobs_at_once() {
        let items: Vec<u64> = (0..40).collect();
        let running = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let mut seen = Vec::new();
        run_in_order(
            &items,
            4,
            |&n| {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                // Later items finish first.
                std::thread::sleep(std::time::Duration::from_millis((40 - n) % 7));
                running.fetch_sub(1, Ordering::SeqCst);
                n * 2
            },
            |&n, doubled| {
                assert_eq!(doubled, n * 2);
                seen.push(n);
                ControlFlow::Continue(())
            },
        )
        .unwrap();
        assert_eq!(seen, items);
        assert!(most.load(Ordering::SeqCst) <= 4);
    }

    #[test]
    fn no_item_starts_more_than_the_window_ahead_of_the_output() {
        let items: Vec<usize> = (0..200).collect();
        let emitted = AtomicUsize::new(0);
        let mut seen = Vec::new();
        run_in_order(
            &items,
            2,
            |&n| {
                // A slow first item: the other thread runs as far as the window lets it.
                if n == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                assert!(n < emitted.load(Ordering::SeqCst) + 2 * WINDOW_PER_JOB, "item {n} started too early");
                n
            },
            |&n, _| {
                emitted.fetch_add(1, Ordering::SeqCst);
                seen.push(n);
                ControlFlow::Continue(())
            },
        )
        .unwrap();
        assert_eq!(seen, items);
    }

    #[test]
    fn nothing_is_emitted_after_a_break() {
        let items: Vec<u32> = (0..100).collect();
        let mut seen = Vec::new();
        run_in_order(
            &items,
            3,
            |&n| n,
            |&n, _| {
                seen.push(n);
                if n == 2 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
            },
        )
        .unwrap();
        assert_eq!(seen, [0, 1, 2]);
        run_in_order(&[] as &[u32], 8, |_| (), |_, ()| ControlFlow::Continue(())).unwrap();
    }
}
