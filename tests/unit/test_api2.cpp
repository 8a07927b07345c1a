// SPDX-License-Identifier: BSD-3-Clause
// The 2.x API for a caller that asks for FI_VERSION(2, x), and the same
// calls at 1.17: what 1.18 ... 2.6 added is answered, what 2.0 removed is
// refused to 2.x callers and still honoured for 1.x ones (fi_getinfo(3),
// fi_domain(3) of 2.x). The attributes libfabric 2.x's headers added are
// reached through weft's own layout (core/fabric2.hpp). About 0.3 s.
#include "fixture.hpp"

#include <rdma/fi_tagged.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "core/fabric2.hpp"

namespace {

using weft::tail_of;
constexpr uint32_t v117 = FI_VERSION(1, 17);
constexpr uint32_t v21 = FI_VERSION(2, 1);

// fi_getinfo's answer for one provider: its return value and list.
struct answer {
  int ret = 0;
  fi_info* info = nullptr;
  ~answer() { fi_freeinfo(info); }
};

struct hints {
  fi_info* h = fi_allocinfo();
  explicit hints(const char* prov, fi_ep_type type = FI_EP_RDM) {
    h->fabric_attr->prov_name = strdup(prov);
    h->ep_attr->type = type;
  }
  ~hints() { fi_freeinfo(h); }
  void ask(uint32_t version, answer& a) const { a.ret = fi_getinfo(version, nullptr, nullptr, 0, h, &a.info); }
  // The same hints at 2.1 and at 1.17.
  void ask_both(answer& at21, answer& at117) const {
    ask(v21, at21);
    ask(v117, at117);
  }
};

// A fabric and domain opened from an fi_info (closed in reverse order);
// ok() says whether both opened.
struct opened {
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  int ret = 0;
  explicit opened(fi_info* info) {
    ret = fi_fabric(info->fabric_attr, &fabric, nullptr);
    if (!ret) ret = fi_domain(fabric, info, &domain, nullptr);
  }
  bool ok() const { return ret == 0; }
  ~opened() {
    if (domain) {
      EXPECT_EQ(fi_close(&domain->fid), 0);
    }
    if (fabric) {
      EXPECT_EQ(fi_close(&fabric->fid), 0);
    }
  }
};

// An enabled RDM endpoint with an AV table and one tagged CQ.
struct rdm_ep {
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;
  bool open(fid_domain* domain, fi_info* info) {
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_TAGGED;
    return !fi_av_open(domain, &aa, &av, nullptr) && !fi_cq_open(domain, &ca, &cq, nullptr) &&
           !fi_endpoint(domain, info, &ep, nullptr) && !fi_ep_bind(ep, &av->fid, 0) &&
           !fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) && !fi_enable(ep);
  }
  // Its own address, inserted into `into` (its own AV: it sends to itself).
  bool insert(fid_av* into, fi_addr_t* i) const {
    char own[64];
    size_t len = sizeof own;
    return !fi_getname(&ep->fid, own, &len) && fi_av_insert(into, own, 1, i, 0, nullptr) == 1;
  }
  ~rdm_ep() {
    for (fid* f : {ep ? &ep->fid : nullptr, cq ? &cq->fid : nullptr, av ? &av->fid : nullptr}) {
      if (f) {
        EXPECT_EQ(fi_close(f), 0);
      }
    }
  }
};

// A fi_getinfo at 2.x marks the process a 2.x caller (fi_tostr's text):
// each test puts the mark back as it found it.
class Api2 : public ::testing::Test {
protected:
  void SetUp() override { saved_ = weft::caller_api_newest.load(); }
  void TearDown() override { weft::caller_api_newest.store(saved_); }

private:
  uint32_t saved_ = 0;
};

TEST_F(Api2, VersionsTaken) {
  EXPECT_EQ(fi_version(), FI_VERSION(2, 6));
  hints h("shm");
  for (uint32_t v : {uint32_t{FI_VERSION(1, 0)}, uint32_t{FI_VERSION(1, 5)}, v117, uint32_t{FI_VERSION(1, 22)},
                     uint32_t{FI_VERSION(2, 0)}, v21, uint32_t{FI_VERSION(2, 6)}}) {
    answer a;
    h.ask(v, a);
    ASSERT_EQ(a.ret, 0) << FI_MAJOR(v) << "." << FI_MINOR(v);
    EXPECT_EQ(a.info->fabric_attr->api_version, v);
  }
  for (uint32_t v : {uint32_t{FI_VERSION(2, 7)}, uint32_t{FI_VERSION(3, 0)}, uint32_t{FI_VERSION(0, 9)}}) {
    answer a;
    h.ask(v, a);
    EXPECT_EQ(a.ret, -FI_ENOSYS) << FI_MAJOR(v) << "." << FI_MINOR(v);
    EXPECT_EQ(a.info, nullptr);
  }
  // fi_fabric takes the same versions.
  answer a;
  h.ask(v21, a);
  ASSERT_EQ(a.ret, 0);
  fid_fabric* fabric = nullptr;
  ASSERT_EQ(fi_fabric(a.info->fabric_attr, &fabric, nullptr), 0);
  EXPECT_EQ(fabric->api_version, v21);
  EXPECT_EQ(fi_close(&fabric->fid), 0);
  a.info->fabric_attr->api_version = FI_VERSION(2, 9);
  EXPECT_EQ(fi_fabric(a.info->fabric_attr, &fabric, nullptr), -FI_ENOSYS);
}

// Bits 45, 46 and 48 are 2.x capabilities (1.x: two registration flags
// and FI_VARIABLE_MSG).
TEST_F(Api2, CapabilitiesByVersion) {
  hints h("shm");
  answer a2, a1;
  h.ask_both(a2, a1);
  ASSERT_EQ(a2.ret, 0);
  ASSERT_EQ(a1.ret, 0);
  EXPECT_TRUE(a2.info->caps & FI_TAGGED_DIRECTED_RECV);
  EXPECT_TRUE(a2.info->caps & FI_EXACT_DIRECTED_RECV);
  EXPECT_TRUE(a2.info->rx_attr->caps & FI_TAGGED_DIRECTED_RECV);
  EXPECT_FALSE(a2.info->caps & FI_TAGGED_MULTI_RECV);
  EXPECT_FALSE(a1.info->caps & (FI_TAGGED_DIRECTED_RECV | FI_TAGGED_MULTI_RECV | FI_EXACT_DIRECTED_RECV));
  // Primary capabilities come only when asked for.
  h.h->caps = FI_TAGGED | FI_DIRECTED_RECV;
  answer asked;
  h.ask(v21, asked);
  ASSERT_EQ(asked.ret, 0);
  EXPECT_FALSE(asked.info->caps & (FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV));
  // A tagged receive takes no FI_MULTI_RECV: refused at 2.x, unknown at 1.x.
  h.h->caps = FI_TAGGED | FI_TAGGED_MULTI_RECV;
  answer multi2, multi1;
  h.ask_both(multi2, multi1);
  EXPECT_EQ(multi2.ret, -FI_ENODATA);
  EXPECT_EQ(multi1.ret, -FI_ENODATA);
  h.h->caps = FI_TAGGED | FI_TAGGED_DIRECTED_RECV;
  answer tdir2, tdir1;
  h.ask_both(tdir2, tdir1);
  ASSERT_EQ(tdir2.ret, 0);
  EXPECT_TRUE(tdir2.info->caps & FI_TAGGED_DIRECTED_RECV);
  EXPECT_EQ(tdir1.ret, -FI_ENODATA);
}

// FI_MR_BASIC and FI_MR_SCALABLE are gone from 2.x; 1.x keeps them.
TEST_F(Api2, LegacyRegistrationModes) {
  for (int mode : {int{FI_MR_BASIC}, int{FI_MR_SCALABLE}, int{FI_MR_BASIC | FI_MR_LOCAL}}) {
    hints h("shm");
    h.h->domain_attr->mr_mode = mode;
    answer a2;
    h.ask(v21, a2);
    EXPECT_EQ(a2.ret, -FI_ENODATA) << mode;
  }
  hints h("shm");
  h.h->domain_attr->mr_mode = FI_MR_BASIC;
  answer a1;
  h.ask(v117, a1);
  ASSERT_EQ(a1.ret, 0);
  EXPECT_EQ(a1.info->domain_attr->mr_mode, FI_MR_BASIC);
  // fi_domain of a 2.x fabric refuses them too.
  answer ok;
  hints plain("shm");
  plain.ask(v21, ok);
  ASSERT_EQ(ok.ret, 0);
  ok.info->domain_attr->mr_mode = FI_MR_SCALABLE;
  EXPECT_EQ(opened(ok.info).ret, -FI_EINVAL);
  ok.info->domain_attr->mr_mode = 0;
  EXPECT_TRUE(opened(ok.info).ok());
}

// FI_PROGRESS_CONTROL_UNIFIED (2.0): manual progress of everything.
TEST_F(Api2, ControlUnifiedProgress) {
  hints h("shm");
  h.h->domain_attr->data_progress = FI_PROGRESS_CONTROL_UNIFIED;
  h.h->domain_attr->threading = FI_THREAD_DOMAIN;
  answer a2, a1;
  h.ask_both(a2, a1);
  ASSERT_EQ(a2.ret, 0);
  EXPECT_EQ(a2.info->domain_attr->data_progress, FI_PROGRESS_CONTROL_UNIFIED);
  EXPECT_EQ(a1.ret, -FI_ENODATA);
  EXPECT_TRUE(opened(a2.info).ok());
}

// The domain attributes of ABI 1.7 ... 1.9.
TEST_F(Api2, AppendedDomainAttributes) {
  hints shm("shm");
  answer a;
  shm.ask(v21, a);
  ASSERT_EQ(a.ret, 0);
  EXPECT_EQ(tail_of(a.info->domain_attr).max_ep_auth_key, 0u);
  EXPECT_EQ(tail_of(a.info->domain_attr).max_group_id, 0u);
  EXPECT_EQ(tail_of(a.info->domain_attr).max_cntr_value, UINT64_MAX);
  EXPECT_EQ(tail_of(a.info->domain_attr).max_err_cntr_value, UINT64_MAX);
  // No peer groups; no authorization keys on shm; tcp presents one per endpoint.
  tail_of(shm.h->domain_attr).max_group_id = 1;
  answer groups;
  shm.ask(v21, groups);
  EXPECT_EQ(groups.ret, -FI_ENODATA);
  tail_of(shm.h->domain_attr).max_group_id = 0;
  tail_of(shm.h->domain_attr).max_ep_auth_key = 1;
  answer keys;
  shm.ask(v21, keys);
  EXPECT_EQ(keys.ret, -FI_ENODATA);
  hints tcp("tcp");
  tail_of(tcp.h->domain_attr).max_ep_auth_key = 1;
  answer tcp_keys;
  tcp.ask(v21, tcp_keys);
  ASSERT_EQ(tcp_keys.ret, 0);
  EXPECT_EQ(tail_of(tcp_keys.info->domain_attr).max_ep_auth_key, 1u);
  // Keys kept in the AV (FI_AV_AUTH_KEY, 1.20) are not offered ...
  tail_of(tcp.h->domain_attr).max_ep_auth_key = 0;
  tcp.h->domain_attr->auth_key_size = FI_AV_AUTH_KEY;
  answer av_keys;
  tcp.ask(v21, av_keys);
  EXPECT_EQ(av_keys.ret, -FI_ENODATA);
  // ... and fi_domain refuses them.
  tcp_keys.info->domain_attr->auth_key_size = FI_AV_AUTH_KEY;
  EXPECT_EQ(opened(tcp_keys.info).ret, -FI_ENODATA);
}

// comp_order is a 1.x field; mem_tag_format below FI_TAG_MAX_FORMAT names a
// 2.x tag format.
TEST_F(Api2, OrderAndTagFormat) {
  hints h("shm");
  h.h->tx_attr->comp_order = FI_ORDER_STRICT;
  answer strict2, strict1;
  h.ask_both(strict2, strict1);
  EXPECT_EQ(strict2.ret, 0);
  EXPECT_EQ(strict1.ret, -FI_ENODATA);
  h.h->tx_attr->comp_order = 0;
  for (uint64_t fmt : {uint64_t{FI_TAG_MPI}, uint64_t{FI_TAG_CCL}}) {
    h.h->ep_attr->mem_tag_format = fmt;
    answer a;
    h.ask(v21, a);
    ASSERT_EQ(a.ret, 0) << fmt;
    EXPECT_EQ(a.info->ep_attr->mem_tag_format, fmt);
  }
  h.h->ep_attr->mem_tag_format = 5;  // no such format at 2.x; five tag bits at 1.x
  answer bad2, bits1;
  h.ask_both(bad2, bits1);
  EXPECT_EQ(bad2.ret, -FI_ENODATA);
  EXPECT_EQ(bits1.ret, 0);
}

// The linked provider's protocol has a name from 2.0 on.
TEST_F(Api2, LinkedProtocol) {
  hints h("lnx");
  answer a2, a1;
  h.ask_both(a2, a1);
  ASSERT_EQ(a2.ret, 0);
  ASSERT_EQ(a1.ret, 0);
  EXPECT_EQ(a2.info->ep_attr->protocol, uint32_t{FI_PROTO_LNX});
  EXPECT_EQ(a1.info->ep_attr->protocol, uint32_t{FI_PROTO_UNSPEC});
  hints by_protocol("lnx");
  by_protocol.h->ep_attr->protocol = FI_PROTO_LNX;
  answer p2;
  by_protocol.ask(v21, p2);
  EXPECT_EQ(p2.ret, 0);
}

// One process, three shm endpoints of a 2.x fabric: `rx` asks for tagged-only
// directed receives (FI_TAGGED_DIRECTED_RECV without FI_DIRECTED_RECV), or
// with FI_EXACT_DIRECTED_RECV.
struct trio {
  answer a;
  std::unique_ptr<opened> dom;
  rdm_ep e[3];
  fi_addr_t addr[3][3]{};  // addr[i][j]: j in i's AV

  bool open(uint64_t rx_caps) {
    hints h("shm");
    h.h->caps = FI_TAGGED | FI_MSG;
    h.ask(v21, a);
    if (a.ret) return false;
    dom = std::make_unique<opened>(a.info);
    if (!dom->ok()) return false;
    for (int i = 0; i < 3; ++i) {
      a.info->caps = FI_TAGGED | FI_MSG | (i == 0 ? rx_caps : 0);
      if (!e[i].open(dom->domain, a.info)) return false;
    }
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j)
        if (!e[j].insert(e[i].av, &addr[i][j])) return false;
    return true;
  }
  fid_ep* ep(int i) const { return e[i].ep; }
  // Drives every endpoint for `ms`; returns the receiver's next completion
  // (its tag), or -1.
  int64_t rx_completion(int ms) {
    fi_cq_tagged_entry e{};
    for (int k = 0; k < ms * 10; ++k) {
      for (int i = 1; i < 3; ++i) {
        fi_cq_tagged_entry s{};
        while (fi_cq_read(this->e[i].cq, &s, 1) == 1) {
        }
      }
      if (fi_cq_read(this->e[0].cq, &e, 1) == 1) return static_cast<int64_t>(e.tag);
      usleep(100);
    }
    return -1;
  }
};

TEST_F(Api2, TaggedOnlyDirectedReceives) {
  trio t;
  ASSERT_TRUE(t.open(FI_TAGGED_DIRECTED_RECV));
  uint64_t in = 0, out = 42;
  // A tagged receive directed at endpoint 2 does not take endpoint 1's message ...
  ASSERT_EQ(fi_trecv(t.ep(0), &in, sizeof in, nullptr, t.addr[0][2], 7, 0, nullptr), 0);
  ASSERT_EQ(fi_tsend(t.ep(1), &out, sizeof out, nullptr, t.addr[1][0], 7, nullptr), 0);
  EXPECT_EQ(t.rx_completion(50), -1);
  // ... one directed at endpoint 1 does.
  ASSERT_EQ(fi_trecv(t.ep(0), &in, sizeof in, nullptr, t.addr[0][1], 7, 0, nullptr), 0);
  EXPECT_EQ(t.rx_completion(2000), 7);
  EXPECT_EQ(in, 42u);
  // An untagged receive's source is not looked at: endpoint 1's message
  // lands in a receive naming endpoint 2.
  ASSERT_EQ(fi_recv(t.ep(0), &in, sizeof in, nullptr, t.addr[0][2], nullptr), 0);
  out = 43;
  ASSERT_EQ(fi_send(t.ep(1), &out, sizeof out, nullptr, t.addr[1][0], nullptr), 0);
  EXPECT_EQ(t.rx_completion(2000), 0);
  EXPECT_EQ(in, 43u);
}

TEST_F(Api2, ExactDirectedReceivesNameTheirSource) {
  trio t;
  ASSERT_TRUE(t.open(FI_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV));
  uint64_t in = 0;
  EXPECT_EQ(fi_trecv(t.ep(0), &in, sizeof in, nullptr, FI_ADDR_UNSPEC, 7, 0, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_recv(t.ep(0), &in, sizeof in, nullptr, FI_ADDR_UNSPEC, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_trecv(t.ep(0), &in, sizeof in, nullptr, t.addr[0][1], 7, 0, nullptr), 0);
}

// fi_cq_err_entry::src_addr (1.20) is written for callers of 1.20 and later
// only: a 1.17 caller's entry ends before it.
TEST_F(Api2, ErrorEntrySource) {
  for (uint32_t v : {v117, v21}) {
    hints h("shm");
    h.h->caps = FI_TAGGED | FI_SOURCE;
    answer a;
    h.ask(v, a);
    ASSERT_EQ(a.ret, 0);
    opened d(a.info);
    ASSERT_TRUE(d.ok());
    rdm_ep r;
    ASSERT_TRUE(r.open(d.domain, a.info));
    fid_ep* ep = r.ep;
    fid_cq* cq = r.cq;
    fi_addr_t self = FI_ADDR_UNSPEC;
    ASSERT_TRUE(r.insert(r.av, &self));
    // A 64-byte message into an 8-byte receive: a truncation error entry.
    char big[64] = {}, small[8];
    ASSERT_EQ(fi_trecv(ep, small, sizeof small, nullptr, FI_ADDR_UNSPEC, 1, 0, nullptr), 0);
    ASSERT_EQ(fi_tsend(ep, big, sizeof big, nullptr, self, 1, nullptr), 0);
    // The entry as 2.x's headers declare it: the 1.17 one and src_addr.
    struct {
      fi_cq_err_entry e;
      fi_addr_t src_addr;
    } err;
    int got_err = 0;
    for (int k = 0; k < 20000 && !got_err; ++k) {
      fi_cq_tagged_entry e{};
      ssize_t n = fi_cq_read(cq, &e, 1);
      if (n == -FI_EAVAIL) {
        memset(&err, 0, sizeof err);
        err.src_addr = 0x5a5a;
        ASSERT_EQ(fi_cq_readerr(cq, &err.e, 0), 1);
        got_err = 1;
      } else if (n != 1) {
        usleep(100);
      }
    }
    ASSERT_TRUE(got_err) << FI_MINOR(v);
    EXPECT_EQ(err.e.err, FI_ETRUNC);
    if (v == v21)
      EXPECT_TRUE(err.src_addr == self || err.src_addr == FI_ADDR_NOTAVAIL) << err.src_addr;
    else
      EXPECT_EQ(err.src_addr, 0x5a5au);  // untouched
  }
}

// What 1.18 ... 2.0 added that weft does not offer is refused the way the
// man pages say: options (-FI_ENOPROTOOPT), profiling ops (-FI_ENOSYS),
// registration and AV flags (-FI_EBADFLAGS), counter events, atomic types.
TEST_F(Api2, RefusedAdditions) {
  hints h("shm");
  answer a;
  h.ask(v21, a);
  ASSERT_EQ(a.ret, 0);
  opened d(a.info);
  ASSERT_TRUE(d.ok());
  fid_domain* domain = d.domain;
  fid_ep* ep = nullptr;
  ASSERT_EQ(fi_endpoint(domain, a.info, &ep, nullptr), 0);
  for (int opt : {int{FI_OPT_CUDA_API_PERMITTED}, int{FI_OPT_SHARED_MEMORY_PERMITTED}, int{FI_OPT_MAX_MSG_SIZE},
                  int{FI_OPT_INJECT_ATOMIC_SIZE}}) {
    size_t v = 0, len = sizeof v;
    EXPECT_EQ(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, opt, &v, &len), -FI_ENOPROTOOPT) << opt;
    bool b = false;
    EXPECT_EQ(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, opt, &b, sizeof b), -FI_ENOPROTOOPT) << opt;
  }
  // No authorization keys kept in the AV: FI_AUTH_KEY flags are unknown.
  fid_av* av = nullptr;
  fi_av_attr aa{};
  aa.type = FI_AV_TABLE;
  ASSERT_EQ(fi_av_open(domain, &aa, &av, nullptr), 0);
  fi_addr_t addr = 0;
  EXPECT_EQ(fi_av_insert(av, "fi_shm://x", 1, &addr, FI_AUTH_KEY, nullptr), -FI_EBADFLAGS);
  EXPECT_EQ(fi_av_remove(av, &addr, 1, FI_AUTH_KEY), -FI_EBADFLAGS);
  EXPECT_EQ(fi_close(&av->fid), 0);
  void* ops = nullptr;
  EXPECT_EQ(fi_open_ops(&ep->fid, "fi_profile_ops", 0, &ops, nullptr), -FI_ENOSYS);
  EXPECT_EQ(fi_open_ops(&domain->fid, "fi_profile_ops", 0, &ops, nullptr), -FI_ENOSYS);
  char buf[64];
  fid_mr* mr = nullptr;
  iovec iov{buf, sizeof buf};
  fi_mr_attr attr{};
  attr.mr_iov = &iov;
  attr.iov_count = 1;
  attr.access = FI_SEND | FI_RECV;
  EXPECT_EQ(fi_mr_regattr(domain, &attr, FI_MR_DMABUF, &mr), -FI_EBADFLAGS);
  EXPECT_EQ(fi_mr_regattr(domain, &attr, FI_MR_SINGLE_USE, &mr), -FI_EBADFLAGS);
  // Counters count completions (FI_CNTR_EVENTS_BYTES, 2.0, is not offered);
  // the atomic datatypes and operation 1.20 ... 2.0 added are not either.
  fi_cntr_attr ca{};
  ca.events = static_cast<fi_cntr_events>(FI_CNTR_EVENTS_BYTES);
  fid_cntr* cntr = nullptr;
  EXPECT_EQ(fi_cntr_open(domain, &ca, &cntr, nullptr), -FI_EINVAL);
  fi_atomic_attr atomic{};
  EXPECT_LT(fi_query_atomic(domain, static_cast<fi_datatype>(FI_FLOAT16), FI_SUM, &atomic, 0), 0);
  EXPECT_LT(fi_query_atomic(domain, static_cast<fi_datatype>(FI_FLOAT8_E5M2), FI_MAX, &atomic, 0), 0);
  EXPECT_LT(fi_query_atomic(domain, FI_INT32, static_cast<fi_op>(FI_DIFF), &atomic, 0), 0);
  EXPECT_EQ(fi_query_atomic(domain, FI_INT32, FI_SUM, &atomic, 0), 0);
  EXPECT_STREQ(fi_strerror(FI_ENOMR), "Memory registration limit exceeded");
  EXPECT_EQ(fi_close(&ep->fid), 0);
}

// fi_tostr as libfabric 2.1 writes it, for a 2.x caller.
TEST_F(Api2, TostrOfThe2xSeries) {
  hints h("shm");
  answer a2, a1;
  h.ask_both(a2, a1);
  ASSERT_EQ(a2.ret, 0);
  ASSERT_EQ(a1.ret, 0);
  char buf[8192];
  std::string s2 = fi_tostr_r(buf, sizeof buf, a2.info, FI_TYPE_INFO);
  std::string s1 = fi_tostr_r(buf, sizeof buf, a1.info, FI_TYPE_INFO);
  EXPECT_NE(s2.find("        progress: FI_PROGRESS_MANUAL\n"), std::string::npos);
  EXPECT_EQ(s2.find("control_progress"), std::string::npos);
  EXPECT_EQ(s2.find("comp_order"), std::string::npos);
  EXPECT_EQ(s2.find("total_buffered_recv"), std::string::npos);
  EXPECT_NE(s1.find("        data_progress: FI_PROGRESS_MANUAL\n"), std::string::npos);
  EXPECT_NE(s1.find("comp_order"), std::string::npos);
  // Names 2.0 removed print as unknown ones once the process asked for 2.x.
  weft::caller_api_newest.store(v117);
  uint64_t bit48 = 1ULL << 48;
  int sock_stream = 4, fid_threading = FI_THREAD_FID, unified = 3;
  EXPECT_STREQ(fi_tostr_r(buf, sizeof buf, &bit48, FI_TYPE_CAPS), "FI_VARIABLE_MSG");
  EXPECT_STREQ(fi_tostr_r(buf, sizeof buf, &sock_stream, FI_TYPE_EP_TYPE), "FI_EP_SOCK_STREAM");
  EXPECT_STREQ(fi_tostr_r(buf, sizeof buf, &unified, FI_TYPE_PROGRESS), "Unknown");
  weft::caller_api_newest.store(v21);
  EXPECT_STREQ(fi_tostr_r(buf, sizeof buf, &bit48, FI_TYPE_CAPS), "");
  EXPECT_STREQ(fi_tostr_r(buf, sizeof buf, &sock_stream, FI_TYPE_EP_TYPE), "Unknown");
  EXPECT_STREQ(fi_tostr_r(buf, sizeof buf, &fid_threading, FI_TYPE_THREADING), "Unknown");
  EXPECT_STREQ(fi_tostr_r(buf, sizeof buf, &unified, FI_TYPE_PROGRESS), "FI_PROGRESS_CONTROL_UNIFIED");
  uint32_t lnx = FI_PROTO_LNX;
  EXPECT_STREQ(fi_tostr_r(buf, sizeof buf, &lnx, FI_TYPE_PROTOCOL), "FI_PROTO_LNX");
  uint64_t peer = FI_PEER | FI_AV_USER_ID;
  EXPECT_STREQ(fi_tostr_r(buf, sizeof buf, &peer, FI_TYPE_CAPS), "FI_AV_USER_ID, FI_PEER");
  EXPECT_STREQ(fi_tostr_r(buf, sizeof buf, "", FI_TYPE_VERSION), "2.6.0");
  // The types 1.18 ... 2.0 added.
  fi_cq_attr cq{};
  cq.size = 16;
  cq.format = FI_CQ_FORMAT_TAGGED;
  cq.wait_obj = FI_WAIT_FD;
  cq.wait_cond = FI_CQ_COND_THRESHOLD;
  EXPECT_STREQ(fi_tostr_r(buf, sizeof buf, &cq, static_cast<fi_type>(FI_TYPE_CQ_ATTR)),
               "fi_cq_attr:\n    size: 16\n    flags: [  ]\n    format: FI_CQ_FORMAT_TAGGED\n"
               "    wait_obj: FI_WAIT_FD\n    signaling_vector: 0\n    wait_cond: FI_CQ_COND_THRESHOLD\n");
  fi_cntr_attr cntr{};
  cntr.events = static_cast<fi_cntr_events>(FI_CNTR_EVENTS_BYTES);
  cntr.flags = 0x30;
  EXPECT_STREQ(fi_tostr_r(buf, sizeof buf, &cntr, static_cast<fi_type>(FI_TYPE_CNTR_ATTR)),
               "fi_cntr_attr:\n    events: FI_CNTR_EVENTS_BYTES\n    wait_obj: FI_WAIT_NONE\n    flags: 0x30\n");
  fi_av_attr av{};
  av.type = FI_AV_TABLE;
  av.count = 8;
  av.flags = FI_SYMMETRIC;
  EXPECT_STREQ(fi_tostr_r(buf, sizeof buf, &av, static_cast<fi_type>(FI_TYPE_AV_ATTR)),
               "fi_av_attr:\n    type: FI_AV_TABLE\n    count: 8\n    ep_per_node: 0\n    name: (null)\n"
               "    flags: [ FI_SYMMETRIC ]\n");
  fi_cq_err_entry e{};
  e.len = 3;
  e.err = FI_ETRUNC;
  e.prov_errno = 9;
  std::string es = fi_tostr_r(buf, sizeof buf, &e, static_cast<fi_type>(FI_TYPE_CQ_ERR_ENTRY));
  EXPECT_NE(es.find("    len: 3\n"), std::string::npos);
  EXPECT_NE(es.find("    err: 265\n    prov_errno: 9\n"), std::string::npos);
  fi_mr_attr mr{};
  mr.access = FI_REMOTE_READ | FI_REMOTE_WRITE;
  mr.requested_key = 0x2a;
  std::string ms = fi_tostr_r(buf, sizeof buf, &mr, static_cast<fi_type>(FI_TYPE_MR_ATTR));
  EXPECT_NE(ms.find("    access: [ FI_REMOTE_READ, FI_REMOTE_WRITE ]\n    offset: 0x0\n    requested_key: 0x2a\n"),
            std::string::npos);
  EXPECT_NE(ms.find("    iface: FI_HMEM_SYSTEM\n"), std::string::npos);
}

}  // namespace
