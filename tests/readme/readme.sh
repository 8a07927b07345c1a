#!/usr/bin/env bash
# The README's commands run as written: every ```sh block of README.md, in
# order, in one shell (as a reader would type them, so an `export` carries
# over), from a copy of the repository root whose build/ is the build under
# test. A block right after a line "<!-- readme-test: skip (why) -->" is
# left out, with its reason printed. Each block must succeed (set -e); the
# first that fails is named with its line and its output shown.
#   readme.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
src=$(cd "${2:?source dir}" && pwd)
[ -e "$build/lib/libfabric.so.1" ] || { echo "SKIP: $build is not built"; exit 77; }

W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
# The repository root as a reader sees it, with build/ the build under test.
for f in "$src"/* "$src"/.[!.]*; do
  [ -e "$f" ] || continue
  case $(basename "$f") in build | build-* | .git) continue ;; esac
  ln -s "$f" "$W/$(basename "$f")"
done
ln -s "$build" "$W/build"

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

cd "$W"
bash -c "set -e; trap 'echo \"FAIL: the README block at line \$BLOCK failed (exit \$?)\"' ERR; source $script" 2>&1
rc=$?
[ $rc = 0 ] && echo "readme: $n blocks ran as written"
exit $rc
