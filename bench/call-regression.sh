#!/usr/bin/env bash
# Did a change make calls slower? Runs the runtime benchmark (bench_call) of
# an earlier revision and of the working tree alternately, ROUNDS times each,
# and prints the median of each overhead figure for both side by side.
#
# Usage: bench/call-regression.sh REV      (ROUNDS=4, ITERATIONS=400 by default)
#        UPDATE_DOCS=0 bench/call-regression.sh REV   to print without rewriting docs/benchmarks.md
#
# REV is built once in a git worktree under target/ (its own target folder).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

rev="${1:?usage: bench/call-regression.sh REV}"
rounds="${ROUNDS:-4}"
iterations="${ITERATIONS:-400}"
target_dir="${CARGO_TARGET_DIR:-target}"
disk_dir="${BENCH_DISK:-target/bench-call}"
tmpfs_dir="${BENCH_TMPFS:-/dev/shm}"
mkdir -p "$disk_dir"
short="$(git rev-parse --short "$rev")"
base="$target_dir/regression-$short"
results="$(mktemp -d)"
trap 'rm -rf "$results"' EXIT

build_revision "$rev" "$base" --bin rlp --example bench_call
cargo build --release --bin rlp --example bench_call >&2

for round in $(seq "$rounds"); do
  for side in before after; do
    dir="$target_dir"
    [ "$side" = before ] && dir="$base/target"
    "$dir/release/examples/bench_call" --iterations "$iterations" --rlp "$dir/release/rlp" \
      --disk "$disk_dir" --tmpfs "$tmpfs_dir" > "$results/$side.$round.txt"
    echo "round $round: $side done" >&2
  done
done

report="$(python3 - "$results" "$rounds" <<'PY'
import re, statistics, sys
folder, rounds = sys.argv[1], int(sys.argv[2])
def overheads(path):
    rows = {}
    for line in open(path):
        m = re.match(r'\| (.+? over .+?) \| (-?[\d.]+) \| (-?[\d.]+) \| ([\d.]+)× \|', line)
        if m:
            rows[m.group(1)] = (float(m.group(2)), float(m.group(3)))
    return rows
sides = {s: [overheads(f"{folder}/{s}.{r}.txt") for r in range(1, rounds + 1)] for s in ("before", "after")}
print("| overhead (median of the rounds) | before: wall µs | after: wall µs | change | before: CPU µs | after: CPU µs | change |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name in sides["after"][0]:
    def med(side, i):
        values = [run[name][i] for run in sides[side] if name in run]
        return statistics.median(values) if values else None
    b_wall, a_wall, b_cpu, a_cpu = med("before", 0), med("after", 0), med("before", 1), med("after", 1)
    if b_wall is None:
        print(f"| {name} | – | {a_wall:.0f} | new | – | {a_cpu:.0f} | new |")
    else:
        print(f"| {name} | {b_wall:.0f} | {a_wall:.0f} | {a_wall - b_wall:+.0f} | {b_cpu:.0f} | {a_cpu:.0f} | {a_cpu - b_cpu:+.0f} |")
PY
)"

section="$(cat <<SECTION
## Runtime regression check (\`bench/call-regression.sh\`)

The runtime benchmark of an earlier revision ($short, "before") and of the
current tree ("after"), run alternately $rounds times each, $iterations iterations per
series; each figure is the median over the rounds of that run's median
overhead above the raw spawn (or raw reqwest) measured in the same run.

Reproduce: \`ROUNDS=$rounds ITERATIONS=$iterations bench/call-regression.sh $short\`.
Run: $(date -u +%Y-%m-%d), $(nproc) cores.

$report
SECTION
)"
echo "$section"
update_doc_section "## Runtime regression check (\`bench/call-regression.sh\`)" "$section"
