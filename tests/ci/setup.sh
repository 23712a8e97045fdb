#!/bin/sh
# Makes the Python environment of the pre-commit hook tests: a virtualenv
# holding pre-commit at the pinned version below $1 (e.g. target/ci-venv),
# and prints the path of its python (tests/venv.sh).
set -eu
exec sh "$(dirname "$0")/../venv.sh" "$1" "pre-commit==4.7.0" "import pre_commit.main"
