#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The README's commands run as written: every ```sh block of README.md, in
# order, in one shell (as a reader would type them, so an `export` carries
# over), in the repository root, whose build/ must be the build under test
# (the README's make commands configure and build there: run from anywhere
# else they would point that build at another source tree). A block right after a line "<!-- readme-test: skip (why) -->" is
# left out, with its reason printed. Each block must succeed (set -e); the
# first that fails is named with its line and its output shown.
#   readme.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
src=$(cd "${2:?source dir}" && pwd)
[ -e "$build/lib/libfabric.so.1" ] || { echo "SKIP: $build is not built"; exit 77; }
[ "$(readlink -f "$src/build")" = "$(readlink -f "$build")" ] ||
  { echo "SKIP: the README's commands use the repository's build/, and this build is $build"; exit 77; }

W=$(mktemp -d)
# The Install section installs the package and into /opt/weft, as a reader
# would: what this run installed is removed again at the end (an installed
# plugin is seen by every libfabric program on the machine).
had_pkg=$(dpkg-query -W -f='${Status}' weft 2>/dev/null | grep -c 'install ok installed')
had_opt=0; [ -e /opt/weft ] && had_opt=1
cleanup() {
  rm -rf "$W"
  if [ "$had_pkg" = 0 ] && dpkg-query -W -f='${Status}' weft 2>/dev/null | grep -q 'install ok installed'; then
    dpkg -r weft >/dev/null 2>&1 || echo "readme: could not remove the weft package it installed"
  fi
  if [ "$had_opt" = 0 ]; then rm -rf /opt/weft; fi
}
trap cleanup EXIT
# Open MPI refuses root unless told; the README says so in words.
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

# One script: each block is preceded by a note of its line; a failing
# command stops the script (set -e) and the trap names the block.
script=$W/.readme-blocks.sh
awk '
  /^[[:space:]]*<!-- readme-test: skip/ { skip = $0; next }
  /^[[:space:]]*```sh[[:space:]]*$/ && !inblock {
    inblock = 1; start = NR
    if (skip != "") {
      sub(/^[[:space:]]*<!-- readme-test: skip */, "", skip); sub(/ *-->.*/, "", skip)
      printf "echo \"=== README line %d: skipped %s\"\n", NR, skip
      skipping = 1
    } else {
      printf "BLOCK=%d\necho \"=== README line %d\"\n", NR, NR
      skipping = 0
    }
    skip = ""
    next
  }
  /^[[:space:]]*```/ && inblock { inblock = 0; next }
  inblock && !skipping { print }
  !inblock && !/^[[:space:]]*$/ { skip = "" }
' "$src/README.md" >"$script"
n=$(grep -c '^BLOCK=' "$script")
[ "$n" -gt 0 ] || { echo "FAIL: no shell blocks found in README.md"; exit 1; }

cd "$src"
bash -c "set -e; trap 'echo \"FAIL: the README block at line \$BLOCK failed (exit \$?)\"' ERR; source $script" 2>&1
rc=$?
[ $rc = 0 ] && echo "readme: $n blocks ran as written"
exit $rc
