//! Durable frames per second of any ledger (see bench/ledger.sh): W writers,
//! each with a connection and a trace of its own (as W processes or hosts
//! would have), append single frames for a fixed time, every one durable
//! before `append` returns. The chain is verified afterwards.
//!
//! With `--group`, the W writers record through one group-commit writer
//! on one connection instead (what `rlp serve` and `tools call --batch` do
//! with concurrent calls); each still appends to its own trace.
//!
//! Usage: `bench_ledger --url URL [--writers W] [--seconds S] [--group] [--no-verify]`,
//! URL as `--ledger` takes it (`sqlite:///…` or `postgres://…`). Prints
//! `name value` lines on stdout: `frames_per_second`, `writers`, `traces`,
//! and the time one append takes as its writer sees it, `append_ms_mean`,
//! `append_ms_p50`, `append_ms_p99` and `append_ms_max`.
//!
//! `--no-verify` skips the chain check after the run (bench/ledger.sh
//! counts the server's CPU time over its timed runs; the run after checks
//! the whole chain).
//!
//! `bench_ledger --url URL --checkpoint-traces N [--frames-per-trace F]`
//! times one signed checkpoint covering N traces whose heads moved since
//! the previous one (each given F new frames first, 1 by default), printing
//! `checkpoint_traces N`, `checkpoint_frames N×F` and `checkpoint_seconds S`.

// An example program: it prints what it finds and runs what it measures.
#![allow(unreachable_pub, clippy::print_stdout, clippy::print_stderr, clippy::disallowed_methods)]

#[path = "common/frames.rs"]
mod frames;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use frames::frame;
use rlp::event::Recorder;
use rlp::ledger::group::GroupCommit;
use rlp::ledger::{LedgerStore, Location};

fn main() {
    let (mut url, mut writers, mut seconds, mut checkpoint) = (None, 1usize, 5u64, None::<usize>);
    let mut frames_per_trace = 1u64;
    let mut argv: Vec<String> = std::env::args().skip(1).collect();
    let group = argv.iter().any(|a| a == "--group");
    let verify = !argv.iter().any(|a| a == "--no-verify");
    argv.retain(|a| a != "--group" && a != "--no-verify");
    for pair in argv.chunks(2) {
        match pair {
            [flag, value] if flag == "--url" => url = Some(value.clone()),
            [flag, value] if flag == "--writers" => writers = value.parse().expect("--writers N"),
            [flag, value] if flag == "--seconds" => seconds = value.parse().expect("--seconds S"),
            [flag, value] if flag == "--checkpoint-traces" => {
                checkpoint = Some(value.parse().expect("--checkpoint-traces N"));
            }
            [flag, value] if flag == "--frames-per-trace" => {
                frames_per_trace = value.parse().expect("--frames-per-trace F");
            }
            _ => panic!(
                "usage: bench_ledger --url URL [--writers W] [--seconds S] [--group] [--no-verify] [--checkpoint-traces N]"
            ),
        }
    }
    let location = Location::parse(&url.expect("--url URL")).expect("a ledger URL");
    if let Some(traces) = checkpoint {
        time_checkpoint(&location, traces, frames_per_trace);
        return;
    }
    // Opened (and the schema made) once before the clock starts.
    let before = location.open().expect("the ledger opens").count().expect("rows");
    let stop = Arc::new(AtomicBool::new(false));
    let appended = Arc::new(AtomicU64::new(0));
    // Nanoseconds each append took, as its writer saw it.
    let latencies = Arc::new(Mutex::new(Vec::<u64>::new()));
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
            let (stop, appended, latencies) = (Arc::clone(&stop), Arc::clone(&appended), Arc::clone(&latencies));
            std::thread::spawn(move || {
                // This writer's own trace, as a separate host would have.
                let trace = uuid::Uuid::now_v7();
                let mut n = 0;
                let mut took = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    recorder.record(&[frame(trace, n)]).expect("record");
                    took.push(started.elapsed().as_nanos() as u64);
                    n += 1;
                }
                appended.fetch_add(n, Ordering::Relaxed);
                latencies.lock().unwrap().extend(took);
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
    if verify {
        let report = rlp::ledger::verify::verify(&*ledger, &Default::default()).expect("verify");
        assert!(report.problems.is_empty(), "the chain does not verify: {:?}", report.problems);
    }
    println!("frames_per_second {:.0}", frames as f64 / elapsed);
    println!("writers {writers}");
    println!("traces {writers}");
    let mut took = std::mem::take(&mut *latencies.lock().unwrap());
    took.sort_unstable();
    if !took.is_empty() {
        let ms = |nanos: u64| nanos as f64 / 1e6;
        let at = |q: f64| took[((took.len() - 1) as f64 * q).round() as usize];
        println!("append_ms_mean {:.4}", ms(took.iter().sum::<u64>()) / took.len() as f64);
        println!("append_ms_p50 {:.4}", ms(at(0.5)));
        println!("append_ms_p99 {:.4}", ms(at(0.99)));
        println!("append_ms_max {:.4}", ms(at(1.0)));
    }
}

/// Gives `traces` new traces `frames` frames each (in batches, untimed),
/// brings every earlier trace under a checkpoint (a sweep), then times the
/// one checkpoint that covers the new ones, made as `rlp trace checkpoint
/// --every` makes those between its sweeps (the traces the appends marked).
fn time_checkpoint(location: &Location, traces: usize, frames: u64) {
    use rlp::ledger::checkpoint::{Checkpointer, Reach};
    let ledger = location.open().expect("the ledger opens");
    let key = rlp::integrity::keys::SecretKey::from_seed(&[7; 32]);
    let mut checkpointer = Checkpointer::new(&key, &[]);
    checkpointer.run(&*ledger, rlp::event::now_ms(), Reach::Sweep).expect("a first checkpoint");
    let records: Vec<_> = (0..traces)
        .flat_map(|_| {
            let trace = uuid::Uuid::now_v7();
            (0..frames).map(move |n| frame(trace, n))
        })
        .collect();
    for batch in records.chunks(4096) {
        ledger.append(batch).expect("append");
    }
    let started = Instant::now();
    let made = checkpointer.run(&*ledger, rlp::event::now_ms(), Reach::Marked).expect("checkpoint");
    let took = started.elapsed().as_secs_f64();
    let covered = made.checkpoint.map_or(0, |c| c.leaves.len());
    assert_eq!(covered, traces, "the checkpoint covers every new trace");
    println!("checkpoint_traces {traces}");
    println!("checkpoint_frames {}", traces as u64 * frames);
    println!("checkpoint_seconds {took:.6}");
    // A sweep of the same ledger by a checkpointer that has verified
    // nothing yet: every checkpoint and head row read, every trace probed.
    let started = Instant::now();
    let swept = Checkpointer::new(&key, &[]).run(&*ledger, rlp::event::now_ms(), Reach::Sweep).expect("sweep");
    assert!(swept.checkpoint.is_none() && swept.refused.is_empty() && swept.broken.is_empty(), "{swept:?}");
    println!("sweep_seconds {:.6}", started.elapsed().as_secs_f64());
    let mut heads = 0u64;
    ledger
        .for_each_head(&mut |_| {
            heads += 1;
            std::ops::ControlFlow::Continue(())
        })
        .expect("head rows");
    println!("sweep_traces {heads}");
}
