//! Traces: frames, the SQLite ledger, JSON Lines export/import, replay.
