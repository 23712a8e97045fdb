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
exec sh "$(dirname "$0")/../apt.sh" tests/postgres/setup.sh postgresql postgresql-client
