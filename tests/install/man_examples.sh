#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every example of every man page runs as written. The EXAMPLES section of
# each docs/man/*.md holds indented blocks: each is a shell command block,
# run with `bash -e` in the page's own scratch folder (the files one block
# writes are there for the next), with its background jobs waited for at
# its end. A block that follows a paragraph ending in "prints" or "prints:"
# is output instead: each of its lines must be a line of what the block
# before it printed. Blocks elsewhere (SYNOPSIS) are not examples.
#
# The examples are written for an installed weft. The build is installed
# into a temporary prefix, and the environment is what the Debian package
# gives under /usr: PATH (weft, weft-perf, rsm-perf), PKG_CONFIG_PATH
# (weft-rsm.pc) and LD_LIBRARY_PATH (libweft_rsm) name the prefix's
# folders, and PREFIX names the prefix (pages say where an example needs it).
# The scratch folder holds ring.c, the MPI program the pages build (the
# source tree's examples/mpi/ring.c).
#   man_examples.sh BUILD SOURCE [SANITIZER]
# Exit 77 = SKIP (with the reason printed).
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
src=$(cd "${2:?source dir}" && pwd)
san=${3:-}
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
[ -z "$san" ] || skip "Debian's programs in the examples cannot load weft's $san-instrumented libraries"
[ -e "$build/lib/libfabric.so.1" ] || skip "$build is not built"

tmp=$(mktemp -d /tmp/weft-man-examples.XXXXXX)
rundir=$(mktemp -d /dev/shm/weft-rsm-man.XXXXXX)
trap 'rm -rf "$tmp" "$rundir"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "cmake --install"; }

unset FI_PROVIDER FI_PROVIDER_PATH FI_LOG_LEVEL UCX_TLS UCX_LOG_LEVEL
export PATH=$prefix/bin:$PATH PKG_CONFIG_PATH=$prefix/lib/pkgconfig LD_LIBRARY_PATH=$prefix/lib PREFIX=$prefix
export WEFT_RSM_RUNDIR=$rundir
# Open MPI refuses root unless told; weft(1) says so in words.
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

# split PAGE DIR: writes DIR/<n>.sh for each command block and DIR/<n>.out
# for each output block (n counts the page's blocks; <n>.line its line).
split() {
  awk -v dir="$2" '
    function flush() {
      if (n_lines == 0) return
      n++
      f = dir "/" n (output ? ".out" : ".sh")
      for (i = 1; i <= n_lines; i++) print lines[i] > f
      close(f)
      print start > (dir "/" n ".line")
      close(dir "/" n ".line")
      n_lines = 0
    }
    /^# / { flush(); in_ex = ($0 ~ /^# EXAMPLES[[:space:]]*$/); last_text = ""; next }
    !in_ex { next }
    /^    / {
      if (n_lines == 0) { start = NR; output = (last_text ~ /prints:?[[:space:]]*$/) }
      lines[++n_lines] = substr($0, 5)
      next
    }
    /^[[:space:]]*$/ { if (n_lines > 0) lines[++n_lines] = ""; next }
    { flush(); last_text = $0 }
    END { flush() }
  ' "$1"
}

pages=0 blocks=0
for md in "$src"/docs/man/*.md; do
  page=$(basename "$md" .md)
  d=$tmp/$page
  mkdir -p "$d/blocks" "$d/work"
  split "$md" "$d/blocks"
  ls "$d/blocks"/*.line >/dev/null 2>&1 || continue
  pages=$((pages + 1))
  cp "$src/examples/mpi/ring.c" "$d/work/ring.c"
  n=1
  while [ -e "$d/blocks/$n.line" ]; do
    line=$(cat "$d/blocks/$n.line")
    if [ -e "$d/blocks/$n.out" ]; then
      [ -e "$d/blocks/$((n - 1)).sh" ] || fail "$page, line $line: output with no command block before it"
      while IFS= read -r want; do
        [ -z "$want" ] && continue
        grep -Fxq -- "$want" "$d/blocks/$((n - 1)).log" ||
          fail "$page, line $line: the block before did not print: $want"
      done <"$d/blocks/$n.out"
      echo "ok: $page, line $line: the output shown"
    else
      echo "=== $page, line $line"
      sed 's/^/  $ /' "$d/blocks/$n.sh"
      # Background jobs of the block are its servers: waited for, and their
      # exit status counts.
      printf '\nfor j in $(jobs -p); do wait "$j"; done\n' >>"$d/blocks/$n.sh"
      (cd "$d/work" && timeout 300 bash -e "$d/blocks/$n.sh") >"$d/blocks/$n.log" 2>&1
      rc=$?
      tail -15 "$d/blocks/$n.log" | sed 's/^/    /'
      [ $rc = 0 ] || fail "$page, line $line: the example failed (exit $rc)"
      blocks=$((blocks + 1))
    fi
    n=$((n + 1))
  done
done
[ $pages -gt 0 ] || fail "no EXAMPLES blocks found in $src/docs/man"
echo "man examples: $blocks blocks of $pages pages ran as written"
