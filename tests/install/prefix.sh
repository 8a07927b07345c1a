#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# weft installed into a temporary prefix (cmake --install, what make install
# runs), then used the three ways README's "Install" describes:
#   prefix.sh layout BUILD [SANITIZER]    the files, DESTDIR, weft info, weft-rsm.pc (an RSM
#                                         program built against the prefix, run over Debian's libfabric)
#   prefix.sh weft_run BUILD [SANITIZER]  Debian's fi_info and fi_pingpong (shm, tcp), the UCP
#                                         hello world and an MPICH job, each through `weft run`
#   prefix.sh plugin BUILD [SANITIZER]    Debian's fi_info and fi_pingpong over the prefix's
#                                         plugins (FI_PROVIDER_PATH), Debian's libfabric loaded
# Exit 77 = SKIP (with the reason printed).
set -uo pipefail
group=${1:?group}
build=$(cd "${2:?build dir}" && pwd)
san=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }
[ -z "$san" ] || skip "Debian's programs cannot load weft's $san-instrumented libraries"
command -v fi_info >/dev/null || fail "fi_info missing: install libfabric-bin"

tmp=$(mktemp -d /tmp/weft-install-test.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$tmp" ${rundir:+"$rundir"}
}
trap cleanup EXIT
. "$here/../lib/ports.sh"
. "$here/../lib/ucp_hello.sh"
unset LD_LIBRARY_PATH FI_PROVIDER_PATH FI_PROVIDER

prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }
weft=$prefix/bin/weft
lib=$prefix/lib

# Debian's fi_pingpong over shm and tcp (rdm, and msg for tcp), a way of
# tests/lib/via.sh: two sizes, eager and not.
pingpong() {
  export WEFT_PINGPONG_SIZES="64 65536" WEFT_PINGPONG_ITERS=5
  bash "$src/tests/compat/fi_pingpong_shm.sh" "$build" "$1" || fail "fi_pingpong over shm ($1)"
  WEFT_PINGPONG_MODES=tagged bash "$src/tests/compat/fi_pingpong_tcp.sh" "$build" "$1" || fail "fi_pingpong over tcp ($1)"
}

case $group in
layout)
  for f in bin/weft bin/weft-perf bin/rsm-perf include/rsmapi.h \
    lib/weft/libfabric.so.1 lib/weft/libucp.so.0 lib/weft/libucs.so.0 lib/weft/libucm.so.0 lib/weft/libuct.so.0 \
    lib/libweft_rsm.so.1 lib/libweft_rsm.so lib/pkgconfig/weft-rsm.pc \
    lib/libfabric/libweft_shm-fi.so lib/libfabric/libweft_tcp-fi.so lib/libfabric/libweft_lnx-fi.so \
    lib/libfabric/libweft_udp-fi.so \
    share/man/man1/weft.1 share/man/man1/weft-perf.1 share/man/man1/rsm-perf.1 \
    share/man/man7/weft.7 share/man/man7/fi_weft_shm.7 share/man/man7/fi_weft_tcp.7 share/man/man7/fi_weft_lnx.7 \
    share/man/man7/fi_weft_udp.7 share/man/man3/rsmapi.3 share/man/man3/rsm_strerror.3 \
    share/man/man3/rsm_memseg_import_putv.3; do
    [ -e "$prefix/$f" ] || fail "$f is not installed"
  done
  # The drop-in libraries never lie where the loader looks by itself.
  for l in libfabric libucp libucs libucm libuct; do
    ! ls "$lib/$l".so* >/dev/null 2>&1 || fail "$l is in $lib, where it shadows the system's"
  done
  ok "every file in its place"

  # DESTDIR stages the same tree under another root and writes nothing else.
  [ -e /opt/weft-test-destdir ] && fail "/opt/weft-test-destdir exists already"
  DESTDIR=$tmp/stage cmake --install "$build" --prefix /opt/weft-test-destdir >/dev/null || fail "DESTDIR install"
  [ -x "$tmp/stage/opt/weft-test-destdir/bin/weft" ] || fail "DESTDIR: nothing under the staging root"
  [ ! -e /opt/weft-test-destdir ] || { rm -rf /opt/weft-test-destdir; fail "DESTDIR: wrote to the real prefix"; }
  grep -q '^prefix=/opt/weft-test-destdir$' "$tmp/stage/opt/weft-test-destdir/lib/pkgconfig/weft-rsm.pc" ||
    fail "DESTDIR: weft-rsm.pc does not name the real prefix"
  ok "DESTDIR"

  out=$("$weft" --version) && [ "$out" = "weft $(sed -n 's/^set(WEFT_VERSION "\(.*\)")$/\1/p' "$build/install/files.cmake")" ] ||
    fail "weft --version: $out"
  out=$("$weft" info) || fail "weft info"
  echo "$out"
  grep -q "installed in $prefix" <<<"$out" || fail "weft info: prefix"
  grep -q "weft_shm  ($lib/libfabric/libweft_shm-fi.so)" <<<"$out" || fail "weft info: plugins"
  grep -q "under weft run:  $lib/weft/libfabric.so.1.*(weft's)" <<<"$out" || fail "weft info: weft run's libfabric"
  grep -q "as run now: .*(not weft's)" <<<"$out" || fail "weft info: the system's libfabric"
  grep -q "it does not load these" <<<"$out" || fail "weft info: plugin folder not seen as foreign"
  out=$(FI_PROVIDER_PATH=$lib/libfabric "$weft" info fi_info) || fail "weft info fi_info"
  grep -q "it loads these plugins" <<<"$out" || fail "weft info: FI_PROVIDER_PATH not seen"
  "$weft" info /nonexistent >/dev/null 2>&1; [ $? = 2 ] || fail "weft info of a missing program"
  "$weft" >/dev/null 2>&1; [ $? = 2 ] || fail "weft with no command"
  "$weft" run /nonexistent 2>/dev/null; [ $? = 127 ] || fail "weft run of a missing program"
  ok "weft --version, weft info"

  # An RSM program built with pkg-config against the prefix, run over
  # Debian's libfabric (the prefix's libweft_rsm, nothing else of weft's).
  flags=$(PKG_CONFIG_PATH=$lib/pkgconfig pkg-config --cflags --libs weft-rsm) || fail "pkg-config weft-rsm"
  for p in rsm_exporter rsm_importer; do
    cc -Wall -Werror "$src/examples/rsm/$p.c" $flags -o "$tmp/$p" || fail "building $p against the prefix"
  done
  export WEFT_RSM_RUNDIR=$(mktemp -d /dev/shm/weft-rsm-install.XXXXXX)
  rundir=$WEFT_RSM_RUNDIR
  LD_LIBRARY_PATH=$lib timeout 60 "$tmp/rsm_exporter" shm 0x600043 >"$tmp/exp.out" 2>&1 </dev/null &
  exp=$!
  pids+=($exp)
  LD_LIBRARY_PATH=$lib timeout 60 "$tmp/rsm_importer" shm 1 0x600043 3 >"$tmp/imp.out" 2>&1 ||
    { cat "$tmp/exp.out" "$tmp/imp.out"; fail "rsm_importer"; }
  wait $exp || { cat "$tmp/exp.out"; fail "rsm_exporter"; }
  grep -q "^message 3: hello 3 from pid" "$tmp/exp.out" || { cat "$tmp/exp.out"; fail "RSM messages"; }
  ok "an RSM program built with pkg-config weft-rsm"
  ;;

weft_run)
  out=$("$weft" run fi_info -l) || fail "weft run fi_info -l"
  grep -q '^shm:' <<<"$out" && grep -q '^tcp:' <<<"$out" && ! grep -q 'ofi_rxm' <<<"$out" ||
    { echo "$out"; fail "weft run fi_info -l does not list weft's providers alone"; }
  dbg=$("$weft" run env LD_DEBUG=libs fi_info -l 2>&1 >/dev/null)
  grep -q "calling init: $lib/weft/libfabric.so.1" <<<"$dbg" || fail "fi_info did not load the prefix's libfabric"
  out=$(fi_info -l)
  grep -q 'ofi_rxm' <<<"$out" || fail "without weft run, fi_info should be Debian's alone"
  ok "weft run fi_info"

  pingpong "run:$weft"
  ok "weft run fi_pingpong (shm, tcp)"

  # UCP: Debian's example, built against Debian's UCX, on the prefix's libucp.
  hello=$build/tests/ucp/ucp_hello_debian
  [ -x "$hello" ] || fail "$hello is not built"
  out=$("$weft" info "$hello")
  grep -q "under weft run:  $lib/weft/libucp.so" <<<"$out" || { echo "$out"; fail "the hello world would not load weft's libucp"; }
  hello_pair "$weft" run "$hello"
  [ "$cli_rc" = 0 ] && [ "$srv_rc" = 0 ] && grep -q 'UCP TEST SUCCESS' "$tmp/cli.log" ||
    { cat "$tmp/srv.log" "$tmp/cli.log"; fail "the UCP hello world through weft run (client $cli_rc, server $srv_rc)"; }
  ok "weft run ucp_hello_world"

  # MPICH: the launcher passes weft run's environment to its ranks.
  command -v mpiexec.mpich >/dev/null || fail "mpiexec.mpich missing: install mpich"
  suite=$build/tests/ucp/mpi_suite_mpich
  [ -x "$suite" ] || fail "$suite is not built"
  out=$(MPI_SUITE_MAPS=1 "$weft" run timeout 120 mpiexec.mpich -n 2 "$suite" 2>&1)
  rc=$?
  echo "$out" | grep -v '^mapped' | tail -10
  [ $rc = 0 ] || fail "MPICH job through weft run: rc $rc"
  # Rank 0 shows its mappings; a rank on Debian's UCX could not talk to it.
  grep -q "mapped: $lib/weft/libucp.so" <<<"$out" || fail "the ranks did not load the prefix's libucp"
  grep -q "mapped: $lib/weft/libfabric.so" <<<"$out" || fail "the ranks did not load the prefix's libfabric"
  [ "$(grep -c '^ok ' <<<"$out")" -eq 7 ] || fail "MPICH job: not every section passed"
  ok "weft run mpiexec.mpich -n 2"
  ;;

plugin)
  out=$(FI_PROVIDER_PATH=$lib/libfabric fi_info -l) || fail "fi_info -l"
  grep -q '^weft_shm:' <<<"$out" && grep -q '^weft_tcp:' <<<"$out" && grep -q '^ofi_rxm:' <<<"$out" ||
    { echo "$out"; fail "fi_info -l with FI_PROVIDER_PATH does not list weft_shm and weft_tcp beside Debian's"; }
  dbg=$(FI_PROVIDER_PATH=$lib/libfabric LD_DEBUG=libs fi_info -l 2>&1 >/dev/null)
  grep -q "calling init: $lib/libfabric/libweft_shm-fi.so" <<<"$dbg" || fail "the prefix's weft_shm plugin was not loaded"
  ! grep -q "calling init: $lib/weft/" <<<"$dbg" || fail "a drop-in library was loaded"
  ok "fi_info -l with FI_PROVIDER_PATH=$lib/libfabric"
  pingpong "plugin:$lib/libfabric"
  ok "fi_pingpong over the plugins (weft_shm, weft_tcp)"
  ;;

*)
  fail "unknown group $group"
  ;;
esac
echo "install.$group: OK"
