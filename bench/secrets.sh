#!/usr/bin/env bash
# Cost of resolving a secret per provider, in one run: `env`, the
# age-encrypted `file` store with 1,000 secrets, `cmd` with a trivial command.
#
# Usage: bench/secrets.sh            (ITERATIONS=2000, ENTRIES=1000 by default)
#        UPDATE_DOCS=0 bench/secrets.sh   to print without rewriting docs/benchmarks.md
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

iterations="${ITERATIONS:-2000}"
entries="${ENTRIES:-1000}"
target_dir="${CARGO_TARGET_DIR:-target}"
shown_target="${target_dir#"$PWD"/}"
cargo build --release --example bench_secrets >&2
report="$("$target_dir/release/examples/bench_secrets" --iterations "$iterations" --entries "$entries")"
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)"

section="$(cat <<SECTION
## Secret providers (\`bench/secrets.sh\`)

What resolving one secret costs a call, per provider, asked through the same
\`Providers\` chain the runtime asks: \`env\` (one environment variable), the
age-encrypted \`file\` store holding $entries secrets, and \`cmd\` running
\`/bin/echo\` (a process per resolution, through rlp's process runner). The
file store is decrypted once per process — the first resolution — and after
that a resolution costs a \`stat\` of the store (to see \`rlp secrets set\` and
\`rm\` at once) and a lookup.

Reproduce: \`ITERATIONS=$iterations ENTRIES=$entries bench/secrets.sh\` (runs
\`$shown_target/release/examples/bench_secrets --iterations $iterations --entries $entries\`).

Machine: $(nproc) cores${cpu:+, $cpu}, $(uname -sr). Run: $(date -u +%Y-%m-%d).

$report

Target: the file store adds under 1 ms per call at 1,000 entries (decrypted once per process, not per call).
SECTION
)"
echo "$section"
update_doc_section "## Secret providers (\`bench/secrets.sh\`)" "$section"
