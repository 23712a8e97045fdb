#!/usr/bin/env bash
# Times hashing and packing of bundles against the physical-limit anchors:
#
# - `rlp digest --check` and `rlp bundle verify` against `b3sum` (hashing the
#   same files) and `b3sum --check` (checking a list of digests), on a bundle
#   with one 1 GiB artifact and on a bundle of 10,000 small files;
# - `rlp bundle pack` against `tar -czf` of the same folder.
#
#   bench/digest.sh               # best of 5 (hashing), best of 3 (small pack), 1 (large pack)
#   RUNS=10 PACK_RUNS=3 bench/digest.sh
#
# Uses hyperfine when installed (`apt-get install -y hyperfine`), otherwise a
# best-of-N timing loop. Installs b3sum with `cargo install b3sum` if missing.
# The bundles are generated once under bench/work/digest/ (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work="$root/bench/work/digest"
runs=${RUNS:-5}
pack_runs=${PACK_RUNS:-3}
target=${CARGO_TARGET_DIR:-$root/target}

cargo build --release --quiet
rlp="$target/release/rlp"
if ! command -v b3sum >/dev/null; then
  cargo install b3sum --locked --quiet
fi
b3sum=$(command -v b3sum)

manifest() { # name
  printf '# benchmark bundle\n[agent]\nname = "%s"\nversion = "0.1.0"\n' "$1"
}

big="$work/big/big"
if [ ! -f "$big/data.bin" ]; then
  rm -rf "$work/big"
  mkdir -p "$big"
  manifest big >"$big/manifest.toml"
  head -c $((1 << 30)) /dev/urandom >"$big/data.bin"
  printf '{"version": 1, "tools": []}\n' >"$big/tools.json"
fi
many="$work/many/many"
if [ ! -f "$many/files/99/9999.txt" ]; then
  rm -rf "$work/many"
  mkdir -p "$many"
  manifest many >"$many/manifest.toml"
  python3 - "$many" <<'EOF'
import os, random, sys
root = sys.argv[1]
rng = random.Random(7)
for i in range(10_000):
    folder = os.path.join(root, "files", f"{i // 100:02d}")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{i:04d}.txt"), "wb") as f:
        f.write(rng.randbytes(rng.randint(256, 4096)))
EOF
fi
"$rlp" digest "$big" >/dev/null
"$rlp" digest "$many" >/dev/null

# The same files, as b3sum sees them, and b3sum's own check lists.
(cd "$big" && find . -type f ! -name manifest.toml ! -path './SIGNATURES/*' | sort >"$work/big.files")
(cd "$many" && find . -type f ! -name manifest.toml ! -path './SIGNATURES/*' | sort >"$work/many.files")
(cd "$big" && xargs -a "$work/big.files" "$b3sum" >"$work/big.b3")
(cd "$many" && xargs -a "$work/many.files" "$b3sum" >"$work/many.b3")
mkdir -p "$work/out"

# Best-of-N wall time in milliseconds of a command run in a folder.
best_ms() { # n dir cmd...
  local n=$1 dir=$2
  shift 2
  if command -v hyperfine >/dev/null; then
    local json="$work/out/hyperfine.json"
    (cd "$dir" && hyperfine --style none --warmup 1 --runs "$n" --export-json "$json" -N -- "$(printf '%q ' "$@")" >/dev/null 2>&1) ||
      (cd "$dir" && hyperfine --style none --warmup 1 --runs "$n" --export-json "$json" -- "$(printf '%q ' "$@")" >/dev/null 2>&1)
    python3 -c "import json,sys; print(round(min(json.load(open(sys.argv[1]))['results'][0]['times']) * 1000, 1))" "$json"
    return
  fi
  local best=
  (cd "$dir" && "$@" >/dev/null 2>&1) || true
  for _ in $(seq "$n"); do
    local start end
    start=$(date +%s%N)
    (cd "$dir" && "$@" >/dev/null 2>&1) || true
    end=$(date +%s%N)
    local ms=$(((end - start) / 1000000))
    if [ -z "$best" ] || [ "$ms" -lt "$best" ]; then best=$ms; fi
  done
  echo "$best"
}

ratio() { python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.2f}')" "$1" "$2"; }
row() { # label rlp_ms base_ms
  printf '%-44s %10s ms %10s ms %8sx\n' "$1" "$2" "$3" "$(ratio "$2" "$3")"
}

# b3sum over many arguments: a tiny wrapper so every tool runs as one command.
cat >"$work/out/b3sum-list.sh" <<EOF
#!/usr/bin/env bash
exec xargs -a "\$1" "$b3sum"
EOF
chmod +x "$work/out/b3sum-list.sh"

echo "machine: $(nproc) cores, $(uname -sr); best of $runs (hashing), $pack_runs (small pack), 1 (large pack)"
printf '%-44s %13s %13s %9s\n' "case" "rlp" "baseline" "rlp/base"

for case in big many; do
  dir=$([ "$case" = big ] && echo "$big" || echo "$many")
  label=$([ "$case" = big ] && echo "1 GiB artifact" || echo "10,000 small files")
  b3=$(best_ms "$runs" "$dir" "$work/out/b3sum-list.sh" "$work/$case.files")
  b3check=$(best_ms "$runs" "$dir" "$b3sum" --check "$work/$case.b3")
  digest=$(best_ms "$runs" "$dir" "$rlp" digest . --check)
  verify=$(best_ms "$runs" "$dir" "$rlp" bundle verify .)
  row "$label: rlp digest --check vs b3sum" "$digest" "$b3"
  row "$label: rlp digest --check vs b3sum --check" "$digest" "$b3check"
  row "$label: rlp bundle verify vs b3sum" "$verify" "$b3"
  row "$label: rlp bundle verify vs b3sum --check" "$verify" "$b3check"
done

for case in many big; do
  dir=$([ "$case" = big ] && echo "$big" || echo "$many")
  label=$([ "$case" = big ] && echo "1 GiB artifact" || echo "10,000 small files")
  n=$([ "$case" = big ] && echo 1 || echo "$pack_runs")
  pack=$(best_ms "$n" "$dir" "$rlp" bundle pack . -o "$work/out/$case.bundle.tar.gz")
  tgz=$(best_ms "$n" "$dir" tar -czf "$work/out/$case.tar.gz" .)
  row "$label: rlp bundle pack vs tar -czf" "$pack" "$tgz"
  printf '%-44s %10s B  %10s B\n' "  archive size" "$(stat -c %s "$work/out/$case.bundle.tar.gz")" "$(stat -c %s "$work/out/$case.tar.gz")"
done
echo "(ratio < 1: rlp is faster; files are in the page cache after the warm-up run)"
