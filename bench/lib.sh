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
