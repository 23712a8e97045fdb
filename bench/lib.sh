# shellcheck shell=bash
# Shared by the bench/ scripts: `source bench/lib.sh`.

# update_doc_section HEADING TEXT: replaces the section of docs/benchmarks.md
# that starts with the line HEADING (up to the next `## `) by TEXT, or appends
# TEXT when there is no such section. UPDATE_DOCS=0 skips it; BENCH_DOC names
# another file.
update_doc_section() {
  local heading="$1" text="$2"
  [ "${UPDATE_DOCS:-1}" = 1 ] || return 0
  local doc="${BENCH_DOC:-docs/benchmarks.md}" tmp
  mkdir -p "$(dirname "$doc")"
  [ -f "$doc" ] || printf '# Benchmarks\n\nEach section is written by the script it names; rerun it to refresh the numbers.\n' > "$doc"
  tmp="$(mktemp)"
  HEADING="$heading" SECTION_TEXT="$text" awk '
    BEGIN { replaced = 0; skipping = 0 }
    /^## / {
      if (skipping) { skipping = 0 }
      if ($0 == ENVIRON["HEADING"]) { print ENVIRON["SECTION_TEXT"]; print ""; replaced = 1; skipping = 1; next }
    }
    !skipping { print }
    END { if (!replaced) { print ""; print ENVIRON["SECTION_TEXT"] } }
  ' "$doc" > "$tmp"
  mv "$tmp" "$doc"
  echo "updated $doc" >&2
}

# build_revision REV DIR CARGO_ARGS…: checks REV out once in a git worktree
# at DIR/src and builds it in DIR/target (`cargo build --release CARGO_ARGS…`),
# for the scripts that compare an earlier revision with the working tree.
build_revision() {
  local rev="$1" dir="$2"
  shift 2
  if [ ! -d "$dir/src" ]; then
    git worktree add --detach "$dir/src" "$rev" >&2
  fi
  CARGO_TARGET_DIR="$dir/target" cargo build --release --manifest-path "$dir/src/Cargo.toml" "$@" >&2
}

# mcp_venv: makes (once per set of pins) bench/work/serve-venv, a virtualenv
# with the pinned MCP Python SDK and FastMCP that the serve and bridge
# benchmarks' clients and baseline servers run on, and prints its python.
mcp_venv() {
  local venv=bench/work/serve-venv requirements="mcp==2.3.0 fastmcp==4.2.3"
  if [ "$(cat "$venv/pinned" 2>/dev/null)" != "$requirements" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    # shellcheck disable=SC2086 # one argument per requirement
    "$venv/bin/pip" install --quiet $requirements >&2
    echo "$requirements" >"$venv/pinned"
  fi
  echo "$PWD/$venv/bin/python"
}
