// SPDX-License-Identifier: BSD-3-Clause
// prov/tcp: messages and tagged messages. Sends go eager (the payload
// behind the header, from the user's buffers) while the receiver's credit
// lasts and the message fits 64 KiB, else by rendezvous: an announcement, the
// receiver's clear-to-send once a receive matched, then the data. Arriving
// messages are matched through util's matcher and land straight in the
// posted buffer; a message nobody waits for is buffered (its credit returns
// when the application takes it) or, announced, waits for its receive.
//
// Return values as shm's: 0 when the operation was taken (its outcome comes
// as a completion), -FI_EAGAIN when nothing happened and a retry may work,
// another -FI_E* when nothing happened and a retry cannot help.
#include <unistd.h>
#include <cstdio>
#include <cstring>

#include "prov/tcp/tcp.hpp"
#include "prov/tcp/tcp_part.hpp"
#include "util/ep_ops.hpp"
#include "util/rx.hpp"

namespace weft::tcp {

namespace {

// unexpected::kind for tcp's entries.
constexpr uint32_t ux_rndv = 1;        // announced: the data waits with the sender
constexpr uint32_t ux_acked = 1 << 8;  // the sender waits for an ack (delivery complete)

bool eager_ok(const link* lk, uint64_t len) noexcept {
  if (len > eager_max) return false;
  if (lk && lk->credit_known) return lk->credit >= static_cast<int64_t>(len);
  return len <= early_eager_max && (!lk || lk->early + len <= early_eager_window);
}

template <bool Tagged>
ssize_t send(ep& e, const iovec* iov, size_t count, fi_addr_t dest, uint64_t tag, uint64_t data, void* context,
             uint64_t flags) noexcept {
  const size_t len = iov_total(iov, count);
  const uint64_t cq_flags = FI_SEND | (Tagged ? FI_TAGGED : FI_MSG);
  ep_guard g(e);
  if (fence_blocked(e, flags, [&e] { return ops_outstanding(e); })) [[unlikely]]
    return -FI_EAGAIN;
  route rt;
  if (int ret = route_to(e, dest, rt)) [[unlikely]]
    return ret;
  link* lk = rt.c ? link_of(e, *rt.c) : nullptr;
  const bool eager = eager_ok(lk, len);
  // Completion levels (docs/tcp-protocol.md, "Completions"): delivery
  // complete waits for the target's ack of the receive that took the
  // message, transmit complete for its ack of the message's arrival in the
  // target endpoint (a rendezvous message arrives in its receive: the same
  // ack), inject complete (and no level) only for the socket. FI_INJECT
  // copies the payload first and changes none of that.
  const bool delivery = flags & FI_DELIVERY_COMPLETE;
  const bool transmit = !delivery && (flags & FI_TRANSMIT_COMPLETE);
  const bool want_ack = delivery || (transmit && !eager);
  const bool ack_arrival = transmit && eager;
  request* r = new_request(e, req_kind::send, context, cq_flags, flags, len);
  if (!r) [[unlikely]]
    return -FI_EAGAIN;
  if (flags & FI_INJECT) {  // the buffer is the caller's again on return
    iov_copy_from(iov, count, 0, r->inline_buf, len);
    r->iov[0] = {r->inline_buf, len};
    r->iov_count = 1;
  } else {
    for (size_t i = 0; i < count; ++i) r->iov[i] = iov[i];
    r->iov_count = count;
  }
  frame_hdr h{};
  h.op = static_cast<uint8_t>(Tagged ? op::tagged : op::msg);
  h.flags = static_cast<uint8_t>(((flags & FI_REMOTE_CQ_DATA) ? flag_cq_data : 0) |
                                 (want_ack ? flag_want_ack : 0) | (ack_arrival ? flag_ack_arrival : 0) |
                                 (eager ? 0 : flag_rndv));
  h.length = eager ? len : 0;
  h.id = r->id;
  h.tag = Tagged ? tag : 0;
  h.data = (flags & FI_REMOTE_CQ_DATA) ? data : 0;
  h.aux = len;
  r->rndv = !eager;
  r->answered = !want_ack && !ack_arrival;
  if (r->out.tx.prepare(swap_hdr(h), nullptr, r->iov, eager ? r->iov_count : 0)) [[unlikely]] {
    e.requests.release(r);
    return -FI_EINVAL;
  }
  const int ret = send_on(e, rt, r->out.tx);
  if (ret < 0) [[unlikely]] {
    e.requests.release(r);
    if (ret == -FI_EAGAIN || ret == -FI_ENOMEM) return -FI_EAGAIN;
    // The connection cannot be made: an error completion.
    tx_fail(e, context, cq_flags, flags, -ret, 0, rt.c ? rt.c->foreign_note() : 0);
    return 0;
  }
  r->c = rt.c;
  if (eager) {
    if (!lk && rt.c) lk = link_of(e, *rt.c);
    if (lk) {
      if (lk->credit_known)
        lk->credit -= static_cast<int64_t>(len);
      else
        lk->early += len;
    }
  }
  if (ret == 1 && eager) {  // written whole at once
    r->written = true;
    if (r->answered) finish(e, r);
  }
  return 0;
}

template <bool Tagged>
ssize_t inject_small(ep& e, const void* buf, size_t len, fi_addr_t dest, uint64_t tag) noexcept {
  iovec v{const_cast<void*>(buf), len};
  return send<Tagged>(e, &v, 1, dest, tag, 0, nullptr, FI_INJECT | flag_no_cq);
}

// The transport as util/ep_ops.hpp sees it; its tables live here, with
// send, so that the entry points inline it.
struct tcp_transport {
  using ep = tcp::ep;
  static constexpr size_t iov_max = tcp::iov_max;
  static constexpr size_t inline_max = 64;
  template <bool Tagged>
  static ssize_t send(ep& e, const iovec* iov, size_t count, fi_addr_t dest, uint64_t tag, uint64_t data,
                      void* ctx, uint64_t flags) noexcept {
    return tcp::send<Tagged>(e, iov, count, dest, tag, data, ctx, flags);
  }
  template <bool Tagged>
  static ssize_t inject_small(ep& e, const void* buf, size_t len, fi_addr_t dest, uint64_t tag) noexcept {
    return tcp::inject_small<Tagged>(e, buf, len, dest, tag);
  }
  static ssize_t rma(ep& e, bool write, const iovec* iov, void* const* desc, size_t count, fi_addr_t addr,
                     const fi_rma_iov* riov, size_t rcount, uint64_t data, void* ctx, uint64_t flags) noexcept {
    return tcp::rma(e, write, iov, desc, count, addr, riov, rcount, data, ctx, flags);
  }
  static size_t atomic_max_count(atomic_form form, fi_datatype dt) noexcept {
    return tcp::atomic_max_count(form, dt);
  }
  static ssize_t atomic(ep& e, const atomic_call& call) noexcept { return tcp::atomic(e, call); }
};

rndv_recv* find_rndv(ep& e, uint64_t serial, uint64_t id) noexcept {
  for (rndv_recv& rr : e.rndv_recvs)
    if (rr.link_serial == serial && rr.sender_id == id) return &rr;
  return nullptr;
}

// A receive matched an announced message: it waits for the data; the
// sender hears how many bytes to send (fewer when the buffer is shorter).
int start_rndv(ep& e, link& lk, const posted_recv& r, const landing& l, uint64_t size, uint64_t cq_flags,
               uint64_t tag, uint64_t data, fi_addr_t src, uint64_t sender_id) noexcept {
  try {
    rndv_recv rr;
    rr.recv = r;
    rr.l = l;
    rr.n = std::min<uint64_t>(size, l.room);
    rr.size = size;
    rr.cq_flags = cq_flags;
    rr.tag = tag;
    rr.data = data;
    rr.src = src;
    rr.sender_id = sender_id;
    rr.link_serial = lk.serial;
    e.rndv_recvs.push_back(rr);
  } catch (...) {
    return FI_ENOMEM;
  }
  frame_hdr h{};
  h.op = static_cast<uint8_t>(op::cts);
  h.id = sender_id;
  h.aux = e.rndv_recvs.back().n;
  if (int ret = respond(e, lk, h, nullptr, 0)) {
    e.rndv_recvs.pop_back();
    return -ret;
  }
  return 0;
}

// ------------------------------------------------------------------ the matcher's questions
int rx_deliver(endpoint& owner, posted_recv& r, const landing& l, unexpected& u, size_t n,
               uint64_t cq_flags) noexcept {
  ep& e = ep::of(owner);
  auto it = e.links.find(u.peer);
  link* lk = it == e.links.end() ? nullptr : it->second;
  if (u.kind & ux_rndv) {
    if (!lk) return FI_EIO;  // its connection is gone, and the data with it
    if (int err = start_rndv(e, *lk, r, l, u.size, cq_flags, u.tag, u.data, u.src, u.id)) return err;
    return rx_pending;
  }
  if (n) iov_copy_to(l.iov, l.count, 0, u.bytes.data(), n);
  if (lk) {
    if (u.kind & ux_acked) ack(e, *lk, u.id, 0);
    give_credit(e, *lk, u.size);
  }
  return 0;
}

bool rx_adopt(endpoint& owner, posted_recv& r, unexpected& u) noexcept {
  ep& e = ep::of(owner);
  auto it = e.links.find(u.peer);
  if (it == e.links.end() || it->second->ux != &u) return false;
  link& lk = *it->second;
  lk.ux = nullptr;  // the matcher drops u: the bytes keep landing in lk.buf
  lk.adopted = true;
  lk.recv = r;
  lk.cq_flags = recv_cq_flags(r.tagged, u.remote_cq_data);
  return true;
}

void rx_discard(endpoint& owner, unexpected& u) noexcept {
  ep& e = ep::of(owner);
  auto it = e.links.find(u.peer);
  if (it == e.links.end()) return;
  link& lk = *it->second;
  if (u.kind & ux_rndv) {
    // The sender waits for a clear-to-send: one for no bytes ends it.
    frame_hdr h{};
    h.op = static_cast<uint8_t>(op::cts);
    h.id = u.id;
    respond(e, lk, h, nullptr, 0);
    return;
  }
  if (u.kind & ux_acked) ack(e, lk, u.id, 0);
  give_credit(e, lk, u.size);
}

fi_addr_t rx_source(endpoint& owner, uint64_t peer) noexcept {
  ep& e = ep::of(owner);
  auto it = e.links.find(peer);
  return it == e.links.end() ? FI_ADDR_NOTAVAIL : source_of(e, *it->second);
}

}  // namespace

const rx_transport rx_answers = {rx_deliver, rx_adopt, rx_discard, rx_source};

void install_ops(endpoint& e) noexcept {
  ops<tcp_transport>::install(e, ep_role::endpoint);
}

// ------------------------------------------------------------------ receiving
rx_target msg_frame(ep& e, link& lk, const frame_hdr& h) noexcept {
  const bool tagged = h.op == static_cast<uint8_t>(op::tagged);
  const uint64_t size = h.aux;
  fi_addr_t src = (e.caps & FI_SOURCE) ? source_of(e, lk) : FI_ADDR_NOTAVAIL;
  auto& list = posted_list(e, tagged);
  auto it = match_posted(e, tagged, h.tag, &src, [&] { return source_of(e, lk); });
  uint64_t cq_flags = recv_cq_flags(tagged, h.flags & flag_cq_data);
  if (it != list.end()) {
    const posted_recv r = *it;
    const landing l = landing_of(r);
    cq_flags |= consume(e, list, it, std::min<uint64_t>(size, l.room));
    if (h.flags & flag_rndv) {
      if (int err = start_rndv(e, lk, r, l, size, cq_flags, h.tag, h.data, src, h.id))
        rx_finish(e, r, cq_flags, 0, size, err, l.buf, h.data, h.tag, src);
      return rx_target{rx_action::discard, nullptr, 0};
    }
    lk.kind = rx_kind::expected;
    lk.recv = r;
    lk.l = l;
    lk.cq_flags = cq_flags;
    lk.msg_src = src;
    return rx_target{rx_action::deliver, lk.l.iov, lk.l.count};
  }
  // Nobody waits for it yet.
  const size_t bytes = (h.flags & flag_rndv) ? 0 : size;
  unexpected* u = ux_add(e, tagged, bytes);
  if (!u) {
    // The unexpected queue is full: this connection waits (TCP's own flow
    // control stops its sender) until receives make room.
    try {
      e.deferred.push_back(lk.serial);
    } catch (...) {
    }
    return rx_target{rx_action::defer, nullptr, 0};
  }
  u->peer = lk.serial;
  u->src = src;
  u->tag = h.tag;
  u->data = h.data;
  u->remote_cq_data = h.flags & flag_cq_data;
  u->size = size;
  u->id = h.id;
  u->kind = ((h.flags & flag_want_ack) ? ux_acked : 0) | ((h.flags & flag_rndv) ? ux_rndv : 0);
  if (h.flags & flag_rndv) return rx_target{rx_action::discard, nullptr, 0};
  try {
    lk.buf.resize(size);
  } catch (...) {
    ux_drop(e, ux_list(e, tagged), ux_find(e, tagged, u));
    try {
      e.deferred.push_back(lk.serial);
    } catch (...) {
    }
    return rx_target{rx_action::defer, nullptr, 0};
  }
  u->complete = false;  // until its payload is in
  lk.kind = rx_kind::unexpected;
  lk.ux = u;
  lk.adopted = false;
  lk.msg_src = src;
  lk.iov[0] = {lk.buf.data(), size};
  return rx_target{rx_action::deliver, lk.iov, 1};
}

void msg_payload(ep& e, link& lk, const frame_hdr& h, uint64_t landed) noexcept {
  const uint64_t size = h.aux;
  if (lk.kind == rx_kind::expected) {
    rx_finish(e, lk.recv, lk.cq_flags, landed, size, 0, lk.l.buf, h.data, h.tag, lk.msg_src);
    if (h.flags & (flag_want_ack | flag_ack_arrival)) ack(e, lk, h.id, 0);
    give_credit(e, lk, size);
    return;
  }
  const bool tagged = h.op == static_cast<uint8_t>(op::tagged);
  if (lk.adopted) {  // a receive posted while it arrived took it over
    lk.adopted = false;
    const landing l = landing_of(lk.recv);
    const size_t n = std::min<uint64_t>(size, l.room);
    iov_copy_to(l.iov, l.count, 0, lk.buf.data(), n);
    const uint64_t flags = recv_cq_flags(tagged, h.flags & flag_cq_data) | consume_taken(e, lk.recv, n);
    rx_finish(e, lk.recv, flags, n, size, 0, l.buf, h.data, h.tag, lk.msg_src);
    if (h.flags & (flag_want_ack | flag_ack_arrival)) ack(e, lk, h.id, 0);
    give_credit(e, lk, size);
    return;
  }
  if (unexpected* u = lk.ux) {  // parked whole, for a receive to come
    u->bytes.swap(lk.buf);
    u->filled = size;
    u->complete = true;
    lk.ux = nullptr;
  }
  // Transmit complete: the message is in this endpoint now, taken or not.
  if (h.flags & flag_ack_arrival) ack(e, lk, h.id, 0);
}

void cts_frame(ep& e, link& lk, const frame_hdr& h) noexcept {
  request* r = e.requests.find(h.id);
  if (!r || r->kind != req_kind::send || !r->rndv || r->written) return;
  const uint64_t n = std::min<uint64_t>(h.aux, r->len);
  // The first n bytes of the message, straight from the user's buffers.
  iovec piece[iov_max];
  size_t count = 0;
  uint64_t left = n;
  for (size_t i = 0; i < r->iov_count && left; ++i) {
    const size_t k = std::min<uint64_t>(r->iov[i].iov_len, left);
    piece[count++] = {r->iov[i].iov_base, k};
    left -= k;
  }
  frame_hdr d{};
  d.op = static_cast<uint8_t>(op::rndv_data);
  // The data lands in the receive: its ack is the delivery and the transmit completion.
  d.flags = static_cast<uint8_t>(
      flag_last | ((r->op_flags & (FI_DELIVERY_COMPLETE | FI_TRANSMIT_COMPLETE)) ? flag_want_ack : 0));
  d.id = r->id;
  d.length = n;
  d.aux = 0;
  if (r->data.tx.prepare(swap_hdr(d), nullptr, piece, count)) {
    fail_request(e, r, FI_EINVAL);
    return;
  }
  const int ret = lk.c->send(r->data.tx);
  if (ret < 0) {
    fail_request(e, r, ret);
  } else if (ret == 1) {
    r->written = true;
    if (r->answered) finish(e, r);
  }
}

rx_target rndv_data_frame(ep& e, link& lk, const frame_hdr& h) noexcept {
  rndv_recv* rr = find_rndv(e, lk.serial, h.id);
  if (!rr) {
    // A message discarded unread (FI_DISCARD: a clear-to-send for no
    // bytes): a sender that asked for delivery completion still waits.
    if ((h.flags & flag_want_ack) && !h.length && !h.aux) ack(e, lk, h.id, 0);
    return rx_target{rx_action::discard, nullptr, 0};
  }
  if (h.aux > rr->n) return rx_target{rx_action::discard, nullptr, 0};
  lk.kind = rx_kind::rndv_data;
  lk.rr = rr;
  // The landing from offset aux on.
  lk.iov_count = 0;
  uint64_t skip = h.aux;
  for (size_t i = 0; i < rr->l.count && lk.iov_count < rx_iov_max; ++i) {
    const iovec& v = rr->l.iov[i];
    if (skip >= v.iov_len) {
      skip -= v.iov_len;
      continue;
    }
    lk.iov[lk.iov_count++] = {static_cast<char*>(v.iov_base) + skip, v.iov_len - skip};
    skip = 0;
  }
  return rx_target{rx_action::deliver, lk.iov, lk.iov_count};
}

void rndv_data_payload(ep& e, link& lk, const frame_hdr& h, uint64_t landed) noexcept {
  rndv_recv* rr = lk.rr;
  lk.rr = nullptr;
  if (!rr) return;
  rr->got += landed;
  if (!(h.flags & flag_last) && rr->got < rr->n) return;
  rx_finish(e, rr->recv, rr->cq_flags, rr->got, rr->size, 0, rr->l.buf, rr->data, rr->tag, rr->src);
  if (h.flags & flag_want_ack) ack(e, lk, h.id, 0);
  for (auto it = e.rndv_recvs.begin(); it != e.rndv_recvs.end(); ++it)
    if (&*it == rr) {
      e.rndv_recvs.erase(it);
      break;
    }
}

void forget_link(ep& e, link& lk, int err) noexcept {
  const int why = err < 0 ? -err : err;
  // Receives waiting for data from it end in error.
  for (auto it = e.rndv_recvs.begin(); it != e.rndv_recvs.end();) {
    if (it->link_serial != lk.serial) {
      ++it;
      continue;
    }
    rx_finish(e, it->recv, it->cq_flags, 0, it->size, why ? why : FI_EIO, it->l.buf, it->data, it->tag, it->src);
    it = e.rndv_recvs.erase(it);
  }
  // A message half arrived and taken over by a receive: that receive fails.
  if (lk.adopted) {
    rx_finish(e, lk.recv, lk.cq_flags, 0, 0, why ? why : FI_EIO, nullptr, 0, 0, lk.msg_src);
    lk.adopted = false;
  }
  // Unexpected messages from it whose data is still with it (announced,
  // or half arrived) can never be delivered; whole ones stay.
  for (bool tagged : {false, true}) {
    auto& list = ux_list(e, tagged);
    for (auto it = list.begin(); it != list.end();) {
      auto next = std::next(it);
      if (it->owner == &e && it->peer == lk.serial && ((it->kind & ux_rndv) || !it->complete))
        ux_drop(e, list, it);
      it = next;
    }
  }
  lk.ux = nullptr;
}

}  // namespace weft::tcp

namespace weft {

// As a part of a linked endpoint (tcp_part.hpp): the sends of this file.
template <>
template <bool Tagged>
ssize_t part<tcp::part_tag>::send(endpoint& e, const iovec* iov, size_t count, fi_addr_t dest, uint64_t tag,
                                 uint64_t data, void* ctx, uint64_t flags) noexcept {
  return tcp::send<Tagged>(tcp::ep::of(e), iov, count, dest, tag, data, ctx, flags);
}
template <>
template <bool Tagged>
ssize_t part<tcp::part_tag>::inject(endpoint& e, const void* buf, size_t len, fi_addr_t dest, uint64_t tag) noexcept {
  return tcp::inject_small<Tagged>(tcp::ep::of(e), buf, len, dest, tag);
}
template ssize_t part<tcp::part_tag>::send<false>(endpoint&, const iovec*, size_t, fi_addr_t, uint64_t, uint64_t, void*,
                                                 uint64_t) noexcept;
template ssize_t part<tcp::part_tag>::send<true>(endpoint&, const iovec*, size_t, fi_addr_t, uint64_t, uint64_t, void*,
                                                uint64_t) noexcept;
template ssize_t part<tcp::part_tag>::inject<false>(endpoint&, const void*, size_t, fi_addr_t, uint64_t) noexcept;
template ssize_t part<tcp::part_tag>::inject<true>(endpoint&, const void*, size_t, fi_addr_t, uint64_t) noexcept;
static_assert(tcp::part_inject_max == tcp::inject_max);

}  // namespace weft
