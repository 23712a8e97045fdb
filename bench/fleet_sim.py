#!/usr/bin/env python3
"""A fleet of hosts appending to one PostgreSQL ledger: a discrete-event model.

Reads the per-append costs bench/ledger.sh measured (target/bench-ledger.json)
and models H hosts (1,000 by default), each appending single frames over a
network with a given round trip, against one server, in two ledger layouts:

- **global head** (rlp's first layout): one chain for the whole ledger. An
  append must learn the head and move it. Under contention an appender
  waits in line for the chain lock, reads the head (a round trip back to
  its host), computes its frames' chain values and sends them; the lock
  goes when that statement commits. The serial section therefore holds one
  network round trip per append, fleet-wide. An appender whose cached head
  is still current (nobody appended since its last append) tries first
  without waiting in line, one round trip, as the code does.
- **per trace**: each trace chained on its own; one autocommit statement
  inserts the frames and moves the trace's head row, one round trip, durable
  on return. No serial point: appends are limited by the server's capacity.
  A checkpointer, every I seconds, reads the heads that moved since the
  previous checkpoint, hashes a Merkle root over their (trace, frames,
  head) leaves, signs it and writes it durably. Frames not yet covered by a
  durable checkpoint are the window of undetectable loss.

Usage:
  python3 bench/fleet_sim.py [--measured target/bench-ledger.json]
      [--hosts 1000] [--rtt-ms 1.0] [--rates 0,50% (0: closed loop)] [--think-ms 0]
      [--intervals 0.1,1,10,60] [--frames-per-trace 20] [--seed 1] ...
  UPDATE_DOCS=0 python3 bench/fleet_sim.py   prints without rewriting docs/benchmarks.md

bench/ledger.sh runs it after measuring, so `bench/ledger.sh` refreshes both
its section and this one. Plain Python 3, no dependencies; every assumption
is printed with the results (see `assumptions()`).
"""

import argparse
import heapq
import json
import math
import os
import random
import subprocess
import sys
from collections import deque

HEADING = "## A fleet of 1,000 hosts (`bench/fleet_sim.py`)"
# The fewest head rows a slice of rlp's sweep reads (src/cli/trace/checkpoint.rs).
MIN_SLICE_TRACES = 1000
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------- inputs


class Costs:
    """The per-append costs the model runs on, from the measurement."""

    def __init__(self, measured, args):
        self.layout = measured["layout"]
        rows = sorted(measured["rows"], key=lambda r: r["writers"])
        self.rows = rows
        self.cores = args.server_cores or measured["machine"]["cores"]
        self.rtt_lo_ms = measured["loopback_round_trip_ms"]
        raw_best = max(rows, key=lambda r: r["raw"]["frames_per_second"])
        rlp_best = max(rows, key=lambda r: r["rlp_postgres"]["frames_per_second"])
        # What an append costs the server: the per-trace layout's own append
        # when that is what was measured, else raw INSERT; COMMIT standing
        # in for it (a lower bound: the per-trace append also moves a head
        # row), at the writer count where it went fastest.
        if self.layout == "per-trace":
            best, side, what = rlp_best, "rlp_postgres", "rlp's per-trace append"
        else:
            best, side, what = raw_best, "raw", "raw `INSERT; COMMIT`, standing in for the per-trace append until that layout is measured,"
        rate = best[side]["frames_per_second"]
        cpu = best[side].get("server_cpu_ms_per_append")
        self.best_rate, self.best_writers = rate, best["writers"]
        self.best_busy = cpu * rate / 1000.0 / self.cores if cpu else None
        if args.service_from == "cpu" and cpu:
            # The server's CPU time over the run (all its processes) per append.
            self.service_ms = cpu
            self.service_from = (
                f"the server's CPU time per append for {what} at {best['writers']} writers, its fastest "
                f"({rate:,.0f}/s, the server's processes busy {self.best_busy * 100:.0f}% of the cores)"
            )
        else:
            # The fastest rate measured taken for the server's capacity.
            self.service_ms = 1000.0 * self.cores / rate
            self.service_from = f"cores ÷ the fastest rate measured for {what} ({rate:,.0f}/s at {best['writers']} writers)"
        if args.service_ms:
            self.service_ms, self.service_from = args.service_ms, "given on the command line (--service-ms)"
        self.capacity = 1000.0 * self.cores / self.service_ms
        # One WAL flush: a + b·frames it covers, fitted (least squares) to
        # pg_stat_wal's mean flush time against the frames per flush in
        # each measured row of the side that sets the service time.
        seconds = measured.get("seconds_each") or 1
        points = [
            (r[side]["frames_per_second"] * seconds / r[side]["wal_syncs"], r[side]["wal_sync_ms"] / r[side]["wal_syncs"])
            for r in rows
            if r[side].get("wal_syncs")
        ]
        if len(points) >= 2:
            self.flush_ms, self.flush_ms_per_frame = fit_line(points, scale=1.0)
            self.flush_from = (
                f"fitted to pg_stat_wal over the {what.split(',')[0]} runs: from "
                + ", ".join(f"{ms:.3f} ms for {n:.1f}" for n, ms in points)
                + " frames per flush"
            )
        elif points:
            self.flush_ms, self.flush_ms_per_frame = points[0][1], 0.0
            self.flush_from = "pg_stat_wal's mean flush in the one measured row"
        else:
            first = rows[0]["raw"]
            self.flush_ms = max(0.05, first["append_ms_mean"] - 3 * self.rtt_lo_ms - self.service_ms)
            self.flush_ms_per_frame = 0.0
            self.flush_from = "the 1-writer raw append time less 3 round trips and the service time"
        if args.flush_ms:
            self.flush_ms, self.flush_ms_per_frame = args.flush_ms, 0.0
            self.flush_from = "given on the command line (--flush-ms)"
        # The most the flushes can take: one frame per flush_ms_per_frame.
        flush_capacity = 1000.0 / self.flush_ms_per_frame if self.flush_ms_per_frame else float("inf")
        self.capacity = min(self.capacity, flush_capacity)
        self.capacity_by = "the WAL flushes" if flush_capacity < 1000.0 * self.cores / self.service_ms else "the cores"
        # The global head's own per-append work (lock, head reads, the
        # acknowledging commit, tries that lost), measured when this run was
        # of that layout: the part a raw insert costs runs under the chain
        # lock, the rest outside it.
        old_cpu = rlp_best["rlp_postgres"].get("server_cpu_ms_per_append") if self.layout != "per-trace" else None
        self.old_extra_ms = max(0.0, old_cpu - self.service_ms) if old_cpu else 0.0
        self.old_from = (
            f"rlp's measured server CPU per append at its fastest ({rlp_best['writers']} writers, "
            f"{rlp_best['rlp_postgres']['frames_per_second']:,.0f}/s): {old_cpu:.3f} ms"
            if old_cpu
            else "not measured in this run (another layout): no work beyond the per-trace append's"
        )
        # A checkpoint's cost: measured (a + b·traces, least squares, on
        # loopback) when the ledger could make one, else modelled.
        points = [(p["traces"], p["seconds"]) for p in measured.get("checkpoints") or [] if p.get("seconds")]
        self.checkpoint_fit = fit_line(points) if len(points) >= 2 else None  # ms, ms per trace
        # A sweep's cost (a + b·traces in the ledger), measured when the
        # checkpointer makes sweeps, else the --sweep-us-per-trace given.
        points = [(p["traces"], p["seconds"]) for p in measured.get("sweeps") or [] if p.get("seconds")]
        self.sweep_fit = fit_line(points) if len(points) >= 2 else None
        self.sweep_points = points
        if self.sweep_fit is None:
            self.sweep_fit = (0.0, args.sweep_us_per_trace / 1000.0)


def fit_line(points, scale=1000.0):
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return (max(0.0, my - b * mx) * scale, max(0.0, b) * scale)  # (fixed, per unit), seconds × scale


# ---------------------------------------------------------------- the model


class Server:
    """`cores` CPU servers in front of one FIFO queue, and the WAL flush: a
    commit waits for the first flush to start after its statement ran; one
    flush at a time, each taking `flush_ms` + `flush_ms_per_frame` per
    frame it covers and making every commit that was waiting when it
    started durable (group commit)."""

    def __init__(self, sim, cores, flush_ms, flush_ms_per_frame):
        self.sim, self.cores, self.flush_ms, self.per_frame = sim, cores, flush_ms, flush_ms_per_frame
        self.busy, self.queue, self.busy_ms = 0, deque(), 0.0
        self.waiting, self.flushing = [], False
        self.flushes = self.flushed = 0

    def run(self, ms, then, arg):
        """Runs a job of `ms` CPU milliseconds, then calls then(arg)."""
        if self.busy < self.cores:
            self.busy += 1
            self.busy_ms += ms
            self.sim.at(self.sim.now + ms, self._done, (then, arg))
        else:
            self.queue.append((ms, then, arg))

    def _done(self, job):
        then, arg = job
        if self.queue:
            ms, t2, a2 = self.queue.popleft()
            self.busy_ms += ms
            self.sim.at(self.sim.now + ms, self._done, (t2, a2))
        else:
            self.busy -= 1
        then(arg)

    def commit(self, frames, then, arg):
        """Waits until a flush makes this commit durable, then calls then(arg)."""
        self.waiting.append((frames, then, arg))
        if not self.flushing:
            self._flush()

    def _flush(self):
        batch, self.waiting, self.flushing = self.waiting, [], True
        frames = sum(max(1, f) for f, _, _ in batch)
        self.sim.at(self.sim.now + self.flush_ms + self.per_frame * frames, self._flushed, batch)

    def _flushed(self, batch):
        self.flushing = False
        self.flushes += 1
        frames = sum(f for f, _, _ in batch)
        self.flushed += frames
        self.sim.on_durable(frames, batch)
        for _, then, arg in batch:
            then(arg)
        if self.waiting:
            self._flush()


class Sim:
    def __init__(
        self, args, costs, design, hosts, rtt_ms, interval_s, duration_s, rate=0.0, round_trips=1, sweep=None
    ):
        self.args, self.costs, self.design, self.rate = args, costs, design, rate
        # Sweeps: (how, seconds a whole pass takes, traces in the ledger at
        # the start), how being "whole" (a run every that long reads the
        # whole ledger) or "slices" (each run reads its share of a pass, as
        # rlp does); the first checkpoint run sweeps whole either way. None:
        # no sweep modelled.
        self.sweep = sweep
        self.next_sweep = 0.0
        self.hosts, self.rtt, self.half = hosts, rtt_ms, rtt_ms / 2
        self.interval = interval_s * 1000.0 if interval_s else None
        self.end = duration_s * 1000.0
        self.warm = min(1000.0, self.end / 10)
        self.round_trips = round_trips  # client round trips per append (pgbench's raw: 3)
        self.now, self.seq, self.events = 0.0, 0, []
        self.rng = random.Random(args.seed)
        self.server = Server(self, costs.cores, costs.flush_ms, costs.flush_ms_per_frame)
        self.latencies, self.acked = [], 0
        # Per-trace layout: frames durable per flush (time, frames), the
        # traces touched since the last checkpoint's snapshot, checkpoints.
        self.durable_log, self.touched, self.checkpoints = [], set(), []
        self.durable_total = 0
        self.checkpoint_running = False
        # Global head: the head's version, the chain lock and its line.
        self.version, self.lock_held, self.lock_line = 0, False, deque()
        self.frames_per_trace = args.frames_per_trace
        self.host_version = [0] * hosts
        self.host_queued = [False] * hosts
        self.host_count = [0] * hosts
        self.pending = [deque() for _ in range(hosts)] if rate else None

    def at(self, t, fn, arg):
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, fn, arg))

    def run(self):
        for h in range(self.hosts):
            if self.pending is not None:
                self.at(self.rng.expovariate(self.rate / 1000.0), self.generate, h)
            else:
                self.at(self.rng.uniform(0, max(self.rtt, 1.0)), self.issue, (h, None))
        if self.interval and self.design == "per-trace":
            self.at(self.interval, self.checkpoint_tick, None)
        events = self.events
        while events:
            t, _, fn, arg = heapq.heappop(events)
            if t > self.end:
                break
            self.now = t
            fn(arg)
        return self

    # --- hosts

    def generate(self, h):
        """Open loop: host h has a frame to append; it sends when its last append returned."""
        q = self.pending[h]
        q.append(self.now)
        if len(q) == 1:
            self.issue((h, self.now))
        self.at(self.now + self.rng.expovariate(self.rate / 1000.0), self.generate, h)

    def issue(self, ha):
        h, started = ha
        if started is None:
            started = self.now
        # Round trips before the committing one (pgbench's BEGIN and INSERT).
        lead = (self.round_trips - 1) * self.rtt
        if self.design == "per-trace":
            self.at(self.now + lead + self.half, self.pt_arrive, (h, started))
        elif not self.host_queued[h]:
            self.at(self.now + lead + self.half, self.gh_try, (h, started))
        else:
            self.at(self.now + lead + self.half, self.gh_line, (h, started))

    def acked_at(self, h, started, t):
        """Host h learns at t that its append (begun at `started`) is durable."""
        if started >= self.warm:
            self.latencies.append(t - started)
        if t >= self.warm:
            self.acked += self.args.frames_per_append
        self.host_count[h] += 1
        if self.pending is not None:
            q = self.pending[h]
            q.popleft()
            if q:
                self.at(t, self.issue, (h, q[0]))
        else:
            self.at(t + self.args.think_ms, self.issue, (h, None))

    def trace_of(self, h):
        return (h, self.host_count[h] // self.frames_per_trace)

    # --- per-trace layout: one statement, one round trip

    def pt_arrive(self, hs):
        self.server.run(self.costs.service_ms, self.pt_ran, hs)

    def pt_ran(self, hs):
        self.server.commit(self.args.frames_per_append, self.pt_durable, hs)

    def pt_durable(self, hs):
        h, started = hs
        self.touched.add(self.trace_of(h))
        self.acked_at(h, started, self.now + self.half)

    def on_durable(self, frames, batch):
        # (A checkpoint's own row commits as 0 frames.)
        if self.design == "per-trace" and frames:
            self.durable_log.append((self.now, frames))
            self.durable_total += frames

    # --- per-trace layout: the checkpointer

    def checkpoint_tick(self, _):
        if not self.checkpoint_running:
            self.checkpoint_running = True
            self.at(self.now + self.half, self.checkpoint_read, {"asked": self.now})
        self.at(self.now + self.interval, self.checkpoint_tick, None)

    def checkpoint_read(self, ck):
        # The read sees every commit durable (so visible) by now.
        ck["snapshot"], ck["traces"] = self.now, len(self.touched)
        new_frames = self.durable_total - (self.checkpoints[-1]["frames"] if self.checkpoints else 0)
        ck["frames"] = self.durable_total  # frames durable so far
        self.touched = set()
        a = self.args
        fit = self.costs.checkpoint_fit
        server_ms = (fit[1] if fit else a.checkpoint_server_us_per_trace / 1000.0) * ck["traces"]
        if not fit:
            server_ms += a.checkpoint_server_fixed_ms + a.checkpoint_server_us_per_frame / 1000.0 * new_frames
        if self.sweep:
            # Head rows read and traces probed: of the traces there at the
            # start and every one the hosts began since.
            how, every_s, ledger_traces = self.sweep
            traces = ledger_traces + sum(n // self.frames_per_trace + 1 for n in self.host_count)
            fixed, per_trace = self.costs.sweep_fit
            if self.now >= self.next_sweep and (how == "whole" or not self.next_sweep):
                server_ms += fixed + per_trace * traces
                ck["sweep"] = True
                self.next_sweep = self.now + every_s * 1000.0
            elif how == "slices":
                runs = max(1.0, math.floor(every_s * 1000.0 / self.interval))
                server_ms += per_trace * max(MIN_SLICE_TRACES, math.ceil(traces / runs))
        ck["work"] = server_ms
        self.server.run(server_ms, self.checkpoint_leaves, ck)

    def checkpoint_leaves(self, ck):
        a = self.args
        fit = self.costs.checkpoint_fit
        n = ck["traces"]
        if fit:
            # The measured fixed part, less what the model adds itself.
            client_ms = max(0.0, fit[0] - 2 * self.costs.rtt_lo_ms - self.costs.service_ms - self.costs.flush_ms)
            transfer_ms = 0.0
        else:
            client_ms = n * a.checkpoint_client_us_per_trace / 1000.0 + a.checkpoint_sign_ms
            transfer_ms = n * a.leaf_bytes * 8 / (a.bandwidth_gbit * 1e6)
        ck["work"] += transfer_ms + client_ms + self.costs.service_ms + self.costs.flush_ms + 2 * self.rtt
        # Leaves to the checkpointer, the root hashed and signed, the row back.
        self.at(self.now + self.half + transfer_ms + client_ms + self.half, self.checkpoint_write, ck)

    def checkpoint_write(self, ck):
        self.server.run(self.costs.service_ms, lambda c: self.server.commit(0, self.checkpoint_durable, c), ck)

    def checkpoint_durable(self, ck):
        ck["done"] = self.now
        ck["duration"] = self.now + self.half - ck["asked"]
        self.checkpoints.append(ck)
        self.checkpoint_running = False

    # --- global head

    def gh_try(self, hs):
        """The append sent with the cached head; it succeeds if the head has
        not moved and nobody holds the chain lock."""
        self.server.run(self.costs.service_ms, self.gh_tried, hs)

    def gh_tried(self, hs):
        h, started = hs
        if self.version == self.host_version[h] and not self.lock_held:
            self.version += 1
            self.host_version[h] = self.version
            self.gh_rest(hs)
        else:
            # Nothing appended; the answer carries the new head: back in line.
            self.host_queued[h] = True
            self.host_version[h] = self.version
            self.at(self.now + self.rtt, self.gh_line, hs)

    def gh_line(self, hs):
        if self.lock_held:
            self.lock_line.append(hs)
        else:
            self.gh_granted(hs)

    def gh_granted(self, hs):
        h, _ = hs
        self.lock_held = True
        hs = hs + (self.version,)
        # The head goes to the host, which chains its frames and sends them.
        self.at(self.now + self.rtt + self.args.client_ms, self.gh_append, hs)

    def gh_append(self, hsv):
        self.server.run(self.costs.service_ms, self.gh_appended, hsv)

    def gh_appended(self, hsv):
        h, started, seen = hsv
        # Still queued next time if another host appended since this one's last.
        self.host_queued[h] = seen != self.host_version[h]
        self.version += 1
        self.host_version[h] = self.version
        self.lock_held = False
        if self.lock_line:
            self.gh_granted(self.lock_line.popleft())
        self.gh_rest((h, started))

    def gh_rest(self, hs):
        """The rest of the append's work (the acknowledging commit, …), then the flush."""
        if self.costs.old_extra_ms:
            self.server.run(self.costs.old_extra_ms, self.gh_commit, hs)
        else:
            self.gh_commit(hs)

    def gh_commit(self, hs):
        self.server.commit(self.args.frames_per_append, self.gh_durable, hs)

    def gh_durable(self, hs):
        h, started = hs
        self.acked_at(h, started, self.now + self.half)

    # --- results

    def results(self):
        span = (self.end - self.warm) / 1000.0
        lat = sorted(self.latencies)
        r = {
            "throughput": self.acked / span,
            "latency_mean": sum(lat) / len(lat) if lat else float("nan"),
            "latency_p99": lat[int(0.99 * (len(lat) - 1))] if lat else float("nan"),
            "cpu_busy": self.server.busy_ms / (self.costs.cores * self.end),
            "frames_per_flush": self.server.flushed / max(1, self.server.flushes),
        }
        if self.design == "per-trace" and self.interval:
            r.update(self.window())
        return r

    def window(self):
        """The window of undetectable loss: frames durable but not yet
        covered by a durable checkpoint, from the first checkpoint on."""
        cks = [c for c in self.checkpoints if "done" in c]
        # With sweeps, the first run sweeps the whole ledger and the second
        # catches up with what the fleet appended meanwhile: a start-up.
        cks = cks[2:] if self.sweep else cks
        if len(cks) < 2:
            return {"checkpoints": len(cks)}
        start, end = cks[0]["done"], self.end
        log = self.durable_log
        # Frames at risk over time: + at each durable flush, − at each checkpoint.
        changes = [(t, f) for t, f in log if t <= end]
        for c in cks:
            changes.append((c["done"], None))
        changes.sort(key=lambda x: (x[0], x[1] is None))
        total = covered = 0
        at_risk_max, area, last_t = 0, 0.0, start
        snaps = iter(cks)
        counting = False  # from the first checkpoint's own change on
        for t, f in changes:
            if counting:
                area += (total - covered) * (t - last_t)
                last_t = t
            if f is None:
                covered = next(snaps)["frames"]
                counting = True
            else:
                total += f
            if counting:
                at_risk_max = max(at_risk_max, total - covered)
        area += (total - covered) * (end - last_t)
        # Seconds at risk per frame: from durable to its checkpoint's done.
        exp_sum = exp_frames = exp_max = 0.0
        i = 0
        prev_snap = None
        for c in cks:
            while i < len(log) and log[i][0] <= c["snapshot"]:
                t, f = log[i]
                if prev_snap is not None:  # frames before the first snapshot: warm-up
                    exp_sum += (c["done"] - t) * f
                    exp_frames += f
                    exp_max = max(exp_max, c["done"] - t)
                i += 1
            prev_snap = c["snapshot"]
        traces = [c["traces"] for c in cks[1:]]
        durations = [c["duration"] for c in cks[1:]]
        work = [c["work"] for c in cks[1:]]
        return {
            "checkpoints": len(cks),
            "traces_mean": sum(traces) / len(traces),
            "traces_max": max(traces),
            "ck_ms_mean": sum(durations) / len(durations),
            "ck_ms_max": max(durations),
            "ck_work_ms_mean": sum(work) / len(work),
            "risk_frames_mean": area / (end - start),
            "risk_frames_max": at_risk_max,
            "risk_s_mean": exp_sum / exp_frames / 1000.0 if exp_frames else float("nan"),
            "risk_s_max": exp_max / 1000.0,
        }


# ---------------------------------------------------------------- report


def parse_rates(text, costs, hosts):
    """Appends per host per second; `N%` is N% of the server's capacity."""
    rates = []
    for x in text.split(","):
        x = x.strip()
        if x.endswith("%"):
            rates.append(float(x[:-1]) / 100.0 * costs.capacity / hosts)
        elif x:
            rates.append(float(x))
    return rates


def fmt(x, digits=0):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:,.{digits}f}"


def risk_cells(r):
    """The window's four cells: frames at risk (mean, max), seconds at risk (mean, max)."""
    return (
        f"{fmt(r['risk_frames_mean'])} | {fmt(r['risk_frames_max'])} | {fmt(r['risk_s_mean'], 3)} | "
        f"{fmt(r['risk_s_max'], 3)} |"
    )


def sweep_cost(c):
    fixed, per_trace = c.sweep_fit
    if c.sweep_points:
        measured = ", ".join(f"{s:.3f} s over {n:,} traces" for n, s in c.sweep_points)
        return f"{fixed:.1f} ms + {per_trace * 1000:.2f} µs per trace (least squares over bench/ledger.sh's sweeps: {measured})"
    return f"{per_trace * 1000:.2f} µs per trace (--sweep-us-per-trace; not measured in this run)"


def assumptions(args, c, fleet_rtt):
    rates = parse_rates(args.rates, c, args.hosts)
    loads = []
    if 0.0 in rates:
        loads.append(f"closed loop (each host appends again {args.think_ms:g} ms after its last append returned)")
    if any(rates):
        loads.append(
            f"open loop (each host has frames to append at random, Poisson, at the rate given ({args.rates}: a "
            "percentage is of the per-trace capacity), and sends them "
            "one append at a time, in order; its time per append counts from when the frame was ready)"
        )
    load = ", or ".join(loads)
    fit = c.checkpoint_fit
    if fit:
        ck = (
            f"a checkpoint's cost as measured by bench/ledger.sh (least squares over its points): "
            f"{fit[0]:.3f} ms + {fit[1] * 1000:.2f} µs per trace covered on loopback; the per-trace part is charged "
            "to one server core, the fixed part to the checkpointer, plus the fleet's round trips and a durable write"
        )
    else:
        ck = (
            "not measured (the ledger makes no checkpoints yet), so modelled: reading the heads that moved costs the "
            f"server {args.checkpoint_server_fixed_ms} ms + {args.checkpoint_server_us_per_trace} µs per trace + "
            f"{args.checkpoint_server_us_per_frame} µs per new frame (each trace's new frames are read and checked "
            "before they are signed for) on one core; "
            f"the leaves ({args.leaf_bytes} B each) cross a {args.bandwidth_gbit} Gbit/s link; the checkpointer "
            f"hashes {args.checkpoint_client_us_per_trace} µs per leaf and signs in {args.checkpoint_sign_ms} ms; "
            "writing the checkpoint is one more append (a round trip, the service time, a WAL flush)"
        )
    return [
        f"{args.hosts:,} hosts, {load}; {args.frames_per_append} frame per append; a host starts a new trace every "
        f"{args.frames_per_trace} frames.",
        f"Network: {fleet_rtt} ms round trip ({fleet_rtt / 2} ms each way), no loss, no bandwidth limit on appends; "
        "hosts spend no time of their own between sending and receiving"
        f" (global head: {args.client_ms} ms to chain the frames once the head arrives).",
        f"Server: {c.cores} cores (the benchmark machine's) in front of one FIFO queue (a checkpoint's work "
        f"queues with the appends); an append costs a core {c.service_ms:.3f} ms ({c.service_from}), so at most "
        f"{1000.0 * c.cores / c.service_ms:,.0f} appends/s on the cores.",
        f"Durability: a commit waits for the next WAL flush to start, one flush at a time, each "
        f"{c.flush_ms:.3f} ms + {c.flush_ms_per_frame:.3f} ms per frame it covers ({c.flush_from}), covering every "
        "commit waiting when it starts (group commit); the flush does not use the cores. An append is acknowledged "
        f"when its flush ends plus half a round trip. Per-trace capacity, the lesser of the cores' and the flushes': "
        f"{c.capacity:,.0f} appends/s, set by {c.capacity_by}.",
        "Global head: the code's protocol (src/ledger/postgres): an appender whose cached head is current tries "
        "once without the lock (one round trip, succeeding if nobody appended meanwhile and nobody holds the lock); "
        "otherwise it waits in line for the chain lock at the server, the head goes back to it (a round trip) and "
        "its append comes back; the lock is released when that statement has run (its commit is asynchronous), "
        "then the append waits for a flush. The serial section is thus a round trip + the chaining + the "
        "insert's service time per append, for the whole fleet. The rest of this layout's work per append "
        f"({c.old_extra_ms:.3f} ms of a core: {c.old_from}, less the insert's) runs outside the lock.",
        "Per trace: one statement per append (insert the frames, move the trace's head, commit synchronously), "
        "one round trip; appends to different traces never wait for each other, only for the cores and the flush.",
        f"Checkpoints: every interval (the next waits if one is still running), {ck}. A checkpoint covers the "
        "frames durable when the server reads the heads; they stop being at risk when the checkpoint itself is "
        "durable.",
        "Sweeps (their table only): the checkpointer's first run sweeps: besides the traces that moved, it reads "
        f"every head row and probes every trace in the ledger, {sweep_cost(c)}. *Whole*: so does its first run "
        "once the sweep period has passed since the last. *Slices* (what rlp does): every run after the first "
        f"reads its share of a pass, the traces in the ledger divided by the runs in a sweep period, at least "
        f"{MIN_SLICE_TRACES:,}, at the same cost per trace. Charged to one server core like a checkpoint's "
        "per-trace part (the harsher reading: part of it is the checkpointer's own work); the next checkpoint "
        "waits for the run. Runs last two sweep periods and a checkpoint interval, plus 5 s.",
        "Window of undetectable loss: frames durable but not yet covered by a durable checkpoint (an attacker "
        "with write access to the database could remove them, a trace's tail with its head, unnoticed); "
        "frames: time-average and maximum; seconds: from a frame durable to its checkpoint durable, mean over "
        "frames and maximum, from the first checkpoint on. The global head's chain has no checkpoints: its tail, "
        "with the head row, can be cut the same way, without bound.",
        f"Deterministic service times and network; start times at random (seed {args.seed}). Runs last "
        f"max({args.duration} s, {args.cycles} checkpoint intervals); the first second (or tenth) is not counted.",
    ]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default_json = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), "bench-ledger.json")
    p.add_argument("--measured", default=default_json, help="bench/ledger.sh's JSON (default: %(default)s)")
    p.add_argument("--hosts", type=int, default=1000)
    p.add_argument("--rtt-ms", type=float, default=1.0, help="network round trip, host to server and back")
    p.add_argument("--rates", default="0,50%",
                   help="loads: appends per host per second (open loop; N%% is N%% of the server's capacity), 0 for closed loop")
    p.add_argument("--think-ms", type=float, default=0.0, help="closed loop: pause between appends")
    p.add_argument("--intervals", default="0.1,1,10,60", help="checkpoint intervals, seconds")
    p.add_argument("--frames-per-append", type=int, default=1)
    p.add_argument("--frames-per-trace", type=int, default=20)
    p.add_argument("--duration", type=float, default=10.0, help="shortest simulated run, seconds")
    p.add_argument("--cycles", type=int, default=4, help="checkpoint intervals per run, at least")
    p.add_argument("--server-cores", type=int, default=0, help="default: the benchmark machine's")
    p.add_argument("--service-from", choices=("cpu", "throughput"), default="cpu",
                   help="an append's server time: the server's measured CPU time per append (cpu), or the cores "
                   "divided by the fastest measured rate (throughput)")
    p.add_argument("--service-ms", type=float, default=0.0, help="an append's server time; default: measured")
    p.add_argument("--flush-ms", type=float, default=0.0, help="one WAL flush; default: measured")
    p.add_argument("--client-ms", type=float, default=0.02, help="global head: chaining frames on the host")
    p.add_argument("--checkpoint-server-fixed-ms", type=float, default=0.1)
    p.add_argument("--checkpoint-server-us-per-trace", type=float, default=5.0)
    p.add_argument("--checkpoint-server-us-per-frame", type=float, default=10.0)
    p.add_argument("--checkpoint-client-us-per-trace", type=float, default=1.0)
    p.add_argument("--checkpoint-sign-ms", type=float, default=0.05)
    p.add_argument("--leaf-bytes", type=int, default=100)
    p.add_argument("--bandwidth-gbit", type=float, default=1.0)
    p.add_argument("--sweep-every", type=float, default=60.0,
                   help="the sweeps' table: seconds a whole pass takes (`rlp trace checkpoint --sweep`)")
    p.add_argument("--sweep-intervals", default="1,10", help="the sweeps' table: checkpoint intervals, seconds")
    p.add_argument("--ledger-traces", default="1000000",
                   help="the sweeps' table: traces already in the ledger when the fleet starts")
    p.add_argument("--sweep-us-per-trace", type=float, default=32.0,
                   help="a sweep's cost per trace when bench/ledger.sh measured none")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-calibration", action="store_true", help="skip the runs on the benchmark's own terms")
    args = p.parse_args()

    with open(args.measured) as f:
        measured = json.load(f)
    c = Costs(measured, args)
    intervals = [float(x) for x in args.intervals.split(",") if x]
    out = []
    say = out.append

    say(HEADING if args.hosts == 1000 else f"## A fleet of {args.hosts:,} hosts (`bench/fleet_sim.py`)")
    say("")
    say(
        f"A discrete-event model of {args.hosts:,} hosts appending to one PostgreSQL ledger over a "
        f"{args.rtt_ms} ms round trip, on the per-append costs `bench/ledger.sh` measured (previous section: "
        f"layout **{c.layout}**, commit {measured.get('commit', '?')}, {measured.get('date', '?')}). "
        "**Global head**: one chain for the whole ledger, the head learnt and moved by every append. "
        "**Per trace**: a chain per trace, one statement and one round trip per append, and signed checkpoints "
        "over the traces whose heads moved."
    )
    say("")
    cmd = "python3 bench/fleet_sim.py"
    extra = [a.replace(REPO + os.sep, "") for a in sys.argv[1:]]
    if extra:
        cmd += " " + " ".join(extra)
    say(
        f"Reproduce: `bench/ledger.sh` (measures, then runs this), or on its last measurement `{cmd}` "
        f"(reads `{args.measured.replace(REPO + os.sep, '')}`; "
        "`--help` lists the parameters)."
    )
    say("")

    if not args.no_calibration:
        say(
            "**The model on the benchmark's own terms** (W hosts, the loopback round trip "
            f"{c.rtt_lo_ms} ms, closed loop), next to what was measured. Raw `INSERT; COMMIT` is three round "
            "trips per row (`BEGIN`, `INSERT`, `COMMIT`)."
        )
        say("")
        say("| writers | raw, measured | raw, model | rlp, measured | rlp, model |")
        say("|---:|---:|---:|---:|---:|")
        design_now = "per-trace" if c.layout == "per-trace" else "global-head"
        for row in c.rows:
            w = row["writers"]
            raw_m = Sim(args, c, "per-trace", w, c.rtt_lo_ms, None, 2.0, round_trips=3).run().results()
            rlp_m = Sim(args, c, design_now, w, c.rtt_lo_ms, None, 2.0).run().results()
            say(
                f"| {w} | {fmt(row['raw']['frames_per_second'])} | {fmt(raw_m['throughput'])} | "
                f"{fmt(row['rlp_postgres']['frames_per_second'])} | {fmt(rlp_m['throughput'])} |"
            )
        say("")
        say(
            "Where model and measurement part, the model is the generous one: it gives clients no CPU of their "
            "own, while on the benchmark machine W client threads and the server share its cores."
        )
        say("")

    rates = parse_rates(args.rates, c, args.hosts)
    load = lambda rate: f"{rate:.3g} appends/s per host" if rate else "closed loop"
    say(f"**{args.hosts:,} hosts, {args.rtt_ms} ms round trip**:")
    say("")
    say("| load | layout | appends/s | per host | ms per append, mean | p99 | server CPU busy | frames per WAL flush |")
    say("|---|---|---:|---:|---:|---:|---:|---:|")
    for rate in rates:
        for design, label in (("global-head", "global head (one chain)"), ("per-trace", "per trace, no checkpoints")):
            r = Sim(args, c, design, args.hosts, args.rtt_ms, None, args.duration, rate=rate).run().results()
            short = rate and r["throughput"] < 0.98 * rate * args.hosts
            say(
                f"| {load(rate)} | {label} | {fmt(r['throughput'])}{' (overloaded: the hosts fall behind)' if short else ''} | "
                f"{fmt(r['throughput'] / args.hosts, 2)} | {fmt(r['latency_mean'], 2)} | {fmt(r['latency_p99'], 2)} | "
                f"{r['cpu_busy'] * 100:.0f}% | {fmt(r['frames_per_flush'], 1)} |"
            )
            print(f"{load(rate)}, {label}: {r['throughput']:.0f} appends/s", file=sys.stderr)
    say("")
    say(
        "**Per trace, with a checkpoint every I seconds** (same fleet). *Takes*: from the checkpointer's "
        "request to its signed checkpoint durable, queueing at the server included; *unloaded*: the same on an "
        "idle server. A checkpoint covers the traces whose heads moved since the previous one."
    )
    say("")
    say(
        "| load | I | appends/s | traces per checkpoint, mean | max | checkpoint takes, ms, mean | max | unloaded, ms | "
        "frames at risk, mean | max | seconds at risk, mean | max |"
    )
    say("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for rate in rates:
        for interval in intervals:
            duration = max(args.duration, args.cycles * interval + 1.0)
            r = Sim(args, c, "per-trace", args.hosts, args.rtt_ms, interval, duration, rate=rate).run().results()
            print(f"{load(rate)}, checkpoint every {interval} s: {r['throughput']:.0f} appends/s", file=sys.stderr)
            if r.get("checkpoints", 0) < 2:
                say(f"| {load(rate)} | {interval:g} s | {fmt(r['throughput'])} | (fewer than two checkpoints finished) |||||||||")
                continue
            say(
                f"| {load(rate)} | {interval:g} s | {fmt(r['throughput'])} | {fmt(r['traces_mean'])} | {fmt(r['traces_max'])} | "
                f"{fmt(r['ck_ms_mean'], 2)} | {fmt(r['ck_ms_max'], 2)} | {fmt(r['ck_work_ms_mean'], 2)} | "
                f"{risk_cells(r)}"
            )
    say("")
    say(
        f"**Sweeps** (same fleet): a ledger already holding N traces, a whole sweep every {args.sweep_every:g} s "
        "at once (*whole*), or a slice of it each run (*slices*, what `rlp trace checkpoint --every I --sweep "
        "10m` does; the model's period is shorter to fit the runs). *Longest run*: from request to durable "
        "checkpoint, after the first two runs (a whole sweep in either case, and the run that catches up with "
        "what was appended meanwhile), from which the window is measured too."
    )
    say("")
    say(
        "| load | I | N | sweep | appends/s | ms per append, p99 | longest run, s | frames at risk, mean | max | "
        "seconds at risk, mean | max |"
    )
    say("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for rate in rates:
        for interval in [float(x) for x in args.sweep_intervals.split(",") if x]:
            for ledger_traces in [int(x) for x in args.ledger_traces.split(",") if x]:
                for how in ("whole", "slices"):
                    duration = max(args.duration, args.cycles * interval + 1.0, 2 * args.sweep_every + interval + 5.0)
                    sweep = (how, args.sweep_every, ledger_traces)
                    r = Sim(args, c, "per-trace", args.hosts, args.rtt_ms, interval, duration, rate=rate, sweep=sweep)
                    r = r.run().results()
                    print(f"{load(rate)}, every {interval} s, N {ledger_traces}, {how}: done", file=sys.stderr)
                    row = f"| {load(rate)} | {interval:g} s | {ledger_traces:,} | {how} | {fmt(r['throughput'])} |"
                    if r.get("checkpoints", 0) < 2:
                        say(f"{row} (fewer than two checkpoints finished) ||||||")
                        continue
                    say(f"{row} {fmt(r['latency_p99'], 2)} | {fmt(r['ck_ms_max'] / 1000.0, 2)} | {risk_cells(r)}")
    say("")
    say("Assumptions:")
    say("")
    for a in assumptions(args, c, args.rtt_ms):
        say(f"- {a}")
    text = "\n".join(out)
    print(text)
    if args.hosts == 1000 and os.environ.get("UPDATE_DOCS", "1") == "1":
        subprocess.run(
            ["bash", "-c", 'source bench/lib.sh && update_doc_section "$1" "$2"', "fleet_sim", HEADING, text],
            cwd=REPO,
            check=True,
        )


if __name__ == "__main__":
    main()
