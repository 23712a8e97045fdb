#!/usr/bin/env bash
# Times hashing and packing of bundles against the physical-limit anchors:
#
# - `rlp digest --check` and `rlp bundle verify` against `b3sum` over the
#   same files and `b3sum --check` of a digest list, on a bundle with one
#   1 GiB artifact and on a bundle of 10,000 small files;
# - `rlp bundle pack` against `tar -czf` of the same folder;
# - `rlp bundle verify <archive>` (content, chunks inflated in parallel) and
#   `rlp bundle verify --canonical <archive>` (re-encodes and compares) against
#   `gzip -t` of tar's archive and of rlp's own, in the same rounds.
#
#   bench/digest.sh                       # best of 10 (hashing), 3 (small pack), 1 (large pack)
#   RUNS=20 PACK_RUNS=5 VERIFY_RUNS=3 bench/digest.sh
#   ONLY=archives bench/digest.sh         # only the pack and archive rows
#
# The compared commands run interleaved, round after round, and each keeps its
# best time: on a shared machine, load then affects every series alike
# (hyperfine runs one series after the other). Installs b3sum with
# `cargo install b3sum` if missing. The bundles are generated once under
# bench/work/digest/ (git-ignored); files are in the page cache after the
# first round.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work="$root/bench/work/digest"
runs=${RUNS:-10}
pack_runs=${PACK_RUNS:-3}
only=${ONLY:-all}
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
  python3 - "$many" <<'PY'
import os, random, sys
root = sys.argv[1]
rng = random.Random(7)
for i in range(10_000):
    folder = os.path.join(root, "files", f"{i // 100:02d}")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{i:04d}.txt"), "wb") as f:
        f.write(rng.randbytes(rng.randint(256, 4096)))
PY
fi
"$rlp" digest "$big" >/dev/null
"$rlp" digest "$many" >/dev/null
mkdir -p "$work/out"

# The same files as b3sum sees them, and b3sum's own check lists.
for case in big many; do
  dir=$([ "$case" = big ] && echo "$big" || echo "$many")
  (cd "$dir" && find . -type f ! -name manifest.toml ! -path './SIGNATURES/*' | sort >"$work/$case.files")
  (cd "$dir" && xargs -a "$work/$case.files" "$b3sum" >"$work/$case.b3")
done

# best_ms ROUNDS DIR NAME -- CMD... [;; NAME -- CMD...]: interleaved rounds,
# best wall time of each command in milliseconds, as "name=ms" lines.
best_ms() {
  python3 - "$@" <<'PY'
import subprocess, sys, time
rounds, cwd, spec = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
cmds, cur = [], []
for word in spec + [";;"]:
    if word == ";;":
        cmds.append((cur[0], cur[2:]))
        cur = []
    else:
        cur.append(word)
best = {name: float("inf") for name, _ in cmds}
for _ in range(rounds):
    for name, argv in cmds:
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            sys.exit(f"{name} failed: {' '.join(argv)}")
        best[name] = min(best[name], elapsed)
for name, seconds in best.items():
    print(f"{name}={seconds * 1000:.1f}")
PY
}

row() { # label rlp_ms base_ms
  printf '%-64s %9s ms %9s ms %7sx\n' "$1" "$2" "$3" "$(python3 -c "print(f'{$2 / $3:.2f}')")"
}
get() { grep "^$1=" <<<"$2" | cut -d= -f2; }

echo "machine: $(nproc) cores, $(uname -sr); best of $runs (hashing), $pack_runs (small pack and verify), 1 (large pack), ${VERIFY_RUNS:-2} (large verify)"
printf '%-64s %12s %12s %8s\n' "case" "rlp" "baseline" "rlp/base"
for case in big many; do
  [ "$only" = archives ] && break
  dir=$([ "$case" = big ] && echo "$big" || echo "$many")
  label=$([ "$case" = big ] && echo "1 GiB artifact" || echo "10,000 small files")
  t=$(best_ms "$runs" "$dir" \
    digest -- "$rlp" digest . --check ";;" \
    verify -- "$rlp" bundle verify . ";;" \
    b3sum -- xargs -a "$work/$case.files" "$b3sum" ";;" \
    b3check -- "$b3sum" --check "$work/$case.b3")
  row "$label: rlp digest --check vs b3sum" "$(get digest "$t")" "$(get b3sum "$t")"
  row "$label: rlp digest --check vs b3sum --check" "$(get digest "$t")" "$(get b3check "$t")"
  row "$label: rlp bundle verify vs b3sum" "$(get verify "$t")" "$(get b3sum "$t")"
  row "$label: rlp bundle verify vs b3sum --check" "$(get verify "$t")" "$(get b3check "$t")"
done
for case in many big; do
  dir=$([ "$case" = big ] && echo "$big" || echo "$many")
  label=$([ "$case" = big ] && echo "1 GiB artifact" || echo "10,000 small files")
  n=$([ "$case" = big ] && echo 1 || echo "$pack_runs")
  t=$(best_ms "$n" "$dir" \
    pack -- "$rlp" bundle pack . -o "$work/out/$case.bundle.tar.gz" ";;" \
    tar -- tar -czf "$work/out/$case.tar.gz" .)
  row "$label: rlp bundle pack vs tar -czf" "$(get pack "$t")" "$(get tar "$t")"
  v=${VERIFY_RUNS:-$([ "$case" = big ] && echo 2 || echo "$pack_runs")}
  t=$(best_ms "$v" "$work/out" \
    verify -- "$rlp" bundle verify "$case.bundle.tar.gz" ";;" \
    canonical -- "$rlp" bundle verify --canonical "$case.bundle.tar.gz" ";;" \
    gunzip -- gzip -t "$case.tar.gz" ";;" \
    gunzip_rlp -- gzip -t "$case.bundle.tar.gz")
  row "$label: rlp bundle verify <archive> vs gzip -t" "$(get verify "$t")" "$(get gunzip "$t")"
  row "$label: rlp bundle verify <archive> vs gzip -t (rlp's)" "$(get verify "$t")" "$(get gunzip_rlp "$t")"
  row "$label: rlp bundle verify --canonical vs gzip -t" "$(get canonical "$t")" "$(get gunzip "$t")"
  printf '%-64s %9s B  %9s B\n' "  archive sizes" "$(stat -c %s "$work/out/$case.bundle.tar.gz")" "$(stat -c %s "$work/out/$case.tar.gz")"
done
echo "(rlp/base < 1: rlp is faster)"
