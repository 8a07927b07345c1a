// SPDX-License-Identifier: BSD-3-Clause
// Scalable endpoints (fi_rx_addr addressing of receive contexts, transmit
// contexts reporting the endpoint as source) and shared transmit / receive
// contexts, across processes, in every mode of every provider.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "fixture.hpp"
#include "spawn.hpp"

namespace {

using weft_test::mp_peer;
using weft_test::mp_run;
using contexts = weft_test::mp_test;

struct cq_set {
  static fid_cq* open(fid_domain* d) {
    fi_cq_attr a{};
    a.format = FI_CQ_FORMAT_TAGGED;
    fid_cq* cq = nullptr;
    EXPECT_EQ(fi_cq_open(d, &a, &cq, nullptr), 0);
    return cq;
  }
};

int wait_one(fid_cq* cq, fi_cq_tagged_entry* e, fi_addr_t* src = nullptr) {
  for (int i = 0; i < 20000000; ++i) {
    ssize_t n = src ? fi_cq_readfrom(cq, e, 1, src) : fi_cq_read(cq, e, 1);
    if (n == 1) return 1;
    if (n != -FI_EAGAIN) return static_cast<int>(n);
  }
  return -FI_ETIMEDOUT;
}

// Exchanges a name over the spawner's endpoints.
std::string swap_names(mp_peer& p, const std::string& mine) {
  char out[128] = {}, in[128] = {};
  strncpy(out, mine.c_str(), sizeof out - 1);
  fi_cq_tagged_entry ce;
  EXPECT_EQ(fi_recv(p.ep, in, sizeof in, nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  EXPECT_EQ(fi_send(p.ep, out, sizeof out, nullptr, p.addr[1 - p.rank], nullptr), 0);
  EXPECT_EQ(p.wait_cq(&ce), 1);
  EXPECT_EQ(p.wait_cq(&ce), 1);
  return in;
}

fi_info* sep_info(mp_peer& p, size_t tx, size_t rx) {
  fi_info* i = fi_dupinfo(p.info);
  i->ep_attr->tx_ctx_cnt = tx;
  i->ep_attr->rx_ctx_cnt = rx;
  return i;
}

// The provider's max_ep_tx_ctx (1: no scalable endpoints).
size_t max_contexts() {
  fi_info* info = weft_test::get_info(weft_test::current_mode().prov);
  EXPECT_NE(info, nullptr);
  const size_t n = info ? info->domain_attr->max_ep_tx_ctx : 0;
  fi_freeinfo(info);
  return n;
}
#define NEEDS_SCALABLE_ENDPOINTS()                                                                     \
  if (const size_t n = max_contexts(); n < 2)                                                          \
  GTEST_SKIP() << "the provider offers no scalable endpoints (max_ep_tx_ctx " << n << ")"

TEST_P(contexts, ScalableEndpointContexts) {
  NEEDS_SCALABLE_ENDPOINTS();
  mp_run(2, [](mp_peer& p) {
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    aa.rx_ctx_bits = 2;
    fid_av* av = nullptr;
    ASSERT_EQ(fi_av_open(p.domain, &aa, &av, nullptr), 0);
    fi_cq_tagged_entry ce;
    if (p.rank == 0) {
      fi_info* info = sep_info(p, 2, 2);
      fid_ep* sep = nullptr;
      ASSERT_EQ(fi_scalable_ep(p.domain, info, &sep, nullptr), 0);
      EXPECT_EQ(sep->fid.fclass, FI_CLASS_SEP);
      ASSERT_EQ(fi_scalable_ep_bind(sep, &av->fid, 0), 0);
      fid_ep *rx0, *rx1, *tx0, *bad = nullptr;
      ASSERT_EQ(fi_rx_context(sep, 0, nullptr, &rx0, nullptr), 0);
      ASSERT_EQ(fi_rx_context(sep, 1, nullptr, &rx1, nullptr), 0);
      ASSERT_EQ(fi_tx_context(sep, 0, nullptr, &tx0, nullptr), 0);
      EXPECT_EQ(fi_rx_context(sep, 2, nullptr, &bad, nullptr), -FI_EINVAL);
      EXPECT_EQ(fi_rx_context(sep, 1, nullptr, &bad, nullptr), -FI_EBUSY);
      EXPECT_EQ(rx0->fid.fclass, FI_CLASS_RX_CTX);
      EXPECT_EQ(tx0->fid.fclass, FI_CLASS_TX_CTX);
      fid_cq* c0 = cq_set::open(p.domain);
      fid_cq* c1 = cq_set::open(p.domain);
      fid_cq* ct = cq_set::open(p.domain);
      ASSERT_EQ(fi_ep_bind(rx0, &c0->fid, FI_RECV), 0);
      ASSERT_EQ(fi_ep_bind(rx1, &c1->fid, FI_RECV), 0);
      ASSERT_EQ(fi_ep_bind(tx0, &ct->fid, FI_TRANSMIT), 0);
      ASSERT_EQ(fi_enable(rx0), 0);
      ASSERT_EQ(fi_enable(rx1), 0);
      ASSERT_EQ(fi_enable(tx0), 0);
      ASSERT_EQ(fi_enable(sep), 0);
      char b0[8] = {}, b1[8] = {};
      ASSERT_EQ(fi_trecv(rx0, b0, sizeof b0, nullptr, FI_ADDR_UNSPEC, 7, 0, nullptr), 0);
      ASSERT_EQ(fi_trecv(rx1, b1, sizeof b1, nullptr, FI_ADDR_UNSPEC, 7, 0, nullptr), 0);
      // Receive contexts cannot send, transmit contexts cannot receive.
      EXPECT_EQ(fi_tsend(rx0, b0, 1, nullptr, 0, 7, nullptr), -FI_ENOSYS);
      EXPECT_EQ(fi_trecv(tx0, b0, 1, nullptr, FI_ADDR_UNSPEC, 7, 0, nullptr), -FI_ENOSYS);
      char name[128];
      size_t len = sizeof name;
      ASSERT_EQ(fi_getname(&sep->fid, name, &len), 0);
      std::string peer = swap_names(p, name);
      fi_addr_t peer_addr;
      ASSERT_EQ(fi_av_insert(av, peer.c_str(), 1, &peer_addr, 0, nullptr), 1);
      ASSERT_EQ(wait_one(c0, &ce), 1);
      EXPECT_STREQ(b0, "ctx0");
      ASSERT_EQ(wait_one(c1, &ce), 1);
      EXPECT_STREQ(b1, "ctx1");
      // Reply through the transmit context.
      ASSERT_EQ(fi_tsend(tx0, "back", 5, nullptr, peer_addr, 9, nullptr), 0);
      ASSERT_EQ(wait_one(ct, &ce), 1);
      p.barrier();
      EXPECT_EQ(fi_close(&sep->fid), -FI_EBUSY);  // contexts still open
      for (fid_ep* c : {rx0, rx1, tx0}) EXPECT_EQ(fi_close(&c->fid), 0);
      EXPECT_EQ(fi_close(&sep->fid), 0);
      for (fid_cq* c : {c0, c1, ct}) EXPECT_EQ(fi_close(&c->fid), 0);
      fi_freeinfo(info);
    } else {
      fid_ep* ep = nullptr;
      ASSERT_EQ(fi_endpoint(p.domain, p.info, &ep, nullptr), 0);
      fid_cq* cq = cq_set::open(p.domain);
      ASSERT_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
      ASSERT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
      ASSERT_EQ(fi_enable(ep), 0);
      char name[128];
      size_t len = sizeof name;
      ASSERT_EQ(fi_getname(&ep->fid, name, &len), 0);
      std::string sep_name = swap_names(p, name);
      fi_addr_t sep_addr;
      ASSERT_EQ(fi_av_insert(av, sep_name.c_str(), 1, &sep_addr, 0, nullptr), 1);
      char reply[8] = {};
      ASSERT_EQ(fi_trecv(ep, reply, sizeof reply, nullptr, FI_ADDR_UNSPEC, 9, 0, nullptr), 0);
      ASSERT_EQ(fi_tsend(ep, "ctx1", 5, nullptr, fi_rx_addr(sep_addr, 1, 2), 7, nullptr), 0);
      ASSERT_EQ(fi_tsend(ep, "ctx0", 5, nullptr, fi_rx_addr(sep_addr, 0, 2), 7, nullptr), 0);
      int sends = 0, got = 0;
      while (sends < 2 || !got) {
        fi_addr_t src = FI_ADDR_NOTAVAIL;
        ASSERT_EQ(wait_one(cq, &ce, &src), 1);
        if (ce.flags & FI_SEND) {
          ++sends;
        } else {
          got = 1;
          EXPECT_STREQ(reply, "back");
          EXPECT_EQ(src, sep_addr) << "a transmit context reports its scalable endpoint as source";
        }
      }
      p.barrier();
      EXPECT_EQ(fi_close(&ep->fid), 0);
      EXPECT_EQ(fi_close(&cq->fid), 0);
    }
    EXPECT_EQ(fi_close(&av->fid), 0);
  });
}

// "If the endpoint only has a single transmit context, then all transmit
// operations are posted directly to the scalable endpoint ... Likewise ...
// a single receive context": CQs and counters bound to the scalable
// endpoint, sends, receives and cancel posted to it. With several contexts
// the scalable endpoint itself moves no data.
TEST_P(contexts, ScalableEndpointWithOneContextIsUsedDirectly) {
  NEEDS_SCALABLE_ENDPOINTS();
  mp_run(2, [](mp_peer& p) {
    fi_cq_tagged_entry ce;
    if (p.rank == 0) {
      fi_info* info = sep_info(p, 1, 1);
      fid_ep* sep = nullptr;
      ASSERT_EQ(fi_scalable_ep(p.domain, info, &sep, nullptr), 0);
      fi_freeinfo(info);
      ASSERT_EQ(fi_scalable_ep_bind(sep, &p.av->fid, 0), 0);
      char b[8] = {};
      EXPECT_EQ(fi_tsend(sep, b, 1, nullptr, 0, 7, nullptr), -FI_EOPBADSTATE) << "no context yet";
      fid_cq* cq = cq_set::open(p.domain);
      fi_cntr_attr ca{};
      ca.events = FI_CNTR_EVENTS_COMP;
      fid_cntr* cntr = nullptr;
      ASSERT_EQ(fi_cntr_open(p.domain, &ca, &cntr, nullptr), 0);
      ASSERT_EQ(fi_scalable_ep_bind(sep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
      ASSERT_EQ(fi_scalable_ep_bind(sep, &cntr->fid, FI_SEND | FI_RECV), 0);
      fid_ep* ctx = nullptr;
      EXPECT_EQ(fi_tx_context(sep, 0, nullptr, &ctx, nullptr), -FI_EBUSY) << "the scalable endpoint's own";
      ASSERT_EQ(fi_enable(sep), 0);
      EXPECT_EQ(fi_scalable_ep_bind(sep, &cq->fid, FI_TRANSMIT), -FI_EOPBADSTATE);
      char in[8] = {}, never[8] = {};
      ASSERT_EQ(fi_trecv(sep, in, sizeof in, nullptr, FI_ADDR_UNSPEC, 7, 0, in), 0);
      ASSERT_EQ(fi_trecv(sep, never, sizeof never, nullptr, FI_ADDR_UNSPEC, 99, 0, never), 0);
      EXPECT_EQ(fi_cancel(&sep->fid, never), 0);
      fi_cq_err_entry err{};
      char name[128];
      size_t len = sizeof name;
      ASSERT_EQ(fi_getname(&sep->fid, name, &len), 0);
      std::string peer = swap_names(p, name);
      fi_addr_t peer_addr;
      ASSERT_EQ(fi_av_insert(p.av, peer.c_str(), 1, &peer_addr, 0, nullptr), 1);
      ASSERT_EQ(wait_one(cq, &ce), -FI_EAVAIL) << "the cancelled receive";
      ASSERT_EQ(fi_cq_readerr(cq, &err, 0), 1);
      EXPECT_EQ(err.err, FI_ECANCELED);
      EXPECT_EQ(err.op_context, never);
      ASSERT_EQ(wait_one(cq, &ce), 1);
      EXPECT_EQ(ce.op_context, in);
      EXPECT_STREQ(in, "one");
      ASSERT_EQ(fi_tsend(sep, "back", 5, nullptr, peer_addr, 9, b), 0);
      ASSERT_EQ(wait_one(cq, &ce), 1);
      EXPECT_EQ(ce.op_context, b);
      EXPECT_EQ(fi_cntr_read(cntr), 2u) << "one send, one receive";
      p.barrier();
      EXPECT_EQ(fi_close(&sep->fid), 0) << "its own contexts close with it";
      EXPECT_EQ(fi_close(&cntr->fid), 0);
      // Two contexts each way: the scalable endpoint itself moves nothing.
      fi_info* two = sep_info(p, 2, 2);
      ASSERT_EQ(fi_scalable_ep(p.domain, two, &sep, nullptr), 0);
      fi_freeinfo(two);
      EXPECT_EQ(fi_scalable_ep_bind(sep, &cq->fid, FI_TRANSMIT), -FI_EINVAL);
      EXPECT_EQ(fi_tsend(sep, b, 1, nullptr, 0, 7, nullptr), -FI_ENOSYS);
      EXPECT_EQ(fi_trecv(sep, b, 1, nullptr, FI_ADDR_UNSPEC, 7, 0, nullptr), -FI_ENOSYS);
      EXPECT_EQ(fi_close(&sep->fid), 0);
      EXPECT_EQ(fi_close(&cq->fid), 0);
    } else {
      char name[128];
      size_t len = sizeof name;
      ASSERT_EQ(fi_getname(&p.ep->fid, name, &len), 0);
      std::string sep_name = swap_names(p, name);
      fi_addr_t sep_addr;
      ASSERT_EQ(fi_av_insert(p.av, sep_name.c_str(), 1, &sep_addr, 0, nullptr), 1);
      char reply[8] = {};
      ASSERT_EQ(fi_trecv(p.ep, reply, sizeof reply, nullptr, FI_ADDR_UNSPEC, 9, 0, reply), 0);
      ASSERT_EQ(fi_tsend(p.ep, "one", 4, nullptr, sep_addr, 7, nullptr), 0);
      bool sent = false, got = false;
      while (!sent || !got) {
        fi_addr_t src = FI_ADDR_NOTAVAIL;
        ASSERT_EQ(p.wait_cq(&ce, nullptr, 10000, &src), 1);
        if (ce.flags & FI_SEND) {
          sent = true;
        } else {
          got = true;
          EXPECT_STREQ(reply, "back");
          EXPECT_EQ(src, sep_addr) << "the scalable endpoint's address";
        }
      }
      p.barrier();
    }
  });
}

TEST_P(contexts, SharedContexts) {
  mp_run(2, [](mp_peer& p) {
    fi_cq_tagged_entry ce;
    if (p.rank == 0) {
      fid_ep* srx = nullptr;
      fid_stx* stx = nullptr;
      ASSERT_EQ(fi_srx_context(p.domain, nullptr, &srx, nullptr), 0);
      ASSERT_EQ(fi_stx_context(p.domain, nullptr, &stx, nullptr), 0);
      EXPECT_EQ(srx->fid.fclass, FI_CLASS_SRX_CTX);
      EXPECT_EQ(stx->fid.fclass, FI_CLASS_STX_CTX);
      fid_ep* eps[2];
      fid_cq* cqs[2];
      // Both endpoints' addresses, whatever their format: [len][bytes] each.
      char both[2][128] = {};
      for (int i = 0; i < 2; ++i) {
        ASSERT_EQ(fi_endpoint(p.domain, p.info, &eps[i], nullptr), 0);
        cqs[i] = cq_set::open(p.domain);
        ASSERT_EQ(fi_ep_bind(eps[i], &p.av->fid, 0), 0);
        ASSERT_EQ(fi_ep_bind(eps[i], &cqs[i]->fid, FI_TRANSMIT | FI_RECV), 0);
        ASSERT_EQ(fi_ep_bind(eps[i], &srx->fid, 0), 0);
        ASSERT_EQ(fi_ep_bind(eps[i], &stx->fid, 0), 0);
        ASSERT_EQ(fi_enable(eps[i]), 0);
        size_t len = sizeof both[i] - 1;
        ASSERT_EQ(fi_getname(&eps[i]->fid, both[i] + 1, &len), 0);
        both[i][0] = static_cast<char>(len);
      }
      EXPECT_EQ(fi_close(&srx->fid), -FI_EBUSY);
      EXPECT_EQ(fi_close(&stx->fid), -FI_EBUSY);
      // Two receives on the shared context serve messages to both endpoints.
      uint64_t v[2] = {};
      ASSERT_EQ(fi_trecv(srx, &v[0], 8, nullptr, FI_ADDR_UNSPEC, 3, 0, &v[0]), 0);
      ASSERT_EQ(fi_trecv(srx, &v[1], 8, nullptr, FI_ADDR_UNSPEC, 3, 0, &v[1]), 0);
      char none[sizeof both] = {};
      ASSERT_TRUE(p.swap_with_peer(both, none, sizeof both));
      ASSERT_EQ(wait_one(cqs[0], &ce), 1);
      ASSERT_EQ(wait_one(cqs[1], &ce), 1);
      EXPECT_EQ(v[0] + v[1], 11u + 22u);
      // Sending through the shared transmit context works from both.
      uint64_t x = 5;
      for (int i = 0; i < 2; ++i) {
        ASSERT_EQ(fi_tsend(eps[i], &x, 8, nullptr, p.addr[1], 4, nullptr), 0);
        ASSERT_EQ(wait_one(cqs[i], &ce), 1);
      }
      p.barrier();
      for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(fi_close(&eps[i]->fid), 0);
        EXPECT_EQ(fi_close(&cqs[i]->fid), 0);
      }
      EXPECT_EQ(fi_close(&srx->fid), 0);
      EXPECT_EQ(fi_close(&stx->fid), 0);
    } else {
      char both[2][128] = {}, none[sizeof both] = {};
      ASSERT_TRUE(p.swap_with_peer(none, both, sizeof both));
      fi_addr_t fa, fb;
      ASSERT_EQ(fi_av_insert(p.av, both[0] + 1, 1, &fa, 0, nullptr), 1);
      ASSERT_EQ(fi_av_insert(p.av, both[1] + 1, 1, &fb, 0, nullptr), 1);
      uint64_t v1 = 11, v2 = 22;
      ASSERT_EQ(fi_tsend(p.ep, &v1, 8, nullptr, fa, 3, nullptr), 0);
      ASSERT_EQ(fi_tsend(p.ep, &v2, 8, nullptr, fb, 3, nullptr), 0);
      uint64_t r[2];
      ASSERT_EQ(fi_trecv(p.ep, &r[0], 8, nullptr, FI_ADDR_UNSPEC, 4, 0, nullptr), 0);
      ASSERT_EQ(fi_trecv(p.ep, &r[1], 8, nullptr, FI_ADDR_UNSPEC, 4, 0, nullptr), 0);
      for (int i = 0; i < 4; ++i) ASSERT_EQ(p.wait_cq(&ce), 1);
      p.barrier();
    }
  });
}

WEFT_MP_SUITE(contexts);

}  // namespace
