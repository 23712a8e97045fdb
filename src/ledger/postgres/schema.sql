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
CREATE INDEX IF NOT EXISTS events_by_trace ON events (((provenance_json::json) ->> 'trace_id'), id);
INSERT INTO rlp_schema (version) SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM rlp_schema);
