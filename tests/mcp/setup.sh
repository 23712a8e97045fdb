#!/bin/sh
# Makes the Python environment of the MCP client tests: a virtualenv holding
# the official MCP Python SDK at the pinned version, in a folder named after
# that pin below $1 (e.g. target/mcp-venv), and prints the path of its python.
#
# Safe to run from many processes at once: one builds under a lock, in a
# temporary folder renamed into place only once finished, so a venv that
# exists is complete; the others wait for the lock and find it done.
set -eu

pin="mcp==2.3.0"
root="$1"
venv="$root/$(echo "$pin" | sed "s/==/-/")"
python="$venv/bin/python"

if [ ! -x "$python" ]; then
  mkdir -p "$root"
  exec 9>"$root/lock"
  flock 9
  if [ ! -x "$python" ]; then
    rm -rf "$venv".partial.*
    partial="$venv.partial.$$"
    python3 -m venv "$partial" >&2
    "$partial/bin/python" -m pip install --quiet --disable-pip-version-check "$pin" >&2
    "$partial/bin/python" -c 'import mcp.client.stdio, mcp.client.streamable_http' >&2
    mv "$partial" "$venv"
  fi
fi
echo "$python"
