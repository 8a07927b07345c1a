#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Debian's real fi_pingpong over weft's tcp provider (LD_LIBRARY_PATH only,
# or as a plugin, or through an installed `weft run`: tests/lib/via.sh) on
# 127.0.0.1: RDM and MSG endpoints, msg and tagged modes, every size, data
# checks on.
#   fi_pingpong_tcp.sh BUILD [VIA]
set -euo pipefail
build=${1:?build dir}
command -v fi_pingpong >/dev/null || { echo "fi_pingpong missing: install libfabric-bin"; exit 1; }
. "$(dirname "$0")/../lib/ports.sh"
. "$(dirname "$0")/../lib/via.sh"
via_setup "${2:-}" "$build"
prov=${prov_prefix}tcp
echo "fi_pingpong -p $prov over $via_name"
iters=${WEFT_PINGPONG_ITERS:-10}
fail=0
for ep in ${WEFT_PINGPONG_EPS:-rdm msg}; do
  for mode in ${WEFT_PINGPONG_MODES:-msg tagged}; do
    for sizes in ${WEFT_PINGPONG_SIZES:-all}; do
      port=$(free_tcp_port)
      timeout 120 "${run[@]}" fi_pingpong -p "$prov" -e "$ep" -m "$mode" -I "$iters" -S "$sizes" -c -B "$port" \
        >"/tmp/ppt_srv.$$" 2>&1 &
      srv=$!
      wait_listen "$port" "$srv"
      if ! timeout 120 "${run[@]}" fi_pingpong -p "$prov" -e "$ep" -m "$mode" -I "$iters" -S "$sizes" -c \
        -P "$port" 127.0.0.1 >"/tmp/ppt_cli.$$" 2>&1; then
        echo "client failed ($ep, $mode)"; cat "/tmp/ppt_cli.$$"; fail=1
      fi
      if ! wait "$srv"; then echo "server failed ($ep, $mode)"; cat "/tmp/ppt_srv.$$"; fail=1; fi
      echo "== fi_pingpong -p $prov -e $ep -m $mode -S $sizes -c: $(grep -c '^[0-9]' "/tmp/ppt_cli.$$") sizes"
      tail -2 "/tmp/ppt_cli.$$"
    done
  done
done
rm -f "/tmp/ppt_srv.$$" "/tmp/ppt_cli.$$"
exit $fail
