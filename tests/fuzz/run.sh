#!/usr/bin/env bash
# Builds the libFuzzer target for the tcp wire decoders with Debian's clang
# and runs it on the committed corpus, adding what it finds there.
#   tests/fuzz/run.sh [SECONDS] [extra libFuzzer flags...]     (default 60 s)
# Needs clang-14 and libclang-rt-14-dev; installs them when missing (the test
# suite only replays the corpus with the normal compiler, so CI does without).
set -euo pipefail
if ! command -v clang++-14 >/dev/null || ! dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null | grep -q "install ok installed"; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang-14 libclang-rt-14-dev
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-60}
shift || true
out=${WEFT_FUZZ_BUILD:-$root/build-fuzz}
mkdir -p "$out"
clang++-14 -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -I"$root/src" "$root/tests/fuzz/tcp_frame_fuzz.cpp" "$root/tests/fuzz/tcp_frame_target.cpp" \
  "$root/src/prov/tcp/tcp_frame.cpp" "$root/src/util/atomic_ops.cpp" -o "$out/tcp_frame_fuzz"
corpus=$root/tests/fuzz/corpus/tcp_frame
# New inputs go to a scratch directory; merge only what adds coverage.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$out/tcp_frame_fuzz" -max_total_time="$secs" -max_len=4096 -print_final_stats=1 "$@" "$scratch" "$corpus"
"$out/tcp_frame_fuzz" -merge=1 "$corpus" "$scratch"
