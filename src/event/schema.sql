-- The ledger's one table: rows are appended, never updated or deleted.
-- Columns and hashes: src/event/row.rs and src/event/hash.rs (docs/runtime.md).
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts_ms INTEGER NOT NULL,
    actor TEXT NOT NULL,
    kind TEXT NOT NULL,
    scope TEXT NOT NULL,
    payload_json TEXT NOT NULL,
    provenance_json TEXT NOT NULL,
    hash_blake3 TEXT NOT NULL,
    chain_blake3 TEXT
);
CREATE INDEX IF NOT EXISTS events_by_trace ON events (json_extract(provenance_json, '$.trace_id'), id);
