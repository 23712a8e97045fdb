#!/usr/bin/env bash
# Did a change make the SQLite ledger slower? Runs the ledger commit
# benchmark (bench_ledger_commit: W writers, group commit and one
# transaction per frame, every frame durable) of an earlier revision and of
# the working tree alternately, ROUNDS times each on disk and on tmpfs, the
# order rotated every round, and prints the medians side by side with the
# ratio and how many rounds each side won.
#
# Usage: bench/ledger-regression.sh REV   (ROUNDS=8, WRITERS=8, FRAMES=1000 by default)
#        UPDATE_DOCS=0 bench/ledger-regression.sh REV   to print without rewriting docs/benchmarks.md
#
# REV is built once in a git worktree under target/ (its own target folder).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

rev="${1:?usage: bench/ledger-regression.sh REV}"
rounds="${ROUNDS:-8}"
writers="${WRITERS:-8}"
frames="${FRAMES:-1000}"
target_dir="${CARGO_TARGET_DIR:-target}"
disk_dir="${BENCH_DISK:-target/bench-ledger-regression}"
tmpfs_dir="${BENCH_TMPFS:-/dev/shm}/rlp-ledger-regression-$$"
short="$(git rev-parse --short "$rev")"
base="$target_dir/ledger-regression-$short"
results="$(mktemp -d)"
trap 'rm -rf "$results" "$tmpfs_dir"' EXIT

build_revision "$rev" "$base" --example bench_ledger_commit
cargo build --release --example bench_ledger_commit >&2

declare -A bins=([before]="$base/target/release/examples/bench_ledger_commit"
                 [after]="$target_dir/release/examples/bench_ledger_commit")
for round in $(seq "$rounds"); do
  order="before after"
  ((round % 2 == 0)) && order="after before"
  for place in disk tmpfs; do
    folder="$disk_dir"
    [ "$place" = tmpfs ] && folder="$tmpfs_dir"
    for side in $order; do
      dir="$folder/$side-$round"
      rm -rf "$dir" && mkdir -p "$dir"
      "${bins[$side]}" --dir "$dir" --writers "$writers" --frames "$frames" > "$results/$side.$place.$round.txt"
      rm -rf "$dir"
    done
  done
  echo "round $round done" >&2
done

report="$(python3 - "$results" "$rounds" <<'PY'
import re, statistics, sys
folder, rounds = sys.argv[1], int(sys.argv[2])
series = {"group commit": r"\| group commit \(", "one transaction per frame": r"\| one transaction per frame \("}
def rate(path, pattern):
    for line in open(path):
        if re.match(pattern, line):
            return float(line.split("|")[2])
    raise SystemExit(f"{path}: no row matching {pattern}")
print("| series | before: frames/s | after: frames/s | after ÷ before | rounds after won |")
print("|---|---:|---:|---:|---:|")
for place in ("disk", "tmpfs"):
    for name, pattern in series.items():
        runs = {side: [rate(f"{folder}/{side}.{place}.{r}.txt", pattern) for r in range(1, rounds + 1)]
                for side in ("before", "after")}
        before, after = (statistics.median(runs[s]) for s in ("before", "after"))
        won = sum(a > b for a, b in zip(runs["after"], runs["before"]))
        print(f"| {name}, {place} | {before:.0f} | {after:.0f} | **{after / before:.2f}×** | {won}/{rounds} |")
PY
)"

section="$(cat <<SECTION
## SQLite ledger regression check (\`bench/ledger-regression.sh\`)

The ledger commit benchmark (\`examples/bench_ledger_commit\`: $writers writers,
$frames frames each, every frame durable before its append returns; through
the group-commit writer \`rlp serve\` uses, and one transaction per frame) of
an earlier revision ($short, "before") and of the current tree ("after"),
run alternately $rounds times each on disk and on tmpfs, the order swapped
every round. Figures are medians over the rounds; the last column counts the
rounds in which the current tree was faster.
8b73f5e is the last revision with one ledger-wide chain: against it, the
check shows what the per-trace chains and head rows (docs/fleet.md) cost a
single machine.

Reproduce: \`ROUNDS=$rounds bench/ledger-regression.sh $short\`.
Run: $(date -u +%Y-%m-%d), $(nproc) cores, disk: $(df --output=fstype,source "$disk_dir" | tail -1 | xargs).

$report
SECTION
)"
echo "$section"
update_doc_section "## SQLite ledger regression check (\`bench/ledger-regression.sh\`)" "$section"
