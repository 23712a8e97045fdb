#!/usr/bin/env bash
# Deferred tool discovery on real tool definitions, in one run (measurements:
# examples/bench_discovery.rs): the 106 tools six public MCP servers publish
# (bench/discovery/tools.json, sources in bench/discovery/SOURCES.md) as one
# rlp bundle; the initial tool list of `rlp serve --expose all` against
# `--expose core`, and what each of the tasks of bench/discovery/tasks.json
# spends on discovery under `core` (search, describe, the call through
# rlp.call_tool), against the tokens `core` saved up front.
#
# Usage: bench/discovery.sh              measure and rewrite docs/benchmarks.md
#        UPDATE_DOCS=0 bench/discovery.sh  print without rewriting it
#        EXTRACT=1 bench/discovery.sh      first regenerate tools.json from the
#                                          pinned npm packages (needs npm, node ≥ 18)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

data=bench/discovery
target_dir="${CARGO_TARGET_DIR:-target}"
shown_target="${target_dir#"$PWD"/}"

if [ "${EXTRACT:-0}" = 1 ]; then
  servers=bench/work/discovery-npm
  if ! cmp -s "$data/package-lock.json" "$servers/package-lock.json" || [ ! -d "$servers/node_modules" ]; then
    rm -rf "$servers"
    mkdir -p "$servers"
    cp "$data/package.json" "$data/package-lock.json" "$servers/"
    (cd "$servers" && npm ci --no-audit --no-fund --loglevel=error >&2)
  fi
  node "$data/extract.mjs" "$servers/node_modules" "$data/tools.json"
fi

cargo build --release --bin rlp --example bench_discovery >&2
rlp="$target_dir/release/rlp"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# rlp sees none of the caller's settings: its own home, nothing else.
while read -r name; do unset "$name"; done < <(compgen -e | grep '^RUNLOOP_' || true)
export RUNLOOP_HOME="$work/home"
bundle="$(python3 "$data/make_bundle.py" "$data/tools.json" "$work")"
"$rlp" digest "$bundle" >/dev/null
"$rlp" lint "$bundle" >&2

report="$("$target_dir/release/examples/bench_discovery" --rlp "$rlp" --bundle "$bundle" \
  --tasks "$data/tasks.json" --published "$data/tools.json")"

sources="$(sed -n 's/^| `\(.*\)` | \([0-9]*\) |.*$/`\1` (\2)/p' "$data/SOURCES.md" | paste -sd, - | sed 's/,/, /g')"
core="$(python3 -c 'import json,sys; print(", ".join("`%s`" % t["id"] for t in json.load(open(sys.argv[1]))["tools"] if t.get("discoverability") == "core"))' "$bundle/tools.json")"

section="$(cat <<SECTION
## Deferred discovery (\`bench/discovery.sh\`)

A host that loads several popular MCP servers at once hands the model every
tool definition of every server before the first message. This benchmark
takes the 106 tool definitions six public servers publish — $sources
tools, extracted into ${data}/tools.json from the pinned npm packages by
\`${data}/extract.mjs\` (${data}/SOURCES.md) — and serves them as one rlp bundle (ids prefixed by
server, descriptions and input schemas verbatim; every tool runs one script
that prints \`{}\`). It compares the initial tool list of
\`rlp serve --expose all\` with \`--expose core\`, which lists 8 core tools —
$core: local files, a repository file, opening and reading a web page — plus
\`rlp.search_tools\`, \`rlp.describe_tools\` and \`rlp.call_tool\`. Then it
runs the 10 tasks of \`${data}/tasks.json\`, each needing a tool that is
not core: under \`core\` the model searches (once more, in other words, when
a search misses), describes the candidates it picks and calls through
\`rlp.call_tool\`; under \`all\` it calls directly.

Reproduce: \`bench/discovery.sh\` (builds with \`cargo build --release\`, runs
\`$shown_target/release/examples/bench_discovery\`; \`EXTRACT=1\` first
regenerates tools.json with npm). Run: $(date -u +%Y-%m-%d).

$report

Method. Counted is the JSON the host and server exchange, compact as
\`rlp serve\` writes it: the \`params\` of each request and the \`result\` of
each answer, without the JSON-RPC envelope (\`jsonrpc\`, \`id\`, \`method\`);
the initial list is the \`tools/list\` result. rlp's full list is smaller
than the servers' own (the reference row) because the bundle leaves out their
\`title\`s, their output schemas (filesystem and memory servers) and
draft-07 \`\$schema\` lines, and rlp writes its own annotations. Tokens are OpenAI's
o200k_base encoding ([tiktoken-rs](https://crates.io/crates/tiktoken-rs),
whose table is built in). A task's extra tokens are its searches and its describe
exchange plus what its call through \`rlp.call_tool\` costs beyond the same
call made directly under \`all\` (whose result must be the same, less
\`_meta\`); its net saving is the tokens \`core\` saved on the initial list
less those extra tokens. A call result carries its payload twice, as text
content and as \`structuredContent\`, and both are counted: a host that shows
the model only one of them spends about half as much on discovery. Search
and describe results also carry a \`_meta\` naming the session's trace, a
UUID, so their token counts vary by a few from run to run. The
rank is where the called tool came in its search's results (5 by default).
Each exchange is counted once: the initial list once per session, each
task's discovery once. A session that discovers tools for more tasks than
the break-even number in the summary spends more under \`core\` than the
full list would have cost (hosts that resend the list with every model
request without caching pay for it again each time, which favours \`core\`).

Targets: at least 85% fewer initial tokens under \`core\`; a net saving on at
least 8 of 10 tasks.
SECTION
)"

echo "$section"

update_doc_section "## Deferred discovery (\`bench/discovery.sh\`)" "$section"
