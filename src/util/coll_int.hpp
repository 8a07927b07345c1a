// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The collective engine's insides, shared by util/coll.cpp (groups, joins,
// operations, progress, failures), util/coll_alg.cpp (the algorithms) and
// util/av_set.cpp. See util/coll.hpp for the interface and docs/design.md
// ("Collectives") for the rules.
#include <rdma/fi_collective.h>

#include <atomic>
#include <cstdint>
#include <array>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/lock.hpp"
#include "util/av.hpp"
#include "util/coll.hpp"
#include "util/request.hpp"

namespace weft {

// ------------------------------------------------------------------ AV sets
struct av_set {
  fid_av_set fid_;  // first
  weft::av* owner = nullptr;
  std::mutex m;
  std::vector<uint64_t> members;  // AV indices, in set order
  fi_addr_t addr = 0;             // fi_av_set_addr's answer
  // The set behind an application's pointer, or nullptr when it is not one
  // of weft's.
  static av_set* from(const fid_av_set* s) noexcept;
};

// ------------------------------------------------------------------ tags
// bit 63: the collective space; bits 51-62: the receiver's group id (cid);
// bits 35-50: the operation's sequence number in its group; bits 19-34: the
// sender's rank; bits 0-18: the message's number within the operation.
// cid 0 is the join space (the group's key fills the seq field and the top
// of the step field), cid 4095 the control space (probes, aborts).
inline constexpr unsigned tag_cid_shift = 51, tag_seq_shift = 35, tag_src_shift = 19;
inline constexpr uint64_t tag_step_mask = (uint64_t{1} << tag_src_shift) - 1;
inline constexpr uint16_t cid_join = 0, cid_ctl = 4095, cid_max = 4094;
inline constexpr uint32_t max_members = 65535;
inline constexpr uint32_t join_step_bits = 6;  // join steps < 64

inline uint64_t coll_tag(uint16_t cid, uint16_t seq, uint32_t src, uint32_t step) noexcept {
  return coll_tag_bit | uint64_t(cid) << tag_cid_shift | uint64_t(seq) << tag_seq_shift |
         uint64_t(src) << tag_src_shift | (step & tag_step_mask);
}

// ------------------------------------------------------------------ contexts
// Every context the engine gives the transport starts with its kind.
enum class ctx_kind : uint8_t { op, ctl, sink };
struct coll_ctx {
  ctx_kind kind;
};

struct coll_engine;
struct coll_group;

enum class coll_kind : uint8_t {
  barrier,
  broadcast,
  allreduce,
  allgather,
  reduce_scatter,
  reduce,
  alltoall,
  scatter,
  gather,
  join
};
enum class coll_alg : uint8_t {
  dissemination,   // barrier
  rd_allreduce,    // recursive doubling (small), with a fold for non-powers of two
  ring_allreduce,  // ring reduce-scatter + ring allgather (large)
  bin_reduce,      // binomial tree to the root
  rd_reduce_scatter,    // recursive-doubling allreduce of the whole vector, keep a slice (small)
  ring_reduce_scatter,  // ring reduce-scatter (large)
  bruck_allgather,      // Bruck (small)
  ring_allgather,       // ring (large)
  bin_bcast,            // binomial tree (small)
  chain_bcast,          // pipelined chain of segments (large)
  bin_scatter,
  bin_gather,
  pairwise_alltoall
};

// One transfer of a step: a tagged send to, or a receive from, a member.
struct xfer {
  bool send;
  uint32_t peer;  // rank
  uint8_t* buf;
  size_t len;
  uint32_t num;  // the message's number within the operation (tag step field)
};
inline constexpr size_t max_xfers = 64;  // per step

// An operation in flight: its arguments, the algorithm's state, and what its
// transfers reported (atomics: the transport reports under the endpoint's
// lock, the engine reads under its own).
struct coll_op {
  coll_ctx hdr{ctx_kind::op};
  uint64_t id = 0;  // request_pool
  coll_group* g = nullptr;
  coll_kind kind = coll_kind::barrier;
  coll_alg alg = coll_alg::dissemination;
  uint16_t seq = 0;
  void* context = nullptr;
  uint64_t flags = 0;
  // arguments
  const uint8_t* src = nullptr;  // the caller's input
  uint8_t* res = nullptr;        // the caller's result
  size_t count = 0;              // elements (per slice for the sliced operations)
  size_t esize = 0;              // bytes per element
  fi_datatype dt = FI_INT8;
  fi_op op = FI_SUM;
  uint32_t root = 0;
  // state
  uint32_t step = 0, nsteps = 0;
  uint32_t issued = 0;  // transfers of this step handed to the transport
  uint32_t sends = 0, recvs = 0;
  uint64_t expect = 0;  // bytes the step's receives should bring
  uint8_t* acc = nullptr;  // the algorithm's working buffer (res, or scratch)
  uint64_t wait_since_ms = 0;  // start of the current wait (probes)
  uint64_t probed_ms = 0;
  uint64_t failed_ms = 0;      // when it failed (the drain bound)
  int err = 0;                 // the failure that ends it (positive FI_E*)
  bool failing = false;
  bool cancelled = false;      // its unmatched receives are gone
  bool reported = false;       // its completion (an error) is written; it waits to drain
  // reported by the transport
  std::atomic<uint32_t> sends_done{0}, recvs_done{0};
  std::atomic<uint64_t> recv_bytes{0};
  std::atomic<int> xfer_err{0};
  // scratch, kept between uses of the slot
  std::unique_ptr<uint8_t[]> scratch;
  size_t scratch_cap = 0;
  // join: the records every member contributes (16 bytes each)
  std::vector<uint8_t> join_buf;

  uint8_t* tmp(size_t bytes);  // scratch of at least `bytes` (throws)
  void recycle() noexcept;     // request_pool: reset the bookkeeping, keep the buffers
};

// A control message: a probe (is the member there?) or an abort (an
// operation of the group failed at the sender: the group is broken).
struct ctl_msg {
  uint32_t magic;
  uint16_t type;  // ctl_probe, ctl_abort
  uint16_t cid;   // the receiver's group
  uint32_t key;   // the group's join key (a reused cid is not mistaken)
  int32_t err;    // abort: why (positive FI_E*)
  uint32_t from;  // the sender's rank
  uint32_t pad[3];
};
static_assert(sizeof(ctl_msg) == 32);
inline constexpr uint32_t ctl_magic = 0x57434f4c;  // "WCOL"
inline constexpr uint16_t ctl_probe = 1, ctl_abort = 2;

// A control message in flight.
struct coll_ctl {
  coll_ctx hdr{ctx_kind::ctl};
  uint64_t id = 0;
  uint16_t cid = 0;        // our group it concerns
  uint32_t instance = 0;
  bool probe = false;
  std::atomic<int> state{0};  // 0 in flight, 1 done, else 1 + FI_E*
  ctl_msg msg{};
  void recycle() noexcept {
    hdr.kind = ctx_kind::ctl;
    cid = 0;
    instance = 0;
    probe = false;
    state.store(0, std::memory_order_relaxed);
  }
};

// The context of the control sink (the engine's one receive for probes and aborts).
struct coll_sink {
  coll_ctx hdr{ctx_kind::sink};
  coll_engine* eng = nullptr;
};

struct coll_group {
  fid_mc mc;  // first
  coll_engine* eng = nullptr;  // nullptr: its endpoint closed first; fi_close only frees it
  uint16_t cid = 0;
  uint32_t instance = 0;
  uint64_t hash = 0;  // of the members' addresses
  uint32_t key = 0;   // the join's key (hash and join count)
  uint32_t rank = 0, size = 0;
  std::vector<fi_addr_t> members;  // AV indices by rank
  std::vector<uint16_t> remote_cid;
  enum class state : uint8_t { joining, joined, failed } st = state::joining;
  int broken = 0;  // the error that broke it (positive FI_E*): later operations fail with it
  bool closed = false;  // fi_close'd: freed once its last operation drained
  uint16_t next_seq = 0;
  uint32_t active = 0;   // operations not yet released, the join included
  uint32_t pending = 0;  // operations whose completion is not written yet
  void* join_context = nullptr;
};

struct coll_engine {
  explicit coll_engine(endpoint& ep) : e(ep) {}
  endpoint& e;
  policy_mutex lock;
  bool running = false;  // re-entry guard (with the lock off)
  uint32_t next_instance = 1;
  uint16_t next_cid = 0;
  std::vector<std::unique_ptr<coll_group>> groups;  // by cid (cid_join, cid_ctl never used)
  std::vector<coll_group*> zombies;                 // closed, waiting for operations to drain
  request_pool<coll_op> ops;
  std::vector<coll_op*> active;
  request_pool<coll_ctl> ctls;
  std::vector<coll_ctl*> ctl_live;
  struct pending_ctl {
    fi_addr_t dest;
    ctl_msg msg;
    uint16_t cid;  // our group it concerns
    uint32_t instance;
  };
  std::vector<pending_ctl> ctl_pending;  // aborts a transport refused for now
  std::unordered_map<uint64_t, uint32_t> join_counts;  // per members hash
  // The control sink: one receive for every probe and abort addressed to us.
  coll_sink sink;
  alignas(8) unsigned char sink_buf[64] = {};
  std::atomic<int> sink_state{0};  // 0 posted, 1 arrived, 2 failed, 3 not posted
  std::atomic<uint32_t> sink_len{0};
  uint64_t polls = 0;
  uint64_t now_ms = 0;
  bool eagain = false;  // a transport refused a transfer for now
};

// ------------------------------------------------------------------ algorithms (util/coll_alg.cpp)
// Chooses the algorithm and number of steps, makes the initial copies.
// Throws (allocation).
void alg_start(coll_op& o);
// The transfers of step `step` (at most max_xfers).
size_t alg_plan(coll_op& o, uint32_t step, xfer* out) noexcept;
// Local work once every transfer of `step` completed (reductions).
void alg_after(coll_op& o, uint32_t step) noexcept;
// Local work once every step is done (copies into the result).
void alg_finish(coll_op& o) noexcept;

// Sizes at which the large-message algorithms take over (bytes per member's
// share of the data), documented in docs/design.md.
inline constexpr size_t ring_min_bytes = 64 * 1024;
inline constexpr size_t chain_min_bytes = 256 * 1024;
inline constexpr size_t chain_segment = 128 * 1024;

}  // namespace weft
