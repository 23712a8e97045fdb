#!/usr/bin/env bash
# Span export overhead per call, in one run: the same in-process calls (an
# exec tool and an http tool) with spans off and on, the spans sent over
# OTLP/HTTP to a live keep-alive receiver on loopback; and one call's frames
# through the span recorder alone. Prints the per-call difference.
#
# Usage: bench/otel.sh            (ITERATIONS=300 by default)
#        UPDATE_DOCS=0 bench/otel.sh   to print without rewriting docs/benchmarks.md
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

iterations="${ITERATIONS:-300}"
disk_dir="${BENCH_DISK:-target/bench-otel}"
mkdir -p "$disk_dir"
target_dir="${CARGO_TARGET_DIR:-target}"
shown_target="${target_dir#"$PWD"/}"
cargo build --release --example bench_call >&2
report="$("$target_dir/release/examples/bench_call" --otel --iterations "$iterations" --disk "$disk_dir")"
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)"

section="$(cat <<SECTION
## Span export (\`bench/otel.sh\`)

What OpenTelemetry spans cost a call: the same in-process \`Runtime::call\`s
(no-op recorder behind) with spans off and on, each pair interleaved, the
spans sent over OTLP/HTTP (protobuf) to a live keep-alive receiver on
loopback by the SDK's batch processor (its defaults: batches of 512, every
5 s); and the frames of one call (audit + call, then result, the two batches
the runtime records) through the span recorder alone. On the call's thread a
span costs assembling it from the frames and handing it to the bounded
queue; encoding and sending happen on the processor's thread, which the CPU
column counts.

Reproduce: \`ITERATIONS=$iterations bench/otel.sh\` (builds with \`cargo build --release\`,
then runs \`$shown_target/release/examples/bench_call --otel --iterations $iterations --disk $disk_dir\`).

Machine: $(nproc) cores${cpu:+, $cpu}, $(uname -sr). Run: $(date -u +%Y-%m-%d).

$report

Target: under 0.2 ms per call with a live collector (the "spans on over off" rows).
SECTION
)"
echo "$section"
update_doc_section "## Span export (\`bench/otel.sh\`)" "$section"
