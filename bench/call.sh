#!/usr/bin/env bash
# Per-call overhead of the runtime, in one run:
#   exec tool through the library Runtime and through the `rlp tools call`
#   process, vs spawning the same trivial tool directly;
#   http tool through the Runtime vs a plain reqwest call to the same local server;
#   ledger frames/second (one durable transaction per frame) and the machine's
#   fsync floor, measured in the same run.
#
# Usage: bench/call.sh            (ITERATIONS=300 by default)
#        UPDATE_DOCS=0 bench/call.sh   to print without rewriting docs/benchmarks.md
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

iterations="${ITERATIONS:-300}"
disk_dir="${BENCH_DISK:-target/bench-call}"
tmpfs_dir="${BENCH_TMPFS:-/dev/shm}"
mkdir -p "$disk_dir"

target_dir="${CARGO_TARGET_DIR:-target}"
# As the docs show it: relative to the repository when it lies inside it.
shown_target="${target_dir#"$PWD"/}"
cargo build --release --bin rlp --example bench_call >&2
report="$("$target_dir/release/examples/bench_call" --iterations "$iterations" --rlp "$target_dir/release/rlp" \
  --disk "$disk_dir" --tmpfs "$tmpfs_dir")"

cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)"
tmp_dir="${TMPDIR:-/tmp}"
# The file system holding $1: type (device[, discard]).
mount_of() {
  local discard=""
  findmnt -no OPTIONS --target "$1" 2>/dev/null | tr ',' '\n' | grep -qx discard && discard=", discard"
  df -T "$1" | awk -v d="$discard" 'NR==2 {print $2 " (" $1 d ")"}'
}
machine="$(nproc) cores${cpu:+, $cpu}, $(uname -sr), disk: $(mount_of "$disk_dir"), tmpfs: $tmpfs_dir, the calls' private folders: $(mount_of "$tmp_dir") in $tmp_dir"

section="$(cat <<SECTION
## Runtime (\`bench/call.sh\`)

Per-call overhead of the tool-call runtime over running the same trivial exec
tool directly (spawn + read stdout + wait), and of the http transport over a
plain reqwest call to the same local keep-alive server; the ledger's cost is
shown separately (no-op recorder, ledger on tmpfs, ledger on disk) together
with the machine's fsync floor measured in the same run.

Reproduce: \`ITERATIONS=$iterations bench/call.sh\` (builds with \`cargo build --release\`,
then runs \`$shown_target/release/examples/bench_call --iterations $iterations --rlp $shown_target/release/rlp --disk $disk_dir --tmpfs $tmpfs_dir\`).

Machine: $machine. Run: $(date -u +%Y-%m-%d).

$report

Targets: the sandbox under 0.3 ms per call over the unsandboxed runner (the "sandbox … over
sandbox off" rows: building and applying the Landlock ruleset, loading the seccomp filter,
and, with a net grant, starting the connect supervisor), and under 0.3 ms per connection
for a tool with a net grant (the connect rows: the benchmark itself runs as a tool that
connects and closes in a loop, each \`connect\` checked and made by rlp's supervisor, against
the same tool with the sandbox off). In-process exec overhead under 0.3 ms per call above the raw spawn, http
under 0.5 ms above raw reqwest, both without the ledger's fsync (the no-op
recorder and tmpfs rows). The exec overhead includes making and removing the
call's private folder in \$TMPDIR (on a file system mounted with \`discard\`,
freeing its block waits for the disk, which rlp leaves to a background thread
unless that thread falls behind). The CLI rows include process start-up,
loading and linting the bundle, and opening the ledger; the \`--batch\` rows
divide the time of one process making 10 or 100 calls, one at a time, by
its calls. The "least a process per call could cost" row adds the spawn of
an empty program (\`/bin/true\`, timed among the CLI runs) to the in-process
call with the ledger on tmpfs, each as a ratio to the raw spawn of its own
series: no process per call, however lean, starts for less than an empty
program, and none calls the tool for less than the runtime does in-process.
SECTION
)"

echo "$section"

update_doc_section "## Runtime (\`bench/call.sh\`)" "$section"
