-- The ledger's table of frames: rows are appended, never updated or deleted.
-- Columns and hashes: src/event/row.rs and src/event/hash.rs (docs/runtime.md);
-- `trace_seq` is the frame's place in its trace's chain (NULL in the legacy
-- chain), the tables beside it src/ledger/sqlite_layout.sql. `id` is a plain
-- rowid (no AUTOINCREMENT, whose counter row would be one more page written
-- per commit): rlp deletes no row, and the chains, not the ids, show a removal.
-- The CHECK refuses the rows an rlp from before per-trace chains would add (a
-- ledger upgraded to them has a trigger instead: src/ledger/sqlite.rs).
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    ts_ms INTEGER NOT NULL,
    actor TEXT NOT NULL,
    kind TEXT NOT NULL,
    scope TEXT NOT NULL,
    payload_json TEXT NOT NULL,
    provenance_json TEXT NOT NULL,
    hash_blake3 TEXT NOT NULL,
    chain_blake3 TEXT,
    trace_seq INTEGER
        CONSTRAINT "rows go on per-trace chains in this ledger: upgrade rlp" CHECK (trace_seq IS NOT NULL)
);
CREATE INDEX IF NOT EXISTS events_by_trace ON events (json_extract(provenance_json, '$.trace_id'), id);
