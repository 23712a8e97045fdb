#!/bin/sh
# Installs what the MCP Bundle tests (tests/it/mcpb.rs) run: the reference
# MCPB tools, the npm package @anthropic-ai/mcpb at the pinned version, in a
# folder named after the pin below ROOT, and prints that folder (its CLI is
# node_modules/.bin/mcpb):
#
#   tests/mcpb/setup.sh ROOT          e.g. tests/mcpb/setup.sh target/mcpb-cli
#
# Idempotent, and safe to run from many processes at once: one installs
# under a lock, into a temporary folder renamed into place only once the
# CLI answers with the pinned version, so a folder that exists is complete.
set -eu

version="2.1.2"
package="@anthropic-ai/mcpb@$version"
root="$1"
dir="$root/mcpb-$version"
cli="$dir/node_modules/.bin/mcpb"

fail() {
  echo "tests/mcpb/setup.sh: $*" >&2
  exit 1
}

build() {
  npm install --prefix "$1" --save-exact --no-audit --no-fund "$package" >&2 ||
    fail "npm install $package into $1 failed (it needs the npm registry)"
  found=$("$1/node_modules/.bin/mcpb" --version) || fail "the installed $1/node_modules/.bin/mcpb does not run"
  [ "$found" = "$version" ] || fail "the installed mcpb says it is version $found, not $version"
}
if [ ! -x "$cli" ]; then
  command -v node >/dev/null 2>&1 || fail "node is not on PATH: Node.js 18 or newer, with npm, runs $package"
  command -v npm >/dev/null 2>&1 || fail "npm is not on PATH: it installs $package from the npm registry"
  . "$(dirname "$0")/../once.sh"
  make_once "$dir" build
fi
echo "$dir"
