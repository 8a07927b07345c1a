#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Debian's real fi_info (libfabric-bin), run against weft with only
# LD_LIBRARY_PATH changed, lists weft's providers and prints their attributes.
set -euo pipefail
build=${1:?build dir}
command -v fi_info >/dev/null || { echo "fi_info missing: install libfabric-bin"; exit 1; }
export LD_LIBRARY_PATH=$build/lib
run() { echo "+ fi_info $*"; fi_info "$@"; }

out=$(run -l); echo "$out"
[ "$(grep -c '^shm:' <<<"$out")" = 1 ]; [ "$(grep -c '^tcp:' <<<"$out")" -le 1 ]; [ "$(grep -c '^udp:' <<<"$out")" = 1 ]
! grep -q 'ofi_rxm\|psm\|verbs' <<<"$out"
# tcp is listed once its endpoints exist (it advertises only what works).
tcp=0; grep -q '^tcp:' <<<"$out" && tcp=1

out=$(run); echo "$out"
grep -q 'provider: shm' <<<"$out"
[ $tcp = 0 ] || grep -q 'provider: tcp' <<<"$out"

out=$(run -p shm -v); echo "$out" | head -80
grep -q 'prov_name: shm' <<<"$out"
grep -q 'addr_format: FI_ADDR_STR' <<<"$out"
grep -q 'type: FI_EP_RDM' <<<"$out"
! grep -q 'prov_name: tcp' <<<"$out"

# Datagram endpoints: udp's (IPv4 sockets, one datagram of a 1500-byte MTU
# per message, multicast) and shm's (one queue cell per message).
out=$(run -p udp -v); echo "$out" | head -60
grep -q 'type: FI_EP_DGRAM' <<<"$out"; ! grep -q 'type: FI_EP_RDM\|type: FI_EP_MSG' <<<"$out"
grep -q 'protocol: FI_PROTO_UDP' <<<"$out"; grep -q 'addr_format: FI_SOCKADDR_IN$' <<<"$out"
grep -q 'max_msg_size: 1448' <<<"$out"; grep -q 'inject_size: 1448' <<<"$out"
grep -q 'caps: \[.*FI_MULTICAST' <<<"$out"; ! grep -q 'FI_RMA\|FI_ATOMIC' <<<"$out"
out=$(run -p shm -t FI_EP_DGRAM -v)
grep -q 'type: FI_EP_DGRAM' <<<"$out"; grep -q 'max_msg_size: 4096' <<<"$out"; ! grep -q 'FI_RMA' <<<"$out"
out=$(run -t FI_EP_DGRAM); [ "$(grep -c 'provider: ' <<<"$out")" = 2 ]
out=$(run -c FI_MULTICAST); grep -q 'provider: udp' <<<"$out"; ! grep -q 'provider: shm\|provider: tcp' <<<"$out"

# A provider's parameters shape its attributes.
out=$(FI_SHM_INJECT_SIZE=16 fi_info -p shm -v); grep -q 'inject_size: 16' <<<"$out"
out=$(FI_UDP_MTU=9000 fi_info -p udp -v); grep -q 'max_msg_size: 8948' <<<"$out"
if [ $tcp = 1 ]; then
  out=$(run -p tcp -v); grep -q 'FI_SOCKADDR_IN' <<<"$out"; grep -q 'FI_EP_MSG' <<<"$out"
fi
out=$(run -e); grep -q 'FI_PROVIDER' <<<"$out"; grep -q 'FI_SHM_INJECT_SIZE' <<<"$out"; grep -q 'FI_UDP_MTU' <<<"$out"
out=$(FI_PROVIDER=^shm fi_info -l || true); ! grep -q "^shm:" <<<"$out"
# A provider weft does not have: fi_info reports no data, non-zero exit.
if fi_info -p verbs >/dev/null 2>&1; then echo "verbs unexpectedly listed"; exit 1; fi
# Prove the library fi_info loaded is weft's.
dbg=$(LD_DEBUG=libs fi_info -l 2>&1 >/dev/null)
grep -q "calling init: $build/lib/libfabric.so.1" <<<"$dbg"
echo "fi_info over weft: OK"
