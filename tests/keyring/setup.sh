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

# shellcheck disable=SC2086
exec sh "$(dirname "$0")/../apt.sh" tests/keyring/setup.sh $missing
