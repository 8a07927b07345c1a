#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# libfabric 2.1's fabtests over weft's libfabric.so.1 and over Debian 13's
# libfabric 2.1 side by side, in the Debian 13 root (trixie_root.sh):
#   fabtests21.sh BUILD SOURCE SANITIZER SELECTION
#     SELECTION  ci    the tests of fabtests21_ci.list (from runfabtests.sh's
#                      unit, functional and short sets) with libfabric's
#                      exclude lists; `make test` runs it
#                full  every set runfabtests.sh has (unit, regression,
#                      functional, short, standard, complex, multinode),
#                      with and without libfabric's exclude lists; `make
#                      fabtests` runs it
# fabtests come from the fabtests/ folder of Debian 13's libfabric source
# package (its orig tarball, fetch_source.sh) and are built once per machine
# inside the root, with its gcc against its <rdma/*.h> 2.1 and its
# libfabric. The root has no make and no libtool: Debian 13's (apt-get
# download from the root's package lists) are unpacked beside the build, so
# the root itself is not changed. All of it is kept in
# WEFT_PEER_CACHE/fab21-fabtests (default /var/cache/weft-peer), mounted at
# its own path in the root; .built says it is complete. runfabtests.sh runs
# as it is, with python3 and ps of fabtests21_bin (the root has neither).
# Each run is runfabtests.sh in the root, server and client on 127.0.0.1,
# in namespaces of its own (network, pid, mounts, /dev/shm, /tmp): a host of
# its own, so no port, shared-memory name or process of another test is
# seen, and runfabtests.sh's clean-up kills only its own. The two libraries
# run side by side, provider after provider: shm, tcp, and the linked
# provider lnx (FI_LNX_PROV_LINKS=shm+tcp for both, as fi_lnx(7) of 2.1
# asks). "With the exclude list" is runfabtests.sh -f
# test_configs/PROV/PROV.exclude; 2.1 has none for lnx, which takes shm's.
# A test fails weft when it passes on Debian 13's libfabric and not on
# weft's, with the same provider and list; libfabric 2.1's lnx runs almost
# nothing (no fi_eq_open, no fi_getinfo with a node), so weft's lnx must
# pass what Debian 13's lnx or shm passes (fi_ubertest aside: its
# configuration names shm). One that is not weft's defect goes in
# fabtests21_known.list with its reason. Results: BUILD/peer/fabtests21-
# SELECTION.txt (each test: Debian's result, weft's) and each run's YAML in
# BUILD/peer/fabtests21-SELECTION/.
# Environment: WEFT_FABTESTS_PROVS (default "shm tcp lnx"; lnx needs shm),
# WEFT_FABTESTS_TIMEOUT (runfabtests.sh -T, the seconds a test may take;
# default 90 for ci, 180 for full).
# Exit 77 (SKIP) with the reason where it cannot run: a sanitizer build
# (Debian's programs are not instrumented), not root, no root can be made.
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
src=$(cd "${2:?source dir}" && pwd)
san=${3:-}
selection=${4:?selection: ci or full}
here=$src/tests/peer
lib=$build/lib
cache=${WEFT_PEER_CACHE:-/var/cache/weft-peer}
ft=$cache/fab21-fabtests
provs=${WEFT_FABTESTS_PROVS:-shm tcp lnx}
root_sh=$here/trixie_root.sh
# What the build is made of: another recipe builds again.
recipe=1

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

case $selection in
  ci) limit=${WEFT_FABTESTS_TIMEOUT:-90} ;;
  full) limit=${WEFT_FABTESTS_TIMEOUT:-180} ;;
  *) fail "unknown selection $selection" ;;
esac
[ -n "$san" ] && skip "Debian 13's libfabric and fabtests are not instrumented for $san"
[ "$(id -u)" -eq 0 ] || skip "the Debian 13 root needs root (chroot, namespaces)"
[ -e "$lib/libfabric.so.1" ] || skip "$lib/libfabric.so.1 is not built in this configuration"
if ! command -v unshare >/dev/null || ! command -v ip >/dev/null; then skip "unshare or ip is not installed"; fi
bash "$root_sh" make || exit $?
root=$(bash "$root_sh" path)
[ -e "$root/usr/include/rdma/fabric.h" ] || fail "$root has no libfabric-dev"

in_root() { bash "$root_sh" run -b "$ft" -b "$here" "$@"; }
root_env=(env -i PATH="$here/fabtests21_bin:$ft/tools/usr/bin:/usr/bin:/bin" HOME=/tmp LC_ALL=C)

# ------------------------------------------------------------------ the build
mkdir -p "$ft"
exec 9>"$ft/.lock"
flock 9
tarball=$(bash "$here/fetch_source.sh" libfabric trixie "$cache") || fail "cannot fetch libfabric's source package (trixie)"
stamp="$recipe $(basename "$tarball")"
if [ "$(cat "$ft/.built" 2>/dev/null)" != "$stamp" ]; then
  t0=$SECONDS
  echo "building fabtests 2.1 in the Debian 13 root, in $ft"
  rm -rf "${ft:?}/src" "$ft/obj" "$ft/install" "$ft/.built"
  mkdir -p "$ft/src" "$ft/debs" "$ft/tools"
  tar -C "$ft/src" --strip-components=2 -xJf "$tarball" --wildcards '*/fabtests' || fail "cannot unpack $tarball"
  # Debian 13's make and libtool, from the root's own package lists; apt
  # writes only into the cache folder.
  if ! ls "$ft"/debs/make_*.deb "$ft"/debs/libtool_*.deb >/dev/null 2>&1; then
    in_root -- "${root_env[@]}" sh -c "cd '$ft/debs' && apt-get -q -o Dir::Cache='$ft/apt' \
      -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o APT::Sandbox::User=root -o Debug::NoLocking=1 \
      download make libtool" >"$ft/debs.log" 2>&1 || { cat "$ft/debs.log"; fail "cannot fetch Debian 13's make and libtool"; }
  fi
  rm -rf "$ft/tools/usr"
  for d in "$ft"/debs/make_*.deb "$ft"/debs/libtool_*.deb; do
    in_root -- dpkg-deb -x "$d" "$ft/tools" || fail "cannot unpack $d"
  done
  # autogen.sh's autoreconf, with libtoolize's copies made by hand (its
  # paths are those of an installed libtool).
  log=$ft/build.log
  in_root -- "${root_env[@]}" sh -c "set -e; cd '$ft/src'; mkdir -p config
    cp '$ft/tools/usr/share/libtool/build-aux/ltmain.sh' config/
    ACLOCAL_PATH='$ft/tools/usr/share/aclocal' LIBTOOLIZE=true autoreconf -fi
    mkdir -p '$ft/obj'; cd '$ft/obj'
    '$ft/src/configure' --prefix='$ft/install' --disable-efa --disable-lpp
    make -j2; make install" >"$log" 2>&1 || { tail -30 "$log"; fail "fabtests did not build (log: $log)"; }
  [ -x "$ft/install/bin/runfabtests.sh" ] || fail "no runfabtests.sh in $ft/install/bin"
  echo "$stamp" >"$ft/.built"
  echo "fabtests 2.1 built in $((SECONDS - t0)) s"
fi
flock -u 9

# ------------------------------------------------------------------- the runs
out=$build/peer/fabtests21-$selection
rm -rf "$out"
mkdir -p "$out"
rft=$ft/install/bin/runfabtests.sh
known=$here/fabtests21_known.list

# Every test runfabtests.sh knows, as it names them (one a line).
all_tests() {
  sed -n '/^[a-z_]*tests=(/,/^)/p' "$rft" | sed -n 's/^[[:space:]]*"\(.*\)"[[:space:]]*\\\{0,1\}$/\1/p'
}
# The CI selection, as runfabtests.sh's -e: every test not in fabtests21_ci.list.
ci_excludes() {
  local keep
  keep=$(grep -v '^\s*#' "$here/fabtests21_ci.list" | sed '/^\s*$/d')
  all_tests | grep -vxF "$keep" | sed 's/.*/^&$/' | paste -sd,
}

# run_one PROV OVER EXCL SETS [EXCLUDES]: runfabtests.sh's YAML (-v) in
# $out/PROV.OVER.EXCL.yaml, in a host of its own (namespaces), bounded.
run_one() {
  local prov=$1 over=$2 excl=$3 sets=$4 more=${5:-} x=$1
  local name=$prov.$over.$excl envs=() args=(-v -p "$ft/install/bin" -T "$limit" -t "$sets")
  local rundir=$out/$name.run
  mkdir -p "$rundir"
  [ "$over" = weft ] && envs+=(LD_LIBRARY_PATH="$lib")
  [ "$prov" = lnx ] && envs+=(FI_LNX_PROV_LINKS=shm+tcp) && x=shm
  [ "$excl" = with ] && args+=(-f "$ft/src/test_configs/$x/$x.exclude")
  [ -n "$more" ] && args+=(-e "$more")
  [ -f "$ft/src/test_configs/$prov/all.test" ] && args+=(-u "$ft/src/test_configs/$prov/all.test")
  local t0=$SECONDS
  # shellcheck disable=SC2016
  timeout -k 10 "$run_limit" unshare --net --pid --fork --kill-child bash -c 'ip link set lo up && exec "$@"' _ \
    bash "$root_sh" run -b "$ft" -b "$here" -b "$build" -- "${root_env[@]}" "${envs[@]}" \
    sh -c 'mount -t tmpfs fab21-shm /dev/shm && cd "$0" && exec "$@"' "$rundir" \
    bash "$rft" "${args[@]}" "$prov" >"$out/$name.yaml" 2>&1
  local rc=$?
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "# $name: stopped after $run_limit s" >>"$out/$name.yaml"
  echo "$((SECONDS - t0))" >"$out/$name.secs"
  rm -rf "$rundir"
}

# "name<TAB>result" of a run's YAML, the provider left out of the name.
results() {
  awk '/^- name: /{ sub(/^- name: +/, ""); n = $0 }
       /^  result: /{ sub(/^  result: +/, ""); split($0, r, " "); print n "\t" r[1] }' "$1" |
    sed 's/ -p "[^"]*"//'
}
count() {  # results-file result
  awk -F'\t' -v r="$2" '$2 == r' "$1" | wc -l
}

# The runs, WEFT_FABTESTS_JOBS at a time (each is a host of its own): in
# ci all six at once (the tests mostly wait: runfabtests.sh sleeps a second
# before each client), in full the two libraries of one provider and list
# side by side.
case $selection in
  ci) sets=unit,functional,short excls="with" more=$(ci_excludes) run_limit=600 jobs=${WEFT_FABTESTS_JOBS:-6} ;;
  full) sets=unit,regression,functional,short,standard,complex,multinode excls="with without" more="" run_limit=7200
    jobs=${WEFT_FABTESTS_JOBS:-2} ;;
esac
start=$SECONDS
for excl in $excls; do
  for prov in $provs; do
    for over in debian weft; do
      while [ "$(jobs -pr | wc -l)" -ge "$jobs" ]; do wait -n; done
      run_one "$prov" "$over" "$excl" "$sets" "$more" &
    done
  done
done
wait

# ------------------------------------------------------------- the comparison
report=$out.txt
: >"$report"
bad=0
summary=()
for excl in $excls; do
  for prov in $provs; do
    for over in debian weft; do
      results "$out/$prov.$over.$excl.yaml" >"$out/$prov.$over.$excl.res"
    done
    # libfabric 2.1's lnx runs almost nothing (no fi_eq_open; no fi_getinfo
    # with a node): weft's lnx must pass what Debian 13's lnx or shm passes.
    refs=("$out/$prov.debian.$excl.res") head="Debian:$prov"
    if [ "$prov" = lnx ]; then
      [ -f "$out/shm.debian.$excl.res" ] || fail "lnx is compared with Debian 13's shm too: run shm (WEFT_FABTESTS_PROVS)"
      grep -v '^fi_ubertest' "$out/shm.debian.$excl.res" >"$out/lnx.shmref.$excl.res"
      refs+=("$out/lnx.shmref.$excl.res") head="Debian:lnx/shm"
    fi
    cmp=$out/$prov.$excl.cmp
    # Each test either library ran: Debian's result(s), weft's, the verdict.
    awk -F'\t' -v known="$known" -v key="$prov $excl" -v nref=${#refs[@]} '
      BEGIN { while ((getline l < known) > 0) if (l !~ /^#/ && split(l, k, " -- ") == 2) ok[k[1]] = 1 }
      FILENAME == ARGV[ARGC - 1] { got[$1] = $2; next }
      { if (FILENAME == ARGV[1]) ref[$1] = $2; else ref2[$1] = $2
        if ($2 == "Pass") want[$1] = 1; else if (!($1 in want)) want[$1] = 0 }
      END {
        for (t in want) {
          g = (t in got) ? got[t] : "missing"
          r = (t in ref) ? ref[t] : "-"
          if (nref > 1) r = r "/" ((t in ref2) ? ref2[t] : "-")
          if (r ~ /^Excluded(\/Excluded)?$/ && g == "Excluded") continue
          v = ""
          if (want[t] && g != "Pass") v = ((key " " t) in ok) ? "  (listed in fabtests21_known.list)" : "  <- weft fails what Debian passes"
          printf "%-56s %-17s %-9s%s\n", t, r, g, v
        }
      }' "${refs[@]}" "$out/$prov.weft.$excl.res" | sort >"$cmp"
    { echo "== $prov, $excl libfabric's exclude list: $head | weft"; cat "$cmp"; } >>"$report"
    bad=$((bad + $(grep -c '<- weft fails' "$cmp")))
    for over in debian weft; do
      r=$out/$prov.$over.$excl.res
      summary+=("$(printf '%-4s %-7s %-7s %5d %5d %6d %8d %6ss' "$prov" "$over" "$excl" "$(count "$r" Pass)" \
        "$(count "$r" Fail)" "$(count "$r" Notrun)" "$(count "$r" Excluded)" "$(cat "$out/$prov.$over.$excl.secs")")")
    done
  done
done
cat "$report"
echo
echo "fabtests 2.1 ($selection: $sets), runfabtests.sh -T $limit, $((SECONDS - start)) s:"
echo "prov library list     pass  fail notrun excluded   time"
printf '%s\n' "${summary[@]}"
echo "  each run's YAML: $out; the comparison: $report"
[ "$bad" -eq 0 ] || fail "$bad tests pass on Debian 13's libfabric and fail on weft's (lines marked <-)"
echo "PASS"
