// SPDX-License-Identifier: BSD-3-Clause
// Wait sets, poll sets and fi_trywait.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdangling-else"
#include "fixture.hpp"
#pragma GCC diagnostic pop

#include <poll.h>

#include <chrono>
#include <thread>

#include "util/cntr.hpp"
#include "util/cq.hpp"
#include "util/eq.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::domain_test;
using clk = std::chrono::steady_clock;

class WaitPollTest : public domain_test {
protected:
  fid_wait* open_set(fi_wait_obj kind) {
    fi_wait_attr attr{};
    attr.wait_obj = kind;
    fid_wait* ws = nullptr;
    EXPECT_EQ(fi_wait_open(fabric, &attr, &ws), 0);
    return ws;
  }
  fid_cq* open_cq(fi_wait_obj wait, fid_wait* ws = nullptr, void* ctx = nullptr) {
    fi_cq_attr attr{};
    attr.format = FI_CQ_FORMAT_CONTEXT;
    attr.wait_obj = wait;
    attr.wait_set = ws;
    fid_cq* cq = nullptr;
    EXPECT_EQ(fi_cq_open(domain, &attr, &cq, ctx), 0);
    return cq;
  }
  fid_cntr* open_cntr(fi_wait_obj wait, fid_wait* ws = nullptr, void* ctx = nullptr) {
    fi_cntr_attr attr{};
    attr.wait_obj = wait;
    attr.wait_set = ws;
    fid_cntr* c = nullptr;
    EXPECT_EQ(fi_cntr_open(domain, &attr, &c, ctx), 0);
    return c;
  }
  fid_eq* open_eq(fi_wait_obj wait, fid_wait* ws = nullptr) {
    fi_eq_attr attr{};
    attr.wait_obj = wait;
    attr.wait_set = ws;
    fid_eq* eq = nullptr;
    EXPECT_EQ(fi_eq_open(fabric, &attr, &eq, nullptr), 0);
    return eq;
  }
  static int post(fid_cq* cq) { return weft::cq_write(cq, nullptr, FI_SEND, 0, nullptr, 0, 0); }
};

TEST_P(WaitPollTest, WaitSetKinds) {
  for (fi_wait_obj k : {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD}) {
    SCOPED_TRACE(k);
    fid_wait* ws = open_set(k);
    ASSERT_NE(ws, nullptr);
    EXPECT_EQ(ws->fid.fclass, static_cast<size_t>(FI_CLASS_WAIT));
    fi_wait_obj got = FI_WAIT_NONE;
    ASSERT_EQ(fi_control(&ws->fid, FI_GETWAITOBJ, &got), 0);
    EXPECT_EQ(got, k == FI_WAIT_UNSPEC ? FI_WAIT_FD : k);
    if (got == FI_WAIT_FD) {
      int fd = -1;
      EXPECT_EQ(fi_control(&ws->fid, FI_GETWAIT, &fd), 0);
      EXPECT_GE(fd, 0);
    } else if (got == FI_WAIT_MUTEX_COND) {
      fi_mutex_cond mc{};
      EXPECT_EQ(fi_control(&ws->fid, FI_GETWAIT, &mc), 0);
      EXPECT_NE(mc.mutex, nullptr);
    } else {
      int fd;
      EXPECT_EQ(fi_control(&ws->fid, FI_GETWAIT, &fd), -FI_ENODATA);
    }
    auto t0 = clk::now();
    EXPECT_EQ(fi_wait(ws, 20), -FI_ETIMEDOUT);
    EXPECT_GE(clk::now() - t0, 19ms);
    EXPECT_EQ(fi_close(&ws->fid), 0);
  }
}

TEST_P(WaitPollTest, WaitSetWithMembers) {
  fid_wait* ws = open_set(FI_WAIT_UNSPEC);
  fid_cq* cq = open_cq(FI_WAIT_SET, ws);
  fid_cntr* c = open_cntr(FI_WAIT_SET, ws);
  fid_eq* eq = open_eq(FI_WAIT_SET, ws);
  ASSERT_TRUE(cq && c && eq);
  // Members cannot block on their own, and report the set's wait object.
  fi_cq_entry e;
  EXPECT_EQ(fi_cq_sread(cq, &e, 1, nullptr, 0), -FI_EINVAL);
  EXPECT_EQ(fi_cntr_wait(c, 1, 0), -FI_EINVAL);
  int set_fd = -1, cq_fd = -2;
  ASSERT_EQ(fi_control(&ws->fid, FI_GETWAIT, &set_fd), 0);
  ASSERT_EQ(fi_control(&cq->fid, FI_GETWAIT, &cq_fd), 0);
  EXPECT_EQ(set_fd, cq_fd);
  // The set cannot close while it has members.
  EXPECT_EQ(fi_close(&ws->fid), -FI_EBUSY);

  EXPECT_EQ(fi_wait(ws, 10), -FI_ETIMEDOUT);
  ASSERT_EQ(post(cq), 0);
  EXPECT_EQ(fi_wait(ws, 1000), 0);
  EXPECT_EQ(fi_cq_read(cq, &e, 1), 1);
  fi_wait(ws, 0);  // consume the leftover signal
  EXPECT_EQ(fi_wait(ws, 10), -FI_ETIMEDOUT);

  // Another thread's completion, counter change or event wakes fi_wait.
  std::thread t1([cq] {
    std::this_thread::sleep_for(10ms);
    EXPECT_EQ(post(cq), 0);
  });
  EXPECT_EQ(fi_wait(ws, -1), 0);
  t1.join();
  EXPECT_EQ(fi_cq_read(cq, &e, 1), 1);
  fi_wait(ws, 0);
  std::thread t2([c] {
    std::this_thread::sleep_for(10ms);
    weft::cntr_inc(c);
  });
  EXPECT_EQ(fi_wait(ws, 5000), 0);
  t2.join();
  fi_eq_entry in{};
  ASSERT_GT(weft::eq_post(eq, FI_NOTIFY, &in, sizeof(in), 0), 0);
  EXPECT_EQ(fi_wait(ws, 0), 0);
  uint32_t event;
  EXPECT_GT(fi_eq_read(eq, &event, &in, sizeof(in), 0), 0);

  EXPECT_EQ(fi_close(&cq->fid), 0);
  EXPECT_EQ(fi_close(&c->fid), 0);
  EXPECT_EQ(fi_close(&eq->fid), 0);
  EXPECT_EQ(fi_close(&ws->fid), 0);
}

TEST_P(WaitPollTest, FdWaitSetWithPollAndTrywait) {
  fid_wait* ws = open_set(FI_WAIT_FD);
  fid_cq* cq = open_cq(FI_WAIT_SET, ws);
  int fd = -1;
  ASSERT_EQ(fi_control(&ws->fid, FI_GETWAIT, &fd), 0);
  fid* fids[] = {&ws->fid};
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(fi_trywait(fabric, fids, 1), 0);
  EXPECT_EQ(poll(&p, 1, 0), 0);
  std::thread t([cq] {
    std::this_thread::sleep_for(10ms);
    EXPECT_EQ(post(cq), 0);
  });
  EXPECT_EQ(poll(&p, 1, 5000), 1);
  t.join();
  EXPECT_EQ(fi_trywait(fabric, fids, 1), -FI_EAGAIN);
  fi_cq_entry e;
  EXPECT_EQ(fi_cq_read(cq, &e, 1), 1);
  EXPECT_EQ(fi_trywait(fabric, fids, 1), 0);
  EXPECT_EQ(poll(&p, 1, 0), 0);
  // A member of a set may be passed too: only its queue is checked.
  fid* member[] = {&cq->fid};
  EXPECT_EQ(fi_trywait(fabric, member, 1), 0);
  ASSERT_EQ(post(cq), 0);
  EXPECT_EQ(fi_trywait(fabric, member, 1), -FI_EAGAIN);
  EXPECT_EQ(fi_close(&cq->fid), 0);
  EXPECT_EQ(fi_close(&ws->fid), 0);
}

TEST_P(WaitPollTest, TrywaitSeveral) {
  fid_cq* cq = open_cq(FI_WAIT_FD);
  fid_cntr* c = open_cntr(FI_WAIT_FD);
  fid_eq* eq = open_eq(FI_WAIT_FD);
  fid* fids[] = {&cq->fid, &c->fid, &eq->fid};
  EXPECT_EQ(fi_trywait(fabric, fids, 3), 0);
  EXPECT_EQ(fi_trywait(fabric, fids, 0), 0);
  fi_eq_entry in{};
  ASSERT_GT(weft::eq_post(eq, FI_NOTIFY, &in, sizeof(in), 0), 0);
  EXPECT_EQ(fi_trywait(fabric, fids, 3), -FI_EAGAIN);
  uint32_t event;
  EXPECT_GT(fi_eq_read(eq, &event, &in, sizeof(in), 0), 0);
  EXPECT_EQ(fi_trywait(fabric, fids, 3), 0);
  EXPECT_EQ(fi_close(&cq->fid), 0);
  EXPECT_EQ(fi_close(&c->fid), 0);
  EXPECT_EQ(fi_close(&eq->fid), 0);
}

TEST_P(WaitPollTest, TrywaitBadFids) {
  fid_cq* cq = open_cq(FI_WAIT_FD);
  fid_cq* none = open_cq(FI_WAIT_NONE);
  fid* null_fid[] = {nullptr};
  fid* dom[] = {&domain->fid};
  fid* mixed[] = {&cq->fid, nullptr};
  fid* nowait[] = {&none->fid};
  EXPECT_EQ(fi_trywait(fabric, nullptr, 1), -FI_EINVAL);
  EXPECT_EQ(fi_trywait(fabric, null_fid, 1), -FI_EINVAL);
  EXPECT_EQ(fi_trywait(fabric, dom, 1), -FI_EINVAL);
  EXPECT_EQ(fi_trywait(fabric, mixed, 2), -FI_EINVAL);
  EXPECT_EQ(fi_trywait(fabric, nowait, 1), -FI_EINVAL);
  EXPECT_EQ(fi_trywait(fabric, mixed, -1), -FI_EINVAL);
  EXPECT_EQ(fi_close(&cq->fid), 0);
  EXPECT_EQ(fi_close(&none->fid), 0);
}

TEST_P(WaitPollTest, WaitSetBadArguments) {
  fi_wait_attr attr{};
  fid_wait* ws = nullptr;
  attr.wait_obj = FI_WAIT_UNSPEC;
  EXPECT_EQ(fi_wait_open(fabric, nullptr, &ws), -FI_EINVAL);
  EXPECT_EQ(fi_wait_open(fabric, &attr, nullptr), -FI_EINVAL);
  attr.flags = 1;
  EXPECT_EQ(fi_wait_open(fabric, &attr, &ws), -FI_EBADFLAGS);
  attr.flags = 0;
  attr.wait_obj = FI_WAIT_NONE;
  EXPECT_EQ(fi_wait_open(fabric, &attr, &ws), -FI_EINVAL);
  attr.wait_obj = FI_WAIT_SET;
  EXPECT_EQ(fi_wait_open(fabric, &attr, &ws), -FI_EINVAL);
  attr.wait_obj = FI_WAIT_POLLFD;
  EXPECT_EQ(fi_wait_open(fabric, &attr, &ws), -FI_ENOSYS);
  attr.wait_obj = static_cast<fi_wait_obj>(55);
  EXPECT_EQ(fi_wait_open(fabric, &attr, &ws), -FI_EINVAL);
  EXPECT_EQ(ws, nullptr);
  ws = open_set(FI_WAIT_YIELD);
  EXPECT_EQ(fi_control(&ws->fid, FI_GETWAIT, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_control(&ws->fid, 777, nullptr), -FI_ENOSYS);
  EXPECT_EQ(fi_close(&ws->fid), 0);
}

TEST_P(WaitPollTest, WaitSetOfAnotherFabric) {
  fid_fabric* other = nullptr;
  ASSERT_EQ(fi_fabric(info->fabric_attr, &other, nullptr), 0);
  fi_wait_attr wattr{};
  wattr.wait_obj = FI_WAIT_UNSPEC;
  fid_wait* ws = nullptr;
  ASSERT_EQ(fi_wait_open(other, &wattr, &ws), 0);
  fi_cq_attr attr{};
  attr.wait_obj = FI_WAIT_SET;
  attr.wait_set = ws;
  fid_cq* cq = nullptr;
  EXPECT_EQ(fi_cq_open(domain, &attr, &cq, nullptr), -FI_EINVAL);
  fid* fids[] = {&ws->fid};
  EXPECT_EQ(fi_trywait(fabric, fids, 1), -FI_EINVAL);
  EXPECT_EQ(fi_trywait(other, fids, 1), 0);
  EXPECT_EQ(fi_close(&ws->fid), 0);
  EXPECT_EQ(fi_close(&other->fid), 0);
}

TEST_P(WaitPollTest, PollSet) {
  int cq_ctx, cntr_ctx;
  fid_poll* ps = nullptr;
  fi_poll_attr pattr{};
  ASSERT_EQ(fi_poll_open(domain, &pattr, &ps), 0);
  EXPECT_EQ(ps->fid.fclass, static_cast<size_t>(FI_CLASS_POLL));
  fid_cq* cq = open_cq(FI_WAIT_NONE, nullptr, &cq_ctx);
  fid_cntr* c = open_cntr(FI_WAIT_NONE, nullptr, &cntr_ctx);
  ASSERT_EQ(fi_poll_add(ps, &cq->fid, 0), 0);
  ASSERT_EQ(fi_poll_add(ps, &c->fid, 0), 0);
  void* ctx[4] = {};
  EXPECT_EQ(fi_poll(ps, ctx, 4), 0);
  ASSERT_EQ(post(cq), 0);
  ASSERT_EQ(fi_poll(ps, ctx, 4), 1);
  EXPECT_EQ(ctx[0], &cq_ctx);
  EXPECT_EQ(fi_poll(ps, ctx, 4), 1);  // still not empty
  weft::cntr_inc(c);
  ASSERT_EQ(fi_poll(ps, ctx, 4), 2);
  EXPECT_EQ(ctx[0], &cq_ctx);
  EXPECT_EQ(ctx[1], &cntr_ctx);
  ASSERT_EQ(fi_poll(ps, ctx, 1), 1);  // limited by count
  fi_cq_entry e;
  EXPECT_EQ(fi_cq_read(cq, &e, 1), 1);
  EXPECT_EQ(fi_poll(ps, ctx, 4), 0);  // counter reported once per change
  // fi_cntr_add / fi_cntr_set restart the comparison; error changes count.
  EXPECT_EQ(fi_cntr_add(c, 1), 0);
  EXPECT_EQ(fi_poll(ps, ctx, 4), 0);
  EXPECT_EQ(fi_cntr_adderr(c, 1), 0);
  ASSERT_EQ(fi_poll(ps, ctx, 4), 1);
  EXPECT_EQ(ctx[0], &cntr_ctx);

  // Members are referenced; the set refuses to close while it has any.
  EXPECT_EQ(fi_close(&cq->fid), -FI_EBUSY);
  EXPECT_EQ(fi_close(&ps->fid), -FI_EBUSY);
  EXPECT_EQ(fi_poll_del(ps, &cq->fid, 0), 0);
  EXPECT_EQ(fi_poll_del(ps, &cq->fid, 0), -FI_EINVAL);
  EXPECT_EQ(fi_close(&cq->fid), 0);
  EXPECT_EQ(fi_poll_del(ps, &c->fid, 0), 0);
  EXPECT_EQ(fi_close(&c->fid), 0);
  EXPECT_EQ(fi_close(&ps->fid), 0);
}

TEST_P(WaitPollTest, PollSetRunsProgress) {
  fid_poll* ps = nullptr;
  ASSERT_EQ(fi_poll_open(domain, nullptr, &ps), 0);
  int cq_ctx;
  fid_cq* cq = open_cq(FI_WAIT_NONE, nullptr, &cq_ctx);
  struct state {
    fid_cq* cq;
    bool done = false;
  } st{cq};
  auto poller = [](void* arg) {
    auto* s = static_cast<state*>(arg);
    if (!s->done) {
      s->done = true;
      EXPECT_EQ(post(s->cq), 0);
    }
  };
  ASSERT_EQ(weft::cq_add_poller(cq, poller, &st), 0);
  ASSERT_EQ(fi_poll_add(ps, &cq->fid, 0), 0);
  void* ctx[2];
  ASSERT_EQ(fi_poll(ps, ctx, 2), 1);
  EXPECT_EQ(ctx[0], &cq_ctx);
  EXPECT_EQ(fi_poll_del(ps, &cq->fid, 0), 0);
  EXPECT_EQ(weft::cq_del_poller(cq, poller, &st), 0);
  EXPECT_EQ(fi_close(&cq->fid), 0);
  EXPECT_EQ(fi_close(&ps->fid), 0);
}

TEST_P(WaitPollTest, PollSetBadArguments) {
  fi_poll_attr attr{};
  fid_poll* ps = nullptr;
  EXPECT_EQ(fi_poll_open(domain, &attr, nullptr), -FI_EINVAL);
  attr.flags = 1;
  EXPECT_EQ(fi_poll_open(domain, &attr, &ps), -FI_EBADFLAGS);
  EXPECT_EQ(ps, nullptr);
  ASSERT_EQ(fi_poll_open(domain, nullptr, &ps), 0);
  fid_cq* cq = open_cq(FI_WAIT_NONE);
  fid_eq* eq = open_eq(FI_WAIT_NONE);
  void* ctx[1];
  EXPECT_EQ(fi_poll_add(ps, nullptr, 0), -FI_EINVAL);
  EXPECT_EQ(fi_poll_add(ps, &domain->fid, 0), -FI_EINVAL);
  EXPECT_EQ(fi_poll_add(ps, &eq->fid, 0), -FI_EINVAL);  // CQs and counters only
  EXPECT_EQ(fi_poll_add(ps, &cq->fid, 1), -FI_EBADFLAGS);
  ASSERT_EQ(fi_poll_add(ps, &cq->fid, 0), 0);
  EXPECT_EQ(fi_poll_add(ps, &cq->fid, 0), -FI_EALREADY);
  EXPECT_EQ(fi_poll_del(ps, nullptr, 0), -FI_EINVAL);
  EXPECT_EQ(fi_poll_del(ps, &eq->fid, 0), -FI_EINVAL);
  EXPECT_EQ(fi_poll_del(ps, &cq->fid, 1), -FI_EBADFLAGS);
  EXPECT_EQ(fi_poll(ps, nullptr, 1), -FI_EINVAL);
  EXPECT_EQ(fi_poll(ps, ctx, 0), -FI_EINVAL);
  EXPECT_EQ(fi_poll_del(ps, &cq->fid, 0), 0);
  EXPECT_EQ(fi_close(&cq->fid), 0);
  EXPECT_EQ(fi_close(&eq->fid), 0);
  EXPECT_EQ(fi_close(&ps->fid), 0);
}

WEFT_ALL_PROVIDERS(WaitPollTest);

}  // namespace
