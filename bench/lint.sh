#!/usr/bin/env bash
# Times `rlp lint` against a baseline that does strictly less work: JSON Schema
# validation of the same tools.json files by check-jsonschema (PyPI), using
# rlp's published schemas/tools.v1.schema.json.
#
#   bench/lint.sh            # 1,000-tool bundle and a folder of 200 bundles
#   RUNS=20 bench/lint.sh    # more repetitions
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work="$root/bench/work/lint"
runs=${RUNS:-10}

cargo build --release --quiet
rlp="$root/target/release/rlp"

if [ ! -x "$root/bench/work/venv/bin/check-jsonschema" ]; then
  python3 -m venv "$root/bench/work/venv"
  "$root/bench/work/venv/bin/pip" install --quiet check-jsonschema
fi
cjs="$root/bench/work/venv/bin/check-jsonschema"

rm -rf "$work"
python3 bench/gen_bundles.py "$work" 1000 200
"$rlp" digest "$work/big/big" >/dev/null
for b in "$work"/many/*/; do "$rlp" digest "$b" >/dev/null; done
"$rlp" lint "$work/big/big" >/dev/null
"$rlp" lint "$work/many" >/dev/null

# Best-of-N wall time of a command, in milliseconds.
best_ms() {
  local best=
  for _ in $(seq "$runs"); do
    local start end ms
    start=$(date +%s%N)
    "$@" >/dev/null 2>&1 || true
    end=$(date +%s%N)
    ms=$(( (end - start) / 1000 ))
    if [ -z "$best" ] || [ "$ms" -lt "$best" ]; then best=$ms; fi
  done
  echo "$best"
}

schema="$root/schemas/tools.v1.schema.json"
many_tools=("$work"/many/*/tools.json)

big_rlp=$(best_ms "$rlp" lint "$work/big/big")
big_base=$(best_ms "$cjs" --schemafile "$schema" "$work/big/big/tools.json")
many_rlp=$(best_ms "$rlp" lint "$work/many")
many_base=$(best_ms "$cjs" --schemafile "$schema" "${many_tools[@]}")

ratio() { python3 -c "print(f'{$2 / $1:.1f}x')"; }
printf '%-34s %12s %18s %8s\n' "case" "rlp lint" "check-jsonschema" "ratio"
printf '%-34s %10.1fms %16.1fms %8s\n' "1 bundle, 1,000 tools" "$(echo "$big_rlp/1000" | bc -l)" "$(echo "$big_base/1000" | bc -l)" "$(ratio "$big_rlp" "$big_base")"
printf '%-34s %10.1fms %16.1fms %8s\n' "200 bundles, 5 tools each" "$(echo "$many_rlp/1000" | bc -l)" "$(echo "$many_base/1000" | bc -l)" "$(ratio "$many_rlp" "$many_base")"
echo "(best of $runs runs each; ratio = baseline time / rlp time; $(nproc) cores)"
