#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/sweep_regimes.py on made-up sweep runs: a placement whose rounds all
# ran in one regime gets rows for that regime only; a switch inside a round
# is split per program; a stray run 2x off its program's others is not a
# regime of its own.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
raw=$dir/raw
{
  # 0,1: every round fast; ucx's third run is a stray (0.080 against 0.160).
  for r in 1 2 3; do
    echo "0,1 8 floor $r 0.060"
    echo "0,1 8 weft $r 0.090"
    echo "0,1 8 lf $r 0.230"
    [ $r = 3 ] && echo "0,1 8 ucx $r 0.080" || echo "0,1 8 ucx $r 0.160"
  done
  # 1,0: rounds 1 and 2 fast, round 3 slow, and round 2 switched after its
  # floor: weft and lf ran slow there.
  echo "1,0 8 floor 1 0.060"; echo "1,0 8 weft 1 0.090"; echo "1,0 8 lf 1 0.230"; echo "1,0 8 ucx 1 0.160"
  echo "1,0 8 floor 2 0.060"; echo "1,0 8 weft 2 0.290"; echo "1,0 8 lf 2 0.700"; echo "1,0 8 ucx 2 0.160"
  echo "1,0 8 floor 3 0.240"; echo "1,0 8 weft 3 0.285"; echo "1,0 8 lf 3 0.710"; echo "1,0 8 ucx 3 0.161"
  echo "0,0 8 floor 1 4000"; echo "0,0 8 weft 1 5.6"; echo "0,0 8 lf 1 4000"; echo "0,0 8 ucx 1 4004"
} >"$raw"
out=$(python3 "$root/bench/sweep_regimes.py" "$raw")
echo "$out"
fail() { echo "FAIL: $*"; exit 1; }
row() { echo "$out" | grep -F "| $1 | $2 | 8 B |" || true; }
# 0,1: one fast row, none slow; ucx's median is its 0.160 runs' with the stray in them.
[ -n "$(row 0,1 fast)" ] || fail "0,1 has no fast row"
[ -z "$(row 0,1 slow)" ] || fail "0,1 ran fast only but has a slow row"
row 0,1 fast | grep -qF "| 0.0900 (3) |" || fail "0,1 fast: weft is not 0.090 over 3 runs"
row 0,1 fast | grep -qF "| 0.1600 (3) |" || fail "0,1 fast: ucx is not 0.160 over its 3 runs"
# 1,0: weft split by its own values (1 fast, 2 slow), ucx (no gap) in the
# regime most of its rounds' floors were in (fast).
row 1,0 fast | grep -qF "| 0.0900 (1) |" || fail "1,0 fast: weft is not its one fast run"
row 1,0 slow | grep -qF "| 0.2875 (2) |" || fail "1,0 slow: weft is not its two slow runs"
row 1,0 fast | grep -qF "| 0.1600 (3) |" || fail "1,0 fast: ucx is not all of its runs"
[ -n "$(row 0,0 'one CPU')" ] || fail "0,0 has no one-CPU row"
echo "sweep_regimes: ok"
