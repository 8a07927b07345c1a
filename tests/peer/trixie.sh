#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Debian 13's programs on weft's libraries, run unchanged in the Debian 13
# root that trixie_root.sh makes and keeps (with weft's build folder mounted
# at its own path, LD_LIBRARY_PATH=BUILD/lib):
#   trixie.sh BUILD SOURCE SANITIZER GROUP
#     root          makes the root (trixie_root.sh make), if not made yet
#     symbols       every ucp_/ucs_/ucm_/uct_ symbol that Debian 13's MPICH
#                   4.2.1, Open MPI 5.0.7 (libmpi, libopen-pal, liboshmem)
#                   and UCX 1.18's ucx_info and ucx_perftest import (data
#                   objects included) is exported by weft's libraries
#     ucx_tools     ucx_info -v, -d, -c, -b and ucx_perftest's UCP tests
#                   (tag_lat, tag_bw, ucp_put_lat, ucp_put_bw, ucp_get,
#                   ucp_am_lat, stream_lat: server and client on loopback)
#                   of Debian 12 (this machine) and of Debian 13 (the root);
#                   a UCT test answers "not supported" and exits cleanly
#     mpi_one_host  tests/ucp/mpi_suite.c built with Debian 13's mpicc:
#                   MPICH 4.2.1 (ch4:ucx) by mpiexec.mpich and Open MPI 5.0.7
#                   with pml ucx by mpirun (PRRTE), 4 ranks on one host
#     mpi_hosts2    the same, 2 x 2 ranks on two network-namespace hosts
#                   (tests/netns/netns.sh; the launchers reach the second
#                   host through tests/mpi/ns_rsh.sh)
#     mpi_ofi       Open MPI 5.0.7 with pml cm + mtl ofi (no provider named),
#                   4 ranks on one host and 2 x 2 on two, over weft's
#                   libfabric. Debian 13's libmpi and libopen-pal bind
#                   fi_getinfo & co. at FABRIC_1.0 to 1.5 (not libfabric 2's
#                   FABRIC_1.8): it SKIPs if weft's libfabric.so.1 lacks a
#                   version they require
# Each job checks its data (every section of mpi_suite.c), that weft's
# libucp and libfabric were mapped, and, with the linked provider's log,
# that each peer took shm exactly when it shares the rank's host.
# Exit 77 (SKIP) with the reason where it cannot run: a sanitizer build
# (Debian's programs are not instrumented), no root, no Debian registry.
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
src=$(cd "${2:?source dir}" && pwd)
san=${3:-}
group=${4:?group}
here=$src/tests/peer
lib=$build/lib
out=$build/tests/peer/trixie   # programs built inside the root
jobdir=$out/$group             # this test's job log and the ranks' stderr
root_sh=$here/trixie_root.sh

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }

[ -n "$san" ] && skip "Debian 13's MPICH, Open MPI and UCX tools are not instrumented for $san"
for l in libfabric.so.1 libucp.so.0 libucs.so.0 libucm.so.0 libuct.so.0; do
  [ -e "$lib/$l" ] || skip "$lib/$l is not built in this configuration"
done
start=$SECONDS
bash "$root_sh" make
rc=$?
[ $rc -eq 0 ] || exit $rc
if [ "$group" = root ]; then
  echo "ok: the Debian 13 root is at $(bash "$root_sh" path) ($((SECONDS - start)) s here)"
  exit 0
fi
root=$(bash "$root_sh" path)
# Runs a command in the root with the build folder and the tests mounted.
in_root() { bash "$root_sh" run -b "$build" -b "$src/tests" -- "$@"; }

. "$src/tests/mpi/job_check.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# ------------------------------------------------------------------ symbols
symbols() {
  local all c need miss n=0 bad=0
  all=$(for l in libucp libucs libucm libuct; do
    nm -D --defined-only "$lib/$l.so.0" | awk '$2 ~ /^[TWBDGRSV]$/ {print $3}'
  done | sort -u)
  local L=$root/usr/lib/x86_64-linux-gnu
  for c in "$L/libmpich.so.12" "$L/libmpi.so.40" "$L/libopen-pal.so.80" "$L/liboshmem.so.40" \
    "$root/usr/bin/ucx_info" "$root/usr/bin/ucx_perftest"; do
    [ -e "$c" ] || fail "$c is missing from the root"
    n=$((n + 1))
    need=$( (nm -D --undefined-only "$c" | awk '{print $2}'; nm -D --defined-only "$c" | awk '$2 ~ /^[BD]$/ {print $3}') |
      grep -E '^(ucp|ucs|ucm|uct)_' | sed 's/@.*//' | sort -u)
    miss=$(comm -23 <(echo "$need") <(echo "$all"))
    if [ -n "$miss" ]; then
      echo "FAIL: ${c#"$root"} imports what weft does not export:"; echo "$miss"; bad=1
    fi
  done
  [ $bad -eq 0 ] || exit 1
  ok "$n of Debian 13's programs and libraries: every UCX symbol they import is exported by weft"
}

# ---------------------------------------------------------------- ucx tools
# Runs inside the root or here: ucx_info's four printouts, then every UCP
# test of ucx_perftest, server and client on loopback, then one UCT test.
# Prints "tools-ok" last when all passed.
# Starts a ucx_perftest server on a port and waits (20 s at most) until it
# listens (/proc/net/tcp: its output is buffered, and a probe connection
# would be taken for the client), so that the client is not refused on a
# busy machine.
perf_server() {  # out port args...
  local out=$1 port=$2 i hex
  shift 2
  hex=$(printf '%04X' "$port")
  timeout 60 ucx_perftest "$@" -p "$port" >"$out" 2>&1 &
  spid=$!
  for ((i = 0; i < 200; i++)); do
    awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { found = 1 } END { exit !found }' \
      /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

tools_here() {
  local lib=$1 tag=$2 port=$3 o rc t spid src n
  export LD_LIBRARY_PATH=$lib
  # Debian 13's ucx_perftest is built with MPI and starts in MPI mode
  # unless told otherwise.
  local mode=()
  ucx_perftest -h 2>&1 | grep -q -- '-P <0|1>' && mode=(-P 0)
  o=$(ucx_info -v 2>&1) || { echo "$o"; echo "FAIL: $tag ucx_info -v"; return 1; }
  echo "$o" | sed "s/^/$tag ucx_info -v: /"
  if grep -q "Library path" <<<"$o"; then
    grep -q "Library path: $lib/libucs.so" <<<"$o" || { echo "FAIL: $tag ucx_info -v: not weft's libucs"; return 1; }
  fi
  o=$(ucx_info -d 2>&1) || { echo "$o"; echo "FAIL: $tag ucx_info -d"; return 1; }
  echo "$o" | grep -E "Memory domain|Component|Transport|Device|Type" | sed "s/^/$tag ucx_info -d: /"
  grep -q "Transport: shm" <<<"$o" && grep -q "Device: memory" <<<"$o" && grep -q "Transport: tcp" <<<"$o" ||
    { echo "$o"; echo "FAIL: $tag ucx_info -d does not list weft's shm and tcp"; return 1; }
  o=$(ucx_info -c 2>&1) || { echo "$o"; echo "FAIL: $tag ucx_info -c"; return 1; }
  grep -q "^UCX_TLS=" <<<"$o" || { echo "$o"; echo "FAIL: $tag ucx_info -c does not print weft's UCX_TLS"; return 1; }
  o=$(ucx_info -b 2>&1) || { echo "$o"; echo "FAIL: $tag ucx_info -b"; return 1; }
  grep -q "^#define" <<<"$o" || { echo "$o"; echo "FAIL: $tag ucx_info -b printed no build configuration"; return 1; }
  echo "$tag ucx_info -v -d -c -b: ok"
  for t in tag_lat tag_bw ucp_put_lat ucp_put_bw ucp_get ucp_am_lat stream_lat; do
    port=$((port + 1))
    perf_server "/tmp/server.$t" $port "${mode[@]}" -t $t
    # Few iterations: two polling processes share the machine's cores.
    case $t in *_bw | ucp_get) n=2000 ;; *) n=300 ;; esac
    o=$(timeout 60 ucx_perftest "${mode[@]}" 127.0.0.1 -p $port -t $t -n $n -s 64 2>&1)
    rc=$?
    wait $spid
    src=$?
    if [ $rc -ne 0 ] || [ $src -ne 0 ] || ! grep -q "Final:" <<<"$o"; then
      echo "$o"; cat "/tmp/server.$t"; echo "FAIL: $tag ucx_perftest -t $t: client rc $rc, server rc $src"; return 1
    fi
    echo "$tag ucx_perftest -t $t: $(grep 'Final:' <<<"$o" | tr -s ' ')"
  done
  # UCT: weft's interfaces advertise no operation; both sides stop cleanly
  # at the capability check.
  port=$((port + 1))
  perf_server /tmp/server.uct $port "${mode[@]}" -t am_lat -x shm -d memory
  o=$(timeout 30 ucx_perftest "${mode[@]}" 127.0.0.1 -p $port -t am_lat -x shm -d memory 2>&1)
  rc=$?
  wait $spid
  src=$?
  # A clean failure: an exit status (ucx_perftest's -1 is 255), not a
  # timeout (124) or a signal (128 + n).
  if [ $rc -eq 0 ] || [ $rc -eq 124 ] || { [ $rc -gt 128 ] && [ $rc -ne 255 ]; } || [ $src -eq 0 ] ||
    [ $src -eq 124 ] || { [ $src -gt 128 ] && [ $src -ne 255 ]; } || ! grep -q "Unsupported operation" <<<"$o"; then
    echo "$o"; cat /tmp/server.uct
    echo "FAIL: $tag ucx_perftest -t am_lat -x shm (UCT): client rc $rc, server rc $src, expected 'Unsupported operation'"
    return 1
  fi
  echo "$tag ucx_perftest -t am_lat -x shm -d memory (UCT): rc $rc/$src, $(grep -m1 'does not support' <<<"$o" | sed 's/^\[[0-9]*\] //')"
  echo tools-ok
}

ucx_tools() {
  local o
  command -v ucx_info >/dev/null && command -v ucx_perftest >/dev/null || skip "ucx-utils is not installed here"
  o=$(tools_here "$lib" "debian12" 14100 2>&1)
  echo "$o"
  [ "$(tail -1 <<<"$o")" = tools-ok ] || fail "Debian 12's UCX tools"
  o=$(in_root bash -c "$(declare -f perf_server tools_here); tools_here '$lib' debian13 14200" 2>&1)
  echo "$o"
  [ "$(tail -1 <<<"$o")" = tools-ok ] || fail "Debian 13's UCX tools"
  ok "UCX 1.13's and 1.18's ucx_info and ucx_perftest on weft"
}

# --------------------------------------------------------------------- MPIs
# mpi_suite.c built with each of Debian 13's compiler wrappers, in the root.
build_suite() {
  mkdir -p "$out" "$jobdir"
  # One build at a time: ctest may run the MPI tests side by side.
  exec 7>"$out/.build.lock"
  flock 7
  cmp -s "$src/tests/ucp/mpi_suite.c" "$out/mpi_suite.c" || cp "$src/tests/ucp/mpi_suite.c" "$out/mpi_suite.c"
  local mpi
  for mpi in mpich openmpi; do
    if [ ! -x "$out/mpi_suite_$mpi" ] || [ "$out/mpi_suite.c" -nt "$out/mpi_suite_$mpi" ]; then
      in_root mpicc.$mpi -O1 -Wno-stringop-overflow -o "$out/mpi_suite_$mpi" "$out/mpi_suite.c" ||
        fail "mpicc.$mpi (Debian 13) cannot build mpi_suite.c"
    fi
  done
  exec 7>&-
}

# Checks a job: its sections, weft's libraries mapped, the paths.
check_job() {  # label log sections hosts
  grep -q "mapped: $lib/libucp.so\|mapped: $lib/libfabric.so" "$2" || { tail -40 "$2"; fail "$1: weft's libraries were not mapped"; }
  grep -q "mapped: /usr/lib/x86_64-linux-gnu/libuc[ps]" "$2" && { grep mapped "$2"; fail "$1: Debian's UCX was mapped"; }
  check "$@"
}

# The launchers forward the ranks' stderr in pieces that may split lines:
# each rank writes its own (the linked provider's log) into a file of
# $jobdir/err, added to the job's log after it.
# shellcheck disable=SC2016
rank_wrap=(sh -c 'exec "$0" "$@" 2>>"$WEFT_RANK_ERR/rank.$$"')
rank_log() {  # log
  cat "$jobdir"/err/rank.* >>"$1" 2>/dev/null
  rm -rf "$jobdir/err"
  mkdir -p "$jobdir/err"
}

ompi_ucx=(--mca pml ucx --mca osc ucx --mca pml_ucx_tls any --mca pml_ucx_devices any --mca osc_ucx_tls any
  --mca osc_ucx_devices any --mca btl self)
ompi_ofi=(--mca pml cm --mca mtl ofi --mca btl self,sm)
no_rma="pt2pt anysource sync cancel datatype collectives"

one_host() {  # which: ucx | ofi
  local log=$jobdir/job.log
  local env=(LD_LIBRARY_PATH=$lib FI_LOG_LEVEL=info FI_LOG_PROV=lnx MPI_SUITE_MAPS=1 WEFT_RANK_ERR=$jobdir/err)
  local common=(--oversubscribe -np 4 -x LD_LIBRARY_PATH=$lib -x FI_LOG_LEVEL=info -x FI_LOG_PROV=lnx -x MPI_SUITE_MAPS=1
    -x WEFT_RANK_ERR=$jobdir/err)
  if [ "$1" = ucx ]; then
    rank_log /dev/null
    in_root env "${env[@]}" timeout 120 mpiexec.mpich -n 4 "${rank_wrap[@]}" "$out/mpi_suite_mpich" >"$log" 2>&1 ||
      { rank_log "$log"; tail -40 "$log"; fail "MPICH 4.2.1, 4 ranks on one host"; }
    rank_log "$log"
    check_job "MPICH 4.2.1 ch4:ucx, 4 ranks on one host" "$log" 7 1
    rank_log /dev/null
    in_root timeout 120 mpirun "${common[@]}" "${ompi_ucx[@]}" "${rank_wrap[@]}" "$out/mpi_suite_openmpi" >"$log" 2>&1 ||
      { rank_log "$log"; tail -40 "$log"; fail "Open MPI 5.0.7 pml ucx, 4 ranks on one host"; }
    rank_log "$log"
    check_job "Open MPI 5.0.7 pml ucx, 4 ranks on one host" "$log" 7 1
  else
    # shellcheck disable=SC2086
    rank_log /dev/null
    in_root timeout 120 mpirun "${common[@]}" "${ompi_ofi[@]}" "${rank_wrap[@]}" "$out/mpi_suite_openmpi" $no_rma \
      >"$log" 2>&1 || { rank_log "$log"; tail -40 "$log"; fail "Open MPI 5.0.7 pml cm + mtl ofi, 4 ranks on one host"; }
    rank_log "$log"
    check_job "Open MPI 5.0.7 pml cm + mtl ofi, 4 ranks on one host (rma left out)" "$log" 6 1
  fi
}

# In netns.sh's environment (WEFT_NS_HOSTS, WEFT_NS_i, WEFT_ADDR_i): the
# launchers start on the first host; their daemons reach the second through
# ns_rsh.sh, run in the root (nsenter into /run/netns).
across_hosts() {  # which: ucx | ofi
  local n=$WEFT_NS_HOSTS ranks=$((2 * WEFT_NS_HOSTS)) hosts="" i log=$jobdir/job.log
  for ((i = 1; i <= n; i++)); do
    local a="WEFT_ADDR_$i"
    hosts+="${hosts:+,}${!a}:2"
  done
  # Each host has a host name of its own (WEFT_NS_UTS): PRRTE tells hosts
  # apart by name, and every namespace shares this machine's otherwise.
  local rsh=$src/tests/mpi/ns_rsh.sh nsenv=(WEFT_NS_HOSTS=$n WEFT_NS_TMP=/tmp/ns WEFT_NS_UTS=1)
  for ((i = 1; i <= n; i++)); do
    local a="WEFT_ADDR_$i" b="WEFT_NS_$i"
    nsenv+=("WEFT_ADDR_$i=${!a}" "WEFT_NS_$i=${!b}")
  done
  # shellcheck disable=SC2016
  local run=(ip netns exec "$WEFT_NS_1" unshare --uts sh -c 'echo "$0" >/proc/sys/kernel/hostname && exec "$@"'
    "$WEFT_NS_1" bash "$root_sh" run -b "$build" -b "$src/tests" -- env "${nsenv[@]}"
    TMPDIR=/tmp/ns/$WEFT_NS_1 LD_LIBRARY_PATH="$lib")
  local xs=(-x LD_LIBRARY_PATH="$lib" -x FI_LOG_LEVEL=info -x FI_LOG_PROV=lnx -x MPI_SUITE_MAPS=1 -x WEFT_NS_HOSTS
    -x WEFT_NS_TMP -x WEFT_RANK_ERR="$jobdir/err")
  # PRRTE finds too few slots on these hosts for --host's counts (its
  # mapper), so the map says 2 per host.
  local common=(--mca plm_rsh_agent "$rsh" --host "$hosts" -np $ranks --map-by ppr:2:node:OVERSUBSCRIBE
    --mca oob_tcp_if_include 10.250.0.0/24 "${xs[@]}")
  if [ "$1" = ucx ]; then
    rank_log /dev/null
    "${run[@]}" bash -c 'mkdir -p "$TMPDIR" && exec "$@"' mpiexec timeout 150 mpiexec.mpich -launcher ssh \
      -launcher-exec "$rsh" -hosts "$hosts" -n $ranks -genv LD_LIBRARY_PATH "$lib" -genv FI_LOG_LEVEL info \
      -genv FI_LOG_PROV lnx -genv MPI_SUITE_MAPS 1 -genv WEFT_RANK_ERR "$jobdir/err" "${rank_wrap[@]}" \
      "$out/mpi_suite_mpich" >"$log" 2>&1 || { rank_log "$log"; tail -40 "$log"; fail "MPICH 4.2.1, $n x 2 ranks"; }
    rank_log "$log"
    check_job "MPICH 4.2.1 ch4:ucx, $n x 2 ranks on $n hosts" "$log" 7 "$n"
    rank_log /dev/null
    "${run[@]}" bash -c 'mkdir -p "$TMPDIR" && exec "$@"' mpirun timeout 150 mpirun "${common[@]}" "${ompi_ucx[@]}" \
      "${rank_wrap[@]}" "$out/mpi_suite_openmpi" >"$log" 2>&1 ||
      { rank_log "$log"; tail -40 "$log"; fail "Open MPI 5.0.7 pml ucx, $n x 2 ranks"; }
    rank_log "$log"
    check_job "Open MPI 5.0.7 pml ucx, $n x 2 ranks on $n hosts" "$log" 7 "$n"
  else
    # shellcheck disable=SC2086
    rank_log /dev/null
    "${run[@]}" bash -c 'mkdir -p "$TMPDIR" && exec "$@"' mpirun timeout 150 mpirun "${common[@]}" "${ompi_ofi[@]}" \
      "${rank_wrap[@]}" "$out/mpi_suite_openmpi" $no_rma >"$log" 2>&1 ||
      { rank_log "$log"; tail -40 "$log"; fail "Open MPI 5.0.7 pml cm + mtl ofi, $n x 2 ranks"; }
    rank_log "$log"
    check_job "Open MPI 5.0.7 pml cm + mtl ofi, $n x 2 ranks on $n hosts (rma left out)" "$log" 6 "$n"
  fi
}

hosts2() {  # which
  export -f across_hosts check check_job rank_log fail skip
  export build src lib out jobdir root_sh no_rma
  export ompi_ucx_s="${ompi_ucx[*]}" ompi_ofi_s="${ompi_ofi[*]}"
  # shellcheck disable=SC2016
  bash "$src/tests/netns/netns.sh" -n 2 -- bash -c 'ompi_ucx=($ompi_ucx_s); ompi_ofi=($ompi_ofi_s)
    rank_wrap=(sh -c '"'"'exec "$0" "$@" 2>>"$WEFT_RANK_ERR/rank.$$"'"'"'); across_hosts '"$1"
}

case $group in
  symbols) symbols ;;
  ucx_tools) ucx_tools ;;
  mpi_one_host) build_suite; one_host ucx ;;
  mpi_hosts2) build_suite; hosts2 ucx ;;
  mpi_ofi)
    L=$root/usr/lib/x86_64-linux-gnu
    need=$(objdump -T "$L/libmpi.so.40" "$L/libopen-pal.so.80" | grep -o 'FABRIC_[0-9.]*' | sort -u)
    have=$(objdump -p "$lib/libfabric.so.1" | sed -n '/Version definitions/,/Version References/p' |
      grep -o 'FABRIC_[0-9.]*' | sort -u)
    missing=$(comm -23 <(echo "$need") <(echo "$have") | tr '\n' ' ')
    [ -z "$missing" ] || skip "Open MPI 5.0.7 binds libfabric symbols at $missing, which weft's libfabric.so.1 does not define"
    build_suite; one_host ofi; hosts2 ofi ;;
  *) fail "unknown group $group" ;;
esac
