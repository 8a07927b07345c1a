// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// A transport as a part of another provider's endpoint (the linked
// provider, src/prov/lnx): an RDM endpoint made in a part domain
// (util/domain.hpp, domain_open_part) and bound with endpoint_share, and its
// data path called directly, after the checks util/ep_ops.hpp made on the
// whole endpoint. Return values as the entry points'. Each transport defines
// part<its tag>'s members in its own folder (shm_part.hpp, tcp_part.hpp).
#include <rdma/fi_atomic.h>
#include <sys/uio.h>

#include "util/atomic_ops.hpp"
#include "util/ep.hpp"

namespace weft {

struct atomic_call;  // util/ep_ops.hpp

// What an owner that runs a part's rounds only now and then reads between
// them, instead of calling round_gap_us and asking the part every round (two calls
// and a chain of loads on the path of every message of the other part):
// taken after a round (part<T>::probe), valid until the next one, and
// each of its checks one load of a word the part or the kernel writes.
struct part_probe {
  uint64_t gap_us = 0;             // round_gap_us() after that round
  const size_t* hot = nullptr;     // nonzero: something went hot since (a send, a connection)
  const unsigned* wake = nullptr;  // woke(): this word differs from wake_seen (nullptr: never)
  unsigned wake_seen = 0;

  // A round is due now: every round while the gap is 0, or once the part
  // says so; else the owner's clock decides (at most gap_us apart).
  bool due() const noexcept {
    return gap_us == 0 || *hot != 0 || (wake && __atomic_load_n(wake, __ATOMIC_ACQUIRE) != wake_seen);
  }
};

template <class Transport>
struct part {
  // An RDM endpoint named from info->src_addr as fi_endpoint names one (not
  // enabled; closed with fi_close). Throws.
  static endpoint* open(domain& part_domain, const fi_info* info);
  template <bool Tagged>
  static ssize_t send(endpoint& e, const iovec* iov, size_t count, fi_addr_t dest, uint64_t tag,
                      uint64_t data, void* ctx, uint64_t flags) noexcept;
  template <bool Tagged>
  static ssize_t inject(endpoint& e, const void* buf, size_t len, fi_addr_t dest, uint64_t tag) noexcept;
  static ssize_t rma(endpoint& e, bool write, const iovec* iov, void* const* desc, size_t count,
                     fi_addr_t addr, const fi_rma_iov* riov, size_t rcount, uint64_t data, void* ctx,
                     uint64_t flags) noexcept;
  static ssize_t atomic(endpoint& e, const atomic_call& call) noexcept;
  static size_t atomic_max_count(atomic_form form, fi_datatype dt) noexcept;
  // Operations of ours still under way (FI_FENCE waits for them).
  static bool busy(endpoint& e) noexcept;
  // One round of progress; the caller holds the endpoint's lock.
  static void progress(endpoint& e) noexcept;
  // The most time, in microseconds, the owner may leave between two rounds
  // of progress: 0 when a round costs a few loads or something is under way
  // (every round), more when a round costs a system call and would find
  // nothing pressing.
  static uint64_t round_gap_us(endpoint& e) noexcept;
  // The probe of the part as the round just run left it (gap_us 0 where
  // every round is due; its wake word, where the part can tell by a load
  // that something arrived since: tcp's ready_watch).
  static part_probe probe(endpoint& e) noexcept;
};

}  // namespace weft
