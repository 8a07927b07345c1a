#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The two example programs, built the way the README says (the build
# tree's pkg-config file, weft-rsm.pc, the one name it has installed or not)
# and run against each other:
# five messages and "quit", checked on both sides, with the exporter started
# first and then the importer first; over weft also the importer alone,
# which must say what it waits for and end with the error's name and text.
#   examples.sh BUILD_DIR SOURCE_DIR weft|system
set -euo pipefail
B=$(cd "$1" && pwd); S=$(cd "$2" && pwd); which=$3
T=$(mktemp -d)
export WEFT_RSM_RUNDIR=$(mktemp -d /dev/shm/weft-rsm-examples-XXXXXX)
cleanup() {
  [ -n "${EXP:-}" ] && kill "$EXP" 2>/dev/null || true
  [ -n "${IMP:-}" ] && kill "$IMP" 2>/dev/null || true
  rm -rf "$T" "$WEFT_RSM_RUNDIR"
}
trap cleanup EXIT
CC=${CC:-cc}
# A sanitizer build's libweft_rsm needs the sanitizer runtime loaded first:
# such builds pass its flags in SANITIZE (empty otherwise).
[ -e "$B/lib/pkgconfig/weft-rsm.pc" ] || { echo "no $B/lib/pkgconfig/weft-rsm.pc"; exit 1; }
[ ! -e "$B/lib/pkgconfig/weft_rsm.pc" ] || { echo "the build tree still writes weft_rsm.pc"; exit 1; }
flags=$(echo $(PKG_CONFIG_PATH=$B/lib/pkgconfig pkg-config --cflags --libs weft-rsm))
[ "$flags" = "-I$B/include -L$B/lib -lweft_rsm" ] || { echo "pkg-config weft-rsm: $flags"; exit 1; }
for p in rsm_exporter rsm_importer; do
  "$CC" -Wall -Wextra -Werror ${SANITIZE:+-fsanitize=$SANITIZE} "$S/examples/rsm/$p.c" \
    $flags -o "$T/$p" 2> >(grep -v "libasan.*dangerous" >&2)
done
if [ "$which" = weft ]; then
  export LD_LIBRARY_PATH=$B/lib          # weft's libfabric.so.1 lies beside libweft_rsm
else
  export LD_LIBRARY_PATH=$B/lib/rsm-only # libweft_rsm alone: Debian's libfabric
fi
# run_pair ORDER: the exporter first, or the importer first (it says what it
# waits for, then goes on once the segment is published).
run_pair() {
  if [ "$1" = exporter-first ]; then
    timeout 60 "$T/rsm_exporter" shm 0x600042 >"$T/exporter.out" 2>&1 </dev/null &
    EXP=$!
    timeout 60 "$T/rsm_importer" shm 1 0x600042 5 >"$T/importer.out" 2>&1
  else
    : >"$T/importer.out"  # not the last run's words: the loop below reads it
    timeout 60 "$T/rsm_importer" shm 1 0x600042 5 >"$T/importer.out" 2>&1 &
    IMP=$!
    for _ in $(seq 1 100); do grep -q "waiting up to" "$T/importer.out" && break; sleep 0.05; done
    grep -q "^rsm_importer: waiting up to 10 s for segment 0x600042 to be published on node 1 (controller shm): start rsm_exporter shm 0x600042$" \
      "$T/importer.out" || { cat "$T/importer.out"; echo "the importer did not say what it waits for"; exit 1; }
    timeout 60 "$T/rsm_exporter" shm 0x600042 >"$T/exporter.out" 2>&1 </dev/null &
    EXP=$!
    wait "$IMP"
  fi
  wait "$EXP"; EXP=
  cat "$T/exporter.out" "$T/importer.out"
  grep -q "exported segment 0x600042" "$T/exporter.out"
  for i in 1 2 3 4 5; do
    grep -q "^message $i: hello $i from pid" "$T/exporter.out"
    grep -q "^sent: hello $i from pid" "$T/importer.out"
  done
  grep -q "^message 6: quit" "$T/exporter.out"
  grep -q "^6 messages" "$T/exporter.out"
}
run_pair exporter-first
run_pair importer-first

# No exporter at all (once, over weft: it takes the importer's 10 s): the
# importer says what it waited for, then the error by name and text.
if [ "$which" = weft ]; then
  rc=0
  timeout 60 "$T/rsm_importer" shm 1 0x600043 5 >"$T/alone.out" 2>&1 || rc=$?
  cat "$T/alone.out"
  [ $rc = 1 ]
  grep -q "^rsm_importer: waiting up to 10 s for segment 0x600043 to be published on node 1" "$T/alone.out"
  grep -q "^rsm_importer: no exporter published segment 0x600043 on node 1 within 10 s$" "$T/alone.out"
  grep -q "^rsm_importer: rsm_memseg_import_connect failed: RSMERR_SEG_NOT_PUBLISHED: the segment is not published (yet)$" \
    "$T/alone.out"
fi
echo "examples: passed over $which"
