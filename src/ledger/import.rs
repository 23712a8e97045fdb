//! Importing a JSON Lines trace into a ledger: all or nothing.
//!
//! The file is read once, on a thread of its own. Every line is checked by
//! [`crate::ledger::jsonl::JsonlReader`], and across lines every frame must
//! have its own `msg_id`, every call its own `invocation_id`, and every
//! result must answer a call earlier in the file that is still waiting for
//! its final result. A trace the ledger already holds is refused after the
//! file's own problems (which are reported first). Rows are appended as they
//! are read (in batches handed over a bounded channel, so reading and
//! appending overlap and memory stays flat) in one bulk append on the ledger
//! ([`crate::ledger::BulkAppend`]: for SQLite a single `BEGIN IMMEDIATE`
//! transaction, WAL, `synchronous=FULL`, the chain continued from the
//! ledger's last row), which is committed only when the whole file is good.
//! Any problem drops it, so a refused file leaves the ledger exactly as it
//! was. Up to [`MAX_LISTED_PROBLEMS`] problems are listed, each with its line
//! number.

use std::collections::HashSet;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender};

use uuid::Uuid;

use crate::event::frame::TraceFrame;
use crate::event::{EventKind, Payload};
use crate::ledger::jsonl::{JsonlReader, LineError, ReadError, ReadFrame};
use crate::ledger::pending::PendingCalls;
use crate::ledger::{LedgerError, LedgerStore, Location};

/// Problems listed in a refusal; the rest are counted.
pub const MAX_LISTED_PROBLEMS: usize = 20;
/// Frames handed from the reading thread to the writer at a time.
const BATCH: usize = 1024;
/// Batches on their way to the writer at most.
const IN_FLIGHT_BATCHES: usize = 8;

/// What an import added.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportSummary {
    /// The trace imported.
    pub trace_id: Uuid,
    /// Frames (rows) added.
    pub frames: u64,
    /// Call frames among them.
    pub calls: u64,
    /// Row id of the first row added.
    pub first_row: i64,
    /// Row id of the last row added.
    pub last_row: i64,
}

/// Why nothing was imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The ledger could not be opened or written.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file has malformed lines; nothing was imported.
    #[error("{} in the file", crate::text::plural(.problems.len() as u64 + .more, "problem"))]
    Malformed {
        /// The first problems, in line order.
        problems: Vec<LineError>,
        /// Problems found beyond those listed.
        more: u64,
    },
    /// The file holds no frame.
    #[error("the file holds no frame")]
    Empty,
    /// The ledger already holds frames of this trace.
    #[error("the ledger already holds trace {0}")]
    AlreadyPresent(Uuid),
}

struct Problems {
    listed: Vec<LineError>,
    more: u64,
}

impl Problems {
    fn push(&mut self, error: LineError) {
        if self.listed.len() < MAX_LISTED_PROBLEMS {
            self.listed.push(error);
        } else {
            self.more += 1;
        }
    }

    fn is_empty(&self) -> bool {
        self.listed.is_empty()
    }
}

/// What the frames of a file must not share, checked across lines: every
/// frame has its own `msg_id`, every call its own `invocation_id` (a second
/// call for an invocation, while it waits or after its final result, is
/// refused), and every result answers a call still waiting.
///
/// The ids seen are kept (16 bytes per frame and per call), so a repeat is
/// found however far apart the two lines are.
#[derive(Default)]
struct FrameIds {
    msg_ids: HashSet<Uuid>,
    calls: HashSet<Uuid>,
    pending: PendingCalls<()>,
}

impl FrameIds {
    /// Checks the next frame (in file order) against the ones before it.
    fn check(&mut self, frame: &TraceFrame) -> Result<(), String> {
        let msg_id = frame.provenance.msg_id;
        if !self.msg_ids.insert(msg_id) {
            return Err(format!(
                "`provenance.msg_id` {msg_id} is also the msg_id of an earlier frame: every frame has its own msg_id"
            ));
        }
        match &frame.body {
            Payload::ToolCall(call) => {
                let id = call.invocation_id;
                if self.calls.insert(id) {
                    // The first call of the invocation: it cannot be waiting already.
                    let _ = self.pending.open(id, frame.position, ());
                    return Ok(());
                }
                Err(match self.pending.get(&id) {
                    Some(earlier) => format!(
                        "{} for invocation {id} while the call at line {} is still waiting for its result: \
                         every call has its own invocation_id",
                        EventKind::ToolCall,
                        earlier.position
                    ),
                    None => format!(
                        "{} for invocation {id} after that call's final result: every call has its own \
                         invocation_id",
                        EventKind::ToolCall
                    ),
                })
            }
            Payload::ToolResult(result) => {
                let id = result.invocation_id;
                if self.pending.get(&id).is_none() {
                    return Err(format!(
                        "{} for invocation {id} has no {} before it (or that call already has its final result): \
                         a result without its call",
                        EventKind::ToolResult,
                        EventKind::ToolCall
                    ));
                }
                if !result.will_retry() {
                    self.pending.close(&id);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// Imports the JSON Lines file at `file` into the ledger at `ledger`
/// (created if needed; see [`import_reader`]).
pub fn import_file(ledger: &Location, file: &Path) -> Result<ImportSummary, ImportError> {
    let io = |source| ImportError::Io { path: file.to_path_buf(), source };
    let handle = std::fs::File::open(file).map_err(io)?;
    if handle.metadata().map_err(io)?.is_dir() {
        return Err(io(std::io::Error::new(std::io::ErrorKind::IsADirectory, "it is a folder")));
    }
    import_reader(ledger, std::io::BufReader::with_capacity(1 << 20, handle), file)
}

/// Imports frames read from `reader` into the ledger at `ledger` (created if
/// needed; `source` names the input in messages). When the ledger did not
/// exist before and nothing is imported, what was created for it is removed
/// again, so a refused import writes nothing.
pub fn import_reader(
    ledger: &Location,
    reader: impl BufRead + Send,
    source: &Path,
) -> Result<ImportSummary, ImportError> {
    ledger.write_all_or_nothing(|store| import(store, reader, source))
}

/// Imports frames read from `reader` into `store`, all or nothing.
pub fn import(
    store: &dyn LedgerStore,
    reader: impl BufRead + Send,
    source: &Path,
) -> Result<ImportSummary, ImportError> {
    std::thread::scope(|scope| {
        let (to_writer, from_reader) = std::sync::mpsc::sync_channel(IN_FLIGHT_BATCHES);
        let reading = scope.spawn(move || read_batches(reader, to_writer));
        // `from_reader` is dropped when `write` returns, which stops the reader.
        let written = write(store, from_reader, source);
        // Joined here, the import ends once the reading thread is gone (the
        // scope alone waits only for its closure to return).
        if let Err(panic) = reading.join() {
            std::panic::resume_unwind(panic);
        }
        written
    })
}

/// One thing the reading thread found.
enum Item {
    /// A good frame.
    Frame(Box<ReadFrame>),
    /// A bad line; reading goes on.
    Problem(LineError),
    /// A line that stops reading.
    Fatal(LineError),
    /// The file could not be read.
    Io(std::io::Error),
}

/// Reads, checks, canonicalises and hashes frames on its own thread, handing
/// them over in batches (the channel is bounded, so memory stays flat).
fn read_batches(reader: impl BufRead, to_writer: SyncSender<Vec<Item>>) {
    let mut reader = JsonlReader::new(reader);
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        let (item, last) = match reader.next_frame() {
            Ok(Some(read)) => (Item::Frame(Box::new(read)), false),
            Ok(None) => break,
            Err(ReadError::Line(e)) => (Item::Problem(e), false),
            Err(ReadError::Fatal(e)) => (Item::Fatal(e), true),
            Err(ReadError::Io(e)) => (Item::Io(e), true),
        };
        batch.push(item);
        if last {
            break;
        }
        if batch.len() == BATCH && to_writer.send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH))).is_err() {
            // The writer stopped; nothing more is wanted.
            return;
        }
    }
    if !batch.is_empty() {
        let _ = to_writer.send(batch);
    }
}

fn write(
    store: &dyn LedgerStore,
    from_reader: Receiver<Vec<Item>>,
    source: &Path,
) -> Result<ImportSummary, ImportError> {
    let mut bulk = store.begin_bulk()?;
    let mut problems = Problems { listed: Vec::new(), more: 0 };
    let mut ids = FrameIds::default();
    // Whether the ledger already holds the trace: known at the first frame,
    // reported only when the file itself has no problem.
    let mut present = None;
    let mut summary = ImportSummary { trace_id: Uuid::nil(), frames: 0, calls: 0, first_row: 0, last_row: 0 };
    for item in from_reader.iter().flatten() {
        let read = match item {
            Item::Frame(read) => *read,
            Item::Problem(e) | Item::Fatal(e) => {
                problems.push(e);
                continue;
            }
            Item::Io(e) => return Err(ImportError::Io { path: source.to_path_buf(), source: e }),
        };
        if present.is_none() {
            let trace_id = read.frame.provenance.trace_id;
            present = Some(bulk.holds_trace(&trace_id)?);
            summary.trace_id = trace_id;
        }
        if matches!(read.frame.body, Payload::ToolCall(_)) {
            summary.calls += 1;
        }
        if let Err(message) = ids.check(&read.frame) {
            problems.push(LineError { line: read.frame.position, message });
        }
        if !problems.is_empty() || present == Some(true) {
            continue;
        }
        bulk.append(&read.into_row())?;
        summary.frames += 1;
    }
    if !problems.is_empty() {
        return Err(ImportError::Malformed { problems: problems.listed, more: problems.more });
    }
    if present == Some(true) {
        return Err(ImportError::AlreadyPresent(summary.trace_id));
    }
    if summary.frames == 0 {
        return Err(ImportError::Empty);
    }
    (summary.first_row, summary.last_row) = bulk.commit()?;
    Ok(summary)
}
