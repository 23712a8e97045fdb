-- The PostgreSQL ledger: the same `events` table as the SQLite ledger
-- (src/event/schema.sql), and the version of this schema. Run once, by the
-- first rlp that finds no `rlp_schema` table, under an advisory lock.
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
    chain_blake3 text
);
-- The last row's chain value, which each append moves (one row; the
-- genesis value, 64 zeros, while the ledger is empty).
CREATE TABLE IF NOT EXISTS rlp_head (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    chain_blake3 text NOT NULL
);
INSERT INTO rlp_head (chain_blake3)
SELECT coalesce((SELECT chain_blake3 FROM events WHERE chain_blake3 IS NOT NULL ORDER BY id DESC LIMIT 1),
                repeat('0', 64))
ON CONFLICT DO NOTHING;
-- Touched by a synchronous commit after each append, which makes it (and
-- every earlier commit) durable: one row per slot, a connection's slot
-- being its backend pid modulo 64 (src/ledger/postgres/mod.rs).
CREATE TABLE IF NOT EXISTS rlp_sync (
    slot integer PRIMARY KEY,
    appends bigint NOT NULL DEFAULT 0
);
INSERT INTO rlp_sync (slot) SELECT generate_series(0, 63) ON CONFLICT DO NOTHING;
CREATE INDEX IF NOT EXISTS events_by_trace ON events (((provenance_json::json) ->> 'trace_id'), id);
INSERT INTO rlp_schema (version) SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM rlp_schema);
