// prov/shm: messages and tagged messages — every fi_msg/fi_tagged entry
// point funnels into send_generic/recv_generic, specialised by Tagged.
#include <unistd.h>

#include <cstring>

#include "prov/shm/shm_ep.hpp"
#include "util/cq.hpp"

namespace weft::shm {

namespace {

constexpr uint64_t send_flags_ok = FI_COMPLETION | FI_INJECT | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE |
                                   FI_DELIVERY_COMPLETE | FI_REMOTE_CQ_DATA | FI_FENCE | FI_MORE |
                                   FI_MATCH_COMPLETE | FI_TAGGED | FI_MSG | FI_SEND;
constexpr uint64_t recv_flags_ok =
    FI_COMPLETION | FI_MULTI_RECV | FI_PEEK | FI_CLAIM | FI_DISCARD | FI_MORE | FI_TAGGED | FI_MSG | FI_RECV;

[[gnu::cold, gnu::noinline]] ssize_t unreachable(ep& e, fi_addr_t dest, void* context, uint64_t cq_flags,
                                                 uint64_t flags) {
  if (!e.av || !e.av->lookup(dest)) return -FI_EINVAL;  // not an address of this AV
  tx_fail(e, context, cq_flags, flags, FI_EIO, 0);
  return 0;
}

// fi_inject / fi_tinject of up to inline_max bytes: the message rides in the
// cell header's own line and nothing completes, so this is the whole send:
// find the peer, claim a cell, fill one cache line, publish it. It does what
// send_generic does for this case, without the general path's checks and
// bookkeeping (a fifth of the cost of a small message).
template <bool Tagged>
[[gnu::always_inline]] inline ssize_t inject_small(ep& e, const void* buf, size_t len, fi_addr_t dest,
                                                   uint64_t tag) noexcept {
  if (!e.enabled) [[unlikely]]
    return -FI_EOPBADSTATE;
  if (len > e.inject_size || (len && !buf)) [[unlikely]]
    return -FI_EINVAL;
  constexpr uint64_t cq_flags = FI_SEND | (Tagged ? FI_TAGGED : FI_MSG);
  ep_guard g(e);
  peer* p = peer_of(e, dest);
  if (!p || p->dead) [[unlikely]]
    return unreachable(e, dest, nullptr, cq_flags, FI_INJECT | flag_no_cq);
  cell* c = claim_to(e, *p);
  if (!c) [[unlikely]]
    return -FI_EAGAIN;
  c->h.opcode = op::msg;
  c->h.tag = tag;
  c->h.data = 0;
  c->h.size = len;
  copy_small(c->h.inl, buf, len);
  c->h.flags = static_cast<uint16_t>((Tagged ? flag_tagged : 0) | flag_inline);
  queue_commit(p->view(), c);
  if (e.cntr_send) [[unlikely]]
    tx_done(e, nullptr, cq_flags, FI_INJECT | flag_no_cq, len);  // counts; an inject never writes the CQ
  return 0;
}

template <bool Tagged>
ssize_t send_generic(ep& e, const iovec* iov, size_t count, fi_addr_t dest, uint64_t tag, uint64_t data,
                     void* context, uint64_t flags) noexcept {
  if (!e.enabled) [[unlikely]]
    return -FI_EOPBADSTATE;
  if (count > iov_max || (count && !iov) || !iov_valid(iov, count)) [[unlikely]]
    return -FI_EINVAL;
  const size_t len = iov_total(iov, count);
  if ((flags & FI_INJECT) && len > e.inject_size) [[unlikely]]
    return -FI_EINVAL;
  constexpr uint64_t cq_flags = FI_SEND | (Tagged ? FI_TAGGED : FI_MSG);
  ep_guard g(e);
  if (fence_blocked(e, flags)) [[unlikely]]
    return -FI_EAGAIN;
  peer* p = peer_of(e, dest);
  if (!p || p->dead) [[unlikely]]
    return unreachable(e, dest, context, cq_flags, flags);
  const bool want_ack = (flags & FI_DELIVERY_COMPLETE) && !(flags & FI_INJECT);
  uint32_t cflags = (Tagged ? flag_tagged : 0) | ((flags & FI_REMOTE_CQ_DATA) ? flag_remote_cq_data : 0);

  if (len <= inject_max) [[likely]] {
    cell* c = claim_to(e, *p);
    if (!c) [[unlikely]]
      return -FI_EAGAIN;
    c->h.opcode = op::msg;
    c->h.tag = tag;
    c->h.data = data;
    c->h.size = len;
    if (len <= inline_max && !want_ack) {
      // Small enough to travel in the header's own cache line.
      if (count == 1) {
        copy_small(c->h.inl, iov[0].iov_base, len);
      } else {
        iov_copy_from(iov, count, 0, c->h.inl, len);
      }
      c->h.flags = static_cast<uint16_t>(cflags | flag_inline);
      queue_commit(p->view(), c);
      tx_done(e, context, cq_flags, flags, len);
      return 0;
    }
    c->h.len = static_cast<uint32_t>(len);
    c->h.id = 0;
    if (count == 1) {
      if (len) memcpy(c->payload, iov[0].iov_base, len);
    } else {
      iov_copy_from(iov, count, 0, c->payload, len);
    }
    if (want_ack) {
      request* r = new_request(e);
      if (!r) {
        c->h.opcode = op::nop;
        queue_commit(p->view(), c);
        return -FI_ENOMEM;
      }
      r->context = context;
      r->flags = cq_flags;
      r->op_flags = flags;
      r->len = len;
      r->peer_pid = p->pid;
      r->to = p;
      c->h.id = r->id;
      cflags |= flag_want_ack;
    }
    c->h.flags = cflags;
    queue_commit(p->view(), c);
    if (!want_ack) tx_done(e, context, cq_flags, flags, len);
    return 0;
  }

  // Large: a descriptor the receiver pulls from (CMA), or fragments.
  request* r = new_request(e);
  if (!r) return -FI_ENOMEM;
  r->context = context;
  r->flags = cq_flags;
  r->op_flags = flags;
  r->len = len;
  r->peer_pid = p->pid;
  r->to = p;
  cell* c = claim_to(e, *p);
  if (!c) {
    finish_request(e, r->id);
    return -FI_EAGAIN;
  }
  c->h.tag = tag;
  c->h.data = data;
  c->h.size = len;
  c->h.id = r->id;
  // Medium messages go as eager fragments through the queue (two memcpy, no
  // system call); beyond eager_max the receiver pulls them with CMA.
  if (p->cma && len > eager_max) {
    rndv_desc d{};
    d.pid = self_pid();
    d.iov_count = static_cast<uint32_t>(count);
    for (size_t i = 0; i < count; ++i) {
      d.iov[i].base = reinterpret_cast<uint64_t>(iov[i].iov_base);
      d.iov[i].len = iov[i].iov_len;
    }
    memcpy(c->payload, &d, sizeof d);
    for (size_t i = 0; i < count; ++i) r->iov[i] = iov[i];  // for a split copy (op::cts)
    r->iov_count = count;
    c->h.opcode = op::rndv;
    c->h.len = sizeof d;
    c->h.flags = cflags | flag_want_ack;
    queue_commit(p->view(), c);
    return 0;
  }
  c->h.opcode = op::frag;
  c->h.flags = cflags | flag_want_ack | flag_first;
  size_t first = inject_max;
  iov_copy_from(iov, count, 0, c->payload, first);
  c->h.len = static_cast<uint32_t>(first);
  queue_commit(p->view(), c);
  for (size_t i = 0; i < count; ++i) r->iov[i] = iov[i];
  r->iov_count = count;
  r->sent = first;
  r->tmpl.opcode = op::frag;
  r->tmpl.flags = cflags | flag_want_ack;
  r->tmpl.data = data;
  try {
    e.outgoing.push_back(r);
  } catch (...) {
    return -FI_ENOMEM;
  }
  progress(e);
  return 0;
}

// ------------------------------------------------------------------ receive
bool ux_matches(ep& poster, const posted_recv& r, const unexpected& u) {
  ep& e = u.owner ? *u.owner : poster;
  if (r.tagged && ((r.tag ^ u.tag) & ~r.ignore)) return false;
  if (r.src == FI_ADDR_UNSPEC || !(e.caps & FI_DIRECTED_RECV)) return true;
  fi_addr_t src = u.src != FI_ADDR_NOTAVAIL ? u.src : src_addr_of(e, u.src_slot);
  return src != FI_ADDR_NOTAVAIL && e.av->index(src) == e.av->index(r.src);
}

// Delivers unexpected message `u` into receive `r` (whole buffer or the tail
// of a multi-receive buffer at r.multi_off). Returns bytes consumed; the
// caller removes u.
size_t deliver_unexpected(ep& poster, posted_recv& r, unexpected& u, bool discard) {
  // Completions, acks and source addresses belong to the endpoint the
  // message arrived on (not the same one as the poster's with an SRX).
  ep& e = u.owner ? *u.owner : poster;
  uint64_t cq_flags =
      FI_RECV | (r.tagged ? FI_TAGGED : FI_MSG) | ((u.flags & flag_remote_cq_data) ? FI_REMOTE_CQ_DATA : 0);
  fi_addr_t src = (e.caps & FI_SOURCE) ? (u.src != FI_ADDR_NOTAVAIL ? u.src : src_addr_of(e, u.src_slot))
                                       : FI_ADDR_NOTAVAIL;
  iovec iov[iov_max];
  size_t count, room;
  void* buf = nullptr;
  if (r.flags & FI_MULTI_RECV) {
    iov[0] = {static_cast<char*>(r.iov[0].iov_base) + r.multi_off, r.iov[0].iov_len - r.multi_off};
    count = 1;
    room = iov[0].iov_len;
    buf = iov[0].iov_base;
  } else {
    memcpy(iov, r.iov, sizeof iov);
    count = r.iov_count;
    room = r.total;
  }
  size_t n = discard ? 0 : std::min<uint64_t>(u.size, room);
  int err = 0;
  if (u.rndv) {
    if (n) err = pull_desc(u.desc, iov, count, 0, n);
    send_ack(e, u.src_slot, u.id, err);
  } else {
    if (n) iov_copy_to(iov, count, 0, u.bytes.data(), n);
    if (u.flags & flag_want_ack) send_ack(e, u.src_slot, u.id, 0);
  }
  if (r.flags & FI_MULTI_RECV) {
    r.multi_off += n;
    if (r.iov[0].iov_len - r.multi_off < e.min_multi_recv) cq_flags |= FI_MULTI_RECV;
  }
  if (err)
    rx_fail(e, r, cq_flags, err, 0, 0, u.data, u.tag, src);
  else if (!discard && n < u.size)
    rx_fail(e, r, cq_flags, FI_ETRUNC, n, u.size - n, u.data, u.tag, src);
  else
    rx_done(e, r, cq_flags, n, buf, u.data, u.tag, src);
  return n;
}

void drop_ux(ep& e, std::list<unexpected>& list, std::list<unexpected>::iterator it) {
  e.rx->ux_count--;
  if (!it->rndv) e.rx->ux_bytes -= it->size;
  list.erase(it);
}

// An unexpected message whose fragments are still arriving: hand the
// assembly over to the receive.
bool adopt_incomplete(ep& poster, posted_recv& r, std::list<unexpected>& list,
                      std::list<unexpected>::iterator it) {
  ep& e = it->owner ? *it->owner : poster;
  for (auto& a : e.assemblies) {
    if (!a.to_unexpected || a.ux != &*it) continue;
    a.to_unexpected = false;
    a.ux = nullptr;
    a.recv = r;
    a.recv.flags &= ~FI_MULTI_RECV;  // a fragmented message takes the whole receive
    a.tag = it->tag;
    a.data = it->data;
    a.flags = it->flags;
    a.src = (e.caps & FI_SOURCE) ? src_addr_of(e, it->src_slot) : FI_ADDR_NOTAVAIL;
    iov_copy_to(r.iov, r.iov_count, 0, it->bytes.data(), std::min<size_t>(it->filled, r.total));
    a.filled = it->filled;
    drop_ux(e, list, it);
    return true;
  }
  return false;
}

template <bool Tagged>
ssize_t peek_claim(ep& e, posted_recv& r, uint64_t flags) {
  auto& list = e.rx->ux_tagged;
  if (flags & FI_PEEK) {
    for (auto it = list.begin(); it != list.end(); ++it) {
      if (it->claimed || !it->complete || !ux_matches(e, r, *it)) continue;
      uint64_t cq_flags = FI_RECV | FI_TAGGED | ((it->flags & flag_remote_cq_data) ? FI_REMOTE_CQ_DATA : 0);
      ep& o = it->owner ? *it->owner : e;
      fi_addr_t src = (o.caps & FI_SOURCE) ? src_addr_of(o, it->src_slot) : FI_ADDR_NOTAVAIL;
      if (flags & FI_DISCARD) {
        if (it->rndv)
          send_ack(o, it->src_slot, it->id, 0);
        else if (it->flags & flag_want_ack)
          send_ack(o, it->src_slot, it->id, 0);
        rx_done(o, r, cq_flags, it->size, nullptr, it->data, it->tag, src);
        drop_ux(e, list, it);
        return 0;
      }
      if (flags & FI_CLAIM) {
        it->claimed = true;
        it->claim_context = r.context;
      }
      rx_done(o, r, cq_flags, it->size, nullptr, it->data, it->tag, src);
      return 0;
    }
    rx_fail(e, r, FI_RECV | FI_TAGGED, FI_ENOMSG, 0, 0, 0, r.tag, FI_ADDR_NOTAVAIL);
    return 0;
  }
  // FI_CLAIM alone: receive the message an earlier peek claimed for this context.
  for (auto it = list.begin(); it != list.end(); ++it) {
    if (!it->claimed || it->claim_context != r.context) continue;
    deliver_unexpected(e, r, *it, flags & FI_DISCARD);
    drop_ux(e, list, it);
    return 0;
  }
  return -FI_EINVAL;  // nothing was claimed with this context
}

template <bool Tagged>
ssize_t recv_generic(ep& e, const iovec* iov, size_t count, fi_addr_t src, uint64_t tag, uint64_t ignore,
                     void* context, uint64_t flags) noexcept {
  if (!e.enabled) [[unlikely]]
    return -FI_EOPBADSTATE;
  if (count > iov_max || (count && !iov) || !iov_valid(iov, count)) [[unlikely]]
    return -FI_EINVAL;
  if ((flags & FI_MULTI_RECV) && (count != 1 || Tagged)) [[unlikely]]
    return -FI_EINVAL;
  // The source address only matters for directed receives.
  if (!(e.caps & FI_DIRECTED_RECV)) src = FI_ADDR_UNSPEC;
  if (src != FI_ADDR_UNSPEC && e.av && !e.av->lookup(src)) [[unlikely]]
    return -FI_EINVAL;
  ep_guard g(e);
  auto& ux = Tagged ? e.rx->ux_tagged : e.rx->ux_msg;
  auto& spare = e.rx->free_recvs;
  // Hot path: nothing unexpected is waiting, a spare node exists: fill it in
  // place at the tail of the posted list.
  if (ux.empty() && !spare.empty() && !(flags & (FI_PEEK | FI_CLAIM))) [[likely]] {
    auto& list = Tagged ? e.rx->posted_tagged : e.rx->posted_msg;
    list.splice(list.end(), spare, spare.begin());
    posted_recv& n = list.back();
    size_t total = 0;
    for (size_t i = 0; i < count; ++i) {
      n.iov[i] = iov[i];
      total += iov[i].iov_len;
    }
    n.iov_count = count;
    n.total = total;
    n.src = src;
    n.tag = tag;
    n.ignore = ignore;
    n.context = context;
    n.flags = flags;
    n.tagged = Tagged;
    n.multi_off = 0;
    return 0;
  }
  posted_recv r;
  for (size_t i = 0; i < count; ++i) r.iov[i] = iov[i];
  r.iov_count = count;
  r.total = iov_total(iov, count);
  r.src = src;
  r.tag = tag;
  r.ignore = ignore;
  r.context = context;
  r.flags = flags;
  r.tagged = Tagged;
  try {
    if constexpr (Tagged) {
      if (flags & (FI_PEEK | FI_CLAIM)) return peek_claim<Tagged>(e, r, flags);
    }
    for (auto it = ux.begin(); it != ux.end();) {
      if (it->claimed || !ux_matches(e, r, *it)) {
        ++it;
        continue;
      }
      if (!it->complete) {
        if (adopt_incomplete(e, r, ux, it)) return 0;
        ++it;
        continue;
      }
      auto next = std::next(it);
      deliver_unexpected(e, r, *it, false);
      drop_ux(e, ux, it);
      if (!(r.flags & FI_MULTI_RECV) || r.iov[0].iov_len - r.multi_off < e.min_multi_recv) return 0;
      it = next;
    }
    recv_push(e, Tagged ? e.rx->posted_tagged : e.rx->posted_msg, r);
  } catch (...) {
    return -FI_ENOMEM;
  }
  return 0;
}

// ------------------------------------------------------------------ entry points
inline iovec one(const void* buf, size_t len) {
  return iovec{const_cast<void*>(buf), len};
}

ssize_t m_recv(fid_ep* f, void* buf, size_t len, void*, fi_addr_t src, void* ctx) noexcept {
  ep& e = ep_of(f);
  iovec v = one(buf, len);
  return recv_generic<false>(e, &v, 1, src, 0, 0, ctx, rx_flags_of(f, e));
}
ssize_t m_recvv(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t src, void* ctx) noexcept {
  ep& e = ep_of(f);
  return recv_generic<false>(e, iov, count, src, 0, 0, ctx, rx_flags_of(f, e));
}
ssize_t m_recvmsg(fid_ep* f, const fi_msg* msg, uint64_t flags) noexcept {
  if (!msg || !only(flags, recv_flags_ok)) return msg ? -FI_EBADFLAGS : -FI_EINVAL;
  return recv_generic<false>(ep_of(f), msg->msg_iov, msg->iov_count, msg->addr, 0, 0, msg->context, flags);
}
ssize_t m_send(fid_ep* f, const void* buf, size_t len, void*, fi_addr_t dest, void* ctx) noexcept {
  ep& e = ep_of(f);
  iovec v = one(buf, len);
  return send_generic<false>(e, &v, 1, dest, 0, 0, ctx, tx_flags_of(f, e));
}
ssize_t m_sendv(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t dest, void* ctx) noexcept {
  ep& e = ep_of(f);
  return send_generic<false>(e, iov, count, dest, 0, 0, ctx, tx_flags_of(f, e));
}
ssize_t m_sendmsg(fid_ep* f, const fi_msg* msg, uint64_t flags) noexcept {
  if (!msg) return -FI_EINVAL;
  if (!only(flags, send_flags_ok)) return -FI_EBADFLAGS;
  return send_generic<false>(ep_of(f), msg->msg_iov, msg->iov_count, msg->addr, 0, msg->data, msg->context,
                             flags);
}
ssize_t m_inject(fid_ep* f, const void* buf, size_t len, fi_addr_t dest) noexcept {
  if (len <= inline_max) [[likely]]
    return inject_small<false>(ep_of(f), buf, len, dest, 0);
  iovec v = one(buf, len);
  return send_generic<false>(ep_of(f), &v, 1, dest, 0, 0, nullptr, FI_INJECT | flag_no_cq);
}
ssize_t m_senddata(fid_ep* f, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dest,
                   void* ctx) noexcept {
  ep& e = ep_of(f);
  iovec v = one(buf, len);
  return send_generic<false>(e, &v, 1, dest, 0, data, ctx, tx_flags_of(f, e) | FI_REMOTE_CQ_DATA);
}
ssize_t m_injectdata(fid_ep* f, const void* buf, size_t len, uint64_t data, fi_addr_t dest) noexcept {
  iovec v = one(buf, len);
  return send_generic<false>(ep_of(f), &v, 1, dest, 0, data, nullptr,
                             FI_INJECT | FI_REMOTE_CQ_DATA | flag_no_cq);
}

ssize_t t_recv(fid_ep* f, void* buf, size_t len, void*, fi_addr_t src, uint64_t tag, uint64_t ignore,
               void* ctx) noexcept {
  ep& e = ep_of(f);
  iovec v = one(buf, len);
  return recv_generic<true>(e, &v, 1, src, tag, ignore, ctx, rx_flags_of(f, e));
}
ssize_t t_recvv(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t src, uint64_t tag,
                uint64_t ignore, void* ctx) noexcept {
  ep& e = ep_of(f);
  return recv_generic<true>(e, iov, count, src, tag, ignore, ctx, rx_flags_of(f, e));
}
ssize_t t_recvmsg(fid_ep* f, const fi_msg_tagged* msg, uint64_t flags) noexcept {
  if (!msg) return -FI_EINVAL;
  if (!only(flags, recv_flags_ok)) return -FI_EBADFLAGS;
  return recv_generic<true>(ep_of(f), msg->msg_iov, msg->iov_count, msg->addr, msg->tag, msg->ignore,
                            msg->context, flags);
}
ssize_t t_send(fid_ep* f, const void* buf, size_t len, void*, fi_addr_t dest, uint64_t tag,
               void* ctx) noexcept {
  ep& e = ep_of(f);
  iovec v = one(buf, len);
  return send_generic<true>(e, &v, 1, dest, tag, 0, ctx, tx_flags_of(f, e));
}
ssize_t t_sendv(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t dest, uint64_t tag,
                void* ctx) noexcept {
  ep& e = ep_of(f);
  return send_generic<true>(e, iov, count, dest, tag, 0, ctx, tx_flags_of(f, e));
}
ssize_t t_sendmsg(fid_ep* f, const fi_msg_tagged* msg, uint64_t flags) noexcept {
  if (!msg) return -FI_EINVAL;
  if (!only(flags, send_flags_ok)) return -FI_EBADFLAGS;
  return send_generic<true>(ep_of(f), msg->msg_iov, msg->iov_count, msg->addr, msg->tag, msg->data,
                            msg->context, flags);
}
ssize_t t_inject(fid_ep* f, const void* buf, size_t len, fi_addr_t dest, uint64_t tag) noexcept {
  if (len <= inline_max) [[likely]]
    return inject_small<true>(ep_of(f), buf, len, dest, tag);
  iovec v = one(buf, len);
  return send_generic<true>(ep_of(f), &v, 1, dest, tag, 0, nullptr, FI_INJECT | flag_no_cq);
}
ssize_t t_senddata(fid_ep* f, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dest, uint64_t tag,
                   void* ctx) noexcept {
  ep& e = ep_of(f);
  iovec v = one(buf, len);
  return send_generic<true>(e, &v, 1, dest, tag, data, ctx, tx_flags_of(f, e) | FI_REMOTE_CQ_DATA);
}
ssize_t t_injectdata(fid_ep* f, const void* buf, size_t len, uint64_t data, fi_addr_t dest,
                     uint64_t tag) noexcept {
  iovec v = one(buf, len);
  return send_generic<true>(ep_of(f), &v, 1, dest, tag, data, nullptr,
                            FI_INJECT | FI_REMOTE_CQ_DATA | flag_no_cq);
}

}  // namespace

fi_ops_msg msg_ops = {sizeof(fi_ops_msg), m_recv,   m_recvv,    m_recvmsg,   m_send, m_sendv,
                      m_sendmsg,          m_inject, m_senddata, m_injectdata};
fi_ops_tagged tagged_ops = {
    sizeof(fi_ops_tagged), t_recv, t_recvv, t_recvmsg, t_send, t_sendv, t_sendmsg, t_inject, t_senddata,
    t_injectdata};

// Contexts of scalable endpoints move data one way only.
fi_ops_msg msg_ops_tx = {sizeof(fi_ops_msg),
                         WEFT_NOSYS(fi_ops_msg, recv),
                         WEFT_NOSYS(fi_ops_msg, recvv),
                         WEFT_NOSYS(fi_ops_msg, recvmsg),
                         m_send,
                         m_sendv,
                         m_sendmsg,
                         m_inject,
                         m_senddata,
                         m_injectdata};
fi_ops_msg msg_ops_rx = {sizeof(fi_ops_msg),
                         m_recv,
                         m_recvv,
                         m_recvmsg,
                         WEFT_NOSYS(fi_ops_msg, send),
                         WEFT_NOSYS(fi_ops_msg, sendv),
                         WEFT_NOSYS(fi_ops_msg, sendmsg),
                         WEFT_NOSYS(fi_ops_msg, inject),
                         WEFT_NOSYS(fi_ops_msg, senddata),
                         WEFT_NOSYS(fi_ops_msg, injectdata)};
fi_ops_tagged tagged_ops_tx = {sizeof(fi_ops_tagged),
                               WEFT_NOSYS(fi_ops_tagged, recv),
                               WEFT_NOSYS(fi_ops_tagged, recvv),
                               WEFT_NOSYS(fi_ops_tagged, recvmsg),
                               t_send,
                               t_sendv,
                               t_sendmsg,
                               t_inject,
                               t_senddata,
                               t_injectdata};
fi_ops_tagged tagged_ops_rx = {sizeof(fi_ops_tagged),
                               t_recv,
                               t_recvv,
                               t_recvmsg,
                               WEFT_NOSYS(fi_ops_tagged, send),
                               WEFT_NOSYS(fi_ops_tagged, sendv),
                               WEFT_NOSYS(fi_ops_tagged, sendmsg),
                               WEFT_NOSYS(fi_ops_tagged, inject),
                               WEFT_NOSYS(fi_ops_tagged, senddata),
                               WEFT_NOSYS(fi_ops_tagged, injectdata)};

}  // namespace weft::shm
