-- The SQLite ledger's tables beside `events` (src/ledger/layout.rs,
-- docs/fleet.md "Verifiable without one line"); created by the first rlp
-- that finds no `rlp_ledger` table, in the transaction that upgrades it.
CREATE TABLE rlp_ledger (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    ledger_id TEXT NOT NULL,
    legacy_rows INTEGER NOT NULL,
    legacy_head TEXT NOT NULL
);
CREATE TABLE rlp_traces (
    trace_id TEXT PRIMARY KEY,
    frames INTEGER NOT NULL,
    head TEXT NOT NULL,
    sealed INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE rlp_checkpoints (
    seq INTEGER PRIMARY KEY,
    statement TEXT NOT NULL,
    signature TEXT NOT NULL
);
CREATE TABLE rlp_checkpoint_leaves (
    seq INTEGER NOT NULL,
    trace_id TEXT NOT NULL,
    frames INTEGER NOT NULL,
    head TEXT NOT NULL,
    PRIMARY KEY (seq, trace_id)
) WITHOUT ROWID;
CREATE INDEX rlp_leaves_by_trace ON rlp_checkpoint_leaves (trace_id, seq);
