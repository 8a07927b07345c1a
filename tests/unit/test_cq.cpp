// SPDX-License-Identifier: BSD-3-Clause
// Completion queues through the public API, with entries posted through the
// provider interface (util/cq.hpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdangling-else"
#include "fixture.hpp"
#pragma GCC diagnostic pop

#include <poll.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "util/cq.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::domain_test;
using clk = std::chrono::steady_clock;

class CqTest : public domain_test {
protected:
  fid_cq* open(fi_cq_format format = FI_CQ_FORMAT_TAGGED, fi_wait_obj wait = FI_WAIT_NONE, size_t size = 0,
               fi_cq_wait_cond cond = FI_CQ_COND_NONE, void* ctx = nullptr) {
    fi_cq_attr attr{};
    attr.format = format;
    attr.wait_obj = wait;
    attr.size = size;
    attr.wait_cond = cond;
    fid_cq* cq = nullptr;
    EXPECT_EQ(fi_cq_open(domain, &attr, &cq, ctx), 0);
    return cq;
  }
  static void* ctx(uintptr_t i) { return reinterpret_cast<void*>(0x1000 + i); }
  static int write(fid_cq* cq, uintptr_t i, fi_addr_t src = FI_ADDR_NOTAVAIL) {
    return weft::cq_write(cq, ctx(i), FI_RECV | FI_TAGGED, 100 + i, reinterpret_cast<void*>(0x2000 + i),
                          300 + i, 400 + i, src);
  }
  // Entries 0..n-1 as write() made them, read in `format`.
  static void expect_written(const uint8_t* buf, fi_cq_format format, uintptr_t n) {
    size_t es = weft::cq_entry_size(format);
    for (uintptr_t i = 0; i < n; i++) {
      SCOPED_TRACE(i);
      fi_cq_tagged_entry t{};
      std::memcpy(&t, buf + es * i, es);
      EXPECT_EQ(t.op_context, ctx(i));
      if (format >= FI_CQ_FORMAT_MSG) {
        EXPECT_EQ(t.flags, FI_RECV | FI_TAGGED);
        EXPECT_EQ(t.len, 100 + i);
      }
      if (format >= FI_CQ_FORMAT_DATA) {
        EXPECT_EQ(t.buf, reinterpret_cast<void*>(0x2000 + i));
        EXPECT_EQ(t.data, 300 + i);
      }
      if (format == FI_CQ_FORMAT_TAGGED) {
        EXPECT_EQ(t.tag, 400 + i);
      }
    }
  }
  static int write_error(fid_cq* cq, uintptr_t i, const void* data = nullptr, size_t size = 0) {
    fi_cq_err_entry e{};
    e.op_context = ctx(i);
    e.flags = FI_SEND | FI_MSG;
    e.len = 7;
    e.tag = 9;
    e.olen = 11;
    e.err = FI_ETRUNC;
    e.prov_errno = 42;
    e.err_data = const_cast<void*>(data);
    e.err_data_size = size;
    return weft::cq_write_error(cq, e);
  }
};

TEST_P(CqTest, EntrySizes) {
  EXPECT_EQ(weft::cq_entry_size(FI_CQ_FORMAT_CONTEXT), 8u);
  EXPECT_EQ(weft::cq_entry_size(FI_CQ_FORMAT_MSG), 24u);
  EXPECT_EQ(weft::cq_entry_size(FI_CQ_FORMAT_DATA), 40u);
  EXPECT_EQ(weft::cq_entry_size(FI_CQ_FORMAT_TAGGED), 48u);
  EXPECT_EQ(weft::cq_entry_size(static_cast<fi_cq_format>(99)), 0u);
}

TEST_P(CqTest, EmptyReadsAgain) {
  fid_cq* cq = open();
  fi_cq_tagged_entry e;
  EXPECT_EQ(fi_cq_read(cq, &e, 1), -FI_EAGAIN);
  EXPECT_EQ(fi_cq_read(cq, nullptr, 0), -FI_EAGAIN);  // drives progress only
  fi_cq_err_entry err{};
  EXPECT_EQ(fi_cq_readerr(cq, &err, 0), -FI_EAGAIN);
  ASSERT_EQ(write(cq, 0), 0);
  EXPECT_EQ(fi_cq_read(cq, nullptr, 0), 0);
  EXPECT_EQ(fi_cq_read(cq, &e, 1), 1);
  EXPECT_EQ(fi_close(&cq->fid), 0);
}

// Every format returns exactly its own fields and touches no byte past the
// entries it reports.
TEST_P(CqTest, EveryFormat) {
  const fi_cq_format formats[] = {FI_CQ_FORMAT_UNSPEC, FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_MSG,
                                  FI_CQ_FORMAT_DATA, FI_CQ_FORMAT_TAGGED};
  for (fi_cq_format f : formats) {
    SCOPED_TRACE(f);
    fid_cq* cq = open(f);
    ASSERT_NE(cq, nullptr);
    fi_cq_format eff = f == FI_CQ_FORMAT_UNSPEC ? FI_CQ_FORMAT_CONTEXT : f;
    EXPECT_EQ(weft::cq_format(cq), eff);
    size_t es = weft::cq_entry_size(eff);
    for (uintptr_t i = 0; i < 3; i++) ASSERT_EQ(write(cq, i), 0);
    std::vector<uint8_t> buf(es * 4, 0xab);
    ASSERT_EQ(fi_cq_read(cq, buf.data(), 2), 2);
    for (size_t b = es * 2; b < buf.size(); b++) ASSERT_EQ(buf[b], 0xab) << "byte " << b;
    ASSERT_EQ(fi_cq_read(cq, buf.data() + es * 2, 4), 1);
    for (size_t b = es * 3; b < buf.size(); b++) ASSERT_EQ(buf[b], 0xab) << "byte " << b;
    expect_written(buf.data(), eff, 3);
    EXPECT_EQ(fi_cq_read(cq, buf.data(), 1), -FI_EAGAIN);
    EXPECT_EQ(fi_close(&cq->fid), 0);
  }
}

TEST_P(CqTest, ReadFromReportsSources) {
  fid_cq* cq = open(FI_CQ_FORMAT_MSG);
  ASSERT_EQ(write(cq, 0, 17), 0);
  ASSERT_EQ(write(cq, 1), 0);  // unknown source
  ASSERT_EQ(write(cq, 2, 5), 0);
  fi_cq_msg_entry e[4];
  fi_addr_t src[4] = {1, 1, 1, 1};
  ASSERT_EQ(fi_cq_readfrom(cq, e, 4, src), 3);
  EXPECT_EQ(src[0], 17u);
  EXPECT_EQ(src[1], FI_ADDR_NOTAVAIL);
  EXPECT_EQ(src[2], 5u);
  EXPECT_EQ(src[3], 1u);  // untouched
  EXPECT_EQ(e[2].op_context, ctx(2));
  EXPECT_EQ(fi_cq_readfrom(cq, e, 4, src), -FI_EAGAIN);
  EXPECT_EQ(fi_close(&cq->fid), 0);
}

// An error keeps its place in the queue: the successes before it are read
// first, then read returns -FI_EAVAIL until readerr takes it.
TEST_P(CqTest, ErrorEntryKeepsOrder) {
  fid_cq* cq = open(FI_CQ_FORMAT_CONTEXT);
  ASSERT_EQ(write(cq, 0), 0);
  ASSERT_EQ(write_error(cq, 1), 0);
  ASSERT_EQ(write(cq, 2), 0);
  EXPECT_EQ(weft::cq_count(cq), 3u);
  fi_cq_entry e[4];
  fi_cq_err_entry err{};
  EXPECT_EQ(fi_cq_readerr(cq, &err, 0), -FI_EAGAIN);  // not at the head yet
  ASSERT_EQ(fi_cq_read(cq, e, 4), 1);
  EXPECT_EQ(e[0].op_context, ctx(0));
  EXPECT_EQ(fi_cq_read(cq, e, 4), -FI_EAVAIL);
  EXPECT_EQ(fi_cq_readfrom(cq, e, 4, nullptr), -FI_EAVAIL);
  ASSERT_EQ(fi_cq_readerr(cq, &err, FI_PEEK), 1);  // peek leaves it
  EXPECT_EQ(fi_cq_read(cq, e, 4), -FI_EAVAIL);
  std::memset(&err, 0, sizeof(err));
  ASSERT_EQ(fi_cq_readerr(cq, &err, 0), 1);
  EXPECT_EQ(err.op_context, ctx(1));
  EXPECT_EQ(err.flags, FI_SEND | FI_MSG);
  EXPECT_EQ(err.len, 7u);
  EXPECT_EQ(err.tag, 9u);
  EXPECT_EQ(err.olen, 11u);
  EXPECT_EQ(err.err, FI_ETRUNC);
  EXPECT_EQ(err.prov_errno, 42);
  EXPECT_EQ(err.err_data_size, 0u);
  EXPECT_EQ(fi_cq_readerr(cq, &err, 0), -FI_EAGAIN);
  ASSERT_EQ(fi_cq_read(cq, e, 4), 1);
  EXPECT_EQ(e[0].op_context, ctx(2));
  EXPECT_EQ(fi_close(&cq->fid), 0);
}

// API >= 1.5: a caller buffer (err_data_size > 0) receives a copy, truncated to
// its size; err_data_size 0 hands out a buffer the CQ owns.
TEST_P(CqTest, ReaderrErrData) {
  fid_cq* cq = open();
  const char blob[] = "provider specific details";
  ASSERT_EQ(write_error(cq, 0, blob, sizeof(blob)), 0);
  ASSERT_EQ(write_error(cq, 1, blob, sizeof(blob)), 0);
  ASSERT_EQ(write_error(cq, 2), 0);

  char small[8] = {};
  fi_cq_err_entry err{};
  err.err_data = small;
  err.err_data_size = sizeof(small);
  ASSERT_EQ(fi_cq_readerr(cq, &err, 0), 1);
  EXPECT_EQ(err.err_data, small);
  EXPECT_EQ(err.err_data_size, sizeof(small));
  EXPECT_EQ(std::memcmp(small, blob, sizeof(small)), 0);

  err = {};
  ASSERT_EQ(fi_cq_readerr(cq, &err, 0), 1);
  ASSERT_NE(err.err_data, nullptr);
  EXPECT_EQ(err.err_data_size, sizeof(blob));
  EXPECT_STREQ(static_cast<const char*>(err.err_data), blob);

  err = {};
  err.err_data = small;
  err.err_data_size = sizeof(small);
  ASSERT_EQ(fi_cq_readerr(cq, &err, 0), 1);
  EXPECT_EQ(err.err_data_size, 0u);
  EXPECT_EQ(fi_close(&cq->fid), 0);
}

TEST_P(CqTest, ReaderrOldApiKeepsOldStructSize) {
  fi_info* old = weft_test::get_info(GetParam(), FI_EP_UNSPEC, FI_VERSION(1, 4));
  ASSERT_NE(old, nullptr);
  fid_fabric* fab = nullptr;
  fid_domain* dom = nullptr;
  ASSERT_EQ(fi_fabric(old->fabric_attr, &fab, nullptr), 0);
  ASSERT_EQ(fi_domain(fab, old, &dom, nullptr), 0);
  fi_cq_attr attr{};
  fid_cq* cq = nullptr;
  ASSERT_EQ(fi_cq_open(dom, &attr, &cq, nullptr), 0);
  const char blob[] = "abc";
  ASSERT_EQ(write_error(cq, 0, blob, sizeof(blob)), 0);
  fi_cq_err_entry err{};
  char ignored[4] = {};
  err.err_data = ignored;          // ignored before 1.5
  err.err_data_size = 0x5a5a5a5a;  // not part of the 1.4 struct: never written
  ASSERT_EQ(fi_cq_readerr(cq, &err, 0), 1);
  EXPECT_EQ(err.err_data_size, 0x5a5a5a5au);
  ASSERT_NE(err.err_data, static_cast<void*>(ignored));
  EXPECT_STREQ(static_cast<const char*>(err.err_data), blob);
  EXPECT_EQ(fi_close(&cq->fid), 0);
  EXPECT_EQ(fi_close(&dom->fid), 0);
  EXPECT_EQ(fi_close(&fab->fid), 0);
  fi_freeinfo(old);
}

// A small CQ grows: nothing is lost or reordered.
TEST_P(CqTest, GrowsPastItsSize) {
  fid_cq* cq = open(FI_CQ_FORMAT_DATA, FI_WAIT_NONE, 4);
  constexpr uintptr_t n = 5000;
  for (uintptr_t i = 0; i < n; i++) {
    ASSERT_EQ(write(cq, i), 0);
    if (i % 1000 == 999) {
      ASSERT_EQ(write_error(cq, i), 0);
    }
  }
  EXPECT_EQ(weft::cq_count(cq), n + n / 1000);
  uintptr_t next = 0, errors = 0;
  fi_cq_data_entry e[7];
  for (;;) {
    ssize_t r = fi_cq_read(cq, e, 7);
    if (r == -FI_EAGAIN) break;
    if (r == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      ASSERT_EQ(fi_cq_readerr(cq, &err, 0), 1);
      EXPECT_EQ(err.op_context, ctx(next - 1));
      errors++;
      continue;
    }
    ASSERT_GT(r, 0);
    for (ssize_t k = 0; k < r; k++) ASSERT_EQ(e[k].op_context, ctx(next++));
  }
  EXPECT_EQ(next, n);
  EXPECT_EQ(errors, n / 1000);
  EXPECT_EQ(fi_close(&cq->fid), 0);
}

TEST_P(CqTest, ConcurrentWritersOneReader) {
  fid_cq* cq = open(FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC, 8);
  constexpr int writers = 4, per = 2000;
  std::vector<std::thread> ts;
  for (int w = 0; w < writers; w++)
    ts.emplace_back([cq, w] {
      for (int i = 0; i < per; i++) ASSERT_EQ(write(cq, static_cast<uintptr_t>(w * per + i)), 0);
    });
  std::vector<int> seen(writers * per, 0);
  int got = 0;
  fi_cq_entry e[16];
  while (got < writers * per) {
    ssize_t r = fi_cq_sread(cq, e, 16, nullptr, 2000);
    ASSERT_GT(r, 0);
    for (ssize_t k = 0; k < r; k++) seen[reinterpret_cast<uintptr_t>(e[k].op_context) - 0x1000]++;
    got += static_cast<int>(r);
  }
  for (auto& t : ts) t.join();
  for (int v : seen) ASSERT_EQ(v, 1);
  EXPECT_EQ(fi_close(&cq->fid), 0);
}

TEST_P(CqTest, SreadTimesOut) {
  for (fi_wait_obj w : {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD}) {
    SCOPED_TRACE(w);
    fid_cq* cq = open(FI_CQ_FORMAT_CONTEXT, w);
    fi_cq_entry e;
    auto t0 = clk::now();
    EXPECT_EQ(fi_cq_sread(cq, &e, 1, nullptr, 30), -FI_EAGAIN);
    EXPECT_GE(clk::now() - t0, 29ms);
    EXPECT_EQ(fi_cq_sread(cq, &e, 1, nullptr, 0), -FI_EAGAIN);
    ASSERT_EQ(write(cq, 1), 0);
    EXPECT_EQ(fi_cq_sread(cq, &e, 1, nullptr, 0), 1);
    EXPECT_EQ(fi_close(&cq->fid), 0);
  }
}

TEST_P(CqTest, SreadWokenByWriter) {
  for (fi_wait_obj w : {FI_WAIT_UNSPEC, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD}) {
    SCOPED_TRACE(w);
    fid_cq* cq = open(FI_CQ_FORMAT_MSG, w);
    std::thread t([cq] {
      std::this_thread::sleep_for(20ms);
      EXPECT_EQ(write(cq, 5, 3), 0);
    });
    fi_cq_msg_entry e{};
    fi_addr_t src = 0;
    EXPECT_EQ(fi_cq_sreadfrom(cq, &e, 1, &src, nullptr, -1), 1);
    EXPECT_EQ(e.op_context, ctx(5));
    EXPECT_EQ(src, 3u);
    t.join();
    EXPECT_EQ(fi_close(&cq->fid), 0);
  }
}

// An endpoint that owes a peer holds its CQs (cq_hold): reads find nothing
// until the hold ends, which wakes a sleeper in fi_cq_sread; a hold that
// outlives its bound lets the entries be read.
TEST_P(CqTest, HeldEntriesWaitForTheHoldToEnd) {
  for (fi_wait_obj w : {FI_WAIT_UNSPEC, FI_WAIT_MUTEX_COND}) {
    SCOPED_TRACE(w);
    fid_cq* cq = open(FI_CQ_FORMAT_CONTEXT, w);
    fi_cq_entry e;
    ASSERT_EQ(write(cq, 1), 0);
    weft::cq_hold(cq, true);
    weft::cq_hold(cq, true);  // two endpoints
    EXPECT_EQ(fi_cq_read(cq, &e, 1), -FI_EAGAIN);
    EXPECT_EQ(fi_cq_sread(cq, &e, 1, nullptr, 20), -FI_EAGAIN);
    weft::cq_hold(cq, false);
    EXPECT_EQ(fi_cq_read(cq, &e, 1), -FI_EAGAIN);  // one still holds
    std::thread t([cq] {
      std::this_thread::sleep_for(20ms);
      weft::cq_hold(cq, false);
    });
    auto t0 = clk::now();
    EXPECT_EQ(fi_cq_sread(cq, &e, 1, nullptr, 5000), 1);
    EXPECT_LT(clk::now() - t0, 2s);  // woken by the end of the hold, not its bound
    EXPECT_EQ(e.op_context, ctx(1));
    t.join();
    // A hold past its bound (cq_hold_max_ms): the entries are readable. The
    // CQ is the same code for every provider and wait object: waited once.
    if (w == FI_WAIT_UNSPEC && !strcmp(GetParam(), "shm")) {
      ASSERT_EQ(write(cq, 2), 0);
      weft::cq_hold(cq, true);
      EXPECT_EQ(fi_cq_read(cq, &e, 1), -FI_EAGAIN);
      std::this_thread::sleep_for(std::chrono::milliseconds(weft::cq_hold_max_ms + 50));
      EXPECT_EQ(fi_cq_read(cq, &e, 1), 1);
      EXPECT_EQ(e.op_context, ctx(2));
      weft::cq_hold(cq, false);
    }
    EXPECT_EQ(fi_close(&cq->fid), 0);
  }
}

TEST_P(CqTest, SreadReturnsErrorAvail) {
  fid_cq* cq = open(FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC);
  std::thread t([cq] {
    std::this_thread::sleep_for(10ms);
    EXPECT_EQ(write_error(cq, 1), 0);
  });
  fi_cq_entry e;
  EXPECT_EQ(fi_cq_sread(cq, &e, 1, nullptr, 5000), -FI_EAVAIL);
  t.join();
  fi_cq_err_entry err{};
  EXPECT_EQ(fi_cq_readerr(cq, &err, 0), 1);
  EXPECT_EQ(fi_close(&cq->fid), 0);
}

// FI_CQ_COND_THRESHOLD: cond is the threshold value itself (as in libfabric).
TEST_P(CqTest, SreadThreshold) {
  fid_cq* cq = open(FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC, 0, FI_CQ_COND_THRESHOLD);
  std::thread t([cq] {
    for (uintptr_t i = 0; i < 3; i++) {
      std::this_thread::sleep_for(5ms);
      EXPECT_EQ(write(cq, i), 0);
    }
  });
  fi_cq_entry e[8];
  EXPECT_EQ(fi_cq_sread(cq, e, 8, reinterpret_cast<void*>(uintptr_t{3}), 5000), 3);
  t.join();
  // Below the threshold at timeout: what is there is returned.
  ASSERT_EQ(write(cq, 9), 0);
  EXPECT_EQ(fi_cq_sread(cq, e, 8, reinterpret_cast<void*>(uintptr_t{4}), 20), 1);
  EXPECT_EQ(fi_close(&cq->fid), 0);
}

TEST_P(CqTest, SignalWakesSread) {
  fid_cq* cq = open(FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC);
  std::atomic<bool> returned{false};
  std::thread t([&] {
    fi_cq_entry e;
    EXPECT_EQ(fi_cq_sread(cq, &e, 1, nullptr, -1), -FI_EAGAIN);
    returned = true;
  });
  // Signal until the reader has returned (it may not be asleep yet).
  while (!returned) {
    EXPECT_EQ(fi_cq_signal(cq), 0);
    std::this_thread::sleep_for(2ms);
  }
  t.join();
  EXPECT_EQ(fi_close(&cq->fid), 0);
}

TEST_P(CqTest, FdWaitObjectWithPollAndTrywait) {
  fid_cq* cq = open(FI_CQ_FORMAT_CONTEXT, FI_WAIT_FD);
  int fd = -1;
  ASSERT_EQ(fi_control(&cq->fid, FI_GETWAIT, &fd), 0);
  ASSERT_GE(fd, 0);
  fi_wait_obj kind = FI_WAIT_NONE;
  ASSERT_EQ(fi_control(&cq->fid, FI_GETWAITOBJ, &kind), 0);
  EXPECT_EQ(kind, FI_WAIT_FD);
  fid* fids[] = {&cq->fid};
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(fi_trywait(fabric, fids, 1), 0);
  EXPECT_EQ(poll(&p, 1, 0), 0);
  ASSERT_EQ(write(cq, 1), 0);
  EXPECT_EQ(poll(&p, 1, 0), 1);
  EXPECT_EQ(fi_trywait(fabric, fids, 1), -FI_EAGAIN);
  fi_cq_entry e;
  EXPECT_EQ(fi_cq_read(cq, &e, 1), 1);
  EXPECT_EQ(fi_trywait(fabric, fids, 1), 0);
  EXPECT_EQ(poll(&p, 1, 0), 0);
  // A completion written by another thread wakes poll(2).
  std::thread t([cq] {
    std::this_thread::sleep_for(10ms);
    EXPECT_EQ(write(cq, 2), 0);
  });
  EXPECT_EQ(poll(&p, 1, 5000), 1);
  t.join();
  EXPECT_EQ(fi_cq_read(cq, &e, 1), 1);
  EXPECT_EQ(fi_close(&cq->fid), 0);
}

TEST_P(CqTest, UnspecIsAnFd) {
  fid_cq* cq = open(FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC);
  fi_wait_obj kind = FI_WAIT_NONE;
  ASSERT_EQ(fi_control(&cq->fid, FI_GETWAITOBJ, &kind), 0);
  EXPECT_EQ(kind, FI_WAIT_FD);
  int fd = -1;
  EXPECT_EQ(fi_control(&cq->fid, FI_GETWAIT, &fd), 0);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(fi_close(&cq->fid), 0);
}

TEST_P(CqTest, MutexCondWaitObject) {
  fid_cq* cq = open(FI_CQ_FORMAT_CONTEXT, FI_WAIT_MUTEX_COND);
  fi_mutex_cond mc{};
  ASSERT_EQ(fi_control(&cq->fid, FI_GETWAIT, &mc), 0);
  ASSERT_NE(mc.mutex, nullptr);
  ASSERT_NE(mc.cond, nullptr);
  fi_wait_obj kind = FI_WAIT_NONE;
  ASSERT_EQ(fi_control(&cq->fid, FI_GETWAITOBJ, &kind), 0);
  EXPECT_EQ(kind, FI_WAIT_MUTEX_COND);
  // The application sleeps on the cond with its own predicate.
  std::thread t([cq] {
    std::this_thread::sleep_for(10ms);
    EXPECT_EQ(write(cq, 1), 0);
  });
  fid* fids[] = {&cq->fid};
  pthread_mutex_lock(mc.mutex);
  while (weft::cq_count(cq) == 0) {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 50 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(mc.cond, mc.mutex, &ts);
  }
  pthread_mutex_unlock(mc.mutex);
  t.join();
  EXPECT_EQ(fi_trywait(fabric, fids, 1), -FI_EAGAIN);
  fi_cq_entry e;
  EXPECT_EQ(fi_cq_read(cq, &e, 1), 1);
  EXPECT_EQ(fi_trywait(fabric, fids, 1), 0);
  EXPECT_EQ(fi_close(&cq->fid), 0);
}

// Manual progress: reading the CQ runs the pollers providers registered.
TEST_P(CqTest, ReadRunsPollers) {
  fid_cq* cq = open(FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC);
  struct state {
    fid_cq* cq;
    int calls = 0;
    int pending = 2;  // completions "on the wire"
  } st{cq};
  auto poller = [](void* arg) {
    auto* s = static_cast<state*>(arg);
    s->calls++;
    if (s->pending > 0) {
      s->pending--;
      EXPECT_EQ(write(s->cq, 7), 0);
    }
  };
  ASSERT_EQ(weft::cq_add_poller(cq, poller, &st), 0);
  fi_cq_entry e;
  EXPECT_EQ(fi_cq_read(cq, &e, 1), 1);
  EXPECT_EQ(st.calls, 1);
  EXPECT_EQ(fi_cq_sread(cq, &e, 1, nullptr, 1000), 1);  // progress while blocking
  EXPECT_EQ(fi_cq_sread(cq, &e, 1, nullptr, 10), -FI_EAGAIN);
  EXPECT_GE(st.calls, 3);
  EXPECT_EQ(weft::cq_del_poller(cq, poller, &st), 0);
  EXPECT_EQ(weft::cq_del_poller(cq, poller, &st), -FI_ENOENT);
  int calls = st.calls;
  EXPECT_EQ(fi_cq_read(cq, &e, 1), -FI_EAGAIN);
  EXPECT_EQ(st.calls, calls);
  EXPECT_EQ(fi_close(&cq->fid), 0);
}

TEST_P(CqTest, BusyWhileReferenced) {
  fid_cq* cq = open();
  EXPECT_TRUE(weft::is_cq(&cq->fid));
  EXPECT_FALSE(weft::is_cq(&domain->fid));
  EXPECT_FALSE(weft::is_cq(nullptr));
  weft::cq_take(cq);
  EXPECT_EQ(fi_close(&cq->fid), -FI_EBUSY);
  weft::cq_drop(cq);
  EXPECT_EQ(fi_close(&cq->fid), 0);
}

TEST_P(CqTest, ContextAndStrerror) {
  int marker;
  fid_cq* cq = open(FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 0, FI_CQ_COND_NONE, &marker);
  EXPECT_EQ(cq->fid.context, &marker);
  EXPECT_EQ(cq->fid.fclass, static_cast<size_t>(FI_CLASS_CQ));
  char buf[64];
  EXPECT_EQ(fi_cq_strerror(cq, FI_ETRUNC, nullptr, buf, sizeof(buf)), buf);
  EXPECT_GT(std::strlen(buf), 0u);
  const char* s = fi_cq_strerror(cq, ENOENT, nullptr, nullptr, 0);
  ASSERT_NE(s, nullptr);
  EXPECT_GT(std::strlen(s), 0u);
  char tiny[4];
  EXPECT_EQ(fi_cq_strerror(cq, ENOENT, nullptr, tiny, sizeof(tiny)), tiny);
  EXPECT_EQ(std::strlen(tiny), 3u);
  EXPECT_EQ(fi_close(&cq->fid), 0);
}

TEST_P(CqTest, BadOpenArguments) {
  fi_cq_attr attr{};
  fid_cq* cq = nullptr;
  EXPECT_EQ(fi_cq_open(domain, nullptr, &cq, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_cq_open(domain, &attr, nullptr, nullptr), -FI_EINVAL);
  attr.flags = FI_SEND;
  EXPECT_EQ(fi_cq_open(domain, &attr, &cq, nullptr), -FI_EBADFLAGS);
  attr = {};
  attr.flags = FI_AFFINITY;
  attr.signaling_vector = -1;
  EXPECT_EQ(fi_cq_open(domain, &attr, &cq, nullptr), -FI_EINVAL);
  attr = {};
  attr.format = static_cast<fi_cq_format>(99);
  EXPECT_EQ(fi_cq_open(domain, &attr, &cq, nullptr), -FI_EINVAL);
  attr = {};
  attr.wait_obj = static_cast<fi_wait_obj>(99);
  EXPECT_EQ(fi_cq_open(domain, &attr, &cq, nullptr), -FI_EINVAL);
  attr.wait_obj = FI_WAIT_POLLFD;
  EXPECT_EQ(fi_cq_open(domain, &attr, &cq, nullptr), -FI_ENOSYS);
  attr.wait_obj = FI_WAIT_SET;  // without a wait set
  EXPECT_EQ(fi_cq_open(domain, &attr, &cq, nullptr), -FI_EINVAL);
  attr.wait_set = reinterpret_cast<fid_wait*>(domain);  // not a wait set
  EXPECT_EQ(fi_cq_open(domain, &attr, &cq, nullptr), -FI_EINVAL);
  attr = {};
  attr.wait_obj = FI_WAIT_UNSPEC;
  attr.wait_cond = static_cast<fi_cq_wait_cond>(7);
  EXPECT_EQ(fi_cq_open(domain, &attr, &cq, nullptr), -FI_EINVAL);
  EXPECT_EQ(cq, nullptr);  // never set on failure
}

TEST_P(CqTest, BadCallArguments) {
  fid_cq* cq = open();
  fi_cq_tagged_entry e;
  fi_cq_err_entry err{};
  EXPECT_EQ(fi_cq_read(cq, nullptr, 1), -FI_EINVAL);
  EXPECT_EQ(fi_cq_readfrom(cq, nullptr, 1, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_cq_readerr(cq, nullptr, 0), -FI_EINVAL);
  EXPECT_EQ(fi_cq_readerr(cq, &err, FI_SEND), -FI_EBADFLAGS);
  // FI_WAIT_NONE: no blocking reads, no signal, no wait object.
  EXPECT_EQ(fi_cq_sread(cq, &e, 1, nullptr, 0), -FI_EINVAL);
  EXPECT_EQ(fi_cq_sreadfrom(cq, &e, 1, nullptr, nullptr, 0), -FI_EINVAL);
  EXPECT_EQ(fi_cq_signal(cq), -FI_ENOSYS);
  int fd;
  EXPECT_EQ(fi_control(&cq->fid, FI_GETWAIT, &fd), -FI_ENODATA);
  EXPECT_EQ(fi_control(&cq->fid, FI_GETWAIT, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_control(&cq->fid, FI_GETWAITOBJ, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_control(&cq->fid, 12345, &fd), -FI_ENOSYS);
  fid* fids[] = {&cq->fid};
  EXPECT_EQ(fi_trywait(fabric, fids, 1), -FI_EINVAL);  // nothing to wait on
  fi_cq_err_entry bad{};
  EXPECT_EQ(weft::cq_write_error(cq, bad), -FI_EINVAL);  // err must be > 0
  EXPECT_EQ(weft::cq_add_poller(cq, nullptr, nullptr), -FI_EINVAL);
  EXPECT_EQ(weft::cq_add_wait_fd(cq, 0, POLLIN), -FI_ENOSYS);
  fid_cq* wcq = open(FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC);
  EXPECT_EQ(fi_cq_sread(wcq, nullptr, 1, nullptr, 0), -FI_EINVAL);
  EXPECT_EQ(fi_close(&wcq->fid), 0);
  EXPECT_EQ(fi_close(&cq->fid), 0);
}

WEFT_ALL_PROVIDERS(CqTest);

// FI_THREAD_DOMAIN: the CQ takes no lock, and a read of an empty CQ takes the
// entries its pollers complete straight into the application's buffer
// (cq_readfrom_op). What the application sees must not change: formats,
// sources, the order against errors and holds, and what a short buffer
// leaves for the next read.
class CqSerialTest : public CqTest {
protected:
  void adjust(fi_info* i) override { i->domain_attr->threading = FI_THREAD_DOMAIN; }
  // A poller that runs `steps` once, at the first read: what a transport's
  // progress does when completions arrive.
  struct script {
    fid_cq* cq;
    std::function<void(fid_cq*)> steps;
    int calls = 0;
  };
  static void run_script(void* arg) {
    auto* s = static_cast<script*>(arg);
    if (s->calls++ == 0) s->steps(s->cq);
  }
};

TEST_P(CqSerialTest, DirectReadEveryFormat) {
  const fi_cq_format formats[] = {FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_MSG, FI_CQ_FORMAT_DATA,
                                  FI_CQ_FORMAT_TAGGED};
  for (fi_cq_format f : formats) {
    SCOPED_TRACE(f);
    fid_cq* cq = open(f);
    ASSERT_NE(cq, nullptr);
    script sc{cq, [](fid_cq* c) {
                for (uintptr_t i = 0; i < 3; i++) ASSERT_EQ(write(c, i), 0);
              }};
    ASSERT_EQ(weft::cq_add_poller(cq, run_script, &sc), 0);
    size_t es = weft::cq_entry_size(f);
    std::vector<uint8_t> buf(es * 4, 0xab);
    ASSERT_EQ(fi_cq_read(cq, buf.data(), 2), 2);  // two taken directly, the third queued
    for (size_t b = es * 2; b < buf.size(); b++) ASSERT_EQ(buf[b], 0xab) << "byte " << b;
    EXPECT_EQ(weft::cq_count(cq), 1u);
    ASSERT_EQ(fi_cq_read(cq, buf.data() + es * 2, 2), 1);
    for (size_t b = es * 3; b < buf.size(); b++) ASSERT_EQ(buf[b], 0xab) << "byte " << b;
    expect_written(buf.data(), f, 3);
    EXPECT_EQ(fi_cq_read(cq, buf.data(), 1), -FI_EAGAIN);
    EXPECT_EQ(sc.calls, 3);
    EXPECT_EQ(weft::cq_del_poller(cq, run_script, &sc), 0);
    EXPECT_EQ(fi_close(&cq->fid), 0);
  }
}

TEST_P(CqSerialTest, DirectReadFromReportsSources) {
  fid_cq* cq = open(FI_CQ_FORMAT_MSG);
  script sc{cq, [](fid_cq* c) {
              ASSERT_EQ(write(c, 0, 17), 0);
              ASSERT_EQ(write(c, 1), 0);
              ASSERT_EQ(write(c, 2, 5), 0);
            }};
  ASSERT_EQ(weft::cq_add_poller(cq, run_script, &sc), 0);
  fi_cq_msg_entry e[4];
  fi_addr_t src[4] = {1, 1, 1, 1};
  ASSERT_EQ(fi_cq_readfrom(cq, e, 4, src), 3);
  EXPECT_EQ(src[0], 17u);
  EXPECT_EQ(src[1], FI_ADDR_NOTAVAIL);
  EXPECT_EQ(src[2], 5u);
  EXPECT_EQ(src[3], 1u);  // untouched
  EXPECT_EQ(e[2].op_context, ctx(2));
  EXPECT_EQ(e[2].len, 102u);
  EXPECT_EQ(fi_cq_readfrom(cq, e, 4, src), -FI_EAGAIN);
  EXPECT_EQ(weft::cq_del_poller(cq, run_script, &sc), 0);
  EXPECT_EQ(fi_close(&cq->fid), 0);
}

// An error completed during a direct read ends it: the successes after the
// error queue behind it.
TEST_P(CqSerialTest, DirectReadStopsAtAnError) {
  fid_cq* cq = open(FI_CQ_FORMAT_CONTEXT);
  script sc{cq, [](fid_cq* c) {
              ASSERT_EQ(write(c, 0), 0);
              ASSERT_EQ(write_error(c, 1), 0);
              ASSERT_EQ(write(c, 2), 0);
            }};
  ASSERT_EQ(weft::cq_add_poller(cq, run_script, &sc), 0);
  fi_cq_entry e[4];
  ASSERT_EQ(fi_cq_read(cq, e, 4), 1);
  EXPECT_EQ(e[0].op_context, ctx(0));
  EXPECT_EQ(fi_cq_read(cq, e, 4), -FI_EAVAIL);
  fi_cq_err_entry err{};
  ASSERT_EQ(fi_cq_readerr(cq, &err, 0), 1);
  EXPECT_EQ(err.op_context, ctx(1));
  ASSERT_EQ(fi_cq_read(cq, e, 4), 1);
  EXPECT_EQ(e[0].op_context, ctx(2));
  EXPECT_EQ(fi_cq_read(cq, e, 4), -FI_EAGAIN);
  EXPECT_EQ(weft::cq_del_poller(cq, run_script, &sc), 0);
  EXPECT_EQ(fi_close(&cq->fid), 0);
}

// A hold that starts during a direct read: what came before it was read,
// what came after waits for the hold to end, in order, even the entries
// written after the hold ended within the same read.
TEST_P(CqSerialTest, DirectReadStopsAtAHold) {
  fid_cq* cq = open(FI_CQ_FORMAT_CONTEXT);
  script sc{cq, [](fid_cq* c) {
              ASSERT_EQ(write(c, 0), 0);
              weft::cq_hold(c, true);
              ASSERT_EQ(write(c, 1), 0);
              weft::cq_hold(c, false);
              ASSERT_EQ(write(c, 2), 0);
            }};
  ASSERT_EQ(weft::cq_add_poller(cq, run_script, &sc), 0);
  fi_cq_entry e[4];
  ASSERT_EQ(fi_cq_read(cq, e, 4), 1);
  EXPECT_EQ(e[0].op_context, ctx(0));
  ASSERT_EQ(fi_cq_read(cq, e, 4), 2);
  EXPECT_EQ(e[0].op_context, ctx(1));
  EXPECT_EQ(e[1].op_context, ctx(2));
  // Held from before the read: nothing is taken directly.
  weft::cq_hold(cq, true);
  sc.calls = 0;
  sc.steps = [](fid_cq* c) { ASSERT_EQ(write(c, 3), 0); };
  EXPECT_EQ(fi_cq_read(cq, e, 4), -FI_EAGAIN);
  EXPECT_EQ(weft::cq_count(cq), 1u);
  weft::cq_hold(cq, false);
  ASSERT_EQ(fi_cq_read(cq, e, 4), 1);
  EXPECT_EQ(e[0].op_context, ctx(3));
  EXPECT_EQ(weft::cq_del_poller(cq, run_script, &sc), 0);
  EXPECT_EQ(fi_close(&cq->fid), 0);
}

WEFT_ALL_PROVIDERS(CqSerialTest);

}  // namespace
