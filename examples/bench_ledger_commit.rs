//! Durable frames per second of the ledger writer under concurrent callers
//! (see bench/serve.sh): W threads each record single frames, every one
//! durable before `record` returns, through
//!
//! - the group-commit writer (`rlp::ledger::group::GroupCommit`, what
//!   `rlp serve` uses), and
//! - the SQLite ledger directly, one transaction per frame;
//!
//! against the machine's fsync floor (write + fdatasync of a small file) in
//! the same folder, all in one run.
//!
//! Usage: `bench_ledger_commit --dir DIR [--writers W] [--frames N]` (N
//! frames per writer). Prints a Markdown table on stdout.

// An example program: it prints what it finds and runs what it measures.
#![allow(unreachable_pub, clippy::print_stdout, clippy::print_stderr, clippy::disallowed_methods)]

#[path = "common/frames.rs"]
mod frames;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use frames::frame;
use rlp::event::Recorder;
use rlp::ledger::group::GroupCommit;
use rlp::ledger::{LedgerStore, SqliteLedger};

struct Args {
    dir: PathBuf,
    writers: usize,
    frames: usize,
}

fn parse_args() -> Args {
    let mut args = Args { dir: std::env::temp_dir(), writers: 8, frames: 500 };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        match pair {
            [flag, value] if flag == "--dir" => args.dir = PathBuf::from(value),
            [flag, value] if flag == "--writers" => args.writers = value.parse().expect("--writers N"),
            [flag, value] if flag == "--frames" => args.frames = value.parse().expect("--frames N"),
            _ => panic!("usage: bench_ledger_commit --dir DIR [--writers W] [--frames N]"),
        }
    }
    args
}

/// Frames per second of `writers` threads recording `frames` frames each into `recorder`.
fn concurrent_rate(recorder: Arc<dyn Recorder>, writers: usize, frames: usize) -> f64 {
    let started = Instant::now();
    let threads: Vec<_> = (0..writers)
        .map(|_| {
            let recorder = Arc::clone(&recorder);
            std::thread::spawn(move || {
                let trace = uuid::Uuid::now_v7();
                for n in 0..frames {
                    recorder.record(&[frame(trace, n as u64)]).unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    (writers * frames) as f64 / started.elapsed().as_secs_f64()
}

fn fsync_floor(dir: &Path, count: usize) -> f64 {
    let path = dir.join("fsync-probe");
    let mut file = std::fs::OpenOptions::new().create(true).write(true).truncate(true).open(&path).unwrap();
    let started = Instant::now();
    for _ in 0..count {
        file.write_all(&[7u8; 128]).unwrap();
        file.sync_data().unwrap();
    }
    let rate = count as f64 / started.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&path);
    rate
}

fn main() {
    let args = parse_args();
    let dir = tempfile::tempdir_in(&args.dir).unwrap();
    let floor = fsync_floor(dir.path(), args.writers * args.frames);
    let direct: Arc<dyn LedgerStore> = Arc::new(SqliteLedger::open(&dir.path().join("direct.sqlite")).unwrap());
    let per_frame = concurrent_rate(direct.clone(), args.writers, args.frames);
    let grouped_store: Arc<dyn LedgerStore> = Arc::new(SqliteLedger::open(&dir.path().join("group.sqlite")).unwrap());
    let group = Arc::new(GroupCommit::start(Arc::clone(&grouped_store)).unwrap());
    let grouped = concurrent_rate(group.clone(), args.writers, args.frames);
    group.close();
    for store in [&direct, &grouped_store] {
        let report = rlp::ledger::verify::verify(&**store, &Default::default()).unwrap();
        assert!(report.problems.is_empty(), "the chain does not verify: {:?}", report.problems);
        assert_eq!(report.rows, (args.writers * args.frames) as u64);
    }
    let (w, n) = (args.writers, args.frames);
    println!(
        "| ledger writer, {w} concurrent writers × {n} single frames, each durable before it returns | frames/s |"
    );
    println!("|---|---:|");
    println!("| group commit (`rlp serve`'s writer) | {grouped:.0} |");
    println!("| one transaction per frame (the SQLite ledger directly) | {per_frame:.0} |");
    println!("| fsync floor: write 128 B + fdatasync, sequential | {floor:.0} |");
    println!();
    println!("| ratio | × |");
    println!("|---|---:|");
    println!("| group commit over one transaction per frame | {:.2}× |", grouped / per_frame);
    println!("| group commit over the fsync floor | {:.2}× |", grouped / floor);
}
