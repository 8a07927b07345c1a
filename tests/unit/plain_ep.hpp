// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// A plain RDM endpoint on the public fi_* API only (an AV table, one CQ for
// both directions), for programs that open many of them and need nothing
// else: the shm peer-table test (test_shm_peers.cpp) and
// bench/shm_peers_mem.cpp, which runs over Debian's libfabric as well.
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace plain {

inline double seconds_since(const timespec& t0) {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec - t0.tv_sec) + static_cast<double>(t.tv_nsec - t0.tv_nsec) / 1e9;
}

// Sleeps between tries, longer each time (up to 20 ms): a thousand senders
// that find a receiver's queue full must leave the CPUs to that receiver.
struct backoff {
  useconds_t us = 50;
  void operator()() {
    usleep(us);
    us = std::min<useconds_t>(us * 2, 20000);
  }
};

// Waits for child `pid` until `limit_s` seconds after t0, then kills it.
// Returns its wait status.
inline int reap(pid_t pid, const timespec& t0, double limit_s) {
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (seconds_since(t0) > limit_s) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    usleep(2000);
  }
  return status;
}

struct endpoint {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;

  // Opens and enables an endpoint of provider `prov` with `caps`; `node`
  // (or nullptr) is its own address (FI_SOURCE). False on any failure.
  bool open(const char* prov, uint64_t caps, const char* node = nullptr) {
    fi_info* hints = fi_allocinfo();
    if (!hints) return false;
    hints->fabric_attr->prov_name = strdup(prov);
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = caps;
    hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
    fi_info* got = nullptr;
    int ret = fi_getinfo(FI_VERSION(1, 17), node, nullptr, node ? FI_SOURCE : 0, hints, &got);
    fi_freeinfo(hints);
    return ret == 0 && open(got);
  }

  // Opens and enables an endpoint from `i` (kept, and freed by close()).
  bool open(fi_info* i) {
    info = i;
    if (!info) return false;
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_TAGGED;
    ca.size = 4096;
    return fi_fabric(info->fabric_attr, &fabric, nullptr) == 0 && fi_domain(fabric, info, &domain, nullptr) == 0 &&
           fi_av_open(domain, &aa, &av, nullptr) == 0 && fi_cq_open(domain, &ca, &cq, nullptr) == 0 &&
           fi_endpoint(domain, info, &ep, nullptr) == 0 && fi_ep_bind(ep, &av->fid, 0) == 0 &&
           fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) == 0 && fi_enable(ep) == 0;
  }

  // fi_tsend, tried again while it says -FI_EAGAIN (progressing, and
  // sleeping longer each time) until `limit_s` seconds after t0. Returns
  // its last answer.
  ssize_t tsend(const void* buf, size_t len, fi_addr_t to, uint64_t tag, const timespec& t0, double limit_s) {
    backoff pause;
    for (;;) {
      ssize_t r = fi_tsend(ep, buf, len, nullptr, to, tag, nullptr);
      if (r != -FI_EAGAIN || seconds_since(t0) > limit_s) return r;
      fi_cq_tagged_entry ce;
      (void)fi_cq_read(cq, &ce, 0);  // progress
      pause();
    }
  }

  // Reads n completions, sleeping between empty polls, until `limit_s`
  // seconds after t0. False on an error entry (said on stderr, after
  // `who`) or when the time is up.
  bool wait_completions(int n, const timespec& t0, double limit_s, const char* who) {
    backoff pause;
    for (int done = 0; done < n;) {
      fi_cq_tagged_entry ce;
      ssize_t r = fi_cq_read(cq, &ce, 1);
      if (r == 1) {
        ++done;
        pause = backoff{};
        continue;
      }
      if (r == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        fi_cq_readerr(cq, &err, 0);
        fprintf(stderr, "%s: an operation failed: %s\n", who, fi_strerror(err.err));
        return false;
      }
      if (r != -FI_EAGAIN || seconds_since(t0) > limit_s) {
        fprintf(stderr, "%s: %d of %d completions (%s)\n", who, done, n,
                r == -FI_EAGAIN ? "timed out" : fi_strerror(static_cast<int>(-r)));
        return false;
      }
      pause();
    }
    return true;
  }

  // Closes whatever is open; false when a close failed.
  bool close() {
    bool ok = true;
    for (fid* f : {ep ? &ep->fid : nullptr, cq ? &cq->fid : nullptr, av ? &av->fid : nullptr,
                   domain ? &domain->fid : nullptr, fabric ? &fabric->fid : nullptr})
      if (f) ok = fi_close(f) == 0 && ok;
    if (info) fi_freeinfo(info);
    *this = endpoint{};
    return ok;
  }
};

}  // namespace plain
