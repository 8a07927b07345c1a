#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Collectives side by side, in one run on this machine, two processes on
# the two CPUs, rounds alternating the order of what is compared:
#   weft-perf barrier_lat, allreduce_lat (8 B) and allreduce_bw (1 MiB;
#   FI_SUM of uint64) over weft's shm and tcp (LD_LIBRARY_PATH) and over
#   Debian's libfabric (tcp;ofi_rxm, the one provider it offers FI_COLLECTIVE
#   on), beside MPI_Barrier and MPI_Allreduce (the same sum) of MPICH and Open
#   MPI (bench/mpi_coll.c, mpiexec -n 2 on this host, each MPI's own
#   shared-memory path).
# Medians of per-operation times; per round, then the median of the rounds.
# Usage: bash bench/coll_compare.sh [BUILD] [ROUNDS]   (default build, 3)
# Prints a markdown section (make compare appends it to its README.md).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
rounds=${2:-3}
bin=$build/bin
lib=$build/lib
cpus=${CPUS:-0,1}
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# weft-perf over weft (LD_LIBRARY_PATH) or Debian's libfabric, pinned, csv
# rows on stdout.
perf_run() {  # weft|debian weft-perf-arguments...
  local env_lib=()
  [ "$1" = weft ] && env_lib=(LD_LIBRARY_PATH="$lib")
  shift
  env "${env_lib[@]}" timeout 60 "$bin/weft-perf" --cpus "$cpus" --csv "$@" 2>/dev/null | grep -E '^[0-9]'
}
# weft-perf's median latency (csv column 2) of one run: weft or debian.
wp() {  # lib test size prov
  perf_run "$1" -p "$4" -t "$2" -s "$3" --time 0.2 | tail -1 | cut -d, -f2
}
# The library and provider of a libfabric column.
lib_prov() {  # weft_shm|weft_tcp|debian_rxm -> "lib prov"
  case $1 in
    weft_shm) echo "weft shm" ;;
    weft_tcp) echo "weft tcp" ;;
    debian_rxm) echo "debian tcp" ;;
  esac
}
# mpi-coll's median latency of one run.
mpi() {  # mpich|openmpi test size
  local launch=(mpiexec.mpich -n 2 -bind-to core) args=(-t "$2")
  [ "$1" = openmpi ] && launch=(mpiexec.openmpi -n 2 --bind-to core)
  [ "$2" = allreduce ] && args+=(-s "$3")
  [ "$3" -gt 65536 ] && args+=(-n 2000) || args+=(-n 50000)
  [ -x "$bin/mpi-coll-$1" ] || return 0
  timeout 120 "${launch[@]}" "$bin/mpi-coll-$1" "${args[@]}" 2>/dev/null | awk '/^mpi_coll/ {print $4}'
}

metrics="barrier_lat:barrier:8 allreduce_lat:allreduce:8 allreduce_bw:allreduce:1048576"
libs="weft_shm weft_tcp debian_rxm mpich openmpi"
for r in $(seq 1 "$rounds"); do
  order=$libs
  ((r % 2 == 0)) && order=$(echo $libs | tr ' ' '\n' | tac | tr '\n' ' ')
  for m in $metrics; do
    IFS=: read -r wt mt size <<<"$m"
    for l in $order; do
      case $l in
        weft_shm | weft_tcp | debian_rxm) read -r L P <<<"$(lib_prov "$l")" && v=$(wp "$L" "$wt" "$size" "$P") ;;
        *) v=$(mpi "$l" "$mt" "$size") ;;
      esac
      echo "$wt $l $r ${v:-}" >>"$raw"
    done
  done
done

med() {  # metric lib -> median over rounds (or -)
  awk -v m="$1" -v l="$2" '$1 == m && $2 == l && $4 != "" {print $4}' "$raw" | sort -g |
    awk '{v[NR] = $1} END { if (NR) printf "%.2f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; else printf "-" }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else printf "n/a" }'; }

echo "# Collectives (bench/coll_compare.sh)"
echo
echo "Two processes on CPUs $cpus, $rounds rounds (orders alternating), median per-operation time in"
echo "µs (the median of the rounds' medians). weft's over shm and tcp; Debian's libfabric over"
echo "tcp;ofi_rxm (its only provider with FI_COLLECTIVE); MPICH and Open MPI on their own"
echo "shared-memory paths. Ratios: weft shm over each other column (below 1: weft is faster)."
echo "A busy 2-core machine: ratios side by side, not absolute times. Debian's allreduce_bw"
echo "(1 MiB) returns wrong sums: see the checked table by size below."
echo
echo "| metric | weft shm | weft tcp | Debian tcp;ofi_rxm | MPICH | Open MPI | shm/rxm | shm/MPICH | shm/Open MPI | weft tcp/rxm |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for m in $metrics; do
  wt=${m%%:*}
  s=$(med "$wt" weft_shm) t=$(med "$wt" weft_tcp) d=$(med "$wt" debian_rxm) a=$(med "$wt" mpich) o=$(med "$wt" openmpi)
  echo "| $wt | $s | $t | $d | $a | $o | $(ratio "$s" "$d") | $(ratio "$s" "$a") | $(ratio "$s" "$o") | $(ratio "$t" "$d") |"
done

# allreduce_lat by size, weft (shm, tcp) beside Debian's tcp;ofi_rxm: the
# issue's "faster at every size" is only a comparison where both answers are
# right, so each library's results are checked at each size first
# (weft-perf --check: every element of 50 operations against the sum) and a
# size where they are wrong says so beside its time.
sizes=${COLL_SIZES:-"8 1024 16384 32768 131072 262144 1048576"}
checked() {  # lib size prov -> "ok" or "wrong"
  if perf_run "$1" -p "$3" -t allreduce_lat -s "$2" -n 50 --check | grep -q .; then echo ok; else echo wrong; fi
}
sraw=$(mktemp)
trap 'rm -f "$raw" "$sraw"' EXIT
for s in $sizes; do
  for l in weft_shm weft_tcp debian_rxm; do
    read -r L P <<<"$(lib_prov "$l")"
    echo "check $l $s $(checked "$L" "$s" "$P")" >>"$sraw"
  done
done
for r in $(seq 1 "$rounds"); do
  order="weft_shm weft_tcp debian_rxm"
  ((r % 2 == 0)) && order="debian_rxm weft_tcp weft_shm"
  for s in $sizes; do
    for l in $order; do
      read -r L P <<<"$(lib_prov "$l")"
      v=$(wp "$L" allreduce_lat "$s" "$P")
      echo "size$s $l $r ${v:-}" >>"$raw"
    done
  done
done
cell() {  # lib size -> "time" or "time (wrong results)"
  local v c
  v=$(med "size$2" "$1")
  c=$(awk -v l="$1" -v s="$2" '$1 == "check" && $2 == l && $3 == s {print $4}' "$sraw")
  [ "$c" = ok ] && echo "$v" || echo "$v (results wrong)"
}
echo
echo "allreduce_lat (FI_SUM of uint64) by size, µs, medians of $rounds rounds. Each cell's results were"
echo "checked first (weft-perf --check, 50 operations, every element): \"results wrong\" marks a"
echo "library whose allreduce returned wrong sums at that size; its time is not a comparison."
echo
echo "| bytes | weft shm | weft tcp | Debian tcp;ofi_rxm | weft shm/rxm | weft tcp/rxm |"
echo "|---|---|---|---|---|---|"
for s in $sizes; do
  a=$(med "size$s" weft_shm) b=$(med "size$s" weft_tcp) d=$(med "size$s" debian_rxm)
  echo "| $s | $(cell weft_shm "$s") | $(cell weft_tcp "$s") | $(cell debian_rxm "$s") | $(ratio "$a" "$d") | $(ratio "$b" "$d") |"
done
