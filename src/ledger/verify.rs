//! Verifying the ledger: every row hash and every link of the hash chain,
//! streaming, in row order.
//!
//! A row is checked against the *stored* chain value of the row before it,
//! so each kind of tampering is reported at the row where it happened:
//!
//! - `edited`: the row's columns no longer give its `hash_blake3`;
//! - `removed`: row ids jump (rows were deleted) and the chain breaks there;
//! - `chain`: the chain breaks without a gap in the ids — rows were
//!   reordered, or a row was edited together with its hash;
//! - `malformed`: a hash or chain value is not 64 hex digits, or a chained
//!   row follows an unchained one.
//!
//! Rows written before the chain column existed (an upstream database) come
//! first and are counted as `unchained`. Deleting rows at the *end* leaves a
//! shorter valid chain: compare the reported head with one kept elsewhere.

use std::ops::ControlFlow;

use serde::Serialize;

use crate::event::Event;
use crate::event::hash::{GENESIS, chain_hash, from_hex, to_hex};
use crate::ledger::{LedgerError, LedgerStore, Location};

/// Problems listed before the rest are only counted.
pub(crate) const MAX_LISTED_PROBLEMS: usize = 100;

/// What is wrong with a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// The row's content does not give its hash.
    Edited,
    /// Rows before this one were deleted.
    Removed,
    /// The chain breaks here without a gap in the ids.
    Chain,
    /// A hash or chain value is not 64 hex digits, or the chain is missing.
    Malformed,
}

/// One row that does not check out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RowProblem {
    /// The row id.
    pub row: i64,
    /// The row's kind column.
    pub kind: String,
    /// The trace the row claims to belong to (when its provenance parses).
    pub trace_id: Option<String>,
    /// The class of problem.
    pub problem: ProblemKind,
    /// What is wrong, in words.
    pub message: String,
}

/// The outcome of [`verify`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// The ledger.
    pub ledger: Location,
    /// Rows read.
    pub rows: u64,
    /// Leading rows without a chain value (upstream databases), not checked.
    pub unchained: u64,
    /// The chain value of the last row.
    pub head: Option<String>,
    /// The first problems, in row order.
    pub problems: Vec<RowProblem>,
    /// Problems beyond those listed.
    pub more_problems: u64,
}

impl VerifyReport {
    /// Whether every row checks out.
    pub fn is_intact(&self) -> bool {
        self.problems.is_empty()
    }

    /// The first row that does not check out.
    pub fn first_problem(&self) -> Option<&RowProblem> {
        self.problems.first()
    }
}

#[derive(serde::Deserialize)]
struct TraceOnly {
    trace_id: String,
}

struct Walker {
    report: VerifyReport,
    prev_chain: Option<[u8; 32]>,
    prev_id: Option<i64>,
    scratch: String,
}

impl Walker {
    fn problem(&mut self, event: &Event, problem: ProblemKind, message: String) {
        if self.report.problems.len() >= MAX_LISTED_PROBLEMS {
            self.report.more_problems += 1;
            return;
        }
        let trace_id = serde_json::from_str::<TraceOnly>(&event.provenance_json).ok().map(|p| p.trace_id);
        self.report.problems.push(RowProblem { row: event.id, kind: event.kind.clone(), trace_id, problem, message });
    }

    fn row(&mut self, event: Event) {
        self.report.rows += 1;
        let prev_id = self.prev_id.replace(event.id);
        if event.chain_blake3.is_empty() {
            if self.prev_chain.is_some() {
                self.problem(&event, ProblemKind::Malformed, "the row has no chain value after chained rows".into());
            } else {
                self.report.unchained += 1;
            }
            return;
        }
        let computed = event.stored_text_hash(&mut self.scratch);
        let stored_hash = from_hex(&event.hash_blake3);
        if stored_hash != Some(computed) {
            let message = match (stored_hash, event.computed_hash()) {
                (None, _) => "hash_blake3 is not 64 hex digits".to_string(),
                (Some(_), Err(why)) => format!("{why}: the row was edited"),
                (Some(_), Ok(_)) => "the row's content does not match its hash_blake3: the row was edited".to_string(),
            };
            let kind = if stored_hash.is_none() { ProblemKind::Malformed } else { ProblemKind::Edited };
            self.problem(&event, kind, message);
        }
        let Some(chain) = from_hex(&event.chain_blake3) else {
            self.problem(&event, ProblemKind::Malformed, "chain_blake3 is not 64 hex digits".into());
            return;
        };
        let link = stored_hash.unwrap_or(computed);
        let prev = self.prev_chain.replace(chain);
        if chain_hash(&prev.unwrap_or(GENESIS), &link) != chain {
            match prev_id {
                Some(before) if event.id > before.saturating_add(1) => {
                    let (first, last) = (before.saturating_add(1), event.id.saturating_sub(1));
                    let missing = if first == last {
                        format!("row {first} is missing")
                    } else {
                        format!("rows {first} to {last} are missing")
                    };
                    self.problem(
                        &event,
                        ProblemKind::Removed,
                        format!("{missing}: rows were removed before this one (the chain breaks here)"),
                    );
                }
                Some(before) => self.problem(
                    &event,
                    ProblemKind::Chain,
                    format!(
                        "chain_blake3 does not follow from row {before}: rows were reordered, or this row was edited \
                         together with its hash"
                    ),
                ),
                None => self.problem(
                    &event,
                    ProblemKind::Chain,
                    "chain_blake3 of the first row does not start from the genesis value: rows before it were \
                     removed, or it was edited"
                        .into(),
                ),
            }
        }
        self.report.head = Some(to_hex(&chain));
    }
}

/// Verifies every row of `store`, in order (streaming).
pub(crate) fn verify<S: LedgerStore + ?Sized>(store: &S) -> Result<VerifyReport, LedgerError> {
    let mut walker = Walker {
        report: VerifyReport {
            ledger: store.location().clone(),
            rows: 0,
            unchained: 0,
            head: None,
            problems: Vec::new(),
            more_problems: 0,
        },
        prev_chain: None,
        prev_id: None,
        scratch: String::new(),
    };
    store.for_each_event(&mut |event| {
        walker.row(event);
        ControlFlow::Continue(())
    })?;
    Ok(walker.report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventKind, Provenance, Record};
    use crate::ledger::{SqliteLedger, verify_chain};
    use rusqlite::Connection;
    use serde_json::json;
    use std::path::PathBuf;
    use uuid::Uuid;

    fn record(n: i64) -> Record {
        Record {
            ts_ms: 1000 + n,
            actor: "runtime".into(),
            kind: EventKind::CapAudit,
            scope: "a".into(),
            payload: json!({"n": n, "s": "é\u{1}"}),
            provenance: Provenance {
                trace_id: Uuid::from_u128(1),
                msg_id: Uuid::from_u128(n as u128),
                agent: "a".into(),
            },
        }
    }

    fn ledger_with(rows: i64) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.sqlite");
        let ledger = SqliteLedger::open(&path).unwrap();
        let records: Vec<Record> = (1..=rows).map(record).collect();
        ledger.append(&records).unwrap();
        (dir, path)
    }

    #[test]
    fn intact_ledger_verifies() {
        let (_dir, path) = ledger_with(5);
        let report = verify_chain(&path).unwrap();
        assert!(report.is_intact(), "{report:?}");
        assert_eq!(report.rows, 5);
        let mut last = None;
        SqliteLedger::open_existing(&path)
            .unwrap()
            .for_each_event(|event| {
                last = Some(event.chain_blake3);
                ControlFlow::Continue(())
            })
            .unwrap();
        assert_eq!(report.head, last);
    }

    #[test]
    fn names_edited_removed_and_reordered_rows() {
        let (_dir, path) = ledger_with(8);
        let conn = Connection::open(&path).unwrap();
        conn.execute("UPDATE events SET payload_json = replace(payload_json, '\"n\":2', '\"n\":9') WHERE id = 2", [])
            .unwrap();
        conn.execute("DELETE FROM events WHERE id IN (4, 5)", []).unwrap();
        conn.execute("UPDATE events SET payload_json = replace(payload_json, ',', ', ') WHERE id = 7", []).unwrap();
        drop(conn);
        let report = verify_chain(&path).unwrap();
        let found: Vec<(i64, ProblemKind)> = report.problems.iter().map(|p| (p.row, p.problem)).collect();
        assert_eq!(found, [(2, ProblemKind::Edited), (6, ProblemKind::Removed), (7, ProblemKind::Edited)]);
        assert_eq!(
            report.problems[1].message,
            "rows 4 to 5 are missing: rows were removed before this one (the chain breaks here)"
        );
        assert!(report.problems[2].message.contains("canonical"), "{}", report.problems[2].message);
        assert_eq!(report.problems[0].trace_id.as_deref(), Some("00000000-0000-0000-0000-000000000001"));
    }

    #[test]
    fn a_swap_of_two_rows_breaks_the_chain_at_the_first() {
        let (_dir, path) = ledger_with(4);
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "UPDATE events SET id = 100 WHERE id = 2; UPDATE events SET id = 2 WHERE id = 3; UPDATE events SET id = 3 WHERE id = 100;",
        )
        .unwrap();
        drop(conn);
        let report = verify_chain(&path).unwrap();
        assert_eq!(report.first_problem().map(|p| (p.row, p.problem)), Some((2, ProblemKind::Chain)));
    }
}
