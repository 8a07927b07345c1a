#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The UCP face's comparison, in one run on this machine, rounds alternating:
#   ucp-perf (bench/ucp_perf.c, on ucp.h) over real UCX (UCX_TLS=posix,cma,self)
#     and over weft's face (LD_LIBRARY_PATH=BUILD/lib): tag latency 8 B, tag
#     bandwidth 1 MiB, put bandwidth 1 MiB;
#   weft-perf over weft for the raw fi_* operations the face issues
#     (tagged_lat 8 B; tagged_bw 1 MiB --reuse; write_bw 1 MiB --reuse --mem memfd);
#   MPICH's ping-pong (bench/mpi_pingpong.c) over real UCX and over weft.
# Usage: bash bench/ucp_compare.sh [BUILD] [ROUNDS]    (default build, 3)
# Writes bench/results/ucp-<date>/README.md and prints it.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
rounds=${2:-3}
bin=$build/bin
cpus=${CPUS:-0,1}
for b in ucp-perf weft-perf mpi-pingpong; do
  [ -x "$bin/$b" ] || cmake --build "$build" -j2 --target "$b" >/dev/null || { echo "cannot build $b"; exit 1; }
done
out=$root/bench/results/ucp-$(date +%Y-%m-%d_%H%M%S)
mkdir -p "$out"
raw=$out/raw.txt
: >"$raw"
weft=(env LD_LIBRARY_PATH=$build/lib)
ucx=(env UCX_TLS=posix,cma,self)
val() { awk -v k="$1" '$1 == k {print $3; exit}'; }  # ucp-perf line: name size value unit
# Within a round the three measurements of a metric run back to back (the VM
# changes placement from one minute to the next: see docs/performance.md).
perf_val() {  # env... -- ucp-perf args: prints the value
  "$@" 2>&1 | tee -a "$out/ucp-perf.log" | awk '$1 ~ /^(tag_lat|tag_bw|put_bw)$/ {print $3; exit}'
}
for r in $(seq 1 "$rounds"); do
  v=$("${weft[@]}" timeout 120 "$bin/weft-perf" --cpus $cpus -t tagged_lat -s 8 --csv 2>/dev/null | tail -1 | cut -d, -f2)
  echo "raw lat $r $v" >>"$raw"
  echo "weft lat $r $(perf_val "${weft[@]}" timeout 120 "$bin/ucp-perf" --cpus $cpus -t tag_lat -n 100000)" >>"$raw"
  echo "ucx lat $r $(perf_val "${ucx[@]}" timeout 120 "$bin/ucp-perf" --cpus $cpus -t tag_lat -n 100000)" >>"$raw"
  v=$("${weft[@]}" timeout 120 "$bin/weft-perf" --cpus $cpus -t tagged_bw -s 1M --reuse --csv 2>/dev/null | tail -1 | cut -d, -f7)
  echo "raw tbw $r $v" >>"$raw"
  echo "weft tbw $r $(perf_val "${weft[@]}" timeout 120 "$bin/ucp-perf" --cpus $cpus -t tag_bw -n 2000)" >>"$raw"
  echo "ucx tbw $r $(perf_val "${ucx[@]}" timeout 120 "$bin/ucp-perf" --cpus $cpus -t tag_bw -n 2000)" >>"$raw"
  v=$("${weft[@]}" timeout 120 "$bin/weft-perf" --cpus $cpus -t write_bw -s 1M --reuse --mem memfd --csv 2>/dev/null |
    tail -1 | cut -d, -f7)
  echo "raw pbw $r $v" >>"$raw"
  echo "weft pbw $r $(perf_val "${weft[@]}" timeout 120 "$bin/ucp-perf" --cpus $cpus -t put_bw -n 5000)" >>"$raw"
  echo "ucx pbw $r $(perf_val "${ucx[@]}" timeout 120 "$bin/ucp-perf" --cpus $cpus -t put_bw -n 5000)" >>"$raw"
  for s in 8 1048576; do
    for lib in weft ucx; do
      if [ $lib = weft ]; then me=(env LD_LIBRARY_PATH=$build/lib); else me=(env); fi
      o=$("${me[@]}" timeout 300 taskset -c $cpus mpiexec.mpich -n 2 "$bin/mpi-pingpong" $s 2>&1 | grep '^mpi_pingpong')
      echo "$lib $o" >>"$out/mpi.log"
      if [ $s = 8 ]; then echo "$lib mlat $r $(awk '{print $3}' <<<"$o")" >>"$raw"; else
        echo "$lib mbw $r $(awk '{print $5}' <<<"$o")" >>"$raw"; fi
    done
  done
done
. "$root/bench/rounds.sh"  # med, get, ratios
{
  echo "# The UCP face: $(date -u '+%F %T') UTC, $rounds rounds, CPUs $cpus"
  echo
  echo "$(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; UCX $(ucx_info -v 2>/dev/null | sed -n 's/^# Version //p')"
  echo
  echo "| metric | weft face | real UCX | raw fi_* over weft | face / UCX per round (median) | face / raw per round (median) |"
  echo "|---|---:|---:|---:|---|---|"
  echo "| tag latency 8 B, one-way µs (ucp-perf) | $(get weft lat) | $(get ucx lat) | $(get raw lat) | $(ratios weft ucx lat) | $(ratios weft raw lat) |"
  echo "| tag bandwidth 1 MiB, MB/s, window 64 | $(get weft tbw) | $(get ucx tbw) | $(get raw tbw) | $(ratios weft ucx tbw) | $(ratios weft raw tbw) |"
  echo "| put bandwidth 1 MiB, MB/s, window 64 | $(get weft pbw) | $(get ucx pbw) | $(get raw pbw) | $(ratios weft ucx pbw) | $(ratios weft raw pbw) |"
  echo "| MPICH ping-pong 8 B, one-way µs | $(get weft mlat) | $(get ucx mlat) | | $(ratios weft ucx mlat) | |"
  echo "| MPICH ping-pong 1 MiB, MB/s | $(get weft mbw) | $(get ucx mbw) | | $(ratios weft ucx mbw) | |"
  echo
  echo "Latency: lower is better (target: face / UCX ≤ 1.0, face / raw ≤ 1.1);"
  echo "bandwidth: higher is better (target: face / UCX ≥ 1.0). Raw data: raw.txt."
} >"$out/README.md"
cat "$out/README.md"
