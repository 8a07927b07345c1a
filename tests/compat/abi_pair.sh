#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A program built against libfabric 1.17 (Debian 12's headers) and the same
# program built against 2.x (Debian 13's: fi_getinfo@FABRIC_1.8,
# fi_fabric2) run side by side on weft's one libfabric.so.1 and exchange
# tagged messages of 1 B ... 64 KiB, data checked both ways, over shm, tcp
# (loopback) and lnx, each build once server and once client
# (tests/compat/abi_pair.c). About 2 s.
set -euo pipefail
build=${1:?build dir}
v1=$build/tests/compat/abi_pair
v2=$build/tests/compat/abi_pair_v2
[ -x "$v2" ] || { echo "FAIL: $v2 is not built (Debian 13's libfabric-dev: scripts/fetch_fabric2.sh)"; exit 1; }
grep -q 'FABRIC_1.8.*fi_getinfo' <<<"$(objdump -T "$v2")" || { echo "FAIL: $v2 does not bind fi_getinfo@FABRIC_1.8"; exit 1; }
grep -q 'FABRIC_1.3.*fi_getinfo' <<<"$(objdump -T "$v1")" || { echo "FAIL: $v1 does not bind fi_getinfo@FABRIC_1.3"; exit 1; }
export LD_LIBRARY_PATH=$build/lib
export FI_TCP_IFACE=lo
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run() {  # PROV SERVER-BINARY CLIENT-BINARY
  local prov=$1 srv=$2 cli=$3 f=$dir/$1.$RANDOM
  timeout 60 "$srv" "$prov" server "$f" 34 >"$f.srv" 2>&1 &
  local pid=$!
  if ! timeout 60 "$cli" "$prov" client "$f" 34 >"$f.cli" 2>&1; then
    cat "$f.cli" "$f.srv"
    kill "$pid" 2>/dev/null || true
    echo "FAIL: $prov: $(basename "$cli") client against $(basename "$srv") server"
    exit 1
  fi
  wait "$pid" || { cat "$f.srv"; echo "FAIL: $prov: $(basename "$srv") server"; exit 1; }
  echo "ok: $prov: $(tail -1 "$f.srv") / $(tail -1 "$f.cli")"
}
for prov in shm tcp lnx; do
  run "$prov" "$v1" "$v2"
  run "$prov" "$v2" "$v1"
done
echo "1.17 and 2.x programs side by side: OK"
