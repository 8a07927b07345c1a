// The endpoint core's rules through the public API, for every provider
// (man fi_endpoint): what must be bound before fi_enable, and what an
// endpoint answers before and after.
#include "fixture.hpp"

namespace {

using weft_test::domain_test;

class ep_rules : public domain_test {
protected:
  void SetUp() override {
    domain_test::SetUp();
    if (HasFatalFailure()) return;
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    ASSERT_EQ(fi_av_open(domain, &aa, &av, nullptr), 0);
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_TAGGED;
    ASSERT_EQ(fi_cq_open(domain, &ca, &cq, nullptr), 0);
    fi_cntr_attr na{};
    na.events = FI_CNTR_EVENTS_COMP;
    ASSERT_EQ(fi_cntr_open(domain, &na, &cntr, nullptr), 0);
  }
  void TearDown() override {
    for (fid* f : {ep ? &ep->fid : nullptr, cntr ? &cntr->fid : nullptr, cq ? &cq->fid : nullptr,
                   av ? &av->fid : nullptr})
      if (f) {
        EXPECT_EQ(fi_close(f), 0);
      }
    domain_test::TearDown();
  }
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_cntr* cntr = nullptr;
  fid_ep* ep = nullptr;
};

// "All active endpoints must be bound to completion queues": counters alone
// are refused (-FI_ENOCQ, as Debian's libfabric does), a CQ for one
// direction only too; the refusal changes nothing, so the CQ can still be
// bound and the endpoint enabled.
TEST_P(ep_rules, CountersAloneAreNoCompletionQueue) {
  ASSERT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
  ASSERT_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
  ASSERT_EQ(fi_ep_bind(ep, &cntr->fid, FI_SEND | FI_RECV | FI_READ | FI_WRITE), 0);
  EXPECT_EQ(fi_enable(ep), -FI_ENOCQ);
  ASSERT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT), 0);
  EXPECT_EQ(fi_enable(ep), -FI_ENOCQ) << "no CQ for receives";
  ASSERT_EQ(fi_ep_bind(ep, &cq->fid, FI_RECV), 0);
  EXPECT_EQ(fi_enable(ep), 0);
}

// A receive-only endpoint needs its receive CQ alone; a send-only one its
// transmit CQ alone.
TEST_P(ep_rules, OneDirectionOneCompletionQueue) {
  for (uint64_t dir : {uint64_t{FI_SEND}, uint64_t{FI_RECV}}) {
    SCOPED_TRACE(dir == FI_SEND ? "send only" : "receive only");
    for (uint64_t bind : {uint64_t{FI_TRANSMIT}, uint64_t{FI_RECV}}) {
      fi_info* i = fi_dupinfo(info);
      i->caps = (i->caps & ~(FI_SEND | FI_RECV | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ |
                             FI_REMOTE_WRITE)) |
                dir;
      ASSERT_EQ(fi_endpoint(domain, i, &ep, nullptr), 0);
      fi_freeinfo(i);
      ASSERT_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
      ASSERT_EQ(fi_ep_bind(ep, &cq->fid, bind), 0);
      const bool right = (dir == FI_SEND) == (bind == FI_TRANSMIT);
      EXPECT_EQ(fi_enable(ep), right ? 0 : -FI_ENOCQ);
      ASSERT_EQ(fi_close(&ep->fid), 0);
      ep = nullptr;
    }
  }
}

WEFT_ALL_PROVIDERS(ep_rules);

}  // namespace
