#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Debian package (scripts/deb.sh): its file list, then installed with
# dpkg -i (Debian's fi_info then lists weft's plugins with no
# FI_PROVIDER_PATH, weft run finds the drop-in libraries, man finds the
# pages, pkg-config finds weft-rsm), then removed with dpkg -r, after which
# none of its files or folders is left. Runs alone (RUN_SERIAL): while it is
# installed every libfabric program on the machine sees the plugins. The
# package is removed whatever happens once it is installed, and a run killed
# midway is cleaned up by the next (its marker file says the package was the
# test's). A weft package installed by someone else is left alone (SKIP).
#   deb.sh BUILD [SANITIZER]
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
san=${2:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }
[ -z "$san" ] || skip "a $san-instrumented build is not packaged"
[ "$(id -u)" = 0 ] || skip "dpkg -i needs root"
for t in dpkg-deb dpkg-shlibdeps fi_info man; do command -v $t >/dev/null || fail "$t missing: run scripts/setup.sh"; done

marker=/var/tmp/weft-deb-test.installed
installed() { dpkg-query -W -f='${Status}' weft 2>/dev/null | grep -q 'install ok installed'; }
# dpkg waits for nobody: retry while another dpkg or apt holds its lock.
dpkg_retry() {
  local i out
  for i in $(seq 1 60); do
    out=$(dpkg "$@" 2>&1) && { echo "$out" | tail -3; return 0; }
    grep -qi 'lock' <<<"$out" || { echo "$out"; return 1; }
    sleep 2
  done
  echo "$out"
  return 1
}
remove() {
  if installed; then
    dpkg_retry -r weft || echo "FAIL: dpkg -r weft"
  fi
  installed || rm -f "$marker"
}
if installed; then
  [ -e "$marker" ] || skip "a weft package installed by someone else is on this machine: left alone"
  echo "removing the package a killed run of this test left installed"
  remove
fi

tmp=$(mktemp -d /tmp/weft-deb-test.XXXXXX)
trap 'remove; rm -rf "$tmp"' EXIT
deb=$(bash "$src/scripts/deb.sh" "$build" "$tmp") || fail "scripts/deb.sh"
echo "$deb"

# The file list: every path the package installs, and the folders it adds.
dpkg-deb -c "$deb" >"$tmp/contents" || fail "dpkg-deb -c"
paths=$(awk '{ print $6 }' "$tmp/contents" | sed 's|^\./|/|; s|/$||' | grep -v '^\.\?$' | sort -u)
files=$(awk '$1 !~ /^d/ { print $6 }' "$tmp/contents" | sed 's|^\./|/|' | sort -u)
multiarch=$(gcc -print-multiarch)
libdir=/usr/lib/$multiarch
for f in /usr/bin/weft /usr/bin/weft-perf /usr/bin/rsm-perf /usr/include/rsmapi.h \
  $libdir/weft/libfabric.so.1 $libdir/weft/libucp.so.0 $libdir/weft/libucs.so.0 $libdir/weft/libucm.so.0 $libdir/weft/libuct.so.0 \
  $libdir/libweft_rsm.so.1 $libdir/pkgconfig/weft-rsm.pc \
  $libdir/libfabric/libweft_shm-fi.so $libdir/libfabric/libweft_tcp-fi.so \
  $libdir/libfabric/libweft_lnx-fi.so $libdir/libfabric/libweft_udp-fi.so \
  /usr/share/man/man1/weft.1.gz /usr/share/man/man1/weft-perf.1.gz /usr/share/man/man1/rsm-perf.1.gz \
  /usr/share/man/man7/weft.7.gz /usr/share/man/man7/fi_weft_shm.7.gz /usr/share/man/man7/fi_weft_tcp.7.gz \
  /usr/share/man/man7/fi_weft_lnx.7.gz /usr/share/man/man7/fi_weft_udp.7.gz \
  /usr/share/man/man3/rsmapi.3.gz /usr/share/man/man3/rsm_strerror.3.gz \
  /usr/share/doc/weft/copyright; do
  grep -qx "$f" <<<"$files" || fail "the package lacks $f"
done
! grep -v '^/usr\(/\|$\)' <<<"$paths" || fail "the package installs outside /usr"
! grep -E "^$libdir/lib(fabric|ucp|ucs|ucm|uct)\.so" <<<"$files" || fail "a drop-in library would shadow the system's"
dpkg-deb -f "$deb" Depends | grep -q 'libfabric1' || fail "no dependency on libfabric1"
# The description names the four providers and the three faces; the
# copyright file gives the license.
desc=$(dpkg-deb -f "$deb" Description)
for w in lnx shm tcp udp libweft_rsm libucp.so.0 libfabric.so.1; do
  grep -qw -- "$w" <<<"$desc" || fail "the package description does not name $w"
done
dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ./usr/share/doc/weft/copyright | grep -qx 'License: BSD-3-Clause' ||
  fail "the copyright file does not give the BSD-3-Clause license"
ok "dpkg-deb -c: $(wc -l <<<"$files") files, dependencies $(dpkg-deb -f "$deb" Depends)"

# What exists before: none of its files; the folders it would add are noted.
for f in $files; do [ ! -e "$f" ] && [ ! -L "$f" ] || fail "$f exists before the package is installed"; done
new_dirs=$(for p in $paths; do [ -e "$p" ] || echo "$p"; done)

touch "$marker"
dpkg_retry -i "$deb" || fail "dpkg -i"
installed || fail "not installed after dpkg -i"
for f in $files; do [ -e "$f" ] || [ -L "$f" ] || fail "$f not installed"; done
ok "dpkg -i"

out=$(env -u FI_PROVIDER_PATH -u LD_LIBRARY_PATH fi_info -l) || fail "fi_info -l"
grep -q '^weft_shm:' <<<"$out" && grep -q '^weft_tcp:' <<<"$out" && grep -q '^ofi_rxm:' <<<"$out" ||
  { echo "$out"; fail "fi_info -l does not list the plugins beside Debian's providers"; }
out=$(env -u FI_PROVIDER_PATH -u LD_LIBRARY_PATH fi_info -p weft_shm) || fail "fi_info -p weft_shm"
grep -q 'provider: weft_shm' <<<"$out" || fail "fi_info -p weft_shm"
ok "fi_info -l lists weft_shm and weft_tcp with no FI_PROVIDER_PATH"
out=$(env -u LD_LIBRARY_PATH weft run fi_info -l) || fail "weft run fi_info -l"
grep -q '^shm:' <<<"$out" && ! grep -q '^weft_shm:' <<<"$out" || { echo "$out"; fail "weft run fi_info -l"; }
out=$(env -u FI_PROVIDER_PATH -u LD_LIBRARY_PATH weft info) || fail "weft info"
grep -q 'it loads these plugins' <<<"$out" || { echo "$out"; fail "weft info does not see the plugins loaded"; }
grep -q "as run now: .*libfabric.*(not weft's)" <<<"$out" && grep -q "under weft run:  $libdir/weft/libfabric.so.1.*(weft's)" <<<"$out" ||
  { echo "$out"; fail "weft info does not tell the system's libfabric from weft's"; }
ok "weft run, weft info"
for page in weft.1 weft-perf.1 rsm-perf.1 weft.7 fi_weft_shm.7 fi_weft_tcp.7 fi_weft_lnx.7 fi_weft_udp.7 \
  rsmapi.3 rsm_strerror.3; do
  where=$(man -w "${page##*.}" "${page%.*}" 2>/dev/null) || fail "man does not find ${page%.*}(${page##*.})"
  [ "$where" = "/usr/share/man/man${page##*.}/$page.gz" ] || fail "man ${page%.*} is $where"
  err=$(man --warnings "${page##*.}" "${page%.*}" 2>&1 >/dev/null)
  [ -z "$err" ] || fail "man ${page%.*}: $err"
done
ok "man finds and renders every page"
[[ "$(pkg-config --libs weft-rsm)" =~ ^-lweft_rsm\ *$ ]] || fail "pkg-config weft-rsm: $(pkg-config --libs weft-rsm)"
ok "pkg-config weft-rsm"

dpkg_retry -r weft || fail "dpkg -r"
! installed || fail "still installed after dpkg -r"
rm -f "$marker"
left=$(for p in $files $new_dirs; do [ -e "$p" ] || [ -L "$p" ] && echo "$p"; done)
[ -z "$left" ] || fail "left behind by dpkg -r: $left"
out=$(env -u FI_PROVIDER_PATH -u LD_LIBRARY_PATH fi_info -l)
! grep -q '^weft_' <<<"$out" || fail "fi_info -l still lists weft's providers"
ok "dpkg -r: none of the $(wc -l <<<"$new_dirs") files and folders it had added is left"
echo "install.deb: OK"
