// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// A small spawner for multi-process tests: forks N peers (rank 0 is the
// test process), each opens fabric/domain/AV/CQ/EP on a provider, the peers
// exchange endpoint names over pipes, and then each runs the test body.
// A child reports failure through its exit status; the parent waits with a
// deadline and kills children that hang.
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace weft_test {

// A provider and a mode of it that the multi-process suites run in: a new
// provider inherits every data-path test by adding its line to mp_modes().
struct mp_mode {
  const char* name;  // test-name suffix
  const char* prov;
  const char* env;   // "VAR=value" set while the test runs, or nullptr
  bool passive_rma;  // RMA completes while the target makes no progress
};
inline void PrintTo(const mp_mode& m, std::ostream* os) {
  *os << m.name;
}
// The modes of every provider fi_getinfo offers (or of one provider).
std::vector<mp_mode> mp_modes(const char* only_prov = nullptr);
// The mode of the running test (the first shm mode outside mp_test).
const mp_mode& current_mode();
// A mode whose ranks each run on a host of their own (a network namespace
// of tests/netns/netns.sh): its name ends in "_hosts".
bool is_hosts_mode(const mp_mode& m);

// A suite run once per mode: applies the mode's environment around each test.
class mp_test : public ::testing::TestWithParam<mp_mode> {
protected:
  void SetUp() override;
  void TearDown() override;
};
#define WEFT_MP_SUITE(suite)                                                        \
  INSTANTIATE_TEST_SUITE_P(mode, suite, ::testing::ValuesIn(weft_test::mp_modes()), \
                           [](const auto& p) { return std::string(p.param.name); })

struct mp_options {
  const char* prov = nullptr;  // nullptr: the running test's mode
  fi_ep_type ep_type = FI_EP_RDM;
  uint64_t caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SOURCE | FI_DIRECTED_RECV;
  fi_progress progress = FI_PROGRESS_MANUAL;
  fi_threading threading = FI_THREAD_SAFE;
  fi_cq_format cq_format = FI_CQ_FORMAT_TAGGED;
  fi_wait_obj cq_wait = FI_WAIT_NONE;
  uint64_t tx_flags_bind = FI_TRANSMIT;
  uint64_t rx_flags_bind = FI_RECV;
  bool counters = false;
  bool eq = false;  // an EQ bound to the endpoint (fi_join reports there)
  int mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;  // asked for in the hints
  int timeout_s = 30;
};

// One process's objects.
struct mp_peer {
  int rank = 0;
  int size = 0;
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_eq* eq = nullptr;
  fid_ep* ep = nullptr;
  fid_cntr* cntr_send = nullptr;
  fid_cntr* cntr_recv = nullptr;
  fid_cntr* cntr_read = nullptr;
  fid_cntr* cntr_write = nullptr;
  fid_cntr* cntr_rwrite = nullptr;
  fid_cntr* cntr_rread = nullptr;
  std::vector<fi_addr_t> addr;  // fi_addr of every rank
  int to_parent[2] = {-1, -1};
  std::vector<int> barrier_in, barrier_out;  // rank 0 holds all; others one each

  // Polls the CQ until one entry (or an error) arrives; returns fi_cq_read's
  // result (1 on success, -FI_EAVAIL on error with *err filled).
  int wait_cq(fi_cq_tagged_entry* entry, fi_cq_err_entry* err = nullptr, int timeout_ms = 10000,
              fi_addr_t* src = nullptr) {
    timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
      fi_addr_t from = FI_ADDR_NOTAVAIL;
      ssize_t n = src ? fi_cq_readfrom(cq, entry, 1, &from) : fi_cq_read(cq, entry, 1);
      if (n == 1) {
        if (src) *src = from;
        return 1;
      }
      if (n == -FI_EAVAIL) {
        fi_cq_err_entry e{};
        fi_cq_readerr(cq, &e, 0);
        if (err) *err = e;
        return -FI_EAVAIL;
      }
      if (n != -FI_EAGAIN) return static_cast<int>(n);
      timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
      if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 > timeout_ms)
        return -FI_ETIMEDOUT;
    }
  }

  // All ranks meet (through the parent's pipes). Nothing progresses the
  // endpoint meanwhile: a rank in a barrier is a target that does not help.
  void barrier();

  // Two ranks swap `len` bytes (addresses and keys of registrations, say):
  // one message each way, both completions read, then a barrier. False if
  // any step failed.
  bool swap_with_peer(const void* mine, void* theirs, size_t len) {
    fi_addr_t peer = addr[1 - rank];
    fi_cq_tagged_entry ce;
    if (fi_recv(ep, theirs, len, nullptr, FI_ADDR_UNSPEC, nullptr) != 0) return false;
    if (fi_send(ep, mine, len, nullptr, peer, nullptr) != 0) return false;
    if (wait_cq(&ce) != 1 || wait_cq(&ce) != 1) return false;
    barrier();
    return true;
  }
};

using mp_body = std::function<void(mp_peer&)>;

// A recognisable byte pattern for data checks.
inline void fill(std::vector<unsigned char>& v, unsigned seed) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<unsigned char>((i * 131 + seed * 7) ^ (i >> 8));
}

// Runs `body` in `n` processes. Returns when all are done; failures in
// children are reported as a failure of the calling test.
void mp_run(int n, const mp_body& body, const mp_options& opt = {});

// A body that the RDM suite (test_data_path.cpp) and the datagram one
// (test_dgram.cpp) both run, in 3 ranks: rank 0 sends to rank 1 twice,
// removes rank 1's AV entry and inserts rank 2's address (the same index
// comes back); its next send to that fi_addr_t reaches rank 2, and nothing
// more reaches rank 1.
void send_to_reused_av_index(mp_peer& p);
// Rank 0 hears from 1 and 2, removes both from its AV and gives 1's index to
// 2's address: 1's next message must come with no source and not match a
// receive directed at that index; 2's must match it.
void source_of_reused_av_index(mp_peer& p);

}  // namespace weft_test
