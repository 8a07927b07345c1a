// SPDX-License-Identifier: BSD-3-Clause
// Frames and active messages. A frame arrives in a posted FI_MSG buffer; an
// AM up to the buffer size travels whole in one frame (eager), a larger one
// sends a request-to-send with a registration of its data, which the receiver
// pulls with fi_read (rendezvous) and acknowledges.
#include <cstdlib>

#include "ucp_int.hpp"

namespace wucp {

namespace {

constexpr uint32_t rndv_magic = 0x52444e56;  // "RDNV"
constexpr size_t am_inject_max = 4096;       // the stack copy of an injected AM frame

// What the application gets as data with UCP_AM_RECV_ATTR_FLAG_RNDV.
struct rndv_desc {
  uint32_t magic = rndv_magic;
  uint32_t ep_id = no_id;  // the receiver's endpoint towards the sender
  uint32_t req_id = 0;     // the sender's request
  uint64_t raddr = 0, rkey = 0, len = 0;
  bool taken = false;
};

void send_ats(ucp_worker* w, uint32_t ep_id, uint32_t req_id, bool error) noexcept {
  ucp_ep* ep = ep_lookup(w, ep_id);
  if (!ep || ep->state != EP_CONNECTED) return;
  frame f{};
  f.type = F_AM_ATS;
  f.flags = error ? FF_ERROR : 0;
  f.dst = ep->remote_id;
  f.src = ep->id;
  f.aux = req_id;
  send_ctrl_to(ep->tp, ep->dest, f, nullptr, 0);
}

// Keeps the eager buffer for the application (UCS_INPROGRESS) and posts a
// fresh one in its place.
void hold_rx(ucp_worker* w, iface* tp, rx_buf* b, void* data) {
  b->held = true;
  if (data) w->am_held[data] = {1, b};
  replace_rx(tp, b->size);
}

// The buffer a rendezvous message for an old handler is fetched into. The
// last one released is kept for the next message of about its size: a large
// block fresh from malloc is mapped page by page at its first touch (for
// 2 MiB, faults cost more than the copy), and malloc returns it to the
// system at free.
constexpr size_t spare_min = 64 << 10;

void* am_buffer(ucp_worker* w, size_t len) noexcept {
  if (w->am_spare && len <= w->am_spare_len && len >= w->am_spare_len / 2) {
    void* p = w->am_spare;
    w->am_spare = nullptr;
    return p;
  }
  return malloc(len ? len : 1);
}

void am_buffer_release(ucp_worker* w, void* p, size_t len) noexcept {
  if (!p) return;
  if (len < spare_min || w->destroying) {
    free(p);
    return;
  }
  free(w->am_spare);
  w->am_spare = p;
  w->am_spare_len = len;
}

struct old_am_ctx {
  uint32_t am_id;
  uint32_t ep_id;
  uint32_t req_id;
  bool reply;
  void* data;
  size_t len;
};

// The whole message of a rendezvous AM for an old-style handler has arrived.
void old_am_fetched(request* r) {
  auto* c = static_cast<old_am_ctx*>(r->aux);
  ucp_worker* w = r->w;
  bool ok = r->status == UCS_OK;
  send_ats(w, c->ep_id, c->req_id, !ok);
  if (ok && c->am_id < w->am.size() && w->am[c->am_id].old_cb) {
    auto& h = w->am[c->am_id];
    w->am_called = true;
    ucp_ep* reply = c->reply ? ep_lookup(w, c->ep_id) : nullptr;
    ucs_status_t st = h.old_cb(h.arg, c->data, c->len, reply, UCP_CB_PARAM_FLAG_DATA);
    if (st == UCS_INPROGRESS) {
      w->am_held[c->data] = {2, c->data, c->len};
      c->data = nullptr;
    }
  }
  am_buffer_release(w, c->data, c->len);
  ucp_ep* ep = ep_lookup(w, c->ep_id);
  delete c;
  r->aux = nullptr;
  if (ep && ep->am_fetching) {
    ep->am_fetching--;
    am_drain(w, ep);
  }
}

}  // namespace

// The active messages that waited behind a fetched one, in order, up to the
// next that must be fetched first.
void am_drain(ucp_worker* w, ucp_ep* ep) noexcept {
  while (!ep->am_fetching && !ep->am_later.empty() && ep->state != EP_CLOSED && !w->destroying) {
    auto [b, len] = ep->am_later.front();
    ep->am_later.pop_front();
    b->held = false;
    frame f;
    memcpy(&f, b->data, sizeof f);
    am_handle(w, b->tp, b, f, len, true);
    if (!b->held) repost_rx(b->tp, b);
  }
}

// Frames that arrived for a client endpoint before its connection completed.
void replay_early(ucp_ep* ep) noexcept {
  auto early = std::move(ep->early);
  ep->early.clear();
  for (auto& [b, len] : early) {
    b->held = false;  // reposted after it is handled (its replacement stays posted too)
    frame_recv(ep->w, b->tp, b, len);
  }
}

void am_read_done(ucp_worker* w, void* desc, bool ok) noexcept {
  auto* d = static_cast<rndv_desc*>(desc);
  send_ats(w, d->ep_id, d->req_id, !ok);
  delete d;
}

void frame_recv(ucp_worker* w, iface* tp, rx_buf* b, size_t len) noexcept {
  if (len >= sizeof(frame) && len <= b->size) {
    frame f;
    memcpy(&f, b->data, sizeof f);
    const uint8_t* payload = b->data + sizeof f;
    size_t plen = len - sizeof f;
    if (f.type != F_CONN_REQ && f.type != F_CONN_REP) {
      // A server may send right after accepting, before this client has
      // read its CONNECTED event (which tells it the server's endpoint id):
      // read the event queue, and if the event is still on its way, keep the
      // frame until it arrives (ep_connected replays it).
      ucp_ep* ep = ep_lookup(w, f.dst);
      if (ep && ep->state == EP_CONNECTING && (ep->flags & EPF_CM_CLIENT)) {
        cm_progress(w, true);
        if (ep->state == EP_CONNECTING) {
          try {
            ep->early.emplace_back(b, len);
            hold_rx(w, tp, b, nullptr);
            return;
          } catch (...) {}
        }
      }
    }
    switch (f.type) {
      case F_CONN_REQ:
        ep_conn_req(w, tp, f, payload, plen);
        break;
      case F_CONN_REP:
        ep_conn_rep(w, f);
        break;
      case F_SYNC_ACK:
        sync_acked(w, f);
        break;
      case F_AM:
      case F_AM_RTS:
        am_handle(w, tp, b, f, len, false);
        break;
      case F_AM_ATS:
        am_ats(w, f);
        break;
      case F_STREAM: {
        ucp_ep* ep = ep_lookup(w, f.dst);
        if (ep && ep->remote_id == f.src && f.len == plen) stream_handle(w, ep, payload, plen);
        break;
      }
      case F_CLOSE:
        ep_remote_closed(w, f);
        break;
      default:
        break;  // keepalive, or a frame this version does not know
    }
  }
  if (!b->held && !w->destroying) repost_rx(tp, b);
}

void am_handle(ucp_worker* w, iface* tp, rx_buf* b, const frame& f, size_t total, bool in_turn) noexcept {
  size_t plen = total - sizeof(frame);
  if (f.hdr_len > plen) return;
  const uint8_t* header = b->data + sizeof(frame);
  ucp_ep* ep = ep_lookup(w, f.dst);
  if (ep && ep->remote_id != f.src) ep = nullptr;
  if (ep && !in_turn && (ep->am_fetching || !ep->am_later.empty())) {
    // An earlier message of this endpoint is still being fetched: this one
    // is handled after it (am_drain), as UCX hands them over in order.
    try {
      ep->am_later.emplace_back(b, total);
      hold_rx(w, tp, b, nullptr);
      return;
    } catch (...) {}  // no memory: handled now, out of order rather than lost
  }
  ucp_ep* reply = (f.flags & FF_REPLY) ? ep : nullptr;
  const ucp_worker::am_handler* h = f.am_id < w->am.size() ? &w->am[f.am_id] : nullptr;
  if (h && !h->cb && !h->old_cb) h = nullptr;
  if (f.type == F_AM) {
    size_t dlen = plen - f.hdr_len;
    if (dlen != f.len) return;
    if (!h) {
      WUCP_LOG(L_WARN, "active message %u dropped: no handler", f.am_id);
      return;
    }
    auto* data = const_cast<uint8_t*>(header + f.hdr_len);
    w->am_called = true;
    ucs_status_t st;
    if (h->cb) {
      ucp_am_recv_param_t prm{};
      prm.recv_attr = UCP_AM_RECV_ATTR_FLAG_DATA | (reply ? UCP_AM_RECV_ATTR_FIELD_REPLY_EP : 0);
      prm.reply_ep = reply;
      st = h->cb(h->arg, f.hdr_len ? header : nullptr, f.hdr_len, dlen ? data : nullptr, dlen, &prm);
    } else {
      st = h->old_cb(h->arg, data, dlen, reply, UCP_CB_PARAM_FLAG_DATA);
    }
    if (st == UCS_INPROGRESS) {
      try {
        hold_rx(w, tp, b, data);
      } catch (...) {}
    }
    return;
  }
  // Rendezvous: the data stays at the sender until it is pulled.
  if (!ep) return;
  if (!h) {
    WUCP_LOG(L_WARN, "active message %u dropped: no handler", f.am_id);
    send_ats(w, ep->id, static_cast<uint32_t>(f.aux), true);
    return;
  }
  if (h->old_cb) {
    // Old handlers get whole messages: fetch first, call when it is here.
    auto* c = new (std::nothrow)
        old_am_ctx{f.am_id, ep->id, static_cast<uint32_t>(f.aux), reply != nullptr, nullptr, f.len};
    if (c) c->data = am_buffer(w, f.len);
    request* r = c && c->data ? req_alloc(w) : nullptr;
    op* o = r ? op_alloc(w) : nullptr;
    if (!o) {
      if (r) req_complete(r, UCS_ERR_NO_MEMORY);
      if (c) am_buffer_release(w, c->data, c->len);
      delete c;
      send_ats(w, ep->id, static_cast<uint32_t>(f.aux), true);
      return;
    }
    r->kind = RK_AM_DATA;
    r->cbk = CB_INTERNAL;
    r->cb = reinterpret_cast<void*>(&old_am_fetched);
    r->aux = c;
    r->flags |= RF_RELEASED;
    o->type = OP_READ;
    o->iov[0] = {c->data, f.len};
    o->niov = 1;
    o->raddr = f.raddr;
    o->rkey = f.rkey;
    o->dest = ep->dest;
    op_attach(o, ep, r, false);
    ep->am_fetching++;  // old_am_fetched counts it back, however the read ends
    int rc = issue(w, o);
    if (rc == -FI_EAGAIN)
      enqueue(ep, o);
    else if (rc < 0)
      op_finish(w, o, from_fi(rc));
    return;
  }
  auto* d = new (std::nothrow) rndv_desc();
  if (!d) {
    send_ats(w, ep->id, static_cast<uint32_t>(f.aux), true);
    return;
  }
  d->ep_id = ep->id;
  d->req_id = static_cast<uint32_t>(f.aux);
  d->raddr = f.raddr;
  d->rkey = f.rkey;
  d->len = f.len;
  try {
    w->am_held[d] = {3, d};
  } catch (...) {
    delete d;
    send_ats(w, ep->id, static_cast<uint32_t>(f.aux), true);
    return;
  }
  w->am_called = true;
  ucp_am_recv_param_t prm{};
  prm.recv_attr = UCP_AM_RECV_ATTR_FLAG_RNDV | (reply ? UCP_AM_RECV_ATTR_FIELD_REPLY_EP : 0);
  prm.reply_ep = reply;
  ucs_status_t st = h->cb(h->arg, f.hdr_len ? header : nullptr, f.hdr_len, d, f.len, &prm);
  if (st != UCS_INPROGRESS && !d->taken) {
    // The handler neither kept nor fetched the data: the sender is released.
    w->am_held.erase(d);
    send_ats(w, d->ep_id, d->req_id, false);
    delete d;
  }
}

// The receiver pulled (or dropped) our rendezvous data.
void am_ats(ucp_worker* w, const frame& f) noexcept {
  request* r = rmap_get(w, static_cast<uint32_t>(f.aux));
  if (!r || !r->ep || r->ep->id != f.dst) return;
  rmap_take(w, r->id);
  r->id = 0;
  r->flags &= ~RF_WAIT_ACK;
  if (!r->pending && !(r->flags & RF_COMPLETED))
    req_complete(r, r->status == UCS_INPROGRESS ? UCS_OK : r->status);
}

namespace {

ucs_status_ptr_t am_send(ucp_ep* ep, unsigned id, const void* header, size_t hlen, const void* buffer,
                         size_t count, const ucp_request_param_t* p, ucp_send_callback_t old_cb,
                         bool reply_flag) noexcept {
  if (!ep || (hlen && !header)) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  ucp_worker* w = ep->w;
  worker_guard g(w);
  if (ep->state >= EP_FAILED)
    return UCS_STATUS_PTR(ep->state == EP_FAILED ? ep->fail_status : UCS_ERR_NOT_CONNECTED);
  ucp_datatype_t dt =
      (p && (p->op_attr_mask & UCP_OP_ATTR_FIELD_DATATYPE)) ? p->datatype : ucp_dt_make_contig(1);
  uint32_t flags = (p && (p->op_attr_mask & UCP_OP_ATTR_FIELD_FLAGS)) ? p->flags : 0;
  dt_view v;
  if (!dt_describe(dt, buffer, count, v, true)) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  // Anything but contiguous data is packed first; from here on it is a
  // contiguous buffer the send owns.
  void* packed = nullptr;
  if (v.cls != UCP_DATATYPE_CONTIG) {
    ucs_status_t st = dt_pack_alloc(dt, buffer, count, &packed, &v.length);
    if (st != UCS_OK) return UCS_STATUS_PTR(st);
    buffer = packed;
  }
  struct packed_guard {
    void*& p;
    ~packed_guard() { free(p); }
  } pg{packed};
  size_t cap = w->ctx->cfg.rx_buf_size;
  if (hlen > cap - sizeof(frame) - 64) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  frame f{};
  f.am_id = id;
  f.hdr_len = static_cast<uint32_t>(hlen);
  f.len = v.length;
  f.flags = (reply_flag || (flags & UCP_AM_SEND_FLAG_REPLY)) ? FF_REPLY : 0;
  bool eager = sizeof(frame) + hlen + v.length <= cap && !(flags & UCP_AM_SEND_FLAG_RNDV);
  bool want_req = p && (p->op_attr_mask & UCP_OP_ATTR_FLAG_NO_IMM_CMPL);
  // A request that sends from the application's buffers (or from the
  // packed copy, which becomes the request's).
  auto send_request = [&]() -> request* {
    request* r = req_from_param(w, p);
    if (!r) return nullptr;
    r->kind = RK_SEND;
    req_set_any_cb(r, p, CB_SEND_NBX, reinterpret_cast<void*>(old_cb), CB_SEND_NB);
    r->bounce = packed;
    packed = nullptr;
    return r;
  };
  if (eager) {
    f.type = F_AM;
    const bool ready = ep->state == EP_CONNECTED && ep->pending.empty();
    if (!ready && !(p && (p->op_attr_mask & UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL))) {
      // The transport takes no frames now: the message waits in the
      // endpoint's queue as a request holding the application's data, as
      // UCX's pending sends do, rather than as a copy done at return. A
      // sender faster than its receiver is held back by its own requests
      // instead of piling up copies without bound.
      request* r = send_request();
      if (!r) return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
      int rc = send_frame(ep, f, header, hlen, buffer, v.length, r, false);
      if (rc < 0) req_complete(r, from_fi(rc));
      return req_return(r);
    }
    // Sent from a copy: the application's buffers are free at return, as
    // with UCX's short and bcopy protocols. A frame the provider injects
    // is copied on the stack: no allocation, no completion to reap (an AM
    // is not something ucp_ep_flush waits for).
    const size_t total = sizeof f + hlen + v.length;
    if (ready && total <= ep->tp->inject && total <= am_inject_max) {
      alignas(16) uint8_t buf[am_inject_max];
      f.dst = ep->remote_id;
      f.src = ep->id;
      memcpy(buf, &f, sizeof f);
      if (hlen) memcpy(buf + sizeof f, header, hlen);
      if (v.length) memcpy(buf + sizeof f + hlen, buffer, v.length);
      ssize_t rc = fi_inject(ep->tp->ep, buf, total, ep->dest);
      if (rc == 0) return want_req ? imm_complete(w, p, UCS_OK, CB_SEND_NBX) : nullptr;
      if (rc != -FI_EAGAIN) return UCS_STATUS_PTR(from_fi(static_cast<int>(rc)));
    }
    int rc = send_frame(ep, f, header, hlen, buffer, v.length, nullptr, true);
    if (rc < 0) return UCS_STATUS_PTR(from_fi(rc));
    if (!want_req) return nullptr;
    return imm_complete(w, p, UCS_OK, CB_SEND_NBX);
  }
  // Rendezvous: register the data (packed first if it is not contiguous).
  request* r = send_request();
  if (!r) return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
  const void* src = buffer;
  domain_tp* d = ep->tp->d;
  uint64_t key = 0;
  {
    std::lock_guard l(w->ctx->lock);
    key = d->prov_key ? 0 : w->ctx->next_key++;
  }
  int rc = fi_mr_reg(d->domain, src, v.length, FI_REMOTE_READ, 0, key, 0, &r->mr, nullptr);
  if (rc) {
    r->flags |= RF_RELEASED;
    req_complete(r, from_fi(rc));
    return UCS_STATUS_PTR(from_fi(rc));
  }
  try {
    r->id = rmap_add(w, r);
  } catch (...) {
    r->flags |= RF_RELEASED;
    req_complete(r, UCS_ERR_NO_MEMORY);
    return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
  }
  r->flags |= RF_WAIT_ACK;
  f.type = F_AM_RTS;
  f.raddr = d->virt_addr ? reinterpret_cast<uintptr_t>(src) : 0;
  f.rkey = fi_mr_key(r->mr);
  f.aux = r->id;
  rc = send_frame(ep, f, header, hlen, nullptr, 0, r, false);
  if (rc < 0) {
    ucs_status_t st = from_fi(rc);
    req_complete(r, st);
    return req_return(r);
  }
  return req_return(r);
}

}  // namespace

}  // namespace wucp

using namespace wucp;

UCP_EXPORT ucs_status_t ucp_worker_set_am_handler(ucp_worker_h w, uint16_t id, ucp_am_callback_t cb,
                                                  void* arg, uint32_t flags) {
  if (!w) return UCS_ERR_INVALID_PARAM;
  if (!(w->ctx->features & UCP_FEATURE_AM)) return UCS_ERR_INVALID_PARAM;
  worker_guard g(w);
  try {
    if (id >= w->am.size()) w->am.resize(id + 1u);
  } catch (...) {
    return UCS_ERR_NO_MEMORY;
  }
  w->am[id] = {nullptr, cb, arg, flags};
  return UCS_OK;
}

UCP_EXPORT ucs_status_t ucp_worker_set_am_recv_handler(ucp_worker_h w, const ucp_am_handler_param_t* param) {
  if (!w || !param) return UCS_ERR_INVALID_PARAM;
  if (!(w->ctx->features & UCP_FEATURE_AM)) return UCS_ERR_INVALID_PARAM;
  if (!(param->field_mask & UCP_AM_HANDLER_PARAM_FIELD_ID) ||
      !(param->field_mask & UCP_AM_HANDLER_PARAM_FIELD_CB))
    return UCS_ERR_INVALID_PARAM;
  if (param->id > 0xffff) return UCS_ERR_INVALID_PARAM;
  uint32_t flags = (param->field_mask & UCP_AM_HANDLER_PARAM_FIELD_FLAGS) ? param->flags : 0;
  if (flags & ~uint32_t{UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA}) return UCS_ERR_INVALID_PARAM;
  worker_guard g(w);
  try {
    if (param->id >= w->am.size()) w->am.resize(param->id + 1u);
  } catch (...) {
    return UCS_ERR_NO_MEMORY;
  }
  w->am[param->id] = {param->cb, nullptr,
                      (param->field_mask & UCP_AM_HANDLER_PARAM_FIELD_ARG) ? param->arg : nullptr, flags};
  return UCS_OK;
}

UCP_EXPORT ucs_status_ptr_t ucp_am_send_nbx(ucp_ep_h ep, unsigned id, const void* header,
                                            size_t header_length, const void* buffer, size_t count,
                                            const ucp_request_param_t* param) {
  if (ep && !(ep->w->ctx->features & UCP_FEATURE_AM)) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  return am_send(ep, id, header, header_length, buffer, count, param, nullptr, false);
}

UCP_EXPORT ucs_status_ptr_t ucp_am_send_nb(ucp_ep_h ep, uint16_t id, const void* buffer, size_t count,
                                           ucp_datatype_t datatype, ucp_send_callback_t cb, unsigned flags) {
  if (ep && !(ep->w->ctx->features & UCP_FEATURE_AM)) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  p.datatype = datatype;
  return am_send(ep, id, nullptr, 0, buffer, count, &p, cb, flags & UCP_AM_SEND_REPLY);
}

UCP_EXPORT ucs_status_ptr_t ucp_am_recv_data_nbx(ucp_worker_h w, void* data_desc, void* buffer, size_t count,
                                                 const ucp_request_param_t* param) {
  if (!w || !data_desc) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  worker_guard g(w);
  auto it = w->am_held.find(data_desc);
  if (it == w->am_held.end()) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  ucp_datatype_t dt =
      (param && (param->op_attr_mask & UCP_OP_ATTR_FIELD_DATATYPE)) ? param->datatype : ucp_dt_make_contig(1);
  dt_view v;
  if (!dt_describe(dt, buffer, count, v, false)) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  bool contig = v.cls == UCP_DATATYPE_CONTIG;
  if (it->second.kind != 3) {
    // Eager data the handler kept: copy it out and release it.
    if (it->second.kind != 1) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
    auto* b = static_cast<rx_buf*>(it->second.obj);
    frame f;
    memcpy(&f, b->data, sizeof f);
    ucs_status_t st;
    if (contig) {
      st = f.len > v.length ? UCS_ERR_MESSAGE_TRUNCATED : dt_unpack(dt, buffer, count, data_desc, f.len);
    } else {
      request tmp;
      size_t cap = 0;
      st = recv_dt_begin(&tmp, dt, buffer, count, &cap);
      if (st == UCS_OK) {
        if (f.len > cap) {
          recv_dt_abort(&tmp);
          st = UCS_ERR_MESSAGE_TRUNCATED;
        } else {
          memcpy(tmp.bounce, data_desc, f.len);
          st = recv_dt_end(&tmp, f.len);
        }
        free(tmp.bounce);
      }
    }
    size_t len = f.len;
    w->am_held.erase(it);
    repost_rx(b->tp, b);
    return imm_complete(w, param, st, CB_AM_DATA, len);
  }
  auto* d = static_cast<rndv_desc*>(it->second.obj);
  if (d->magic != rndv_magic || d->taken) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  ucp_ep* ep = ep_lookup(w, d->ep_id);
  if (!ep || ep->state != EP_CONNECTED) return UCS_STATUS_PTR(UCS_ERR_NOT_CONNECTED);
  if (contig && d->len > v.length) return UCS_STATUS_PTR(UCS_ERR_MESSAGE_TRUNCATED);
  request* r = req_from_param(w, param);
  if (!r) return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
  op* o = op_alloc(w);
  if (!o) {
    r->flags |= RF_RELEASED;
    req_complete(r, UCS_ERR_NO_MEMORY);
    return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
  }
  r->kind = RK_AM_DATA;
  req_set_cb(r, param, CB_AM_DATA);
  r->info.length = d->len;
  void* dst = buffer;
  if (!contig) {
    size_t cap = 0;
    ucs_status_t st = recv_dt_begin(r, dt, buffer, count, &cap);
    if (st == UCS_OK && cap < d->len) st = UCS_ERR_MESSAGE_TRUNCATED;
    if (st != UCS_OK) {
      op_free(w, o);
      r->flags |= RF_RELEASED;
      req_complete(r, st);
      return UCS_STATUS_PTR(st);
    }
    dst = r->bounce;
  }
  d->taken = true;
  w->am_held.erase(it);
  // The read completes the request; its completion also acknowledges the
  // sender (am_read_done).
  o->type = OP_READ;
  o->iov[0] = {dst, d->len};
  o->niov = 1;
  o->raddr = d->raddr;
  o->rkey = d->rkey;
  o->dest = ep->dest;
  o->bounce = d;
  o->flags |= OPF_AM_ACK;
  op_attach(o, ep, r, false);
  int rc = issue(w, o);
  if (rc == -FI_EAGAIN)
    enqueue(ep, o);
  else if (rc < 0)
    op_finish(w, o, from_fi(rc));
  return req_return(r);
}

UCP_EXPORT void ucp_am_data_release(ucp_worker_h w, void* data) {
  if (!w || !data) return;
  worker_guard g(w);
  auto it = w->am_held.find(data);
  if (it == w->am_held.end()) return;
  auto held = it->second;
  w->am_held.erase(it);
  switch (held.kind) {
    case 1:
      repost_rx(static_cast<rx_buf*>(held.obj)->tp, static_cast<rx_buf*>(held.obj));
      break;
    case 2:
      am_buffer_release(w, held.obj, held.len);
      break;
    case 3: {
      auto* d = static_cast<rndv_desc*>(held.obj);
      send_ats(w, d->ep_id, d->req_id, false);
      delete d;
      break;
    }
    default:
      break;
  }
}

namespace wucp {
void am_release_all(ucp_worker* w) noexcept {
  for (auto& kv : w->am_held) {
    if (kv.second.kind == 2) free(kv.second.obj);
    if (kv.second.kind == 3) delete static_cast<rndv_desc*>(kv.second.obj);
    if (kv.second.kind == 4) delete[] static_cast<uint8_t*>(kv.second.obj);
  }
  w->am_held.clear();
  free(w->am_spare);
  w->am_spare = nullptr;
}
}  // namespace wucp
