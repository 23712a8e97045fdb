#!/usr/bin/env bash
# `rlp serve` over stdio, in one run (measurements: bench/serve_bench.py):
#   latency of one tools/call of a trivial exec tool (a compiled program that
#   prints {}) — raw spawn of the tool, the same tool served by a Python
#   FastMCP server, rlp serve with its ledger on tmpfs (sandboxed and not);
#   throughput with 8 calls in flight, ledger on disk and on tmpfs, against
#   one durable transaction per frame and the disk's fsync floor.
#
# Usage: bench/serve.sh              (ITERATIONS=1000 CALLS=3000 WINDOW=8 by default)
#        UPDATE_DOCS=0 bench/serve.sh  to print without rewriting docs/benchmarks.md
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

iterations="${ITERATIONS:-1000}"
calls="${CALLS:-3000}"
window="${WINDOW:-8}"
disk_dir="${BENCH_DISK:-target/bench-serve}"
tmpfs_dir="${BENCH_TMPFS:-/dev/shm}"
target_dir="${CARGO_TARGET_DIR:-target}"
shown_target="${target_dir#"$PWD"/}"
work="$disk_dir/work"
rm -rf "$work"
mkdir -p "$work/logs"

cargo build --release --bin rlp --example bench_ledger_commit >&2
rlp="$target_dir/release/rlp"

# The baseline server's interpreter: a venv with the pinned MCP SDK and FastMCP.
python="$(mcp_venv)"

# The trivial tool, and a bundle serving it.
printf '#include <unistd.h>\nint main(void) { return write(1, "{}\\n", 3) != 3; }\n' >"$work/ok.c"
cc -O2 -o "$work/ok" "$work/ok.c"
tool="$(realpath "$work/ok")"
bundle="$work/bench_serve"
mkdir -p "$bundle"
printf '[capabilities]\nexec = true\n' >"$bundle/policy.caps"
printf '[agent]\nname = "bench_serve"\nversion = "0.1.0"\n\n[artifacts.tools]\npath = "tools.json"\nversion = 1\n\n[artifacts.caps]\npath = "policy.caps"\n' \
  >"$bundle/manifest.toml"
cat >"$bundle/tools.json" <<TOOLS
{"version": 1, "tools": [{"id": "ok", "description": "Prints an empty object.",
  "transport": {"kind": "exec", "command": "$tool"},
  "input_schema": {"type": "object"}, "result_schema": {"type": "object"}, "requires_confirmation": false}]}
TOOLS
RUNLOOP_HOME="$work/home" "$rlp" digest "$bundle" >/dev/null

report="$("$python" bench/serve_bench.py --rlp "$rlp" --bundle "$bundle" --tool "$tool" \
  --python "$python" --fastmcp bench/serve_fastmcp.py --schema src/event/schema.sql \
  --tmpfs "$tmpfs_dir" --disk "$disk_dir" --logs "$work/logs" \
  --iterations "$iterations" --calls "$calls" --window "$window")"

# The ledger writer alone: 8 concurrent writers of single frames, group
# commit against one transaction per frame and the fsync floor, on the disk.
writer_report="$("$target_dir/release/examples/bench_ledger_commit" --dir "$disk_dir" --writers "$window" --frames 1000)"

cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)"
machine="$(nproc) cores${cpu:+, $cpu}, $(uname -sr), disk: $(df -T "$disk_dir" | awk 'NR==2 {print $2 " (" $1 ")"}'), tmpfs: $tmpfs_dir"

section="$(cat <<SECTION
## rlp serve (\`bench/serve.sh\`)

One \`tools/call\` of a trivial exec tool (a compiled program that prints \`{}\`)
over stdio, round trip as a client sees it, against the least an exec call
needs (make a private folder, write the call blob, spawn the tool, read its
stdout, wait, remove the folder) and against the same tool served by a Python
[FastMCP](https://pypi.org/project/fastmcp/) server that runs it with
\`subprocess\`. Every MCP series uses the same minimal client (newline-delimited
JSON-RPC, one \`initialize\`, then calls); the series run interleaved. Then
throughput: $window calls in flight over one session, every frame durable before
its call is answered, the ledger on disk and on tmpfs, against the same frames
written one transaction per frame and the disk's fsync floor, measured in the
same run.

Reproduce: \`bench/serve.sh\` (\`ITERATIONS=$iterations CALLS=$calls WINDOW=$window\`; builds with
\`cargo build --release\`, installs \`mcp==2.3.0 fastmcp==4.2.3\` into \`bench/work/serve-venv\` (\`mcp_venv\` in bench/lib.sh), then runs
\`bench/serve_bench.py\` with \`$shown_target/release/rlp\`).

Machine: $machine. Run: $(date -u +%Y-%m-%d), load average at the end: $(cut -d' ' -f1-3 /proc/loadavg).

$report

The ledger writer alone, on the same disk, without tools
(\`$shown_target/release/examples/bench_ledger_commit --dir $disk_dir --writers $window --frames 1000\`):
$window threads each record single frames, each durable before \`record\`
returns, through the group-commit writer \`rlp serve\` uses and through the
SQLite ledger directly (one transaction per frame):

$writer_report

Targets: \`rlp serve\`'s overhead above the raw spawn under 1 ms per call;
group-committed frames/s at least 4× one transaction per frame.

How to read the throughput rows: each call writes three frames
(\`cap.audit\`, \`tool.call\`, \`tool.result\`), and a call is answered only
once its frames are durable. "One durable transaction per frame" is the most a
writer without group commit could reach on this disk with no tool running at
all; \`rlp serve\` can only beat it by 4× when its calls are cheaper than the
commits they save. When the disk row is close to the tmpfs row, durability is
not what bounds the rate: the tool processes are (spawn, sandbox, private
folder — the latency rows above, on every core at once).
SECTION
)"

echo "$section"

update_doc_section "## rlp serve (\`bench/serve.sh\`)" "$section"
