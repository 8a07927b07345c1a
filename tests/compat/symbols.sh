#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# weft's libfabric.so.1 has libfabric's SONAME and exports exactly the
# symbols and version nodes of libfabric 1.0 ... 2.6 (FABRIC_1.0 ... 1.9,
# listed below): everything Debian 12's libfabric1 1.17 and Debian 13's 2.1
# export (their default versions may be older nodes of weft's), nothing else.
set -euo pipefail
build=${1:?build dir}
weft=$build/lib/libfabric.so.1
# "NODE symbol", "(NODE) symbol" for a version that is not the default.
list() { objdump -T "$1" | awk '$2 == "g" && $4 != "*UND*" && $NF !~ /^_/ {print $(NF-1), $NF}' | sort -u; }
nodes() { sed 's/[()]//g' | sort -u; }
expected="FABRIC_1.0 FABRIC_1.0
FABRIC_1.0 fi_freeparams
FABRIC_1.0 fi_getparams
FABRIC_1.0 fi_log
FABRIC_1.0 fi_log_enabled
FABRIC_1.0 fi_param_define
FABRIC_1.0 fi_param_get
FABRIC_1.0 fi_strerror
FABRIC_1.0 fi_tostr
FABRIC_1.0 fi_version
FABRIC_1.1 FABRIC_1.1
FABRIC_1.1 fi_fabric
FABRIC_1.2 FABRIC_1.2
FABRIC_1.3 FABRIC_1.3
FABRIC_1.4 FABRIC_1.4
FABRIC_1.4 fi_tostr_r
FABRIC_1.5 FABRIC_1.5
FABRIC_1.5 fi_open
FABRIC_1.6 FABRIC_1.6
FABRIC_1.6 fi_log_ready
FABRIC_1.7 FABRIC_1.7
FABRIC_1.8 FABRIC_1.8
FABRIC_1.8 fi_fabric2
FABRIC_1.9 FABRIC_1.9
FABRIC_1.9 fi_dupinfo
FABRIC_1.9 fi_freeinfo
FABRIC_1.9 fi_getinfo"
for n in 1.0 1.1 1.2 1.3 1.7 1.8; do
  for s in fi_dupinfo fi_freeinfo fi_getinfo; do expected+=$'\n'"(FABRIC_$n) $s"; done
done
expected+=$'\n'"(FABRIC_1.0) fi_fabric"
diff -u <(sort -u <<<"$expected") <(list "$weft")
# (capture first: grep -q closing the pipe early would fail objdump under pipefail)
headers=$(objdump -p "$weft")
grep -q 'SONAME *libfabric.so.1$' <<<"$headers"
echo "symbols: $(list "$weft" | wc -l) exported, libfabric 1.0 ... 2.6's"

# Every node and symbol of the real libraries is there (default or not).
check_real() {
  local real=$1 missing
  missing=$(comm -23 <(list "$real" | nodes) <(list "$weft" | nodes))
  [ -z "$missing" ] || { echo "FAIL: weft lacks what $real exports: $missing"; exit 1; }
  echo "ok: everything $real exports"
}
real12=/usr/lib/x86_64-linux-gnu/libfabric.so.1
if [ -e "$real12" ]; then check_real "$real12"; else echo "note: $real12 missing (libfabric1)"; fi
real13=${WEFT_FABRIC2_ROOT:+$WEFT_FABRIC2_ROOT/usr/lib/x86_64-linux-gnu/libfabric.so.1}
[ -n "$real13" ] && [ -e "$real13" ] || { echo "FAIL: Debian 13's libfabric1 not fetched (scripts/fetch_fabric2.sh)"; exit 1; }
check_real "$real13"
