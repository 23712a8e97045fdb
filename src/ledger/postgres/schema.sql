-- The PostgreSQL ledger, schema version 2: the `events` table of the SQLite
-- ledger (src/event/schema.sql) and the tables beside it
-- (src/ledger/sqlite_layout.sql, src/ledger/layout.rs). Run by the first
-- rlp that finds no `rlp_schema` table, or version 1, under an advisory
-- lock. On a version 1 ledger it is the upgrade: the rows there become the
-- legacy chain, sealed in `rlp_ledger` by their count and last chain value
-- (the head version 1 kept in `rlp_head`), and the single head goes.
CREATE TABLE IF NOT EXISTS rlp_schema (
    version integer NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ts_ms bigint NOT NULL,
    actor text NOT NULL,
    kind text NOT NULL,
    scope text NOT NULL,
    -- Valid JSON (`json`, not `jsonb`: a tool's output may hold \u0000).
    payload_json text NOT NULL CHECK (payload_json::json IS NOT NULL),
    provenance_json text NOT NULL CHECK (provenance_json::json IS NOT NULL),
    hash_blake3 text NOT NULL,
    chain_blake3 text,
    trace_seq bigint
);
ALTER TABLE events ADD COLUMN IF NOT EXISTS trace_seq bigint;
CREATE INDEX IF NOT EXISTS events_by_trace ON events (((provenance_json::json) ->> 'trace_id'), id);
CREATE TABLE IF NOT EXISTS rlp_ledger (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    ledger_id text NOT NULL,
    legacy_rows bigint NOT NULL,
    legacy_head text NOT NULL
);
INSERT INTO rlp_ledger (ledger_id, legacy_rows, legacy_head)
SELECT gen_random_uuid()::text, (SELECT count(*) FROM events),
       coalesce((SELECT chain_blake3 FROM events WHERE chain_blake3 IS NOT NULL ORDER BY id DESC LIMIT 1),
                repeat('0', 64))
ON CONFLICT DO NOTHING;
-- One row per trace, moved by every append to it: the only serial point,
-- and only between writers of the same trace.
-- No index but the key on what appends change, so moving a head is a HOT
-- update (the page keeps room for it).
CREATE TABLE IF NOT EXISTS rlp_traces (
    trace_id text PRIMARY KEY,
    frames bigint NOT NULL,
    head text NOT NULL,
    sealed bigint NOT NULL DEFAULT 0
) WITH (fillfactor = 70);
-- The traces with frames no checkpoint covers yet: an append adds its
-- trace (a key lookup when it is there already), a checkpoint removes the
-- ones it covered whole.
CREATE TABLE IF NOT EXISTS rlp_unsealed (
    trace_id text PRIMARY KEY
);
CREATE TABLE IF NOT EXISTS rlp_checkpoints (
    seq bigint PRIMARY KEY,
    statement text NOT NULL,
    signature text NOT NULL
);
CREATE TABLE IF NOT EXISTS rlp_checkpoint_leaves (
    seq bigint NOT NULL,
    trace_id text NOT NULL,
    frames bigint NOT NULL,
    head text NOT NULL,
    PRIMARY KEY (seq, trace_id)
);
CREATE INDEX IF NOT EXISTS rlp_leaves_by_trace ON rlp_checkpoint_leaves (trace_id, seq);
DROP TABLE IF EXISTS rlp_head;
DROP TABLE IF EXISTS rlp_sync;
DELETE FROM rlp_schema;
INSERT INTO rlp_schema (version) VALUES (2);
