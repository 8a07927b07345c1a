// SPDX-License-Identifier: BSD-3-Clause
// prov/shm only: what depends on shared memory itself (mapped shrink-sealed
// memfds, the split copy, FI_SHM_INJECT_SIZE), in every shm mode.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "fixture.hpp"
#include "spawn.hpp"

namespace {

using weft_test::fill;
using weft_test::mp_options;
using weft_test::mp_peer;
using weft_test::mp_run;

using shm_mp = weft_test::mp_test;

// Memory in a shrink-sealed memfd: with CMA the initiator maps the target's
// backing and copies with memcpy (large writes split with the target), and
// every check of the table still applies. Without the seal, or without CMA,
// the same operations take the other paths. Data is verified byte for byte.
unsigned char* sealed_memfd(const char* name, size_t len, bool seal, int* fd) {
  *fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (*fd < 0 || ftruncate(*fd, static_cast<off_t>(len)) != 0) return nullptr;
  if (seal && fcntl(*fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) return nullptr;
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<unsigned char*>(p);
}

bool maps_mention(const std::string& what) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return false;
  char line[4096];
  bool found = false;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, what.c_str()) != nullptr;
  fclose(f);
  return found;
}

TEST_P(shm_mp, RmaMappedBacking) {
  const bool cma = GetParam().passive_rma;
  mp_run(2, [cma](mp_peer& p) {
    constexpr size_t len = 2 << 20;
    int fd_sealed = -1, fd_plain = -1;
    std::string sealed_name = "weft_rma_sealed_" + std::to_string(p.rank);
    std::string plain_name = "weft_rma_plain_" + std::to_string(p.rank);
    unsigned char* sealed = sealed_memfd(sealed_name.c_str(), len, true, &fd_sealed);
    unsigned char* plain = sealed_memfd(plain_name.c_str(), 65536, false, &fd_plain);
    ASSERT_TRUE(sealed && plain);
    memset(sealed, 0x11, len);
    memset(plain, 0x33, 65536);
    fid_mr *mr = nullptr, *mr_plain = nullptr;
    ASSERT_EQ(fi_mr_reg(p.domain, sealed, len, FI_REMOTE_WRITE | FI_REMOTE_READ | FI_WRITE | FI_READ, 0, 1, 0,
                        &mr, nullptr),
              0);
    ASSERT_EQ(
        fi_mr_reg(p.domain, plain, 65536, FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 2, 0, &mr_plain, nullptr), 0);
    uint64_t mine[4] = {reinterpret_cast<uint64_t>(sealed), fi_mr_key(mr), reinterpret_cast<uint64_t>(plain),
                        fi_mr_key(mr_plain)};
    uint64_t theirs[4];
    fi_cq_tagged_entry ce;
    fi_cq_err_entry err{};
    ASSERT_TRUE(p.swap_with_peer(mine, theirs, sizeof theirs));
    // A large mapped write while the target sits in a barrier: the offer to
    // split is not taken, the initiator copies all of it.
    constexpr size_t idle_off = (1 << 20) + 16384, idle_len = 900000;
    if (!cma) {
    } else if (p.rank == 0) {
      unsigned char* isrc = sealed + idle_off;
      for (size_t i = 0; i < idle_len; ++i) isrc[i] = static_cast<unsigned char>(i * 13 + 5);
      ASSERT_EQ(
          fi_write(p.ep, isrc, idle_len, fi_mr_desc(mr), p.addr[1], theirs[0] + idle_off, theirs[1], nullptr),
          0);
      ASSERT_EQ(p.wait_cq(&ce, &err), 1) << fi_strerror(err.err);
      p.barrier();
      p.barrier();
    } else {
      p.barrier();
      for (size_t i = 0; i < idle_len; ++i)
        ASSERT_EQ(sealed[idle_off + i], static_cast<unsigned char>(i * 13 + 5)) << "byte " << i;
      p.barrier();
    }
    if (p.rank == 0) {
      // Source in our own sealed backing: 1 MiB + 4 KiB, large enough to split.
      const size_t n = (1 << 20) + 4096;
      unsigned char* src = sealed + 8192;
      for (size_t i = 0; i < n; ++i) src[i] = static_cast<unsigned char>(i * 7 + (i >> 12));
      void* desc = fi_mr_desc(mr);
      for (int round = 0; round < 8; ++round) {
        src[round] = static_cast<unsigned char>(0xa0 + round);
        ASSERT_EQ(fi_write(p.ep, src, n, desc, p.addr[1], theirs[0] + 4096, theirs[1], nullptr), 0);
        ASSERT_EQ(p.wait_cq(&ce, &err), 1) << fi_strerror(err.err);
      }
      // Read a window back into plain heap memory.
      std::vector<unsigned char> back(300000);
      ASSERT_EQ(fi_read(p.ep, back.data(), back.size(), nullptr, p.addr[1], theirs[0] + 4096 + 5000,
                        theirs[1], nullptr),
                0);
      ASSERT_EQ(p.wait_cq(&ce, &err), 1) << fi_strerror(err.err);
      EXPECT_EQ(memcmp(back.data(), src + 5000, back.size()), 0);
      if (cma) {
        EXPECT_TRUE(maps_mention("memfd:weft_rma_sealed_1")) << "the sealed backing was not mapped";
      }
      // Out of bounds by one byte: refused, whatever the path.
      char x[16] = {};
      ASSERT_EQ(fi_write(p.ep, x, 16, nullptr, p.addr[1], theirs[0] + len - 15, theirs[1], nullptr), 0);
      ASSERT_EQ(p.wait_cq(&ce, &err), -FI_EAVAIL);
      // The unsealed region is reached with CMA (or the fallback), never mapped.
      std::vector<unsigned char> small(60000, 0x44);
      ASSERT_EQ(
          fi_write(p.ep, small.data(), small.size(), nullptr, p.addr[1], theirs[2] + 100, theirs[3], nullptr),
          0);
      ASSERT_EQ(p.wait_cq(&ce, &err), 1) << fi_strerror(err.err);
      EXPECT_FALSE(maps_mention("memfd:weft_rma_plain_1"));
      // Tell the target we are done; it then closes its registration.
      uint64_t token = 1;
      ASSERT_EQ(fi_send(p.ep, &token, sizeof token, nullptr, p.addr[1], nullptr), 0);
      ASSERT_EQ(p.wait_cq(&ce), 1);
      p.barrier();
      // A closed registration is refused even though its backing is still mapped here.
      ASSERT_EQ(fi_write(p.ep, x, 16, nullptr, p.addr[1], theirs[0], theirs[1], nullptr), 0);
      ASSERT_EQ(p.wait_cq(&ce, &err), -FI_EAVAIL);
      EXPECT_EQ(err.err, FI_EACCES);
      p.barrier();
    } else {
      // Progress (and so help with split writes) until rank 0 is done.
      uint64_t token = 0;
      ASSERT_EQ(fi_recv(p.ep, &token, sizeof token, nullptr, FI_ADDR_UNSPEC, nullptr), 0);
      ASSERT_EQ(p.wait_cq(&ce), 1);
      const size_t n = (1 << 20) + 4096;
      for (size_t i = 0; i < n; ++i) {
        unsigned char want =
            i < 8 ? static_cast<unsigned char>(0xa0 + i) : static_cast<unsigned char>(i * 7 + (i >> 12));
        ASSERT_EQ(sealed[4096 + i], want) << "byte " << i;
      }
      EXPECT_EQ(sealed[4095], 0x11);
      EXPECT_EQ(sealed[4096 + n], 0x11);
      EXPECT_EQ(sealed[len - 1], 0x11) << "an out-of-bounds write touched memory";
      for (size_t i = 0; i < 65536; ++i)
        ASSERT_EQ(plain[i], (i >= 100 && i < 60100) ? 0x44 : 0x33) << "byte " << i;
      ASSERT_EQ(fi_close(&mr->fid), 0);
      mr = nullptr;
      p.barrier();
      p.barrier();
      EXPECT_EQ(sealed[4096], 0xa0) << "a write through a closed registration landed";
    }
    p.barrier();
    if (mr) {
      EXPECT_EQ(fi_close(&mr->fid), 0);
    }
    EXPECT_EQ(fi_close(&mr_plain->fid), 0);
    munmap(sealed, len);
    munmap(plain, 65536);
    close(fd_sealed);
    close(fd_plain);
  });
}

// FI_SHM_INJECT_SIZE lowers the largest inject, below the inline size too.
TEST_P(shm_mp, InjectSizeParameter) {
  setenv(weft_test::prov_var("FI_SHM_INJECT_SIZE").c_str(), "8", 1);
  mp_run(2, [](mp_peer& p) {
    fi_cq_tagged_entry ce;
    char b[16] = "12345678abcdefg";
    if (p.rank == 0) {
      EXPECT_EQ(fi_tinject(p.ep, b, 9, p.addr[1], 7), -FI_EINVAL);
      EXPECT_EQ(fi_inject(p.ep, b, 16, p.addr[1]), -FI_EINVAL);
      ASSERT_EQ(fi_tinject(p.ep, b, 8, p.addr[1], 7), 0);
      p.barrier();
    } else {
      char r[16] = {};
      ASSERT_EQ(fi_trecv(p.ep, r, sizeof r, nullptr, FI_ADDR_UNSPEC, 7, 0, nullptr), 0);
      ASSERT_EQ(p.wait_cq(&ce), 1);
      EXPECT_EQ(ce.len, 8u);
      EXPECT_EQ(memcmp(r, "12345678", 8), 0);
      EXPECT_EQ(r[8], 0);
      p.barrier();
    }
  });
  unsetenv(weft_test::prov_var("FI_SHM_INJECT_SIZE").c_str());
}

// Large messages are copied in two parts, by the receiver and the sender at
// once; a sender that does not progress leaves its part to the receiver,
// which must still complete (here while the sender sleeps), and a short
// receive buffer truncates correctly.
TEST_P(shm_mp, SplitCopyWithSilentSender) {
  // Without CMA the data travels in cells the sender pushes: it must progress.
  const bool cma = GetParam().passive_rma;
  mp_run(2, [cma](mp_peer& p) {
    const size_t size = (3u << 20) + 12345;
    std::vector<unsigned char> buf(size);
    fill(buf, 77);
    fi_cq_tagged_entry ce;
    fi_cq_err_entry err{};
    if (p.rank == 0) {
      p.barrier();  // the receiver has posted
      ASSERT_EQ(fi_tsend(p.ep, buf.data(), size, nullptr, p.addr[1], 1, nullptr), 0);
      usleep(1000000);  // no progress here for a while
      ASSERT_EQ(p.wait_cq(&ce, &err), 1) << fi_strerror(err.err);
      p.barrier();
      ASSERT_EQ(fi_tsend(p.ep, buf.data(), size, nullptr, p.addr[1], 2, nullptr), 0);
      ASSERT_EQ(p.wait_cq(&ce, &err), 1) << fi_strerror(err.err);
      p.barrier();
    } else {
      std::vector<unsigned char> in(size + 8, 0);
      ASSERT_EQ(fi_trecv(p.ep, in.data(), size, nullptr, FI_ADDR_UNSPEC, 1, 0, nullptr), 0);
      p.barrier();
      timespec a, b;
      clock_gettime(CLOCK_MONOTONIC, &a);
      ASSERT_EQ(p.wait_cq(&ce, &err), 1) << fi_strerror(err.err);
      clock_gettime(CLOCK_MONOTONIC, &b);
      if (cma) {
        EXPECT_LT((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000, 800)
            << "the receive waited for the silent sender";
      }
      EXPECT_EQ(ce.len, size);
      EXPECT_EQ(memcmp(in.data(), buf.data(), size), 0);
      // Truncated: a buffer of 1 MiB + 5 for the 3 MiB message.
      std::fill(in.begin(), in.end(), 0);
      ASSERT_EQ(fi_trecv(p.ep, in.data(), (1u << 20) + 5, nullptr, FI_ADDR_UNSPEC, 2, 0, nullptr), 0);
      p.barrier();
      ASSERT_EQ(p.wait_cq(&ce, &err), -FI_EAVAIL);
      EXPECT_EQ(err.err, FI_ETRUNC);
      EXPECT_EQ(err.len, (1u << 20) + 5);
      EXPECT_EQ(memcmp(in.data(), buf.data(), (1u << 20) + 5), 0);
      EXPECT_EQ(in[(1u << 20) + 5], 0);
      p.barrier();
    }
  });
}

INSTANTIATE_TEST_SUITE_P(mode, shm_mp, ::testing::ValuesIn(weft_test::mp_modes("shm")),
                         [](const auto& p) { return std::string(p.param.name); });

}  // namespace

namespace {
TEST(shm_perf_probe, PingPong8) {
  if (!getenv("WEFT_PROBE")) GTEST_SKIP();
  mp_run(2, [](mp_peer& p) {
    char buf[8] = {};
    fi_cq_tagged_entry ce;
    timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    const int iters = 20000;
    for (int i = 0; i < iters; ++i) {
      if (p.rank == 0) {
        ASSERT_EQ(fi_tsend(p.ep, buf, 8, nullptr, p.addr[1], 1, nullptr), 0);
        ASSERT_EQ(fi_trecv(p.ep, buf, 8, nullptr, FI_ADDR_UNSPEC, 2, 0, nullptr), 0);
        ASSERT_EQ(p.wait_cq(&ce), 1);
        ASSERT_EQ(p.wait_cq(&ce), 1);
      } else {
        ASSERT_EQ(fi_trecv(p.ep, buf, 8, nullptr, FI_ADDR_UNSPEC, 1, 0, nullptr), 0);
        ASSERT_EQ(p.wait_cq(&ce), 1);
        ASSERT_EQ(fi_tsend(p.ep, buf, 8, nullptr, p.addr[0], 2, nullptr), 0);
        ASSERT_EQ(p.wait_cq(&ce), 1);
      }
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double us = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 1e3 / iters / 2;
    if (p.rank == 0) printf("half round trip: %.2f us\n", us);
  });
}
}  // namespace
