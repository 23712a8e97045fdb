#!/usr/bin/env bash
# rlp end to end, in a temporary folder and a temporary runtime home:
# scaffold → import a self-describing tool → lint → digest → keygen → sign →
# pack → verify → trust → install → call the tool → inspect the trace →
# replay it against the bundle. Nothing outside the temporary folder is touched.
#
# Bold command lines only on a terminal, and not under NO_COLOR: a log file
# holds plain text. RLP_QUICKSTART_RLP and RLP_QUICKSTART_TOOL name an `rlp`
# binary and the example tool to use instead of building them (the test of
# this script passes its debug builds).
set -euo pipefail
cd "$(dirname "$0")"

if [[ -n "${RLP_QUICKSTART_RLP:-}" && -n "${RLP_QUICKSTART_TOOL:-}" ]]; then
  rlp_bin="$RLP_QUICKSTART_RLP"
  tool_bin="$RLP_QUICKSTART_TOOL"
else
  echo "building rlp and the example tool (cargo build --release)…" >&2
  cargo build --release --quiet --bin rlp --example greet_tool
  target=${CARGO_TARGET_DIR:-$(pwd)/target}
  rlp_bin="$target/release/rlp"
  tool_bin="$target/release/examples/greet_tool"
fi

if [[ -t 1 && -z "${NO_COLOR:-}" ]]; then
  bold=$'\033[1m' plain=$'\033[0m'
else
  bold='' plain=''
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/rlp-quickstart.XXXXXX")
trap 'rm -rf "$work"' EXIT
export RUNLOOP_HOME="$work/home"
cd "$work"

# Prints a command the way a person would type it, then runs it.
run() {
  printf '\n%s$ %s%s\n' "$bold" "$*" "$plain" | sed "s|$rlp_bin|rlp|; s|$work/||g"
  "$@"
}
rlp() { run "$rlp_bin" "$@"; }

rlp agent scaffold demo --non-interactive --root agents --description "Greets people"
rlp tools import agents/demo --exec "$tool_bin" --grant
rlp tools list agents/demo
rlp lint agents/
rlp digest agents/demo --check
rlp keygen --out keys --name release
rlp sign agents/demo --key keys/release.key
rlp bundle pack agents/demo -o demo.bundle.tar.gz
rlp bundle verify demo.bundle.tar.gz --key keys/release.pub
rlp trust add keys/release.pub --name release --allow-caps exec --allow-exec
rlp agent install demo.bundle.tar.gz
rlp agent list

trace_id=$(cat /proc/sys/kernel/random/uuid)
rlp tools call "$RUNLOOP_HOME/agents/demo" demo.greet --args '{"name": "Ada"}' --trace-id "$trace_id"
rlp tools call "$RUNLOOP_HOME/agents/demo" demo.word_count --args '{"text": "one two three"}' --trace-id "$trace_id"
rlp trace list
rlp trace show "$trace_id"
rlp trace verify
rlp replay "$trace_id" --bundle "$RUNLOOP_HOME/agents/demo" --mode strict

printf '\n%squickstart: every step passed%s\n' "$bold" "$plain"
