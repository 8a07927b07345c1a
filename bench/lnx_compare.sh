#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The linked provider's comparison, in one run on this machine, rounds
# alternating the order of what is compared:
#   1. a peer on this host: weft-perf over lnx against over shm alone
#      (tagged latency 8 B; tagged bandwidth 1 MiB, window 64, one buffer);
#   2. a peer on another host (two network namespaces, tests/netns/netns.sh):
#      lnx against tcp alone, the same two metrics;
#   3. MPICH's ping-pong (bench/mpi_pingpong.c) between ranks 0 and 1 of a
#      2 x 2 job on two namespace hosts (the two share a host), over weft
#      (LD_LIBRARY_PATH: the UCP face on the linked provider) and over
#      Debian's UCX, Hydra launching through tests/mpi/ns_rsh.sh;
#   4. Open MPI's ping-pong on one host: pml cm + mtl ofi over weft (the
#      linked provider) against pml ucx over Debian's UCX.
# Ratios are per round, then the median; targets: lnx / shm and lnx / tcp
# <= 1.05 for latency (>= 0.95 for bandwidth), MPI over weft / over UCX <= 1.0.
# Usage: bash bench/lnx_compare.sh [BUILD] [ROUNDS]   (default build, 5)
# Writes bench/results/lnx-<date>/README.md and prints it. Root, for the
# namespaces; parts that cannot run say so.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
rounds=${2:-5}
bin=$build/bin
lib=$build/lib
cpus=${CPUS:-0,1}
out=$root/bench/results/lnx-$(date +%Y-%m-%d_%H%M%S)
mkdir -p "$out"
raw=$out/raw.txt
: >"$raw"
notes=()
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# weft-perf's median latency (column 2) or bandwidth (column 4) of one run.
wp() {  # col args...
  local col=$1
  shift
  env LD_LIBRARY_PATH="$lib" timeout 120 "$bin/weft-perf" "$@" --csv 2>/dev/null | tail -1 | cut -d, -f"$col"
}
lat=(-t tagged_lat -s 8)
bw=(-t tagged_bw -s 1M --reuse)

# ---------------------------------------------------------------- 1. one host
for r in $(seq 1 "$rounds"); do
  order="shm lnx"
  ((r % 2 == 0)) && order="lnx shm"
  for p in $order; do echo "$p lat1 $r $(wp 2 -p "$p" --cpus "$cpus" "${lat[@]}")" >>"$raw"; done
  for p in $order; do echo "$p bw1 $r $(wp 4 -p "$p" --cpus "$cpus" "${bw[@]}")" >>"$raw"; done
done

# ---------------------------------------------------------------- 2. two hosts
two_hosts() {
  local r p order port=47700
  for r in $(seq 1 "$rounds"); do
    order="tcp lnx"
    ((r % 2 == 0)) && order="lnx tcp"
    for m in lat bw; do
      for p in $order; do
        port=$((port + 1))
        local args=("${lat[@]}")
        [ $m = bw ] && args=("${bw[@]}")
        ip netns exec "$WEFT_NS_2" env LD_LIBRARY_PATH="$lib" FI_TCP_IFACE=eth0 timeout 120 \
          taskset -c "${cpus#*,}" "$bin/weft-perf" --server -p "$p" -P $port --no-pin "${args[@]}" \
          >/dev/null 2>&1 &
        local srv=$! v="" col=2
        [ $m = bw ] && col=4
        for _ in $(seq 50); do
          v=$(ip netns exec "$WEFT_NS_1" env LD_LIBRARY_PATH="$lib" FI_TCP_IFACE=eth0 timeout 120 \
            taskset -c "${cpus%,*}" "$bin/weft-perf" -p "$p" -P $port --no-pin "${args[@]}" --csv "$WEFT_ADDR_2" \
            2>/dev/null | tail -1 | cut -d, -f$col)
          [ -n "$v" ] && break
          sleep 0.1
        done
        wait $srv 2>/dev/null
        echo "$p ${m}2 $r $v" >>"$raw"
      done
    done
  done
}
export -f two_hosts
export raw rounds lib bin cpus
lat_s="${lat[*]}" bw_s="${bw[*]}"
if ! bash "$root/tests/netns/netns.sh" -n 2 -- bash -c "lat=($lat_s); bw=($bw_s); two_hosts"; then
  notes+=("two hosts: network namespaces could not be made here (root needed)")
fi

# ---------------------------------------------------------------- 3. MPICH, co-located ranks of a two-host job
mpich_two_hosts() {
  local r lib_kind order
  for r in $(seq 1 "$rounds"); do
    order="weft ucx"
    ((r % 2 == 0)) && order="ucx weft"
    for lib_kind in $order; do
      local envs=() me=(env)
      [ $lib_kind = weft ] && envs=(-genv LD_LIBRARY_PATH "$lib") me=(env LD_LIBRARY_PATH="$lib")
      local o
      o=$(ip netns exec "$WEFT_NS_1" "${me[@]}" TMPDIR="$WEFT_NS_TMP" timeout 300 \
        mpiexec.mpich -launcher ssh -launcher-exec "$root/tests/mpi/ns_rsh.sh" \
        -hosts "$WEFT_ADDR_1:2,$WEFT_ADDR_2:2" -n 4 "${envs[@]}" "$bin/mpi-pingpong" 8 2>&1 | grep '^mpi_pingpong')
      echo "$lib_kind mpich_lat $r $(awk '{print $3}' <<<"$o")" >>"$raw"
    done
  done
}
export -f mpich_two_hosts
export root
if command -v mpiexec.mpich >/dev/null && [ -x "$bin/mpi-pingpong" ]; then
  WEFT_NS_TMP=$(mktemp -d) bash "$root/tests/netns/netns.sh" -n 2 -- bash -c mpich_two_hosts ||
    notes+=("MPICH across hosts: could not run")
else
  notes+=("MPICH or mpi-pingpong missing: no MPICH comparison")
fi

# ---------------------------------------------------------------- 4. Open MPI on one host
if command -v mpirun.openmpi >/dev/null && [ -x "$bin/mpi-pingpong-openmpi" ]; then
  for r in $(seq 1 "$rounds"); do
    for kind in ofi ucx; do
      if [ $kind = ofi ]; then
        o=$(LD_LIBRARY_PATH=$lib timeout 300 taskset -c "$cpus" mpirun.openmpi -np 2 --bind-to none \
          -x LD_LIBRARY_PATH --mca pml cm --mca mtl ofi --mca btl self,vader "$bin/mpi-pingpong-openmpi" 8 2>&1 |
          grep '^mpi_pingpong')
      else
        o=$(timeout 300 taskset -c "$cpus" mpirun.openmpi -np 2 --bind-to none --mca pml ucx --mca pml_ucx_tls any \
          --mca pml_ucx_devices any --mca btl self "$bin/mpi-pingpong-openmpi" 8 2>&1 | grep '^mpi_pingpong')
      fi
      echo "$kind ompi_lat $r $(awk '{print $3}' <<<"$o")" >>"$raw"
    done
  done
else
  notes+=("Open MPI or mpi-pingpong-openmpi missing: no Open MPI comparison")
fi

# ---------------------------------------------------------------- report
. "$root/bench/rounds.sh"  # med, get, ratios
{
  echo "# The linked provider: $(date -u '+%F %T') UTC, $rounds rounds, CPUs $cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "$(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; UCX $(ucx_info -v 2>/dev/null | sed -n 's/^# Version //p')"
  echo
  echo "| metric | lnx | part alone | lnx / part per round (median) |"
  echo "|---|---:|---:|---|"
  echo "| same host, 8 B tagged latency, one-way µs (part: shm) | $(get lnx lat1) | $(get shm lat1) | $(ratios lnx shm lat1) |"
  echo "| same host, 1 MiB tagged bandwidth MB/s (part: shm) | $(get lnx bw1) | $(get shm bw1) | $(ratios lnx shm bw1) |"
  echo "| two hosts, 8 B tagged latency, one-way µs (part: tcp) | $(get lnx lat2) | $(get tcp lat2) | $(ratios lnx tcp lat2) |"
  echo "| two hosts, 1 MiB tagged bandwidth MB/s (part: tcp) | $(get lnx bw2) | $(get tcp bw2) | $(ratios lnx tcp bw2) |"
  echo
  echo "| MPI ping-pong 8 B, one-way µs | over weft | over UCX | weft / UCX per round (median) |"
  echo "|---|---:|---:|---|"
  echo "| MPICH ch4:ucx, ranks 0 and 1 of a 2 x 2 job on two hosts (they share one) | $(get weft mpich_lat) | $(get ucx mpich_lat) | $(ratios weft ucx mpich_lat) |"
  echo "| Open MPI on one host: pml cm + mtl ofi over weft; pml ucx over UCX | $(get ofi ompi_lat) | $(get ucx ompi_lat) | $(ratios ofi ucx ompi_lat) |"
  echo
  for n in "${notes[@]}"; do echo "- $n"; done
  echo
  echo "Raw figures: raw.txt (library metric round value)."
} >"$out/README.md"
cat "$out/README.md"
