// SPDX-License-Identifier: BSD-3-Clause
// Event queues through the public API, with events posted through the
// internal interface (util/eq.hpp) the way AVs and CM report them.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdangling-else"
#include "fixture.hpp"
#pragma GCC diagnostic pop

#include <poll.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "util/eq.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::domain_test;
using clk = std::chrono::steady_clock;

class EqTest : public domain_test {
protected:
  fid_eq* open(fi_wait_obj wait = FI_WAIT_NONE, uint64_t flags = FI_WRITE, void* ctx = nullptr) {
    fi_eq_attr attr{};
    attr.wait_obj = wait;
    attr.flags = flags;
    fid_eq* eq = nullptr;
    EXPECT_EQ(fi_eq_open(fabric, &attr, &eq, ctx), 0);
    return eq;
  }
  static fi_eq_entry entry(uintptr_t i) {
    return fi_eq_entry{reinterpret_cast<fid_t>(0x100 + i), reinterpret_cast<void*>(0x200 + i), 300 + i};
  }
};

TEST_P(EqTest, WriteThenRead) {
  int marker;
  fid_eq* eq = open(FI_WAIT_NONE, FI_WRITE, &marker);
  EXPECT_EQ(eq->fid.context, &marker);
  uint32_t event = 99;
  fi_eq_entry e{};
  EXPECT_EQ(fi_eq_read(eq, &event, &e, sizeof(e), 0), -FI_EAGAIN);
  fi_eq_entry in = entry(1);
  EXPECT_EQ(fi_eq_write(eq, FI_MR_COMPLETE, &in, sizeof(in), 0), static_cast<ssize_t>(sizeof(in)));
  in = entry(2);
  EXPECT_EQ(fi_eq_write(eq, FI_AV_COMPLETE, &in, sizeof(in), 0), static_cast<ssize_t>(sizeof(in)));
  EXPECT_EQ(weft::eq_count(eq), 2u);
  // FI_PEEK leaves the event queued.
  EXPECT_EQ(fi_eq_read(eq, &event, &e, sizeof(e), FI_PEEK), static_cast<ssize_t>(sizeof(e)));
  EXPECT_EQ(event, static_cast<uint32_t>(FI_MR_COMPLETE));
  EXPECT_EQ(e.data, 301u);
  e = {};
  EXPECT_EQ(fi_eq_read(eq, &event, &e, sizeof(e), 0), static_cast<ssize_t>(sizeof(e)));
  EXPECT_EQ(event, static_cast<uint32_t>(FI_MR_COMPLETE));
  EXPECT_EQ(e.fid, reinterpret_cast<fid_t>(0x101));
  EXPECT_EQ(e.context, reinterpret_cast<void*>(0x201));
  EXPECT_EQ(fi_eq_read(eq, &event, &e, sizeof(e), 0), static_cast<ssize_t>(sizeof(e)));
  EXPECT_EQ(event, static_cast<uint32_t>(FI_AV_COMPLETE));
  EXPECT_EQ(e.data, 302u);
  EXPECT_EQ(fi_eq_read(eq, &event, &e, sizeof(e), 0), -FI_EAGAIN);
  EXPECT_EQ(fi_close(&eq->fid), 0);
}

// libfabric 1.17 accepts fi_eq_write on an EQ opened without FI_WRITE (the
// flag only says the application means to write): so does a drop-in.
TEST_P(EqTest, WriteWithoutFiWriteFlag) {
  fid_eq* eq = open(FI_WAIT_NONE, 0);
  fi_eq_entry in = entry(0);
  EXPECT_EQ(fi_eq_write(eq, FI_NOTIFY, &in, sizeof(in), 0), static_cast<ssize_t>(sizeof(in)));
  uint32_t event;
  fi_eq_entry e;
  EXPECT_EQ(fi_eq_read(eq, &event, &e, sizeof(e), 0), static_cast<ssize_t>(sizeof(e)));
  EXPECT_EQ(fi_close(&eq->fid), 0);
}

TEST_P(EqTest, BufferTooSmall) {
  fid_eq* eq = open();
  fi_eq_entry in = entry(0);
  ASSERT_EQ(fi_eq_write(eq, FI_NOTIFY, &in, sizeof(in), 0), static_cast<ssize_t>(sizeof(in)));
  uint32_t event;
  char small[8];
  EXPECT_EQ(fi_eq_read(eq, &event, small, sizeof(small), 0), -FI_ETOOSMALL);
  EXPECT_EQ(weft::eq_count(eq), 1u);  // still there
  EXPECT_EQ(fi_close(&eq->fid), 0);
}

// CM events carry connection data after the header; a short buffer gets the
// header and as much data as fits.
TEST_P(EqTest, CmEventData) {
  fid_eq* eq = open();
  constexpr size_t hdr_size = sizeof(fi_eq_cm_entry);
  uint8_t in[hdr_size + 16] = {};
  fi_eq_cm_entry cm{};
  cm.fid = reinterpret_cast<fid_t>(0x1);
  std::memcpy(in, &cm, hdr_size);
  std::strcpy(reinterpret_cast<char*>(in + hdr_size), "hello peer");
  ASSERT_EQ(weft::eq_post(eq, FI_CONNREQ, in, sizeof(in), 0), static_cast<ssize_t>(sizeof(in)));
  ASSERT_EQ(weft::eq_post(eq, FI_CONNECTED, in, sizeof(in), 0), static_cast<ssize_t>(sizeof(in)));
  uint8_t out[sizeof(in) + 8] = {};
  uint32_t event;
  EXPECT_EQ(fi_eq_read(eq, &event, out, sizeof(out), 0), static_cast<ssize_t>(sizeof(in)));
  EXPECT_EQ(event, static_cast<uint32_t>(FI_CONNREQ));
  EXPECT_STREQ(reinterpret_cast<char*>(out + hdr_size), "hello peer");
  fi_eq_cm_entry hdr{};
  EXPECT_EQ(fi_eq_read(eq, &event, &hdr, sizeof(hdr), 0), static_cast<ssize_t>(sizeof(hdr)));
  EXPECT_EQ(event, static_cast<uint32_t>(FI_CONNECTED));
  EXPECT_EQ(hdr.fid, reinterpret_cast<fid_t>(0x1));
  EXPECT_EQ(fi_close(&eq->fid), 0);
}

TEST_P(EqTest, ErrorEntriesKeepOrder) {
  fid_eq* eq = open();
  fi_eq_entry in = entry(0);
  ASSERT_EQ(fi_eq_write(eq, FI_NOTIFY, &in, sizeof(in), 0), static_cast<ssize_t>(sizeof(in)));
  const char blob[] = "error details";
  ASSERT_EQ(weft::eq_post_error(eq, reinterpret_cast<fid_t>(0x7), reinterpret_cast<void*>(0x8), 9,
                                FI_ECONNREFUSED, -3, blob, sizeof(blob)),
            0);
  ASSERT_EQ(weft::eq_post_error(eq, nullptr, nullptr, 0, FI_ETIMEDOUT, 0, blob, sizeof(blob)), 0);
  ASSERT_EQ(weft::eq_post_error(eq, nullptr, nullptr, 0, FI_EIO, 0, nullptr, 0), 0);
  uint32_t event;
  fi_eq_entry e;
  fi_eq_err_entry err{};
  EXPECT_EQ(fi_eq_readerr(eq, &err, 0), -FI_EAGAIN);  // the head is not an error
  EXPECT_EQ(fi_eq_read(eq, &event, &e, sizeof(e), 0), static_cast<ssize_t>(sizeof(e)));
  EXPECT_EQ(fi_eq_read(eq, &event, &e, sizeof(e), 0), -FI_EAVAIL);
  EXPECT_EQ(fi_eq_readerr(eq, &err, FI_PEEK), static_cast<ssize_t>(sizeof(err)));
  EXPECT_EQ(fi_eq_read(eq, &event, &e, sizeof(e), 0), -FI_EAVAIL);
  // err_data_size 0: a buffer owned by the EQ.
  err = {};
  EXPECT_EQ(fi_eq_readerr(eq, &err, 0), static_cast<ssize_t>(sizeof(err)));
  EXPECT_EQ(err.fid, reinterpret_cast<fid_t>(0x7));
  EXPECT_EQ(err.context, reinterpret_cast<void*>(0x8));
  EXPECT_EQ(err.data, 9u);
  EXPECT_EQ(err.err, FI_ECONNREFUSED);
  EXPECT_EQ(err.prov_errno, -3);
  ASSERT_EQ(err.err_data_size, sizeof(blob));
  EXPECT_STREQ(static_cast<const char*>(err.err_data), blob);
  // A caller buffer: copied, truncated.
  char small[5];
  err = {};
  err.err_data = small;
  err.err_data_size = sizeof(small);
  EXPECT_EQ(fi_eq_readerr(eq, &err, 0), static_cast<ssize_t>(sizeof(err)));
  EXPECT_EQ(err.err, FI_ETIMEDOUT);
  EXPECT_EQ(err.err_data, small);
  EXPECT_EQ(err.err_data_size, sizeof(small));
  EXPECT_EQ(std::memcmp(small, blob, sizeof(small)), 0);
  err = {};
  EXPECT_EQ(fi_eq_readerr(eq, &err, 0), static_cast<ssize_t>(sizeof(err)));
  EXPECT_EQ(err.err, FI_EIO);
  EXPECT_EQ(err.err_data_size, 0u);
  EXPECT_EQ(fi_eq_read(eq, &event, &e, sizeof(e), 0), -FI_EAGAIN);
  char buf[64];
  EXPECT_EQ(fi_eq_strerror(eq, FI_EIO, nullptr, buf, sizeof(buf)), buf);
  EXPECT_GT(std::strlen(buf), 0u);
  EXPECT_NE(fi_eq_strerror(eq, EPERM, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(fi_close(&eq->fid), 0);
}

TEST_P(EqTest, ReaderrOldApi) {
  fi_info* old = weft_test::get_info(GetParam(), FI_EP_UNSPEC, FI_VERSION(1, 4));
  ASSERT_NE(old, nullptr);
  fid_fabric* fab = nullptr;
  ASSERT_EQ(fi_fabric(old->fabric_attr, &fab, nullptr), 0);
  fi_eq_attr attr{};
  fid_eq* eq = nullptr;
  ASSERT_EQ(fi_eq_open(fab, &attr, &eq, nullptr), 0);
  const char blob[] = "xyz";
  ASSERT_EQ(weft::eq_post_error(eq, nullptr, nullptr, 0, FI_EIO, 0, blob, sizeof(blob)), 0);
  fi_eq_err_entry err{};
  err.err_data_size = 0x5a5a;  // beyond the 1.4 struct: never written
  EXPECT_EQ(fi_eq_readerr(eq, &err, 0), static_cast<ssize_t>(offsetof(fi_eq_err_entry, err_data_size)));
  EXPECT_EQ(err.err_data_size, 0x5a5au);
  EXPECT_STREQ(static_cast<const char*>(err.err_data), blob);
  EXPECT_EQ(fi_close(&eq->fid), 0);
  EXPECT_EQ(fi_close(&fab->fid), 0);
  fi_freeinfo(old);
}

TEST_P(EqTest, SreadTimesOutAndWakes) {
  for (fi_wait_obj w : {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD}) {
    SCOPED_TRACE(w);
    fid_eq* eq = open(w);
    uint32_t event;
    fi_eq_entry e;
    auto t0 = clk::now();
    EXPECT_EQ(fi_eq_sread(eq, &event, &e, sizeof(e), 30, 0), -FI_EAGAIN);
    EXPECT_GE(clk::now() - t0, 29ms);
    std::thread t([eq] {
      std::this_thread::sleep_for(10ms);
      fi_eq_entry in = entry(3);
      EXPECT_EQ(fi_eq_write(eq, FI_NOTIFY, &in, sizeof(in), 0), static_cast<ssize_t>(sizeof(in)));
    });
    EXPECT_EQ(fi_eq_sread(eq, &event, &e, sizeof(e), -1, 0), static_cast<ssize_t>(sizeof(e)));
    EXPECT_EQ(e.data, 303u);
    t.join();
    EXPECT_EQ(fi_close(&eq->fid), 0);
  }
}

TEST_P(EqTest, SreadReturnsErrorAvail) {
  fid_eq* eq = open(FI_WAIT_UNSPEC);
  std::thread t([eq] {
    std::this_thread::sleep_for(10ms);
    EXPECT_EQ(weft::eq_post_error(eq, nullptr, nullptr, 0, FI_EIO, 0, nullptr, 0), 0);
  });
  uint32_t event;
  fi_eq_entry e;
  EXPECT_EQ(fi_eq_sread(eq, &event, &e, sizeof(e), 5000, 0), -FI_EAVAIL);
  t.join();
  EXPECT_EQ(fi_close(&eq->fid), 0);
}

TEST_P(EqTest, FdWaitObject) {
  fid_eq* eq = open(FI_WAIT_FD);
  int fd = -1;
  ASSERT_EQ(fi_control(&eq->fid, FI_GETWAIT, &fd), 0);
  ASSERT_GE(fd, 0);
  fid* fids[] = {&eq->fid};
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(fi_trywait(fabric, fids, 1), 0);
  EXPECT_EQ(poll(&p, 1, 0), 0);
  fi_eq_entry in = entry(0);
  ASSERT_GT(fi_eq_write(eq, FI_NOTIFY, &in, sizeof(in), 0), 0);
  EXPECT_EQ(poll(&p, 1, 0), 1);
  EXPECT_EQ(fi_trywait(fabric, fids, 1), -FI_EAGAIN);
  uint32_t event;
  fi_eq_entry e;
  EXPECT_GT(fi_eq_read(eq, &event, &e, sizeof(e), 0), 0);
  EXPECT_EQ(fi_trywait(fabric, fids, 1), 0);
  EXPECT_EQ(poll(&p, 1, 0), 0);
  EXPECT_EQ(fi_close(&eq->fid), 0);
}

TEST_P(EqTest, MutexCondWaitObject) {
  fid_eq* eq = open(FI_WAIT_MUTEX_COND);
  fi_mutex_cond mc{};
  ASSERT_EQ(fi_control(&eq->fid, FI_GETWAIT, &mc), 0);
  EXPECT_NE(mc.mutex, nullptr);
  EXPECT_NE(mc.cond, nullptr);
  fi_wait_obj kind;
  ASSERT_EQ(fi_control(&eq->fid, FI_GETWAITOBJ, &kind), 0);
  EXPECT_EQ(kind, FI_WAIT_MUTEX_COND);
  EXPECT_EQ(fi_close(&eq->fid), 0);
}

TEST_P(EqTest, BusyWhileBound) {
  fid_eq* eq = open();
  EXPECT_TRUE(weft::is_eq(&eq->fid));
  EXPECT_FALSE(weft::is_eq(&fabric->fid));
  weft::eq_take(eq);
  EXPECT_EQ(fi_close(&eq->fid), -FI_EBUSY);
  weft::eq_drop(eq);
  EXPECT_EQ(fi_close(&eq->fid), 0);
}

TEST_P(EqTest, BadArguments) {
  fi_eq_attr attr{};
  fid_eq* eq = nullptr;
  EXPECT_EQ(fi_eq_open(fabric, nullptr, &eq, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_eq_open(fabric, &attr, nullptr, nullptr), -FI_EINVAL);
  attr.flags = FI_SEND;
  EXPECT_EQ(fi_eq_open(fabric, &attr, &eq, nullptr), -FI_EBADFLAGS);
  attr = {};
  attr.flags = FI_AFFINITY;
  attr.signaling_vector = -2;
  EXPECT_EQ(fi_eq_open(fabric, &attr, &eq, nullptr), -FI_EINVAL);
  attr = {};
  attr.wait_obj = static_cast<fi_wait_obj>(42);
  EXPECT_EQ(fi_eq_open(fabric, &attr, &eq, nullptr), -FI_EINVAL);
  attr.wait_obj = FI_WAIT_POLLFD;
  EXPECT_EQ(fi_eq_open(fabric, &attr, &eq, nullptr), -FI_ENOSYS);
  attr.wait_obj = FI_WAIT_SET;
  EXPECT_EQ(fi_eq_open(fabric, &attr, &eq, nullptr), -FI_EINVAL);
  attr.wait_set = reinterpret_cast<fid_wait*>(fabric);
  EXPECT_EQ(fi_eq_open(fabric, &attr, &eq, nullptr), -FI_EINVAL);
  EXPECT_EQ(eq, nullptr);

  eq = open();
  uint32_t event;
  fi_eq_entry e;
  fi_eq_entry in = entry(0);
  EXPECT_EQ(fi_eq_read(eq, &event, nullptr, sizeof(e), 0), -FI_EINVAL);
  EXPECT_EQ(fi_eq_read(eq, &event, &e, sizeof(e), FI_SEND), -FI_EBADFLAGS);
  EXPECT_EQ(fi_eq_readerr(eq, nullptr, 0), -FI_EINVAL);
  fi_eq_err_entry err{};
  EXPECT_EQ(fi_eq_readerr(eq, &err, FI_SEND), -FI_EBADFLAGS);
  EXPECT_EQ(fi_eq_write(eq, FI_NOTIFY, nullptr, sizeof(in), 0), -FI_EINVAL);
  EXPECT_EQ(fi_eq_write(eq, FI_NOTIFY, &in, 0, 0), -FI_EINVAL);
  EXPECT_EQ(fi_eq_write(eq, FI_NOTIFY, &in, sizeof(in), FI_SEND), -FI_EBADFLAGS);
  EXPECT_EQ(fi_eq_sread(eq, &event, &e, sizeof(e), 0, 0), -FI_EINVAL);  // FI_WAIT_NONE
  int fd;
  EXPECT_EQ(fi_control(&eq->fid, FI_GETWAIT, &fd), -FI_ENODATA);
  EXPECT_EQ(fi_control(&eq->fid, 4321, &fd), -FI_ENOSYS);
  EXPECT_EQ(weft::eq_post(nullptr, FI_NOTIFY, &in, sizeof(in), 0), -FI_EINVAL);
  EXPECT_EQ(weft::eq_post(reinterpret_cast<fid_eq*>(domain), FI_NOTIFY, &in, sizeof(in), 0), -FI_EINVAL);
  EXPECT_EQ(weft::eq_post(eq, FI_NOTIFY, nullptr, 8, 0), -FI_EINVAL);
  EXPECT_EQ(weft::eq_post_error(eq, nullptr, nullptr, 0, 0, 0, nullptr, 0), -FI_EINVAL);
  EXPECT_EQ(weft::eq_post_error(eq, nullptr, nullptr, 0, FI_EIO, 0, nullptr, 4), -FI_EINVAL);
  EXPECT_EQ(weft::eq_count(eq), 0u);
  EXPECT_EQ(fi_close(&eq->fid), 0);
}

WEFT_ALL_PROVIDERS(EqTest);

}  // namespace
