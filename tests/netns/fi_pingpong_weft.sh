#!/usr/bin/env bash
# Debian's fi_pingpong over weft's tcp provider (LD_LIBRARY_PATH only),
# between two network namespaces: RDM and MSG endpoints, msg and tagged
# modes, every size, data checked. SKIPs (77) where namespaces cannot be made.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?build dir}
command -v fi_pingpong >/dev/null || { echo "SKIP: no fi_pingpong (libfabric-bin)" >&2; exit 77; }
lib=$(cd "$build/lib" && pwd)

run() {
  local ep=$1 mode=$2
  local args=(-p tcp -e "$ep" -m "$mode" -I 10 -S all -c)
  # Each side takes its host's eth0 address (FI_TCP_IFACE): peers reach it there.
  ip netns exec "$WEFT_NS_2" env LD_LIBRARY_PATH="$lib" FI_TCP_IFACE=eth0 timeout 90 fi_pingpong "${args[@]}" \
    >"$tmp/server.log" 2>&1 &
  local srv=$! ok=1
  for _ in $(seq 30); do
    if ip netns exec "$WEFT_NS_1" env LD_LIBRARY_PATH="$lib" FI_TCP_IFACE=eth0 timeout 90 fi_pingpong "${args[@]}" "$WEFT_ADDR_2" \
      >"$tmp/client.log" 2>&1; then
      ok=0
      break
    fi
    grep -qi "refused\|connect" "$tmp/client.log" || break
    sleep 0.2
  done
  wait "$srv"
  local src=$?
  echo "== fi_pingpong -p tcp -e $ep -m $mode -S all -c, host 1 -> host 2 over weft: $(grep -c '^[0-9]' "$tmp/client.log") sizes"
  tail -n 2 "$tmp/client.log"
  if ((ok != 0 || src != 0)); then
    echo "--- client"; cat "$tmp/client.log"; echo "--- server"; cat "$tmp/server.log"
    echo "FAIL: client $ok server $src" >&2
    return 1
  fi
  grep -q "^4m\|^ *4m" "$tmp/client.log" || { echo "FAIL: the largest sizes did not run" >&2; return 1; }
}

all() {
  local fail=0
  for ep in rdm msg; do
    for mode in msg tagged; do run "$ep" "$mode" || fail=1; done
  done
  return $fail
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export -f run all
export tmp lib
bash "$here/netns.sh" -n 2 -- bash -c all
