// SPDX-License-Identifier: BSD-3-Clause
// Streams: an ordered byte stream per endpoint pair. Sends are cut into
// frames no larger than a receive buffer (in order: FI_ORDER_SAS); arriving
// bytes fill posted stream receives first, the rest waits on the endpoint.
#include <cstdlib>

#include "ucp_int.hpp"

namespace wucp {

namespace {

size_t chunk_size(ucp_worker* w) noexcept {
  return w->ctx->cfg.rx_buf_size - sizeof(frame);
}

// Where a receive's bytes go: the application's contiguous buffer, or the
// bounce of an IOV/generic receive.
uint8_t* recv_base(request* r) noexcept {
  return static_cast<uint8_t*>(r->bounce ? r->bounce : r->buf);
}

void finish_recv(request* r, ucs_status_t st) noexcept {
  r->info.length = r->got;
  if (st == UCS_OK && r->bounce) st = recv_dt_end(r, r->got);
  req_complete(r, st);
}

void mark_ready(ucp_ep* ep) noexcept {
  if (!ep->stream_link.linked()) ep->w->stream_ready.push_back(&ep->stream_link);
}

// Takes up to n queued bytes into dst.
size_t take(ucp_ep* ep, uint8_t* dst, size_t n) noexcept {
  size_t got = 0;
  size_t i = 0;
  while (got < n && i < ep->stream_q.size()) {
    stream_chunk& c = ep->stream_q[i];
    size_t k = std::min(n - got, c.len - c.off);
    memcpy(dst + got, c.data.get() + c.off, k);
    c.off += k;
    got += k;
    if (c.off == c.len) i++;
  }
  ep->stream_q.erase(ep->stream_q.begin(), ep->stream_q.begin() + static_cast<long>(i));
  ep->stream_bytes -= got;
  return got;
}

ucs_status_ptr_t stream_send(ucp_ep* ep, const void* buffer, size_t count, const ucp_request_param_t* p,
                             ucp_send_callback_t old_cb) noexcept {
  if (!ep) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  ucp_worker* w = ep->w;
  if (!(w->ctx->features & UCP_FEATURE_STREAM)) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  worker_guard g(w);
  if (ep->state >= EP_FAILED)
    return UCS_STATUS_PTR(ep->state == EP_FAILED ? ep->fail_status : UCS_ERR_NOT_CONNECTED);
  ucp_datatype_t dt =
      (p && (p->op_attr_mask & UCP_OP_ATTR_FIELD_DATATYPE)) ? p->datatype : ucp_dt_make_contig(1);
  dt_view v;
  if (!dt_describe(dt, buffer, count, v, true)) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  bool want_req = p && (p->op_attr_mask & UCP_OP_ATTR_FLAG_NO_IMM_CMPL);
  if (!v.length && v.cls != UCP_DATATYPE_GENERIC)
    return want_req ? imm_complete(w, p, UCS_OK, CB_SEND_NBX) : nullptr;
  const uint8_t* src = static_cast<const uint8_t*>(buffer);
  void* packed = nullptr;
  if (v.cls != UCP_DATATYPE_CONTIG) {
    ucs_status_t st = dt_pack_alloc(dt, buffer, count, &packed, &v.length);
    if (st != UCS_OK) return UCS_STATUS_PTR(st);
    src = static_cast<uint8_t*>(packed);
  }
  if (!v.length) {
    free(packed);
    return want_req ? imm_complete(w, p, UCS_OK, CB_SEND_NBX) : nullptr;
  }
  size_t chunk = chunk_size(w);
  frame f{};
  f.type = F_STREAM;
  if (v.length <= chunk) {
    // One frame from a copy: done at return.
    f.len = v.length;
    int rc = send_frame(ep, f, src, v.length, nullptr, 0, nullptr, true);
    free(packed);
    if (rc < 0) return UCS_STATUS_PTR(from_fi(rc));
    return want_req ? imm_complete(w, p, UCS_OK, CB_SEND_NBX) : nullptr;
  }
  request* r = req_from_param(w, p);
  if (!r) {
    free(packed);
    return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
  }
  r->kind = RK_SEND;
  req_set_any_cb(r, p, CB_SEND_NBX, reinterpret_cast<void*>(old_cb), CB_SEND_NB);
  r->bounce = packed;  // freed when the request completes
  r->pending++;        // held while the frames are handed out
  for (size_t off = 0; off < v.length; off += chunk) {
    size_t n = std::min(chunk, v.length - off);
    f.len = n;
    int rc = send_frame(ep, f, src + off, n, nullptr, 0, r, false);
    if (rc < 0) {
      if (r->status == UCS_INPROGRESS) r->status = from_fi(rc);
      break;
    }
  }
  req_op_done(r, UCS_OK);
  return req_return(r);
}

ucs_status_ptr_t stream_recv(ucp_ep* ep, void* buffer, size_t count, size_t* length,
                             const ucp_request_param_t* p, ucp_stream_recv_callback_t old_cb,
                             unsigned old_flags) noexcept {
  if (!ep) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  ucp_worker* w = ep->w;
  if (!(w->ctx->features & UCP_FEATURE_STREAM)) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  worker_guard g(w);
  ucp_datatype_t dt =
      (p && (p->op_attr_mask & UCP_OP_ATTR_FIELD_DATATYPE)) ? p->datatype : ucp_dt_make_contig(1);
  unsigned flags = (p && (p->op_attr_mask & UCP_OP_ATTR_FIELD_FLAGS)) ? p->flags : old_flags;
  dt_view v;
  if (!dt_describe(dt, buffer, count, v, false) || (!v.length && v.cls != UCP_DATATYPE_GENERIC))
    return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  bool contig = v.cls == UCP_DATATYPE_CONTIG;
  // Data already here and nobody queued before us: take it now.
  if (ep->stream_recvs.empty() && ep->stream_bytes && contig) {
    size_t want = v.length;
    if (!(flags & UCP_STREAM_RECV_FLAG_WAITALL) || ep->stream_bytes >= want) {
      size_t got = take(ep, static_cast<uint8_t*>(buffer), want);
      if (length) *length = got;
      if (ep->stream_bytes) mark_ready(ep);
      return imm_complete(w, p, UCS_OK, CB_STREAM_NBX, got);
    }
  }
  if (ep->state >= EP_FAILED)
    return UCS_STATUS_PTR(ep->state == EP_FAILED ? ep->fail_status : UCS_ERR_NOT_CONNECTED);
  request* r = req_from_param(w, p);
  if (!r) return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
  r->kind = RK_STREAM_RECV;
  req_set_any_cb(r, p, CB_STREAM_NBX, reinterpret_cast<void*>(old_cb), CB_STREAM_NB);
  r->buf = buffer;
  r->count = count;
  r->dt = dt;
  r->want = v.length;
  r->got = 0;
  r->sflags = flags;
  r->ep = ep;
  if (!contig) {
    ucs_status_t st = recv_dt_begin(r, dt, buffer, count, &r->want);
    if (st == UCS_OK && !r->want) st = UCS_ERR_INVALID_PARAM;
    if (st != UCS_OK) {
      r->flags |= RF_RELEASED;
      req_complete(r, st);
      return UCS_STATUS_PTR(st);
    }
  }
  if (ep->stream_recvs.empty() && ep->stream_bytes) r->got = take(ep, recv_base(r), r->want);
  if (r->got && (!(flags & UCP_STREAM_RECV_FLAG_WAITALL) || r->got == r->want)) {
    if (length) *length = r->got;
    finish_recv(r, UCS_OK);
    return req_return(r);
  }
  try {
    ep->stream_recvs.push_back(r);
  } catch (...) {
    r->flags |= RF_RELEASED;
    req_complete(r, UCS_ERR_NO_MEMORY);
    return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
  }
  return req_return(r);
}

}  // namespace

void stream_handle(ucp_worker* w, ucp_ep* ep, const uint8_t* data, size_t len) noexcept {
  (void)w;
  if (!(w->ctx->features & UCP_FEATURE_STREAM)) return;
  while (len && !ep->stream_recvs.empty()) {
    request* r = ep->stream_recvs.front();
    size_t n = std::min(len, r->want - r->got);
    memcpy(recv_base(r) + r->got, data, n);
    r->got += n;
    data += n;
    len -= n;
    if (!(r->sflags & UCP_STREAM_RECV_FLAG_WAITALL) || r->got == r->want) {
      ep->stream_recvs.erase(ep->stream_recvs.begin());
      finish_recv(r, UCS_OK);
    }
  }
  if (!len) return;
  try {
    stream_chunk c;
    c.data.reset(new uint8_t[len]);
    memcpy(c.data.get(), data, len);
    c.len = len;
    ep->stream_q.push_back(std::move(c));
    ep->stream_bytes += len;
    mark_ready(ep);
  } catch (...) {
    WUCP_LOG(L_ERROR, "stream data lost: out of memory");
  }
}

void stream_fail(ucp_ep* ep, ucs_status_t st) noexcept {
  auto rs = std::move(ep->stream_recvs);
  ep->stream_recvs.clear();
  for (request* r : rs) finish_recv(r, r->got ? UCS_OK : st);
}

void stream_cancel(request* r) noexcept {
  ucp_ep* ep = r->ep;
  if (!ep) return;
  auto& v = ep->stream_recvs;
  for (size_t i = 0; i < v.size(); i++)
    if (v[i] == r) {
      v.erase(v.begin() + static_cast<long>(i));
      finish_recv(r, UCS_ERR_CANCELED);
      return;
    }
}

}  // namespace wucp

using namespace wucp;

UCP_EXPORT ucs_status_ptr_t ucp_stream_send_nbx(ucp_ep_h ep, const void* buffer, size_t count,
                                                const ucp_request_param_t* param) {
  return stream_send(ep, buffer, count, param, nullptr);
}

UCP_EXPORT ucs_status_ptr_t ucp_stream_send_nb(ucp_ep_h ep, const void* buffer, size_t count,
                                               ucp_datatype_t datatype, ucp_send_callback_t cb,
                                               unsigned flags) {
  (void)flags;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  p.datatype = datatype;
  return stream_send(ep, buffer, count, &p, cb);
}

UCP_EXPORT ucs_status_ptr_t ucp_stream_recv_nbx(ucp_ep_h ep, void* buffer, size_t count, size_t* length,
                                                const ucp_request_param_t* param) {
  return stream_recv(ep, buffer, count, length, param, nullptr, 0);
}

UCP_EXPORT ucs_status_ptr_t ucp_stream_recv_nb(ucp_ep_h ep, void* buffer, size_t count,
                                               ucp_datatype_t datatype, ucp_stream_recv_callback_t cb,
                                               size_t* length, unsigned flags) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  p.datatype = datatype;
  return stream_recv(ep, buffer, count, length, &p, cb, flags);
}

// Zero-copy receive: the oldest queued piece, released by
// ucp_stream_data_release.
UCP_EXPORT ucs_status_ptr_t ucp_stream_recv_data_nb(ucp_ep_h ep, size_t* length) {
  if (!ep || !length) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  ucp_worker* w = ep->w;
  worker_guard g(w);
  if (ep->stream_q.empty() || !ep->stream_recvs.empty()) return nullptr;
  stream_chunk& c = ep->stream_q.front();
  size_t n = c.len - c.off;
  uint8_t* base = c.data.release();
  uint8_t* data = base + c.off;
  ep->stream_q.erase(ep->stream_q.begin());
  ep->stream_bytes -= n;
  try {
    w->am_held[data] = {4, base};
  } catch (...) {
    delete[] base;
    return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
  }
  if (ep->stream_bytes) mark_ready(ep);
  *length = n;
  return data;
}

UCP_EXPORT void ucp_stream_data_release(ucp_ep_h ep, void* data) {
  if (!ep || !data) return;
  worker_guard g(ep->w);
  auto it = ep->w->am_held.find(data);
  if (it == ep->w->am_held.end() || it->second.kind != 4) return;
  delete[] static_cast<uint8_t*>(it->second.obj);
  ep->w->am_held.erase(it);
}

UCP_EXPORT ssize_t ucp_stream_worker_poll(ucp_worker_h w, ucp_stream_poll_ep_t* poll_eps, size_t max_eps,
                                          unsigned flags) {
  if (!w || (max_eps && !poll_eps) || flags) return UCS_ERR_INVALID_PARAM;
  worker_guard g(w);
  size_t n = 0;
  while (n < max_eps && !w->stream_ready.empty()) {
    ucp_ep* ep = owner<ucp_ep, &ucp_ep::stream_link>(w->stream_ready.next);
    ep->stream_link.unlink();
    if (!ep->stream_bytes || !(ep->flags & EPF_USER)) continue;
    poll_eps[n].ep = ep;
    poll_eps[n].user_data = ep->user_data;
    poll_eps[n].flags = 0;
    n++;
  }
  return static_cast<ssize_t>(n);
}
