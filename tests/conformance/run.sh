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
# shellcheck source=tests/conformance/suite.sh
. "$here/suite.sh"
start_run "conformance" "$@"

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
wait_for_url "$log" "$server" 's|^rlp serve: listening on \(http://.*\)$|\1|p'

timeout 600 "$conformance" server --url "$url" --expected-failures "$here/baseline.yml" --output-dir "$work/results"
