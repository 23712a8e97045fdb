#!/bin/sh
# Makes a Python virtualenv holding one pinned PyPI package, in a folder named
# after the pin below ROOT, and prints the path of its python:
#
#   tests/venv.sh ROOT PIN CHECK     e.g. tests/venv.sh target/mcp-venv mcp==2.3.0 'import mcp'
#
# CHECK is Python run by the new venv before it is kept. Safe to run from
# many processes at once: one builds under a lock, in a temporary folder
# renamed into place only once finished, so a venv that exists is complete;
# the others wait for the lock and find it done. (Run the package's tools as
# `python -m …`: scripts keep the temporary folder's path.)
set -eu

root="$1"
pin="$2"
check="$3"
venv="$root/$(echo "$pin" | sed "s/==/-/")"
python="$venv/bin/python"

build() {
  python3 -m venv "$1" >&2
  "$1/bin/python" -m pip install --quiet --disable-pip-version-check "$pin" >&2
  "$1/bin/python" -c "$check" >&2
}
. "$(dirname "$0")/once.sh"
make_once "$venv" build
echo "$python"
