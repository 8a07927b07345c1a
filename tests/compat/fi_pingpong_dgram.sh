#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Debian's real fi_pingpong over weft's datagram endpoints (LD_LIBRARY_PATH
# only) on one host: `-e dgram` on udp (127.0.0.1) and on shm, every size up
# to each provider's max_msg_size, then max_msg_size itself, data checks on.
# fi_pingpong waits for every datagram without a timeout: on loopback none
# is lost.
set -euo pipefail
build=${1:?build dir}
command -v fi_pingpong >/dev/null || { echo "fi_pingpong missing: install libfabric-bin"; exit 1; }
export LD_LIBRARY_PATH=$build/lib
. "$(dirname "$0")/../lib/ports.sh"
iters=${WEFT_PINGPONG_ITERS:-20}
fail=0

# run PROV SIZES LAST: one fi_pingpong pair; LAST is the largest size it must show.
run() {
  local prov=$1 sizes=$2 want=$3 port srv last
  port=$(free_tcp_port)
  timeout 120 fi_pingpong -p "$prov" -e dgram -I "$iters" -S "$sizes" -c -B "$port" >"/tmp/ppd_srv.$$" 2>&1 &
  srv=$!
  wait_listen "$port" "$srv"
  if ! timeout 120 fi_pingpong -p "$prov" -e dgram -I "$iters" -S "$sizes" -c -P "$port" 127.0.0.1 \
    >"/tmp/ppd_cli.$$" 2>&1; then
    echo "client failed ($prov, -S $sizes)"; cat "/tmp/ppd_cli.$$"; fail=1
  fi
  if ! wait "$srv"; then echo "server failed ($prov, -S $sizes)"; cat "/tmp/ppd_srv.$$"; fail=1; fi
  echo "== fi_pingpong -p $prov -e dgram -S $sizes -c: $(grep -c '^[0-9]' "/tmp/ppd_cli.$$") sizes"
  tail -2 "/tmp/ppd_cli.$$"
  last=$(awk '/^[0-9]/ {s=$1} END {print s}' "/tmp/ppd_cli.$$")
  [ "$last" = "$want" ] || { echo "FAIL: $prov -S $sizes: the largest size run was '$last', not $want"; fail=1; }
}

for prov in udp shm; do
  max=$(fi_info -p "$prov" -t FI_EP_DGRAM -v | awk '/max_msg_size:/ {print $2; exit}')
  echo "$prov: max_msg_size $max"
  case "$prov:$max" in
    udp:1448 | shm:4096) ;;  # 1500 - IPv4, UDP and weft headers; one shm cell
    *) echo "FAIL: unexpected max_msg_size"; fail=1 ;;
  esac
  # -S all: fi_pingpong runs the sizes up to max_msg_size (1k and 4k the last).
  run "$prov" all "$([ "$prov" = udp ] && echo 1k || echo 4k)"
  # max_msg_size itself (fi_pingpong asks for it in the hints).
  run "$prov" "$max" "$([ "$prov" = udp ] && echo 1.4k || echo 4k)"
done
rm -f "/tmp/ppd_srv.$$" "/tmp/ppd_cli.$$"
exit $fail
