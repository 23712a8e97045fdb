#!/usr/bin/env bash
# Runs every server scenario of the MCP conformance suite (pinned beside this
# script; `--suite all`: the active ones and the pending ones) twice: against an MCP server of the suite's tools
# (tests/bridge/servers/conformance_tools.py, Streamable HTTP), and against
# `rlp serve --yes` of a bundle that imported that server's tools with
# `rlp tools import --mcp conformance --bare-ids --url`. Prints each
# scenario's result side by side, and fails when a scenario that passes
# against the server directly does not pass through rlp.
#
# `--yes`: the tools are imported as a host sees them, unannotated tools
# needing confirmation; the suite's client answers no confirmation forms, as
# a host that confirms calls itself would not (docs/bridge.md).
#
# Usage: tests/conformance/gateway.sh [RLP]
#   RLP                the rlp binary (default: $CARGO_TARGET_DIR/debug/rlp)
#   CONFORMANCE_WORK   where the suite is installed and the bundle, home and
#                      results are written (default: $CARGO_TARGET_DIR/conformance)
# The MCP Python SDK the server runs on is installed by tests/bridge/setup.sh
# (run here; quick once done).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=tests/conformance/suite.sh
. "$here/suite.sh"
start_run "conformance gateway" "$@"
servers_env="$(sh "$here/../bridge/setup.sh" "$target_dir/bridge" 2>"$work/bridge-setup.log")" ||
  { cat "$work/bridge-setup.log" >&2; fail "tests/bridge/setup.sh failed (log above)"; }
# shellcheck disable=SC1090 # written by tests/bridge/setup.sh
. "$servers_env"

while read -r name; do unset "$name"; done < <(compgen -e | grep '^RUNLOOP_' || true)
export RUNLOOP_HOME="$work/gateway-home"
root="$work/gateway"
rm -rf "$root" "$RUNLOOP_HOME"
mkdir -p "$root"

pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null || true; done' EXIT

# The server of the suite's tools, on a port of its choosing.
"$SDK_PYTHON" "$SERVERS_DIR/conformance_tools.py" --http 0 </dev/null >/dev/null 2>"$root/server.stderr" &
pids+=($!)
wait_for_url "$root/server.stderr" "${pids[-1]}" 's|^seed: listening on \(http://.*\)$|\1|p'
direct="$url"

# The bundle in front of it, served by rlp.
(
  cd "$root"
  "$rlp" agent scaffold gateway --non-interactive >/dev/null
  "$rlp" tools import agents/gateway --mcp conformance --bare-ids --grant --url "$direct" >"$root/import.log" 2>&1 ||
    { cat "$root/import.log" >&2; exit 1; }
  "$rlp" digest agents/gateway >/dev/null
) || fail "could not import the server's tools into a bundle"
"$rlp" serve "$root/agents/gateway" --yes --http 127.0.0.1:0 </dev/null >/dev/null 2>"$root/serve.stderr" &
pids+=($!)
wait_for_url "$root/serve.stderr" "${pids[-1]}" 's|^rlp serve: listening on \(http://.*\)$|\1|p'
gateway="$url"

# One run each; a run's summary lines read `✓ NAME: ...` or `✗ NAME: ...`.
summary() {
  timeout 600 "$conformance" server --suite all --url "$1" --output-dir "$root/results-$2" >"$root/$2.log" 2>&1 || true
  sed -n 's/^\([✓✗]\) \([a-z0-9-]*\): .*/\2 \1/p' "$root/$2.log" >"$root/$2.summary"
  [ -s "$root/$2.summary" ] || { cat "$root/$2.log" >&2; fail "the suite printed no summary against $1"; }
}
summary "$direct" direct
summary "$gateway" gateway

printf '%-34s %-7s %s\n' scenario direct "rlp serve"
lost=()
while read -r name result; do
  through="$(sed -n "s/^$name \(.*\)/\1/p" "$root/gateway.summary")"
  printf '%-34s %-7s %s\n' "$name" "$result" "${through:-missing}"
  if [ "$result" = "✓" ] && [ "$through" != "✓" ]; then lost+=("$name"); fi
done <"$root/direct.summary"
if [ "${#lost[@]}" -gt 0 ]; then
  fail "passes against the server but not through rlp serve: ${lost[*]} (results in $root/results-gateway)"
fi
passed() { grep -c ' ✓$' "$1" || true; }
echo "$(passed "$root/direct.summary") of $(wc -l <"$root/direct.summary") scenarios pass against the server, $(passed "$root/gateway.summary") through rlp serve."
echo "Every scenario that passes against the server passes through rlp serve."
