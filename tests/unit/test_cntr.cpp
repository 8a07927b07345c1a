// SPDX-License-Identifier: BSD-3-Clause
// Counters through the public API, incremented through the provider interface
// (util/cntr.hpp) where a real operation would.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdangling-else"
#include "fixture.hpp"
#pragma GCC diagnostic pop

#include <poll.h>

#include <chrono>
#include <thread>
#include <vector>

#include "util/cntr.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::domain_test;
using clk = std::chrono::steady_clock;

class CntrTest : public domain_test {
protected:
  fid_cntr* open(fi_wait_obj wait = FI_WAIT_NONE, void* ctx = nullptr) {
    fi_cntr_attr attr{};
    attr.events = FI_CNTR_EVENTS_COMP;
    attr.wait_obj = wait;
    fid_cntr* c = nullptr;
    EXPECT_EQ(fi_cntr_open(domain, &attr, &c, ctx), 0);
    return c;
  }
};

TEST_P(CntrTest, ValuesAndErrors) {
  fid_cntr* c = nullptr;
  ASSERT_EQ(fi_cntr_open(domain, nullptr, &c, nullptr), 0);  // NULL attr: defaults
  EXPECT_EQ(c->fid.fclass, static_cast<size_t>(FI_CLASS_CNTR));
  EXPECT_EQ(fi_cntr_read(c), 0u);
  EXPECT_EQ(fi_cntr_readerr(c), 0u);
  EXPECT_EQ(fi_cntr_add(c, 5), 0);
  EXPECT_EQ(fi_cntr_read(c), 5u);
  weft::cntr_inc(c);
  weft::cntr_inc(c, 10);
  EXPECT_EQ(fi_cntr_read(c), 16u);
  EXPECT_EQ(fi_cntr_set(c, 2), 0);
  EXPECT_EQ(fi_cntr_read(c), 2u);
  EXPECT_EQ(fi_cntr_adderr(c, 3), 0);
  weft::cntr_err_inc(c);
  EXPECT_EQ(fi_cntr_readerr(c), 4u);
  EXPECT_EQ(fi_cntr_seterr(c, 1), 0);
  EXPECT_EQ(fi_cntr_readerr(c), 1u);
  EXPECT_EQ(fi_cntr_read(c), 2u);
  EXPECT_EQ(fi_close(&c->fid), 0);
}

TEST_P(CntrTest, WaitThresholdAndTimeout) {
  for (fi_wait_obj w : {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD}) {
    SCOPED_TRACE(w);
    fid_cntr* c = open(w);
    EXPECT_EQ(fi_cntr_wait(c, 0, 0), 0);  // already reached
    ASSERT_EQ(fi_cntr_add(c, 3), 0);
    EXPECT_EQ(fi_cntr_wait(c, 3, 0), 0);
    auto t0 = clk::now();
    EXPECT_EQ(fi_cntr_wait(c, 4, 30), -FI_ETIMEDOUT);
    EXPECT_GE(clk::now() - t0, 29ms);
    EXPECT_EQ(fi_cntr_readerr(c), 0u);  // a timeout is not an error
    std::thread t([c] {
      for (int i = 0; i < 3; i++) {
        std::this_thread::sleep_for(3ms);
        weft::cntr_inc(c);
      }
    });
    EXPECT_EQ(fi_cntr_wait(c, 6, 5000), 0);
    EXPECT_GE(fi_cntr_read(c), 6u);
    t.join();
    EXPECT_EQ(fi_close(&c->fid), 0);
  }
}

// Any change of the error value unblocks waiters with -FI_EAVAIL.
TEST_P(CntrTest, ErrorUnblocksWait) {
  fid_cntr* c = open(FI_WAIT_UNSPEC);
  std::thread t([c] {
    std::this_thread::sleep_for(10ms);
    weft::cntr_err_inc(c);
  });
  EXPECT_EQ(fi_cntr_wait(c, 100, 5000), -FI_EAVAIL);
  t.join();
  EXPECT_EQ(fi_cntr_readerr(c), 1u);
  EXPECT_EQ(fi_close(&c->fid), 0);
}

TEST_P(CntrTest, FdWaitObjectAndTrywait) {
  fid_cntr* c = open(FI_WAIT_FD);
  int fd = -1;
  ASSERT_EQ(fi_control(&c->fid, FI_GETWAIT, &fd), 0);
  ASSERT_GE(fd, 0);
  fid* fids[] = {&c->fid};
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(fi_trywait(fabric, fids, 1), 0);
  EXPECT_EQ(poll(&p, 1, 0), 0);
  weft::cntr_inc(c);
  EXPECT_EQ(poll(&p, 1, 0), 1);
  EXPECT_EQ(fi_trywait(fabric, fids, 1), -FI_EAGAIN);  // the change is the event
  EXPECT_EQ(fi_cntr_read(c), 1u);
  EXPECT_EQ(fi_trywait(fabric, fids, 1), 0);
  EXPECT_EQ(poll(&p, 1, 0), 0);
  std::thread t([c] {
    std::this_thread::sleep_for(10ms);
    weft::cntr_inc(c);
  });
  EXPECT_EQ(poll(&p, 1, 5000), 1);
  t.join();
  EXPECT_EQ(fi_close(&c->fid), 0);
}

TEST_P(CntrTest, MutexCond) {
  fid_cntr* c = open(FI_WAIT_MUTEX_COND);
  fi_mutex_cond mc{};
  ASSERT_EQ(fi_control(&c->fid, FI_GETWAIT, &mc), 0);
  EXPECT_NE(mc.mutex, nullptr);
  EXPECT_NE(mc.cond, nullptr);
  fi_wait_obj kind;
  ASSERT_EQ(fi_control(&c->fid, FI_GETWAITOBJ, &kind), 0);
  EXPECT_EQ(kind, FI_WAIT_MUTEX_COND);
  EXPECT_EQ(fi_close(&c->fid), 0);
}

TEST_P(CntrTest, OpsFlags) {
  fid_cntr* c = open();
  uint64_t flags = 1;
  ASSERT_EQ(fi_control(&c->fid, FI_GETOPSFLAG, &flags), 0);
  EXPECT_EQ(flags, 0u);
  flags = FI_SEND | FI_RECV;
  ASSERT_EQ(fi_control(&c->fid, FI_SETOPSFLAG, &flags), 0);
  EXPECT_EQ(weft::cntr_ops_flags(c), FI_SEND | FI_RECV);
  flags = 0;
  ASSERT_EQ(fi_control(&c->fid, FI_GETOPSFLAG, &flags), 0);
  EXPECT_EQ(flags, FI_SEND | FI_RECV);
  EXPECT_EQ(fi_control(&c->fid, FI_GETOPSFLAG, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_control(&c->fid, FI_SETOPSFLAG, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_close(&c->fid), 0);
}

TEST_P(CntrTest, ReadAndWaitRunPollers) {
  fid_cntr* c = open(FI_WAIT_UNSPEC);
  struct state {
    fid_cntr* c;
    int calls = 0;
  } st{c};
  auto poller = [](void* arg) {
    auto* s = static_cast<state*>(arg);
    if (++s->calls <= 3) weft::cntr_inc(s->c);
  };
  ASSERT_EQ(weft::cntr_add_poller(c, poller, &st), 0);
  EXPECT_EQ(fi_cntr_read(c), 1u);
  EXPECT_EQ(fi_cntr_wait(c, 3, 1000), 0);  // progress while waiting
  EXPECT_EQ(fi_cntr_wait(c, 4, 10), -FI_ETIMEDOUT);
  EXPECT_EQ(weft::cntr_del_poller(c, poller, &st), 0);
  EXPECT_EQ(weft::cntr_del_poller(c, poller, &st), -FI_ENOENT);
  EXPECT_EQ(fi_close(&c->fid), 0);
}

TEST_P(CntrTest, BusyWhileBound) {
  fid_cntr* c = open();
  EXPECT_TRUE(weft::is_cntr(&c->fid));
  EXPECT_FALSE(weft::is_cntr(&domain->fid));
  weft::cntr_take(c);
  EXPECT_EQ(fi_close(&c->fid), -FI_EBUSY);
  weft::cntr_drop(c);
  EXPECT_EQ(fi_close(&c->fid), 0);
}

TEST_P(CntrTest, BadArguments) {
  fi_cntr_attr attr{};
  fid_cntr* c = nullptr;
  EXPECT_EQ(fi_cntr_open(domain, &attr, nullptr, nullptr), -FI_EINVAL);
  attr.events = static_cast<fi_cntr_events>(3);
  EXPECT_EQ(fi_cntr_open(domain, &attr, &c, nullptr), -FI_EINVAL);
  attr = {};
  attr.flags = 1;
  EXPECT_EQ(fi_cntr_open(domain, &attr, &c, nullptr), -FI_EBADFLAGS);
  attr = {};
  attr.wait_obj = static_cast<fi_wait_obj>(77);
  EXPECT_EQ(fi_cntr_open(domain, &attr, &c, nullptr), -FI_EINVAL);
  attr.wait_obj = FI_WAIT_POLLFD;
  EXPECT_EQ(fi_cntr_open(domain, &attr, &c, nullptr), -FI_ENOSYS);
  attr.wait_obj = FI_WAIT_SET;
  EXPECT_EQ(fi_cntr_open(domain, &attr, &c, nullptr), -FI_EINVAL);
  attr.wait_set = reinterpret_cast<fid_wait*>(domain);
  EXPECT_EQ(fi_cntr_open(domain, &attr, &c, nullptr), -FI_EINVAL);
  EXPECT_EQ(c, nullptr);

  c = open();
  EXPECT_EQ(fi_cntr_wait(c, 1, 0), -FI_EINVAL);  // FI_WAIT_NONE
  int fd;
  EXPECT_EQ(fi_control(&c->fid, FI_GETWAIT, &fd), -FI_ENODATA);
  EXPECT_EQ(fi_control(&c->fid, 999, &fd), -FI_ENOSYS);
  fid* fids[] = {&c->fid};
  EXPECT_EQ(fi_trywait(fabric, fids, 1), -FI_EINVAL);
  EXPECT_EQ(weft::cntr_add_poller(c, nullptr, nullptr), -FI_EINVAL);
  EXPECT_EQ(weft::cntr_add_wait_fd(c, 0, POLLIN), -FI_ENOSYS);
  EXPECT_EQ(fi_close(&c->fid), 0);
}

WEFT_ALL_PROVIDERS(CntrTest);

}  // namespace
