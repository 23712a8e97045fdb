#!/bin/sh
# Makes the Python environment of the MCP client tests: a virtualenv holding
# the official MCP Python SDK at the pinned version below $1 (e.g.
# target/mcp-venv), and prints the path of its python (tests/venv.sh).
set -eu
exec sh "$(dirname "$0")/../venv.sh" "$1" "mcp==2.3.0" "import mcp.client.stdio, mcp.client.streamable_http"
