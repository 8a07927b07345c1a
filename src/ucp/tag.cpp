// SPDX-License-Identifier: BSD-3-Clause
// Tag matching: straight onto fi_tsend/fi_trecv, so the provider matches
// (with its own eager and rendezvous protocols). Synchronous sends carry
// remote CQ data naming the receiver's endpoint and the request; the receiver
// acknowledges with a frame when the receive completed. Probes are FI_PEEK
// (FI_CLAIM with remove), message receives FI_CLAIM.
#include <cstdlib>

#include "ucp_int.hpp"

namespace wucp {

namespace {

// One static byte: the handle ucp_tag_probe_nb returns when the message was
// not removed (it only says "there is one").
uint8_t g_probe_seen;

ucs_status_t fill_iov(op* o, ucp_datatype_t dt, const void* buf, size_t count, const dt_view& v, size_t limit,
                      bool send, request* r) {
  if (v.cls == UCP_DATATYPE_CONTIG) {
    o->iov[0] = {const_cast<void*>(buf), v.length};
    o->niov = 1;
    return UCS_OK;
  }
  if (v.cls == UCP_DATATYPE_IOV && v.iovcnt <= limit && v.iovcnt) {
    for (size_t i = 0; i < v.iovcnt; i++) o->iov[i] = {v.iov[i].buffer, v.iov[i].length};
    o->niov = static_cast<uint8_t>(v.iovcnt);
    return UCS_OK;
  }
  if (!send) {
    size_t cap = 0;
    ucs_status_t st = recv_dt_begin(r, dt, const_cast<void*>(buf), count, &cap);
    if (st != UCS_OK) return st;
    o->iov[0] = {r->bounce, cap};
    o->niov = 1;
    return UCS_OK;
  }
  void* b = nullptr;
  size_t len = 0;
  ucs_status_t st = dt_pack_alloc(dt, buf, count, &b, &len);
  if (st != UCS_OK) return st;
  o->bounce = b;
  o->flags |= OPF_FREE_BOUNCE;
  o->iov[0] = {b, len};
  o->niov = 1;
  return UCS_OK;
}

// A send the provider injects: bytes it takes inline, on an endpoint with a
// destination and nothing queued before it. 0: sent, done at return;
// -FI_EAGAIN: not injected (too large, queued work, no destination yet, or
// back-pressure), the caller queues it; another -FI_E*: the provider's error.
// The caller holds the worker and has checked the endpoint's state.
[[gnu::always_inline]] inline ssize_t try_inject(ucp_ep* ep, const void* buf, size_t len, ucp_tag_t tag) noexcept {
  iface* tp = ep->tp;
  if (ep->dest == FI_ADDR_UNSPEC || !ep->pending.empty() || len > tp->inject || (!buf && len)) return -FI_EAGAIN;
  return fi_tinject(tp->ep, buf, len, ep->dest, tag);
}

ucs_status_ptr_t tag_send(ucp_ep* ep, const void* buf, size_t count, ucp_tag_t tag,
                          const ucp_request_param_t* p, bool sync, ucp_send_callback_t old_cb) noexcept {
  if (!ep) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  ucp_worker* w = ep->w;
  worker_guard g(w);
  if (ep->state >= EP_FAILED) [[unlikely]]
    return UCS_STATUS_PTR(ep->state == EP_FAILED ? ep->fail_status : UCS_ERR_NOT_CONNECTED);
  ucp_datatype_t dt =
      (p && (p->op_attr_mask & UCP_OP_ATTR_FIELD_DATATYPE)) ? p->datatype : ucp_dt_make_contig(1);
  iface* tp = ep->tp;
  // A small contiguous message goes inline and is done at return.
  size_t len;
  if ((dt & UCP_DATATYPE_CLASS_MASK) == UCP_DATATYPE_CONTIG && !sync && contig_bytes(dt, count, &len) &&
      !(p && (p->op_attr_mask & UCP_OP_ATTR_FLAG_NO_IMM_CMPL))) [[likely]] {
    ssize_t rc = try_inject(ep, buf, len, tag);
    if (rc == 0) [[likely]]
      return nullptr;
    if (rc != -FI_EAGAIN) return UCS_STATUS_PTR(from_fi(static_cast<int>(rc)));
  }
  dt_view v;
  if (!dt_describe(dt, buf, count, v, true)) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  request* r = req_from_param(w, p);
  if (!r) return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
  r->kind = sync ? RK_SYNC_SEND : RK_SEND;
  req_set_any_cb(r, p, CB_SEND_NBX, reinterpret_cast<void*>(old_cb), CB_SEND_NB);
  op* o = op_alloc(w);
  if (!o) {
    req_complete(r, UCS_ERR_NO_MEMORY);
    return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
  }
  o->type = OP_TSEND;
  o->tag = tag;
  o->dest = ep->dest;
  ucs_status_t st = fill_iov(o, dt, buf, count, v, tp->d->iov_limit, true, r);
  if (st != UCS_OK) {
    op_free(w, o);
    r->flags |= RF_RELEASED;
    req_complete(r, st);
    return UCS_STATUS_PTR(st);
  }
  if (sync) {
    try {
      r->id = rmap_add(w, r);
    } catch (...) {
      if (o->flags & OPF_FREE_BOUNCE) free(o->bounce);
      op_free(w, o);
      r->flags |= RF_RELEASED;
      req_complete(r, UCS_ERR_NO_MEMORY);
      return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
    }
    r->flags |= RF_WAIT_ACK;
    o->flags |= OPF_SYNC | OPF_NEEDS_ID;
  }
  op_attach(o, ep, r, true);
  bool direct = ep->pending.empty() && ep->dest != FI_ADDR_UNSPEC && (!sync || ep->state == EP_CONNECTED);
  if (direct) {
    int rc = issue(w, o);
    if (rc == -FI_EAGAIN) {
      enqueue(ep, o);
    } else if (rc < 0) {
      op_finish(w, o, from_fi(rc));
    }
  } else {
    enqueue(ep, o);
  }
  return req_return(r);
}

// The hot path of a tag receive: a contiguous receive (no datatype or a
// contiguous one, no request or result pointers of the caller's) straight
// into a request from the pool, whose context the provider holds. nullptr:
// not taken (or the provider pushed back), the general path decides. The
// caller holds the worker (its lock, or a single-threaded worker).
[[gnu::always_inline]] inline request* tag_recv_hot(ucp_worker* w, void* buf, size_t count, ucp_tag_t tag,
                                                     ucp_tag_t mask, const ucp_request_param_t* p) noexcept {
  const uint32_t attrs = p ? p->op_attr_mask : 0;
  if (attrs & (UCP_OP_ATTR_FIELD_REQUEST | UCP_OP_ATTR_FIELD_RECV_INFO)) return nullptr;
  size_t len = count;
  if ((attrs & UCP_OP_ATTR_FIELD_DATATYPE) &&
      ((p->datatype & UCP_DATATYPE_CLASS_MASK) != UCP_DATATYPE_CONTIG || !contig_bytes(p->datatype, count, &len)))
    return nullptr;
  if (!buf && len) return nullptr;
  request* r = req_alloc(w);
  if (!r) [[unlikely]]
    return nullptr;
  r->kind = RK_TAG_RECV;
  if ((attrs & UCP_OP_ATTR_FIELD_CALLBACK) && p->cb.recv) {
    r->cbk = CB_TAG_RECV_NBX;
    r->cb = reinterpret_cast<void*>(p->cb.recv);
  }
  if (attrs & UCP_OP_ATTR_FIELD_USER_DATA) r->user_data = p->user_data;
  r->ctx_type = OP_TRECV_REQ;
  r->pending = 1;
  if (fi_trecv(w->tp0->ep, buf, len, nullptr, FI_ADDR_UNSPEC, tag, ~mask, &r->fctx) == 0) [[likely]]
    return r;
  // back-pressure or an error: back to the pool
  r->ctx_type = 0;
  r->pending = 0;
  r->flags |= RF_RELEASED | RF_COMPLETED;
  req_maybe_release(r);
  return nullptr;
}

ucs_status_ptr_t tag_recv(ucp_worker* w, void* buf, size_t count, ucp_tag_t tag, ucp_tag_t mask,
                          const ucp_request_param_t* p, ucp_tag_recv_callback_t old_cb, op* claimed,
                          bool hot_tried = false) noexcept {
  if (!w) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  worker_guard g(w);
  ucp_datatype_t dt =
      (p && (p->op_attr_mask & UCP_OP_ATTR_FIELD_DATATYPE)) ? p->datatype : ucp_dt_make_contig(1);
  if (!claimed && !old_cb && !hot_tried)
    if (request* r = tag_recv_hot(w, buf, count, tag, mask, p)) return req_return(r);
  dt_view v;
  if (!dt_describe(dt, buf, count, v, false)) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  request* r = req_from_param(w, p);
  if (!r) return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
  r->kind = RK_TAG_RECV;
  req_set_any_cb(r, p, CB_TAG_RECV_NBX, reinterpret_cast<void*>(old_cb), CB_TAG_RECV_NB);
  iface* tp = claimed ? claimed->tp : w->tps[0].get();
  op* o = claimed ? claimed : op_alloc(w);
  if (!o) {
    r->flags |= RF_RELEASED;
    req_complete(r, UCS_ERR_NO_MEMORY);
    return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
  }
  o->type = OP_TRECV;
  o->tp = tp;
  ucs_status_t st = fill_iov(o, dt, buf, count, v, tp->d->iov_limit, false, r);
  if (st != UCS_OK) {
    if (claimed) {
      // Give the claimed message up rather than leave it stuck in the provider.
      fi_msg_tagged m{};
      m.addr = FI_ADDR_UNSPEC;
      m.tag = claimed->tag;
      m.context = &o->fctx;
      o->type = OP_FREE;
      fi_trecvmsg(tp->ep, &m, FI_CLAIM | FI_DISCARD);
    } else {
      op_free(w, o);
    }
    r->flags |= RF_RELEASED;
    req_complete(r, st);
    return UCS_STATUS_PTR(st);
  }
  op_attach(o, nullptr, r, false);
  r->aux = o;
  ssize_t rc;
  for (int tries = 0;; tries++) {
    if (claimed) {
      fi_msg_tagged m{};
      m.msg_iov = o->iov;
      m.iov_count = o->niov;
      m.addr = FI_ADDR_UNSPEC;
      m.tag = claimed->tag;
      m.ignore = 0;
      m.context = &o->fctx;
      rc = fi_trecvmsg(tp->ep, &m, FI_CLAIM | FI_COMPLETION);
    } else if (o->niov == 1) {
      rc = fi_trecv(tp->ep, o->iov[0].iov_base, o->iov[0].iov_len, nullptr, FI_ADDR_UNSPEC, tag, ~mask,
                    &o->fctx);
    } else {
      rc = fi_trecvv(tp->ep, o->iov, nullptr, o->niov, FI_ADDR_UNSPEC, tag, ~mask, &o->fctx);
    }
    if (rc != -FI_EAGAIN || tries > 10000) break;
    progress(w);
  }
  if (rc) {
    op_finish(w, o, from_fi(static_cast<int>(rc)));
    return UCS_STATUS_PTR(from_fi(static_cast<int>(rc)));
  }
  return req_return(r);
}

}  // namespace

void send_sync_ack(ucp_worker* w, uint64_t data) noexcept {
  ucp_ep* ep = ep_lookup(w, static_cast<uint32_t>(data >> 32) & 0x7fffffff);
  if (!ep || ep->state != EP_CONNECTED) return;
  frame f{};
  f.type = F_SYNC_ACK;
  f.dst = ep->remote_id;
  f.src = ep->id;
  f.aux = data & 0xffffffffu;
  send_ctrl_to(ep->tp, ep->dest, f, nullptr, 0);
}

void trecv_done(ucp_worker* w, op* o, const fi_cq_tagged_entry& e) noexcept {
  ucs_status_t st = UCS_OK;
  if (request* r = o->req) {
    r->info.sender_tag = e.tag;
    r->info.length = e.len;
    st = recv_dt_end(r, e.len);
  }
  if ((e.flags & FI_REMOTE_CQ_DATA) && (e.data >> 63)) send_sync_ack(w, e.data);
  op_finish(w, o, st);
}

// F_SYNC_ACK: the receiver matched and completed our synchronous send.
void sync_acked(ucp_worker* w, const frame& f) noexcept {
  request* r = rmap_get(w, static_cast<uint32_t>(f.aux));
  if (!r || r->kind != RK_SYNC_SEND || !r->ep || r->ep->id != f.dst) return;
  rmap_take(w, r->id);
  r->id = 0;
  r->flags &= ~RF_WAIT_ACK;
  if (!r->pending && !(r->flags & RF_COMPLETED))
    req_complete(r, r->status == UCS_INPROGRESS ? UCS_OK : r->status);
}

}  // namespace wucp

using namespace wucp;

UCP_EXPORT ucs_status_ptr_t ucp_tag_send_nbx(ucp_ep_h ep, const void* buffer, size_t count, ucp_tag_t tag,
                                             const ucp_request_param_t* param) {
  // Hot path, before tag_send's frame is built: bytes (no datatype given) that
  // the provider injects, on a connected endpoint of a single-threaded worker
  // with nothing queued. Anything else, a failed inject included, takes the
  // general path, which decides again.
  if (ep && (!param || !(param->op_attr_mask & (UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL))) &&
      !ep->w->mt && ep->state < EP_FAILED) [[likely]] {
    if (try_inject(ep, buffer, count, tag) == 0) [[likely]]
      return nullptr;
  }
  return tag_send(ep, buffer, count, tag, param, false, nullptr);
}

UCP_EXPORT ucs_status_ptr_t ucp_tag_send_sync_nbx(ucp_ep_h ep, const void* buffer, size_t count,
                                                  ucp_tag_t tag, const ucp_request_param_t* param) {
  return tag_send(ep, buffer, count, tag, param, true, nullptr);
}

UCP_EXPORT ucs_status_ptr_t ucp_tag_send_nb(ucp_ep_h ep, const void* buffer, size_t count,
                                            ucp_datatype_t datatype, ucp_tag_t tag, ucp_send_callback_t cb) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  p.datatype = datatype;
  return tag_send(ep, buffer, count, tag, &p, false, cb);
}

UCP_EXPORT ucs_status_ptr_t ucp_tag_send_sync_nb(ucp_ep_h ep, const void* buffer, size_t count,
                                                 ucp_datatype_t datatype, ucp_tag_t tag,
                                                 ucp_send_callback_t cb) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  p.datatype = datatype;
  return tag_send(ep, buffer, count, tag, &p, true, cb);
}

UCP_EXPORT ucs_status_t ucp_tag_send_nbr(ucp_ep_h ep, const void* buffer, size_t count,
                                         ucp_datatype_t datatype, ucp_tag_t tag, void* req) {
  if (!req) return UCS_ERR_INVALID_PARAM;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REQUEST;
  p.datatype = datatype;
  p.request = req;
  ucs_status_ptr_t sp = tag_send(ep, buffer, count, tag, &p, false, nullptr);
  return UCS_PTR_IS_PTR(sp) ? UCS_INPROGRESS : UCS_PTR_STATUS(sp);
}

UCP_EXPORT ucs_status_ptr_t ucp_tag_recv_nbx(ucp_worker_h worker, void* buffer, size_t count, ucp_tag_t tag,
                                             ucp_tag_t tag_mask, const ucp_request_param_t* param) {
  if (worker && !worker->mt) [[likely]]
    if (request* r = tag_recv_hot(worker, buffer, count, tag, tag_mask, param)) return req_return(r);
  return tag_recv(worker, buffer, count, tag, tag_mask, param, nullptr, nullptr, worker && !worker->mt);
}

UCP_EXPORT ucs_status_ptr_t ucp_tag_recv_nb(ucp_worker_h worker, void* buffer, size_t count,
                                            ucp_datatype_t datatype, ucp_tag_t tag, ucp_tag_t tag_mask,
                                            ucp_tag_recv_callback_t cb) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  p.datatype = datatype;
  return tag_recv(worker, buffer, count, tag, tag_mask, &p, cb, nullptr);
}

UCP_EXPORT ucs_status_t ucp_tag_recv_nbr(ucp_worker_h worker, void* buffer, size_t count,
                                         ucp_datatype_t datatype, ucp_tag_t tag, ucp_tag_t tag_mask,
                                         void* req) {
  if (!req) return UCS_ERR_INVALID_PARAM;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REQUEST;
  p.datatype = datatype;
  p.request = req;
  ucs_status_ptr_t sp = tag_recv(worker, buffer, count, tag, tag_mask, &p, nullptr, nullptr);
  return UCS_PTR_IS_PTR(sp) ? UCS_OK : UCS_PTR_STATUS(sp);
}

UCP_EXPORT ucp_tag_message_h ucp_tag_probe_nb(ucp_worker_h w, ucp_tag_t tag, ucp_tag_t tag_mask, int remove,
                                              ucp_tag_recv_info_t* info) {
  if (!w) return nullptr;
  worker_guard g(w);
  iface* tp = w->tps[0].get();
  op* o = op_alloc(w);
  if (!o) return nullptr;
  o->type = OP_TPEEK;
  o->tp = tp;
  fi_msg_tagged m{};
  m.addr = FI_ADDR_UNSPEC;
  m.tag = tag;
  m.ignore = ~tag_mask;
  m.context = &o->fctx;
  if (fi_trecvmsg(tp->ep, &m, FI_PEEK | (remove ? FI_CLAIM : 0) | FI_COMPLETION)) {
    op_free(w, o);
    return nullptr;
  }
  // The answer comes as a completion: read until it is there, keeping what
  // else arrives for the next ucp_worker_progress.
  for (long spins = 0; !(o->flags & OPF_PEEK_DONE) && spins < 10000000; spins++) {
    fi_cq_tagged_entry e[16];
    ssize_t k = fi_cq_read(tp->cq, e, 16);
    for (ssize_t i = 0; i < k; i++) {
      if (e[i].op_context == &o->fctx)
        dispatch(w, tp, e[i]);
      else {
        w->stash.emplace_back(tp, e[i]);
        w->attn = true;
      }
    }
    if (k == -FI_EAVAIL) handle_cq_error(w, tp);
  }
  if (!(o->flags & OPF_PEEK_DONE) || o->data) {
    // No message (FI_ENOMSG), or no answer at all.
    if (o->flags & OPF_PEEK_DONE) op_free(w, o);
    return nullptr;
  }
  if (info) {
    info->sender_tag = o->tag;
    info->length = o->raddr;
  }
  if (!remove) {
    op_free(w, o);
    return reinterpret_cast<ucp_tag_message_h>(&g_probe_seen);
  }
  o->flags = OPF_CLAIMED;
  return reinterpret_cast<ucp_tag_message_h>(o);
}

UCP_EXPORT ucs_status_ptr_t ucp_tag_msg_recv_nbx(ucp_worker_h worker, void* buffer, size_t count,
                                                 ucp_tag_message_h message,
                                                 const ucp_request_param_t* param) {
  auto* o = reinterpret_cast<op*>(message);
  if (!worker || !o || reinterpret_cast<uint8_t*>(message) == &g_probe_seen || o->type != OP_TPEEK ||
      !(o->flags & OPF_CLAIMED))
    return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  o->flags = 0;
  return tag_recv(worker, buffer, count, o->tag, ~uint64_t{0}, param, nullptr, o);
}

UCP_EXPORT ucs_status_ptr_t ucp_tag_msg_recv_nb(ucp_worker_h worker, void* buffer, size_t count,
                                                ucp_datatype_t datatype, ucp_tag_message_h message,
                                                ucp_tag_recv_callback_t cb) {
  auto* o = reinterpret_cast<op*>(message);
  if (!worker || !o || reinterpret_cast<uint8_t*>(message) == &g_probe_seen || o->type != OP_TPEEK ||
      !(o->flags & OPF_CLAIMED))
    return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  o->flags = 0;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  p.datatype = datatype;
  return tag_recv(worker, buffer, count, o->tag, ~uint64_t{0}, &p, cb, o);
}

// Receives posted to the provider are cancelled there (the completion comes
// back as FI_ECANCELED: UCS_ERR_CANCELED); sends in flight cannot be.
UCP_EXPORT void ucp_request_cancel(ucp_worker_h worker, void* req) {
  if (!worker || !req || UCS_PTR_IS_ERR(req)) return;
  worker_guard g(worker);
  request* r = request::of(req);
  if (r->flags & RF_COMPLETED) return;
  if (r->kind == RK_TAG_RECV && r->ctx_type == OP_TRECV_REQ) {
    fi_cancel(&worker->tp0->ep->fid, &r->fctx);
    return;
  }
  if (r->kind == RK_TAG_RECV) {
    auto* o = static_cast<op*>(r->aux);
    if (o && o->type == OP_TRECV && o->req == r) fi_cancel(&o->tp->ep->fid, &o->fctx);
    return;
  }
  if (r->kind == RK_STREAM_RECV) stream_cancel(r);
}
