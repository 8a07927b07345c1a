// SPDX-License-Identifier: BSD-3-Clause
// prov/shm: progress — draining our receive queue (one handler per opcode),
// pushing what waits to go out, requests, and noticing peers that died.
#include <sched.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <bit>
#include <cstring>

#include "core/log.hpp"
#include "prov/shm/shm.hpp"
#include "util/rx.hpp"

namespace weft::shm {

// ------------------------------------------------------------------ requests
request* new_request(ep& e, peer* to, req_kind kind, void* context, uint64_t cq_flags, uint64_t op_flags,
                     size_t len) noexcept {
  request* r = e.requests.alloc();
  if (!r) return nullptr;
  r->kind = kind;
  r->context = context;
  r->flags = cq_flags;
  r->op_flags = op_flags;
  r->len = len;
  r->to = to;
  r->peer_pid = to->pid;
  return r;
}

void finish_request(ep& e, request* r) noexcept {
  if (r->tmpl.opcode != op::nop) e.outgoing.remove(r);  // a fragment stream
  e.requests.release(r);
}

[[gnu::noinline]] uint32_t arm_split(ep& e, uint32_t* gen) noexcept {
  uint32_t s = static_cast<uint32_t>(std::countr_one(e.split_busy));
  uint32_t g = (++e.split_gen[s]) & 0x1fffffff;
  if (!g) g = e.split_gen[s] = 1;
  e.me.splits()[s].word.store(split_word(g, split_armed), std::memory_order_release);
  e.split_busy |= uint64_t{1} << s;
  *gen = g;
  return s;
}

void push_outgoing(ep& e) noexcept {
  // Responses first, in order.
  while (!e.backlog.empty()) {
    auto& pc = e.backlog.front();
    cell* c = queue_claim(pc.to->view());
    if (!c) break;
    post_cell(*pc.to, c, pc.h, pc.payload.data(), pc.payload.size());
    e.backlog.pop_front();
  }
  ep_owing(e, !e.backlog.empty());
  // Fragment streams of large messages / writes without CMA.
  for (auto it = e.outgoing.begin(); it != e.outgoing.end();) {
    request* r = *it;
    peer* p = r->to;
    bool full = false;
    while (r->sent < r->len) {
      cell* c = queue_claim(p->view());
      if (!c) {
        full = true;
        break;
      }
      size_t n = std::min(r->len - r->sent, inject_max);
      c->h.opcode = r->tmpl.opcode;
      c->h.atomic_op = 0;
      c->h.datatype = 0;
      c->h.src = static_cast<uint16_t>(p->slot);
      c->h.offset = r->sent;
      c->h.data = r->tmpl.data;
      c->h.size = r->len;
      c->h.id = r->id;
      c->h.flags = static_cast<uint16_t>(r->tmpl.flags & ~flag_first);
      size_t off = 0;
      if (r->tmpl.opcode == op::write) {
        rma_desc d = r->rma;
        memcpy(c->payload, &d, sizeof d);
        off = sizeof d;
        n = std::min(n, inject_max - sizeof d);
      }
      c->h.len = static_cast<uint32_t>(n + off);
      iov_copy_from(r->iov, r->iov_count, r->sent, c->payload + off, n);
      r->sent += n;
      if (r->sent >= r->len) c->h.flags |= flag_last;
      queue_commit(p->view(), c);
    }
    if (full) break;  // keep order: later streams wait for this one
    it = e.outgoing.erase(it);
  }
}

namespace {

void handle_ack(ep& e, cell* c) noexcept {
  request* r = e.requests.find(c->h.id);
  if (!r || (r->kind != req_kind::send && r->kind != req_kind::write)) return;
  const int err = static_cast<int>(c->h.data);
  if (err)
    tx_fail(e, r->context, r->flags, r->op_flags, err, 0);
  else if (r->needs_completion)
    tx_done(e, r->context, r->flags, r->op_flags, r->len);
  finish_request(e, r);
}

void ignore(ep&, cell*) noexcept {}

// What each opcode does once its cell passed cell_sane (messages, which may
// be held back, go through handle_message instead).
using handler = void (*)(ep&, cell*) noexcept;
constexpr handler handlers[static_cast<size_t>(op::max_op)] = {
    ignore,              // nop
    ignore,              // msg (handle_message)
    ignore,              // rndv (handle_message)
    handle_fragment,     // frag after the first
    handle_ack,          // ack
    handle_write,        // write
    handle_read_req,     // read_req
    handle_read_resp,    // read_resp
    handle_notify,       // notify
    handle_atomic,       // atomic
    handle_atomic_resp,  // atomic_resp
    handle_cts,          // cts
    handle_write_help,   // write_help
};

inline bool is_message(const cell_hdr& h) noexcept {
  return h.opcode == op::msg || h.opcode == op::rndv || (h.opcode == op::frag && (h.flags & flag_first));
}

// Every length and count in a cell came from another process: check them
// before anything indexes memory with them (a hostile or broken peer gets
// its cell dropped, never an out-of-bounds access).
[[gnu::cold, gnu::noinline]] bool cell_sane_slow(const cell_hdr& h) noexcept {
  switch (h.opcode) {
    case op::msg:
      return (h.flags & flag_inline) ? h.size <= inline_max : (h.len == h.size && h.size <= inject_max);
    case op::rndv:
      return h.len >= sizeof(rndv_desc);  // iov_count is clamped where it is read
    case op::frag:
      return h.len <= inject_max;
    case op::cts:
      return h.len == sizeof(cts_desc);
    case op::write_help:
      return h.len == sizeof(help_desc);
    case op::write:
    case op::read_req:
    case op::notify:
    case op::atomic:
      return h.len >= sizeof(rma_desc) && h.len <= inject_max;
    case op::read_resp:
    case op::atomic_resp:
      return h.len <= inject_max;
    case op::ack:
    case op::nop:
      return true;
    default:
      return false;
  }
}

inline bool cell_sane(ep& e, const cell_hdr& h) noexcept {
  // A slot past our peer table (as far as we knew it: senders grow it).
  if (h.src >= e.peer_cap && !peer_slot_known(e, h.src)) [[unlikely]]
    return false;
  if ((h.flags & flag_inline) && h.opcode == op::msg) [[likely]]
    return h.size <= inline_max;
  return cell_sane_slow(h);
}

// The common case on the hot path: a message of one cell that wants no
// acknowledgement (inline in the header, or in the payload lines after
// it), matched by the first posted receive of one plain buffer. Returns
// false when the general path must handle it.
static_assert(offsetof(cell, h) + offsetof(cell_hdr, inl) + inject_max <= sizeof(cell) &&
              offsetof(cell, payload) + inject_max <= sizeof(cell));
[[gnu::always_inline]] inline bool fast_small(ep& e, cell* c, bool inl) noexcept {
  const cell_hdr& h = c->h;
  if (!inl && (h.flags & (flag_want_ack | flag_ack_arrival))) return false;
  const bool tagged = h.flags & flag_tagged;
  auto& list = posted_list(e, tagged);
  if (list.empty()) return false;
  auto it = list.begin();
  posted_recv& r = *it;
  // One read of the size, checked here against what the copy may touch:
  // the cell stays in the sender's reach, and a sender that rewrote it
  // after cell_sane looked must not make the copy run past the buffer or
  // the cell (inject_max bytes from the header's inline bytes or from the
  // payload stay inside it; an inline size past inline_max then delivers
  // the cell's bytes, a broken sender's own message, and nothing else).
  const uint64_t size = __atomic_load_n(&h.size, __ATOMIC_RELAXED);
  if (r.iov_count != 1 || (r.flags & FI_MULTI_RECV) || r.total < size || size > inject_max) return false;
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  if (e.caps & (FI_SOURCE | directed_caps)) src = src_addr_of(e, h.src);  // cached per sender slot
  if (!recv_matches(e, r, tagged, h.tag, src)) return false;
  if (!(e.caps & FI_SOURCE)) src = FI_ADDR_NOTAVAIL;
  if (inl)
    copy_small(r.iov[0].iov_base, h.inl, size);
  else
    memcpy(r.iov[0].iov_base, c->payload, size);
  uint64_t flags = FI_RECV | (tagged ? FI_TAGGED : FI_MSG);
  uint64_t data = 0;
  if (h.flags & flag_remote_cq_data) {
    flags |= FI_REMOTE_CQ_DATA;
    data = h.data;
  }
  rx_done(e, r, flags, size, nullptr, data, h.tag, src);
  recv_drop(e, list, it);
  return true;
}

// Peers that died: their requests fail, their half-sent messages go.
void check_liveness(ep& e) noexcept {
  uint64_t now = now_ms();
  if (now - e.last_liveness_check < 100) return;
  e.last_liveness_check = now;
  e.claim.drain();
  queue_stalled(e.me);
  e.requests.for_each([&e](request& r) {
    if (r.peer_pid && !pid_alive(r.peer_pid)) {
      tx_fail(e, r.context, r.flags, r.op_flags, FI_EIO, 0);
      finish_request(e, &r);
    }
  });
  for (auto& kv : e.by_name)
    if (!pid_alive(kv.second->pid)) kv.second->dead = true;
  // What we owed peers that died goes: nobody takes it, and it holds our
  // completions back (ep_owing).
  if (!e.backlog.empty()) [[unlikely]] {
    e.backlog.remove_if(
        [](const ep::pending_cell& pc) { return pc.to->dead || (pc.to->pid > 0 && !pid_alive(pc.to->pid)); });
    ep_owing(e, !e.backlog.empty());
  }
  // Receives being filled by a sender that died.
  for (auto it = e.assemblies.begin(); it != e.assemblies.end();) {
    peer_slot& s = e.me.peers()[it->src_slot];  // a slot cell_sane let in
    if (!pid_alive(s.pid.load(std::memory_order_relaxed))) {
      if (!it->ux)
        rx_finish(e, it->recv, recv_cq_flags(it->flags & flag_tagged, it->flags & flag_remote_cq_data), 0, 0,
                  FI_EIO, nullptr, it->data, it->tag, it->src);
      it = e.assemblies.erase(it);
    } else {
      ++it;
    }
  }
}

// The most payload lines progress asks for ahead (see ep::payload_hint).
constexpr uint32_t payload_hint_max = 8;

// The end of a progress call that took nothing: ask for the payload lines
// of the cell we wait on, count the idle call, and now and then check on
// peers.
[[gnu::always_inline]] inline void idle_call(ep& e) noexcept {
  // As many payload lines as the last message had, so that the next one's
  // lines cross beside its header instead of after it (L1 hits while the
  // sender has not written them).
  if (e.payload_hint) {
    const unsigned char* p = queue_next_payload(e.me);
    for (uint32_t i = 0; i < e.payload_hint; ++i) __builtin_prefetch(p + i * cacheline);
  }
  // After idle_yield_polls such calls in a row, let a peer that shares our
  // CPU run (its reply is what we wait for).
  if (++e.idle_polls >= idle_yield_polls) [[unlikely]] {
    e.idle_polls = 0;
    sched_yield();
  }
}

// Periodic checks (peers that died, cells abandoned by dead producers):
// every 64th call while something waits on a peer, every 256th otherwise,
// so the polling path stays a few loads and reads no clock.
[[gnu::always_inline]] inline void pace_checks(ep& e) noexcept {
  if ((++e.polls & 63) != 0) [[likely]]
    return;
  if ((e.polls & 255) == 0 || !e.requests.empty() || !e.assemblies.empty()) check_liveness(e);
}

// Takes the cells from c, the head of the queue, on.
[[gnu::noinline]] void take_cells(ep& e, cell* c) noexcept {
  try {
    // A call that follows empty ones (the caller waits for something)
    // returns after the first cell it takes: looking at the next cell would
    // wait for a line the sender holds (it prefetches its next cell), one
    // more crossing between the cores before the caller sees what it waited
    // for. The next call, no longer after an empty one, takes cells in
    // batches again (a burst keeps its batching). A small message taken so
    // returns at once: the bookkeeping below (splits, idle count, pacing)
    // waits for the next call, off the path of the reply the caller sends.
    const bool waited = e.idle_polls != 0;
    e.took = true;
    for (int n = 0; c && n < 64; ++n, c = waited ? nullptr : queue_peek(e.me, e.unreleased)) {
      // A cell that ended an exchange's lap moves us to the next lap's
      // first cell (queue_step), whatever it holds.
      if (!cell_sane(e, c->h)) [[unlikely]] {
        WEFT_WARN(FI_LOG_EP_DATA, "shm: dropped a malformed cell (op %d) from slot %u",
                  static_cast<int>(c->h.opcode), static_cast<unsigned>(c->h.src));
        e.unreleased += queue_step(e.me, c);
        continue;
      }
      // A payload's lines (up to payload_hint_max) are fetched while the
      // header is matched (their crossing overlaps that work, not after it).
      const bool inl = c->h.flags & flag_inline;
      if (inl) [[likely]] {
        if (e.payload_hint) [[unlikely]]
          e.payload_hint = 0;
      } else {
        const uint32_t lines = (c->h.len + cacheline - 1) / cacheline;
        const uint32_t ask = lines < payload_hint_max ? lines : payload_hint_max;
        for (uint32_t i = 0; i < ask; ++i) __builtin_prefetch(c->payload + i * cacheline);
        e.payload_hint = static_cast<uint8_t>(lines <= payload_hint_max ? lines : 0);
      }
      if (c->h.opcode == op::msg && fast_small(e, c, inl)) [[likely]] {
        e.unreleased += queue_step(e.me, c);
        if (waited) {
          e.idle_polls = 0;
          return;
        }
        continue;
      }
      if (is_message(c->h)) {
        if (handle_message(e, c) == arrival::held_back) return;  // unexpected queue full: stays queued
      } else {
        handlers[static_cast<size_t>(c->h.opcode)](e, c);
      }
      e.unreleased += queue_step(e.me, c);
    }
    if (!e.splits.empty()) [[unlikely]]
      poll_splits(e);
  } catch (...) {
    WEFT_WARN(FI_LOG_EP_DATA, "shm: progress ran out of memory");
  }
  e.idle_polls = 0;
  pace_checks(e);
}

// A progress call with more to do than look at the queue: a sleep to end,
// cells for full peer queues to push, receives copied in parts to finish.
[[gnu::noinline]] void progress_busy(ep& e) noexcept {
  if (e.armed) unarm(e);
  if (!e.backlog.empty() || !e.outgoing.empty()) push_outgoing(e);
  if (cell* c = queue_peek(e.me)) return take_cells(e, c);
  if (!e.splits.empty()) poll_splits(e);
  idle_call(e);
  pace_checks(e);
}

}  // namespace

// The polling path: a caller that waits calls this over and over and it
// finds the queue empty, so that case is a few loads and no stack frame;
// the rest is out of line.
void progress(ep& e) noexcept {
  if (!e.enabled || !e.me.base) [[unlikely]]
    return;
  if (e.unreleased) {
    queue_release_n(e.me, e.unreleased);
    e.unreleased = 0;
  }
  if (e.armed || !e.backlog.empty() || !e.outgoing.empty() || !e.splits.empty()) [[unlikely]]
    return progress_busy(e);
  if (cell* c = queue_peek(e.me)) return take_cells(e, c);
  idle_call(e);
  pace_checks(e);
}

// ------------------------------------------------------------------ sleeping
// The owner sets `sleeping` and then looks at the tail; a sender claims a
// cell (moving the tail) and then looks at `sleeping`. All four are seq_cst,
// so at least one of them sees the other: either arm() finds the claimed
// cell (and says busy) or the sender finds the owner asleep and rings.
bool arm(ep& e) noexcept {
  if (!e.enabled || !e.me.base || e.bell < 0) return true;  // no fd: waits poll in slices
  if (e.unreleased) {
    queue_release_n(e.me, e.unreleased);
    e.unreleased = 0;
  }
  // Our own work: cells for a full peer queue, copies shared with a peer.
  if (!e.backlog.empty() || !e.outgoing.empty() || !e.splits.empty()) return false;
  check_liveness(e);  // paced by the clock: a sleeper woken by the timer looks here
  queue_ctl* q = e.me.ctl();
  q->sleeping.store(asleep, std::memory_order_seq_cst);
  e.armed = true;
  if (q->tail.load(std::memory_order_seq_cst) != q->head.load(std::memory_order_relaxed)) return false;
  // Waiting on peers (a reply, the rest of a message): a peer that dies
  // rings nobody, so the timer wakes the sleeper to look.
  if (e.timer >= 0 && (!e.requests.empty() || !e.assemblies.empty())) {
    itimerspec t{};
    t.it_value.tv_nsec = 100 * 1000 * 1000;
    timerfd_settime(e.timer, 0, &t, nullptr);
  }
  return true;
}

void unarm(ep& e) noexcept {
  e.armed = false;
  e.me.ctl()->sleeping.store(awake, std::memory_order_relaxed);
  bell_drain(e.bell);
  if (e.timer >= 0) {
    itimerspec off{};
    timerfd_settime(e.timer, 0, &off, nullptr);
    uint64_t n;
    (void)!read(e.timer, &n, sizeof n);
  }
}

}  // namespace weft::shm
