#!/bin/sh
# Installs Debian packages for a test set-up script, quietly, refreshing the
# package lists once if the first attempt fails; fails naming the packages.
#
#   tests/apt.sh SCRIPT PACKAGE...     e.g. tests/apt.sh tests/oci/setup.sh docker-registry
set -eu

script="$1"
shift
if ! command -v apt-get >/dev/null 2>&1; then
  echo "$script: install $* (no apt-get here)" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if ! $sudo apt-get install -y --no-install-recommends "$@" >/dev/null 2>&1; then
  $sudo apt-get update >/dev/null 2>&1 || true
  $sudo apt-get install -y --no-install-recommends "$@" >&2 || {
    echo "$script: cannot install $*" >&2
    exit 1
  }
fi
