# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the compat tests that run a server in the background: a scratch
# folder $T, removed at exit, when the server ($SERVER, when set) is stopped
# too; `fail MESSAGE` says it, shows every non-empty file of $T and exits 1.
T=$(mktemp -d)
SERVER=
scratch_cleanup() {
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null || true
  rm -rf "$T"
}
trap scratch_cleanup EXIT

fail() {
  echo "FAIL: $*"
  for f in "$T"/*; do [ -s "$f" ] && { echo "--- $f"; cat "$f"; }; done
  exit 1
}
