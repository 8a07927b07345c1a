#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Small-message latency over shared memory in every placement of the two
# ranks this machine offers: each ordered pair of distinct CPUs, and both
# ranks on one CPU. Per placement and round, back to back with the order
# rotating from round to round:
#   floor   cacheline-pingpong (one counter bounced through two cache lines;
#           the median round trip, halved: floor_median_ns)
#   weft    weft-perf tagged_lat over weft (LD_LIBRARY_PATH=WEFT_LIB)
#   before  the same over another weft build (BEFORE_LIB; left out when unset)
#   lf      weft-perf tagged_lat over Debian's libfabric shm
#   ucx     ucx_perftest tag_lat, UCX_TLS=posix,cma,self
# all pinned the same way (weft-perf --cpus A,B; taskset -c A / -c B).
# Latency: one-way µs, each run's median (weft-perf lat_us_median,
# ucx_perftest 50.0%ile). Prints a Markdown report: medians over the rounds
# and ratios judged round by round (weft over the floor at 8 B, over the
# better of lf and ucx, over before), then the median of those ratios; then
# the same split by the VM's regime (bench/sweep_regimes.py). Where the
# clock moves in steps (10 ns a round trip on this VM: 5 ns one-way, 8 % of
# a fast floor) the medians move in them too; weft over the floor is also
# given from batch means (the median of 1,000-round-trip means: weft-perf
# lat_us_batched, cacheline-pingpong floor_batched_ns), which resolve below
# the step. In the raw file those runs are the libs weft_b and floor_b.
# Since the VM can change regime between a round's floor run and weft's,
# weft's first size on two CPUs is also bracketed by floor runs just before
# and after it (floor_pb, floor_qb: batch means), and weft_b over their mean
# is the "adjacent" ratio; a round whose two floors differ by 1.5x or more
# changed regime during weft's run and shows "x" there instead.
#
#   usage: bash bench/placement_sweep.sh [BUILD_DIR]   (default: build)
#   env:   ROUNDS=5             rounds per placement (odd)
#          SIZES="8 64 1024"    message sizes
#          PLACEMENTS="0,1 1,0 0,0 1,1"  (default: every ordered pair of allowed
#                               CPUs, then each CPU with both ranks)
#          TIME=0.2             weft-perf measuring time per run (s)
#          WEFT_LIB=DIR         weft's libfabric.so.1 (default BUILD_DIR/lib)
#          BEFORE_LIB=DIR       another weft build's lib directory to set beside it
#          RAW=FILE             every run: "cpus size lib round value"
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
perf=$build/bin/weft-perf
floor=$build/bin/cacheline-pingpong
[ -x "$perf" ] && [ -x "$floor" ] || { echo "placement_sweep: build weft-perf and cacheline-pingpong first" >&2; exit 1; }
rounds=${ROUNDS:-5}
sizes=${SIZES:-"8 64 1024"}
time_s=${TIME:-0.2}
weft_lib=$(cd "${WEFT_LIB:-$build/lib}" && pwd)
before_lib=${BEFORE_LIB:-}
raw=${RAW:-$(mktemp)}
: >"$raw"
. "$root/tests/lib/ports.sh"

. "$root/bench/cpus.sh"
if [ -n "${PLACEMENTS:-}" ]; then
  placements=($PLACEMENTS)
else
  cpus=($(allowed_cpus))
  placements=()
  for a in "${cpus[@]}"; do for b in "${cpus[@]}"; do [ "$a" != "$b" ] && placements+=("$a,$b"); done; done
  for a in "${cpus[@]}"; do placements+=("$a,$a"); done
fi

libs=(floor weft)
[ -n "$before_lib" ] && libs+=(before)
libs+=(lf)
which ucx_perftest >/dev/null 2>&1 && libs+=(ucx)

# one_run PLACEMENT SIZE LIB: prints the one-way µs, or nothing
one_run() {
  local pl=$1 s=$2 lib=$3 a=${1%,*} b=${1#*,} same=0 n port srv v
  [ "$a" = "$b" ] && same=1
  case $lib in
    floor)
      # Both ranks on one CPU: each round trip waits for the scheduler.
      n=200000; [ $same = 1 ] && n=100
      timeout 60 "$floor" "$a" "$b" "$n" 2>/dev/null |
        awk '$1 == "floor_median_ns" {m = $2} $1 == "floor_batched_ns" {b = $2}
             END {if (m != "") printf "%.4f %.4f\n", m / 1000, b / 1000}' ;;
    weft|before|lf)
      local envs=(FI_LOG_LEVEL=warn)
      [ $lib = weft ] && envs+=("LD_LIBRARY_PATH=$weft_lib")
      [ $lib = before ] && envs+=("LD_LIBRARY_PATH=$before_lib")
      # Both ranks on one CPU: 100 round trips (milliseconds each where a
      # rank spins out its time slice), not as many as fit TIME.
      local count=(--time "$time_s"); [ $same = 1 ] && count=(-n 100)
      env "${envs[@]}" timeout 60 "$perf" -p shm -t tagged_lat -s "$s" "${count[@]}" --cpus "$a,$b" --csv \
        2>/dev/null | awk -F, 'NR == 2 {print $2, $9}' ;;
    ucx)
      n=100000; [ $same = 1 ] && n=200
      port=$(free_tcp_port)
      UCX_TLS=posix,cma,self timeout 60 taskset -c "$b" ucx_perftest -p "$port" >/dev/null 2>&1 &
      srv=$!
      wait_listen "$port" "$srv"
      v=$(UCX_TLS=posix,cma,self timeout 60 taskset -c "$a" ucx_perftest -p "$port" 127.0.0.1 \
            -t tag_lat -s "$s" -n "$n" -w $((n / 10)) 2>/dev/null | awk '/^Final:/ {print $3}')
      wait "$srv" 2>/dev/null
      echo "$v" ;;
  esac
}

fsize=$(echo $sizes | cut -d' ' -f1)
started=$(date +%s)
for pl in "${placements[@]}"; do
  for ((r = 1; r <= rounds; r++)); do
    nl=${#libs[@]}
    for ((i = 0; i < nl; i++)); do
      lib=${libs[$(( (i + r - 1) % nl ))]}
      for s in $sizes; do
        [ $lib = floor ] && [ "$s" != "$fsize" ] && continue
        # weft's first size on two CPUs is bracketed by floor runs just
        # before and after it (floor_pb, floor_qb): its ratio to the floor of
        # the same moment, and a regime change during it shows as the two
        # disagreeing.
        adjacent=0
        [ $lib = weft ] && [ "$s" = "$fsize" ] && [ "${pl%,*}" != "${pl#*,}" ] && adjacent=1
        [ $adjacent = 1 ] && fp=$(one_run "$pl" "$s" floor)
        v=$(one_run "$pl" "$s" "$lib")
        if [ $adjacent = 1 ]; then
          fq=$(one_run "$pl" "$s" floor)
          [ "${fp#* }" != "$fp" ] && echo "$pl $s floor_pb $r ${fp#* }" >>"$raw"
          [ "${fq#* }" != "$fq" ] && echo "$pl $s floor_qb $r ${fq#* }" >>"$raw"
        fi
        if [ -n "$v" ]; then
          echo "$pl $s $lib $r ${v%% *}" >>"$raw"
          case $lib in floor|weft) [ "${v#* }" != "$v" ] && echo "$pl $s ${lib}_b $r ${v#* }" >>"$raw" ;; esac
        else
          echo "placement_sweep: $lib $pl $s B round $r failed" >&2
        fi
      done
    done
  done
  echo "placement_sweep: $pl done ($(( $(date +%s) - started )) s)" >&2
done

# ---------------------------------------------------------------- report
med() { sort -g | awk '{v[NR] = $1} END {if (NR) printf "%.4f", v[int((NR + 1) / 2)]}'; }
val() { awk -v p="$1" -v s="$2" -v l="$3" -v r="$4" '$1 == p && $2 == s && $3 == l && $4 == r {print $5}' "$raw"; }
# ratios PLACEMENT SIZE KIND: per-round ratios of weft, "r1 r2 ...", KIND
# floor|floor_b|adjacent|best|before (adjacent: weft_b over the mean of the
# batch-mean floors just before and after it; "x" where those two differ by
# 1.5x or more, the VM having changed regime during weft's run)
ratios() {
  local pl=$1 s=$2 kind=$3 r w d l u out=""
  for ((r = 1; r <= rounds; r++)); do
    w=$(val "$pl" "$s" weft "$r")
    case $kind in
      floor) d=$(val "$pl" "$fsize" floor "$r") ;;
      floor_b) w=$(val "$pl" "$s" weft_b "$r"); d=$(val "$pl" "$fsize" floor_b "$r") ;;
      adjacent) w=$(val "$pl" "$s" weft_b "$r")
            l=$(val "$pl" "$fsize" floor_pb "$r"); u=$(val "$pl" "$fsize" floor_qb "$r")
            d=$(awk -v a="$l" -v b="$u" 'BEGIN {if (a > 0 && b > 0 && a / b < 1.5 && b / a < 1.5) printf "%.4f", (a + b) / 2}')
            [ -z "$d" ] && [ -n "$w" ] && [ -n "$l" ] && [ -n "$u" ] && { out+="x "; continue; } ;;
      before) d=$(val "$pl" "$s" before "$r") ;;
      best) l=$(val "$pl" "$s" lf "$r"); u=$(val "$pl" "$s" ucx "$r")
            d=$(printf '%s\n%s\n' "$l" "$u" | grep . | sort -g | head -1) ;;
    esac
    [ -n "$w" ] && [ -n "$d" ] &&
      out+=$(awk -v a="$w" -v b="$d" 'BEGIN {if (b > 0) {r = a / b; if (r < 0.1) printf "%.1e ", r; else printf "%.2f ", r}}')
  done
  echo "$out"
}
cell() {  # "r1 r2 ..." -> "r1 r2 ... (median)"
  [ -n "$1" ] || { echo "-"; return; }
  echo "$1($(tr ' ' '\n' <<<"$1" | grep -v '^x$' | grep . | med | awk '{if ($1 < 0.1) printf "%.1e", $1; else printf "%.2f", $1}'))"
}
echo "# Placement sweep: small-message latency over shm"
echo
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs,"
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; $rounds rounds per placement, the order"
echo "rotating; weft: $weft_lib$([ -n "$before_lib" ] && echo "; before: $before_lib")."
echo "One-way µs, medians over the rounds. Ratios are taken in each round (the machine"
echo "changes regime from minute to minute), then their median is in parentheses."
echo
echo "| CPUs | size | floor | weft | $([ -n "$before_lib" ] && echo "before | ")libfabric | UCX | weft/floor | weft/floor, batch means | weft/floor, adjacent batch means | weft / better of libfabric, UCX | $([ -n "$before_lib" ] && echo "weft/before |")"
echo "|---|---:|---:|---:|$([ -n "$before_lib" ] && echo "---:|")---:|---:|---|---|---|---|$([ -n "$before_lib" ] && echo "---|")"
for pl in "${placements[@]}"; do
  for s in $sizes; do
    m() { awk -v p="$pl" -v s="$1" -v l="$2" '$1 == p && $2 == s && $3 == l {print $5}' "$raw" | med; }
    fl=""; fr="-"; fb="-"; fa="-"
    if [ "$s" = "$fsize" ]; then
      fl=$(m "$s" floor); fr=$(cell "$(ratios "$pl" "$s" floor)"); fb=$(cell "$(ratios "$pl" "$s" floor_b)")
      fa=$(cell "$(ratios "$pl" "$s" adjacent)")
    fi
    row="| $pl | $s B | ${fl:--} | $(m "$s" weft) |"
    [ -n "$before_lib" ] && row+=" $(m "$s" before) |"
    row+=" $(m "$s" lf) | $(m "$s" ucx) | $fr | $fb | $fa | $(cell "$(ratios "$pl" "$s" best)") |"
    [ -n "$before_lib" ] && row+=" $(cell "$(ratios "$pl" "$s" before)") |"
    echo "$row"
  done
done
echo
if which python3 >/dev/null 2>&1; then
  echo "## By regime"
  echo
  echo "The VM switches between placements of its vCPUs (one cache line in about 0.05 or"
  echo "about 0.24 µs), sometimes within a round, and every program's figures move ~3x with it."
  echo "Each program's runs at a size are split at the widest gap (> 2x) between their"
  echo "values over the two-CPU placements, or without one all take the regime of most of"
  echo "their rounds' floors (bench/sweep_regimes.py); medians in a regime, the number of"
  echo "runs in parentheses, ratios of those medians."
  echo
  python3 "$root/bench/sweep_regimes.py" "$raw"
  echo
fi
echo "Raw runs: $raw ($(( $(date +%s) - started )) s in all)."
