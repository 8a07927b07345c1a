#!/usr/bin/env bash
# weft's libfabric.so.1 exports exactly the symbols and version nodes of
# Debian's libfabric1 1.17, and has its SONAME.
set -euo pipefail
build=${1:?build dir}
weft=$build/lib/libfabric.so.1
real=/usr/lib/x86_64-linux-gnu/libfabric.so.1
[ -e "$real" ] || { echo "SKIP: $real missing (install libfabric1)"; exit 0; }
list() { objdump -T "$1" | awk '$2 == "g" && $4 != "*UND*" && $NF !~ /^_/ {print $(NF-1), $NF}' | sort; }
diff -u <(list "$real") <(list "$weft")
# (capture first: grep -q closing the pipe early would fail objdump under pipefail)
headers=$(objdump -p "$weft")
grep -q 'SONAME *libfabric.so.1$' <<<"$headers"
echo "symbols: $(list "$weft" | wc -l) exported, identical to $real"
