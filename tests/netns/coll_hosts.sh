#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The collective suite (tests/unit/test_coll.cpp) over weft's tcp and the
# linked provider with its members spread over "hosts" (network namespaces,
# tests/netns/netns.sh): three hosts, rank r on host r % 3, so a group of 8
# has members on every host and, under the linked provider, peers reached
# over shm and over tcp in one group. SKIPs (77) where namespaces cannot be
# made.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?build dir}
tests=$(cd "$build/tests/bin" && pwd)/weft_unit_tests
[ -x "$tests" ] || { echo "FAIL: $tests not built" >&2; exit 1; }
export tests
# A member that dies is seen within seconds (FI_TCP_USER_TIMEOUT_MS).
bash "$here/netns.sh" -n 3 -- bash -c \
  'FI_TCP_USER_TIMEOUT_MS=3000 FI_TCP_KEEPALIVE_S=1 "$tests" --gtest_filter="mode/coll.*_hosts" --gtest_brief=1'
