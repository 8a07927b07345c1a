#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Debian's real fi_pingpong over weft's shm provider (or WEFT_PINGPONG_PROV's:
# fi_pingpong_lnx.sh runs it over the linked provider) (LD_LIBRARY_PATH only,
# or as a plugin, or through an installed `weft run`: tests/lib/via.sh):
# rdm endpoints, msg and tagged modes, every size, data checks on.
#   fi_pingpong_shm.sh BUILD [VIA]
set -euo pipefail
build=${1:?build dir}
command -v fi_pingpong >/dev/null || { echo "fi_pingpong missing: install libfabric-bin"; exit 1; }
. "$(dirname "$0")/../lib/ports.sh"
. "$(dirname "$0")/../lib/via.sh"
via_setup "${2:-}" "$build"
prov=${prov_prefix}${WEFT_PINGPONG_PROV:-shm}
echo "fi_pingpong -p $prov over $via_name"
iters=${WEFT_PINGPONG_ITERS:-20}
# weft's shm creates no file under /dev/shm (its regions are anonymous memfds).
before=$(ls /dev/shm)
pids=""
fail=0
for mode in ${WEFT_PINGPONG_MODES:-msg tagged}; do
  for sizes in ${WEFT_PINGPONG_SIZES:-all}; do
    port=$(free_tcp_port)
    timeout 120 "${run[@]}" fi_pingpong -p "$prov" -e rdm -m "$mode" -I "$iters" -S "$sizes" -c -B "$port" >"/tmp/pp_srv.$$" 2>&1 &
    srv=$!
    wait_listen "$port" "$srv"
    timeout 120 "${run[@]}" fi_pingpong -p "$prov" -e rdm -m "$mode" -I "$iters" -S "$sizes" -c -P "$port" 127.0.0.1 >"/tmp/pp_cli.$$" 2>&1 &
    cli=$!
    sleep 0.1
    pids+=" $(pgrep -P "$srv" || true) $(pgrep -P "$cli" || true)"
    if ! wait "$cli"; then echo "client failed (mode $mode)"; cat "/tmp/pp_cli.$$"; fail=1; fi
    if ! wait "$srv"; then echo "server failed (mode $mode)"; cat "/tmp/pp_srv.$$"; fail=1; fi
    echo "== fi_pingpong -p $prov -e rdm -m $mode -S $sizes -c: $(grep -c '^[0-9]' "/tmp/pp_cli.$$") sizes"
    tail -3 "/tmp/pp_cli.$$"
  done
done
rm -f "/tmp/pp_srv.$$" "/tmp/pp_cli.$$"
# Nothing new under /dev/shm from the fi_pingpong processes (other tests may
# run at the same time: only files named after these processes count).
for f in $(comm -13 <(echo "$before") <(ls /dev/shm)); do
  for pid in $pids; do
    case "$f" in *"_${pid}_"* | *"_${pid}:"*) echo "left in /dev/shm: $f"; fail=1 ;; esac
  done
done
exit $fail
