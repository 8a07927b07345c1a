#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The datagram suite over weft's udp with every rank on its own "host" (a
# network namespace, tests/netns/netns.sh): three hosts on a clean link, so
# the multicast test has its sender and both receivers on different hosts;
# then two hosts on a link whose MTU (1280) is below the 1500 udp sizes its
# datagrams for: a message that does not fit is refused, never fragmented.
# SKIPs (77) where namespaces cannot be made.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?build dir}
tests=$(cd "$build/tests/bin" && pwd)/weft_unit_tests
[ -x "$tests" ] || { echo "FAIL: $tests not built" >&2; exit 1; }
export tests
# Every rank takes its namespace's eth0 address (FI_UDP_IFACE, set by the
# udp_hosts mode).
echo "== three hosts"
bash "$here/netns.sh" -n 3 -- bash -c '"$tests" --gtest_filter="dgram/*udp_hosts*" --gtest_brief=1'
rc=$?
((rc == 77)) && exit 77
fail=$rc
echo "== two hosts, MTU 1280"
bash "$here/netns.sh" -n 2 --mtu 1280 -- \
  bash -c '"$tests" --gtest_filter="dgram/udp_mp.RouteMtuRefusesRatherThanFragments/udp_hosts" --gtest_brief=1'
rc=$?
((rc)) && fail=1
exit $fail
