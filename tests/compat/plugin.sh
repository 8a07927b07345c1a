#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# weft's providers as plugins of Debian's libfabric (src/plugin): each
# plugin exports fi_prov_ini alone and needs no libfabric; Debian's fi_info,
# with FI_PROVIDER_PATH naming the build's plugin folder, lists them beside
# its own providers, with their attributes and their FI_WEFT_* variables,
# and FI_PROVIDER selects them (fi_pingpong with no -p runs over weft_shm);
# a process on a plugin talks to one on weft's own library.
#   plugin.sh BUILD
set -euo pipefail
build=${1:?build dir}
command -v fi_info >/dev/null || { echo "fi_info missing: install libfabric-bin"; exit 1; }
dir=$build/lib/libfabric
. "$(dirname "$0")/../lib/ports.sh"
fail() { echo "FAIL: $*"; exit 1; }

for p in shm tcp; do
  f=$dir/libweft_$p-fi.so
  [ -f "$f" ] || fail "$f is not built"
  exports=$(nm -D --defined-only "$f" | awk '{ print $NF }' | sort -u | tr '\n' ' ')
  [ "$exports" = "fi_prov_ini " ] || fail "$f exports more than fi_prov_ini: $exports"
  ! grep -q 'NEEDED.*libfabric' <<<"$(objdump -p "$f")" || fail "$f needs a libfabric"
done
echo "ok: each plugin exports fi_prov_ini alone"

unset LD_LIBRARY_PATH
export FI_PROVIDER_PATH=$dir
out=$(FI_LOG_LEVEL=warn fi_info -l 2>"/tmp/plugin_err.$$"); echo "$out" | tr '\n' ' '; echo
err=$(cat "/tmp/plugin_err.$$"); rm -f "/tmp/plugin_err.$$"
for p in weft_shm weft_tcp shm tcp; do grep -q "^$p:" <<<"$out" || fail "fi_info -l does not list $p"; done
! grep -i 'weft' <<<"$err" || fail "Debian's libfabric warned about the plugins"
echo "ok: fi_info -l lists weft_shm and weft_tcp beside shm and tcp"

out=$(fi_info -p weft_shm -v)
grep -q 'prov_name: weft_shm' <<<"$out" || fail "weft_shm: no prov_name"
grep -q 'addr_format: FI_ADDR_STR' <<<"$out" || fail "weft_shm: not FI_ADDR_STR"
grep -q 'inject_size: 4096' <<<"$out" || fail "weft_shm: inject_size"
out=$(FI_WEFT_SHM_INJECT_SIZE=16 fi_info -p weft_shm -v)
grep -q 'inject_size: 16' <<<"$out" || fail "FI_WEFT_SHM_INJECT_SIZE is not read"
out=$(FI_SHM_INJECT_SIZE=16 fi_info -p weft_shm -v)
grep -q 'inject_size: 4096' <<<"$out" || fail "weft_shm read Debian's shm's FI_SHM_INJECT_SIZE"
out=$(fi_info -p weft_tcp -v)
for w in 'prov_name: weft_tcp' FI_SOCKADDR_IN FI_EP_RDM FI_EP_MSG; do
  grep -q "$w" <<<"$out" || fail "weft_tcp: no $w"
done
! grep -q 'ofi_rxm' <<<"$out" || fail "ofi_rxm layered over weft_tcp"
echo "ok: attributes and provider variables"

out=$(fi_info -e | tr -d '\0')
for v in FI_WEFT_SHM_DISABLE_CMA FI_WEFT_SHM_SPLIT_COPY FI_WEFT_SHM_MAP_MR FI_WEFT_SHM_INJECT_SIZE \
  FI_WEFT_TCP_IFACE FI_WEFT_TCP_USER_TIMEOUT_MS FI_WEFT_TCP_KEEPALIVE_S; do
  grep -aq "^# $v:" <<<"$out" || fail "fi_info -e does not list $v"
done
echo "ok: fi_info -e lists the plugins' variables"

out=$(FI_PROVIDER=weft_shm fi_info)
[ "$(grep -c 'provider:' <<<"$out")" = "$(grep -c 'provider: weft_shm' <<<"$out")" ] || fail "FI_PROVIDER=weft_shm"
out=$(FI_PROVIDER=^weft_shm fi_info)
! grep -q 'provider: weft_shm' <<<"$out" || fail "FI_PROVIDER=^weft_shm"
echo "ok: FI_PROVIDER selects and excludes them"

# FI_PROVIDER alone picks the provider of an unmodified program.
port=$(free_tcp_port)
FI_PROVIDER=weft_shm timeout 60 fi_pingpong -e rdm -I 10 -S 1024 -c -B "$port" >"/tmp/plugin_srv.$$" 2>&1 &
srv=$!
wait_listen "$port" "$srv" || { cat "/tmp/plugin_srv.$$"; fail "fi_pingpong server did not start"; }
FI_PROVIDER=weft_shm timeout 60 fi_pingpong -e rdm -I 10 -S 1024 -c -P "$port" 127.0.0.1 >"/tmp/plugin_cli.$$" 2>&1 ||
  { cat "/tmp/plugin_cli.$$"; fail "FI_PROVIDER=weft_shm fi_pingpong (client)"; }
wait "$srv" || { cat "/tmp/plugin_srv.$$"; fail "FI_PROVIDER=weft_shm fi_pingpong (server)"; }
tail -1 "/tmp/plugin_cli.$$"
rm -f "/tmp/plugin_srv.$$" "/tmp/plugin_cli.$$"
echo "ok: FI_PROVIDER=weft_shm fi_pingpong"

# A process on the plugin and one on weft's own library talk to each other:
# the same addresses and wire formats under either name.
for p in shm tcp; do
  port=$(free_tcp_port)
  LD_LIBRARY_PATH=$build/lib timeout 60 fi_pingpong -p $p -e rdm -I 10 -S 65536 -c -B "$port" >"/tmp/plugin_srv.$$" 2>&1 &
  srv=$!
  wait_listen "$port" "$srv" || { cat "/tmp/plugin_srv.$$"; fail "fi_pingpong server ($p) did not start"; }
  timeout 60 fi_pingpong -p weft_$p -e rdm -I 10 -S 65536 -c -P "$port" 127.0.0.1 >"/tmp/plugin_cli.$$" 2>&1 ||
    { cat "/tmp/plugin_cli.$$"; fail "weft_$p client against a $p server on weft's library"; }
  wait "$srv" || { cat "/tmp/plugin_srv.$$"; fail "$p server on weft's library against a weft_$p client"; }
done
rm -f "/tmp/plugin_srv.$$" "/tmp/plugin_cli.$$"
echo "ok: weft_shm and weft_tcp talk to shm and tcp of weft's own library"

# Without FI_PROVIDER_PATH Debian's libfabric does not see the build's plugins
# (unless the Debian package is installed: then it sees those).
if [ ! -e /usr/lib/x86_64-linux-gnu/libfabric/libweft_shm-fi.so ]; then
  out=$(env -u FI_PROVIDER_PATH fi_info -l)
  ! grep -q '^weft_' <<<"$out" || fail "weft's providers listed without FI_PROVIDER_PATH"
fi
echo "plugins in Debian's libfabric: OK"
