#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# line_offsets.sh [CPU_A CPU_B [REPS]]: what moving one cache line between
# two CPUs costs by where the line lies in its 1 KiB block of addresses.
# Runs `cacheline-pingpong CPU_A CPU_B 20000 OFFSET` for the 16 line offsets
# of a 1 KiB block (both lines of a run at the same offset of two pages),
# REPS times each (default 8) in shuffled order, and prints per offset the
# median and the least of floor_batched_ns (one-way ns). Where the result
# comes from and what weft's cells make of it: docs/shm-protocol.md, "Where
# a cell's lines lie".
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:-0} B=${2:-1} REPS=${3:-8}
bin=${BUILD:-build}/bin/cacheline-pingpong
[ -x "$bin" ] || { echo "line_offsets.sh: $bin not built (make build)" >&2; exit 2; }
for r in $(seq "$REPS"); do for o in $(seq 0 64 960); do echo "$o"; done; done | shuf |
  while read -r o; do echo "$o $("$bin" "$A" "$B" 20000 "$o" | awk '/floor_batched_ns/{print $2}')"; done |
  sort -n -k1,1 -k2,2 | awk '
    { v[$1] = v[$1] " " $2; n[$1]++ }
    END {
      printf "offset  median_ns  least_ns   (CPUs '"$A"','"$B"', %d runs an offset)\n", n[0]
      for (o = 0; o < 1024; o += 64) {
        split(substr(v[o], 2), a, " ")
        k = n[o]; med = (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
        printf "%6d  %9.1f  %8.1f\n", o, med, a[1]
      }
    }'
