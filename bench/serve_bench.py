"""The measurements of bench/serve.sh, in one run; prints a Markdown report.

Latency (one `tools/call` of a trivial exec tool, round trip, µs), the series
interleaved round by round so that load on the machine touches them alike:
  - raw spawn: what an exec call needs at least — make a private folder,
    write the call blob, spawn the tool (posix_spawn), read its stdout to EOF,
    wait, parse the JSON, remove the folder;
  - FastMCP: the same tool served by bench/serve_fastmcp.py over stdio;
  - rlp serve --stdio with its home (and ledger) on tmpfs, sandboxed as
    configured by default, and with the sandbox off.
Every MCP series uses the same minimal client: newline-delimited JSON-RPC on
the server's stdin/stdout, one `initialize` (2025-11-25), then calls.

Throughput: WINDOW calls in flight over one session of `rlp serve --stdio`
(a new call sent as each answer arrives), home on disk and on tmpfs; durable
frames/s = rows the ledger gained / wall time. Against: the same frames
re-inserted one transaction per frame (python's sqlite3, rlp's schema, WAL,
synchronous=FULL) on the same disk, and the disk's fsync floor (write
128 B + fdatasync).
"""
import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

PROTOCOL = "2025-11-25"


class StdioClient:
    """A minimal MCP client of a server process over stdio."""

    def __init__(self, argv, env, log):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env)
        self.next_id = 0
        self.send("initialize", {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}})
        self.wait_for(self.next_id)
        self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def write(self, message):
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def send(self, method, params):
        """Sends a request; returns its id."""
        self.next_id += 1
        self.write({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def read(self):
        """The next response (notifications are skipped)."""
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{self.proc.args[0]} closed stdout (exit {self.proc.wait()})")
            message = json.loads(line)
            if "id" in message and "method" not in message:
                return message

    def wait_for(self, request_id):
        message = self.read()
        if message["id"] != request_id:
            raise RuntimeError(f"answer to {message['id']} while waiting for {request_id}")
        return check(message)

    def call(self, tool):
        return self.wait_for(self.send("tools/call", {"name": tool, "arguments": {}}))

    def close(self):
        self.proc.stdin.close()
        if self.proc.wait(timeout=30) != 0:
            raise RuntimeError(f"{self.proc.args[0]} exited with {self.proc.returncode}")


def check(message):
    """The result of a response that is neither a JSON-RPC error nor a tool error."""
    result = message.get("result")
    if result is None or result.get("isError"):
        raise RuntimeError(f"call failed: {json.dumps(message)[:500]}")
    return result


def raw_call(tool):
    """One exec call at its simplest (see the module doc)."""
    folder = tempfile.mkdtemp(prefix="bench-raw-")
    blob = os.path.join(folder, "blob.json")
    with open(os.open(blob, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
        json.dump({"v": 1, "action": "run", "invocation_id": str(uuid.uuid4()), "tool": {"id": "ok", "arguments": {}}}, out)
    read_end, write_end = os.pipe()
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
        (os.POSIX_SPAWN_DUP2, write_end, 1),
        (os.POSIX_SPAWN_CLOSE, read_end),
        (os.POSIX_SPAWN_CLOSE, write_end),
    ]
    pid = os.posix_spawn(tool, [tool, blob], {"PATH": "/usr/bin:/bin", "TMPDIR": folder}, file_actions=actions)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 65536):
        chunks.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise RuntimeError(f"the tool exited with status {status}")
    json.loads(b"".join(chunks))
    shutil.rmtree(folder)


def percentile(samples, q):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency(series, iterations, rounds):
    """Samples (µs) of each series: `rounds` rounds, each running every
    series in turn for iterations/rounds calls after a short warm-up."""
    samples = {name: [] for name in series}
    per_round = max(1, iterations // rounds)
    for _ in range(rounds):
        for name, call in series.items():
            for _ in range(max(3, per_round // 10)):
                call()
            for _ in range(per_round):
                start = time.perf_counter()
                call()
                samples[name].append((time.perf_counter() - start) * 1e6)
    return samples


def ledger_rows(ledger):
    with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True) as db:
        return db.execute("SELECT count(*) FROM events").fetchone()[0]


def throughput(client, calls, window):
    """Wall seconds for `calls` calls with `window` in flight."""
    start = time.perf_counter()
    in_flight = 0
    sent = 0
    done = 0
    while done < calls:
        while in_flight < window and sent < calls:
            client.send("tools/call", {"name": "ok", "arguments": {}})
            sent += 1
            in_flight += 1
        check(client.read())
        in_flight -= 1
        done += 1
    return time.perf_counter() - start


def one_transaction_per_frame(source, folder, schema, limit):
    """Frames/s re-inserting up to `limit` rows of ledger `source` into a
    fresh ledger in `folder`, one durable transaction each."""
    target = Path(folder) / "one-per-frame.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    with sqlite3.connect(f"file:{source}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT ts_ms, actor, kind, scope, payload_json, provenance_json, hash_blake3, chain_blake3 FROM events LIMIT ?",
            (limit,),
        ).fetchall()
    db = sqlite3.connect(target, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.executescript(schema)
    insert = "INSERT INTO events (ts_ms, actor, kind, scope, payload_json, provenance_json, hash_blake3, chain_blake3) VALUES (?,?,?,?,?,?,?,?)"
    start = time.perf_counter()
    for row in rows:
        db.execute("BEGIN IMMEDIATE")
        db.execute(insert, row)
        db.execute("COMMIT")
    elapsed = time.perf_counter() - start
    db.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    return len(rows) / elapsed


def fsync_floor(folder, count):
    """fdatasyncs/s of 128-byte writes to one file in `folder`."""
    probe = Path(folder) / "fsync-probe"
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    start = time.perf_counter()
    for _ in range(count):
        os.write(fd, b"\7" * 128)
        os.fdatasync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    probe.unlink()
    return count / elapsed


def rlp_home(parent, name, sandbox):
    """A fresh runtime home `parent/name`, with the sandbox set as given."""
    home = Path(parent) / name
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    if sandbox != "default":
        (home / "config.toml").write_text(f'[runtime]\nsandbox = "{sandbox}"\n')
    return home


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rlp", required=True)
    parser.add_argument("--bundle", required=True)
    parser.add_argument("--tool", required=True)
    parser.add_argument("--python", required=True, help="the venv's python, for the FastMCP server")
    parser.add_argument("--fastmcp", required=True, help="bench/serve_fastmcp.py")
    parser.add_argument("--schema", required=True, help="src/event/schema.sql")
    parser.add_argument("--tmpfs", required=True)
    parser.add_argument("--disk", required=True)
    parser.add_argument("--logs", required=True)
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--window", type=int, default=8)
    args = parser.parse_args()
    env = {key: value for key, value in os.environ.items() if not key.startswith("RUNLOOP_")}

    def log(name):
        return open(Path(args.logs) / f"{name}.stderr", "wb")

    def serve(home, name):
        return StdioClient([args.rlp, "serve", args.bundle, "--stdio"], {**env, "RUNLOOP_HOME": str(home)}, log(name))

    fastmcp = StdioClient([args.python, args.fastmcp, args.tool], env, log("fastmcp"))
    rlp_tmpfs = serve(rlp_home(args.tmpfs, "bench-serve-home", "default"), "rlp-tmpfs")
    rlp_off = serve(rlp_home(args.tmpfs, "bench-serve-home-off", "off"), "rlp-tmpfs-sandbox-off")
    series = {
        "raw spawn + wait of the tool (blob written, folder made and removed)": lambda: raw_call(args.tool),
        "FastMCP 4 server (Python, subprocess), stdio": lambda: fastmcp.call("ok"),
        "`rlp serve --stdio`, ledger on tmpfs": lambda: rlp_tmpfs.call("ok"),
        "`rlp serve --stdio`, ledger on tmpfs, sandbox off": lambda: rlp_off.call("ok"),
    }
    samples = latency(series, args.iterations, args.rounds)
    for client in (fastmcp, rlp_tmpfs, rlp_off):
        client.close()

    out = [f"Latency: {args.iterations} calls per series in {args.rounds} interleaved rounds; times in µs.", ""]
    out += ["| one `tools/call` round trip | median µs | p95 µs | mean µs |", "|---|---:|---:|---:|"]
    for name, values in samples.items():
        out.append(f"| {name} | {statistics.median(values):.0f} | {percentile(values, 0.95):.0f} | {statistics.mean(values):.0f} |")
    names = list(samples)
    raw = statistics.median(samples[names[0]])
    out += ["", "| overhead above the raw spawn (medians) | µs | ratio |", "|---|---:|---:|"]
    for name in names[1:]:
        median = statistics.median(samples[name])
        out.append(f"| {name} | {median - raw:.0f} | {median / raw:.2f}× |")

    rates = {}
    for where, parent in (("disk", args.disk), ("tmpfs", args.tmpfs)):
        home = rlp_home(parent, "bench-serve-throughput", "default")
        client = serve(home, f"rlp-throughput-{where}")
        seconds = throughput(client, args.calls, args.window)
        client.close()
        ledger = home / "pog" / "events.sqlite"
        frames = ledger_rows(ledger)
        rates[where] = (frames / seconds, args.calls / seconds, frames)
        if where == "disk":
            with open(args.schema) as schema:
                per_frame = one_transaction_per_frame(ledger, args.disk, schema.read(), 3000)
        shutil.rmtree(home)
    floor = fsync_floor(args.disk, 2000)

    out += ["", f"Throughput: {args.calls} calls, {args.window} in flight over one stdio session.", ""]
    out += ["| series | frames/s | calls/s |", "|---|---:|---:|"]
    for where in ("disk", "tmpfs"):
        frames_s, calls_s, frames = rates[where]
        out.append(f"| `rlp serve`, ledger on {where}, group commit ({frames} frames) | {frames_s:.0f} | {calls_s:.0f} |")
    out.append(f"| one durable transaction per frame (the same frames, sqlite3, WAL, synchronous=FULL), disk | {per_frame:.0f} | – |")
    out.append(f"| fsync floor: write 128 B + fdatasync, disk | {floor:.0f} | – |")
    disk_rate = rates["disk"][0]
    out += ["", "| ratio | × |", "|---|---:|"]
    out.append(f"| group-committed frames/s (disk) over one transaction per frame | {disk_rate / per_frame:.2f}× |")
    out.append(f"| group-committed frames/s (disk) over the fsync floor (fdatasyncs/s) | {disk_rate / floor:.2f}× |")
    out.append(f"| ledger on disk over ledger on tmpfs, same load | {disk_rate / rates['tmpfs'][0]:.2f}× |")
    print("\n".join(out))


if __name__ == "__main__":
    main()
