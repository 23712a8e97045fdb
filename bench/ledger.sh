#!/usr/bin/env bash
# Durable frames per second of the PostgreSQL ledger with 1, 4, 16, 32 and 64
# concurrent writers (a connection and a trace each, as separate hosts
# would have), side by side in one run with raw `BEGIN; INSERT …; COMMIT;`
# of the same rows into a table of the same definition through pgbench, and
# with the SQLite ledger. The server is started here on loopback with its
# default settings (fsync and synchronous_commit on), in a temporary folder,
# and stopped at the end.
#
# The per-append numbers (rates, append times, the server's CPU time and WAL
# flushes per append, the loopback round trip, and a checkpoint's cost when
# the ledger can make one) go to target/bench-ledger.json, which
# bench/fleet_sim.py then reads to model a fleet of 1,000 hosts; this script
# runs it at the end, so one command refreshes both sections of
# docs/benchmarks.md.
#
# Usage: bench/ledger.sh                     (SECONDS_EACH=5 by default)
#        UPDATE_DOCS=0 bench/ledger.sh       to print without rewriting docs/benchmarks.md
#        WRITERS="1 4" bench/ledger.sh       other writer counts
#        LEDGER_JSON=FILE bench/ledger.sh    the JSON elsewhere
#        FLEET_SIM=0 bench/ledger.sh         without running bench/fleet_sim.py
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

seconds="${SECONDS_EACH:-5}"
writer_counts="${WRITERS:-1 4 16 32 64}"
target_dir="${CARGO_TARGET_DIR:-target}"
shown_target="${target_dir#"$PWD"/}"
json="${LEDGER_JSON:-$target_dir/bench-ledger.json}"
sh tests/postgres/setup.sh
cargo build --release --example bench_ledger >&2
bench="$target_dir/release/examples/bench_ledger"
pgbin="$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
max_writers=0
for writers in $writer_counts; do [ "$writers" -gt "$max_writers" ] && max_writers="$writers"; done

work="$(mktemp -d /tmp/rlp-bench-ledger.XXXXXX)"
chmod 755 "$work"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" = 0 ] && chown postgres:postgres "$work"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
cleanup() {
  as_pg "$pgbin/pg_ctl" -D "$work/data" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
as_pg "$pgbin/initdb" -D "$work/data" --auth=trust --username=postgres >/dev/null
# Room for every writer plus the benchmark's own connections; WAL flush
# timing on, for the flushes per append and their length.
as_pg "$pgbin/pg_ctl" -D "$work/data" -w -l "$work/log" \
  -o "-p $port -c listen_addresses=127.0.0.1 -c max_connections=$((2 * max_writers + 40)) -c track_wal_io_timing=on -k $work" \
  start >/dev/null
export PGHOST=127.0.0.1 PGPORT="$port" PGUSER=postgres
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c 'CREATE DATABASE bench' >/dev/null
url="postgres://postgres@127.0.0.1:$port/bench?sslmode=disable"
sql() { psql -X -A -t -q -v ON_ERROR_STOP=1 -d bench -c "$1"; }

# rlp creates its schema; the raw table is a copy of its definition, and
# the raw row a copy of a frame rlp wrote (every column but generated ones).
"$bench" --url "$url" --writers 1 --seconds 1 >/dev/null
sql 'CREATE TABLE raw_events (LIKE events INCLUDING ALL)' >/dev/null
columns="FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'events'
         AND is_identity = 'NO' AND is_generated = 'NEVER'"
names="$(sql "SELECT string_agg(quote_ident(column_name), ', ' ORDER BY ordinal_position) $columns")"
quoted="$(sql "SELECT string_agg(format('quote_nullable(%I)', column_name), ', ' ORDER BY ordinal_position) $columns")"
values="$(sql "SELECT concat_ws(', ', $quoted) FROM events LIMIT 1")"
cat > "$work/raw.sql" <<SQL
BEGIN;
INSERT INTO raw_events ($names) VALUES ($values);
COMMIT;
SQL
echo 'SELECT 1;' > "$work/select1.sql"
# The old layout keeps one head row for the whole ledger (`rlp_head.one`);
# anything else is taken for the per-trace layout. LEDGER_LAYOUT overrides.
layout="${LEDGER_LAYOUT:-$(sql "SELECT CASE WHEN count(*) = 1 THEN 'global-head' ELSE 'per-trace' END
  FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'rlp_head' AND column_name = 'one'")}"

# CPU seconds the server has used so far: the postmaster, the backends it
# has reaped, and its live children.
server_cpu() {
  local postmaster
  postmaster="$(head -n 1 "$work/data/postmaster.pid")"
  { cat /proc/[0-9]*/stat 2>/dev/null || true; } | sed 's/^\([0-9]*\) ([^)]*)/\1 x/' |
    awk -v pm="$postmaster" -v hz="$(getconf CLK_TCK)" '
      $1 == pm { t += $14 + $15 + $16 + $17 } $4 == pm { t += $14 + $15 }
      END { printf "%.3f\n", t / hz }'
}
# Waits until no client but this one is connected (the benchmark's
# backends have exited, been reaped, and reported their WAL statistics).
settle() {
  for _ in $(seq 100); do
    [ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")" = 0 ] && return
    sleep 0.1
  done
}
# measured NAME COMMAND…: runs COMMAND (which prints `NAME value` lines),
# then adds the server's CPU seconds and WAL flushes over the run as
# `server_cpu_seconds`, `wal_syncs` and `wal_sync_ms`.
measured() {
  local before after
  settle
  sql "SELECT pg_stat_reset_shared('wal')" >/dev/null
  before="$(server_cpu)"
  "$@"
  settle
  after="$(server_cpu)"
  echo "server_cpu_seconds $(awk -v a="$after" -v b="$before" 'BEGIN { printf "%.3f", a - b }')"
  sql "SELECT 'wal_syncs ' || wal_sync || E'\nwal_sync_ms ' || round(wal_sync_time::numeric, 3) FROM pg_stat_wal"
}
value() { awk -v k="$1" '$1 == k { print $2; exit }' <<<"$2"; }
rlp_run() { "$bench" --url "$1" --writers "$2" --seconds "$seconds" "${@:3}"; }
pgbench_run() {
  if ! "$pgbin/pgbench" -n -M prepared -c "$1" -j "$1" -T "$3" -f "$2" bench >"$work/pgbench.out" 2>"$work/pgbench.err"; then
    cat "$work/pgbench.err" >&2
    return 1
  fi
  awk '/^tps = / { printf "frames_per_second %.0f\n", $3 } /^latency average = / { print "append_ms_mean", $4 }' "$work/pgbench.out"
}
decimals() { awk -v d="$1" -v x="$2" 'BEGIN { printf "%." d "f", x }'; }
per_append() { awk -v t="$1" -v r="$2" -v s="$seconds" 'BEGIN { printf "%.4f", t * 1000 / (r * s) }'; }

rtt_ms="$(value append_ms_mean "$(pgbench_run 1 "$work/select1.sql" 2)")"
echo "loopback round trip (pgbench SELECT 1, one client): $rtt_ms ms; ledger layout: $layout" >&2

rows=""
json_rows=""
for writers in $writer_counts; do
  raw_out="$(measured pgbench_run "$writers" "$work/raw.sql" "$seconds")"
  pg_out="$(measured rlp_run "$url" "$writers" --no-verify)"
  raw="$(value frames_per_second "$raw_out")"
  pg="$(value frames_per_second "$pg_out")"
  grouped="$(value frames_per_second "$(rlp_run "$url" "$writers" --group)")"
  sqlite="$(value frames_per_second "$(rlp_run "sqlite://$work/sqlite-$writers.sqlite" "$writers")")"
  ratio="$(awk -v a="$pg" -v b="$raw" 'BEGIN { printf "%.2f", a / b }')"
  ratio_grouped="$(awk -v a="$grouped" -v b="$raw" 'BEGIN { printf "%.2f", a / b }')"
  raw_cpu="$(per_append "$(value server_cpu_seconds "$raw_out")" "$raw")"
  pg_cpu="$(per_append "$(value server_cpu_seconds "$pg_out")" "$pg")"
  rows="$rows| $writers | $raw | $pg | **${ratio}×** | $grouped | **${ratio_grouped}×** | $sqlite | $(decimals 2 "$(value append_ms_mean "$raw_out")") | $(decimals 2 "$(value append_ms_mean "$pg_out")") | $(decimals 3 "$raw_cpu") | $(decimals 3 "$pg_cpu") |
"
  json_rows="$json_rows${json_rows:+,}
    {\"writers\": $writers,
     \"raw\": {\"frames_per_second\": $raw, \"append_ms_mean\": $(value append_ms_mean "$raw_out"),
             \"server_cpu_ms_per_append\": $raw_cpu, \"wal_syncs\": $(value wal_syncs "$raw_out"), \"wal_sync_ms\": $(value wal_sync_ms "$raw_out")},
     \"rlp_postgres\": {\"frames_per_second\": $pg, \"append_ms_mean\": $(value append_ms_mean "$pg_out"),
             \"append_ms_p50\": $(value append_ms_p50 "$pg_out"), \"append_ms_p99\": $(value append_ms_p99 "$pg_out"),
             \"server_cpu_ms_per_append\": $pg_cpu, \"wal_syncs\": $(value wal_syncs "$pg_out"), \"wal_sync_ms\": $(value wal_sync_ms "$pg_out")},
     \"rlp_postgres_grouped\": {\"frames_per_second\": $grouped},
     \"rlp_sqlite\": {\"frames_per_second\": $sqlite}}"
  echo "writers $writers: raw insert $raw/s; rlp postgres $pg/s (${ratio}x), grouped $grouped/s (${ratio_grouped}x); rlp sqlite $sqlite/s" >&2
done

# A signed checkpoint's cost by the number of traces it covers, each with
# FRAMES_PER_TRACE new frames (the model's default), all read and checked.
# Each is followed by a sweep of the whole ledger (every trace in it so
# far), which the checkpointer makes every --sweep.
checkpoints="" sweeps=""
for traces in ${CHECKPOINT_TRACES:-100 1000 5000}; do
  out="$("$bench" --url "$url" --checkpoint-traces "$traces" --frames-per-trace "${FRAMES_PER_TRACE:-20}" 2>/dev/null)" || break
  checkpoints="$checkpoints${checkpoints:+, }{\"traces\": $traces, \"seconds\": $(value checkpoint_seconds "$out")}"
  sweeps="$sweeps${sweeps:+, }{\"traces\": $(value sweep_traces "$out"), \"seconds\": $(value sweep_seconds "$out")}"
done
[ -n "$checkpoints" ] || echo "no checkpoint cost measured: this ledger makes no checkpoints" >&2

cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)"
version="$("$pgbin/postgres" --version)"
run_date="$(date -u +%Y-%m-%d)"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
mkdir -p "$(dirname "$json")"
cat > "$json" <<JSON
{
  "layout": "$layout",
  "commit": "$commit",
  "date": "$run_date",
  "machine": {"cores": $(nproc), "cpu": "$cpu", "kernel": "$(uname -sr)", "load_average": "$(cut -d' ' -f1-3 /proc/loadavg)"},
  "postgres": "$version",
  "seconds_each": $seconds,
  "loopback_round_trip_ms": $rtt_ms,
  "rows": [$json_rows
  ],
  "checkpoints": [${checkpoints}],
  "sweeps": [${sweeps}]
}
JSON
python3 -m json.tool "$json" >/dev/null
echo "wrote $json" >&2

if [ "$layout" = global-head ]; then
  why="Where it falls short, and why: raw inserts of independent rows only share
the disk's flushes, while this layout's single hash chain makes each append
depend on the one before it — a writer must learn the head, compute its
frames' chain values and send them, a round trip to a client, before the
next writer can. With one connection per writer that round trip is the
serial part (the head's row lock itself is held only while the server runs
one statement), so separate connections level off at one append per round
trip however many there are, and the writers' separate traces do not help.
Concurrent calls of one process do not pay it per call: \`rlp serve\` and
\`tools call --batch\` put them through the group-commit writer, one append
per batch — the \"grouped\" column. Across hosts, see the next section."
else
  why="Each trace is chained on its own, with a head row per trace moved by the
same statement that inserts the frames: writers on separate traces do not
wait for one another, and what is left between the rlp and raw columns is
that statement's extra work. Across hosts, see the next section."
fi
section="$(cat <<SECTION
## Ledger backends (\`bench/ledger.sh\`)

Durable frames per second with W concurrent writers, each with its own
connection and its own trace (as W processes or hosts would have), one
frame per append, every frame durable before the append returns. **rlp,
PostgreSQL**: the ledger's append (docs/fleet.md), W connections; ledger
layout: **$layout**. **Grouped**: the W writers record through one
group-commit writer on one connection, as concurrent calls of one \`rlp
serve\` or \`tools call --batch\` do. **Raw insert**: pgbench running
\`BEGIN; INSERT …; COMMIT;\` of a frame rlp wrote into a table of the same
definition (\`LIKE events INCLUDING ALL\`: its checks and trace index), W
clients on W threads (\`-c W -j W\`, as the rlp side has a thread per
writer), prepared statements. **rlp, SQLite**: the default ledger on the
same disk, W connections. **ms/append**: the mean time one append takes as
its writer sees it. **Server CPU**: the server's CPU time (all its
processes) over the run, per frame. $version on 127.0.0.1, default
settings (\`fsync\` and \`synchronous_commit\` on; \`max_connections\`
raised for the writers), $seconds s per row; the client and the server
share the machine's cores. Loopback round trip (pgbench \`SELECT 1\`, one
client): $rtt_ms ms.

Reproduce: \`SECONDS_EACH=$seconds bench/ledger.sh\` (runs
\`$shown_target/release/examples/bench_ledger\` and pgbench; writes the
numbers to \`${json#"$PWD"/}\`, then runs \`bench/fleet_sim.py\` on them).

Machine: $(nproc) cores${cpu:+, $cpu}, $(uname -sr). Run: $run_date, commit $commit.

| writers | raw INSERT; COMMIT (rows/s) | rlp, PostgreSQL (frames/s) | ÷ raw | rlp, PostgreSQL, grouped | ÷ raw | rlp, SQLite (frames/s) | raw ms/append | rlp ms/append | raw server CPU ms/row | rlp server CPU ms/frame |
|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
$rows
Target: at least 0.8× the raw insert rate at each concurrency.

$why
SECTION
)"
echo "$section"
update_doc_section "## Ledger backends (\`bench/ledger.sh\`)" "$section"

if [ "${FLEET_SIM:-1}" = 1 ]; then
  python3 bench/fleet_sim.py --measured "$json"
fi
