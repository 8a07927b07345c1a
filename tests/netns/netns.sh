#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A throw-away network of two or three "hosts" for multi-host tests: each
# host is a network namespace with one interface (eth0) on a private subnet
# (10.250.0.0/24) that exists only inside these namespaces; the hosts meet on
# a bridge in a fourth, switch namespace. Nothing is added to the caller's
# namespace, so no traffic can leave loopback and these namespaces.
#
#   netns.sh [-n HOSTS] [--delay D] [--loss P] [--mtu M] -- COMMAND [ARGS...]
#
#   -n HOSTS    2 (default) or 3
#   --delay D   tc netem delay on every host's eth0, e.g. 2ms (units us, ms, s)
#   --loss P    tc netem loss on every host's eth0, e.g. 1%.
#               A kernel without sch_netem: the hosts meet on delay_link (a
#               hub in the switch namespace that forwards every frame after D
#               and drops P percent at random: tests/netns/delay_link.cpp)
#               instead of the bridge, when WEFT_DELAY_LINK names its binary.
#               Without it, packets are dropped by an nftables rule (random,
#               P percent of what each host receives) and a delay cannot be
#               made: it is left out (said on stderr, WEFT_NS_DELAY is empty).
#   --mtu M     interface MTU (default 1500)
#
# COMMAND runs in the caller's namespace with, for host i (1-based):
#   WEFT_NS_DELAY  the delay in force ("" when none could be made)
#   WEFT_NS_i    the namespace name (run there: ip netns exec "$WEFT_NS_i" ...)
#   WEFT_ADDR_i  its address (10.250.0.i)
#   WEFT_NS_HOSTS  the number of hosts
# Its exit status is netns.sh's. Everything is removed on exit, whatever
# happens (processes left in the namespaces are killed first).
#
# Exit 77 (ctest SKIP_RETURN_CODE) with the reason on stderr when the
# network cannot be made: not root, no `ip`, namespaces or veth refused.
set -uo pipefail

skip() { echo "SKIP: $*" >&2; exit 77; }

hosts=2 delay="" loss="" mtu=1500
while (($#)); do
  case "$1" in
    -n) hosts=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --loss) loss=$2; shift 2 ;;
    --mtu) mtu=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "netns.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
(($#)) || { echo "usage: netns.sh [-n 2|3] [--delay D] [--loss P] [--mtu M] -- COMMAND..." >&2; exit 2; }
[[ $hosts == 2 || $hosts == 3 ]] || { echo "netns.sh: -n must be 2 or 3" >&2; exit 2; }

[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces and veth pairs)"
command -v ip >/dev/null || skip "no ip command (iproute2)"
if [[ -n $delay || -n $loss ]]; then command -v tc >/dev/null || skip "no tc command (iproute2)"; fi

tag="wft$$"
sw="${tag}sw"
made=()
cleanup() {
  local ns
  for ns in "${made[@]}"; do
    # Whatever still runs in a namespace goes with it.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$sw" 2>/dev/null || skip "ip netns add refused (no CAP_SYS_ADMIN or no namespace support)"
made+=("$sw")
ip -n "$sw" link add br0 type bridge || skip "no bridge support"
ip -n "$sw" link set br0 up
ip -n "$sw" link set lo up

# How the link gets its delay and loss: tc netem on each host, else the
# delay_link hub, else (loss only) nftables.
impair=""
if [[ -n $delay || -n $loss ]]; then
  if ip netns exec "$sw" tc qdisc add dev br0 root netem delay 1ms 2>/dev/null; then
    ip netns exec "$sw" tc qdisc del dev br0 root 2>/dev/null
    impair=netem
  elif [[ -n ${WEFT_DELAY_LINK:-} && -x ${WEFT_DELAY_LINK:-} ]]; then
    impair=hub
  else
    impair=nft
  fi
fi
delay_us() {  # 2ms, 500us, 1s, 1.5ms -> microseconds
  awk -v d="$1" 'BEGIN { n = d + 0; u = d; sub(/^[0-9.]+/, "", u);
    m = (u == "us" ? 1 : u == "ms" || u == "" ? 1000 : u == "s" ? 1000000 : -1);
    if (m < 0) exit 1; printf "%d\n", n * m }'
}

for ((i = 1; i <= hosts; i++)); do
  ns="${tag}h$i"
  ip netns add "$ns" || { echo "netns.sh: cannot add $ns" >&2; exit 1; }
  made+=("$ns")
  # The pair is created inside the switch namespace, then one end moves:
  # neither end ever exists in the caller's namespace.
  ip -n "$sw" link add "p$i" type veth peer name eth0 netns "$ns" || skip "veth pairs refused"
  if [[ $impair == hub ]]; then
    ip -n "$sw" link set "p$i" mtu "$mtu" up  # delay_link forwards, not the bridge
  else
    ip -n "$sw" link set "p$i" master br0 mtu "$mtu" up
  fi
  ip -n "$ns" link set lo up
  ip -n "$ns" link set eth0 mtu "$mtu" up
  ip -n "$ns" addr add "10.250.0.$i/24" dev eth0
  if [[ $impair == netem || $impair == nft ]]; then
    if ! ip netns exec "$ns" tc qdisc add dev eth0 root netem ${delay:+delay $delay} ${loss:+loss $loss} 2>/dev/null; then
      [[ -n $loss ]] && command -v nft >/dev/null || skip "tc netem refused (sch_netem not available) and no nft"
      pct=${loss%%%}
      ip netns exec "$ns" nft add table inet weft_loss &&
        ip netns exec "$ns" nft add chain inet weft_loss input '{ type filter hook input priority 0; }' &&
        ip netns exec "$ns" nft add rule inet weft_loss input iifname eth0 numgen random mod 100 "<" "$pct" drop ||
        skip "neither tc netem nor nftables can drop packets here"
      [[ -n $delay ]] && echo "netns.sh: no sch_netem: $loss loss by nftables, no $delay delay" >&2
      delay=""
    fi
  fi
  export "WEFT_NS_$i=$ns" "WEFT_ADDR_$i=10.250.0.$i"
done
if [[ $impair == hub ]]; then
  us=$(delay_us "${delay:-0}") || { echo "netns.sh: cannot read the delay $delay" >&2; exit 2; }
  ports=()
  for ((i = 1; i <= hosts; i++)); do ports+=("p$i"); done
  ip netns exec "$sw" "$WEFT_DELAY_LINK" --delay-us "$us" --loss "$(l=${loss:-0}; echo "${l%%%}")" "${ports[@]}" &
  hub=$!
  sleep 0.2
  kill -0 "$hub" 2>/dev/null || { echo "netns.sh: delay_link did not start" >&2; exit 1; }
  echo "netns.sh: no sch_netem: the hosts meet on delay_link (${delay:-no} delay, ${loss:-no} loss)" >&2
fi
export WEFT_NS_HOSTS=$hosts WEFT_NS_DELAY=$delay

# Wait until every link is up on both ends (no STP: bridge ports forward at once).
for ((i = 1; i <= hosts; i++)); do
  ok=0
  for _ in $(seq 50); do
    if ip -n "${tag}h$i" -o link show eth0 | grep -q LOWER_UP && ip -n "$sw" -o link show "p$i" | grep -q LOWER_UP; then
      ok=1
      break
    fi
    sleep 0.1
  done
  ((ok)) || { echo "netns.sh: the link of host $i did not come up" >&2; exit 1; }
done

"$@"
