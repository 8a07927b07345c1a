#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The UCP face's active messages against real UCX, in one run on this
# machine, rounds alternating, each metric's two measurements back to back:
#   Debian's ucx_perftest (the same binary; over weft with
#     LD_LIBRARY_PATH=BUILD/lib): ucp_am_lat 8 B, ucp_am_bw 8 B, 4000 B and
#     16 KiB (one endpoint, loopback, the server started first);
#   mpi-accumulate (bench/mpi_accumulate.c, MPICH's ch4:ucx sends each
#     MPI_Accumulate as one active message): 16 KiB to the other rank,
#     2 MiB to itself.
# Usage: bash bench/ucp_am_compare.sh [BUILD] [ROUNDS]    (default build, 3)
# Writes bench/results/ucp-am-<date>/README.md and prints it.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
rounds=${2:-3}
bin=$build/bin
command -v ucx_perftest >/dev/null || { echo "ucx_perftest (package ucx-utils) is not installed"; exit 1; }
[ -x "$bin/mpi-accumulate" ] || cmake --build "$build" -j2 --target mpi-accumulate >/dev/null ||
  { echo "cannot build mpi-accumulate"; exit 1; }
out=$root/bench/results/ucp-am-$(date +%Y-%m-%d_%H%M%S)
mkdir -p "$out"
raw=$out/raw.txt
: >"$raw"
port=$((20000 + RANDOM % 20000))
# perftest LIB TEST SIZE ITERS: prints ucx_perftest's "Final:" line
perftest() {
  local ldp=
  [ "$1" = weft ] && ldp=$build/lib
  port=$((port + 1))
  LD_LIBRARY_PATH=$ldp timeout 120 ucx_perftest -p $port >/dev/null 2>&1 &
  local srv=$!
  sleep 1.5
  LD_LIBRARY_PATH=$ldp timeout 120 ucx_perftest 127.0.0.1 -p $port -t "$2" -s "$3" -n "$4" 2>&1 |
    tee -a "$out/perftest.log" | grep '^Final:'
  wait $srv
}
# Final: iterations, latency typical / average / overall (us), bandwidth
# average / overall (MB/s), message rate average / overall (msg/s)
for r in $(seq 1 "$rounds"); do
  for lib in weft ucx; do
    echo "$lib lat8 $r $(perftest $lib ucp_am_lat 8 200000 | awk '{print $3}')" >>"$raw"
  done
  for lib in weft ucx; do
    echo "$lib rate8 $r $(perftest $lib ucp_am_bw 8 500000 | awk '{print $9 / 1e6}')" >>"$raw"
  done
  for s in 4000 16384; do
    for lib in weft ucx; do
      echo "$lib bw$s $r $(perftest $lib ucp_am_bw $s 100000 | awk '{print $7}')" >>"$raw"
    done
  done
  for what in "16384 1 acc16k" "2097152 0 acc2m"; do
    set -- $what
    for lib in weft ucx; do
      if [ $lib = weft ]; then me=(env LD_LIBRARY_PATH=$build/lib); else me=(env); fi
      o=$("${me[@]}" timeout 300 mpiexec.mpich -n 2 "$bin/mpi-accumulate" $1 $2 2>&1 | tee -a "$out/mpi.log" |
        grep '^mpi_accumulate')
      echo "$lib $3 $r $(awk '{print $4}' <<<"$o")" >>"$raw"
    done
  done
done
. "$root/bench/rounds.sh"  # med, get, ratios
{
  echo "# The UCP face's active messages: $(date -u '+%F %T') UTC, $rounds rounds"
  echo
  echo "$(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; UCX $(ucx_info -v 2>/dev/null | sed -n 's/^# Version //p')"
  echo
  echo "| metric | weft face | real UCX | face / UCX per round (median) |"
  echo "|---|---:|---:|---|"
  echo "| ucp_am_lat 8 B, µs (typical) | $(get weft lat8) | $(get ucx lat8) | $(ratios weft ucx lat8) |"
  echo "| ucp_am_bw 8 B, million msg/s | $(get weft rate8) | $(get ucx rate8) | $(ratios weft ucx rate8) |"
  echo "| ucp_am_bw 4000 B, MB/s | $(get weft bw4000) | $(get ucx bw4000) | $(ratios weft ucx bw4000) |"
  echo "| ucp_am_bw 16 KiB, MB/s | $(get weft bw16384) | $(get ucx bw16384) | $(ratios weft ucx bw16384) |"
  echo "| MPI_Accumulate 16 KiB to the other rank, µs | $(get weft acc16k) | $(get ucx acc16k) | $(ratios weft ucx acc16k) |"
  echo "| MPI_Accumulate 2 MiB to itself, µs | $(get weft acc2m) | $(get ucx acc2m) | $(ratios weft ucx acc2m) |"
  echo
  echo "Latency and time per operation: lower is better; rate and bandwidth: higher"
  echo "is better. Raw data: raw.txt; ucx_perftest's and MPICH's output beside it."
} >"$out/README.md"
cat "$out/README.md"
