#!/usr/bin/env bash
# pre-commit hook `rlp-digest-check`: `rlp digest --check` on the bundle of
# every changed file (the nearest folder above it holding manifest.toml),
# each bundle once. Files outside bundles are ignored.
set -euo pipefail

declare -A bundles=()
for file in "$@"; do
  dir="$(dirname "$file")"
  while :; do
    if [ -f "$dir/manifest.toml" ]; then
      bundles["$dir"]=1
      break
    fi
    [ "$dir" = "." ] || [ "$dir" = "/" ] && break
    dir="$(dirname "$dir")"
  done
done
status=0
for bundle in "${!bundles[@]}"; do
  rlp digest --check "$bundle" || { status=1; echo "run \`rlp digest $bundle\` to refresh its digests" >&2; }
done
exit "$status"
