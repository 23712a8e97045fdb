#!/usr/bin/env bash
# The steps of the rlp GitHub Action (action.yml), one per argument:
#
#   install  put the rlp this action is pinned to on PATH: one already on
#            PATH (or at $RLP_BIN) of that version, else `cargo install
#            --locked` from the action's own checkout
#   lint     `rlp lint` on $RLP_PATHS: annotations in the log, SARIF into
#            $RLP_SARIF; its exit code is kept for `finish`
#   digest   `rlp digest --check` on every bundle under $RLP_PATHS
#   finish   fail when lint found errors or a digest is stale
#
# Runs as plain bash too (the tests do): it needs GITHUB_ACTION_PATH (the
# rlp checkout), RUNNER_TEMP and, for install, GITHUB_PATH.
set -euo pipefail

action="${GITHUB_ACTION_PATH:?GITHUB_ACTION_PATH names the rlp checkout}"
state="${RUNNER_TEMP:?RUNNER_TEMP names a scratch folder}/rlp-gate"
mkdir -p "$state"
read -r -a paths <<<"${RLP_PATHS:-.}"

pinned_version() {
  sed -n 's/^version = "\(.*\)"$/\1/p' "$action/Cargo.toml" | head -n 1
}

case "${1:?install, lint, digest or finish}" in
  install)
    want="rlp $(pinned_version)"
    for candidate in "${RLP_BIN:-}" "$(command -v rlp || true)"; do
      if [ -n "$candidate" ] && [ -x "$candidate" ] && [ "$("$candidate" --version)" = "$want" ]; then
        echo "using $candidate ($want)"
        dirname "$candidate" >>"${GITHUB_PATH:?}"
        exit 0
      fi
    done
    root="${RUNNER_TOOL_CACHE:-$HOME/.cache}/rlp/$(pinned_version)"
    cargo install --locked --path "$action" --root "$root"
    echo "$root/bin" >>"${GITHUB_PATH:?}"
    ;;
  lint)
    code=0
    rlp lint --format github "${paths[@]}" || code=$?
    rlp lint --format sarif "${paths[@]}" >"${RLP_SARIF:-rlp.sarif}" || true
    echo "$code" >"$state/lint"
    ;;
  digest)
    stale=0
    : >"$state/digest"
    while IFS= read -r -d '' manifest; do
      bundle="$(dirname "$manifest")"
      if ! rlp digest --check "$bundle"; then
        echo "$bundle" >>"$state/digest"
        echo "::error file=$manifest::the digests in $manifest are stale: run \`rlp digest $bundle\` and commit"
        stale=1
      fi
    done < <(find "${paths[@]}" -name manifest.toml -not -path '*/.git/*' -print0 | sort -z)
    echo "$stale" >"$state/digest-failed"
    ;;
  finish)
    lint="$(cat "$state/lint" 2>/dev/null || echo missing)"
    stale="$(cat "$state/digest-failed" 2>/dev/null || echo missing)"
    if [ "$lint" = 0 ] && [ "$stale" = 0 ]; then
      echo "rlp: every bundle lints clean and its digests are current"
      exit 0
    fi
    [ "$lint" = 0 ] || echo "rlp lint failed (exit $lint): see the annotations above"
    [ "$stale" = 0 ] || echo "stale digests: $(tr '\n' ' ' <"$state/digest" 2>/dev/null)"
    exit 1
    ;;
  *)
    echo "ci/gate.sh: unknown step $1" >&2
    exit 2
    ;;
esac
