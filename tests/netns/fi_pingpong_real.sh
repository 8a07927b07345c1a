#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Proves the namespace harness with a real client on real libfabric (no
# LD_LIBRARY_PATH: Debian's library): fi_pingpong over tcp;ofi_rxm, RDM
# endpoints, between two network namespaces, every size, data checked.
# SKIPs (77) where namespaces cannot be made.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v fi_pingpong >/dev/null || { echo "SKIP: no fi_pingpong (libfabric-bin)" >&2; exit 77; }

run() {
  unset LD_LIBRARY_PATH
  local args=(-p "tcp;ofi_rxm" -e rdm -I 20 -c)
  ip netns exec "$WEFT_NS_2" timeout 60 fi_pingpong "${args[@]}" >"$tmp/server.log" 2>&1 &
  local srv=$!
  # The client may start before the server listens: retry for a few seconds.
  local ok=1
  for _ in $(seq 20); do
    if ip netns exec "$WEFT_NS_1" timeout 60 fi_pingpong "${args[@]}" "$WEFT_ADDR_2" >"$tmp/client.log" 2>&1; then
      ok=0
      break
    fi
    grep -q "Connection refused\|ECONNREFUSED\|connect" "$tmp/client.log" || break
    sleep 0.2
  done
  wait "$srv"
  local src=$?
  echo "--- client (host 1, $WEFT_ADDR_1)"; cat "$tmp/client.log"
  echo "--- server (host 2, $WEFT_ADDR_2)"; cat "$tmp/server.log"
  ((ok == 0 && src == 0)) || { echo "FAIL: client $ok server $src" >&2; return 1; }
  # Every size ran (the last line of the table is the largest size).
  grep -q "^1m\|^ *1m" "$tmp/client.log" || { echo "FAIL: no 1m row" >&2; return 1; }
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export -f run
export tmp
bash "$here/netns.sh" -n 2 -- bash -c run
