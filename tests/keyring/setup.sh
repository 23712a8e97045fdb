#!/bin/sh
# Installs what the keyring provider's tests run: a D-Bus session bus
# (dbus-run-session), GNOME Keyring as the Secret Service, and secret-tool
# (libsecret-tools) to look at what rlp stored. Installs with apt-get when a
# command is missing; fails, naming the packages, when it cannot.
set -eu

missing=""
command -v dbus-run-session >/dev/null 2>&1 || missing="$missing dbus-daemon"
command -v gnome-keyring-daemon >/dev/null 2>&1 || missing="$missing gnome-keyring"
command -v secret-tool >/dev/null 2>&1 || missing="$missing libsecret-tools"
[ -z "$missing" ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "tests/keyring/setup.sh: install$missing (no apt-get here)" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
# shellcheck disable=SC2086
if ! $sudo apt-get install -y --no-install-recommends $missing >/dev/null 2>&1; then
  $sudo apt-get update >/dev/null 2>&1 || true
  # shellcheck disable=SC2086
  $sudo apt-get install -y --no-install-recommends $missing >&2 || {
    echo "tests/keyring/setup.sh: cannot install$missing" >&2
    exit 1
  }
fi
