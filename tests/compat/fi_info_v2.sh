#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Debian 13's fi_info (libfabric 2.1, scripts/fetch_fabric2.sh; its glibc
# needs are Debian 12's) over weft's libfabric.so.1: it binds
# fi_getinfo@FABRIC_1.8, lists weft's providers, and prints their
# attributes as libfabric 2.1 does (one progress model, no comp_order, the
# 2.x names). About 1 s.
set -euo pipefail
build=${1:?build dir}
root=${WEFT_FABRIC2_ROOT:-}
fi_info=$root/usr/bin/fi_info
[ -n "$root" ] && [ -x "$fi_info" ] || { echo "FAIL: Debian 13's fi_info not fetched (scripts/fetch_fabric2.sh)"; exit 1; }
fail() { echo "FAIL: $*"; exit 1; }
export LD_LIBRARY_PATH=$build/lib
export FI_TCP_IFACE=lo
grep -q 'FABRIC_1.8.*fi_getinfo' <<<"$(objdump -T "$fi_info")" || fail "$fi_info does not bind fi_getinfo@FABRIC_1.8"

out=$("$fi_info" --version)
grep -q '^libfabric: 2\.6\.0' <<<"$out" || fail "fi_info --version: $out"
out=$("$fi_info" -l)
for p in lnx shm tcp udp; do grep -q "^$p:" <<<"$out" || fail "fi_info -l does not list $p: $out"; done
echo "ok: Debian 13's fi_info -l lists $(grep -c ':$' <<<"$out") providers"

out=$("$fi_info" -p shm -v)
for w in 'api_version: 2.1' 'progress: FI_PROGRESS_MANUAL' 'protocol: FI_PROTO_SHM' 'type: FI_EP_RDM'; do
  grep -q "$w" <<<"$out" || fail "fi_info -p shm -v has no '$w'"
done
for w in comp_order total_buffered_recv control_progress data_progress FI_VARIABLE_MSG; do
  ! grep -q "$w" <<<"$out" || fail "fi_info -p shm -v prints 1.x's $w"
done
out=$("$fi_info" -p lnx -v)
grep -q 'protocol: FI_PROTO_LNX' <<<"$out" || fail "lnx's protocol is not FI_PROTO_LNX for 2.x"
out=$("$fi_info" -p tcp -t FI_EP_MSG)
grep -q 'type: FI_EP_MSG' <<<"$out" || fail "fi_info -p tcp -t FI_EP_MSG: $out"
echo "ok: attributes as libfabric 2.1 prints them"
out=$("$fi_info" -c FI_MULTICAST)
grep -q 'provider: udp' <<<"$out" && ! grep -q 'provider: shm' <<<"$out" || fail "fi_info -c FI_MULTICAST: $out"
echo "Debian 13's fi_info over weft: OK"
