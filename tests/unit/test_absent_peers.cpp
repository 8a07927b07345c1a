// SPDX-License-Identifier: BSD-3-Clause
// util/absent_peers: the rule behind the warning about sends to an address
// where no endpoint appears (white box; tests/compat/missing_peer.sh runs
// the warning itself for shm and tcp).
#include <gtest/gtest.h>

#include <string>

#include "util/absent_peers.hpp"

namespace {

constexpr uint64_t second = 1'000'000'000;

TEST(AbsentPeers, DueOnceAfterTheBound) {
  weft::absent_peers a;
  const uint64_t t0 = 5 * second;
  EXPECT_FALSE(a.due("fi_shm://x:1", t0));  // the first failure starts the clock
  EXPECT_FALSE(a.due("fi_shm://x:1", t0 + weft::absent_peers::bound_ns / 2));
  EXPECT_FALSE(a.due("fi_shm://x:1", t0 + weft::absent_peers::bound_ns - 1));
  EXPECT_TRUE(a.due("fi_shm://x:1", t0 + weft::absent_peers::bound_ns));
  // Never again for that address, however long it lasts.
  EXPECT_FALSE(a.due("fi_shm://x:1", t0 + 2 * weft::absent_peers::bound_ns));
  EXPECT_FALSE(a.due("fi_shm://x:1", t0 + 100 * second));
}

TEST(AbsentPeers, EachAddressOnItsOwn) {
  weft::absent_peers a;
  EXPECT_FALSE(a.due("a", 0));
  EXPECT_FALSE(a.due("b", second / 2));
  EXPECT_TRUE(a.due("a", second));
  EXPECT_FALSE(a.due("b", second));  // b's clock started half a second later
  EXPECT_TRUE(a.due("b", second + second / 2));
  EXPECT_FALSE(a.due("a", 3 * second));
  EXPECT_FALSE(a.due("b", 3 * second));
}

TEST(AbsentPeers, RemembersABoundedNumber) {
  weft::absent_peers a;
  for (size_t i = 0; i < weft::absent_peers::max_tracked; ++i) EXPECT_FALSE(a.due(std::to_string(i), 0));
  // One more address is not remembered: no warning for it, ever.
  EXPECT_FALSE(a.due("one too many", 0));
  EXPECT_FALSE(a.due("one too many", 10 * second));
  // Those remembered still are.
  EXPECT_TRUE(a.due("0", 10 * second));
}

}  // namespace
