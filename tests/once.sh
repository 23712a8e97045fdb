# Sourced by the test set-up scripts: `make_once DIR BUILD` makes DIR once.
#
# Unless DIR exists, BUILD runs with a temporary folder beside DIR as its
# argument, under a lock on DIR's parent, and the folder is renamed to DIR
# once BUILD succeeded: a DIR that exists is complete, and many processes
# may ask at once (one builds, the others wait for the lock and find it done).
make_once() {
  once_dir="$1"
  once_build="$2"
  [ -d "$once_dir" ] && return 0
  mkdir -p "$(dirname "$once_dir")"
  exec 9>"$(dirname "$once_dir")/lock"
  flock 9
  if [ ! -d "$once_dir" ]; then
    rm -rf "$once_dir".partial.*
    once_partial="$once_dir.partial.$$"
    "$once_build" "$once_partial"
    mv "$once_partial" "$once_dir"
  fi
  exec 9>&-
}
