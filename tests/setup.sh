#!/usr/bin/env bash
# Installs everything the test suite runs besides rlp itself; each step is
# quick once done. Run by ./test.sh (the README's test command) and so by
# .ci/run. Fails loudly, naming what it could not install.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"

echo "== MCP Python SDK for the serve tests (tests/mcp/setup.sh)"
sh tests/mcp/setup.sh "$target/mcp-venv" >/dev/null

echo "== real MCP servers from npm and PyPI for the bridge tests (tests/bridge/setup.sh)"
sh tests/bridge/setup.sh "$target/bridge" >/dev/null

echo "== pre-commit for the hook tests (tests/ci/setup.sh)"
sh tests/ci/setup.sh "$target/ci-venv" >/dev/null

echo "== the reference MCP Bundle tools for the export tests (tests/mcpb/setup.sh)"
sh tests/mcpb/setup.sh "$target/mcpb-cli" >/dev/null

echo "== D-Bus and GNOME Keyring for the keyring provider tests (tests/keyring/setup.sh)"
sh tests/keyring/setup.sh

echo "== registry, htpasswd and oras for the OCI tests (tests/oci/setup.sh)"
sh tests/oci/setup.sh "$target/oci-venv" >/dev/null

echo "== PostgreSQL server and client for the ledger tests (tests/postgres/setup.sh)"
sh tests/postgres/setup.sh

echo "== man and col for the man page test"
if ! command -v man >/dev/null 2>&1 || ! command -v col >/dev/null 2>&1; then
  sh tests/apt.sh tests/setup.sh man-db bsdextrautils
fi
