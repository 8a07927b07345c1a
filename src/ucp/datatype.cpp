// SPDX-License-Identifier: BSD-3-Clause
// Datatypes: contiguous, IOV and generic (pack/unpack callbacks). The
// provider takes contiguous buffers and up to iov_limit pieces directly;
// anything else goes through a bounce buffer packed or unpacked here.
#include <cstdlib>

#include "ucp_int.hpp"

namespace wucp {

namespace {
struct generic_dt {
  ucp_generic_dt_ops_t ops;
  void* context;
};
static_assert(alignof(generic_dt) >= 8);

generic_dt* as_generic(ucp_datatype_t dt) noexcept {
  return reinterpret_cast<generic_dt*>(static_cast<uintptr_t>(dt & ~uint64_t{UCP_DATATYPE_CLASS_MASK}));
}
}  // namespace

bool dt_describe(ucp_datatype_t dt, const void* buf, size_t count, dt_view& v, bool for_send) noexcept {
  v.cls = dt & UCP_DATATYPE_CLASS_MASK;
  switch (v.cls) {
    case UCP_DATATYPE_CONTIG:
      return contig_bytes(dt, count, &v.length) && (v.length == 0 || buf);
    case UCP_DATATYPE_IOV: {
      if (count && !buf) return false;
      v.iov = static_cast<const ucp_dt_iov_t*>(buf);
      v.iovcnt = count;
      v.length = 0;
      for (size_t i = 0; i < count; i++) {
        if (v.iov[i].length && !v.iov[i].buffer) return false;
        v.length += v.iov[i].length;
      }
      return true;
    }
    case UCP_DATATYPE_GENERIC: {
      generic_dt* g = as_generic(dt);
      if (!g) return false;
      v.ops = &g->ops;
      v.dt_ctx = g->context;
      // The length is known only from a pack or unpack state, and each
      // operation takes exactly one (MPICH counts datatype references in
      // start/finish): dt_pack_alloc and recv_dt_begin take it.
      (void)for_send;
      v.length = 0;
      return true;
    }
    default:
      return false;
  }
}

ucs_status_t dt_pack(ucp_datatype_t dt, const void* buf, size_t count, void* dst, size_t len) noexcept {
  auto* d = static_cast<uint8_t*>(dst);
  switch (dt & UCP_DATATYPE_CLASS_MASK) {
    case UCP_DATATYPE_CONTIG:
      if (len) memcpy(d, buf, len);
      return UCS_OK;
    case UCP_DATATYPE_IOV: {
      auto* iov = static_cast<const ucp_dt_iov_t*>(buf);
      size_t off = 0;
      for (size_t i = 0; i < count && off < len; i++) {
        size_t n = std::min(iov[i].length, len - off);
        if (n) memcpy(d + off, iov[i].buffer, n);
        off += n;
      }
      return UCS_OK;
    }
    default:  // generic: dt_pack_alloc
      return UCS_ERR_INVALID_PARAM;
  }
}

ucs_status_t dt_pack_alloc(ucp_datatype_t dt, const void* buf, size_t count, void** out,
                           size_t* len) noexcept {
  if ((dt & UCP_DATATYPE_CLASS_MASK) == UCP_DATATYPE_GENERIC) {
    generic_dt* g = as_generic(dt);
    if (!g) return UCS_ERR_INVALID_PARAM;
    void* st = g->ops.start_pack(g->context, buf, count);
    size_t n = g->ops.packed_size(st);
    auto* d = static_cast<uint8_t*>(malloc(n ? n : 1));
    if (!d) {
      g->ops.finish(st);
      return UCS_ERR_NO_MEMORY;
    }
    size_t off = 0;
    while (off < n) {
      size_t k = g->ops.pack(st, off, d + off, n - off);
      if (!k) break;
      off += k;
    }
    g->ops.finish(st);
    if (off != n) {
      free(d);
      return UCS_ERR_IO_ERROR;
    }
    *out = d;
    *len = n;
    return UCS_OK;
  }
  dt_view v;
  if (!dt_describe(dt, buf, count, v, true)) return UCS_ERR_INVALID_PARAM;
  void* d = malloc(v.length ? v.length : 1);
  if (!d) return UCS_ERR_NO_MEMORY;
  dt_pack(dt, buf, count, d, v.length);
  *out = d;
  *len = v.length;
  return UCS_OK;
}

ucs_status_t dt_unpack(ucp_datatype_t dt, void* buf, size_t count, const void* src, size_t len) noexcept {
  auto* s = static_cast<const uint8_t*>(src);
  switch (dt & UCP_DATATYPE_CLASS_MASK) {
    case UCP_DATATYPE_CONTIG:
      if (len) memcpy(buf, s, len);
      return UCS_OK;
    case UCP_DATATYPE_IOV: {
      auto* iov = static_cast<ucp_dt_iov_t*>(buf);
      size_t off = 0;
      for (size_t i = 0; i < count && off < len; i++) {
        size_t n = std::min(iov[i].length, len - off);
        if (n) memcpy(iov[i].buffer, s + off, n);
        off += n;
      }
      return off < len ? UCS_ERR_MESSAGE_TRUNCATED : UCS_OK;
    }
    case UCP_DATATYPE_GENERIC: {
      generic_dt* g = as_generic(dt);
      void* st = g->ops.start_unpack(g->context, buf, count);
      ucs_status_t rc = len ? g->ops.unpack(st, 0, s, len) : UCS_OK;
      g->ops.finish(st);
      return rc;
    }
    default:
      return UCS_ERR_INVALID_PARAM;
  }
}

ucs_status_t recv_dt_begin(request* r, ucp_datatype_t dt, void* buf, size_t count,
                           size_t* capacity) noexcept {
  r->dt = dt;
  r->buf = buf;
  r->count = count;
  size_t cap = 0;
  if ((dt & UCP_DATATYPE_CLASS_MASK) == UCP_DATATYPE_GENERIC) {
    generic_dt* g = as_generic(dt);
    r->g_state = g->ops.start_unpack(g->context, buf, count);
    r->g_unpack = g->ops.unpack;
    r->g_finish = g->ops.finish;
    cap = g->ops.packed_size(r->g_state);
  } else {
    dt_view v;
    if (!dt_describe(dt, buf, count, v, false)) return UCS_ERR_INVALID_PARAM;
    cap = v.length;
  }
  r->bounce = malloc(cap ? cap : 1);
  if (!r->bounce) {
    recv_dt_abort(r);
    return UCS_ERR_NO_MEMORY;
  }
  r->bounce_len = cap;
  if (capacity) *capacity = cap;
  return UCS_OK;
}

ucs_status_t recv_dt_end(request* r, size_t len) noexcept {
  if (!r->bounce) return UCS_OK;
  if (len > r->bounce_len) len = r->bounce_len;
  ucs_status_t st;
  if (r->g_state) {
    st = len ? r->g_unpack(r->g_state, 0, r->bounce, len) : UCS_OK;
    r->g_finish(r->g_state);
    r->g_state = nullptr;
  } else {
    st = dt_unpack(r->dt, r->buf, r->count, r->bounce, len);
  }
  return st;
}

void recv_dt_abort(request* r) noexcept {
  if (r->g_state) r->g_finish(r->g_state);
  r->g_state = nullptr;
}

}  // namespace wucp

using namespace wucp;

UCP_EXPORT ucs_status_t ucp_dt_create_generic(const ucp_generic_dt_ops_t* ops, void* context,
                                              ucp_datatype_t* datatype_p) {
  if (!ops || !datatype_p || !ops->start_pack || !ops->start_unpack || !ops->packed_size || !ops->pack ||
      !ops->unpack || !ops->finish)
    return UCS_ERR_INVALID_PARAM;
  auto* g = static_cast<generic_dt*>(aligned_alloc(16, (sizeof(generic_dt) + 15) & ~size_t{15}));
  if (!g) return UCS_ERR_NO_MEMORY;
  g->ops = *ops;
  g->context = context;
  *datatype_p = reinterpret_cast<uintptr_t>(g) | UCP_DATATYPE_GENERIC;
  return UCS_OK;
}

UCP_EXPORT void ucp_dt_destroy(ucp_datatype_t datatype) {
  if ((datatype & UCP_DATATYPE_CLASS_MASK) == UCP_DATATYPE_GENERIC) free(as_generic(datatype));
}

// UCX 1.15's ucp_dt_query: the packed size of `count` elements (default 1)
// of a datatype, from the buffer where the datatype needs one (IOV: the
// iov array; generic: a pack state taken and given back).
UCP_EXPORT ucs_status_t ucp_dt_query(ucp_datatype_t datatype, ucp_datatype_attr_t* attr) {
  if (!attr) return UCS_ERR_INVALID_PARAM;
  const uint64_t known =
      UCP_DATATYPE_ATTR_FIELD_PACKED_SIZE | UCP_DATATYPE_ATTR_FIELD_BUFFER | UCP_DATATYPE_ATTR_FIELD_COUNT;
  if (attr->field_mask & ~known) return UCS_ERR_INVALID_PARAM;
  if (!(attr->field_mask & UCP_DATATYPE_ATTR_FIELD_PACKED_SIZE)) return UCS_OK;
  const void* buf = (attr->field_mask & UCP_DATATYPE_ATTR_FIELD_BUFFER) ? attr->buffer : nullptr;
  size_t count = (attr->field_mask & UCP_DATATYPE_ATTR_FIELD_COUNT) ? attr->count : 1;
  switch (datatype & UCP_DATATYPE_CLASS_MASK) {
    case UCP_DATATYPE_CONTIG: {
      size_t len;
      if (!contig_bytes(datatype, count, &len)) return UCS_ERR_INVALID_PARAM;
      attr->packed_size = len;
      return UCS_OK;
    }
    case UCP_DATATYPE_IOV: {
      if (count && !buf) return UCS_ERR_INVALID_PARAM;
      dt_view v;
      if (!dt_describe(datatype, buf, count, v, true)) return UCS_ERR_INVALID_PARAM;
      attr->packed_size = v.length;
      return UCS_OK;
    }
    case UCP_DATATYPE_GENERIC: {
      generic_dt* g = as_generic(datatype);
      if (!g || !buf) return UCS_ERR_INVALID_PARAM;
      void* state = g->ops.start_pack(g->context, buf, count);
      if (!state) return UCS_ERR_NO_MEMORY;
      attr->packed_size = g->ops.packed_size(state);
      g->ops.finish(state);
      return UCS_OK;
    }
    default:
      return UCS_ERR_INVALID_PARAM;  // strided: not in UCX 1.x either
  }
}
