#!/usr/bin/env bash
# Side-by-side comparison on this machine, in one go:
#   weft-perf over weft (LD_LIBRARY_PATH=BUILD/lib; skipped with a note while
#   weft has no endpoints), weft-perf over Debian's libfabric (shm, tcp),
#   Debian's fi_pingpong over both, and UCX's ucx_perftest over shared memory
#   and over tcp on loopback; the same sizes, the two sides pinned the same way.
# Writes bench/results/<date>/: README.md (machine, tables, ratios), lat.png,
# bw.png, data/*.dat (size value) and log.txt.
#
#   usage: bash bench/compare.sh [BUILD_DIR]        (default BUILD_DIR: build)
#   env:   SIZES="1 4 16 ..."  sizes in bytes (default 1 B .. 4 MiB, x4 steps)
#          TIME=0.1            weft-perf measuring time per size, seconds
#          CPUS=A,B            the two CPUs (default: the first two allowed)
#          OUT=DIR             results directory
#          WEFT_LIB=DIR        weft's libfabric.so.1 (default BUILD_DIR/lib)
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
mkdir -p "$build"
build=$(cd "$build" && pwd)
perf=$build/bin/weft-perf
if [ ! -x "$perf" ]; then
  echo "compare: building weft-perf in $build"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build "$build" -j2 --target weft-perf >/dev/null || { echo "compare: build failed"; exit 1; }
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
expand_cpus() {  # "0-2,5" -> "0 1 2 5"
  local part
  for part in ${1//,/ }; do
    if [[ $part == *-* ]]; then seq "${part%-*}" "${part#*-}"; else echo "$part"; fi
  done
}
if [ -n "${CPUS:-}" ]; then
  cpu_a=${CPUS%,*}; cpu_b=${CPUS#*,}
else
  allowed=($(expand_cpus "$(awk '/Cpus_allowed_list/{print $2}' /proc/self/status)"))
  cpu_a=${allowed[0]:-0}; cpu_b=${allowed[1]:-$cpu_a}
fi
echo "compare: results in $out (CPUs $cpu_a,$cpu_b)"

note() { echo "$*" | tee -a "$log" >&2; }
notes=()
skip() { notes+=("$*"); note "skip: $*"; }

# ---------------------------------------------------------------- weft-perf
# run_wp NAME ENV... -- ARGS : writes data/NAME_lat.dat and data/NAME_bw.dat
run_wp() {
  local name=$1 env_args=(); shift
  while [ "$1" != -- ]; do env_args+=("$1"); shift; done; shift
  local t col suffix
  for t in msg_lat msg_bw; do
    if [ $t = msg_lat ]; then col=2 suffix=lat; else col=4 suffix=bw; fi
    note "run: weft-perf $name $t"
    if env "${env_args[@]}" timeout 120 "$perf" "$@" -t $t -s "$smin:$smax" --time "$time_s" \
         --cpus "$cpu_a,$cpu_b" --csv >"$data/$name.$t.csv" 2>>"$log"; then
      awk -F, -v c=$col 'NR>1 {print $1, $c}' "$data/$name.$t.csv" >"$data/${name}_$suffix.dat"
      [ $t = msg_bw ] && awk -F, 'NR>1 {print $1, $7}' "$data/$name.$t.csv" >"$data/${name}_bwmean.dat"
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
for prov in shm tcp; do
  if [ ! -e "$weft_lib/libfabric.so.1" ]; then
    skip "weft $prov: $weft_lib/libfabric.so.1 not built"
    : >"$data/wp_weft_${prov}_lat.dat"; : >"$data/wp_weft_${prov}_bw.dat"
  elif weft_ok "$prov"; then
    run_wp "wp_weft_$prov" "${weft_env[@]}" -- -p "$prov"
  else
    skip "weft $prov: no endpoints yet ($(grep -m1 error "$data/probe.$prov" | cut -c1-120))"
    : >"$data/wp_weft_${prov}_lat.dat"; : >"$data/wp_weft_${prov}_bw.dat"
  fi
done
run_wp wp_lf_shm "FI_LOG_LEVEL=warn" -- -p shm
run_wp wp_lf_tcp "FI_LOG_LEVEL=warn" -- -p tcp

# ---------------------------------------------------------------- fi_pingpong
port=$(( 42000 + $$ % 10000 ))
pp_iters() {  # size kind
  local base=20000; [ "$2" = tcp ] && base=200
  local n=$(( base * 4096 / ($1 + 4096) )); [ $n -lt 10 ] && n=10; echo $n
}
run_pp() {  # name provider env...
  local name=$1 prov=$2; shift 2
  : >"$data/${name}_lat.dat"
  local s n srv ok=0
  for s in $sizes; do
    n=$(pp_iters "$s" "$prov"); port=$((port + 1))
    env "$@" timeout 60 taskset -c "$cpu_b" fi_pingpong -p "$prov" -e rdm -I "$n" -S "$s" -B "$port" \
      >/dev/null 2>>"$log" &
    srv=$!
    sleep 0.2
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
      n=$(ucx_iters "$s" "$kind" $t); port=$((port + 1))
      env "$@" timeout 60 taskset -c "$cpu_b" ucx_perftest -p "$port" >/dev/null 2>>"$log" &
      srv=$!
      sleep 0.2
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
{
  echo "# weft comparison, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "Command: \`bash bench/compare.sh\` (SIZES=\"$sizes\", TIME=$time_s), $(( $(date +%s) - started )) s."
  echo
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
  echo "![latency](lat.png)"
  echo
  echo "![bandwidth](bw.png)"
} >"$out/README.md"

# ---------------------------------------------------------------- plots
if which gnuplot >/dev/null; then
  term="pngcairo size 1000,650 font ',10'"
  gnuplot -e "set terminal pngcairo" -e "exit" 2>/dev/null || term="png size 1000,650"
  plot_cmd() {  # suffix
    local first=1 f title
    for f in wp_weft_shm wp_lf_shm pp_lf_shm pp_weft_shm ucx_sm wp_weft_tcp wp_lf_tcp pp_lf_tcp ucx_tcp; do
      [ -s "$data/${f}_$1.dat" ] || continue
      case $f in
        wp_weft_*) title="weft-perf weft ${f##*_}";; wp_lf_*) title="weft-perf libfabric ${f##*_}";;
        pp_lf_*) title="fi\\\\_pingpong libfabric ${f##*_}";; pp_weft_*) title="fi\\\\_pingpong weft ${f##*_}";;
        ucx_*) title="UCX ${f##*_}";;
      esac
      if [ "$1" = bw ]; then
        case $f in wp_*) title="$title (median)";; ucx_*) title="$title (overall)";; esac
      fi
      [ $first = 1 ] && printf 'plot ' || printf ', '
      printf '"%s" using 1:2 with linespoints title "%s"' "$data/${f}_$1.dat" "$title"
      first=0
    done
    echo
  }
  for what in lat bw; do
    cmd=$(plot_cmd $what)
    [ -n "$cmd" ] || continue
    if [ $what = lat ]; then ylabel="one-way latency (µs)"; key="top left"; else ylabel="bandwidth (MB/s)"; key="bottom right"; fi
    gnuplot 2>>"$log" <<EOF || note "gnuplot failed for $what"
set terminal $term
set output "$out/$what.png"
set title "$(if [ $what = lat ]; then echo Latency; else echo Bandwidth; fi) vs message size ($(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1 | tr -d '"'), CPUs $cpu_a,$cpu_b)"
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

echo "compare: done in $(( $(date +%s) - started )) s: $out/README.md"
cat "$out/README.md"
