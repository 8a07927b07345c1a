// SPDX-License-Identifier: BSD-3-Clause
// Requests: pooled per worker, request_init run once per object as UCX does,
// the application's request_size bytes right after the UCP part. Completion
// runs the callback the operation was posted with; a request the application
// freed early goes back to the pool when it completes.
#include <cstdlib>

#include "ucp_int.hpp"

namespace wucp {

namespace {
constexpr size_t req_chunk = 64;

void grow_pool(ucp_worker* w) {
  size_t user = (w->ctx->user_req_size + 15) & ~size_t{15};
  w->req_stride = sizeof(request) + user;
  auto chunk = std::make_unique<uint8_t[]>(w->req_stride * req_chunk + 16);
  uint8_t* base =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(chunk.get()) + 15) & ~uintptr_t{15});
  for (size_t i = req_chunk; i-- > 0;) {
    auto* r = new (base + i * w->req_stride) request();
    if (w->ctx->req_init) w->ctx->req_init(r->user());
    r->next_free = w->req_free;
    w->req_free = r;
  }
  w->req_chunks.push_back(std::move(chunk));
}

// Whether r is one of w's pool requests (an address check: the memory of an
// application's own request is never read).
bool req_in_pool(const ucp_worker* w, const request* r) noexcept {
  const auto a = reinterpret_cast<uintptr_t>(r);
  for (const auto& c : w->req_chunks) {
    const uintptr_t base = (reinterpret_cast<uintptr_t>(c.get()) + 15) & ~uintptr_t{15};
    if (a >= base && a < base + w->req_stride * req_chunk) return (a - base) % w->req_stride == 0;
  }
  return false;
}
}  // namespace

void req_pool_grow(ucp_worker* w) noexcept {
  try {
    grow_pool(w);
  } catch (...) {}
}

// A request in the application's memory: the UCP part lies before it.
request* req_from_param(ucp_worker* w, const ucp_request_param_t* p) noexcept {
  if (p && (p->op_attr_mask & UCP_OP_ATTR_FIELD_REQUEST)) {
    if (!p->request) return nullptr;
    request* r = request::of(p->request);
    // One from ucp_request_alloc stays the application's until it frees it.
    const bool allocated = req_in_pool(w, r) && (r->flags & RF_ALLOCATED);
    new (r) request();  // never used as a provider context (see OP_TRECV_REQ)
    r->flags = RF_EXTERNAL | (allocated ? RF_ALLOCATED : 0);
    r->w = w;
    return r;
  }
  return req_alloc(w);
}

void req_set_cb(request* r, const ucp_request_param_t* p, uint8_t nbx_kind) noexcept {
  if (!p) return;
  if (p->op_attr_mask & UCP_OP_ATTR_FIELD_USER_DATA) r->user_data = p->user_data;
  if (p->op_attr_mask & UCP_OP_ATTR_FIELD_CALLBACK) {
    r->cbk = nbx_kind;
    switch (nbx_kind) {
      case CB_SEND_NBX:
        r->cb = reinterpret_cast<void*>(p->cb.send);
        break;
      case CB_TAG_RECV_NBX:
        r->cb = reinterpret_cast<void*>(p->cb.recv);
        break;
      case CB_STREAM_NBX:
        r->cb = reinterpret_cast<void*>(p->cb.recv_stream);
        break;
      case CB_AM_DATA:
        r->cb = reinterpret_cast<void*>(p->cb.recv_am);
        break;
      default:
        r->cbk = CB_NONE;
    }
    if (!r->cb) r->cbk = CB_NONE;
  }
  if (p->op_attr_mask & UCP_OP_ATTR_FIELD_RECV_INFO) {
    if (nbx_kind == CB_TAG_RECV_NBX)
      r->info_out = p->recv_info.tag_info;
    else
      r->length_out = p->recv_info.length;
  }
}

void req_set_any_cb(request* r, const ucp_request_param_t* p, uint8_t nbx_kind, void* old_cb,
                    uint8_t old_kind) noexcept {
  if (old_cb) {
    r->cbk = old_kind;
    r->cb = old_cb;
  } else {
    req_set_cb(r, p, nbx_kind);
  }
}

void call_cb(request* r) noexcept {
  void* h = r->user();
  switch (r->cbk) {
    case CB_SEND_NB:
      reinterpret_cast<ucp_send_callback_t>(r->cb)(h, r->status);
      break;
    case CB_SEND_NBX:
      reinterpret_cast<ucp_send_nbx_callback_t>(r->cb)(h, r->status, r->user_data);
      break;
    case CB_TAG_RECV_NB:
      reinterpret_cast<ucp_tag_recv_callback_t>(r->cb)(h, r->status, &r->info);
      break;
    case CB_TAG_RECV_NBX:
      reinterpret_cast<ucp_tag_recv_nbx_callback_t>(r->cb)(h, r->status, &r->info, r->user_data);
      break;
    case CB_STREAM_NB:
      reinterpret_cast<ucp_stream_recv_callback_t>(r->cb)(h, r->status, r->info.length);
      break;
    case CB_STREAM_NBX:
      reinterpret_cast<ucp_stream_recv_nbx_callback_t>(r->cb)(h, r->status, r->info.length, r->user_data);
      break;
    case CB_AM_DATA:
      reinterpret_cast<ucp_am_recv_data_nbx_callback_t>(r->cb)(h, r->status, r->info.length, r->user_data);
      break;
    case CB_INTERNAL:
      reinterpret_cast<void (*)(request*)>(r->cb)(r);
      break;
    default:
      break;
  }
}

void req_complete(request* r, ucs_status_t st) noexcept {
  if (r->flags & RF_COMPLETED) return;
  if (r->ep_link.linked()) r->ep_link.unlink();
  if (r->id) {
    rmap_take(r->w, r->id);
    r->id = 0;
  }
  recv_dt_abort(r);
  if (r->bounce) {
    free(r->bounce);
    r->bounce = nullptr;
  }
  if (r->mr) {
    fi_close(&r->mr->fid);
    r->mr = nullptr;
  }
  r->status = st;
  if (r->info_out) *r->info_out = r->info;
  if (r->length_out) *r->length_out = r->info.length;
  r->flags |= RF_COMPLETED;
  if (r->cbk == CB_INTERNAL) {
    call_cb(r);  // the face's own continuation runs at once
    req_maybe_release(r);
    return;
  }
  if (r->cbk != CB_NONE) {
    // A completion found outside of ucp_worker_progress (inside a probe, a
    // send call) runs its callback from the next progress call, as UCX does.
    ucp_worker* w = r->w;
    if (!w->in_progress) {
      r->flags |= RF_DEFERRED;
      r->next_free = nullptr;
      if (w->deferred_tail)
        w->deferred_tail->next_free = r;
      else
        w->deferred_head = r;
      w->deferred_tail = r;
      w->attn = true;
      return;
    }
    call_cb(r);
  }
  req_maybe_release(r);
}

void run_deferred(ucp_worker* w) noexcept {
  while (request* r = w->deferred_head) {
    w->deferred_head = r->next_free;
    if (!w->deferred_head) w->deferred_tail = nullptr;
    r->next_free = nullptr;
    r->flags &= ~RF_DEFERRED;
    call_cb(r);
    req_maybe_release(r);
  }
}

ucs_status_ptr_t imm_complete(ucp_worker* w, const ucp_request_param_t* p, ucs_status_t st, uint8_t nbx_kind,
                              size_t length, const ucp_tag_recv_info_t* info) noexcept {
  if (p && (p->op_attr_mask & UCP_OP_ATTR_FIELD_RECV_INFO)) {
    if (nbx_kind == CB_TAG_RECV_NBX && info && p->recv_info.tag_info) *p->recv_info.tag_info = *info;
    if (nbx_kind != CB_TAG_RECV_NBX && p->recv_info.length) *p->recv_info.length = length;
  }
  if (!p || !(p->op_attr_mask & UCP_OP_ATTR_FLAG_NO_IMM_CMPL))
    return st == UCS_OK ? nullptr : UCS_STATUS_PTR(st);
  // The application wants a request even for work that is already done.
  request* r = req_from_param(w, p);
  if (!r) return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
  req_set_cb(r, p, nbx_kind);
  if (info)
    r->info = *info;
  else
    r->info.length = length;
  req_complete(r, st);
  return req_return(r);
}

uint32_t rmap_add(ucp_worker* w, request* r) {
  uint32_t idx;
  if (!w->rmap_free.empty()) {
    idx = w->rmap_free.back();
    w->rmap_free.pop_back();
  } else {
    idx = static_cast<uint32_t>(w->rmap.size());
    if (idx >= (1u << 20)) throw std::bad_alloc();
    w->rmap.push_back(nullptr);
    w->rmap_gen.push_back(1);
  }
  w->rmap[idx] = r;
  uint32_t id = idx | (w->rmap_gen[idx] << 20);
  return id;
}

request* rmap_get(ucp_worker* w, uint32_t id) noexcept {
  uint32_t idx = id & ((1u << 20) - 1);
  if (idx >= w->rmap.size() || (w->rmap_gen[idx] << 20 | idx) != id) return nullptr;
  return w->rmap[idx];
}

request* rmap_take(ucp_worker* w, uint32_t id) noexcept {
  request* r = rmap_get(w, id);
  if (!r) return nullptr;
  uint32_t idx = id & ((1u << 20) - 1);
  w->rmap[idx] = nullptr;
  w->rmap_gen[idx] = (w->rmap_gen[idx] + 1) & 0xfff;
  if (!w->rmap_gen[idx]) w->rmap_gen[idx] = 1;
  w->rmap_free.push_back(idx);
  return r;
}

void req_pool_destroy(ucp_worker* w) noexcept {
  if (w->ctx->req_cleanup) {
    for (auto& c : w->req_chunks) {
      uint8_t* base =
          reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(c.get()) + 15) & ~uintptr_t{15});
      for (size_t i = 0; i < req_chunk; i++)
        w->ctx->req_cleanup(reinterpret_cast<request*>(base + i * w->req_stride)->user());
    }
  }
  w->req_chunks.clear();
  w->req_free = nullptr;
}

}  // namespace wucp

using namespace wucp;

UCP_EXPORT ucs_status_t ucp_request_check_status(void* req) {
  if (!req) return UCS_ERR_INVALID_PARAM;
  auto* r = request::of(req);
  return (r->flags & RF_COMPLETED) ? r->status : UCS_INPROGRESS;
}

UCP_EXPORT int ucp_request_is_completed(void* req) {
  return req && (request::of(req)->flags & RF_COMPLETED);
}

UCP_EXPORT ucs_status_t ucp_request_test(void* req, ucp_tag_recv_info_t* info) {
  if (!req) return UCS_ERR_INVALID_PARAM;
  auto* r = request::of(req);
  if (!(r->flags & RF_COMPLETED)) return UCS_INPROGRESS;
  if (info && r->kind == RK_TAG_RECV) *info = r->info;
  return r->status;
}

UCP_EXPORT ucs_status_t ucp_tag_recv_request_test(void* req, ucp_tag_recv_info_t* info) {
  return ucp_request_test(req, info);
}

UCP_EXPORT ucs_status_t ucp_stream_recv_request_test(void* req, size_t* length_p) {
  if (!req) return UCS_ERR_INVALID_PARAM;
  auto* r = request::of(req);
  if (!(r->flags & RF_COMPLETED)) return UCS_INPROGRESS;
  if (length_p) *length_p = r->info.length;
  return r->status;
}

namespace {
// Gives a request back to the library. ucp_request_free also silences its
// callback (ucp.h: "no further notifications or callbacks"); the deprecated
// ucp_request_release keeps it, as UCX does: MPICH's ch4:ucx releases a
// send request right after posting it and frees its buffers in the
// callback, which must still run when the operation completes.
void release_request(void* req, bool keep_cb) noexcept {
  if (!req || UCS_PTR_IS_ERR(req)) return;
  auto* r = request::of(req);
  ucp_worker* w = r->w;
  if (!w->mt && (r->flags & (RF_COMPLETED | RF_RELEASED | RF_EXTERNAL | RF_DEFERRED)) == RF_COMPLETED &&
      !r->pending) [[likely]] {
    // A completed pool request of a single-threaded worker: straight back
    // (req_maybe_release's common case; through it, 10 instructions more
    // on every message of a ping-pong).
    r->flags = 0;
    r->cbk = CB_NONE;
    r->next_free = w->req_free;
    w->req_free = r;
    return;
  }
  worker_guard g(w);
  // A request from ucp_request_alloc is the application's (RF_EXTERNAL: no
  // operation releases it) until it is freed here; then it is a pool
  // request like any other.
  if (r->flags & RF_ALLOCATED) r->flags &= ~(RF_ALLOCATED | RF_EXTERNAL);
  // Releasing an uncompleted request leaves the operation running; the
  // request returns to the pool when it completes.
  r->flags |= RF_RELEASED;
  if (!keep_cb) r->cbk = CB_NONE;
  req_maybe_release(r);
}
}  // namespace

UCP_EXPORT void ucp_request_free(void* req) { release_request(req, false); }

UCP_EXPORT void ucp_request_release(void* req) { release_request(req, true); }

UCP_EXPORT void* ucp_request_alloc(ucp_worker_h worker) {
  if (!worker) return nullptr;
  worker_guard g(worker);
  request* r = req_alloc(worker);
  if (!r) return nullptr;
  // Idle (completed, nothing under way) until an operation takes it
  // through UCP_OP_ATTR_FIELD_REQUEST; returned by ucp_request_free.
  r->flags = RF_EXTERNAL | RF_ALLOCATED | RF_COMPLETED;
  r->status = UCS_OK;
  return r->user();
}

UCP_EXPORT ucs_status_t ucp_request_query(void* req, ucp_request_attr_t* attr) {
  if (!req || !attr) return UCS_ERR_INVALID_PARAM;
  auto* r = request::of(req);
  if (attr->field_mask & UCP_REQUEST_ATTR_FIELD_STATUS)
    attr->status = (r->flags & RF_COMPLETED) ? r->status : UCS_INPROGRESS;
  if (attr->field_mask & UCP_REQUEST_ATTR_FIELD_MEM_TYPE) attr->mem_type = UCS_MEMORY_TYPE_HOST;
  if (attr->field_mask & UCP_REQUEST_ATTR_FIELD_INFO_STRING) {
    if (!attr->debug_string) return UCS_ERR_INVALID_PARAM;
    static const char* kinds[] = {"send",    "tag recv", "stream recv", "flush",    "close",
                                  "am data", "atomic",   "rma",         "sync send"};
    size_t n = (attr->field_mask & UCP_REQUEST_ATTR_FIELD_INFO_STRING_SIZE) ? attr->debug_string_size : 0;
    if (n)
      snprintf(attr->debug_string, n, "weft %s request%s", r->kind < 9 ? kinds[r->kind] : "?",
               (r->flags & RF_COMPLETED) ? " (completed)" : "");
  }
  if (attr->field_mask & UCP_REQUEST_ATTR_FIELD_INFO_STRING_SIZE) attr->debug_string_size = 128;
  return UCS_OK;
}
