#!/usr/bin/env bash
# The main job: weft answering Debian's real libfabric tools, then weft-perf
# over weft's shm provider (a short sweep), with real libfabric beside it.
set -euo pipefail
build=${1:-build}
lib=$(cd "$build/lib" && pwd)
perf=$build/bin/weft-perf
echo "== Debian's fi_info over weft (LD_LIBRARY_PATH=$lib) =="
LD_LIBRARY_PATH=$lib fi_info -l
LD_LIBRARY_PATH=$lib fi_info -p shm
echo
run() { echo "\$ $*"; "$@"; echo; }
echo "== weft-perf over weft's shm (the same binary runs over Debian's libfabric) =="
export LD_LIBRARY_PATH=$lib
run "$perf" -p shm -t tagged_lat -s 1:64K --time 0.05
run "$perf" -p shm -t tagged_bw -s 4K:4M --time 0.05
run "$perf" -p shm -t write_bw -s 64K:4M --time 0.05
run "$perf" -p shm -t write_bw -s 64K:4M -w 2 --mem memfd --time 0.05
run "$perf" -p shm -t atomic_lat -s 8 --time 0.05
unset LD_LIBRARY_PATH
echo "== side by side, this run: weft vs Debian's libfabric shm =="
for t in "tagged_lat 8" "tagged_bw 1M" "write_bw 1M" "write_bw 1M -w 2 --mem memfd"; do
  set -- $t
  extra=("${@:3}")
  w=$(LD_LIBRARY_PATH=$lib "$perf" -p shm -t "$1" -s "$2" "${extra[@]}" --time 0.1 --csv 2>/dev/null | tail -1)
  r=$("$perf" -p shm -t "$1" -s "$2" "${extra[@]}" --time 0.1 --csv 2>/dev/null | tail -1)
  if [ "$1" = tagged_lat ]; then col=2; unit="us (median, one way)"; else col=4; unit="MB/s"; fi
  wv=$(cut -d, -f$col <<<"$w"); rv=$(cut -d, -f$col <<<"$r")
  printf "%-11s %-4s %-16s weft %10s  libfabric %10s  %s  weft/libfabric %s\n" "$1" "$2" "${extra[*]}" "$wv" "$rv" "$unit" \
    "$(awk -v a="$wv" -v b="$rv" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')"
done
echo
echo "The full comparison (weft, libfabric, fi_pingpong, UCX; tables and plots): make compare"
