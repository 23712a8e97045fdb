#!/usr/bin/env bash
# Times `rlp bundle push` and `rlp bundle pull` of a 100 MiB bundle against
# oras (oras-py, the ORAS project's Python client) pushing and pulling the
# same archive file, to the same registry on loopback, in the same run:
#
#   bench/oci.sh                 # best of 5 rounds
#   RUNS=10 bench/oci.sh
#
# The registry is the distribution registry (Debian's docker-registry, as in
# the tests), started here on a free 127.0.0.1 port with its storage in a
# temporary folder, and stopped at the end. The four commands run
# interleaved, round after round, each to a repository of its own round (so
# no upload is skipped), and each keeps its best time. rlp's times include
# what oras does not do: push verifies the archive before sending it, and
# pull verifies it before renaming it into place. Installs the registry and
# oras with tests/oci/setup.sh. Writes its section of docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
source bench/lib.sh
work="$root/bench/work/oci"
runs=${RUNS:-5}
target=${CARGO_TARGET_DIR:-$root/target}

cargo build --release --quiet
rlp="$target/release/rlp"
python=$(sh tests/oci/setup.sh "$target/oci-venv")

bundle="$work/bundle/big"
archive="$work/big-0.1.0.bundle.tar.gz"
if [ ! -f "$archive" ]; then
  rm -rf "$work"
  mkdir -p "$bundle"
  printf '# benchmark bundle\n[agent]\nname = "big"\nversion = "0.1.0"\n' >"$bundle/manifest.toml"
  printf '{"version": 1, "tools": []}\n' >"$bundle/tools.json"
  head -c $((100 << 20)) /dev/urandom >"$bundle/data.bin"
  "$rlp" digest "$bundle" >/dev/null
  "$rlp" bundle pack "$bundle" -o "$archive" >/dev/null
fi

scratch=$(mktemp -d)
port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
host="127.0.0.1:$port"
cat >"$scratch/config.yml" <<EOF
version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $scratch/storage
http:
  addr: $host
EOF
docker-registry serve "$scratch/config.yml" >"$scratch/registry.log" 2>&1 &
registry_pid=$!
trap 'kill $registry_pid 2>/dev/null || true; wait $registry_pid 2>/dev/null || true; rm -rf "$scratch"' EXIT
for _ in $(seq 100); do
  curl -fsS "http://$host/v2/" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "http://$host/v2/" >/dev/null

cat >"$scratch/oras_bench.py" <<'PY'
import os, sys
import oras.client
verb, host, ref, path = sys.argv[1:5]
client = oras.client.OrasClient(hostname=host, insecure=True)
if verb == "push":
    os.chdir(os.path.dirname(path))
    client.push(target=f"{host}/{ref}", files=[os.path.basename(path)])
else:
    client.pull(target=f"{host}/{ref}", outdir=path)
PY

export DOCKER_CONFIG="$scratch/docker"
python3 - "$runs" "$rlp" "$python" "$scratch" "$host" "$archive" >"$scratch/times" <<'PY'
import os, subprocess, sys, time
runs, rlp, python, scratch, host, archive = sys.argv[1:]
best = {}
def timed(name, argv):
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{name} failed: {' '.join(argv)}\n{done.stderr.decode()}")
    best[name] = min(best.get(name, float("inf")), elapsed)
oras = [python, os.path.join(scratch, "oras_bench.py")]
for n in range(int(runs)):
    out = os.path.join(scratch, f"out{n}")
    os.makedirs(out)
    timed("rlp_push", [rlp, "bundle", "push", archive, f"oci://{host}/bench/rlp{n}:0.1.0", "--plain-http"])
    timed("oras_push", oras + ["push", host, f"bench/oras{n}:0.1.0", archive])
    timed("rlp_pull", [rlp, "bundle", "pull", f"oci://{host}/bench/rlp{n}:0.1.0", "--plain-http", "-o", os.path.join(out, "rlp.tar.gz")])
    timed("oras_pull", oras + ["pull", host, f"bench/oras{n}:0.1.0", os.path.join(out, "oras")])
    for pulled in (os.path.join(out, "rlp.tar.gz"), os.path.join(out, "oras", os.path.basename(archive))):
        if open(pulled, "rb").read() != open(archive, "rb").read():
            sys.exit(f"{pulled} differs from the archive pushed")
    subprocess.run(["rm", "-rf", out], check=True)
for name, seconds in best.items():
    print(f"{name}={seconds * 1000:.0f}")
PY

get() { grep "^$1=" "$scratch/times" | cut -d= -f2; }
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
size=$(stat -c %s "$archive")
report=$(
  printf '| %s | %s | %s | %s |\n' "operation ($((size >> 20)) MiB archive)" "rlp" "oras-py" "rlp ÷ oras"
  printf '|---|---:|---:|---:|\n'
  printf '| push | %s ms | %s ms | **%s×** |\n' "$(get rlp_push)" "$(get oras_push)" "$(ratio "$(get rlp_push)" "$(get oras_push)")"
  printf '| pull | %s ms | %s ms | **%s×** |\n' "$(get rlp_pull)" "$(get oras_pull)" "$(ratio "$(get rlp_pull)" "$(get oras_pull)")"
)
echo "machine: $(nproc) cores, $(uname -sr); distribution registry $(docker-registry --version | awk '{print $3}') on loopback; best of $runs rounds"
echo "$report"
update_doc_section "## OCI push and pull (\`bench/oci.sh\`)" "## OCI push and pull (\`bench/oci.sh\`)

\`bench/oci.sh\` ($(date +%Y-%m-%d), $(nproc) cores, the distribution registry $(docker-registry --version | awk '{print $3}') on loopback, plain HTTP, best of $runs rounds, each round to fresh repositories). The whole command is timed for both: process start, the upload or download, and for rlp the archive's verification (before a push, and before a pull renames the file into place). oras is oras-py $("$python" -c 'import importlib.metadata as m; print(m.version("oras"))'), the ORAS project's Python client, pushing and pulling the same file; both pulled files are compared with the original.

$report

Target: at most 1.2× oras."
