//! Durable frames per second of any ledger (see bench/ledger.sh): W writers,
//! each with a connection of its own (as W processes or hosts would have),
//! append single frames for a fixed time, every one durable before
//! `append` returns. The chain is verified afterwards.
//!
//! With `--group`, the W writers record through one group-commit writer
//! on one connection instead (what `rlp serve` and `tools call --batch` do
//! with concurrent calls).
//!
//! Usage: `bench_ledger --url URL [--writers W] [--seconds S] [--group]`,
//! URL as `--ledger` takes it (`sqlite:///…` or `postgres://…`). Prints
//! `frames_per_second` on stdout.

// An example program: it prints what it finds and runs what it measures.
#![allow(unreachable_pub, clippy::print_stdout, clippy::print_stderr, clippy::disallowed_methods)]

#[path = "common/frames.rs"]
mod frames;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use frames::frame;
use rlp::event::Recorder;
use rlp::ledger::group::GroupCommit;
use rlp::ledger::{LedgerStore, Location};

fn main() {
    let (mut url, mut writers, mut seconds) = (None, 1usize, 5u64);
    let mut argv: Vec<String> = std::env::args().skip(1).collect();
    let group = argv.iter().any(|a| a == "--group");
    argv.retain(|a| a != "--group");
    for pair in argv.chunks(2) {
        match pair {
            [flag, value] if flag == "--url" => url = Some(value.clone()),
            [flag, value] if flag == "--writers" => writers = value.parse().expect("--writers N"),
            [flag, value] if flag == "--seconds" => seconds = value.parse().expect("--seconds S"),
            _ => panic!("usage: bench_ledger --url URL [--writers W] [--seconds S] [--group]"),
        }
    }
    let location = Location::parse(&url.expect("--url URL")).expect("a ledger URL");
    // Opened (and the schema made) once before the clock starts.
    let before = location.open().expect("the ledger opens").count().expect("rows");
    let stop = Arc::new(AtomicBool::new(false));
    let appended = Arc::new(AtomicU64::new(0));
    let open = || -> Arc<dyn LedgerStore> { location.open().expect("the ledger opens").into() };
    let recorders: Vec<Arc<dyn Recorder>> = if group {
        let writer: Arc<dyn Recorder> = Arc::new(GroupCommit::start(open()).expect("the writer starts"));
        (0..writers).map(|_| Arc::clone(&writer)).collect()
    } else {
        (0..writers).map(|_| open() as Arc<dyn Recorder>).collect()
    };
    let started = Instant::now();
    let threads: Vec<_> = recorders
        .into_iter()
        .map(|recorder| {
            let (stop, appended) = (Arc::clone(&stop), Arc::clone(&appended));
            std::thread::spawn(move || {
                let trace = uuid::Uuid::now_v7();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    recorder.record(&[frame(trace, n)]).expect("record");
                    n += 1;
                }
                appended.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let frames = appended.load(Ordering::Relaxed);
    let ledger = location.open().expect("the ledger opens");
    assert_eq!(ledger.count().expect("rows"), before + frames, "every acknowledged frame is there");
    let report = rlp::ledger::verify::verify(&*ledger, &Default::default()).expect("verify");
    assert!(report.problems.is_empty(), "the chain does not verify: {:?}", report.problems);
    println!("frames_per_second {:.0}", frames as f64 / elapsed);
}
