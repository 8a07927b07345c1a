#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# make demo: build weft (quietly: the build's output goes to a log file),
# show Debian's real fi_info answering over it, measure weft's shm provider
# with weft-perf, and put weft and Debian's libfabric side by side, with a
# word on how to read each table and a warning when the machine is too busy
# for the figures to mean much.
#   scripts/demo.sh BUILD_DIR [JOBS]
set -euo pipefail
build=${1:-build}
jobs=${2:-$(nproc)}
mkdir -p "$build"
log=$(cd "$build" && pwd)/demo-build.log

# ---------------------------------------------------------------- the build
# What the README's next sections use: libfabric.so.1, the UCP libraries
# (libucp/libucs/libucm), libweft_rsm with build/include/rsmapi.h, and the
# tools: weft-perf, rsm-perf, ucp-perf.
targets=(fabric ucp ucs ucm weft_rsm weft-perf rsm-perf ucp-perf cacheline-pingpong)
echo "Building weft (${targets[*]}): the build's output goes to $log"
here=$(cd "$(dirname "$0")" && pwd)
if ! { cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${CMAKE_ARGS:-} &&
       cmake --build "$build" -j "$jobs" --target "${targets[@]}"; } 2>&1 | "$here/build_progress.sh" "$log"; then
  echo "The build failed; the end of $log:"
  tail -30 "$log"
  exit 1
fi
echo "Built: $build/lib (libfabric.so.1, libucp.so.0, libweft_rsm.so.1), $build/include, $build/bin"
lib=$(cd "$build/lib" && pwd)
perf=$build/bin/weft-perf

# ---------------------------------------------------------------- is the machine quiet?
# The share of all CPUs that other work kept busy over SECONDS (this script
# sleeps meanwhile), in percent, from /proc/stat.
busy_percent() {
  local a b
  a=($(head -1 /proc/stat))
  sleep "$1"
  b=($(head -1 /proc/stat))
  # user nice system idle iowait irq softirq steal
  local busy=$(((b[1] + b[2] + b[3] + b[6] + b[7] + b[8]) - (a[1] + a[2] + a[3] + a[6] + a[7] + a[8])))
  local idle=$(((b[4] + b[5]) - (a[4] + a[5])))
  local total=$((busy + idle))
  echo $((total > 0 ? 100 * busy / total : 0))
}
cpus=$(nproc)
check_quiet() {
  local busy
  busy=$(busy_percent 1)
  if [ "$cpus" -lt 2 ]; then
    echo "WARNING: $cpus CPU: the ping-pong tests need two CPUs; the figures below mean little."
  elif [ "$busy" -ge 25 ]; then
    echo "WARNING: other work kept ${busy}% of this machine's $cpus CPUs busy in the last second (load average" \
      "$(cut -d' ' -f1-3 /proc/loadavg)). Busy-polling benchmarks share those CPUs: the figures below can be" \
      "several times off, and even the side-by-side ratios are unreliable. Run make demo again when the machine is quiet."
  else
    echo "The machine is quiet enough: other work used ${busy}% of its $cpus CPUs in the last second."
  fi
}

# ---------------------------------------------------------------- fi_info
echo
echo "== Debian's fi_info, run over weft (LD_LIBRARY_PATH=$lib) =="
echo "fi_info -l lists the providers; fi_info -p shm, what shm offers."
LD_LIBRARY_PATH=$lib fi_info -l
LD_LIBRARY_PATH=$lib fi_info -p shm

# ---------------------------------------------------------------- weft-perf
echo
echo "== weft-perf over weft's shm provider (two processes on this host, pinned to two CPUs) =="
check_quiet
cat <<'EOF'
How to read the tables: one row per message size (bytes).
  lat_us_med   the median time of one operation, in microseconds: lower is better
  lat_us_p99   the 99th percentile: the slow tail
  bw_MBps      bytes moved per second, in MB/s (10^6 bytes), from the median time: higher is better
  rate_Mps     million operations (or one-way messages) per second: higher is better
  iters        operations (ping-pongs: round trips) measured
EOF
run() {
  local title=$1 how=$2
  shift 2
  echo
  echo "-- $title"
  echo "   $how"
  echo "\$ LD_LIBRARY_PATH=$lib $perf $*"
  LD_LIBRARY_PATH=$lib "$perf" "$@"
}
run "Tagged message latency (fi_tsend / fi_trecv ping-pong)" \
  "lat_us_med is the one-way time: half a round trip. Small messages ride in one cache line." \
  -p shm -t tagged_lat -s 1:64K --time 0.05
run "Tagged message bandwidth (windows of 64 fi_tsend, then an acknowledgement)" \
  "lat_us_med is the time per message inside a window; bw_MBps is what counts here." \
  -p shm -t tagged_bw -s 4K:4M --time 0.05
run "RMA write bandwidth, heap memory (fi_write, windows of 64, each to its completion)" \
  "The target's CPU does nothing: weft copies across processes with cross-memory attach." \
  -p shm -t write_bw -s 64K:4M --time 0.05
run "RMA write bandwidth into shareable memory (--mem memfd, window 2)" \
  "The target registered a memfd: weft maps it and copies with memcpy, no system call per write." \
  -p shm -t write_bw -s 64K:4M -w 2 --mem memfd --time 0.05
run "Atomic latency (fi_fetch_atomic FI_SUM on one uint64, to its completion)" \
  "lat_us_med is one whole atomic, from the call to the completion that brings the fetched value." \
  -p shm -t atomic_lat -s 8 --time 0.05

# ---------------------------------------------------------------- side by side
echo
echo "== Side by side: weft and Debian's libfabric 1.17, shm, the same weft-perf binary =="
check_quiet
cat <<'EOF'
Three alternating rounds of each; the medians. "weft better" is how many times
better weft's figure is: libfabric's latency over weft's, weft's bandwidth
over libfabric's; above 1.00, weft is ahead. Absolute figures depend on the
machine and its load; the ratio, measured side by side, is what carries over
(docs/performance.md).
EOF
median3() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
printf "%-30s %-11s %10s %10s %12s\n" test unit weft libfabric "weft better"
for t in "tagged_lat 8" "tagged_bw 1M" "write_bw 1M" "write_bw 1M -w 2 --mem memfd"; do
  set -- $t
  name=$1 size=$2
  extra=("${@:3}")
  if [ "$name" = tagged_lat ]; then col=2 unit="us one-way"; else col=4 unit="MB/s"; fi
  w=() r=()
  for round in 1 2 3; do
    w+=("$(LD_LIBRARY_PATH=$lib "$perf" -p shm -t "$name" -s "$size" "${extra[@]}" --time 0.1 --csv 2>/dev/null |
      tail -1 | cut -d, -f$col)")
    r+=("$("$perf" -p shm -t "$name" -s "$size" "${extra[@]}" --time 0.1 --csv 2>/dev/null | tail -1 | cut -d, -f$col)")
  done
  wv=$(median3 "${w[@]}") rv=$(median3 "${r[@]}")
  better=$(awk -v a="$wv" -v b="$rv" -v lat="$([ "$name" = tagged_lat ] && echo 1 || echo 0)" \
    'BEGIN { if (a <= 0 || b <= 0) print "n/a"; else printf "%.2f", lat ? b / a : a / b }')
  fmt=$([ "$name" = tagged_lat ] && echo "%.3f" || echo "%.0f")
  printf "%-30s %-11s %10s %10s %12s\n" "$name $size ${extra[*]}" "$unit" "$(printf "$fmt" "$wv")" \
    "$(printf "$fmt" "$rv")" "$better"
done
echo
echo "Next: the README's sections use what was just built (build/lib, build/include, build/bin)."
echo "The full comparison with UCX and plots: make compare (docs/weft-perf.md, docs/performance.md)."
