// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The endpoint core every provider builds on.
//
// An endpoint object (fi_endpoint, a context of a scalable endpoint, a
// shared receive context) is a provider struct derived from
// weft::endpoint, whose first member is the fid_ep. The core owns what is
// the same for every transport:
//   * bindings and the enable rules (AV, CQs with selective completion, the
//     six counters, EQ, shared contexts; -FI_ENOAV, -FI_ENOCQ,
//     -FI_EOPBADSTATE), default op flags, aliases, cancel, options, close;
//   * the receive side: every fi_recv/fi_trecv entry point and the matcher
//     (util/matcher.hpp) that pairs posted receives with arriving messages;
//   * completions (tx_done, rx_finish, ...) and counters;
//   * progress: pollers on CQs and counters (manual) and a thread (auto).
// A transport supplies the ep_transport hooks below (control path only: the
// data path calls the provider's functions directly, through its own ops
// tables built with util/ep_ops.hpp).
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "common/lock.hpp"
#include "common/object.hpp"
#include "util/absent_peers.hpp"
#include "util/av.hpp"
#include "util/coll.hpp"
#include "util/cq.hpp"
#include "util/domain.hpp"
#include "util/matcher.hpp"

namespace weft {

// Internal operation flag (a bit no public flag uses): fi_inject and
// friends, which generate no completion.
inline constexpr uint64_t flag_no_cq = 1ULL << 63;

// What an ep object is.
enum class ep_role : uint8_t { endpoint, tx_ctx, rx_ctx, srx };

struct endpoint;
struct sep;
struct stx;

// A transport's answers to the endpoint core.
struct ep_transport {
  // fi_enable, after the core checked the bindings; under ctl and the lock.
  int (*enable)(endpoint&);
  // Drives the transport once (pollers, the auto-progress thread, close);
  // called with the endpoint's lock held.
  void (*progress)(endpoint&) noexcept;
  // fi_close: last work before the core unbinds (under ctl and the lock),
  // then destroy deletes the provider's object.
  void (*close)(endpoint&) noexcept;
  void (*destroy)(endpoint*) noexcept;
  // The receive side's questions about messages the transport queued as
  // unexpected (see matcher.hpp).
  const rx_transport* rx;
  // FI_OPT_CM_DATA_SIZE (0: no connection management data).
  size_t cm_data_size;
  // fi_trywait on a CQ or counter the endpoint is bound to, before the
  // application sleeps on its fd (progress_list::arm): false while the
  // transport has work that needs progress. Under the endpoint's lock.
  // nullptr: nothing can arrive that the wait object would not see.
  bool (*arm)(endpoint&) noexcept = nullptr;
  // Reading the bound EQ runs the endpoint's progress too (connection
  // events of FI_EP_MSG endpoints).
  bool eq_progress = false;
};

struct endpoint {
  fid_ep fid_;  // first
  const ep_transport* tops = nullptr;
  ep_role role = ep_role::endpoint;
  sep* parent = nullptr;          // tx/rx contexts: their scalable endpoint
  size_t ctx_index = 0;           // tx/rx contexts: their index
  stx* shared_tx = nullptr;       // bound shared transmit context
  endpoint* shared_rx = nullptr;  // bound shared receive context
  users users_;                   // aliases; an srx: endpoints bound to it
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
  size_t inject_size = 0;
  bool enabled = false;
  bool owing = false;  // ep_owing: the transport owes a peer cells it could not send yet
  // Locking is chosen once at open from the threading level (see
  // endpoint_init): FI_THREAD_SAFE or auto progress take the lock.
  policy_mutex own_lock;
  policy_mutex* lock = &own_lock;  // own_lock, or the shared receive context's
  // Control operations (bind, enable, close) serialise on `ctl`; they take
  // it before anything else and register pollers without holding `lock`,
  // because a CQ reader holds its poller list while it takes `lock`.
  std::mutex ctl;
  rx_queues own_rx;
  rx_queues* rx = &own_rx;  // own_rx, or a shared receive context's
  // FI_PROGRESS_AUTO: a thread runs the transport's progress.
  std::thread progress_thread;
  std::atomic<bool> stop{false};
  // A part of another provider's endpoint (endpoint_share): the whole.
  endpoint* whole = nullptr;
  // Addresses sends keep finding nobody at (one warning each: note_absent).
  absent_peers absent;
  // Collectives (util/coll.hpp): the transport's tagged send for the engine
  // (util/ep_ops.hpp installs it on plain endpoints), and the engine, made
  // by the first fi_join_collective.
  coll_send_fn coll_send = nullptr;
  std::atomic<coll_engine*> coll{nullptr};

  static endpoint* of(fid_ep* e) noexcept { return from_fid<endpoint>(e); }
  static endpoint* of(fid* f) noexcept { return from_fid<endpoint>(f); }
};

struct ep_guard {
  explicit ep_guard(endpoint& e) : e_(e) { e_.lock->lock(); }
  ~ep_guard() { e_.lock->unlock(); }
  ep_guard(const ep_guard&) = delete;
  ep_guard& operator=(const ep_guard&) = delete;
  endpoint& e_;
};

// Fills the core's part of a new endpoint of any role (not enabled): info,
// caps, op flags, inject size (the transport's maximum unless the info asks
// for less), the lock policy, the fid tables the core owns (fid ops, ep
// ops). The transport sets fid_.cm/msg/tagged/rma/atomic. Throws.
void endpoint_init(endpoint& e, domain& dom, const fi_info* info, void* context, ep_role role,
                   const ep_transport* tops, size_t inject_max);
bool is_endpoint(const fid* f) noexcept;  // an ep object made by endpoint_init (any role)

// fi_alias: another fid for the same endpoint with its own default
// operation flags. The data path resolves it with one pointer compare.
struct alias {
  fid_ep fid_;  // first
  endpoint* base;
  uint64_t tx_flags;
  uint64_t rx_flags;
};
extern fi_ops alias_fi_ops;

inline bool is_alias(const fid_ep* f) noexcept {
  return f->fid.ops == &alias_fi_ops;
}
inline endpoint& ep_of(fid_ep* f) noexcept {
  if (is_alias(f)) [[unlikely]]
    return *from_fid<alias>(f)->base;
  return *endpoint::of(f);
}
inline uint64_t tx_flags_of(fid_ep* f, const endpoint& e) noexcept {
  return is_alias(f) ? from_fid<alias>(f)->tx_flags : e.tx_op_flags;
}
inline uint64_t rx_flags_of(fid_ep* f, const endpoint& e) noexcept {
  return is_alias(f) ? from_fid<alias>(f)->rx_flags : e.rx_op_flags;
}

// ------------------------------------------------------------------ completions
// The transport owes a peer something it could not send yet (a response
// behind the peer's full queue: `on`), or no longer does: the endpoint's
// CQs hold their entries back meanwhile (cq_hold, util/cq.hpp says why).
// Cheap when nothing changes; under the endpoint's lock.
void ep_owing_slow(endpoint& e, bool on) noexcept;
inline void ep_owing(endpoint& e, bool on) noexcept {
  if (e.owing != on) [[unlikely]]
    ep_owing_slow(e, on);
}
// A transmit operation ended: a CQ entry unless the operation asked for none
// (selective completion without FI_COMPLETION, injects), and its counter.
void tx_done(endpoint& e, void* context, uint64_t cq_flags, uint64_t op_flags, size_t len) noexcept;
// It failed: an error entry (err is a positive FI_E* code) and the counter's
// error. An operation that asked for no completion at all (fi_inject and
// friends: flag_no_cq in op_flags) counts its error only: an error entry
// must carry the context of the operation it ends, and it has none.
// prov_errno 0 is -err; a code from util/peer_note.hpp gives the entry its text.
void tx_fail(endpoint& e, void* context, uint64_t cq_flags, uint64_t op_flags, int err, size_t len,
             int prov_errno = 0) noexcept;
// A receive ended with `n` bytes of a `size`-byte message in it (buf: the
// multi-receive slice), or with err: success, FI_ETRUNC when n < size, or
// the error. src is the sender (FI_SOURCE), FI_ADDR_NOTAVAIL when unknown.
void rx_finish(endpoint& e, const posted_recv& r, uint64_t cq_flags, size_t n, uint64_t size, int err,
               void* buf, uint64_t data, uint64_t tag, fi_addr_t src) noexcept;
// The plain success, kept apart for the small-message path: inline while
// the entry can go straight into a read's array, rx_done_slow otherwise.
void rx_done_slow(endpoint& e, const posted_recv& r, uint64_t cq_flags, size_t len, void* buf, uint64_t data,
                  uint64_t tag, fi_addr_t src) noexcept;
inline void rx_done(endpoint& e, const posted_recv& r, uint64_t cq_flags, size_t len, void* buf, uint64_t data,
                    uint64_t tag, fi_addr_t src) noexcept {
  if (!(r.flags & flag_coll) && !e.cntr_recv && e.rx_cq && (!e.rx_selective || (r.flags & FI_COMPLETION)) &&
      cq_write_direct(e.rx_cq, cq_slot{r.context, cq_flags, len, buf, data, tag, src, 0})) [[likely]]
    return;
  rx_done_slow(e, r, cq_flags, len, buf, data, tag, src);
}
// Remote side of RMA and atomics: the remote counters, and remote CQ data.
void remote_write_done(endpoint& e, bool remote_cq_data, uint64_t len, uint64_t data) noexcept;
void remote_read_done(endpoint& e) noexcept;

// FI_FENCE: true while the operation must wait for earlier ones (the
// caller returns -FI_EAGAIN). `busy` says whether any operation of the
// endpoint is still outstanding; the transport progresses once first.
template <class Busy>
inline bool fence_blocked(endpoint& e, uint64_t flags, Busy&& busy) noexcept {
  if (!(flags & FI_FENCE)) [[likely]]
    return false;
  if (!busy()) return false;
  e.tops->progress(e);
  return busy();
}

// The CQ poller / auto-progress body: the endpoint's lock, then progress.
void endpoint_poller(void* arg) noexcept;
// The pollers' arm function: the endpoint's lock, then ep_transport::arm.
bool endpoint_arm(void* arg) noexcept;
// Adds (removes) a transport fd to the FD wait objects of every CQ and
// counter the endpoint is bound to, so that an application asleep on one
// of them wakes when the fd becomes readable. Wait objects without an fd
// are left alone. Returns how many wait objects took (gave up) the fd.
int ep_watch_fd(endpoint& e, int fd, bool add) noexcept;

// ------------------------------------------------------------------ options
// What an object answers to fi_getopt / fi_setopt at FI_OPT_ENDPOINT
// (docs/design.md, "Endpoint options"): FI_OPT_MIN_MULTI_RECV where
// receives are posted, FI_OPT_CM_DATA_SIZE (read only) where an address
// is, FI_OPT_XPU_TRIGGER -FI_EOPNOTSUPP; every other option, and every
// other level, -FI_ENOPROTOOPT.
struct opt_target {
  size_t* min_multi_recv = nullptr;  // nullptr: no receives are posted here
  bool has_cm_data = false;
  size_t cm_data_size = 0;
};
int opt_get(const opt_target& t, int level, int optname, void* optval, size_t* optlen) noexcept;
int opt_set(const opt_target& t, int level, int optname, const void* optval, size_t optlen) noexcept;

// ------------------------------------------------------------------ endpoints made of endpoints
// A provider made of other providers (the linked provider) gives each part
// endpoint, before enabling it, the bindings of the whole: its CQs and
// counters with their selective-completion flags (references taken, no
// poller: the whole's poller progresses its parts), its receive queues and
// lock (one matcher fed by every part: each unexpected entry names the part
// it arrived on) and `part_av`, the part's mirror of the whole's AV (same
// indices, so a part's FI_SOURCE is the whole's fi_addr_t). Throws.
void endpoint_share(endpoint& part, endpoint& whole, av* part_av);
// A send from `e` keeps finding nobody at `dest` (how: how the sends end):
// the warning of util/absent_peers.hpp, once, naming the address as the
// application knows it. A transport's own endpoint names it itself
// (`prov`, `addr()`, `more` as absent_peers::note); a part names the
// whole's AV entry for `dest`, under the whole's provider.
template <class AddrFn>
void note_absent(endpoint& e, const char* prov, fi_addr_t dest, AddrFn&& addr, const char* how,
                 std::string (*more)(std::string_view) = nullptr) noexcept;
[[gnu::cold]] void note_absent_in_whole(endpoint& part, fi_addr_t dest, const char* how) noexcept;
template <class AddrFn>
void note_absent(endpoint& e, const char* prov, fi_addr_t dest, AddrFn&& addr, const char* how,
                 std::string (*more)(std::string_view)) noexcept {
  if (e.whole) [[unlikely]]
    return note_absent_in_whole(e, dest, how);
  e.absent.note(prov, addr, how, more);
}

// Drops the unexpected messages that arrived on `e` from the queues it
// shares (it is closing: its transport can no longer deliver them).
void ux_drop_owned(endpoint& e) noexcept;

// ------------------------------------------------------------------ scalable endpoints, shared contexts
// A scalable endpoint: an address with several transmit and receive
// contexts behind it. The transport makes the contexts.
struct sep_transport {
  // Makes context `index` (transmit or receive) from `info`; the core
  // records it and fills parent/ctx_index/av. Throws.
  endpoint* (*make_context)(sep& s, bool transmit, int index, const fi_info* info, void* context);
  fi_ops_cm* cm;                         // getname/setname of the scalable endpoint
  void (*destroy)(void* prov) noexcept;  // frees sep::prov at close
};
struct sep {
  fid_ep fid_;  // first; fclass FI_CLASS_SEP
  const sep_transport* tops = nullptr;
  domain* dom = nullptr;
  fi_info* info = nullptr;
  weft::av* av = nullptr;
  fid_eq* eq = nullptr;
  std::vector<endpoint*> tx, rx;  // open contexts by index
  // With one transmit (receive) context, operations may be posted to the
  // scalable endpoint itself: binding a CQ or counter to it opens that
  // context for the application (closed with the scalable endpoint).
  endpoint* implicit_tx = nullptr;
  endpoint* implicit_rx = nullptr;
  bool enabled = false;
  size_t min_multi_recv = 64;  // FI_OPT_MIN_MULTI_RECV of its receive contexts
  std::mutex ctl;
  void* prov = nullptr;  // the transport's state (its name, say)
  static sep* of(fid* f) noexcept { return from_fid<sep>(f); }
  bool has_contexts() const noexcept;           // any, implicit ones too
  bool has_opened_contexts() const noexcept;    // ones the application opened
};
// fi_scalable_ep for a transport; the counts come from info->ep_attr.
// inject_max bounds a transmit context's inject_size. Returns 0 or -FI_E*.
int scalable_ep_open(domain& dom, fi_info* info, fid_ep** out, void* context, const sep_transport* tops,
                     void* prov, size_t inject_max);
void sep_context_closed(endpoint& e) noexcept;  // a context leaves its scalable endpoint

struct stx {
  fid_stx fid_;  // first
  domain* dom = nullptr;
  users users_;
};
int stx_open(domain& dom, fi_tx_attr* attr, fid_stx** out, void* context, size_t inject_max);

// A shared receive context: an endpoint object with no transport of its
// own. Receives posted to it land in queues every bound endpoint matches
// arriving messages against; completions go to the endpoint a message
// arrived on.
int srx_open(domain& dom, fi_rx_attr* attr, fid_ep** out, void* context);
// A bind of an endpoint to a shared context (FI_CLASS_STX_CTX / FI_CLASS_SRX_CTX).
int bind_shared(endpoint& e, fid* bfid, uint64_t flags);

// An ops-table entry that is not available on this kind of object.
template <class F>
struct nosys;
template <class R, class... A>
struct nosys<R (*)(A...)> {
  static R fn(A...) noexcept { return static_cast<R>(-FI_ENOSYS); }
};
#define WEFT_NOSYS(table, member) ::weft::nosys<decltype(table::member)>::fn

extern fi_ops_rma rma_ops_none;
extern fi_ops_atomic atomic_ops_none;
extern fi_ops_msg msg_ops_none;
extern fi_ops_tagged tagged_ops_none;
extern fi_ops_cm cm_ops_none;

}  // namespace weft
