#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Debian's fi_pingpong over weft (LD_LIBRARY_PATH only) between two network
# namespaces, every size, data checked: tcp's RDM and MSG endpoints in msg
# and tagged modes, the linked provider's RDM endpoints in both, and udp's datagram endpoints (`-e dgram`, every size up
# to max_msg_size, then max_msg_size itself). SKIPs (77) where namespaces
# cannot be made.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?build dir}
command -v fi_pingpong >/dev/null || { echo "SKIP: no fi_pingpong (libfabric-bin)" >&2; exit 77; }
lib=$(cd "$build/lib" && pwd)

# run LAST SERVER_ENV CLIENT_ENV FI_PINGPONG_ARGS...: host 1 (client) to
# host 2 (server); LAST is the largest size the client's table must end with.
run() {
  local last=$1 srv_env=$2 cli_env=$3
  shift 3
  local args=("$@" -I 10 -c)
  ip netns exec "$WEFT_NS_2" env LD_LIBRARY_PATH="$lib" $srv_env timeout 90 fi_pingpong "${args[@]}" \
    >"$tmp/server.log" 2>&1 &
  local srv=$! ok=1
  for _ in $(seq 30); do
    if ip netns exec "$WEFT_NS_1" env LD_LIBRARY_PATH="$lib" $cli_env timeout 90 fi_pingpong "${args[@]}" "$WEFT_ADDR_2" \
      >"$tmp/client.log" 2>&1; then
      ok=0
      break
    fi
    grep -qi "refused\|connect" "$tmp/client.log" || break  # the server's control port is not up yet
    sleep 0.2
  done
  wait "$srv"
  local src=$?
  echo "== fi_pingpong $* -c, host 1 -> host 2 over weft: $(grep -c '^[0-9]' "$tmp/client.log") sizes"
  tail -n 2 "$tmp/client.log"
  if ((ok != 0 || src != 0)); then
    echo "--- client"; cat "$tmp/client.log"; echo "--- server"; cat "$tmp/server.log"
    echo "FAIL: client $ok server $src" >&2
    return 1
  fi
  local got
  got=$(awk '/^[0-9]/ {s=$1} END {print s}' "$tmp/client.log")
  [ "$got" = "$last" ] || { echo "FAIL: the largest size run was '$got', not $last" >&2; return 1; }
}

all() {
  local fail=0
  # tcp: each side takes its host's eth0 address (FI_TCP_IFACE): peers reach it there.
  for ep in rdm msg; do
    for mode in msg tagged; do run 6m FI_TCP_IFACE=eth0 FI_TCP_IFACE=eth0 -p tcp -e "$ep" -m "$mode" -S all || fail=1; done
  done
  # The linked provider: no variable needed (it offers the hosts' eth0 and
  # no loopback); the client names the server by node and service (tcp),
  # then fi_pingpong inserts the server's full address: tcp across hosts.
  for mode in msg tagged; do run 6m "" "" -p lnx -e rdm -m "$mode" -S all || fail=1; done
  # udp: the server takes eth0's address; the client, given the server's,
  # the address its route leaves from. max_msg_size 1448 on a 1500-byte MTU.
  run 1k FI_UDP_IFACE=eth0 "" -p udp -e dgram -S all || fail=1
  run 1.4k FI_UDP_IFACE=eth0 "" -p udp -e dgram -S 1448 || fail=1
  return $fail
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export -f run all
export tmp lib
bash "$here/netns.sh" -n 2 -- bash -c all
