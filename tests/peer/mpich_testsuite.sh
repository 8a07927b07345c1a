#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# MPICH's own test suite (test/mpi of Debian 12's mpich 4.0.2 source
# package) over weft's UCP face and over Debian's UCX, test by test in one run:
#   mpich_testsuite.sh BUILD SANITIZER SELECTION MPI
#     SELECTION  ci    the tests listed in mpich_ci.list over weft and over
#                      real UCX, and (MPICH only) every other rma test over
#                      weft (real UCX takes 10-20 times weft's time on the
#                      rma tests of 3 to 8 ranks on a 2-core machine: all of
#                      rma over it does not fit CI; Open MPI 4.1's osc ucx
#                      fails 61 of them over real UCX as over weft)
#                full  basic, pt2pt, coll, rma, comm, group, attr, datatype,
#                      threads, topo, init, info (each directory's testlist)
#     MPI        mpich    Debian's MPICH (ch4:ucx), launched by mpiexec.mpich
#                openmpi  Debian's Open MPI with pml ucx and osc ucx, by
#                         mpirun.openmpi
# The suite is built against the MPI's own compiler wrapper once per machine
# and kept in WEFT_PEER_CACHE (default /var/cache/weft-peer). Each test runs
# as its testlist line says (ranks, arguments, environment, time limit),
# first over weft (LD_LIBRARY_PATH=BUILD/lib), then (unless
# WEFT_PEER_COMPARE=0) over real UCX; it passes
# as MPICH's runtests judges it: exit status 0 and "No Errors" the only output
# (resultTest=TestStatus and TestErrFatal: a nonzero exit status).
# A test fails weft only where real UCX passes it in the same run. A test
# that fails on both must be listed, with its reason, in
# mpich_both_fail.list; one that is not fails the run, as does every failure
# of weft's own; the CI selection does not run the listed ones. Tests marked
# xfail= are skipped, as runtests skips them.
# Environment: WEFT_PEER_ONLY (a regular expression over "dir/name"),
# WEFT_PEER_TIMEOUT (seconds for a test without timeLimit=, default 180 as in runtests),
# WEFT_PEER_COMPARE (1: run over real UCX too; 0: weft only).
# Exit 77 (SKIP) with the reason where it cannot run.
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
san=${2:-}
selection=${3:?selection: ci or full}
mpi=${4:?mpi: mpich or openmpi}
here=$(cd "$(dirname "$0")" && pwd)
lib=$build/lib
cache=${WEFT_PEER_CACHE:-/var/cache/weft-peer}
default_limit=${WEFT_PEER_TIMEOUT:-180}
only=${WEFT_PEER_ONLY:-}
compare=${WEFT_PEER_COMPARE:-1}
version=4.0.2
full_dirs="basic pt2pt coll rma comm group attr datatype threads topo init info"

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

[ -n "$san" ] && skip "Debian's MPICH and Open MPI are not instrumented for $san"
case $mpi in
mpich) cc=mpicc.mpich launcher=mpiexec.mpich ;;
openmpi) cc=mpicc.openmpi launcher=mpirun.openmpi ;;
*) fail "unknown MPI $mpi" ;;
esac
command -v $cc >/dev/null || skip "$cc is not installed"
command -v $launcher >/dev/null || skip "$launcher is not installed"
[ -e "$lib/libucp.so.0" ] || skip "$lib/libucp.so.0 is not built in this configuration"
case $selection in ci | full) ;; *) fail "unknown selection $selection" ;; esac

# ---------------------------------------------------------------- the suite
# One setup at a time per cache (ctest may run the two MPIs side by side).
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
tarball=$("$here/fetch_source.sh" mpich bookworm "$cache") || fail "cannot fetch mpich's source package"
src=$cache/mpich-$version/test/mpi
if [ ! -f "$src/.extracted" ]; then
  rm -rf "$cache/mpich-$version"
  tar -C "$cache" -xJf "$tarball" "mpich-$version/test/mpi" || fail "cannot unpack $tarball"
  touch "$src/.extracted"
fi
# The MPI's compiler wrappers under the plain names configure looks for.
wrappers=$cache/mpi-$mpi
mkdir -p "$wrappers/bin"
ln -sf "$(command -v $cc)" "$wrappers/bin/mpicc"
ln -sf "$(command -v $launcher)" "$wrappers/bin/mpiexec"
obj=$cache/mpich-$version-test-$mpi
# Open MPI's library lacks the MPI-1 calls MPI-3.0 removed, which the suite
# still calls: mpi1_compat.c provides them over their replacements.
compat=()
if [ "$mpi" = openmpi ]; then
  compat=(CFLAGS="-O2 -DOMPI_OMIT_MPI1_COMPAT_DECLS=0" LIBS="$obj/libmpi1compat.a")
fi
stamp=$(md5sum <"$here/mpi1_compat.c" | cut -c1-12)
if [ ! -f "$obj/.configured" ] || [ "$(cat "$obj/.configured")" != "$stamp" ]; then
  rm -rf "$obj"
  mkdir -p "$obj"
  echo "configuring MPICH's test suite for $mpi in $obj"
  if [ "$mpi" = openmpi ]; then
    $cc -O2 -DOMPI_OMIT_MPI1_COMPAT_DECLS=0 -c "$here/mpi1_compat.c" -o "$obj/mpi1_compat.o" &&
      ar rcs "$obj/libmpi1compat.a" "$obj/mpi1_compat.o" || fail "mpi1_compat.c did not build"
  fi
  (cd "$obj" && env "${compat[@]}" "$src/configure" --with-mpi="$wrappers" --disable-fortran --disable-cxx \
    --disable-romio --disable-spawn >configure.log 2>&1) || { tail -20 "$obj/configure.log"; fail "configure failed"; }
  echo "$stamp" >"$obj/.configured"
fi

# Every test line of a directory's testlist (a line naming a subdirectory
# is read recursively), as "dir name np options...".
expand() {
  local d=$1 f name rest
  f=$obj/$d/testlist
  [ -f "$f" ] || f=$src/$d/testlist
  [ -f "$f" ] || return 0  # basic has no testlist: MPICH's runtests runs none of it
  while read -r name rest; do
    [[ -z "$name" || "$name" == \#* ]] && continue
    if [ -z "$rest" ] && [ -d "$src/$d/$name" ]; then
      expand "$d/$name"
    else
      echo "$d $name $rest"
    fi
  done <"$f"
}
list=$(mktemp /tmp/weft-mpich-suite.XXXXXX)
trap 'rm -f "$list"' EXIT
if [ "$selection" = full ]; then
  for d in $full_dirs; do expand "$d"; done >"$list"
else
  {
    [ "$mpi" = mpich ] && expand rma
    # every line of mpich_ci.list ("dir name"): that test's lines, all of them
    grep -v '^\s*#' "$here/mpich_ci.list" | while read -r d name; do
      [ -n "$d" ] || continue
      expand "$d" | awk -v n="$name" '$2 == n'
    done
  } | awk '!seen[$0]++' >"$list"
fi
[ -n "$only" ] && { grep -E "^[^ ]+ [^ ]+" "$list" | awk -v re="$only" '($1 "/" $2) ~ re' >"$list.only"; mv "$list.only" "$list"; }

# Builds each program the selection runs (each directory's library first).
make -C "$obj/util" -j"$(nproc)" >"$obj/make-util.log" 2>&1 || { tail -20 "$obj/make-util.log"; fail "util did not build"; }
make -C "$obj/dtpools" -j"$(nproc)" >"$obj/make-dtpools.log" 2>&1 || { tail -20 "$obj/make-dtpools.log"; fail "dtpools did not build"; }
for d in $(cut -d' ' -f1 "$list" | sort -u); do
  targets=$(awk -v d="$d" '$1 == d { print $2 }' "$list" | sort -u)
  # shellcheck disable=SC2086
  make -C "$obj/$d" -j"$(nproc)" -k $targets >"$obj/make-${d//\//-}.log" 2>&1 || true
done
flock -u 9

# ---------------------------------------------------------------- running
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ompi_args=(--oversubscribe --mca pml ucx --mca osc ucx --mca pml_ucx_tls any --mca pml_ucx_devices any
  --mca osc_ucx_tls any --mca osc_ucx_devices any --mca btl self)

# run_one over dir name np limit out -- args : runs one test in a session of
# its own (every rank is killed when the limit passes); prints the status.
run_one() {
  local over=$1 d=$2 name=$3 np=$4 limit=$5 out=$6
  shift 6
  local envs=() args=() o
  for o in "$@"; do
    case $o in
    arg=*) args+=("${o#arg=}") ;;
    env=*) envs+=("${o#env=}") ;;
    esac
  done
  local ldp=
  [ "$over" = weft ] && ldp=$lib
  local cmd
  if [ "$mpi" = mpich ]; then
    cmd=(mpiexec.mpich -n "$np")
  else
    cmd=(mpirun.openmpi "${ompi_args[@]}" -np "$np")
    [ -n "$ldp" ] && cmd+=(-x LD_LIBRARY_PATH)
    for o in "${envs[@]}"; do cmd+=(-x "${o%%=*}"); done
  fi
  (
    cd "$obj/$d" || exit 127
    if [ -n "$ldp" ]; then export LD_LIBRARY_PATH=$ldp; else unset LD_LIBRARY_PATH; fi
    export MPIEXEC_TIMEOUT=$limit
    for o in "${envs[@]}"; do export "${o?}"; done
    exec setsid "${cmd[@]}" "./$name" "${args[@]}"
  ) >"$out" 2>&1 </dev/null &
  local pid=$! t=0 rc
  # The launcher ends the job at the limit (MPIEXEC_TIMEOUT, as runtests
  # sets it; init/timeout expects that); this is the backstop.
  while kill -0 $pid 2>/dev/null; do
    sleep 0.1
    t=$((t + 1))
    if [ $t -ge $((limit * 10 + 150)) ]; then
      kill -TERM -- -$pid 2>/dev/null
      sleep 1
      kill -KILL -- -$pid 2>/dev/null
      wait $pid 2>/dev/null
      pkill -KILL -f "^\./$name( |$)" 2>/dev/null
      echo "timeout after ${limit}s" >>"$out"
      echo 124
      return
    fi
  done
  wait $pid
  rc=$?
  echo $rc
}

# judge rc out resultTest: 0 when the test passed as runtests judges it.
judge() {
  local rc=$1 out=$2 rt=$3
  case $rt in
  TestStatus | TestErrFatal) [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] ;;
  *)
    [ "$rc" -eq 0 ] || return 1
    grep -Eq '^\s*No [Ee]rrors\s*$' "$out" || return 1
    ! grep -Evq '^\s*(No [Ee]rrors|Test Passed)\s*$' "$out"
    ;;
  esac
}

# timed_out rc out: the launcher (MPIEXEC_TIMEOUT) or the backstop ended it.
timed_out() {
  [ "$1" = 124 ] || grep -Eq 'APPLICATION TIMED OUT|time limit for job execution has been reached' "$2"
}

both_list=$here/mpich_both_fail.list
results=$build/peer/mpich-$selection-$mpi.txt
logs=$build/peer/mpich-$selection-$mpi.logs
mkdir -p "$build/peer"
rm -rf "$logs"
mkdir -p "$logs"
: >"$results"
n=0 weft_pass=0 ucx_pass=0 weft_only_fail=0 both_fail=0 unlisted=0 skipped=0 listed=0 notbuilt=0 ucx_only_fail=0 n_u=0
start=$(date +%s)
echo "MPICH's test suite ($selection, $mpi): $(wc -l <"$list") test lines; weft | real UCX"
while read -r d name np opts; do
  # shellcheck disable=SC2086
  set -- $opts
  limit=$default_limit rt="" xfail=""
  for o in "$@"; do
    case $o in
    timeLimit=*) limit=${o#timeLimit=} ;;
    resultTest=*) rt=${o#resultTest=} ;;
    xfail=*) xfail=${o#xfail=} ;;
    esac
  done
  key="$d/$name $np${opts:+ $opts}"
  if [ -n "$xfail" ]; then
    skipped=$((skipped + 1))
    printf '%-60s skipped (xfail=%s)\n' "$key" "$xfail" >>"$results"
    continue
  fi
  if [ "$selection" = ci ] && grep -Fq "$mpi $key --" "$both_list" 2>/dev/null; then
    listed=$((listed + 1))
    printf '%-60s not run (fails over real UCX too: mpich_both_fail.list)\n' "$key" >>"$results"
    continue
  fi
  if [ ! -x "$obj/$d/$name" ]; then
    notbuilt=$((notbuilt + 1))
    printf '%-60s not built for %s\n' "$key" "$mpi" >>"$results"
    continue
  fi
  n=$((n + 1))
  # over real UCX too: the full selection, or a line of mpich_ci.list
  cmp_this=$compare
  if [ "$selection" = ci ] && [ "$compare" = 1 ] && ! grep -Eq "^$d $name\s*$" "$here/mpich_ci.list"; then
    cmp_this=0
  fi
  [ "$cmp_this" = 1 ] && n_u=$((n_u + 1))
  tag=$(printf '%04d' $n)-${d//\//-}-$name
  t0=$(date +%s.%N)
  rc_w=$(run_one weft "$d" "$name" "$np" "$limit" "$logs/$tag.weft" "$@")
  t1=$(date +%s.%N)
  if [ "$cmp_this" = 1 ]; then
    rc_u=$(run_one ucx "$d" "$name" "$np" "$limit" "$logs/$tag.ucx" "$@")
  else
    rc_u=- && echo "not run over real UCX in this selection" >"$logs/$tag.ucx"
  fi
  t2=$(date +%s.%N)
  judge "$rc_w" "$logs/$tag.weft" "$rt" && w=pass || w=FAIL
  [ $w != pass ] && timed_out "$rc_w" "$logs/$tag.weft" && w=TIMEOUT
  if [ "$cmp_this" = 1 ]; then
    judge "$rc_u" "$logs/$tag.ucx" "$rt" && u=pass || u=FAIL
    [ $u != pass ] && timed_out "$rc_u" "$logs/$tag.ucx" && u=TIMEOUT
  else
    u=-
  fi
  [ $w = pass ] && weft_pass=$((weft_pass + 1))
  [ $u = pass ] && ucx_pass=$((ucx_pass + 1))
  verdict=""
  if [ $w != pass ] && [ $u != FAIL ] && [ $u != TIMEOUT ]; then
    weft_only_fail=$((weft_only_fail + 1))
    verdict="  <- weft's failure"
  elif [ $w != pass ]; then
    both_fail=$((both_fail + 1))
    if grep -Fq "$mpi $key --" "$both_list" 2>/dev/null; then
      verdict="  (fails on both: listed)"
    else
      unlisted=$((unlisted + 1))
      verdict="  <- fails on both, not in mpich_both_fail.list"
    fi
  elif [ $u = FAIL ] || [ $u = TIMEOUT ]; then
    ucx_only_fail=$((ucx_only_fail + 1))
  fi
  printf '%-60s weft %-7s %6.2fs | ucx %-7s %6.2fs%s\n' "$key" $w "$(echo "$t1 - $t0" | bc)" $u \
    "$(echo "$t2 - $t1" | bc)" "$verdict" >>"$results"
  if [ -n "$verdict" ] && [ "$verdict" != "  (fails on both: listed)" ]; then
    echo "---- $key over weft (rc $rc_w):"
    tail -15 "$logs/$tag.weft"
    echo "---- $key over real UCX (rc $rc_u):"
    tail -8 "$logs/$tag.ucx"
  fi
done <"$list"
cat "$results"
echo
echo "MPICH's test suite, $selection selection, built with $mpi, $(($(date +%s) - start)) s:"
if [ "$compare" = 1 ]; then
  printf '  %-28s %6s %6s\n' "" weft UCX
  printf '  %-28s %6d %6d\n' "tests run" $n $n_u "passed" $weft_pass $ucx_pass "failed" $((n - weft_pass)) $((n_u - ucx_pass))
else
  printf '  %-28s %6s\n' "" weft "tests run" $n "passed" $weft_pass "failed" $((n - weft_pass))
fi
if [ "$compare" = 1 ]; then
  echo "  weft fails where UCX passes: $weft_only_fail; UCX fails where weft passes: $ucx_only_fail"
  echo "  both fail: $both_fail ($unlisted not in mpich_both_fail.list)"
else
  echo "  over weft only; weft's failures: $weft_only_fail"
fi
echo "  not run: $skipped xfail, $listed in mpich_both_fail.list; not built: $notbuilt"
echo "  each test's output: $logs"
[ $n -gt 0 ] || fail "no test ran"
[ $weft_only_fail -eq 0 ] && [ $unlisted -eq 0 ] || fail "see the lines marked <- above"
echo "PASS"
