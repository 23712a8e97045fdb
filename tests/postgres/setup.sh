#!/bin/sh
# Installs what the PostgreSQL ledger's tests and bench/ledger.sh run: the
# server binaries (initdb, pg_ctl, postgres, pgbench) and psql. The tests
# start their own servers in temporary folders on free ports; nothing is
# started here. Fails, naming the package, when it cannot install.
set -eu

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -n "$bin" ] && [ -x "$bin/initdb" ] && [ -x "$bin/pgbench" ] && command -v psql >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "tests/postgres/setup.sh: install PostgreSQL's server and client (no apt-get here)" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if ! $sudo apt-get install -y --no-install-recommends postgresql postgresql-client >/dev/null 2>&1; then
  $sudo apt-get update >/dev/null 2>&1 || true
  $sudo apt-get install -y --no-install-recommends postgresql postgresql-client >&2 || {
    echo "tests/postgres/setup.sh: cannot install postgresql" >&2
    exit 1
  }
fi
