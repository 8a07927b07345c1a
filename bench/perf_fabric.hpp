// SPDX-License-Identifier: BSD-3-Clause
// weft-perf's fabric side, on the public fi_* API only: opens the objects a
// test needs, exchanges addresses and memory keys over the control channel,
// and runs one measured phase at a time. The initiator drives; the responder
// follows the commands it receives (so a server needs no test options).
#pragma once

#include "perf_ctl.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <cstdint>
#include <string>
#include <vector>

namespace weft_perf {

enum class family : uint32_t { msg, tagged, write, read, atomic, coll };

struct test_desc {
  const char* name;
  family fam;
  bool latency;  // one operation in flight (ping-pong for msg/tagged)
  const char* default_sizes;
};

const test_desc* find_test(const std::string& name);

// --completion: the transmit op_flags of each level; index = wire_config::completion.
struct completion_level {
  const char* name;
  uint64_t op_flags;
};
inline constexpr completion_level completion_levels[] = {
    {"default", 0}, {"inject", FI_INJECT_COMPLETE}, {"transmit", FI_TRANSMIT_COMPLETE}, {"delivery", FI_DELIVERY_COMPLETE}};
const std::vector<test_desc>& all_tests();

// Everything both sides must agree on; the initiator sends it in `hello`.
struct wire_config {
  char magic[8];
  uint32_t test;  // index into all_tests()
  uint32_t ep_msg;
  uint32_t check;
  uint32_t inject;   // use fi_inject for sizes <= inject_size
  uint32_t cq_wait;  // fi_cq_sread instead of busy polling
  uint32_t cswap;    // atomic op: 0 fetch-add, 1 compare-swap
  uint32_t window;
  uint32_t mem;    // buffers: 0 heap (aligned_alloc), 1 a shared memfd sealed against shrinking
  uint32_t reuse;  // every operation of a window uses slot 0 (one buffer, as ucx_perftest)
  uint32_t completion;  // the sends' default completion level (op_flags): completion_levels[]
  uint64_t max_size;
  double timeout_s;
  char prov[64];
  char domain[64];
};

struct phase_result {
  std::vector<double> samples_us;  // per-operation time (one-way for ping-pong)
  double total_s = 0;              // time inside the measured regions
  uint64_t ops = 0;                // messages / operations timed
  uint64_t iters = 0;              // round trips (ping-pong) or operations
};

class fabric_session {
public:
  // src_node: fabric source address for fi_getinfo (FI_SOURCE), or empty.
  fabric_session(const wire_config& cfg, ctl_channel& ctl, bool initiator, std::string src_node);
  ~fabric_session();
  fabric_session(const fabric_session&) = delete;
  fabric_session& operator=(const fabric_session&) = delete;

  void setup();
  std::string describe() const;
  size_t inject_size() const { return inject_size_; }
  uint64_t max_atomic_count() const { return max_atomic_count_; }
  const test_desc& test() const { return *test_; }

  // Initiator: one phase of `iters` operations at `size` bytes.
  phase_result run_phase(uint64_t size, uint64_t iters);
  // Effective window at `size` (bounded by buffer slots).
  uint64_t window_at(uint64_t size) const;
  void finish();
  // Responder: obey the initiator until it says bye.
  void serve();

private:
  struct idle_state {
    double since = 0;  // first idle check after the last progress
    unsigned spins = 0;
  };
  void open_rdm();
  void open_msg();
  fi_info* get_info(fi_info* hints_base);
  fi_info* make_hints() const;
  void open_common(fi_info* info);
  void wait_cm_event(uint32_t want, fi_eq_cm_entry* out);
  void register_memory();

  // data path helpers
  int progress(bool may_block = false);
  template <class Done>
  void wait_for(Done done, const char* what);
  int poll_one();
  void wait_rx_inject(const char* what);
  bool lean_pingpong(uint64_t size) const;
  template <class Done>
  void spin_until(Done done, const char* what);
  void check_peer();
  void idle(idle_state& st, const char* what);
  [[gnu::cold, gnu::noinline]] void idle_check(idle_state& st, const char* what);
  ssize_t try_send(uint8_t* buf, uint64_t len, fi_context2* ctx, bool ack, bool inj);
  ssize_t try_recv(uint8_t* buf, uint64_t len, fi_context2* ctx, bool ack);
  void post_send(uint8_t* buf, uint64_t len, fi_context2* ctx, bool ack);
  void post_recv(uint8_t* buf, uint64_t len, fi_context2* ctx, bool ack);
  [[gnu::cold, gnu::noinline]] void retry_send(uint8_t* buf, uint64_t len, fi_context2* ctx, bool ack,
                                               bool inj, ssize_t rc);
  [[gnu::cold, gnu::noinline]] void retry_recv(uint8_t* buf, uint64_t len, fi_context2* ctx, bool ack,
                                               ssize_t rc);
  void post_rma(uint64_t slot, uint64_t size);
  void post_atomic(uint64_t slot, uint64_t count);
  [[gnu::cold]] void report_cq_error();

  phase_result pingpong_initiator(uint64_t size, uint64_t iters);
  void pingpong_responder(uint64_t size, uint64_t iters);
  phase_result stream_initiator(uint64_t size, uint64_t iters, uint64_t w);
  void stream_responder(uint64_t size, uint64_t iters, uint64_t w);
  phase_result rma_initiator(uint64_t size, uint64_t iters, uint64_t w);
  phase_result atomic_initiator(uint64_t size, uint64_t iters, uint64_t w);
  // Collectives (barrier_lat, allreduce_*): both sides run the same loop
  // of one operation at a time on a group of the two; the initiator times it.
  void join_group();
  phase_result coll_loop(uint64_t size, uint64_t iters);
  void passive_responder(uint64_t size);

  uint8_t* tx_slot(uint64_t i, uint64_t size) const { return tx_area_ + (cfg_.reuse ? 0 : i) * size; }
  uint8_t* rx_slot(uint64_t i, uint64_t size) const { return rx_area_ + (cfg_.reuse ? 0 : i) * size; }
  uint64_t remote(const uint8_t* local) const;

  wire_config cfg_;
  ctl_channel& ctl_;
  bool initiator_;
  std::string src_node_;
  const test_desc* test_;

  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_eq* eq_ = nullptr;
  fid_pep* pep_ = nullptr;
  fid_av* av_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_ep* ep_ = nullptr;
  fid_mr* mr_ = nullptr;
  fid_av_set* set_ = nullptr;  // collectives: the two of us
  fid_mc* mc_ = nullptr;
  fi_addr_t coll_addr_ = FI_ADDR_NOTAVAIL;
  void* desc_ = nullptr;
  fi_addr_t peer_ = FI_ADDR_UNSPEC;

  size_t inject_size_ = 0;
  uint64_t mr_mode_ = 0;
  uint64_t max_atomic_count_ = 0;

  // One registered region, identical layout on both sides:
  // [tx area][rx area][ack tx][ack rx][atomic target][operand][compare][result]
  uint8_t* region_ = nullptr;
  size_t region_len_ = 0;
  int memfd_ = -1;  // --mem memfd: the file behind region_
  size_t area_len_ = 0;
  uint8_t* tx_area_ = nullptr;
  uint8_t* rx_area_ = nullptr;
  uint8_t* ack_tx_ = nullptr;
  uint8_t* ack_rx_ = nullptr;
  uint64_t* atomic_target_ = nullptr;
  uint64_t* operand_ = nullptr;
  uint64_t* compare_ = nullptr;
  uint64_t* result_ = nullptr;
  uint64_t atomic_cap_ = 0;   // elements per slot in the atomic arrays
  uint64_t remote_base_ = 0;  // peer's region address as RMA sees it
  uint64_t remote_key_ = 0;
  uint64_t local_base_ = 0;

  std::vector<fi_context2> tx_ctx_, rx_ctx_;
  fi_context2 ack_tx_ctx_{}, ack_rx_ctx_{};
  std::vector<uint64_t> rx_len_;
  uint64_t tx_done_ = 0, rx_done_ = 0, ack_rx_done_ = 0;
  double last_check_ = 0;
};

}  // namespace weft_perf
