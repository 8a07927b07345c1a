#!/usr/bin/env bash
# Debian's real fi_pingpong over weft's tcp provider (LD_LIBRARY_PATH only)
# on 127.0.0.1: RDM and MSG endpoints, msg and tagged modes, every size,
# data checks on.
set -euo pipefail
build=${1:?build dir}
command -v fi_pingpong >/dev/null || { echo "fi_pingpong missing: install libfabric-bin"; exit 1; }
export LD_LIBRARY_PATH=$build/lib
. "$(dirname "$0")/../lib/ports.sh"
iters=${WEFT_PINGPONG_ITERS:-10}
fail=0
for ep in rdm msg; do
  for mode in msg tagged; do
    port=$(free_tcp_port)
    timeout 120 fi_pingpong -p tcp -e "$ep" -m "$mode" -I "$iters" -S all -c -B "$port" >"/tmp/ppt_srv.$$" 2>&1 &
    srv=$!
    wait_listen "$port" "$srv"
    if ! timeout 120 fi_pingpong -p tcp -e "$ep" -m "$mode" -I "$iters" -S all -c -P "$port" 127.0.0.1 \
      >"/tmp/ppt_cli.$$" 2>&1; then
      echo "client failed ($ep, $mode)"; cat "/tmp/ppt_cli.$$"; fail=1
    fi
    if ! wait "$srv"; then echo "server failed ($ep, $mode)"; cat "/tmp/ppt_srv.$$"; fail=1; fi
    echo "== fi_pingpong -p tcp -e $ep -m $mode -S all -c: $(grep -c '^[0-9]' "/tmp/ppt_cli.$$") sizes"
    tail -2 "/tmp/ppt_cli.$$"
  done
done
rm -f "/tmp/ppt_srv.$$" "/tmp/ppt_cli.$$"
exit $fail
