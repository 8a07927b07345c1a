// What the libfabric man pages and introduction say about addresses and
// completions, checked across processes in every mode of every provider.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "fixture.hpp"
#include "spawn.hpp"

namespace {

using weft_test::mp_peer;
using weft_test::mp_run;
using semantics = weft_test::mp_test;

// fi_av_insert of NULL: an entry "associated with 'any' address (similar to
// the IPv4 address of 0.0.0.0)". A directed receive from it takes a
// message from whichever peer sends; nothing can be sent to it, or read
// from it (-FI_EINVAL: there is no peer).
TEST_P(semantics, AnyAddressEntryReceivesFromEverySender) {
  mp_run(3, [](mp_peer& p) {
    fi_cq_tagged_entry ce;
    if (p.rank == 0) {
      fi_addr_t any = FI_ADDR_NOTAVAIL;
      ASSERT_EQ(fi_av_insert(p.av, nullptr, 1, &any, 0, nullptr), 1);
      ASSERT_NE(any, FI_ADDR_NOTAVAIL);
      uint64_t in[2] = {};
      for (auto& v : in) ASSERT_EQ(fi_trecv(p.ep, &v, sizeof v, nullptr, any, 5, 0, &v), 0);
      uint64_t x = 1;
      EXPECT_EQ(fi_tsend(p.ep, &x, sizeof x, nullptr, any, 5, nullptr), -FI_EINVAL);
      EXPECT_EQ(fi_tinject(p.ep, &x, sizeof x, any, 5), -FI_EINVAL);
      EXPECT_EQ(fi_read(p.ep, &x, sizeof x, nullptr, any, 0, 0, nullptr), -FI_EINVAL);
      p.barrier();  // the senders go
      fi_addr_t src[2];
      for (int i = 0; i < 2; ++i) {
        ASSERT_EQ(p.wait_cq(&ce, nullptr, 10000, &src[i]), 1);
        EXPECT_EQ(ce.tag, 5u);
      }
      EXPECT_EQ(in[0] + in[1], 101u + 102u) << "one message from each sender";
      EXPECT_NE(src[0], src[1]);
      for (fi_addr_t s : src) EXPECT_TRUE(s == p.addr[1] || s == p.addr[2]) << "the sender, never 'any'";
      // A directed receive from a real peer still waits for that peer.
      uint64_t only = 0;
      ASSERT_EQ(fi_trecv(p.ep, &only, sizeof only, nullptr, p.addr[2], 6, 0, &only), 0);
      p.barrier();
      ASSERT_EQ(p.wait_cq(&ce, nullptr, 10000, &src[0]), 1);
      EXPECT_EQ(src[0], p.addr[2]);
      EXPECT_EQ(only, 202u);
      p.barrier();
    } else {
      p.barrier();
      uint64_t v = 100 + p.rank;
      fi_cq_tagged_entry ce2;
      ASSERT_EQ(fi_tsend(p.ep, &v, sizeof v, nullptr, p.addr[0], 5, nullptr), 0);
      ASSERT_EQ(p.wait_cq(&ce2), 1);
      p.barrier();
      if (p.rank == 1) {  // sent first: a directed receive from rank 2 must not take it
        uint64_t w = 201;
        ASSERT_EQ(fi_tsend(p.ep, &w, sizeof w, nullptr, p.addr[0], 6, nullptr), 0);
        ASSERT_EQ(p.wait_cq(&ce2), 1);
      } else {
        usleep(20000);
        uint64_t w = 202;
        ASSERT_EQ(fi_tsend(p.ep, &w, sizeof w, nullptr, p.addr[0], 6, nullptr), 0);
        ASSERT_EQ(p.wait_cq(&ce2), 1);
      }
      p.barrier();
    }
  });
}

WEFT_MP_SUITE(semantics);

}  // namespace
