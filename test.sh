#!/usr/bin/env bash
# The test suite, on a fresh machine as on a prepared one: installs what the
# tests run (tests/setup.sh: the MCP Python SDK, pre-commit, the reference
# MCP Bundle tools, D-Bus and GNOME Keyring, the OCI registry and oras,
# PostgreSQL, man and col), then runs `cargo test --locked` with any
# arguments given (`./test.sh --test it sandbox::`). Set-up that cannot
# install something stops here, naming it; nothing is skipped.
set -euo pipefail
cd "$(dirname "$0")"
bash tests/setup.sh
echo "== cargo test --locked $*"
exec cargo test --locked "$@"
