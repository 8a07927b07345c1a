#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds a libFuzzer target with Debian's clang and runs it on its committed
# corpus, adding what it finds there.
#   tests/fuzz/run.sh [TARGET] [SECONDS] [extra libFuzzer flags...]
# TARGET: tcp_frame (the tcp wire decoders, the default) or udp_dgram (the
# udp datagram decoder); SECONDS: default 60.
# Needs clang-14 and libclang-rt-14-dev; installs them when missing (the test
# suite only replays the corpora with the normal compiler, so CI does without).
set -euo pipefail
if ! command -v clang++-14 >/dev/null || ! dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null | grep -q "install ok installed"; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang-14 libclang-rt-14-dev
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
target=tcp_frame
case "${1:-}" in tcp_frame | udp_dgram) target=$1; shift ;; esac
secs=${1:-60}
shift || true
out=${WEFT_FUZZ_BUILD:-$root/build-fuzz}
mkdir -p "$out"
case $target in
  tcp_frame) sources=("$root/src/prov/tcp/tcp_frame.cpp" "$root/src/util/atomic_ops.cpp"); max_len=4096 ;;
  udp_dgram) sources=("$root/src/common/iov.cpp"); max_len=2048 ;;
esac
clang++-14 -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -I"$root/src" "$root/tests/fuzz/${target}_fuzz.cpp" "$root/tests/fuzz/${target}_target.cpp" \
  "${sources[@]}" -o "$out/${target}_fuzz"
corpus=$root/tests/fuzz/corpus/$target
# New inputs go to a scratch directory; merge only what adds coverage.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$out/${target}_fuzz" -max_total_time="$secs" -max_len="$max_len" -print_final_stats=1 "$@" "$scratch" "$corpus"
"$out/${target}_fuzz" -merge=1 "$corpus" "$scratch"
