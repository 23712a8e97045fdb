//! A bounded pool of threads working through a list in order, whose results
//! are handed on in input order as soon as every earlier one is.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

/// Runs `work` on every item of `items`, at most `jobs` at once: that many
/// scoped threads take the items in turn from a shared queue. Hands each
/// result to `emit` (on the calling thread) in input order, as soon as the
/// results of all earlier items have been handed on. Once `emit` returns
/// `Break`, no further item starts; those already running finish, unheard.
///
/// Fails only when not one thread could be started.
pub(super) fn run_in_order<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    work: impl Fn(&T) -> R + Sync,
    mut emit: impl FnMut(&T, R) -> ControlFlow<()>,
) -> std::io::Result<()> {
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (sender, results) = mpsc::channel();
    std::thread::scope(|scope| {
        let mut started = 0;
        for _ in 0..jobs.min(items.len()) {
            let (next, stop, work, sender) = (&next, &stop, &work, sender.clone());
            let worker = move || {
                while !stop.load(Ordering::Relaxed) {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(index) else { break };
                    if sender.send((index, work(item))).is_err() {
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
        let mut emitted = 0;
        for (index, result) in results {
            done[index] = Some(result);
            while let Some(result) = done.get_mut(emitted).and_then(Option::take) {
                if !stop.load(Ordering::Relaxed) && emit(&items[emitted], result).is_break() {
                    stop.store(true, Ordering::Relaxed);
                }
                emitted += 1;
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
