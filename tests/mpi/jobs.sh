#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# MPI jobs on weft, started by the MPIs' own launchers, as a user would:
#   jobs.sh BUILD SANITIZER one_host   4 ranks on this host
#   jobs.sh BUILD SANITIZER hosts2     2 x 2 ranks on two "hosts"
#   jobs.sh BUILD SANITIZER hosts3     3 x 2 ranks on three
# "Hosts" are network namespaces (tests/netns/netns.sh); the launchers reach
# them through ns_rsh.sh, an rsh stand-in: MPICH's Hydra with -launcher ssh
# -launcher-exec, Open MPI's rsh launcher with plm_rsh_agent. Each job runs
# tests/ucp/mpi_suite.c (every message checked byte for byte) under
#   - MPICH (ch4:ucx: weft's UCP face, the linked provider below it),
#   - Open MPI with pml ucx (the UCP face),
#   - Open MPI with pml cm + mtl ofi (weft's libfabric; no provider named:
#     fi_getinfo's first RDM entry is the linked provider). Debian's
#     openmpi-mca-params.conf turns mtl ofi off; the command line turns it
#     on. Under pml cm, Open MPI 4.1's one-sided calls need an osc component
#     that Debian's settings turn off: the rma section fails the same way
#     over Debian's libfabric (MPI_Win_allocate: invalid window, then
#     SIGSEGV), so that run leaves it out.
# Every job also proves the paths: with FI_LOG_LEVEL=info the linked
# provider logs the path each peer's address chose ("host H: peer N at
# fi_lnx://P;... goes over shm|tcp"); a peer goes over shm exactly when its
# host P is the rank's own H, and a job across hosts uses both paths.
# Exit 77 (SKIP) with the reason where it cannot run.
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
san=${2:-}
group=${3:?group}
here=$(cd "$(dirname "$0")" && pwd)
lib=$build/lib
bin=$build/tests/ucp
tmp=$(mktemp -d /tmp/weft-mpi-jobs.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

[ -n "$san" ] && skip "Debian's MPICH and Open MPI are not instrumented for $san"
command -v mpiexec.mpich >/dev/null || skip "mpich is not installed"
command -v mpirun.openmpi >/dev/null || skip "openmpi-bin is not installed"
for f in "$bin/mpi_suite_mpich" "$bin/mpi_suite_openmpi" "$lib/libfabric.so.1" "$lib/libucp.so.0"; do
  [ -e "$f" ] || skip "$f is not built in this configuration"
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

all_sections=7
no_rma="pt2pt anysource sync cancel datatype collectives"

. "$here/job_check.sh"

log_env=(FI_LOG_LEVEL=info FI_LOG_PROV=lnx)

one_host() {
  local log=$tmp/job.log
  env LD_LIBRARY_PATH=$lib "${log_env[@]}" timeout 120 mpiexec.mpich -n 4 "$bin/mpi_suite_mpich" >"$log" 2>&1 ||
    { tail -40 "$log"; fail "MPICH, 4 ranks on one host: rc $?"; }
  check "MPICH ch4:ucx, 4 ranks on one host" "$log" $all_sections 1
  local common=(--oversubscribe -np 4 -x LD_LIBRARY_PATH=$lib -x FI_LOG_LEVEL=info -x FI_LOG_PROV=lnx)
  timeout 120 mpirun.openmpi "${common[@]}" --mca pml ucx --mca osc ucx --mca pml_ucx_tls any \
    --mca pml_ucx_devices any --mca osc_ucx_tls any --mca osc_ucx_devices any --mca btl self \
    "$bin/mpi_suite_openmpi" >"$log" 2>&1 || { tail -40 "$log"; fail "Open MPI pml ucx, one host"; }
  check "Open MPI pml ucx, 4 ranks on one host" "$log" $all_sections 1
  # shellcheck disable=SC2086
  timeout 120 mpirun.openmpi "${common[@]}" --mca pml cm --mca mtl ofi --mca btl self,vader \
    "$bin/mpi_suite_openmpi" $no_rma >"$log" 2>&1 || { tail -40 "$log"; fail "Open MPI pml cm + mtl ofi, one host"; }
  check "Open MPI pml cm + mtl ofi, 4 ranks on one host (rma left out: see above)" "$log" 6 1
}

# Runs in netns.sh's environment: WEFT_NS_HOSTS, WEFT_NS_i, WEFT_ADDR_i.
across_hosts() {
  local n=$WEFT_NS_HOSTS ranks=$((2 * WEFT_NS_HOSTS)) hosts="" ohosts="" i log=$tmp/job.log
  for ((i = 1; i <= n; i++)); do
    local a="WEFT_ADDR_$i"
    hosts+="${hosts:+,}${!a}:2"
  done
  ohosts=$hosts
  local rsh=$here/ns_rsh.sh
  # mpiexec and mpirun run on the first host; their daemons reach the
  # others through ns_rsh.sh.
  export WEFT_NS_TMP=$tmp
  mkdir -p "$tmp/$WEFT_NS_1"
  ip netns exec "$WEFT_NS_1" env TMPDIR="$tmp/$WEFT_NS_1" LD_LIBRARY_PATH="$lib" timeout 150 mpiexec.mpich -launcher ssh \
    -launcher-exec "$rsh" -hosts "$hosts" -n $ranks -genv LD_LIBRARY_PATH "$lib" -genv FI_LOG_LEVEL info \
    -genv FI_LOG_PROV lnx "$bin/mpi_suite_mpich" >"$log" 2>&1 ||
    { tail -40 "$log"; fail "MPICH, $n x 2 ranks"; }
  check "MPICH ch4:ucx, $n x 2 ranks on $n hosts" "$log" $all_sections "$n"
  local common=(--mca plm_rsh_agent "$rsh" --host "$ohosts" -np $ranks --mca routed direct
    --mca oob_tcp_if_include 10.250.0.0/24 -x LD_LIBRARY_PATH="$lib" -x WEFT_NS_HOSTS
    -x FI_LOG_LEVEL=info -x FI_LOG_PROV=lnx -x WEFT_NS_TMP)
  ip netns exec "$WEFT_NS_1" env TMPDIR="$tmp/$WEFT_NS_1" LD_LIBRARY_PATH="$lib" timeout 150 mpirun.openmpi "${common[@]}" \
    --mca pml ucx --mca osc ucx --mca pml_ucx_tls any --mca pml_ucx_devices any --mca osc_ucx_tls any \
    --mca osc_ucx_devices any --mca btl self "$bin/mpi_suite_openmpi" >"$log" 2>&1 ||
    { tail -40 "$log"; fail "Open MPI pml ucx, $n x 2 ranks"; }
  check "Open MPI pml ucx, $n x 2 ranks on $n hosts" "$log" $all_sections "$n"
  # shellcheck disable=SC2086
  ip netns exec "$WEFT_NS_1" env TMPDIR="$tmp/$WEFT_NS_1" LD_LIBRARY_PATH="$lib" timeout 150 mpirun.openmpi "${common[@]}" \
    --mca pml cm --mca mtl ofi --mca btl self,vader "$bin/mpi_suite_openmpi" $no_rma >"$log" 2>&1 ||
    { tail -40 "$log"; fail "Open MPI pml cm + mtl ofi, $n x 2 ranks"; }
  check "Open MPI pml cm + mtl ofi, $n x 2 ranks on $n hosts (rma left out: see above)" "$log" 6 "$n"
}

case $group in
one_host) one_host ;;
hosts2 | hosts3)
  export -f across_hosts check skip fail
  export lib bin tmp here all_sections no_rma
  bash "$here/../netns/netns.sh" -n "${group#hosts}" -- bash -c across_hosts
  exit $?
  ;;
*) fail "unknown group $group" ;;
esac
