// SPDX-License-Identifier: BSD-3-Clause
// prov/shm: sending messages and tagged messages. util/ep_ops.hpp's entry
// points check the arguments and call send / inject_small; a send picks one
// protocol by size and peer, each a short function below:
//
//   inline   <= 16 B, no ack wanted      the message rides in the cell header's line
//   eager    <= 4 KiB                    one cell (acked for FI_DELIVERY_COMPLETE when a
//                                        receive took it, for FI_TRANSMIT_COMPLETE when the
//                                        receiver took the cell)
//   frag     <= 256 KiB (a collective's: 1 MiB), or without CMA
//                                        a stream of cells the receiver empties as we fill them
//   rndv     larger, with CMA            a descriptor; the receiver pulls (split with us)
//
// Return values: 0 when the operation was taken (its outcome, good or bad,
// comes as a completion), -FI_EAGAIN when nothing was done and the caller
// may retry, another -FI_E* when nothing was done and retrying cannot help.
#include <cstring>

#include "prov/shm/shm.hpp"
#include "prov/shm/shm_part.hpp"
#include "util/coll.hpp"
#include "util/ep_ops.hpp"

namespace weft::shm {

namespace {

enum class proto : uint8_t { inline_msg, eager, frag, rndv };

inline proto select(size_t len, uint32_t ack, const peer& p, uint64_t flags) noexcept {
  if (len <= inject_max) [[likely]]
    return (len <= inline_max && !ack) ? proto::inline_msg : proto::eager;
  return (p.cma && len > ((flags & flag_coll) ? coll_eager_max : eager_max)) ? proto::rndv : proto::frag;
}

// What every protocol puts in the header of its first cell.
struct msg_head {
  uint64_t tag;
  uint64_t data;
  uint64_t cq_flags;
  uint32_t cflags;  // flag_tagged, flag_remote_cq_data
};

// An inline send's claim and commit. `answer` (ep::took when the send
// began) says it follows a message taken: it does not prefetch its next
// cell, and after another answer it claims in short laps (ep::exchanging).
inline cell* claim_inline(ep& e, peer& p, bool answer) noexcept {
  const bool exchange = answer && e.exchanging;
  // An exchange's reply asks for the line of the cell it is about to claim
  // before the claim's CAS. The CAS, a locked instruction, runs only once
  // everything before it has retired, and the cell's address comes from
  // it: without this the line (which the peer polls) is asked for only
  // then, and its crossing comes on top (docs/shm-protocol.md, "The claim's
  // CAS and the reply's line"). When another producer takes that cell
  // first, the line was asked for in vain; nothing else changes.
  if (has_prefetchw && exchange) {
    region_view to = p.view();
    prefetchw_cell(to, to.ctl()->tail.load(std::memory_order_relaxed));
  }
  return claim_to(e, p, exchange);
}
inline void commit_inline(ep& e, peer& p, cell* c, bool answer) noexcept {
  queue_commit(p.view(), c, !answer);
  e.took = false;
  e.exchanging = answer;
}

inline ssize_t send_inline(ep& e, peer& p, const iovec* iov, size_t count, size_t len, const msg_head& m,
                           void* context, uint64_t flags) noexcept {
  const bool answer = e.took;
  cell* c = claim_inline(e, p, answer);
  if (!c) [[unlikely]]
    return -FI_EAGAIN;
  c->h.opcode = op::msg;
  c->h.tag = m.tag;
  c->h.data = m.data;
  c->h.size = len;
  if (count == 1)
    copy_small(c->h.inl, iov[0].iov_base, len);
  else
    iov_copy_from(iov, count, 0, c->h.inl, len);
  c->h.flags = static_cast<uint16_t>(m.cflags | flag_inline);
  commit_inline(e, p, c, answer);
  tx_done(e, context, m.cq_flags, flags, len);
  return 0;
}

// `ack`: 0, flag_want_ack or flag_ack_arrival (the send completes with the receiver's ack).
ssize_t send_eager(ep& e, peer& p, const iovec* iov, size_t count, size_t len, const msg_head& m,
                   void* context, uint64_t flags, uint32_t ack) noexcept {
  cell* c = claim_to(e, p);
  if (!c) [[unlikely]]
    return -FI_EAGAIN;
  request* r = nullptr;
  if (ack && !(r = new_request(e, &p, req_kind::send, context, m.cq_flags, flags, len))) {
    abandon_cell(p, c);
    return -FI_ENOMEM;
  }
  c->h.opcode = op::msg;
  c->h.tag = m.tag;
  c->h.data = m.data;
  c->h.size = len;
  c->h.len = static_cast<uint32_t>(len);
  c->h.id = r ? r->id : 0;
  if (count == 1) {
    if (len) memcpy(c->payload, iov[0].iov_base, len);
  } else {
    iov_copy_from(iov, count, 0, c->payload, len);
  }
  c->h.flags = static_cast<uint16_t>(m.cflags | ack);
  queue_commit(p.view(), c);
  if (!ack) tx_done(e, context, m.cq_flags, flags, len);
  return 0;
}

// The first fragment goes now; push_outgoing streams the rest as the
// receiver frees cells. The request completes with the receiver's ack.
ssize_t send_frag(ep& e, peer& p, const iovec* iov, size_t count, size_t len, const msg_head& m,
                  void* context, uint64_t flags) noexcept {
  cell* c = claim_to(e, p);
  if (!c) return -FI_EAGAIN;
  request* r = new_request(e, &p, req_kind::send, context, m.cq_flags, flags, len);
  if (!r) {
    abandon_cell(p, c);
    return -FI_ENOMEM;
  }
  try {
    e.outgoing.push_back(r);
  } catch (...) {
    finish_request(e, r);
    abandon_cell(p, c);
    return -FI_ENOMEM;
  }
  for (size_t i = 0; i < count; ++i) r->iov[i] = iov[i];
  r->iov_count = count;
  r->sent = inject_max;
  r->tmpl.opcode = op::frag;
  r->tmpl.flags = m.cflags | flag_want_ack;
  r->tmpl.data = m.data;
  c->h.opcode = op::frag;
  c->h.tag = m.tag;
  c->h.data = m.data;
  c->h.size = len;
  c->h.id = r->id;
  c->h.flags = static_cast<uint16_t>(m.cflags | flag_want_ack | flag_first);
  iov_copy_from(iov, count, 0, c->payload, inject_max);
  c->h.len = static_cast<uint32_t>(inject_max);
  queue_commit(p.view(), c);
  push_outgoing(e);
  return 0;
}

// A descriptor of our buffers: the receiver pulls the data with CMA once a
// receive matched (asking us to push half of it, op::cts), then acks.
ssize_t send_rndv(ep& e, peer& p, const iovec* iov, size_t count, size_t len, const msg_head& m,
                  void* context, uint64_t flags) noexcept {
  cell* c = claim_to(e, p);
  if (!c) return -FI_EAGAIN;
  request* r = new_request(e, &p, req_kind::send, context, m.cq_flags, flags, len);
  if (!r) {
    abandon_cell(p, c);
    return -FI_ENOMEM;
  }
  rndv_desc d{};
  d.pid = self_pid();
  d.iov_count = static_cast<uint32_t>(count);
  for (size_t i = 0; i < count; ++i) {
    d.iov[i].base = reinterpret_cast<uint64_t>(iov[i].iov_base);
    d.iov[i].len = iov[i].iov_len;
    r->iov[i] = iov[i];  // for a split copy (op::cts)
  }
  r->iov_count = count;
  c->h.opcode = op::rndv;
  c->h.tag = m.tag;
  c->h.data = m.data;
  c->h.size = len;
  c->h.id = r->id;
  memcpy(c->payload, &d, sizeof d);
  c->h.len = sizeof d;
  c->h.flags = static_cast<uint16_t>(m.cflags | flag_want_ack);
  queue_commit(p.view(), c);
  return 0;
}

template <bool Tagged>
ssize_t send(ep& e, const iovec* iov, size_t count, fi_addr_t dest, uint64_t tag, uint64_t data,
             void* context, uint64_t flags) noexcept {
  const size_t len = iov_total(iov, count);
  const msg_head m{tag, data, FI_SEND | (Tagged ? FI_TAGGED : FI_MSG),
                   (Tagged ? flag_tagged : 0u) | ((flags & FI_REMOTE_CQ_DATA) ? flag_remote_cq_data : 0u)};
  ep_guard g(e);
  if (fence_blocked(e, flags, [&e] { return ops_outstanding(e); })) [[unlikely]]
    return -FI_EAGAIN;
  peer_ref to = peer_of(e, dest);
  if (!to.p) [[unlikely]]
    return unreachable(e, dest, to.why, context, m.cq_flags, flags);
  // Delivery complete waits for the receive that takes the message,
  // transmit complete for the receiver taking the cell (a fragmented or
  // rendezvous message is acked once a receive has all of it), with
  // FI_INJECT too (the payload is copied into the cell either way).
  const uint32_t ack = (flags & FI_DELIVERY_COMPLETE)   ? flag_want_ack
                       : (flags & FI_TRANSMIT_COMPLETE) ? flag_ack_arrival
                                                         : 0;
  switch (select(len, ack, *to.p, flags)) {
    case proto::inline_msg:
      return send_inline(e, *to.p, iov, count, len, m, context, flags);
    case proto::eager:
      return send_eager(e, *to.p, iov, count, len, m, context, flags, ack);
    case proto::frag:
      return send_frag(e, *to.p, iov, count, len, m, context, flags);
    case proto::rndv:
      return send_rndv(e, *to.p, iov, count, len, m, context, flags);
  }
  return -FI_EINVAL;
}

// An inject of 17 B to one cell: the bytes in the payload lines after the
// header. Up to 64 B (the payload line in the header's 128-byte pair) it
// is claimed and committed as an inline send (an answer claims in short
// laps and leaves the next cell alone); larger ones as a stream's (the
// next cell's line asked for): in short laps, a 1 KiB ping-pong measured
// 1.09x the general path, as a stream's 0.77 (docs/shm-protocol.md,
// "Injects of one cell").
template <bool Tagged>
[[gnu::always_inline]] inline ssize_t inject_cell(ep& e, peer& p, const void* buf, size_t len,
                                                  uint64_t tag) noexcept {
  const bool stream = len > cacheline;
  const bool answer = e.took;
  cell* c = stream ? claim_to(e, p) : claim_inline(e, p, answer);
  if (!c) [[unlikely]]
    return -FI_EAGAIN;
  c->h.opcode = op::msg;
  c->h.tag = tag;
  c->h.data = 0;
  c->h.size = len;
  c->h.len = static_cast<uint32_t>(len);
  c->h.id = 0;
  memcpy(c->payload, buf, len);
  c->h.flags = static_cast<uint16_t>(Tagged ? flag_tagged : 0);
  if (stream)
    queue_commit(p.view(), c);
  else
    commit_inline(e, p, c, answer);
  return 0;
}

// fi_inject / fi_tinject of up to one cell: nothing completes, so this is
// the whole send: find the peer, claim a cell, fill it, publish it (a
// fifth of the cost of a small message through the general path). Up to
// inline_max bytes the message rides in the cell header's own line, one
// cache line; larger ones go to inject_cell.
template <bool Tagged>
[[gnu::always_inline]] inline ssize_t inject_small(ep& e, const void* buf, size_t len, fi_addr_t dest,
                                                   uint64_t tag) noexcept {
  constexpr uint64_t cq_flags = FI_SEND | (Tagged ? FI_TAGGED : FI_MSG);
  ep_guard g(e);
  peer_ref to = peer_of(e, dest);
  if (!to.p) [[unlikely]]
    return unreachable(e, dest, to.why, nullptr, cq_flags, FI_INJECT | flag_no_cq);
  peer& p = *to.p;
  if (len > inline_max) {
    const ssize_t ret = inject_cell<Tagged>(e, p, buf, len, tag);
    if (!ret && e.cntr_send) [[unlikely]]
      tx_done(e, nullptr, cq_flags, FI_INJECT | flag_no_cq, len);
    return ret;
  }
  const bool answer = e.took;
  cell* c = claim_inline(e, p, answer);
  if (!c) [[unlikely]]
    return -FI_EAGAIN;
  c->h.opcode = op::msg;
  c->h.tag = tag;
  c->h.data = 0;
  c->h.size = len;
  copy_small(c->h.inl, buf, len);
  c->h.flags = static_cast<uint16_t>((Tagged ? flag_tagged : 0) | flag_inline);
  commit_inline(e, p, c, answer);
  if (e.cntr_send) [[unlikely]]
    tx_done(e, nullptr, cq_flags, FI_INJECT | flag_no_cq, len);  // counts; an inject never writes the CQ
  return 0;
}

// The transport as util/ep_ops.hpp sees it. Its tables live here, with send
// and inject_small, so that the entry points inline them: this must stay the
// only file that names ops<shm_transport>.
struct shm_transport {
  using ep = shm::ep;
  static constexpr size_t iov_max = shm::iov_max;
  static constexpr size_t inline_max = shm::inject_max;  // every inject: inject_small
  template <bool Tagged>
  static ssize_t send(ep& e, const iovec* iov, size_t count, fi_addr_t dest, uint64_t tag, uint64_t data,
                      void* ctx, uint64_t flags) noexcept {
    return shm::send<Tagged>(e, iov, count, dest, tag, data, ctx, flags);
  }
  template <bool Tagged>
  static ssize_t inject_small(ep& e, const void* buf, size_t len, fi_addr_t dest, uint64_t tag) noexcept {
    return shm::inject_small<Tagged>(e, buf, len, dest, tag);
  }
  static ssize_t rma(ep& e, bool write, const iovec* iov, void* const* desc, size_t count, fi_addr_t addr,
                     const fi_rma_iov* riov, size_t rcount, uint64_t data, void* ctx,
                     uint64_t flags) noexcept {
    return shm::rma(e, write, iov, desc, count, addr, riov, rcount, data, ctx, flags);
  }
  static size_t atomic_max_count(atomic_form form, fi_datatype dt) noexcept {
    return shm::atomic_max_count(form, dt);
  }
  static ssize_t atomic(ep& e, const atomic_call& call) noexcept { return shm::atomic(e, call); }
};

// FI_EP_DGRAM endpoints: what fits one cell (injects always do), messages
// only (their RMA and atomic tables stay endpoint_init's "none").
struct shm_dgram_transport : shm_transport {
  template <bool Tagged>
  static ssize_t send(ep& e, const iovec* iov, size_t count, fi_addr_t dest, uint64_t tag, uint64_t data,
                      void* ctx, uint64_t flags) noexcept {
    if (iov_total(iov, count) > dgram_max) [[unlikely]]
      return -FI_EMSGSIZE;
    return shm::send<Tagged>(e, iov, count, dest, tag, data, ctx, flags);
  }
};
static_assert(shm_transport::inline_max <= dgram_max);
}  // namespace

void install_ops(endpoint& e, ep_role role) noexcept {
  if (ep::of(e).dgram) {
    e.fid_.msg = &ops<shm_dgram_transport>::msg;
    e.fid_.tagged = &ops<shm_dgram_transport>::tagged;
    return;
  }
  ops<shm_transport>::install(e, role);
}

}  // namespace weft::shm

namespace weft {

// As a part of a linked endpoint (shm_part.hpp): the sends of this file.
template <>
template <bool Tagged>
ssize_t part<shm::part_tag>::send(endpoint& e, const iovec* iov, size_t count, fi_addr_t dest, uint64_t tag,
                                 uint64_t data, void* ctx, uint64_t flags) noexcept {
  return shm::send<Tagged>(shm::ep::of(e), iov, count, dest, tag, data, ctx, flags);
}
template <>
template <bool Tagged>
ssize_t part<shm::part_tag>::inject(endpoint& e, const void* buf, size_t len, fi_addr_t dest, uint64_t tag) noexcept {
  return shm::inject_small<Tagged>(shm::ep::of(e), buf, len, dest, tag);
}
template ssize_t part<shm::part_tag>::send<false>(endpoint&, const iovec*, size_t, fi_addr_t, uint64_t, uint64_t, void*,
                                                 uint64_t) noexcept;
template ssize_t part<shm::part_tag>::send<true>(endpoint&, const iovec*, size_t, fi_addr_t, uint64_t, uint64_t, void*,
                                                uint64_t) noexcept;
template ssize_t part<shm::part_tag>::inject<false>(endpoint&, const void*, size_t, fi_addr_t, uint64_t) noexcept;
template ssize_t part<shm::part_tag>::inject<true>(endpoint&, const void*, size_t, fi_addr_t, uint64_t) noexcept;
static_assert(shm::part_inject_max == shm::inject_max);

}  // namespace weft
