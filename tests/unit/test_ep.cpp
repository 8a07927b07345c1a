// SPDX-License-Identifier: BSD-3-Clause
// The endpoint core's rules through the public API, for every provider
// (man fi_endpoint): what must be bound before fi_enable, and what an
// endpoint answers before and after.
#include <rdma/fi_trigger.h>
#include <sys/uio.h>

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

// A connectionless endpoint needs an AV before it is enabled (-FI_ENOAV),
// a scalable endpoint too; the refusal changes nothing.
TEST_P(ep_rules, NoAddressVectorIsRefused) {
  ASSERT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
  ASSERT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
  EXPECT_EQ(fi_enable(ep), -FI_ENOAV);
  ASSERT_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
  EXPECT_EQ(fi_enable(ep), 0);
  if (info->domain_attr->max_ep_tx_ctx > 1) {
    fid_ep* sep = nullptr;
    ASSERT_EQ(fi_scalable_ep(domain, info, &sep, nullptr), 0);
    EXPECT_EQ(fi_enable(sep), -FI_ENOAV);
    ASSERT_EQ(fi_scalable_ep_bind(sep, &av->fid, 0), 0);
    EXPECT_EQ(fi_enable(sep), 0);
    EXPECT_EQ(fi_close(&sep->fid), 0);
  }
}

// Every data operation before fi_enable: -FI_EOPBADSTATE, nothing posted
// (after the enable the CQ is empty).
TEST_P(ep_rules, OperationsBeforeEnableAreRefused) {
  ASSERT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
  ASSERT_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
  ASSERT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
  uint64_t buf[4] = {};
  iovec iov{buf, sizeof buf};
  fi_msg msg{&iov, nullptr, 1, 0, nullptr, 0};
  fi_msg_tagged tmsg{&iov, nullptr, 1, 0, 1, 0, nullptr, 0};
  fi_rma_iov riov{0, sizeof buf, 0};
  fi_msg_rma rmsg{&iov, nullptr, 1, 0, &riov, 1, nullptr, 0};
  fi_ioc ioc{buf, 1};
  fi_rma_ioc rioc{0, 1, 0};
  fi_msg_atomic amsg{&ioc, nullptr, 1, 0, &rioc, 1, FI_UINT64, FI_SUM, nullptr, 0};
  const fi_addr_t to = 0;
  // A family the provider does not offer is -FI_ENOSYS whatever the state.
  const ssize_t tagged = (info->caps & FI_TAGGED) ? -FI_EOPBADSTATE : -FI_ENOSYS;
  const ssize_t rma = (info->caps & FI_RMA) ? -FI_EOPBADSTATE : -FI_ENOSYS;
  const ssize_t atomic = (info->caps & FI_ATOMIC) ? -FI_EOPBADSTATE : -FI_ENOSYS;
  EXPECT_EQ(fi_send(ep, buf, 8, nullptr, to, nullptr), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_sendv(ep, &iov, nullptr, 1, to, nullptr), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_sendmsg(ep, &msg, 0), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_inject(ep, buf, 8, to), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_inject(ep, buf, 256, to), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_senddata(ep, buf, 8, nullptr, 1, to, nullptr), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_injectdata(ep, buf, 8, 1, to), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_recv(ep, buf, 8, nullptr, FI_ADDR_UNSPEC, nullptr), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_recvv(ep, &iov, nullptr, 1, FI_ADDR_UNSPEC, nullptr), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_recvmsg(ep, &msg, 0), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_tsend(ep, buf, 8, nullptr, to, 1, nullptr), tagged);
  EXPECT_EQ(fi_tsendmsg(ep, &tmsg, 0), tagged);
  EXPECT_EQ(fi_tinject(ep, buf, 8, to, 1), tagged);
  EXPECT_EQ(fi_tinjectdata(ep, buf, 8, 1, to, 1), tagged);
  EXPECT_EQ(fi_trecv(ep, buf, 8, nullptr, FI_ADDR_UNSPEC, 1, 0, nullptr), tagged);
  EXPECT_EQ(fi_trecvmsg(ep, &tmsg, 0), tagged);
  EXPECT_EQ(fi_write(ep, buf, 8, nullptr, to, 0, 0, nullptr), rma);
  EXPECT_EQ(fi_writemsg(ep, &rmsg, 0), rma);
  EXPECT_EQ(fi_inject_write(ep, buf, 8, to, 0, 0), rma);
  EXPECT_EQ(fi_writedata(ep, buf, 8, nullptr, 1, to, 0, 0, nullptr), rma);
  EXPECT_EQ(fi_read(ep, buf, 8, nullptr, to, 0, 0, nullptr), rma);
  EXPECT_EQ(fi_readmsg(ep, &rmsg, 0), rma);
  EXPECT_EQ(fi_atomic(ep, buf, 1, nullptr, to, 0, 0, FI_UINT64, FI_SUM, nullptr), atomic);
  EXPECT_EQ(fi_atomicmsg(ep, &amsg, 0), atomic);
  EXPECT_EQ(fi_inject_atomic(ep, buf, 1, to, 0, 0, FI_UINT64, FI_SUM), atomic);
  uint64_t res = 0;
  EXPECT_EQ(fi_fetch_atomic(ep, buf, 1, nullptr, &res, nullptr, to, 0, 0, FI_UINT64, FI_SUM, nullptr),
            atomic);
  EXPECT_EQ(fi_compare_atomic(ep, buf, 1, nullptr, buf + 1, nullptr, &res, nullptr, to, 0, 0, FI_UINT64,
                              FI_CSWAP, nullptr),
            atomic);
  ASSERT_EQ(fi_enable(ep), 0);
  fi_cq_tagged_entry ce;
  EXPECT_EQ(fi_cq_read(cq, &ce, 1), -FI_EAGAIN) << "nothing was posted";
}

// The info's tx_attr/rx_attr op_flags are the endpoint's default flags
// (FI_GETOPSFLAG reads them, FI_SETOPSFLAG replaces them, one direction
// per call); semantics.DefaultOpFlagsDecideCompletions checks their effect.
TEST_P(ep_rules, DefaultOpFlagsComeFromTheInfo) {
  fi_info* i = fi_dupinfo(info);
  i->tx_attr->op_flags = FI_COMPLETION | FI_TRANSMIT_COMPLETE;
  i->rx_attr->op_flags = FI_COMPLETION;
  ASSERT_EQ(fi_endpoint(domain, i, &ep, nullptr), 0);
  fi_freeinfo(i);
  uint64_t f = FI_TRANSMIT;
  ASSERT_EQ(fi_control(&ep->fid, FI_GETOPSFLAG, &f), 0);
  EXPECT_EQ(f, FI_TRANSMIT | FI_COMPLETION | FI_TRANSMIT_COMPLETE);
  f = FI_RECV;
  ASSERT_EQ(fi_control(&ep->fid, FI_GETOPSFLAG, &f), 0);
  EXPECT_EQ(f, FI_RECV | FI_COMPLETION);
  f = FI_TRANSMIT | FI_INJECT_COMPLETE;
  ASSERT_EQ(fi_control(&ep->fid, FI_SETOPSFLAG, &f), 0);
  f = FI_TRANSMIT;
  ASSERT_EQ(fi_control(&ep->fid, FI_GETOPSFLAG, &f), 0);
  EXPECT_EQ(f, FI_TRANSMIT | FI_INJECT_COMPLETE);
  f = FI_TRANSMIT | FI_RECV;
  EXPECT_EQ(fi_control(&ep->fid, FI_GETOPSFLAG, &f), -FI_EINVAL);
  EXPECT_EQ(fi_control(&ep->fid, FI_SETOPSFLAG, &f), -FI_EINVAL);
  f = FI_COMPLETION;
  EXPECT_EQ(fi_control(&ep->fid, FI_SETOPSFLAG, &f), -FI_EINVAL) << "no direction";
  EXPECT_EQ(fi_control(&ep->fid, FI_GETOPSFLAG, nullptr), -FI_EINVAL);
}

// ------------------------------------------------------------------ options
// What an object of one kind answers (docs/design.md, "Endpoint options").
struct opt_expect {
  bool multi_recv;  // FI_OPT_MIN_MULTI_RECV read and written
  bool cm_data;     // FI_OPT_CM_DATA_SIZE read (never written)
  size_t cm_size;
};

// Every FI_OPT_* of fi_endpoint.h on one object.
void check_options(fid_t f, const opt_expect& x) {
  size_t v = 0, len = sizeof v;
  EXPECT_EQ(fi_getopt(f, FI_OPT_ENDPOINT + 1, FI_OPT_MIN_MULTI_RECV, &v, &len), -FI_ENOPROTOOPT);
  EXPECT_EQ(fi_setopt(f, FI_OPT_ENDPOINT + 1, FI_OPT_MIN_MULTI_RECV, &v, sizeof v), -FI_ENOPROTOOPT);
  // FI_OPT_MIN_MULTI_RECV
  if (x.multi_recv) {
    len = sizeof v;
    ASSERT_EQ(fi_getopt(f, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, &len), 0);
    EXPECT_EQ(len, sizeof v);
    EXPECT_EQ(v, 64u) << "the default";
    const size_t want = 1000;
    EXPECT_EQ(fi_setopt(f, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &want, sizeof want), 0);
    EXPECT_EQ(fi_setopt(f, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &want, 4), -FI_EINVAL);
    EXPECT_EQ(fi_setopt(f, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, nullptr, sizeof want), -FI_EINVAL);
    len = 4;
    EXPECT_EQ(fi_getopt(f, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, &len), -FI_ETOOSMALL);
    EXPECT_EQ(len, sizeof v) << "the length it needs";
    EXPECT_EQ(fi_getopt(f, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, nullptr, &len), -FI_EINVAL);
    ASSERT_EQ(fi_getopt(f, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, &len), 0);
    EXPECT_EQ(v, want);
  } else {
    len = sizeof v;
    EXPECT_EQ(fi_getopt(f, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, &len), -FI_ENOPROTOOPT);
    EXPECT_EQ(fi_setopt(f, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, sizeof v), -FI_ENOPROTOOPT);
  }
  // FI_OPT_CM_DATA_SIZE: read only.
  len = sizeof v;
  if (x.cm_data) {
    v = 12345;
    ASSERT_EQ(fi_getopt(f, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &v, &len), 0);
    EXPECT_EQ(v, x.cm_size);
  } else {
    EXPECT_EQ(fi_getopt(f, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &v, &len), -FI_ENOPROTOOPT);
  }
  EXPECT_EQ(fi_setopt(f, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &v, sizeof v), -FI_ENOPROTOOPT);
  // Options for modes and memory weft does not offer (FI_BUFFERED_RECV,
  // FI_HMEM), and the sizes the header names beyond the man page.
  for (int o : {FI_OPT_BUFFERED_MIN, FI_OPT_BUFFERED_LIMIT, FI_OPT_SEND_BUF_SIZE, FI_OPT_RECV_BUF_SIZE,
                FI_OPT_TX_SIZE, FI_OPT_RX_SIZE, FI_OPT_FI_HMEM_P2P}) {
    SCOPED_TRACE(o);
    size_t big = 4096;
    len = sizeof big;
    EXPECT_EQ(fi_getopt(f, FI_OPT_ENDPOINT, o, &big, &len), -FI_ENOPROTOOPT);
    EXPECT_EQ(fi_setopt(f, FI_OPT_ENDPOINT, o, &big, sizeof big), -FI_ENOPROTOOPT);
  }
  // FI_OPT_XPU_TRIGGER: fi_getopt only; no device triggers operations here.
  fi_trigger_xpu xpu{};
  len = sizeof xpu;
  EXPECT_EQ(fi_getopt(f, FI_OPT_ENDPOINT, FI_OPT_XPU_TRIGGER, &xpu, &len), -FI_EOPNOTSUPP);
  EXPECT_EQ(fi_setopt(f, FI_OPT_ENDPOINT, FI_OPT_XPU_TRIGGER, &xpu, sizeof xpu), -FI_ENOPROTOOPT);
}

// Every option on every kind of endpoint object the provider makes: the
// endpoint (and an alias of it, which shares its options), a shared
// receive and a shared transmit context, a scalable endpoint and its
// contexts; for tcp the MSG endpoint and the passive endpoint too.
TEST_P(ep_rules, EveryOptionOnEveryKind) {
  ASSERT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
  {
    SCOPED_TRACE("endpoint");
    check_options(&ep->fid, {true, true, 0});
  }
  fid* al = nullptr;
  struct fi_alias alias_arg{&al, FI_TRANSMIT};
  ASSERT_EQ(fi_control(&ep->fid, FI_ALIAS, &alias_arg), 0);
  size_t v = 0, len = sizeof v;
  ASSERT_EQ(fi_getopt(al, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, &len), 0);
  EXPECT_EQ(v, 1000u) << "an alias reads its endpoint's options";
  EXPECT_EQ(fi_close(al), 0);
  if (info->domain_attr->max_ep_srx_ctx && info->domain_attr->max_ep_stx_ctx) {
    fid_ep* srx = nullptr;
    ASSERT_EQ(fi_srx_context(domain, nullptr, &srx, nullptr), 0);
    {
      SCOPED_TRACE("shared receive context");
      check_options(&srx->fid, {true, false, 0});
    }
    fid_stx* stx = nullptr;
    ASSERT_EQ(fi_stx_context(domain, nullptr, &stx, nullptr), 0);
    {
      SCOPED_TRACE("shared transmit context");
      check_options(&stx->fid, {false, false, 0});
    }
    // An endpoint bound to the shared receive context posts its receives
    // there: it reads and sets the shared context's minimum.
    fid_ep* bound = nullptr;
    ASSERT_EQ(fi_endpoint(domain, info, &bound, nullptr), 0);
    ASSERT_EQ(fi_ep_bind(bound, &srx->fid, 0), 0);
    len = sizeof v;
    ASSERT_EQ(fi_getopt(&bound->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, &len), 0);
    EXPECT_EQ(v, 1000u);
    EXPECT_EQ(fi_close(&bound->fid), 0);
    EXPECT_EQ(fi_close(&stx->fid), 0);
    EXPECT_EQ(fi_close(&srx->fid), 0);
  }
  if (info->domain_attr->max_ep_tx_ctx > 1) {
    fi_info* i = fi_dupinfo(info);
    i->ep_attr->tx_ctx_cnt = 2;
    i->ep_attr->rx_ctx_cnt = 2;
    fid_ep *sep = nullptr, *tx = nullptr, *rx = nullptr;
    ASSERT_EQ(fi_scalable_ep(domain, i, &sep, nullptr), 0);
    fi_freeinfo(i);
    {
      SCOPED_TRACE("scalable endpoint");
      check_options(&sep->fid, {true, true, 0});
    }
    ASSERT_EQ(fi_tx_context(sep, 0, nullptr, &tx, nullptr), 0);
    ASSERT_EQ(fi_rx_context(sep, 0, nullptr, &rx, nullptr), 0);
    len = sizeof v;
    ASSERT_EQ(fi_getopt(&rx->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, &len), 0);
    EXPECT_EQ(v, 1000u) << "a receive context takes its scalable endpoint's minimum";
    const size_t dflt = 64;
    ASSERT_EQ(fi_setopt(&rx->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &dflt, sizeof dflt), 0);
    {
      SCOPED_TRACE("transmit context");
      check_options(&tx->fid, {false, false, 0});
    }
    {
      SCOPED_TRACE("receive context");
      check_options(&rx->fid, {true, false, 0});
    }
    EXPECT_EQ(fi_close(&tx->fid), 0);
    EXPECT_EQ(fi_close(&rx->fid), 0);
    EXPECT_EQ(fi_close(&sep->fid), 0);
  }
  if (std::string(GetParam()) == "tcp") {
    fi_info* m = weft_test::get_info("tcp", FI_EP_MSG);
    ASSERT_NE(m, nullptr);
    fid_fabric* fab = nullptr;
    fid_domain* dom = nullptr;
    fid_ep* mep = nullptr;
    fid_pep* pep = nullptr;
    ASSERT_EQ(fi_fabric(m->fabric_attr, &fab, nullptr), 0);
    ASSERT_EQ(fi_domain(fab, m, &dom, nullptr), 0);
    ASSERT_EQ(fi_endpoint(dom, m, &mep, nullptr), 0);
    {
      SCOPED_TRACE("MSG endpoint");
      check_options(&mep->fid, {true, true, 256});
    }
    ASSERT_EQ(fi_passive_ep(fab, m, &pep, nullptr), 0);
    {
      SCOPED_TRACE("passive endpoint");
      check_options(&pep->fid, {false, true, 256});
    }
    EXPECT_EQ(fi_close(&pep->fid), 0);
    EXPECT_EQ(fi_close(&mep->fid), 0);
    EXPECT_EQ(fi_close(&dom->fid), 0);
    EXPECT_EQ(fi_close(&fab->fid), 0);
    fi_freeinfo(m);
  }
}

WEFT_ALL_PROVIDERS(ep_rules);

}  // namespace
