#!/usr/bin/env bash
# The tcp provider's targets (issue 10), measured side by side on loopback:
# the raw-socket floor (tcp-pingpong), weft's tcp transport layer alone
# (tcp-transport: no endpoint yet), real libfabric's tcp (weft-perf over
# Debian's library: tcp;ofi_rxm RDM and tcp MSG; fi_pingpong MSG) and UCX's
# tcp (ucx_perftest, UCX_TLS=tcp). Rounds interleave the programs; each line
# is the median over the rounds, with min and max.
#   bench/tcp_targets.sh [BUILD] [ROUNDS]     (default build, 3)
# Units: latency one-way µs; bandwidth MB/s (10^6 bytes; ucx_perftest's MiB/s
# converted).
set -uo pipefail
build=${1:-build}
rounds=${2:-3}
cpus=${WEFT_CPUS:-0,1}
cpu_a=${cpus%,*} cpu_b=${cpus#*,}
perf=$build/bin/weft-perf floor=$build/bin/tcp-pingpong xport=$build/bin/tcp-transport
for x in "$perf" "$floor" "$xport"; do [ -x "$x" ] || { echo "missing $x (build weft-perf and tcp-pingpong)" >&2; exit 1; }; done
out=$(mktemp)
trap 'rm -f "$out"' EXIT
port=$((20000 + $$ % 20000))

wp() {  # name weft-perf-args... ; column 2 (lat median) or 4 (bw)
  local name=$1 col=$2
  shift 2
  local v
  v=$(env -u LD_LIBRARY_PATH timeout 120 "$perf" "$@" --cpus "$cpu_a,$cpu_b" --csv 2>/dev/null |
    awk -F, -v c="$col" 'NR == 2 {print $c}')
  [ -n "$v" ] && echo "$name $v" >>"$out"
}
ucx() {  # name test size iters field
  local name=$1 t=$2 s=$3 n=$4 f=$5 v
  port=$((port + 1))
  UCX_TLS=tcp timeout 60 taskset -c "$cpu_b" ucx_perftest -p "$port" >/dev/null 2>&1 &
  local srv=$!
  sleep 0.3
  v=$(UCX_TLS=tcp timeout 60 taskset -c "$cpu_a" ucx_perftest -p "$port" 127.0.0.1 -t "$t" -s "$s" -n "$n" 2>/dev/null |
    awk -v f="$f" '/^Final:/ { if (f == 7) printf "%.1f\n", $f * 1.048576; else print $f }')
  wait "$srv" 2>/dev/null
  [ -n "$v" ] && echo "$name $v" >>"$out"
}
pingpong() {  # name size iters: fi_pingpong MSG usec/xfer
  local name=$1 s=$2 n=$3 v
  port=$((port + 1))
  env -u LD_LIBRARY_PATH timeout 60 taskset -c "$cpu_b" fi_pingpong -p tcp -e msg -S "$s" -I "$n" -B "$port" >/dev/null 2>&1 &
  local srv=$!
  sleep 0.3
  v=$(env -u LD_LIBRARY_PATH timeout 60 taskset -c "$cpu_a" fi_pingpong -p tcp -e msg -S "$s" -I "$n" -P "$port" 127.0.0.1 2>/dev/null |
    awk 'NR == 2 {print $7}')
  wait "$srv" 2>/dev/null
  [ -n "$v" ] && echo "$name $v" >>"$out"
}

# WEFT_QUIET=1: before each round, wait (up to 5 min) until no other process
# uses more than 15% of a CPU (on a shared machine, others' bursts swamp
# these figures).
quiet() {
  [ "${WEFT_QUIET:-0}" = 1 ] || return 0
  for _ in $(seq 60); do
    awk -v l="$(ps -eo pcpu --sort=-pcpu | sed -n 2p)" 'BEGIN { exit !(l < 15) }' && return 0
    sleep 5
  done
  echo "(round runs on a busy machine)" >&2
}

for ((r = 1; r <= rounds; r++)); do
  quiet
  echo "round $r/$rounds" >&2
  "$floor" --cpus "$cpu_a,$cpu_b" --rounds 1 --iters 20000 2>/dev/null |
    awk '{print "floor_" $1, $2}' >>"$out"
  "$xport" --cpus "$cpu_a,$cpu_b" --rounds 1 --iters 20000 2>/dev/null | awk '{print "weft_" $1, $2}' >>"$out"
  wp lat8_libfabric_rxm 2 -p tcp -e rdm -t tagged_lat -s 8
  wp bw64k_libfabric_rxm 4 -p tcp -e rdm -t tagged_bw -s 64K
  wp bw1m_libfabric_rxm 4 -p tcp -e rdm -t tagged_bw -s 1M
  wp lat8_libfabric_msg 2 -p tcp -e msg -t msg_lat -s 8
  wp bw64k_libfabric_msg 4 -p tcp -e msg -t msg_bw -s 64K
  wp bw1m_libfabric_msg 4 -p tcp -e msg -t msg_bw -s 1M
  pingpong lat8_fi_pingpong_msg 8 20000
  ucx lat8_ucx tag_lat 8 50000 3
  ucx bw64k_ucx tag_bw 65536 20000 7
  ucx bw1m_ucx tag_bw 1048576 2000 7
done

sort -k1,1 -s "$out" | awk '
  { v[$1] = v[$1] " " $2; n[$1]++ }
  END {
    for (k in v) {
      m = split(substr(v[k], 2), a, " ")
      for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
      printf "%-32s %10.3f   # min %.3f max %.3f, %d rounds\n", k, a[int((m + 1) / 2)], a[1], a[m], m
    }
  }' | sort
