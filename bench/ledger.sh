#!/usr/bin/env bash
# Durable frames per second of the PostgreSQL ledger with 1, 4 and 16
# concurrent writers (a connection each), side by side in one run with raw
# `BEGIN; INSERT …; COMMIT;` of the same rows into a table of the same
# definition through pgbench, and with the SQLite ledger. The server is
# started here on loopback with its default settings (fsync and
# synchronous_commit on), in a temporary folder, and stopped at the end.
#
# Usage: bench/ledger.sh                     (SECONDS_EACH=5 by default)
#        UPDATE_DOCS=0 bench/ledger.sh       to print without rewriting docs/benchmarks.md
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

seconds="${SECONDS_EACH:-5}"
target_dir="${CARGO_TARGET_DIR:-target}"
shown_target="${target_dir#"$PWD"/}"
sh tests/postgres/setup.sh
cargo build --release --example bench_ledger >&2
bench="$target_dir/release/examples/bench_ledger"
pgbin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"

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
as_pg "$pgbin/pg_ctl" -D "$work/data" -w -l "$work/log" \
  -o "-p $port -c listen_addresses=127.0.0.1 -c max_connections=100 -k $work" start >/dev/null
export PGHOST=127.0.0.1 PGPORT="$port" PGUSER=postgres
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c 'CREATE DATABASE bench' >/dev/null
url="postgres://postgres@127.0.0.1:$port/bench?sslmode=disable"

# rlp creates its schema; the raw table is a copy of its definition.
"$bench" --url "$url" --writers 1 --seconds 1 >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -d bench -c 'CREATE TABLE raw_events (LIKE events INCLUDING ALL)' >/dev/null
row="$(psql -X -A -t -d bench -c 'SELECT payload_json, provenance_json, hash_blake3 FROM events ORDER BY id DESC LIMIT 1')"
IFS='|' read -r payload provenance hash <<<"$row"
cat > "$work/raw.sql" <<SQL
BEGIN;
INSERT INTO raw_events (ts_ms, actor, kind, scope, payload_json, provenance_json, hash_blake3, chain_blake3)
VALUES ($(date +%s)000, 'runtime', 'tool.call', 'bench', '$payload', '$provenance', '$hash', '$hash');
COMMIT;
SQL

rate_rlp() { "$bench" --url "$1" --writers "$2" --seconds "$seconds" "${@:3}" | awk '/frames_per_second/ {print $2}'; }
rate_raw() {
  "$pgbin/pgbench" -n -M prepared -c "$1" -j "$1" -T "$seconds" -f "$work/raw.sql" bench 2>/dev/null |
    awk '/^tps = / {printf "%.0f\n", $3}'
}

rows=""
for writers in 1 4 16; do
  raw="$(rate_raw "$writers")"
  pg="$(rate_rlp "$url" "$writers")"
  grouped="$(rate_rlp "$url" "$writers" --group)"
  sqlite="$(rate_rlp "sqlite://$work/sqlite-$writers.sqlite" "$writers")"
  ratio="$(awk -v a="$pg" -v b="$raw" 'BEGIN { printf "%.2f", a / b }')"
  ratio_grouped="$(awk -v a="$grouped" -v b="$raw" 'BEGIN { printf "%.2f", a / b }')"
  rows="$rows| $writers | $raw | $pg | **${ratio}×** | $grouped | **${ratio_grouped}×** | $sqlite |
"
  echo "writers $writers: raw insert $raw/s; rlp postgres $pg/s (${ratio}x), grouped $grouped/s (${ratio_grouped}x); rlp sqlite $sqlite/s" >&2
done

cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)"
version="$("$pgbin/postgres" --version)"
section="$(cat <<SECTION
## Ledger backends (\`bench/ledger.sh\`)

Durable frames per second with W concurrent writers, each with its own
connection (as W processes or hosts would have), one frame per append, every
frame durable before the append returns. **rlp, PostgreSQL**: the ledger's
append — the head-moving insert and its commit, then the synchronous commit
that acknowledges it (docs/fleet.md) — W connections. **Grouped**: the W
writers record through one group-commit writer on one connection, as
concurrent calls of one \`rlp serve\` or \`tools call --batch\` do. **Raw insert**: pgbench running
\`BEGIN; INSERT …; COMMIT;\` of the same row into a table of the same
definition (\`LIKE events INCLUDING ALL\`: its checks and trace index), W
clients, prepared statements. **rlp, SQLite**: the default ledger on the same
disk, W connections. $version on 127.0.0.1, default settings (\`fsync\` and
\`synchronous_commit\` on), $seconds s per row.

Reproduce: \`SECONDS_EACH=$seconds bench/ledger.sh\` (runs
\`$shown_target/release/examples/bench_ledger\` and pgbench).

Machine: $(nproc) cores${cpu:+, $cpu}, $(uname -sr). Run: $(date -u +%Y-%m-%d).

| writers | raw INSERT; COMMIT (rows/s) | rlp, PostgreSQL (frames/s) | ÷ raw | rlp, PostgreSQL, grouped | ÷ raw | rlp, SQLite (frames/s) |
|---:|---:|---:|---:|---:|---:|---:|
$rows
Target: at least 0.8× the raw insert rate at each concurrency.

Where it falls short, and why: raw inserts of independent rows only share
the disk's flushes, while a hash chain makes each append depend on the one
before it — a writer must learn the head, compute its frames' chain values
and send them, a round trip to a client, before the next writer can. With
one connection per writer that round trip is the serial part (the head's row
lock itself is held only while the server runs one statement), so separate
connections level off at one append per round trip however many there are.
Concurrent calls of one process do not pay it per call: \`rlp serve\` and
\`tools call --batch\` put them through the group-commit writer, one append
per batch — the "grouped" column, above the raw rate from 4 writers on.
SECTION
)"
echo "$section"
update_doc_section "## Ledger backends (\`bench/ledger.sh\`)" "$section"
