// SPDX-License-Identifier: BSD-3-Clause
// The matcher: receives posted while unexpected messages wait, FI_PEEK /
// FI_CLAIM / FI_DISCARD, multi-receive buffers, cancel.
#include "util/rx.hpp"

#include "util/cntr.hpp"
#include "util/cq.hpp"

namespace weft {

namespace {

// The sender of u (asked of its transport until known).
fi_addr_t ux_source(unexpected& u) noexcept {
  if (u.src == FI_ADDR_NOTAVAIL) u.src = u.owner->tops->rx->source(*u.owner, u.peer);
  return u.src;
}

// Does receive r take unexpected message u? The rule of recv_matches, with
// the sender resolved only when a directed receive needs it.
bool ux_matches(const posted_recv& r, unexpected& u) noexcept {
  const endpoint& e = *u.owner;
  if (r.tagged && ((r.tag ^ u.tag) & ~r.ignore)) return false;
  if (r.tagged && (u.tag & coll_tag_bit) && e.rx->coll && !(r.flags & flag_coll)) return false;
  if (r.src == FI_ADDR_UNSPEC || !needs_source(e)) return true;
  return recv_matches(e, r, r.tagged, u.tag, ux_source(u));
}

// Delivers complete message u into receive r (the whole buffer, or the tail
// of a multi-receive buffer, whose offset advances); discard: drop its data.
void deliver(posted_recv& r, unexpected& u, bool discard) {
  // Completions, acks and source addresses belong to the endpoint the
  // message arrived on (not the poster's with a shared receive context).
  endpoint& e = *u.owner;
  uint64_t cq_flags = recv_cq_flags(r.tagged, u.remote_cq_data);
  const fi_addr_t src = (e.caps & FI_SOURCE) ? ux_source(u) : FI_ADDR_NOTAVAIL;
  const landing l = landing_of(r);
  const size_t n = discard ? 0 : std::min<uint64_t>(u.size, l.room);
  if (r.flags & FI_MULTI_RECV) {
    r.multi_off += n;
    if (r.iov[0].iov_len - r.multi_off < e.rx->min_multi_recv) cq_flags |= FI_MULTI_RECV;
  }
  int err = 0;
  if (discard) {
    e.tops->rx->discard(e, u);
  } else {
    err = e.tops->rx->deliver(e, r, l, u, n, cq_flags);
    if (err == rx_pending) return;
  }
  rx_finish(e, r, cq_flags, n, discard ? 0 : u.size, err, l.buf, u.data, u.tag, src);
}

ssize_t peek_claim(endpoint& e, posted_recv& r) {
  auto& list = e.rx->ux_tagged;
  if (r.flags & FI_PEEK) {
    for (auto it = list.begin(); it != list.end(); ++it) {
      if (it->claimed || !it->complete || !ux_matches(r, *it)) continue;
      endpoint& o = *it->owner;
      const uint64_t cq_flags = recv_cq_flags(true, it->remote_cq_data);
      const fi_addr_t src = (o.caps & FI_SOURCE) ? ux_source(*it) : FI_ADDR_NOTAVAIL;
      if (r.flags & FI_DISCARD) {
        o.tops->rx->discard(o, *it);
        rx_done(o, r, cq_flags, it->size, nullptr, it->data, it->tag, src);
        ux_drop(e, list, it);
        return 0;
      }
      if (r.flags & FI_CLAIM) {
        it->claimed = true;
        it->claim_context = r.context;
      }
      rx_done(o, r, cq_flags, it->size, nullptr, it->data, it->tag, src);
      return 0;
    }
    rx_finish(e, r, FI_RECV | FI_TAGGED, 0, 0, FI_ENOMSG, nullptr, 0, r.tag, FI_ADDR_NOTAVAIL);
    return 0;
  }
  // FI_CLAIM alone: receive the message an earlier peek claimed for this context.
  for (auto it = list.begin(); it != list.end(); ++it) {
    if (!it->claimed || it->claim_context != r.context) continue;
    deliver(r, *it, r.flags & FI_DISCARD);
    ux_drop(e, list, it);
    return 0;
  }
  return -FI_EINVAL;  // nothing was claimed with this context
}

}  // namespace

ssize_t post_recv_slow(endpoint& e, const posted_recv& posted) noexcept {
  posted_recv r = posted;
  try {
    if (r.tagged && (r.flags & (FI_PEEK | FI_CLAIM))) return peek_claim(e, r);
    auto& ux = ux_list(e, r.tagged);
    for (auto it = ux.begin(); it != ux.end();) {
      if (it->claimed || !ux_matches(r, *it)) {
        ++it;
        continue;
      }
      auto next = std::next(it);
      if (!it->complete) {
        endpoint& o = *it->owner;
        // A message still arriving takes the whole receive; one whose sender
        // is gone will never complete and is dropped.
        const bool adopted = o.tops->rx->adopt(o, r, *it);
        ux_drop(e, ux, it);
        if (adopted) return 0;
        it = next;
        continue;
      }
      deliver(r, *it, false);
      ux_drop(e, ux, it);
      if (!(r.flags & FI_MULTI_RECV) || r.iov[0].iov_len - r.multi_off < e.rx->min_multi_recv) return 0;
      it = next;
    }
    recv_push(e, posted_list(e, r.tagged), r);
  } catch (...) {
    return -FI_ENOMEM;
  }
  return 0;
}

uint64_t consume_taken(endpoint& e, const posted_recv& r, size_t used) {
  if (!(r.flags & FI_MULTI_RECV)) return 0;
  posted_recv rest = r;
  rest.multi_off += used;
  if (rest.iov[0].iov_len - rest.multi_off < e.rx->min_multi_recv) return FI_MULTI_RECV;
  recv_push(e, posted_list(e, r.tagged), rest);
  return 0;
}

unexpected* ux_add(endpoint& e, bool tagged, size_t bytes) {
  rx_queues& q = *e.rx;
  if (q.ux_count >= ux_max_count || q.ux_bytes + bytes > ux_max_bytes) return nullptr;
  auto& list = ux_list(e, tagged);
  list.emplace_back();
  unexpected& u = list.back();
  u.owner = &e;
  u.bytes_held = bytes;
  q.ux_count++;
  q.ux_bytes += bytes;
  return &u;
}

void ux_drop(endpoint& e, std::list<unexpected>& list, std::list<unexpected>::iterator it) noexcept {
  e.rx->ux_count--;
  e.rx->ux_bytes -= it->bytes_held;
  list.erase(it);
}

std::list<unexpected>::iterator ux_find(endpoint& e, bool tagged, const unexpected* u) noexcept {
  auto& list = ux_list(e, tagged);
  for (auto it = list.begin(); it != list.end(); ++it)
    if (&*it == u) return it;
  return list.end();
}

namespace {
constexpr uint64_t recv_flags_ok =
    FI_COMPLETION | FI_MULTI_RECV | FI_PEEK | FI_CLAIM | FI_DISCARD | FI_MORE | FI_TAGGED | FI_MSG | FI_RECV;
}

ssize_t msg_recv(fid_ep* f, void* buf, size_t len, void*, fi_addr_t src, void* ctx) noexcept {
  endpoint& e = ep_of(f);
  iovec v{buf, len};
  return post_recv<false>(e, &v, 1, src, 0, 0, ctx, rx_flags_of(f, e));
}
ssize_t msg_recvv(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t src, void* ctx) noexcept {
  endpoint& e = ep_of(f);
  return post_recv<false>(e, iov, count, src, 0, 0, ctx, rx_flags_of(f, e));
}
ssize_t msg_recvmsg(fid_ep* f, const fi_msg* msg, uint64_t flags) noexcept {
  if (!msg) return -FI_EINVAL;
  if (!only(flags, recv_flags_ok)) return -FI_EBADFLAGS;
  return post_recv<false>(ep_of(f), msg->msg_iov, msg->iov_count, msg->addr, 0, 0, msg->context, flags);
}
ssize_t tag_recv(fid_ep* f, void* buf, size_t len, void*, fi_addr_t src, uint64_t tag, uint64_t ignore,
                 void* ctx) noexcept {
  endpoint& e = ep_of(f);
  iovec v{buf, len};
  return post_recv<true>(e, &v, 1, src, tag, ignore, ctx, rx_flags_of(f, e));
}
ssize_t tag_recvv(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t src, uint64_t tag,
                  uint64_t ignore, void* ctx) noexcept {
  endpoint& e = ep_of(f);
  return post_recv<true>(e, iov, count, src, tag, ignore, ctx, rx_flags_of(f, e));
}
ssize_t tag_recvmsg(fid_ep* f, const fi_msg_tagged* msg, uint64_t flags) noexcept {
  if (!msg) return -FI_EINVAL;
  if (!only(flags, recv_flags_ok)) return -FI_EBADFLAGS;
  return post_recv<true>(ep_of(f), msg->msg_iov, msg->iov_count, msg->addr, msg->tag, msg->ignore,
                         msg->context, flags);
}

fi_ops_msg msg_rx = {sizeof(fi_ops_msg),
                     msg_recv,
                     msg_recvv,
                     msg_recvmsg,
                     WEFT_NOSYS(fi_ops_msg, send),
                     WEFT_NOSYS(fi_ops_msg, sendv),
                     WEFT_NOSYS(fi_ops_msg, sendmsg),
                     WEFT_NOSYS(fi_ops_msg, inject),
                     WEFT_NOSYS(fi_ops_msg, senddata),
                     WEFT_NOSYS(fi_ops_msg, injectdata)};
fi_ops_tagged tagged_rx = {sizeof(fi_ops_tagged),
                           tag_recv,
                           tag_recvv,
                           tag_recvmsg,
                           WEFT_NOSYS(fi_ops_tagged, send),
                           WEFT_NOSYS(fi_ops_tagged, sendv),
                           WEFT_NOSYS(fi_ops_tagged, sendmsg),
                           WEFT_NOSYS(fi_ops_tagged, inject),
                           WEFT_NOSYS(fi_ops_tagged, senddata),
                           WEFT_NOSYS(fi_ops_tagged, injectdata)};

ssize_t cancel_recv(endpoint& e, void* context) noexcept {
  for (auto* list : {&e.rx->posted_msg, &e.rx->posted_tagged}) {
    for (auto it = list->begin(); it != list->end(); ++it) {
      if (it->context != context) continue;
      posted_recv r = *it;
      recv_drop(e, *list, it);
      if (e.rx_cq) {
        fi_cq_err_entry err{};
        err.op_context = context;
        err.flags = FI_RECV | (r.tagged ? FI_TAGGED : FI_MSG);
        err.err = FI_ECANCELED;
        err.prov_errno = -FI_ECANCELED;
        err.tag = r.tag;
        cq_write_error(e.rx_cq, err);
      }
      if (e.cntr_recv) cntr_err_inc(e.cntr_recv);
      return 0;
    }
  }
  return -FI_ENOENT;
}

}  // namespace weft
