#pragma once
// prov/shm: the RDM endpoint.
#include <atomic>
#include <bit>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "prov/shm/shm.hpp"

namespace weft::shm {

// Locking is chosen once at endpoint open from the domain's threading level
// (and whether a progress thread runs): FI_THREAD_SAFE or FI_PROGRESS_AUTO
// take the endpoint lock, the other levels promise serialised access.
// Receive-side matching state: an endpoint's own, or shared by every
// endpoint bound to one shared receive context.
struct rx_queues {
  std::list<posted_recv> posted_msg, posted_tagged;
  std::list<posted_recv> free_recvs;  // spare nodes: posting a receive allocates only when warming up
  std::list<unexpected> ux_msg, ux_tagged;
  size_t ux_count = 0;
  size_t ux_bytes = 0;
};

class ep_lock {
public:
  void set_enabled(bool on) noexcept { on_ = on; }
  void lock() {
    if (on_) m_.lock();
  }
  void unlock() {
    if (on_) m_.unlock();
  }

private:
  std::recursive_mutex m_;
  bool on_ = true;
};

// Internal operation flag (a bit no public flag uses): fi_inject and
// friends, which generate no completion.
inline constexpr uint64_t flag_no_cq = 1ULL << 63;

// What an ep object is: a plain endpoint, a transmit or receive context of
// a scalable endpoint, or a shared receive context.
enum class ep_role : uint8_t { endpoint, tx_ctx, rx_ctx, srx };

struct sep;
struct stx;

struct ep {
  fid_ep fid_;  // first
  ep_role role = ep_role::endpoint;
  sep* parent = nullptr;     // tx/rx contexts: their scalable endpoint
  size_t ctx_index = 0;      // tx/rx contexts: their index
  stx* shared_tx = nullptr;  // bound shared transmit context
  ep* shared_rx = nullptr;   // bound shared receive context
  users users_;              // srx: endpoints bound to it
  domain* dom = nullptr;
  fi_info* info = nullptr;
  weft::av* av = nullptr;
  fid_cq* tx_cq = nullptr;
  fid_cq* rx_cq = nullptr;
  bool tx_selective = false;
  bool rx_selective = false;
  fid_cntr* cntr_send = nullptr;
  fid_cntr* cntr_recv = nullptr;
  fid_cntr* cntr_read = nullptr;
  fid_cntr* cntr_write = nullptr;
  fid_cntr* cntr_rread = nullptr;
  fid_cntr* cntr_rwrite = nullptr;
  fid_eq* eq = nullptr;
  uint64_t caps = 0;
  uint64_t tx_op_flags = 0;
  uint64_t rx_op_flags = 0;
  size_t inject_size = inject_max;
  size_t min_multi_recv = 64;
  std::string name;  // our endpoint name (address "fi_shm://<name>")
  mapping region;
  region_view me;
  bool enabled = false;
  bool cma = true;
  ep_lock own_lock;
  ep_lock* lock = &own_lock;  // own_lock, or the shared receive context's
  // Control operations (bind, enable, close) serialise on `ctl`; they take
  // it before anything else and register pollers without holding `lock`,
  // because a CQ reader holds its poller list while it takes `lock`.
  std::mutex ctl;

  // Peers we talk to: by name, and a cache by AV index.
  std::unordered_map<std::string, std::unique_ptr<peer>> by_name;
  std::vector<peer*> by_index;
  std::vector<std::unique_ptr<peer>> retired;  // replaced peers: requests may still point at them
  fi_addr_t src_cache[peer_slots];             // sender slot -> fi_addr (FI_SOURCE)
  int32_t src_pid[peer_slots] = {};            // the pid the cached entry was for

  rx_queues own_rx;
  rx_queues* rx = &own_rx;  // own_rx, or a shared receive context's (fi_srx_context)
  std::list<assembly> assemblies;
  std::list<split_recv> splits;  // large receives copied in two parts
  uint64_t split_busy = 0;       // bitmap of split slots in use (split_slots = 64)
  uint32_t split_gen[split_slots] = {};
  bool split_enabled = true;  // FI_SHM_SPLIT_COPY=0 turns it off
  bool map_mr = true;         // FI_SHM_MAP_MR=0 turns it off (RMA through mapped backings)

  std::unordered_map<uint64_t, std::unique_ptr<request>> pending;  // by id
  std::list<request*> outgoing;  // requests with cells still to push, in order
  struct pending_cell {
    peer* to;
    hdr_fields h;
    std::vector<unsigned char> payload;
  };
  std::list<pending_cell> backlog;  // responses that found the peer's queue full
  uint64_t next_id = 1;
  uint64_t last_liveness_check = 0;
  uint32_t polls = 0;  // progress calls, to pace the periodic checks
  // Cells consumed by the last progress call and handed back at the start of
  // the next one: the release stores then never sit in front of the locked
  // instruction of a send the application makes in between.
  uint32_t unreleased = 0;

  std::thread progress_thread;
  std::atomic<bool> stop{false};

  static ep* of(fid_ep* e) noexcept { return from_fid<ep>(e); }
  static ep* of(fid* f) noexcept { return from_fid<ep>(f); }
};

// Posted receives move between lists by splicing: no allocation once warm.
inline void recv_push(ep& e, std::list<posted_recv>& list, const posted_recv& r) {
  auto& spare = e.rx->free_recvs;
  if (spare.empty()) [[unlikely]] {
    list.push_back(r);
  } else {
    list.splice(list.end(), spare, spare.begin());
    list.back() = r;
  }
}
inline void recv_drop(ep& e, std::list<posted_recv>& list, std::list<posted_recv>::iterator it) {
  e.rx->free_recvs.splice(e.rx->free_recvs.begin(), list, it);
}

// fi_alias: another fid for the same endpoint with its own default
// operation flags. The data path resolves it with one pointer compare.
struct alias {
  fid_ep fid_;  // first
  ep* base;
  uint64_t tx_flags;
  uint64_t rx_flags;
};
extern fi_ops alias_fi_ops;

inline bool is_alias(const fid_ep* f) noexcept {
  return f->fid.ops == &alias_fi_ops;
}
inline ep& ep_of(fid_ep* f) noexcept {
  if (is_alias(f)) [[unlikely]]
    return *from_fid<alias>(f)->base;
  return *ep::of(f);
}
inline uint64_t tx_flags_of(fid_ep* f, const ep& e) noexcept {
  return is_alias(f) ? from_fid<alias>(f)->tx_flags : e.tx_op_flags;
}
inline uint64_t rx_flags_of(fid_ep* f, const ep& e) noexcept {
  return is_alias(f) ? from_fid<alias>(f)->rx_flags : e.rx_op_flags;
}

peer* peer_of_slow(ep& e, fi_addr_t addr) noexcept;
fi_addr_t src_addr_slow(ep& e, uint32_t slot) noexcept;

// The peer an fi_addr_t names (mapped on first use), or nullptr. Inline:
// the cached case is on every send.
inline peer* peer_of(ep& e, fi_addr_t addr) noexcept {
  if (e.av && !e.av->rx_index(addr)) [[likely]] {
    uint64_t idx = e.av->index(addr);
    if (idx < e.by_index.size()) {
      peer* p = e.by_index[idx];
      if (p && p->av_gen == e.av->generation(addr) && !p->dead) [[likely]]
        return p;
    }
  }
  return peer_of_slow(e, addr);
}

// The fi_addr_t of the sender in peer slot `slot` (FI_SOURCE), cached per slot.
inline fi_addr_t src_addr_of(ep& e, uint32_t slot) noexcept {
  if (slot < peer_slots && e.src_cache[slot] != FI_ADDR_NOTAVAIL && e.src_pid[slot] == e.me.peers()[slot].pid)
      [[likely]]
    return e.src_cache[slot];
  return src_addr_slow(e, slot);
}

struct ep_guard {
  explicit ep_guard(ep& e) : e_(e) { e_.lock->lock(); }
  ~ep_guard() { e_.lock->unlock(); }
  ep& e_;
};

// shm_progress.cpp
void progress(ep& e) noexcept;

// FI_FENCE: the operation waits until every earlier one has completed; the
// caller sees -FI_EAGAIN until then (and drives progress by retrying).
inline bool fence_blocked(ep& e, uint64_t flags) noexcept {
  if (!(flags & FI_FENCE)) [[likely]]
    return false;
  if (e.pending.empty() && e.outgoing.empty()) return false;
  progress(e);
  return !e.pending.empty() || !e.outgoing.empty();
}
// Every non-empty piece has a buffer (a null one would be dereferenced).
inline bool iov_valid(const iovec* iov, size_t count) noexcept {
  for (size_t i = 0; i < count; ++i)
    if (iov[i].iov_len && !iov[i].iov_base) [[unlikely]]
      return false;
  return true;
}

// Takes a free split slot of our region (the caller checked that one is
// free: split_busy != ~0), arms it under a fresh generation and marks it
// busy. Returns the slot; *gen is the generation the peer must echo.
// (Out of line: large copies only, kept out of the polling loop's code.)
uint32_t arm_split(ep& e, uint32_t* gen) noexcept;
void progress_poller(void* arg) noexcept;
peer* peer_of_slow(ep& e, fi_addr_t addr) noexcept;
peer* peer_by_name(ep& e, const std::string& name) noexcept;
cell* claim_to_slow(ep& e, peer& p) noexcept;  // p's queue was full: progress once, try again
// Claims a cell of p's queue (nullptr: full even after progressing once).
inline cell* claim_to(ep& e, peer& p) noexcept {
  cell* c = queue_claim(p.view());
  if (!c) [[unlikely]]
    return claim_to_slow(e, p);
  c->h.src = static_cast<uint16_t>(p.slot);
  return c;
}
void fill_src(ep& e, peer& p, cell* c) noexcept;
fi_addr_t src_addr_slow(ep& e, uint32_t slot) noexcept;
// Sends one cell (header fields from h) to p, or keeps it in the backlog
// when p's queue is full. Returns false only on allocation failure.
bool send_cell(ep& e, peer& p, const hdr_fields& h, const void* payload, size_t len) noexcept;
// Tells the sender in peer slot `slot` that its request `id` ended (err: 0
// or a positive FI_E* code).
void send_ack(ep& e, uint32_t slot, uint64_t id, int err) noexcept;
// The peer that sent a cell (from its slot), mapped for responses.
peer* sender_of(ep& e, uint32_t slot) noexcept;
request* new_request(ep& e) noexcept;
void finish_request(ep& e, uint64_t id) noexcept;

// completions (shm_progress.cpp)
void tx_done(ep& e, void* context, uint64_t cq_flags, uint64_t op_flags, size_t len) noexcept;
void tx_fail(ep& e, void* context, uint64_t cq_flags, uint64_t op_flags, int err, size_t len) noexcept;
void rx_done(ep& e, const posted_recv& r, uint64_t cq_flags, size_t len, void* buf, uint64_t data,
             uint64_t tag, fi_addr_t src) noexcept;
void rx_fail(ep& e, const posted_recv& r, uint64_t cq_flags, int err, size_t len, size_t olen, uint64_t data,
             uint64_t tag, fi_addr_t src) noexcept;

// ops tables (shm_msg.cpp, shm_rma.cpp, shm_atomic.cpp)
extern fi_ops_msg msg_ops;
extern fi_ops_tagged tagged_ops;
extern fi_ops_msg msg_ops_tx, msg_ops_rx;  // contexts: one direction only
extern fi_ops_tagged tagged_ops_tx, tagged_ops_rx;
extern fi_ops_rma rma_ops_none;  // receive contexts
extern fi_ops_atomic atomic_ops_none;

// An ops-table entry that is not available on this kind of object.
template <class F>
struct nosys;
template <class R, class... A>
struct nosys<R (*)(A...)> {
  static R fn(A...) noexcept { return static_cast<R>(-FI_ENOSYS); }
};
#define WEFT_NOSYS(table, member) ::weft::shm::nosys<decltype(table::member)>::fn

// shm_ep.cpp: builds an endpoint object of any role (not enabled).
std::unique_ptr<ep> make_ep(domain& dom, const fi_info* info, void* context, ep_role role, std::string name);
// shm_ctx.cpp
int scalable_ep_open(domain& dom, fi_info* info, fid_ep** out, void* context);
int stx_open(domain& dom, fi_tx_attr* attr, fid_stx** out, void* context);
int srx_open(domain& dom, fi_rx_attr* attr, fid_ep** out, void* context);
// A bind to a shared context (FI_CLASS_STX_CTX / FI_CLASS_SRX_CTX).
int bind_shared(ep& e, fid* bfid, uint64_t flags);
void unbind_shared(ep& e) noexcept;
void context_closed(ep& e) noexcept;
bool is_shm_ep(const fid* f) noexcept;  // an ep object of this provider (any role)     // a tx/rx context
                                        // leaves its scalable endpoint
weft::av* context_av(ep& e) noexcept;   // a context's scalable endpoint's AV
extern fi_ops_rma rma_ops;
extern fi_ops_atomic atomic_ops;
// Handlers run by progress for incoming RMA/atomic cells (shm_rma.cpp, shm_atomic.cpp).
void handle_rma_cell(ep& e, cell* c) noexcept;
void handle_atomic_cell(ep& e, cell* c) noexcept;
int query_atomic(domain& dom, fi_datatype dt, fi_op op, fi_atomic_attr* attr, uint64_t flags);

// Iov helpers.
size_t iov_total(const iovec* iov, size_t count) noexcept;
size_t iov_copy_to(const iovec* iov, size_t count, size_t offset, const void* src, size_t len) noexcept;
size_t iov_copy_from(const iovec* iov, size_t count, size_t offset, void* dst, size_t len) noexcept;

inline uint64_t now_us() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000 + static_cast<uint64_t>(ts.tv_nsec) / 1000;
}

inline uint64_t now_ms() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

}  // namespace weft::shm
