#!/usr/bin/env bash
# The two example programs, built the way the README says (only
# -I build/include -L build/lib -lweft_rsm) and run against each other:
# five messages and "quit", checked on both sides.
#   examples.sh BUILD_DIR SOURCE_DIR weft|system
set -euo pipefail
B=$(cd "$1" && pwd); S=$(cd "$2" && pwd); which=$3
T=$(mktemp -d)
export WEFT_RSM_RUNDIR=$(mktemp -d /dev/shm/weft-rsm-examples-XXXXXX)
cleanup() {
  [ -n "${EXP:-}" ] && kill "$EXP" 2>/dev/null || true
  rm -rf "$T" "$WEFT_RSM_RUNDIR"
}
trap cleanup EXIT
CC=${CC:-cc}
# A sanitizer build's libweft_rsm needs the sanitizer runtime loaded first:
# such builds pass its flags in SANITIZE (empty otherwise).
for p in rsm_exporter rsm_importer; do
  "$CC" -Wall -Wextra -Werror ${SANITIZE:+-fsanitize=$SANITIZE} "$S/examples/rsm/$p.c" \
    -I "$B/include" -L "$B/lib" -lweft_rsm -o "$T/$p" 2> >(grep -v "libasan.*dangerous" >&2)
done
if [ "$which" = weft ]; then
  export LD_LIBRARY_PATH=$B/lib          # weft's libfabric.so.1 lies beside libweft_rsm
else
  export LD_LIBRARY_PATH=$B/lib/rsm-only # libweft_rsm alone: Debian's libfabric
fi
timeout 60 "$T/rsm_exporter" shm 0x600042 >"$T/exporter.out" 2>&1 </dev/null &
EXP=$!
timeout 60 "$T/rsm_importer" shm 1 0x600042 5 >"$T/importer.out" 2>&1
wait "$EXP"; EXP=
cat "$T/exporter.out" "$T/importer.out"
grep -q "exported segment 0x600042" "$T/exporter.out"
for i in 1 2 3 4 5; do
  grep -q "^message $i: hello $i from pid" "$T/exporter.out"
  grep -q "^sent: hello $i from pid" "$T/importer.out"
done
grep -q "^message 6: quit" "$T/exporter.out"
grep -q "^6 messages" "$T/exporter.out"
echo "examples: passed over $which"
