#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The tcp provider's key figures, side by side on loopback in one run: the
# raw-socket floor (tcp-pingpong), weft's tcp (weft-perf over weft: RDM tagged
# and MSG), Debian's libfabric tcp (the same weft-perf over Debian's library:
# tcp;ofi_rxm RDM tagged and tcp MSG) and UCX's tcp (ucx_perftest,
# UCX_TLS=tcp). Every round runs each program once per metric, the order
# rotating from round to round, so that a noisy minute hits all of them.
#   bench/tcp_targets.sh [BUILD] [ROUNDS]     (default build, 3)
#   env: WEFT_LIB=DIR   weft's libfabric.so.1 (default BUILD/lib)
#        CPUS=A,B       the two CPUs (default 0,1)
#        RAW=FILE       also write every run as "metric library round value"
#        WEFT_QUIET=1   before each round, wait until the machine is quiet
# Prints, per metric, each library's median over the rounds, then the
# target ratio judged round by round: weft RDM over the better of libfabric
# (either endpoint type) and UCX in the same round, and the median of those.
# Units: latency one-way µs (medians of the runs); bandwidth MB/s (10^6
# bytes/s; ucx_perftest's MiB/s converted), window 64, one buffer (--reuse).
set -uo pipefail
build=$(cd "${1:-build}" && pwd)
rounds=${2:-3}
cpus=${CPUS:-0,1}
cpu_a=${cpus%,*} cpu_b=${cpus#*,}
perf=$build/bin/weft-perf floor=$build/bin/tcp-pingpong
weft_lib=$(cd "${WEFT_LIB:-$build/lib}" && pwd)
for x in "$perf" "$floor" "$weft_lib/libfabric.so.1"; do
  [ -e "$x" ] || { echo "tcp_targets: missing $x (build weft-perf, tcp-pingpong, fabric)" >&2; exit 1; }
done
. "$(dirname "$0")/../tests/lib/ports.sh"
raw=${RAW:-$(mktemp)}
[ -n "${RAW:-}" ] || trap 'rm -f "$raw"' EXIT
: >"$raw"

put() { [ -n "$4" ] && echo "$1 $2 $3 $4" >>"$raw"; }

# weft-perf, over weft (lib weft) or Debian's libfabric (lib lf): column 2 is
# the latency median, 7 the mean bandwidth.
wp() {  # metric lib round endpoint test size
  local m=$1 lib=$2 r=$3 ep=$4 t=$5 s=$6 col=2 envs more=()
  # bandwidth: one buffer for every message in flight, as ucx_perftest and
  # tcp-pingpong send (weft-perf's default gives each its own)
  [[ $t == *_bw ]] && col=7 more=(--reuse)
  if [ "$lib" = weft ]; then envs=(LD_LIBRARY_PATH="$weft_lib"); else envs=(-u LD_LIBRARY_PATH FI_LOG_LEVEL=warn); fi
  put "$m" "$lib" "$r" "$(env "${envs[@]}" timeout 120 "$perf" -p tcp -e "$ep" -t "$t" -s "$s" "${more[@]}" --time 0.5 \
    --cpus "$cpu_a,$cpu_b" --csv 2>/dev/null | awk -F, -v c="$col" 'NR == 2 {print $c}')"
}
ucx() {  # metric round test size iterations
  local m=$1 r=$2 t=$3 s=$4 n=$5 port srv f=3
  [ "$t" = tag_bw ] && f=7
  port=$(free_tcp_port)
  UCX_TLS=tcp UCX_NET_DEVICES=lo timeout 60 taskset -c "$cpu_b" ucx_perftest -p "$port" >/dev/null 2>&1 &
  srv=$!
  wait_listen "$port" "$srv"
  put "$m" ucx "$r" "$(UCX_TLS=tcp UCX_NET_DEVICES=lo timeout 60 taskset -c "$cpu_a" ucx_perftest -p "$port" \
    127.0.0.1 -t "$t" -s "$s" -n "$n" 2>/dev/null |
    awk -v f="$f" '/^Final:/ { if (f == 7) printf "%.1f\n", $f * 1.048576; else print $f }')"
  wait "$srv" 2>/dev/null
}
floor_run() {  # round: the best variant of each raw-socket figure
  local r=$1 out
  out=$("$floor" --cpus "$cpu_a,$cpu_b" --rounds 1 --iters 20000 2>/dev/null)
  put lat8 floor "$r" "$(awk '$1 ~ /^tcp_lat_8_/ {print $2}' <<<"$out" | sort -g | head -1)"
  put bw64k floor "$r" "$(awk '$1 ~ /^tcp_bw_65536_/ {print $2}' <<<"$out" | sort -g | tail -1)"
  put bw1m floor "$r" "$(awk '$1 ~ /^tcp_bw_1048576_/ {print $2}' <<<"$out" | sort -g | tail -1)"
}

# WEFT_QUIET=1: wait (up to 5 min) until no other process uses more than 15%
# of a CPU (on a shared machine, others' bursts swamp these figures).
quiet() {
  [ "${WEFT_QUIET:-0}" = 1 ] || return 0
  for _ in $(seq 60); do
    awk -v l="$(ps -eo pcpu --sort=-pcpu | sed -n 2p)" 'BEGIN { exit !(l < 15) }' && return 0
    sleep 5
  done
  echo "(round runs on a busy machine)" >&2
}

libs=(weft lf ucx)
command -v ucx_perftest >/dev/null || { libs=(weft lf); echo "tcp_targets: no ucx_perftest (ucx-utils)" >&2; }
for ((r = 1; r <= rounds; r++)); do
  quiet
  echo "tcp_targets: round $r/$rounds" >&2
  floor_run "$r"
  for ((i = 0; i < ${#libs[@]}; i++)); do
    lib=${libs[$(((i + r - 1) % ${#libs[@]}))]}
    case $lib in
    ucx)
      ucx lat8 "$r" tag_lat 8 50000
      ucx bw64k "$r" tag_bw 65536 20000
      ucx bw1m "$r" tag_bw 1048576 2000
      ;;
    *)
      # RDM tagged (libfabric: tcp;ofi_rxm) and MSG endpoints, message tests
      wp lat8 "$lib" "$r" rdm tagged_lat 8
      wp bw64k "$lib" "$r" rdm tagged_bw 64K
      wp bw1m "$lib" "$r" rdm tagged_bw 1M
      wp lat8 "${lib}_msg" "$r" msg msg_lat 8
      wp bw64k "${lib}_msg" "$r" msg msg_bw 64K
      wp bw1m "${lib}_msg" "$r" msg msg_bw 1M
      ;;
    esac
  done
done

# Medians per metric and library; the target ratio per round.
awk '
  function med(list,   n, a, i, j, t) {
    n = split(substr(list, 2), a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n ? a[int((n + 1) / 2)] : ""
  }
  { v[$1, $2] = v[$1, $2] " " $4; val[$1, $2, $3] = $4; if ($3 > nr) nr = $3 }
  END {
    split("lat8 bw64k bw1m", ms, " ")
    split("floor weft weft_msg lf lf_msg ucx", ls, " ")
    printf "%-6s", "metric"
    for (j = 1; j <= 6; j++) printf " %10s", ls[j]
    printf "   weft / better of lf, lf_msg, ucx per round (median)\n"
    for (i = 1; i <= 3; i++) {
      m = ms[i]; lat = (m == "lat8")
      printf "%-6s", m
      for (j = 1; j <= 6; j++) printf " %10s", ((m, ls[j]) in v) ? med(v[m, ls[j]]) : "-"
      rl = ""
      for (r = 1; r <= nr; r++) {
        w = val[m, "weft", r]; best = ""
        split("lf lf_msg ucx", os, " ")
        for (k = 1; k <= 3; k++) {
          o = val[m, os[k], r]
          if (o == "") continue
          if (best == "" || (lat && o + 0 < best + 0) || (!lat && o + 0 > best + 0)) best = o
        }
        if (w != "" && best != "") rl = rl " " sprintf("%.2f", w / best)
      }
      printf "   %s (%s)\n", rl, med(rl)
    }
  }' "$raw"
