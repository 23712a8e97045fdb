//! Fuzzes `rlp trace import`: any bytes as a JSON Lines trace, imported with
//! the importer the CLI uses into a real SQLite ledger. Every input meets the
//! same empty ledger in this process's scratch folder: created once, kept
//! while imports are refused (a refused import rolls back), replaced after an
//! accepted one. What an import accepts is then checked:
//!
//! - the ledger is one that `rlp trace verify` finds intact, with one row per
//!   frame imported (so no refused import before it left a row either);
//! - exporting the trace gives a file that reads back as the same frames
//!   (columns, canonical payload and provenance, row hash);
//! - importing that export into the same ledger is refused (the trace is
//!   there) and adds no row.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use rlp::event::PreparedRow;
use rlp::ledger::export::export_trace;
use rlp::ledger::import::{ImportError, import_reader};
use rlp::ledger::jsonl::JsonlReader;
use rlp::ledger::{Location, SqliteLedger, verify_chain};

/// The frames of a JSON Lines text that imports cleanly: each position
/// and the columns the ledger keeps.
fn rows(text: &[u8]) -> Vec<(u64, PreparedRow)> {
    let mut reader = JsonlReader::new(text);
    let mut rows = Vec::new();
    while let Some(read) = reader.next_frame().unwrap_or_else(|e| panic!("a line of an imported trace: {e:?}")) {
        rows.push((read.frame.position, read.into_row()));
    }
    rows
}

fuzz_target!(|data: &[u8]| {
    let ledger = rlp_fuzz::scratch_dir().join("events.sqlite");
    if !ledger.exists() {
        drop(SqliteLedger::open(&ledger).expect("an empty ledger can be created"));
    }
    let source = Path::new("trace.jsonl");
    let location = Location::Sqlite(ledger.clone());
    let Ok(summary) = import_reader(&location, data, source) else { return };
    let report = verify_chain(&ledger).expect("the ledger reads back");
    assert!(report.is_intact(), "an imported trace does not verify: {:?}", report.first_problem());
    assert_eq!((report.rows, report.unchained), (summary.frames, 0));

    let mut export = Vec::new();
    let opened = SqliteLedger::open_existing(&ledger).expect("the ledger opens");
    let exported = export_trace(&opened, &summary.trace_id, None, &mut export).expect("the trace exports");
    drop(opened);
    assert_eq!(exported, summary.frames);
    assert_eq!(rows(&export), rows(data), "the export does not read back as the frames imported");

    match import_reader(&location, export.as_slice(), source) {
        Err(ImportError::AlreadyPresent(id)) => assert_eq!(id, summary.trace_id),
        other => panic!("importing the export again gave {other:?}"),
    }
    assert_eq!(verify_chain(&ledger).expect("the ledger reads back").rows, summary.frames);

    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut name = ledger.clone().into_os_string();
        name.push(suffix);
        let _ = std::fs::remove_file(name);
    }
});
