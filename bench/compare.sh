#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Side-by-side comparison on this machine, in one go:
#   weft-perf over weft (LD_LIBRARY_PATH=BUILD/lib; skipped with a note while
#   weft has no endpoints), weft-perf over Debian's libfabric (shm, tcp),
#   Debian's fi_pingpong over both, and UCX's ucx_perftest over shared memory
#   and over tcp on loopback; the same sizes, the two sides pinned the same way.
# Writes bench/results/<date>/: README.md (key metrics, machine, tables,
# ratios), lat.png, bw.png, tag_lat.png, tag_bw.png, data/*.dat (size value;
# key.dat: metric library round value) and log.txt.
#
#   usage: bash bench/compare.sh [BUILD_DIR]        (default BUILD_DIR: build)
#   env:   SIZES="1 4 16 ..."  sizes in bytes (default 1 B .. 4 MiB, x4 steps)
#          TIME=0.1            weft-perf measuring time per size, seconds
#          CPUS=A,B            the two CPUs (default: the first two allowed)
#          OUT=DIR             results directory
#          WEFT_LIB=DIR        weft's libfabric.so.1 (default BUILD_DIR/lib)
#          KEY_ROUNDS=5        repeats of each key metric (odd; the median is reported)
#          KEY_TIME=0.2        weft-perf measuring time of one key-metric run, seconds
#          TCP_ROUNDS=9        rounds of the tcp key metrics (bench/tcp_targets.sh)
#          LNX_ROUNDS=5        rounds of the linked provider's (bench/lnx_compare.sh; LNX=0 skips)
#          COLL_ROUNDS=3       rounds of the collectives' (bench/coll_compare.sh; COLL=0 skips)
#          SWEEP=1             add the placement sweep (bench/placement_sweep.sh, ~8 min)
# The "Key metrics" (8-byte tagged latency, 1 MiB tagged bandwidth,
# 1 MiB RMA write bandwidth; weft vs libfabric shm vs UCX posix/cma) are
# measured first, KEY_ROUNDS times, the libraries alternating.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
mkdir -p "$build"
build=$(cd "$build" && pwd)
perf=$build/bin/weft-perf
floor=$build/bin/cacheline-pingpong
if [ ! -x "$perf" ] || [ ! -x "$floor" ]; then
  echo "compare: building weft-perf and cacheline-pingpong in $build"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build "$build" -j2 --target weft-perf cacheline-pingpong >/dev/null ||
    { echo "compare: build failed"; exit 1; }
fi

out=${OUT:-$root/bench/results/$(date +%Y-%m-%d_%H%M%S)}
mkdir -p "$out/data"
out=$(cd "$out" && pwd)
log=$out/log.txt
: >"$log"
data=$out/data
sizes=${SIZES:-"1 4 16 64 256 1024 4096 16384 65536 262144 1048576 4194304"}
time_s=${TIME:-0.1}
smin=$(echo $sizes | tr ' ' '\n' | sort -n | head -1)
smax=$(echo $sizes | tr ' ' '\n' | sort -n | tail -1)
started=$(date +%s)

# ---------------------------------------------------------------- CPUs
. "$root/bench/cpus.sh"
if [ -n "${CPUS:-}" ]; then
  cpu_a=${CPUS%,*}; cpu_b=${CPUS#*,}
else
  allowed=($(allowed_cpus))
  cpu_a=${allowed[0]:-0}; cpu_b=${allowed[1]:-$cpu_a}
fi
echo "compare: results in $out (CPUs $cpu_a,$cpu_b)"

note() { echo "[$(( $(date +%s) - started )) s] $*" | tee -a "$log" >&2; }
notes=()
skip() { notes+=("$*"); note "skip: $*"; }

# ---------------------------------------------------------------- weft-perf
# run_wp NAME FAMILY ENV... -- ARGS : FAMILY msg or tagged (FAMILY_lat, FAMILY_bw);
# writes data/NAME_lat.dat, data/NAME_bw.dat and data/NAME_bwmean.dat
run_wp() {
  local name=$1 fam=$2 env_args=(); shift 2
  while [ "$1" != -- ]; do env_args+=("$1"); shift; done; shift
  local t col suffix
  for t in ${fam}_lat ${fam}_bw; do
    if [ $t = ${fam}_lat ]; then col=2 suffix=lat; else col=4 suffix=bw; fi
    note "run: weft-perf $name $t"
    if env "${env_args[@]}" timeout 120 "$perf" "$@" -t $t -s "$smin:$smax" --time "$time_s" \
         --cpus "$cpu_a,$cpu_b" --csv >"$data/$name.$t.csv" 2>>"$log"; then
      awk -F, -v c=$col 'NR>1 {print $1, $c}' "$data/$name.$t.csv" >"$data/${name}_$suffix.dat"
      [ $t = ${fam}_bw ] && awk -F, 'NR>1 {print $1, $7}' "$data/$name.$t.csv" >"$data/${name}_bwmean.dat"
    else
      skip "weft-perf $name $t failed (see log.txt)"
      : >"$data/${name}_$suffix.dat"
    fi
  done
}

weft_lib=${WEFT_LIB:-$build/lib}
[ -d "$weft_lib" ] && weft_lib=$(cd "$weft_lib" && pwd)
weft_env=("LD_LIBRARY_PATH=$weft_lib")
weft_ok() {  # provider: does weft-perf run over weft's provider?
  env "${weft_env[@]}" timeout 30 "$perf" -p "$1" -t msg_lat -s 8 -n 10 >"$data/probe.$1" 2>&1 &&
    head -1 "$data/probe.$1" | grep -q "libfabric: $weft_lib/"
}
declare -A weft_has
for prov in shm tcp; do
  weft_has[$prov]=0
  if [ ! -e "$weft_lib/libfabric.so.1" ]; then
    skip "weft $prov: $weft_lib/libfabric.so.1 not built"
  elif weft_ok "$prov"; then
    weft_has[$prov]=1
  else
    skip "weft $prov: no endpoints yet ($(grep -m1 error "$data/probe.$prov" | cut -c1-120))"
  fi
done
# servers listen on a port no socket uses; clients start once they listen
. "$root/tests/lib/ports.sh"

# ---------------------------------------------------------------- key metrics
# The three key numbers, each measured KEY_ROUNDS times; every round runs
# the three libraries back to back per metric, starting with a different one
# each round, so that a noisy minute hits all of them. data/key.dat holds
# every run: "metric library round value".
key_rounds=${KEY_ROUNDS:-5}
key_time=${KEY_TIME:-0.2}
key=$data/key.dat
: >"$key"
# metric: weft-perf arguments | csv column (2 lat_us_median, 7 bw_MBps_mean)
declare -A key_args=(
  [lat]="-t tagged_lat -s 8|2"
  [tbw]="-t tagged_bw -s 1M|7"   [tbw2]="-t tagged_bw -s 1M -w 2|7"  [tbwr]="-t tagged_bw -s 1M --reuse|7"
  [wbwr]="-t write_bw -s 1M --reuse|7"
  [wbw]="-t write_bw -s 1M|7"    [wbw2]="-t write_bw -s 1M -w 2|7"
  [wbwm1]="-t write_bw -s 1M -w 1 --mem memfd|7" [wbwm2]="-t write_bw -s 1M -w 2 --mem memfd|7"
)
# weft-perf runs that share one UCX measurement
declare -A key_more=([tbw]="tbw2 tbwr" [wbw]="wbw2 wbwr wbwm1 wbwm2")
# ucx_perftest: test, size, iterations, warm-up iterations | Final: field
# (3: latency 50th percentile, µs one-way; 7: overall bandwidth, MiB/s)
declare -A key_ucx=(
  [lat]="tag_lat 8 200000 10000|3"
  [tbw]="tag_bw 1048576 2000 200|7"
  [wbw]="ucp_put_bw 1048576 5000 500|7"
  [wbwh]="ucp_put_bw 1048576 2000 200|7"
)
# Extra environment per UCX metric. wbwh: ucp_mem_map allocates from the heap
# (UCX_ALLOC_PRIO=heap) instead of shared memory, like a libfabric application's
# own buffers: the puts then go through CMA.
declare -A key_ucx_env=([wbwh]="UCX_ALLOC_PRIO=heap")
ucx_sm_env=(UCX_TLS=posix,cma,self)
key_wp() {  # lib metric round
  local lib=$1 m=$2 r=$3 envs v
  if [ "$lib" = weft ]; then envs=("${weft_env[@]}"); else envs=(FI_LOG_LEVEL=warn); fi
  local spec=${key_args[$m]}
  # lat also keeps lat_us_batched (column 9) as latb, for the ratio to the floor
  v=$(env "${envs[@]}" timeout 60 "$perf" -p shm ${spec%|*} --time "$key_time" \
        --cpus "$cpu_a,$cpu_b" --csv 2>>"$log" | awk -F, -v c="${spec#*|}" 'NR == 2 {print $c, $9}')
  if [ -n "$v" ]; then
    echo "$m $lib $r ${v%% *}" >>"$key"
    [ "$m" = lat ] && [ -n "${v#* }" ] && echo "latb $lib $r ${v#* }" >>"$key"
  else
    note "key: weft-perf $lib $m round $r failed"
  fi
}
key_ucx() {  # metric round
  local m=$1 r=$2 spec=${key_ucx[$1]} t s n w srv v
  local envs=("${ucx_sm_env[@]}")
  [ -n "${key_ucx_env[$m]:-}" ] && envs+=(${key_ucx_env[$m]})
  read -r t s n w <<<"${spec%|*}"
  port=$(free_tcp_port)
  env "${envs[@]}" timeout 60 taskset -c "$cpu_b" ucx_perftest -p "$port" >/dev/null 2>>"$log" &
  srv=$!
  wait_listen "$port" "$srv"
  v=$(env "${envs[@]}" timeout 60 taskset -c "$cpu_a" ucx_perftest -p "$port" 127.0.0.1 \
        -t "$t" -s "$s" -n "$n" -w "$w" 2>>"$log" |
      awk -v f="${spec#*|}" '/^Final:/ { if (f == 7) printf "%.1f\n", $f * 1.048576; else print $f }')
  wait "$srv" 2>/dev/null
  if [ -n "$v" ]; then echo "$m ucx $r $v" >>"$key"; else note "key: ucx_perftest $t round $r failed"; fi
}
key_floor() {  # round: the cache-line floor, right before the latency runs
  local v
  v=$(timeout 60 "$floor" "$cpu_a" "$cpu_b" 1000000 2>>"$log")
  if [ -n "$v" ]; then
    echo "floor hw $1 $(awk '$1 == "floor_ns" {printf "%.4f", $2 / 1000}' <<<"$v")" >>"$key"
    echo "floor_sampled hw $1 $(awk '$1 == "floor_sampled_ns" {printf "%.4f", $2 / 1000}' <<<"$v")" >>"$key"
    echo "floor_median hw $1 $(awk '$1 == "floor_median_ns" {printf "%.4f", $2 / 1000}' <<<"$v")" >>"$key"
    echo "floor_batched hw $1 $(awk '$1 == "floor_batched_ns" {printf "%.4f", $2 / 1000}' <<<"$v")" >>"$key"
  else
    note "key: cacheline-pingpong round $1 failed"
  fi
}
key_libs=()
[ "${weft_has[shm]}" = 1 ] && key_libs+=(weft)
key_libs+=(lf)
which ucx_perftest >/dev/null && key_libs+=(ucx)
note "run: key metrics, $key_rounds rounds (${key_libs[*]})"
for ((r = 1; r <= key_rounds; r++)); do
  nl=${#key_libs[@]}
  order=()
  for ((i = 0; i < nl; i++)); do order+=("${key_libs[$(( (i + r - 1) % nl ))]}"); done
  for m in lat tbw wbw; do
    [ $m = lat ] && key_floor "$r"
    for lib in "${order[@]}"; do
      if [ "$lib" = ucx ]; then
        key_ucx "$m" "$r"
        [ $m = wbw ] && key_ucx wbwh "$r"
      else
        key_wp "$lib" "$m" "$r"
        for extra in ${key_more[$m]:-}; do key_wp "$lib" "$extra" "$r"; done
      fi
    done
  done
done
note "run: key metrics done ($(( $(date +%s) - started )) s)"

# ---------------------------------------------------------------- tcp key metrics
# 8 B latency, 64 KiB and 1 MiB bandwidth over loopback tcp: weft, Debian's
# libfabric (tcp;ofi_rxm RDM and tcp MSG), UCX (UCX_TLS=tcp) and the
# raw-socket floor, KEY_ROUNDS rounds (bench/tcp_targets.sh).
tcp_table=$out/tcp_key.txt
# Loopback tcp figures swing by 2-3x for seconds at a time on this VM (every
# program alike): more rounds than for shm, so that the medians hold.
tcp_rounds=${TCP_ROUNDS:-9}
: >"$tcp_table"
if [ "${weft_has[tcp]}" = 1 ] && [ -x "$build/bin/tcp-pingpong" ]; then
  note "run: tcp key metrics, $tcp_rounds rounds"
  RAW=$data/tcp_key.dat CPUS=$cpu_a,$cpu_b WEFT_LIB=$weft_lib \
    bash "$root/bench/tcp_targets.sh" "$build" "$tcp_rounds" >"$tcp_table" 2>>"$log" ||
    skip "tcp key metrics failed (see log.txt)"
else
  skip "tcp key metrics: weft's tcp or tcp-pingpong is missing"
fi

# ---------------------------------------------------------------- sweeps
for prov in shm tcp; do
  if [ "${weft_has[$prov]}" = 1 ]; then
    run_wp "wp_weft_$prov" msg "${weft_env[@]}" -- -p "$prov"
  else
    : >"$data/wp_weft_${prov}_lat.dat"; : >"$data/wp_weft_${prov}_bw.dat"
  fi
done
if [ "${weft_has[shm]}" = 1 ]; then
  run_wp wp_weft_shm_tag tagged "${weft_env[@]}" -- -p shm
else
  : >"$data/wp_weft_shm_tag_lat.dat"; : >"$data/wp_weft_shm_tag_bw.dat"
fi
run_wp wp_lf_shm msg "FI_LOG_LEVEL=warn" -- -p shm
run_wp wp_lf_shm_tag tagged "FI_LOG_LEVEL=warn" -- -p shm
run_wp wp_lf_tcp msg "FI_LOG_LEVEL=warn" -- -p tcp

# ---------------------------------------------------------------- fi_pingpong
pp_iters() {  # size kind
  local base=20000; [ "$2" = tcp ] && base=200
  local n=$(( base * 4096 / ($1 + 4096) )); [ $n -lt 10 ] && n=10; echo $n
}
run_pp() {  # name provider env...
  local name=$1 prov=$2; shift 2
  : >"$data/${name}_lat.dat"
  local s n srv ok=0
  for s in $sizes; do
    n=$(pp_iters "$s" "$prov"); port=$(free_tcp_port)
    env "$@" timeout 60 taskset -c "$cpu_b" fi_pingpong -p "$prov" -e rdm -I "$n" -S "$s" -B "$port" \
      >/dev/null 2>>"$log" &
    srv=$!
    wait_listen "$port" "$srv"
    if env "$@" timeout 60 taskset -c "$cpu_a" fi_pingpong -p "$prov" -e rdm -I "$n" -S "$s" \
         -P "$port" 127.0.0.1 >"$data/pp.out" 2>>"$log"; then
      awk -v s="$s" 'NR==2 {print s, $7}' "$data/pp.out" >>"$data/${name}_lat.dat"; ok=1
    fi
    wait "$srv" 2>/dev/null
    if [ $ok = 0 ]; then skip "fi_pingpong $name: failed at $s bytes"; return; fi
  done
  note "run: fi_pingpong $name done"
}
which fi_pingpong >/dev/null || skip "fi_pingpong not installed (libfabric-bin)"
if which fi_pingpong >/dev/null; then
  run_pp pp_lf_shm shm FI_LOG_LEVEL=warn
  run_pp pp_lf_tcp tcp FI_LOG_LEVEL=warn
  if [ -s "$data/wp_weft_shm_lat.dat" ]; then
    run_pp pp_weft_shm shm "${weft_env[@]}"
  else
    : >"$data/pp_weft_shm_lat.dat"; skip "fi_pingpong over weft shm: weft has no shm endpoints yet"
  fi
  if [ -s "$data/wp_weft_tcp_lat.dat" ]; then
    run_pp pp_weft_tcp tcp "${weft_env[@]}"
  else
    : >"$data/pp_weft_tcp_lat.dat"; skip "fi_pingpong over weft tcp: weft-perf over weft's tcp did not run"
  fi
fi

# ---------------------------------------------------------------- ucx_perftest
ucx_iters() {  # size kind test
  if [ "$3" = tag_lat ]; then
    local base=20000; [ "$2" = tcp ] && base=2000
    local n=$(( base * 4096 / ($1 + 4096) )); [ $n -lt 10 ] && n=10; echo $n
  else
    local cap=100000 bytes=$((256 << 20)); [ "$2" = tcp ] && { cap=20000; bytes=$((64 << 20)); }
    local n=$(( bytes / $1 )); [ $n -gt $cap ] && n=$cap; [ $n -lt 20 ] && n=20; echo $n
  fi
}
run_ucx() {  # name kind env...
  local name=$1 kind=$2; shift 2
  local t s n srv suffix col
  for t in tag_lat tag_bw; do
    if [ $t = tag_lat ]; then suffix=lat; else suffix=bw; fi
    : >"$data/${name}_$suffix.dat"
    for s in $sizes; do
      n=$(ucx_iters "$s" "$kind" $t); port=$(free_tcp_port)
      env "$@" timeout 60 taskset -c "$cpu_b" ucx_perftest -p "$port" >/dev/null 2>>"$log" &
      srv=$!
      wait_listen "$port" "$srv"
      if env "$@" timeout 60 taskset -c "$cpu_a" ucx_perftest -p "$port" 127.0.0.1 -t $t -s "$s" \
           -n "$n" >"$data/ucx.out" 2>>"$log"; then
        echo "ucx_perftest $name $t $s: $(grep '^Final:' "$data/ucx.out")" >>"$log"
        # Final: iters lat50 lat_avg lat_overall bw_avg bw_overall(MiB/s) ...
        if [ $t = tag_lat ]; then
          awk -v s="$s" '/^Final:/ {print s, $3}' "$data/ucx.out" >>"$data/${name}_$suffix.dat"
        else
          # "overall" bandwidth: total bytes / total time (MiB/s -> MB/s)
          awk -v s="$s" '/^Final:/ {printf "%s %.1f\n", s, $7 * 1.048576}' "$data/ucx.out" \
            >>"$data/${name}_$suffix.dat"
        fi
      else
        skip "ucx_perftest $name $t failed at $s bytes"; wait "$srv" 2>/dev/null; break
      fi
      wait "$srv" 2>/dev/null
    done
    note "run: ucx_perftest $name $t done"
  done
}
if which ucx_perftest >/dev/null; then
  run_ucx ucx_sm sm UCX_TLS=posix,cma,self
  run_ucx ucx_tcp tcp UCX_TLS=tcp,self UCX_NET_DEVICES=lo
else
  skip "ucx_perftest not installed (ucx-utils)"
fi
rm -f "$data/pp.out" "$data/ucx.out"

# ---------------------------------------------------------------- report
get() { [ -f "$data/$1.dat" ] && awk -v s="$2" '$1 == s {print $2; exit}' "$data/$1.dat"; }
ratio() { awk -v a="${1:-}" -v b="${2:-}" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else printf "n/a" }'; }
cell() { local v=$(get "$1" "$2"); echo "${v:--}"; }
human() { awk -v s="$1" 'BEGIN { if (s >= 1048576) printf "%gM", s/1048576; else if (s >= 1024) printf "%gK", s/1024; else printf "%d", s }'; }

lib_line() { head -1 "$data/probe.$1" 2>/dev/null; }

# key metrics: median over the rounds (the mean of the two middle values if a
# run failed and an even number is left), and every value in round order
key_vals() { awk -v m="$1" -v l="$2" '$1 == m && $2 == l {print $4}' "$key" 2>/dev/null; }
key_med() {
  key_vals "$1" "$2" | sort -g |
    awk '{v[NR] = $1} END { if (NR == 0) exit; if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
key_fmt() {  # value kind(lat|bw)
  [ -n "$1" ] || { echo "-"; return; }
  if [ "$2" = lat ]; then awk -v v="$1" 'BEGIN {printf "%.3f", v}'; else awk -v v="$1" 'BEGIN {printf "%.0f", v}'; fi
}
# An awk function for the per-round ratio lists below: the median of
# q[1..n] (sorts q in place).
awk_list_median='
  function list_median(q, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (q[j] < q[i]) { t = q[i]; q[i] = q[j]; q[j] = t }
    return (n % 2) ? q[(n + 1) / 2] : (q[n / 2] + q[n / 2 + 1]) / 2
  }
'
key_target() {  # metric ucx-metric kind -> the verdict on the target, round by round
  # Each round ran the three libraries back to back, so the ratio that
  # counts is weft's over the better of the other two *in the same round*;
  # the verdict is on the median of those per-round ratios.
  awk -v m="$1" -v um="$2" -v k="$3" "$awk_list_median"'
    $1 == m && $2 == "weft" { w[$3] = $4 }
    $1 == m && $2 == "lf"   { l[$3] = $4 }
    $1 == um && $2 == "ucx" { u[$3] = $4 }
    END {
      n = 0
      for (r = 1; r <= 100; r++) {
        if (!(r in w)) continue
        b = ""
        if (r in l) b = l[r]
        if (r in u && (b == "" || (k == "lat" ? u[r] + 0 < b + 0 : u[r] + 0 > b + 0))) b = u[r]
        if (b == "" || b + 0 <= 0) continue
        q[++n] = w[r] / b; list = list sprintf("%s%.2f", n > 1 ? " " : "", w[r] / b)
      }
      if (n == 0) { print "n/a"; exit }
      med = list_median(q, n)
      if (k == "lat") printf "rounds %s: median %.2f ≤ 0.8: %s", list, med, (med <= 0.8) ? "**yes**" : "**no**"
      else printf "rounds %s: median %.2f ≥ 1: %s", list, med, (med >= 1) ? "**yes**" : "**no**"
    }' "$key" 2>/dev/null
}
key_row() {  # label metric ucx-metric kind
  local w l u
  w=$(key_med "$2" weft); l=$(key_med "$2" lf); u=$(key_med "$3" ucx)
  echo "| $1 | $(key_fmt "$w" "$4") | $(key_fmt "$l" "$4") | $(key_fmt "$u" "$4") | $(ratio "$w" "$l") | $(ratio "$w" "$u") | $(key_target "$2" "$3" "$4") |"
}
floor_ratios() {  # weft-metric floor-metric -> "r1 r2 ... (median m)", round by round
  awk -v m="$1" -v f="$2" "$awk_list_median"'
    $1 == m && $2 == "weft" { w[$3] = $4 }
    $1 == f && $2 == "hw"   { d[$3] = $4 }
    END {
      n = 0
      for (r = 1; r <= 1000; r++)
        if ((r in w) && d[r] > 0) { v[++n] = w[r] / d[r]; out = out sprintf("%s%.2f", n > 1 ? " " : "", v[n]) }
      if (n == 0) { print "-"; exit }
      printf "%s (median %.2f)", out, list_median(v, n)
    }' "$key"
}
key_runs_row() {  # label metric lib kind
  local v out=""
  for v in $(key_vals "$2" "$3"); do out+="${out:+, }$(key_fmt "$v" "$4")"; done
  echo "| $1 | $3 | ${out:--} |"
}
{
  echo "# weft comparison, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "Command: \`bash bench/compare.sh\` (SIZES=\"$sizes\", TIME=$time_s, KEY_ROUNDS=$key_rounds, KEY_TIME=$key_time), $(( $(date +%s) - started )) s."
  echo
  echo "## Key metrics, shm, one run"
  echo
  echo "Median of $key_rounds runs each; the libraries alternate run by run (every round runs"
  echo "all three back to back per metric, starting with a different one), all pinned to CPUs"
  echo "$cpu_a (initiator/client) and $cpu_b (peer/server). Latency: one-way µs, the median of"
  echo "each run's per-round-trip samples (weft-perf \`lat_us_median\`, ucx_perftest \`50.0%ile\`)."
  echo "Bandwidth: MB/s, MB = 10^6 bytes, *overall* = bytes / total time for all three"
  echo "(weft-perf \`bw_MBps_mean\`; ucx_perftest's \"MB/s\" is MiB/s and is converted × 1.048576)."
  echo "The value and ratio columns are medians over the rounds. The last column divides weft's"
  echo "value by the better of libfabric's and UCX's *in the same round* (the machine changes"
  echo "regime from minute to minute, so values from different rounds do not compare) and"
  echo "judges the target on the median of those ratios."
  echo
  echo "| metric | weft | libfabric shm | UCX sm | weft/libfabric | weft/UCX | weft / the better of the two, per round (target) |"
  echo "|---|---:|---:|---:|---:|---:|---|"
  key_row "8 B tagged latency (µs)" lat lat lat
  key_row "1 MiB tagged bandwidth (MB/s), window 64, one buffer (as ucx_perftest)" tbwr tbw bw
  key_row "1 MiB tagged bandwidth (MB/s), window 64, 64 buffers" tbw tbw bw
  key_row "1 MiB tagged bandwidth (MB/s), window 2, 2 buffers" tbw2 tbw bw
  key_row "1 MiB RMA write bandwidth (MB/s), heap memory, window 64, one buffer" wbwr wbwh bw
  key_row "1 MiB RMA write bandwidth (MB/s), heap memory, window 64, 64 buffers" wbw wbwh bw
  key_row "1 MiB RMA write bandwidth (MB/s), heap memory, window 2, 2 buffers" wbw2 wbwh bw
  key_row "1 MiB RMA write bandwidth (MB/s), shared memory, window 1" wbwm1 wbw bw
  key_row "1 MiB RMA write bandwidth (MB/s), shared memory, window 2" wbwm2 wbw bw
  echo
  fl=$(key_med floor hw); fs=$(key_med floor_sampled hw)
  echo "The floor under the latency row, in the same rounds: moving one cache line from CPU $cpu_a"
  echo "to CPU $cpu_b and back (\`cacheline-pingpong\`, one-way) takes a median $(key_fmt "$fl" lat) µs, or"
  echo "$(key_fmt "$fs" lat) µs with one TSC sample per round trip as both latency tests take. Every"
  echo "one-way message costs at least this; what a library adds is the rest. The floor moves"
  echo "with the VM's placement from round to round: compare it with the latency runs of the"
  echo "same round in the table below."
  echo
  echo "weft's 8 B latency over the floor of the same round (target ≤ 1.3): $(floor_ratios lat floor_median) by"
  echo "medians (weft-perf \`lat_us_median\` over \`floor_median_ns\`, which move in the clock's steps:"
  echo "5 ns one-way here), $(floor_ratios latb floor_batched) by batch means (the median of"
  echo "1,000-round-trip means: \`lat_us_batched\` over \`floor_batched_ns\`)."
  echo
  echo "Choices:"
  echo
  echo "- weft and libfabric are both measured by the same weft-perf binary (weft with"
  echo "  \`LD_LIBRARY_PATH\`), UCX by ucx_perftest with \`UCX_TLS=posix,cma,self\` (same UCX"
  echo "  number in both window rows: it is one measurement)."
  echo "- Buffers: ucx_perftest sends from one buffer and receives into one buffer whatever"
  echo "  the number of operations in flight (1 MiB each, cache-resident). The \"one buffer\""
  echo "  rows give weft-perf the same (\`--reuse\`): they are the like-for-like comparison."
  echo "  weft-perf's default gives every operation in flight its own buffer (window 64 at"
  echo "  1 MiB = 64 MiB per direction, far beyond the caches); those rows and the window-2"
  echo "  rows (2 MiB per direction) are shown too, with their own verdicts."
  echo "- RMA write: weft-perf \`write_bw\` waits for the local completion of every write of"
  echo "  a window; ucx_perftest \`ucp_put_bw\` posts puts and flushes at the end."
  echo "- RMA write memory: ucx_perftest allocates its buffers with \`ucp_mem_map\`, which"
  echo "  puts them in shared memory the peer maps, so its puts are a memcpy. The libfabric"
  echo "  API has no allocator: the application brings the memory. The \"shared memory\" rows"
  echo "  give weft-perf the same kind of memory (\`--mem memfd\`: a memfd sealed against"
  echo "  shrinking, for weft and libfabric alike); weft then maps the target's backing and"
  echo "  splits each large write with the target's progress loop. The heap rows give all"
  echo "  three heap memory (weft-perf's default; ucx_perftest with \`UCX_ALLOC_PRIO=heap\`):"
  echo "  all three then write with CMA."
  echo "- Latency: 8-byte \`fi_tinject\` ping-pong (weft-perf \`tagged_lat\`) vs UCP tag ping-pong."
  echo "- Medians over $key_rounds runs, not means: the machine is shared, and a preempted run is an outlier."
  echo
  echo "<details><summary>Every run, and the commands</summary>"
  echo
  echo "| metric | library | runs in round order |"
  echo "|---|---|---|"
  key_runs_row "cache-line floor (µs)" floor hw lat
  key_runs_row "cache-line floor, median round trip (µs)" floor_median hw lat
  key_runs_row "cache-line floor, batch means (µs)" floor_batched hw lat
  key_runs_row "8 B tagged latency, batch means (µs)" latb weft lat
  for spec in "8 B tagged latency (µs)|lat|lat" "1 MiB tagged bw, window 64|tbw|bw" "1 MiB tagged bw, window 2|tbw2|bw" \
              "1 MiB tagged bw, window 64, one buffer|tbwr|bw" "1 MiB write bw, window 64, one buffer|wbwr|bw" \
              "1 MiB write bw, window 64|wbw|bw" "1 MiB write bw, window 2|wbw2|bw" \
              "1 MiB write bw, memfd, window 1|wbwm1|bw" "1 MiB write bw, memfd, window 2|wbwm2|bw"; do
    IFS='|' read -r label m kd <<<"$spec"
    key_runs_row "$label" "$m" weft "$kd"; key_runs_row "$label" "$m" lf "$kd"
    case $m in tbw2|tbwr|wbw2|wbwr|wbwm1|wbwm2) ;; *) key_runs_row "$label" "$m" ucx "$kd";; esac
    [ $m = wbw ] && key_runs_row "$label (UCX heap)" wbwh ucx "$kd"
  done
  echo
  echo "Commands (weft: prefix \`LD_LIBRARY_PATH=$weft_lib\`; libfabric: \`FI_LOG_LEVEL=warn\`):"
  echo
  echo '```'
  for m in lat tbw tbw2 tbwr wbw wbw2 wbwr wbwm1 wbwm2; do
    spec=${key_args[$m]}
    echo "weft-perf -p shm ${spec%|*} --time $key_time --cpus $cpu_a,$cpu_b --csv   # column $(if [ "${spec#*|}" = 2 ]; then echo lat_us_median; else echo bw_MBps_mean; fi)"
  done
  for m in lat tbw wbw wbwh; do
    spec=${key_ucx[$m]}; read -r t sz n w <<<"${spec%|*}"
    echo "${key_ucx_env[$m]:+${key_ucx_env[$m]} }UCX_TLS=posix,cma,self taskset -c $cpu_b ucx_perftest -p PORT &"
    echo "${key_ucx_env[$m]:+${key_ucx_env[$m]} }UCX_TLS=posix,cma,self taskset -c $cpu_a ucx_perftest -p PORT 127.0.0.1 -t $t -s $sz -n $n -w $w   # Final: $(if [ "${spec#*|}" = 3 ]; then echo '50.0%ile'; else echo 'overall MiB/s'; fi)"
  done
  echo '```'
  echo
  echo "</details>"
  echo
  if [ -s "$tcp_table" ]; then
    echo "## Key metrics over tcp (loopback)"
    echo
    echo "Medians over $tcp_rounds rounds; each round runs every program once per metric, the"
    echo "order rotating. Latency: one-way µs of an 8-byte ping-pong; bandwidth: MB/s, window 64,"
    echo "one buffer for all messages in flight (weft-perf \`--reuse\`, as ucx_perftest sends)."
    echo "floor: a raw TCP socket pair with nothing but the system calls (\`tcp-pingpong\`, the"
    echo "best of its blocking, polling and epoll variants). weft and lf: weft-perf RDM"
    echo "\`tagged_lat\`/\`tagged_bw\` over weft's tcp and over Debian's \`tcp;ofi_rxm\`;"
    echo "weft_msg and lf_msg: MSG endpoints, \`msg_lat\`/\`msg_bw\`; ucx: \`ucx_perftest\`"
    echo "\`tag_lat\`/\`tag_bw\` with \`UCX_TLS=tcp\`. The last column is weft RDM over the better"
    echo "of lf, lf_msg and ucx in the same round (target: latency ≤ 0.8, bandwidth ≥ 1)."
    echo
    echo '```'
    cat "$tcp_table"
    echo '```'
    echo
  fi
  echo "## Machine"
  echo
  echo "- CPU: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)"
  echo "- cores: $(nproc) usable ($(grep -c ^processor /proc/cpuinfo) online), pinned to CPUs $cpu_a and $cpu_b"
  echo "- kernel: $(uname -r) ($(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-?}"))"
  echo "- libfabric: Debian $(dpkg-query -W -f='${Version}' libfabric1 2>/dev/null || echo ?); UCX: $(dpkg-query -W -f='${Version}' libucx0 2>/dev/null || echo ?)"
  echo "- weft: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo ?), $weft_lib"
  echo "- load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) (other work on these cores disturbs the numbers)"
  echo
  echo "Latency: weft-perf msg_lat and ucx_perftest tag_lat, median one-way µs;"
  echo "fi_pingpong -e rdm, usec/xfer (its only figure: a mean, so preemption shows)."
  echo "Bandwidth (MB = 10^6 bytes): weft-perf msg_bw, window 64: \"median\" is the size over"
  echo "the median time per message of a window (robust against preemption), \"mean\" is"
  echo "total bytes over total time, the definition of ucx_perftest tag_bw \"overall\"."
  echo "weft/libfabric compares the medians; the UCX ratios compare the means."
  echo "All RDM / UCP tag matching, the two sides pinned to CPUs $cpu_a and $cpu_b."
  if ((${#notes[@]})); then
    echo
    echo "Notes:"
    for n in "${notes[@]}"; do echo "- $n"; done
  fi
  for kind in shm tcp; do
    ucxk=sm; [ $kind = tcp ] && ucxk=tcp
    echo
    echo "## Latency over $kind (µs, lower is better)"
    echo
    echo "| size | weft-perf weft | weft-perf libfabric | fi_pingpong libfabric | fi_pingpong weft | UCX $ucxk | weft/libfabric | weft/UCX | libfabric/UCX |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for s in $sizes; do
      w=$(get wp_weft_${kind}_lat "$s"); l=$(get wp_lf_${kind}_lat "$s"); u=$(get ucx_${ucxk}_lat "$s")
      echo "| $(human "$s") | ${w:--} | ${l:--} | $(cell pp_lf_${kind}_lat "$s") | $(cell pp_weft_${kind}_lat "$s") | ${u:--} | $(ratio "$w" "$l") | $(ratio "$w" "$u") | $(ratio "$l" "$u") |"
    done
    echo
    echo "## Bandwidth over $kind (MB/s, higher is better)"
    echo
    echo "| size | weft-perf weft median | weft-perf libfabric median | weft-perf weft mean | weft-perf libfabric mean | UCX $ucxk overall | weft/libfabric | weft/UCX | libfabric/UCX |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for s in $sizes; do
      w=$(get wp_weft_${kind}_bw "$s"); l=$(get wp_lf_${kind}_bw "$s"); u=$(get ucx_${ucxk}_bw "$s")
      wm=$(get wp_weft_${kind}_bwmean "$s"); lm=$(get wp_lf_${kind}_bwmean "$s")
      echo "| $(human "$s") | ${w:--} | ${l:--} | ${wm:--} | ${lm:--} | ${u:--} | $(ratio "$w" "$l") | $(ratio "$wm" "$u") | $(ratio "$lm" "$u") |"
    done
  done
  echo
  echo "## Tagged latency over shm (µs, lower is better)"
  echo
  echo "weft-perf tagged_lat (fi_tsend/fi_trecv) vs ucx_perftest tag_lat: both tag matching."
  echo
  echo "| size | weft-perf weft | weft-perf libfabric | UCX sm | weft/libfabric | weft/UCX | libfabric/UCX |"
  echo "|---:|---:|---:|---:|---:|---:|---:|"
  for s in $sizes; do
    w=$(get wp_weft_shm_tag_lat "$s"); l=$(get wp_lf_shm_tag_lat "$s"); u=$(get ucx_sm_lat "$s")
    echo "| $(human "$s") | ${w:--} | ${l:--} | ${u:--} | $(ratio "$w" "$l") | $(ratio "$w" "$u") | $(ratio "$l" "$u") |"
  done
  echo
  echo "## Tagged bandwidth over shm (MB/s, higher is better)"
  echo
  echo "| size | weft-perf weft median | weft-perf libfabric median | weft-perf weft mean | weft-perf libfabric mean | UCX sm overall | weft/libfabric | weft/UCX | libfabric/UCX |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for s in $sizes; do
    w=$(get wp_weft_shm_tag_bw "$s"); l=$(get wp_lf_shm_tag_bw "$s"); u=$(get ucx_sm_bw "$s")
    wm=$(get wp_weft_shm_tag_bwmean "$s"); lm=$(get wp_lf_shm_tag_bwmean "$s")
    echo "| $(human "$s") | ${w:--} | ${l:--} | ${wm:--} | ${lm:--} | ${u:--} | $(ratio "$w" "$l") | $(ratio "$wm" "$u") | $(ratio "$lm" "$u") |"
  done
  echo
  echo "![latency](lat.png)"
  echo
  echo "![bandwidth](bw.png)"
  echo
  echo "![tagged latency over shm](tag_lat.png)"
  echo
  echo "![tagged bandwidth over shm](tag_bw.png)"
} >"$out/README.md"

# ---------------------------------------------------------------- plots
if which gnuplot >/dev/null; then
  term="pngcairo size 1000,650 font ',10'"
  gnuplot -e "set terminal pngcairo" -e "exit" 2>/dev/null || term="png size 1000,650"
  plot_cmd() {  # suffix series...
    local first=1 f title what=$1; shift
    for f in "$@"; do
      [ -s "$data/${f}_$what.dat" ] || continue
      case $f in
        wp_weft_*_tag) title="weft-perf weft shm tagged";; wp_lf_*_tag) title="weft-perf libfabric shm tagged";;
        wp_weft_*) title="weft-perf weft ${f##*_}";; wp_lf_*) title="weft-perf libfabric ${f##*_}";;
        pp_lf_*) title="fi\\\\_pingpong libfabric ${f##*_}";; pp_weft_*) title="fi\\\\_pingpong weft ${f##*_}";;
        ucx_*) title="UCX ${f##*_}";;
      esac
      if [ "$what" = bw ]; then
        case $f in wp_*) title="$title (median)";; ucx_*) title="$title (overall)";; esac
      fi
      [ $first = 1 ] && printf 'plot ' || printf ', '
      printf '"%s" using 1:2 with linespoints title "%s"' "$data/${f}_$what.dat" "$title"
      first=0
    done
    echo
  }
  all_series=(wp_weft_shm wp_lf_shm pp_lf_shm pp_weft_shm ucx_sm wp_weft_tcp wp_lf_tcp pp_lf_tcp ucx_tcp)
  tag_series=(wp_weft_shm_tag wp_lf_shm_tag ucx_sm)
  for png in lat bw tag_lat tag_bw; do
    what=${png#tag_}
    if [ "$png" = "$what" ]; then cmd=$(plot_cmd $what "${all_series[@]}"); tagged=""
    else cmd=$(plot_cmd $what "${tag_series[@]}"); tagged="Tagged "; fi
    [ -n "$cmd" ] || continue
    if [ $what = lat ]; then ylabel="one-way latency (µs)"; key="top left"; else ylabel="bandwidth (MB/s)"; key="bottom right"; fi
    gnuplot 2>>"$log" <<EOF || note "gnuplot failed for $png"
set terminal $term
set output "$out/$png.png"
set title "$(if [ $what = lat ]; then echo ${tagged:+Tagged }latency; else echo ${tagged:+Tagged }bandwidth; fi | sed 's/^./\U&/')$([ -n "$tagged" ] && echo " over shm") vs message size ($(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1 | tr -d '"'), CPUs $cpu_a,$cpu_b)"
set logscale x 2
set logscale y 10
set xtics ("1" 1, "16" 16, "256" 256, "4K" 4096, "64K" 65536, "1M" 1048576, "4M" 4194304)
set xlabel "message size (bytes)"
set ylabel "$ylabel"
set key $key
set grid
$cmd
EOF
  done
else
  note "gnuplot not installed (gnuplot-nox): no plots"
fi

# The UCP face's rows (ucp-perf over UCX and weft, MPICH ping-pong; active
# messages and MPI accumulates): UCP=0 skips.
if [ "${UCP:-1}" != 0 ] && [ -e "$build/lib/libucp.so.0" ]; then
  bash "$root/bench/ucp_compare.sh" "$build" "${UCP_ROUNDS:-3}" | sed '1s/^# /## /' >>"$out/README.md" || note "ucp_compare.sh failed"
  bash "$root/bench/ucp_am_compare.sh" "$build" "${UCP_ROUNDS:-3}" | sed '1s/^# /## /' >>"$out/README.md" ||
    note "ucp_am_compare.sh failed"
fi

# The linked provider's rows (lnx beside shm and tcp alone, MPI ping-pongs
# over it beside real UCX): LNX=0 skips.
if [ "${LNX:-1}" != 0 ]; then
  bash "$root/bench/lnx_compare.sh" "$build" "${LNX_ROUNDS:-5}" | sed '1s/^# /## /' >>"$out/README.md" ||
    note "lnx_compare.sh failed"
fi

# Collectives (weft-perf barrier_lat / allreduce_* over weft and Debian's
# tcp;ofi_rxm beside MPICH's and Open MPI's MPI_Barrier / MPI_Allreduce):
# COLL=0 skips.
if [ "${COLL:-1}" != 0 ]; then
  note "run: coll_compare.sh"
  CPUS=$cpu_a,$cpu_b bash "$root/bench/coll_compare.sh" "$build" "${COLL_ROUNDS:-3}" | sed '1s/^# /## /' \
    >>"$out/README.md" || note "coll_compare.sh failed"
fi

# The placement sweep (bench/placement_sweep.sh: small-message latency with
# the two ranks on every pair of CPUs and on one CPU, beside the cache-line
# floor): SWEEP=1 runs it. Not by default: it takes about 8 minutes on the
# 2-CPU VM, most of it the other libraries with both ranks on one CPU, where
# each of their messages waits for a time slice (milliseconds).
if [ "${SWEEP:-0}" != 0 ]; then
  note "run: placement sweep"
  WEFT_LIB=$weft_lib RAW=$data/sweep.dat bash "$root/bench/placement_sweep.sh" "$build" 2>>"$log" |
    sed '1s/^# /## /' >>"$out/README.md" || note "placement_sweep.sh failed"
fi

# ---------------------------------------------------------------- RSM face
# rsm-perf: RSM's put/get/map beside the fi_* operations it issues (docs/rsm.md).
if [ -x "$build/bin/rsm-perf" ]; then
  note "run: rsm-perf"
  { for a in "--mem heap" "--mem memfd" "--ctl tcp"; do LD_LIBRARY_PATH=$build/lib "$build/bin/rsm-perf" --cpus $cpu_a,$cpu_b $a; done
    for c in shm tcp; do LD_LIBRARY_PATH=$build/lib/rsm-only "$build/bin/rsm-perf" --cpus $cpu_a,$cpu_b --ctl $c; done
  } >"$out/rsm-perf.txt" 2>>"$log" || note "rsm-perf failed (see log.txt)"
  printf '\n## RSM face (rsm-perf)\n\n```\n%s\n```\n' "$(cat "$out/rsm-perf.txt")" >>"$out/README.md"
fi

echo "compare: done in $(( $(date +%s) - started )) s: $out/README.md"
cat "$out/README.md"
