#!/usr/bin/env python3
"""Inputs and baseline for bench/replay.sh.

generate: writes a JSON Lines trace of CALLS tool calls (one `tool.call` and
  one `tool.result` frame each, so 2 * CALLS frames) and a bundle whose tools
  are the ones the trace names. The frames carry no `hash_blake3` or
  `chain_blake3`: those fields are optional on import, which recomputes every
  row hash and chains the rows itself (docs/replay.md), so the generator does
  not need BLAKE3. With --change-every N, every N-th result differs (`n` is
  negated): two traces generated with different --trace-id and --change-every
  1 vs 100 are two runs of the same calls differing in 1% of results, the
  input of the `rlp trace diff` row.

baseline: reads an export written by `rlp trace export` (so exactly the rows
  the ledger holds: canonical payloads, hashes, chain values) and inserts them
  into a fresh SQLite database with the ledger's schema (src/event/schema.sql)
  and durability settings (WAL, synchronous=FULL, one transaction, one
  prepared statement), timing only the insert and commit. Prints the seconds.
"""

import argparse
import json
import os
import sqlite3
import sys
import time

TOOLS = ["bench.echo", "bench.sum", "bench.lookup", "bench.store"]

# The ledger's table definition, the same file the ledger code includes.
SCHEMA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "event", "schema.sql")


def generate(calls, out, bundle, trace_id, change_every=0):
    dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    ts = 1764000000000
    position = 0
    with open(out, "w", encoding="utf-8", buffering=1 << 20) as f:
        for i in range(calls):
            tool = TOOLS[i % len(TOOLS)]
            invocation = f"{trace_id[:8]}-0000-7000-8000-{i:012x}"
            changed = change_every > 0 and i % change_every == change_every - 1
            args = {"n": i, "text": f"item-{i}"}
            for kind, actor, payload in (
                ("tool.call", "runtime", {"v": 1, "tool": tool, "args": args, "invocation_id": invocation,
                                          "input_schema": "inline",
                                          "tags": ["bench"]}),
                ("tool.result", f"tool:{tool}", {"v": 1, "invocation_id": invocation,
                                                 "result": {"ok": True, "n": -i if changed else i, "echo": f"item-{i}"},
                                                 "attempt": 1, "duration_ms": 3}),
            ):
                position += 1
                ts += 1
                frame = {
                    "id": position,
                    "ts_ms": ts,
                    "actor": actor,
                    "kind": kind,
                    "scope": "bench",
                    "payload": payload,
                    "provenance": {"agent": "bench", "msg_id": f"{trace_id[:8]}-0001-7000-8000-{position:012x}",
                                   "trace_id": trace_id},
                }
                f.write(dumps(frame))
                f.write("\n")
    os.makedirs(bundle, exist_ok=True)
    tool_entries = [
        {
            "id": tool,
            "description": f"benchmark tool {tool}",
            "transport": {"kind": "exec", "command": "/usr/bin/true"},
            "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}, "text": {"type": "string"}},
                             "required": ["n"]},
            "result_schema": {"type": "object", "properties": {"ok": {"const": True}}, "required": ["ok"]},
        }
        for tool in TOOLS
    ]
    with open(os.path.join(bundle, "tools.json"), "w") as f:
        json.dump({"version": 1, "tools": tool_entries}, f, indent=2)
    with open(os.path.join(bundle, "policy.caps"), "w") as f:
        f.write("[capabilities]\nexec = true\n")
    with open(os.path.join(bundle, "manifest.toml"), "w") as f:
        f.write('[agent]\nname = "bench"\nversion = "0.1.0"\n')
    print(f"wrote {2 * calls} frames to {out} and the bundle {bundle}", file=sys.stderr)


def baseline(export, db):
    rows = []
    with open(export, encoding="utf-8") as f:
        # One trace: each row's place in its chain is its line number.
        for seq, line in enumerate(f, start=1):
            # The export embeds the stored canonical texts; cut them out as is.
            frame = json.loads(line)
            payload = json.dumps(frame["payload"], separators=(",", ":"), ensure_ascii=False, sort_keys=True)
            provenance = json.dumps(frame["provenance"], separators=(",", ":"), ensure_ascii=False, sort_keys=True)
            rows.append((frame["ts_ms"], frame["actor"], frame["kind"], frame["scope"], payload, provenance,
                         frame["hash_blake3"], frame["chain_blake3"], seq))
    for suffix in ("", "-wal", "-shm"):
        try:
            os.remove(db + suffix)
        except FileNotFoundError:
            pass
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    with open(SCHEMA_FILE, encoding="utf-8") as f:
        conn.executescript(f.read())
    start = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(
        "INSERT INTO events (ts_ms, actor, kind, scope, payload_json, provenance_json, hash_blake3, chain_blake3, "
        "trace_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    count = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    conn.close()
    if count != len(rows):
        sys.exit(f"baseline inserted {count} rows, expected {len(rows)}")
    print(f"{elapsed:.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate")
    gen.add_argument("--calls", type=int, required=True)
    gen.add_argument("--out", required=True)
    gen.add_argument("--bundle", required=True)
    gen.add_argument("--trace-id", required=True)
    gen.add_argument("--change-every", type=int, default=0)
    base = sub.add_parser("baseline")
    base.add_argument("--export", required=True)
    base.add_argument("--db", required=True)
    args = parser.parse_args()
    if args.command == "generate":
        generate(args.calls, args.out, args.bundle, args.trace_id, args.change_every)
    else:
        baseline(args.export, args.db)


if __name__ == "__main__":
    main()
