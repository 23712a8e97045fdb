#!/bin/sh
# Installs what the OCI registry tests and bench/oci.sh run: the
# distribution registry (Debian's docker-registry; the tests start their own
# on free ports, nothing is started here), htpasswd (apache2-utils) for its
# password file, and a virtualenv holding oras-py, the independent client,
# below $1 (e.g. target/oci-venv); prints the path of its python
# (tests/venv.sh). Fails, naming the package, when it cannot install.
set -eu

missing=""
command -v docker-registry >/dev/null 2>&1 || missing="$missing docker-registry"
command -v htpasswd >/dev/null 2>&1 || missing="$missing apache2-utils"
if [ -n "$missing" ]; then
  # shellcheck disable=SC2086
  sh "$(dirname "$0")/../apt.sh" tests/oci/setup.sh $missing
fi
exec sh "$(dirname "$0")/../venv.sh" "$1" "oras==0.2.43" "import oras.client"
