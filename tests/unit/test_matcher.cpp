// SPDX-License-Identifier: BSD-3-Clause
// White-box: the receive matcher (util/rx.hpp) with a transport of the
// test's own, so every rule is checked without any provider's wire: expected
// and unexpected messages, tags with ignore bits, directed receives,
// FI_PEEK / FI_CLAIM / FI_DISCARD, multi-receive buffers, messages still
// arriving, bounds, cancel. Receives are posted through the public fi_trecv /
// fi_recv entry points every provider shares; completions are read from a
// real CQ.
#include <gtest/gtest.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <cstring>
#include <string>
#include <vector>

#include "util/ep.hpp"
#include "util/rx.hpp"

namespace {

// What the test transport was asked.
struct calls {
  int delivered = 0, adopted = 0, discarded = 0, sourced = 0;
  bool adopt_ok = true;
  std::vector<uint64_t> ids;  // ids delivered, in order
};

struct fake_ep : weft::endpoint {
  calls log;
};
fake_ep& of(weft::endpoint& e) {
  return static_cast<fake_ep&>(e);
}

int t_enable(weft::endpoint&) {
  return 0;
}
void t_progress(weft::endpoint&) noexcept {}
void t_close(weft::endpoint&) noexcept {}
void t_destroy(weft::endpoint* e) noexcept {
  delete &of(*e);
}
int t_deliver(weft::endpoint& e, weft::posted_recv&, const weft::landing& l, weft::unexpected& u, size_t n,
              uint64_t) noexcept {
  of(e).log.delivered++;
  of(e).log.ids.push_back(u.id);
  weft::iov_copy_to(l.iov, l.count, 0, u.bytes.data(), n);
  return 0;
}
bool t_adopt(weft::endpoint& e, weft::posted_recv&, weft::unexpected&) noexcept {
  of(e).log.adopted++;
  return of(e).log.adopt_ok;
}
void t_discard(weft::endpoint& e, weft::unexpected&) noexcept {
  of(e).log.discarded++;
}
fi_addr_t t_source(weft::endpoint& e, uint64_t peer) noexcept {
  of(e).log.sourced++;
  return peer;  // the test's peers are named by their fi_addr
}

const weft::rx_transport rx_answers = {t_deliver, t_adopt, t_discard, t_source};
const weft::ep_transport transport = {t_enable, t_progress, t_close, t_destroy, &rx_answers, 0};

class Matcher : public ::testing::Test {
protected:
  void SetUp() override {
    fi_info* hints = fi_allocinfo();
    hints->fabric_attr->prov_name = strdup("shm");
    hints->caps = FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE | FI_MULTI_RECV;
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info_), 0);
    fi_freeinfo(hints);
    ASSERT_EQ(fi_fabric(info_->fabric_attr, &fabric_, nullptr), 0);
    ASSERT_EQ(fi_domain(fabric_, info_, &domain_, nullptr), 0);
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    ASSERT_EQ(fi_av_open(domain_, &aa, &av_, nullptr), 0);
    const char* names[] = {"fi_shm://peer_a", "fi_shm://peer_b"};
    for (int i = 0; i < 2; ++i) ASSERT_EQ(fi_av_insert(av_, names[i], 1, &peer_[i], 0, nullptr), 1);
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_TAGGED;
    ASSERT_EQ(fi_cq_open(domain_, &ca, &cq_, nullptr), 0);
    auto* e = new fake_ep;
    weft::endpoint_init(*e, *weft::domain::of(domain_), info_, nullptr, weft::ep_role::endpoint, &transport,
                        64);
    e->fid_.msg = &weft::msg_rx;
    e->fid_.tagged = &weft::tagged_rx;
    weft::domain::of(domain_)->users_.add();  // as a provider's endpoint open does
    ep_ = e;
    fid_ep* f = &e->fid_;
    ASSERT_EQ(fi_ep_bind(f, &av_->fid, 0), 0);
    ASSERT_EQ(fi_ep_bind(f, &cq_->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_enable(f), 0);
  }
  void TearDown() override {
    for (fid* f : {ep_ ? &ep_->fid_.fid : nullptr, cq_ ? &cq_->fid : nullptr, av_ ? &av_->fid : nullptr,
                   domain_ ? &domain_->fid : nullptr, fabric_ ? &fabric_->fid : nullptr}) {
      if (f) {
        EXPECT_EQ(fi_close(f), 0);
      }
    }
    fi_freeinfo(info_);
  }

  fid_ep* ep() { return &ep_->fid_; }
  calls& log() { return ep_->log; }

  // A message that arrives with nobody waiting: parked, as a transport does.
  weft::unexpected* park(bool tagged, uint64_t tag, const std::string& payload, uint64_t id, fi_addr_t from,
                         uint64_t data = 0) {
    weft::ep_guard g(*ep_);
    weft::unexpected* u = weft::ux_add(*ep_, tagged, payload.size());
    if (!u) return nullptr;
    u->peer = from;
    u->tag = tag;
    u->size = payload.size();
    u->id = id;
    u->data = data;
    u->remote_cq_data = data != 0;
    u->bytes.assign(payload.begin(), payload.end());
    return u;
  }
  // A message that arrives: matched against posted receives like a transport
  // does it (match_posted, consume, rx_finish). False when nothing matched.
  bool arrive(bool tagged, uint64_t tag, const std::string& payload, fi_addr_t from) {
    weft::ep_guard g(*ep_);
    fi_addr_t src = FI_ADDR_NOTAVAIL;
    auto& list = weft::posted_list(*ep_, tagged);
    auto it = weft::match_posted(*ep_, tagged, tag, &src, [from] { return from; });
    if (it == list.end()) return false;
    const weft::posted_recv r = *it;
    const weft::landing l = weft::landing_of(r);
    size_t n = std::min(payload.size(), l.room);
    weft::iov_copy_to(l.iov, l.count, 0, payload.data(), n);
    uint64_t flags = weft::recv_cq_flags(tagged, false) | weft::consume(*ep_, list, it, n);
    weft::rx_finish(*ep_, r, flags, n, payload.size(), 0, l.buf, 0, tag, from);
    return true;
  }
  // One completion, or the error entry (returns fi_cq_read's result).
  ssize_t next(fi_cq_tagged_entry* ce, fi_cq_err_entry* err = nullptr) {
    ssize_t n = fi_cq_read(cq_, ce, 1);
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry e{};
      fi_cq_readerr(cq_, &e, 0);
      if (err) *err = e;
    }
    return n;
  }

  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_av* av_ = nullptr;
  fid_cq* cq_ = nullptr;
  fake_ep* ep_ = nullptr;
  fi_addr_t peer_[2] = {};
};

TEST_F(Matcher, ExpectedTagsWithIgnoreBitsInPostingOrder) {
  char a[16] = {}, b[16] = {};
  ASSERT_EQ(fi_trecv(ep(), a, sizeof a, nullptr, FI_ADDR_UNSPEC, 0x1200, 0x00ff, a), 0);
  ASSERT_EQ(fi_trecv(ep(), b, sizeof b, nullptr, FI_ADDR_UNSPEC, 0x1200, 0x00ff, b), 0);
  EXPECT_FALSE(arrive(true, 0x1300, "no", peer_[0]));  // outside the ignore mask
  ASSERT_TRUE(arrive(true, 0x12ab, "first", peer_[0]));
  ASSERT_TRUE(arrive(true, 0x1201, "second", peer_[1]));
  fi_cq_tagged_entry ce;
  ASSERT_EQ(next(&ce), 1);
  EXPECT_EQ(ce.op_context, a);
  EXPECT_EQ(ce.tag, 0x12abu);
  EXPECT_EQ(ce.len, 5u);
  EXPECT_EQ(ce.flags, FI_RECV | FI_TAGGED);
  EXPECT_STREQ(a, "first");
  ASSERT_EQ(next(&ce), 1);
  EXPECT_EQ(ce.op_context, b);
  EXPECT_STREQ(b, "second");
  EXPECT_EQ(next(&ce), -FI_EAGAIN);
}

TEST_F(Matcher, UnexpectedDeliveredInArrivalOrderThroughTheTransport) {
  ASSERT_NE(park(true, 7, "one", 101, peer_[0]), nullptr);
  ASSERT_NE(park(true, 8, "other", 102, peer_[0]), nullptr);
  ASSERT_NE(park(true, 7, "two", 103, peer_[1], 0xdada), nullptr);
  char x[8] = {}, y[8] = {};
  ASSERT_EQ(fi_trecv(ep(), x, sizeof x, nullptr, FI_ADDR_UNSPEC, 7, 0, x), 0);
  ASSERT_EQ(fi_trecv(ep(), y, sizeof y, nullptr, FI_ADDR_UNSPEC, 7, 0, y), 0);
  EXPECT_EQ(log().ids, (std::vector<uint64_t>{101, 103}));
  fi_cq_tagged_entry ce;
  ASSERT_EQ(next(&ce), 1);
  EXPECT_STREQ(x, "one");
  EXPECT_EQ(ce.flags & FI_REMOTE_CQ_DATA, 0u);
  ASSERT_EQ(next(&ce), 1);
  EXPECT_STREQ(y, "two");
  EXPECT_EQ(ce.flags, FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA);
  EXPECT_EQ(ce.data, 0xdadau);
  EXPECT_EQ(ep_->rx->ux_count, 1u);  // tag 8 still waits
}

TEST_F(Matcher, TruncationReportsOlen) {
  ASSERT_NE(park(false, 0, "0123456789", 1, peer_[0]), nullptr);
  char small[4];
  ASSERT_EQ(fi_recv(ep(), small, sizeof small, nullptr, FI_ADDR_UNSPEC, small), 0);
  fi_cq_tagged_entry ce;
  fi_cq_err_entry err{};
  ASSERT_EQ(next(&ce, &err), -FI_EAVAIL);
  EXPECT_EQ(err.err, FI_ETRUNC);
  EXPECT_EQ(err.len, 4u);
  EXPECT_EQ(err.olen, 6u);
  EXPECT_EQ(memcmp(small, "0123", 4), 0);
}

TEST_F(Matcher, DirectedReceivesAskTheSenderOnlyWhenNeeded) {
  ASSERT_NE(park(true, 5, "from a", 1, peer_[0]), nullptr);
  ASSERT_NE(park(true, 5, "from b", 2, peer_[1]), nullptr);
  char buf[16] = {};
  ASSERT_EQ(fi_trecv(ep(), buf, sizeof buf, nullptr, peer_[1], 5, 0, buf), 0);
  EXPECT_STREQ(buf, "from b");
  EXPECT_EQ(log().ids, (std::vector<uint64_t>{2}));
  EXPECT_GE(log().sourced, 1);
  // Expected side: a receive directed at b does not take a's message.
  char c[16] = {};
  ASSERT_EQ(fi_trecv(ep(), c, sizeof c, nullptr, peer_[1], 9, 0, c), 0);
  EXPECT_FALSE(arrive(true, 9, "a again", peer_[0]));
  EXPECT_TRUE(arrive(true, 9, "b again", peer_[1]));
  EXPECT_STREQ(c, "b again");
}

TEST_F(Matcher, PeekClaimDiscard) {
  fi_cq_tagged_entry ce;
  fi_cq_err_entry err{};
  fi_msg_tagged m{};
  iovec iov{};
  m.msg_iov = &iov;
  m.iov_count = 0;
  m.addr = FI_ADDR_UNSPEC;
  m.tag = 42;
  // Nothing there: FI_ENOMSG.
  ASSERT_EQ(fi_trecvmsg(ep(), &m, FI_PEEK), 0);
  ASSERT_EQ(next(&ce, &err), -FI_EAVAIL);
  EXPECT_EQ(err.err, FI_ENOMSG);
  ASSERT_NE(park(true, 42, "peeked", 7, peer_[0]), nullptr);
  // A peek reports it and leaves it.
  ASSERT_EQ(fi_trecvmsg(ep(), &m, FI_PEEK), 0);
  ASSERT_EQ(next(&ce), 1);
  EXPECT_EQ(ce.len, 6u);
  EXPECT_EQ(ce.tag, 42u);
  EXPECT_EQ(ep_->rx->ux_count, 1u);
  // Peek + claim: reserved for this context; a plain receive no longer takes it.
  int token = 0;
  m.context = &token;
  ASSERT_EQ(fi_trecvmsg(ep(), &m, FI_PEEK | FI_CLAIM), 0);
  ASSERT_EQ(next(&ce), 1);
  char other[16] = {};
  ASSERT_EQ(fi_trecv(ep(), other, sizeof other, nullptr, FI_ADDR_UNSPEC, 42, 0, other), 0);
  EXPECT_EQ(log().delivered, 0);
  // The claim itself receives it.
  char mine[16] = {};
  iov = {mine, sizeof mine};
  m.iov_count = 1;
  ASSERT_EQ(fi_trecvmsg(ep(), &m, FI_CLAIM), 0);
  ASSERT_EQ(next(&ce), 1);
  EXPECT_EQ(ce.op_context, &token);
  EXPECT_STREQ(mine, "peeked");
  // A claim with nothing claimed is refused.
  EXPECT_EQ(fi_trecvmsg(ep(), &m, FI_CLAIM), -FI_EINVAL);
  // Peek + discard: acknowledged to the sender, gone.
  ASSERT_NE(park(true, 43, "dropped", 8, peer_[0]), nullptr);
  m.tag = 43;
  m.iov_count = 0;
  ASSERT_EQ(fi_trecvmsg(ep(), &m, FI_PEEK | FI_DISCARD), 0);
  ASSERT_EQ(next(&ce), 1);
  EXPECT_EQ(log().discarded, 1);
  EXPECT_EQ(ep_->rx->ux_tagged.size(), 0u);
}

TEST_F(Matcher, MultiRecvSlicesAndReleases) {
  size_t min = 30;
  ASSERT_EQ(fi_setopt(&ep()->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof min), 0);
  std::vector<char> buf(100, 0);
  // Two parked before the buffer is posted, one after.
  ASSERT_NE(park(false, 0, std::string(30, 'a'), 1, peer_[0]), nullptr);
  ASSERT_NE(park(false, 0, std::string(30, 'b'), 2, peer_[0]), nullptr);
  iovec iov{buf.data(), buf.size()};
  fi_msg m{};
  m.msg_iov = &iov;
  m.iov_count = 1;
  m.addr = FI_ADDR_UNSPEC;
  m.context = buf.data();
  ASSERT_EQ(fi_recvmsg(ep(), &m, FI_MULTI_RECV), 0);
  ASSERT_TRUE(arrive(false, 0, std::string(30, 'c'), peer_[0]));  // 10 bytes left < 30: released
  EXPECT_FALSE(arrive(false, 0, "x", peer_[0]));
  fi_cq_tagged_entry ce;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(next(&ce), 1);
    EXPECT_EQ(ce.len, 30u);
    EXPECT_EQ(ce.buf, buf.data() + 30 * i);
    EXPECT_EQ(static_cast<char*>(ce.buf)[0], "abc"[i]);
    EXPECT_EQ((ce.flags & FI_MULTI_RECV) != 0, i == 2) << i;
  }
}

TEST_F(Matcher, StillArrivingIsAdoptedOrDroppedWhenItsSenderIsGone) {
  weft::unexpected* u = park(false, 0, "part", 1, peer_[0]);
  ASSERT_NE(u, nullptr);
  u->complete = false;
  log().adopt_ok = false;  // its sender died: dropped, the receive waits on
  char buf[8];
  ASSERT_EQ(fi_recv(ep(), buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, buf), 0);
  EXPECT_EQ(log().adopted, 1);
  EXPECT_EQ(ep_->rx->ux_count, 0u);
  EXPECT_EQ(ep_->rx->posted_msg.size(), 1u);
  ASSERT_EQ(fi_cancel(&ep()->fid, buf), 0);
  fi_cq_tagged_entry ce;
  fi_cq_err_entry err{};
  ASSERT_EQ(next(&ce, &err), -FI_EAVAIL);
  u = park(false, 0, "part", 2, peer_[0]);
  u->complete = false;
  log().adopt_ok = true;  // taken over: the transport completes it later
  char buf2[8];
  ASSERT_EQ(fi_recv(ep(), buf2, sizeof buf2, nullptr, FI_ADDR_UNSPEC, buf2), 0);
  EXPECT_EQ(log().adopted, 2);
  EXPECT_EQ(ep_->rx->ux_count, 0u);
  EXPECT_EQ(ep_->rx->posted_msg.size(), 0u);  // the transport holds the receive now
  EXPECT_EQ(next(&ce), -FI_EAGAIN);
}

TEST_F(Matcher, UnexpectedQueueIsBounded) {
  size_t parked = 0;
  while (park(false, 0, "", parked, peer_[0])) ++parked;
  EXPECT_EQ(parked, weft::ux_max_count);
  {
    weft::ep_guard g(*ep_);
    EXPECT_EQ(weft::ux_add(*ep_, true, 1), nullptr);  // the bound counts both queues
  }
  char buf[1];
  ASSERT_EQ(fi_recv(ep(), buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, buf), 0);
  EXPECT_NE(park(false, 0, "", 0, peer_[0]), nullptr);  // room again
}

TEST_F(Matcher, CancelPostedReceive) {
  char buf[8];
  ASSERT_EQ(fi_trecv(ep(), buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, 3, 0, buf), 0);
  EXPECT_EQ(fi_cancel(&ep()->fid, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_cancel(&ep()->fid, &buf[1]), -FI_ENOENT);
  ASSERT_EQ(fi_cancel(&ep()->fid, buf), 0);
  fi_cq_tagged_entry ce;
  fi_cq_err_entry err{};
  ASSERT_EQ(next(&ce, &err), -FI_EAVAIL);
  EXPECT_EQ(err.err, FI_ECANCELED);
  EXPECT_EQ(err.op_context, buf);
  EXPECT_FALSE(arrive(true, 3, "late", peer_[0]));
}

TEST_F(Matcher, BadReceiveArguments) {
  char buf[8];
  iovec many[5] = {{buf, 1}, {buf, 1}, {buf, 1}, {buf, 1}, {buf, 1}};
  EXPECT_EQ(fi_trecvv(ep(), many, nullptr, 5, FI_ADDR_UNSPEC, 0, 0, nullptr), -FI_EINVAL);
  iovec null_piece{nullptr, 4};
  EXPECT_EQ(fi_recvv(ep(), &null_piece, nullptr, 1, FI_ADDR_UNSPEC, nullptr), -FI_EINVAL);
  fi_msg_tagged m{};
  m.msg_iov = many;
  m.iov_count = 1;
  EXPECT_EQ(fi_trecvmsg(ep(), &m, FI_MULTI_RECV), -FI_EINVAL);  // multi-receive is untagged only
  EXPECT_EQ(fi_trecvmsg(ep(), nullptr, 0), -FI_EINVAL);
  EXPECT_EQ(fi_trecvmsg(ep(), &m, 1ULL << 62), -FI_EBADFLAGS);
  EXPECT_EQ(fi_trecv(ep(), buf, sizeof buf, nullptr, 12345, 0, 0, nullptr), -FI_EINVAL);  // not in the AV
}

}  // namespace
