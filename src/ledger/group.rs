//! Group commit: one writer thread appends the frames of many concurrent
//! calls in shared transactions.
//!
//! Every [`Recorder::record`] hands its batch to the writer and waits. The
//! writer takes the first batch waiting and every other batch that arrived
//! while the previous transaction was being made durable, appends them all
//! in one transaction, and only then wakes their callers: a frame is
//! acknowledged only once durable, and with N calls in flight one fsync
//! carries up to N batches instead of one. A group that fails (a batch
//! whose rows cannot be prepared, a payload nested too deep) is retried
//! batch by batch, so each caller gets its own batch's fate.

use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::event::{Record, RecordError, Recorder, Usage};
use crate::ledger::LedgerStore;

/// Most records one transaction takes (a bound on a group's size, so a
/// burst cannot hold one transaction open for long).
const MAX_GROUP_RECORDS: usize = 4096;
/// Longest the writer waits for the batches of callers it expects (see
/// [`write_groups`]).
const GATHER_WAIT: Duration = Duration::from_micros(200);

/// One batch waiting for the writer, and where its fate goes.
struct Job {
    records: Vec<Record>,
    done: SyncSender<Result<(), RecordError>>,
}

/// A [`Recorder`] that group-commits into a [`LedgerStore`] (see the module
/// docs). Reads (`usage`) go straight to the store.
pub struct GroupCommit {
    store: Arc<dyn LedgerStore>,
    jobs: Mutex<Option<Sender<Job>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit").field("store", &self.store.location()).finish_non_exhaustive()
    }
}

impl GroupCommit {
    /// Starts the writer thread for `store`.
    pub fn start(store: Arc<dyn LedgerStore>) -> std::io::Result<GroupCommit> {
        let (sender, receiver) = mpsc::channel();
        let writer_store = Arc::clone(&store);
        let writer = std::thread::Builder::new()
            .name("rlp-ledger-writer".into())
            .spawn(move || write_groups(&*writer_store, &receiver))?;
        Ok(GroupCommit { store, jobs: Mutex::new(Some(sender)), writer: Mutex::new(Some(writer)) })
    }

    /// Lets the writer finish what it was given, and stops it. Later records fail.
    pub fn close(&self) {
        if let Ok(mut jobs) = self.jobs.lock() {
            jobs.take();
        }
        let writer = self.writer.lock().ok().and_then(|mut w| w.take());
        if let Some(writer) = writer {
            let _ = writer.join();
        }
    }
}

impl Drop for GroupCommit {
    fn drop(&mut self) {
        self.close();
    }
}

impl Recorder for GroupCommit {
    fn record(&self, batch: &[Record]) -> Result<(), RecordError> {
        if batch.is_empty() {
            return Ok(());
        }
        let (done, fate) = mpsc::sync_channel(1);
        let job = Job { records: batch.to_vec(), done };
        let sent = match self.jobs.lock() {
            Ok(jobs) => jobs.as_ref().is_some_and(|jobs| jobs.send(job).is_ok()),
            Err(_) => false,
        };
        if !sent {
            return Err(RecordError::new("the ledger writer has stopped"));
        }
        fate.recv().unwrap_or_else(|_| Err(RecordError::new("the ledger writer stopped before recording")))
    }

    fn usage(&self, trace_id: Uuid, tool: &str) -> Result<Usage, RecordError> {
        self.store.usage(trace_id, tool)
    }
}

/// The writer: until every sender is gone, appends each group in one
/// transaction and hands every caller its batch's fate.
///
/// Callers woken by one commit hand in their next batches a moment apart;
/// a writer that committed at once would take only the first of them and
/// leave the others for the commit after. So when the last group had
/// several callers, the writer waits up to [`GATHER_WAIT`] for as many
/// batches as it had then (the commit-delay of database servers): the wait
/// is a fraction of the fsync it saves, and a lone caller never waits.
fn write_groups(store: &dyn LedgerStore, jobs: &Receiver<Job>) {
    let mut last_group = 1;
    while let Ok(first) = jobs.recv() {
        let gather_until = Instant::now() + GATHER_WAIT;
        let mut group = vec![first];
        let mut records = group[0].records.len();
        while records < MAX_GROUP_RECORDS {
            let next = match jobs.try_recv() {
                Ok(job) => Ok(job),
                Err(TryRecvError::Empty) if group.len() < last_group => {
                    jobs.recv_timeout(gather_until.saturating_duration_since(Instant::now())).map_err(|_| ())
                }
                Err(_) => Err(()),
            };
            match next {
                Ok(job) => {
                    records += job.records.len();
                    group.push(job);
                }
                Err(()) => break,
            }
        }
        last_group = group.len();
        commit(store, group);
    }
}

/// Appends a group in one transaction; if the store refuses it, each batch
/// alone, so that one bad batch fails only its own call. The records are
/// moved into the transaction, not copied.
fn commit(store: &dyn LedgerStore, group: Vec<Job>) {
    let mut sizes = Vec::with_capacity(group.len());
    let mut fates = Vec::with_capacity(group.len());
    let mut all = Vec::with_capacity(group.iter().map(|job| job.records.len()).sum());
    for job in group {
        sizes.push(job.records.len());
        fates.push(job.done);
        all.extend(job.records);
    }
    if fates.len() > 1 {
        match store.append(&all) {
            Ok(_) => {
                for done in fates {
                    let _ = done.send(Ok(()));
                }
                return;
            }
            // Written, but not confirmed durable: appending each job again
            // would record its frames twice.
            Err(e) if e.was_appended() => {
                for done in fates {
                    let _ = done.send(Err(RecordError::from(&e)));
                }
                return;
            }
            Err(_) => {}
        }
    }
    let mut records = all.into_iter();
    for (size, done) in sizes.into_iter().zip(fates) {
        let batch: Vec<Record> = records.by_ref().take(size).collect();
        let fate = store.append(&batch).map(|_| ()).map_err(|e| RecordError::from(&e));
        let _ = done.send(fate);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventKind, Provenance};
    use crate::ledger::SqliteLedger;

    fn record(trace: Uuid, n: u64) -> Record {
        Record {
            ts_ms: 1,
            actor: "runtime".into(),
            kind: EventKind::ToolCall,
            scope: "a".into(),
            payload: serde_json::json!({"v": 1, "tool": "t", "args": {"n": n}, "invocation_id": Uuid::now_v7()}),
            provenance: Provenance { trace_id: trace, msg_id: Uuid::now_v7(), agent: "a".into() },
        }
    }

    #[test]
    fn concurrent_batches_are_all_durable_and_chained_when_acknowledged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.sqlite");
        let store: Arc<dyn LedgerStore> = Arc::new(SqliteLedger::open(&path).unwrap());
        let group = Arc::new(GroupCommit::start(Arc::clone(&store)).unwrap());
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let group = Arc::clone(&group);
                std::thread::spawn(move || {
                    let trace = Uuid::now_v7();
                    for n in 0..25 {
                        group.record(&[record(trace, n), record(trace, n)]).unwrap();
                    }
                    t
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(store.count().unwrap(), 8 * 25 * 2);
        let report = crate::ledger::verify::verify(&*store, &Default::default()).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        group.close();
        assert!(group.record(&[record(Uuid::now_v7(), 0)]).is_err());
    }

    #[test]
    fn a_batch_the_store_cannot_prepare_fails_alone() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn LedgerStore> = Arc::new(SqliteLedger::open(&dir.path().join("events.sqlite")).unwrap());
        let group = GroupCommit::start(Arc::clone(&store)).unwrap();
        let mut deep = record(Uuid::now_v7(), 0);
        for _ in 0..200 {
            deep.payload = serde_json::json!([deep.payload]);
        }
        let error = group.record(&[record(Uuid::now_v7(), 1), deep]).unwrap_err();
        assert!(error.to_string().contains("levels deep"), "{error:?}");
        group.record(&[record(Uuid::now_v7(), 2)]).unwrap();
        assert_eq!(store.count().unwrap(), 1);
    }
}
