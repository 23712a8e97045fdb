#!/bin/sh
# Installs the MCP servers that the bridge tests (rlp calling MCP servers) run,
# below ROOT (e.g. target/bridge), proves each one starts and answers, and
# writes ROOT/servers.env, whose path it prints:
#
#   tests/bridge/setup.sh ROOT
#
# - the reference servers from npm, filesystem, memory and everything, at the
#   versions pinned in package.json + package-lock.json beside this script,
#   installed with `npm ci` into ROOT/npm-<hash of the lock file>; they run on
#   the machine's Node.js (20 or later);
# - mcp-server-time from PyPI, pinned below, in its own virtualenv below
#   ROOT/time-venv (tests/venv.sh);
# - the MCP Python SDK that the tests' own server (servers/seed.py), check.py
#   and direct_client.py run on: tests/mcp/setup.sh, so the SDK is pinned in
#   one place (mcp==2.3.0), in its own venv below ROOT/mcp-venv, so that ROOT
#   holds everything the bridge tests run and removing it starts afresh.
#
# Each part is made once (tests/once.sh): safe to run from many processes at
# once, built in a temporary folder renamed into place when complete. Then
# check.py connects to each server (initialize, tools/list, one tools/call) and
# fails naming any that does not answer; it runs once per set of installs and
# version of seed.py and check.py (ROOT/checked-<hash> marks a pass).
#
# ROOT/servers.env holds KEY=VALUE lines, absolute paths, no quotes:
#   NODE           the node binary
#   FILESYSTEM_JS  `NODE FILESYSTEM_JS DIR...` serves those folders on stdio
#   MEMORY_JS      `NODE MEMORY_JS` (set MEMORY_FILE_PATH: by default the server
#                  keeps its graph inside its own package folder)
#   EVERYTHING_JS  `NODE EVERYTHING_JS` (stdio; `streamableHttp` as first
#                  argument serves HTTP on PORT, default 3001)
#   NODE_MODULES   the node_modules folder of the three
#   TIME_PYTHON    `TIME_PYTHON -m mcp_server_time` serves the time tools
#   SDK_PYTHON     python of the MCP SDK venv: `SDK_PYTHON SERVERS_DIR/seed.py`
#   SERVERS_DIR    this folder's servers/ (seed.py)
# Nothing here reaches the network at test time.
set -eu

time_pin="mcp-server-time==2026.10.19"

fail() {
  echo "tests/bridge/setup.sh: $*" >&2
  exit 1
}

[ $# -eq 1 ] || fail "usage: tests/bridge/setup.sh ROOT"
here="$(cd "$(dirname "$0")" && pwd)"
tests="$(dirname "$here")"
mkdir -p "$1"
root="$(cd "$1" && pwd)"
case "$root$here" in
*[[:space:]]*) fail "paths with spaces cannot go into servers.env unquoted: $root, $here" ;;
esac

command -v node >/dev/null 2>&1 || fail "node (Node.js 20 or later) is not installed: the npm MCP servers run on it"
command -v npm >/dev/null 2>&1 || fail "npm is not installed: it installs the npm MCP servers"
node="$(realpath "$(command -v node)")"
node_major="$("$node" -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 20 ] || fail "$node is Node.js $("$node" --version); the pinned npm MCP servers need 20 or later"

. "$tests/once.sh"

# The npm servers, once per version of the lock file; other versions' installs
# are removed when a new one is made.
lock_hash="$(sha256sum "$here/package-lock.json" | cut -c1-16)"
npm_dir="$root/npm-$lock_hash"
build_npm() {
  mkdir -p "$1"
  cp "$here/package.json" "$here/package-lock.json" "$1/"
  if ! (cd "$1" && npm ci --no-audit --no-fund --loglevel=error) >"$1.log" 2>&1; then
    cat "$1.log" >&2
    fail "npm ci could not install the MCP servers of tests/bridge/package-lock.json (log above)"
  fi
  rm -f "$1.log"
  for old in "$root"/npm-*; do
    case "$old" in "$npm_dir" | "$1" | *.partial.*) ;; *) rm -rf "$old" ;; esac
  done
}
make_once "$npm_dir" build_npm
node_modules="$npm_dir/node_modules"

# The entry script of an npm package (its one bin).
entry_js() {
  "$node" -e '
    const path = require("path");
    const dir = path.join(process.argv[1], process.argv[2]);
    const pkg = require(path.join(dir, "package.json"));
    const bin = typeof pkg.bin === "string" ? pkg.bin : Object.values(pkg.bin)[0];
    console.log(path.resolve(dir, bin));
  ' "$node_modules" "$1"
}
filesystem_js="$(entry_js @modelcontextprotocol/server-filesystem)"
memory_js="$(entry_js @modelcontextprotocol/server-memory)"
everything_js="$(entry_js @modelcontextprotocol/server-everything)"
for js in "$filesystem_js" "$memory_js" "$everything_js"; do
  [ -f "$js" ] || fail "no entry script at $js"
done

time_python="$(sh "$tests/venv.sh" "$root/time-venv" "$time_pin" "import mcp_server_time")"
sdk_python="$(sh "$tests/mcp/setup.sh" "$root/mcp-venv")"

# servers.env, replaced whole so a reader never sees half of it.
env_file="$root/servers.env"
cat >"$env_file.partial.$$" <<EOF
NODE=$node
FILESYSTEM_JS=$filesystem_js
MEMORY_JS=$memory_js
EVERYTHING_JS=$everything_js
NODE_MODULES=$node_modules
TIME_PYTHON=$time_python
SDK_PYTHON=$sdk_python
SERVERS_DIR=$here/servers
EOF
mv -f "$env_file.partial.$$" "$env_file"

# Each server answers: checked once per servers.env, node, seed.py and check.py.
check_hash="$(cat "$env_file" "$here/check.py" "$here/servers/seed.py" | { cat; "$node" --version; } | sha256sum | cut -c1-16)"
build_check() {
  "$sdk_python" "$here/check.py" "$env_file" >&2 || fail "an MCP server of the bridge tests does not answer (named above)"
  mkdir "$1"
  for old in "$root"/checked-*; do
    case "$old" in "$root/checked-$check_hash" | "$1") ;; *) rm -rf "$old" ;; esac
  done
}
make_once "$root/checked-$check_hash" build_check

echo "$env_file"
