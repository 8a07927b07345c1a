#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# An rsh/ssh stand-in for MPI launchers (MPICH's Hydra: -launcher ssh
# -launcher-exec; Open MPI: --mca plm_rsh_agent): ns_rsh.sh [options] HOST
# COMMAND... runs COMMAND in the network namespace whose address is HOST,
# from tests/netns/netns.sh's WEFT_NS_HOSTS, WEFT_NS_i and WEFT_ADDR_i.
# Options an ssh client would take are skipped.
# (Also run inside the Debian 13 root, where /run/netns is mounted.)
while [ $# -gt 0 ]; do
  case "$1" in
    -o | -p | -l | -i | -F) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
host=$1
shift
i=1
while [ "$i" -le "${WEFT_NS_HOSTS:-0}" ]; do
  eval "addr=\${WEFT_ADDR_$i:-} ns=\${WEFT_NS_$i:-}"
  if [ "$addr" = "$host" ]; then
    # Every namespace shares this machine's host name and /tmp: a temporary
    # directory of its own keeps the daemons' session files apart (Open
    # MPI's orted on two "hosts" otherwise race for one session directory).
    tmp="${WEFT_NS_TMP:-/tmp}/$ns"
    mkdir -p "$tmp"
    # WEFT_NS_UTS set: the command also gets a host name of its own (the
    # namespace's name), as PRRTE (Open MPI 5) tells hosts apart by name.
    if [ -n "${WEFT_NS_UTS:-}" ]; then
      # shellcheck disable=SC2016
      set -- unshare --uts sh -c 'echo "$0" >/proc/sys/kernel/hostname && exec "$@"' "$ns" env TMPDIR="$tmp" sh -c "$*"
    else
      set -- env TMPDIR="$tmp" sh -c "$*"
    fi
    # Without iproute2 (a minimal root, tests/peer/trixie_root.sh), nsenter
    # enters the namespace's network the same way.
    if command -v ip >/dev/null; then
      exec ip netns exec "$ns" "$@"
    fi
    exec nsenter --net="/run/netns/$ns" "$@"
  fi
  i=$((i + 1))
done
echo "ns_rsh.sh: no namespace has the address $host" >&2
exit 255
