// SPDX-License-Identifier: BSD-3-Clause
// Memory mapping, remote keys, put and get. ucp_mem_map registers with every
// transport of the context; an allocation is a shared mapping of a memfd
// sealed against shrinking, which weft's shm maps at the initiator (RMA by
// memcpy). A packed rkey carries each transport's key; unpacking on an
// endpoint keeps the one of the endpoint's transport.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <tuple>

#include "ucp_int.hpp"

namespace wucp {

namespace {

struct rkey_hdr {
  uint32_t magic;
  uint8_t count;
  uint8_t pad[3];
  uint64_t base;
  uint64_t len;
};
struct rkey_ent {
  uint8_t kind;
  uint8_t virt;
  uint8_t pad[6];
  uint64_t key;
};
static_assert(sizeof(rkey_hdr) == 24 && sizeof(rkey_ent) == 16);
constexpr uint32_t rkey_magic = 0x59454b52;  // "RKEY"

uint64_t access_of(unsigned prot) {
  uint64_t a = 0;
  if (prot & UCP_MEM_MAP_PROT_LOCAL_READ) a |= FI_WRITE | FI_SEND;
  if (prot & UCP_MEM_MAP_PROT_LOCAL_WRITE) a |= FI_READ | FI_RECV;
  if (prot & UCP_MEM_MAP_PROT_REMOTE_READ) a |= FI_REMOTE_READ;
  if (prot & UCP_MEM_MAP_PROT_REMOTE_WRITE) a |= FI_REMOTE_WRITE;
  return a;
}

void unmap(ucp_mem* m) {
  for (auto& [d, mr] : m->mrs) fi_close(&mr->fid);
  m->mrs.clear();
  if (m->allocated && m->addr) munmap(m->addr, m->len);
  if (m->memfd >= 0) close(m->memfd);
}

constexpr size_t large_put = 64 << 10;

void* local_desc(ucp_mem* m, domain_tp* d) noexcept {
  for (auto& [dd, mr] : m->mrs)
    if (dd == d) return fi_mr_desc(mr);
  return nullptr;
}

void* find_desc(ucp_context* ctx, const void* buf, size_t len, domain_tp* d) noexcept {
  std::lock_guard l(ctx->lock);
  auto a = reinterpret_cast<uintptr_t>(buf);
  auto it = ctx->regions.upper_bound(a);
  if (it == ctx->regions.begin()) return nullptr;
  --it;
  ucp_mem* m = it->second;
  if (a - it->first > m->len || len > m->len - (a - it->first)) return nullptr;
  return local_desc(m, d);
}

}  // namespace

ucs_status_ptr_t rma_post(ucp_ep* ep, bool write, void* buf, size_t len, uint64_t raddr, ucp_rkey_h rkey,
                          const ucp_request_param_t* p, bool nbi) noexcept {
  if (!ep || !rkey || (len && !buf)) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  ucp_worker* w = ep->w;
  worker_guard g(w);
  if (ep->state >= EP_FAILED)
    return UCS_STATUS_PTR(ep->state == EP_FAILED ? ep->fail_status : UCS_ERR_NOT_CONNECTED);
  if (rkey->ep != ep) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  if (p && (p->op_attr_mask & UCP_OP_ATTR_FIELD_DATATYPE) &&
      (p->datatype & UCP_DATATYPE_CLASS_MASK) != UCP_DATATYPE_CONTIG)
    return UCS_STATUS_PTR(UCS_ERR_UNSUPPORTED);
  if (p && (p->op_attr_mask & UCP_OP_ATTR_FIELD_DATATYPE)) len *= p->datatype >> UCP_DATATYPE_SHIFT;
  if (!len) return nbi ? UCS_STATUS_PTR(UCS_OK) : imm_complete(w, p, UCS_OK, CB_SEND_NBX);
  if (!rkey->holds(raddr, len)) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  op* o = op_alloc(w);
  if (!o) return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
  o->type = write ? OP_WRITE : OP_READ;
  o->iov[0] = {buf, len};
  o->niov = 1;
  o->raddr = rkey->virt ? raddr : raddr - rkey->base;
  o->rkey = rkey->key;
  o->dest = ep->dest;
  // A large put from mapped memory names its registration: a provider may
  // then copy from its own mapping of it (weft's shm splits such a write
  // with the target).
  if (write && len >= large_put) {
    if (p && (p->op_attr_mask & UCP_OP_ATTR_FIELD_MEMH) && p->memh)
      o->desc = local_desc(p->memh, ep->tp->d);
    else
      o->desc = find_desc(w->ctx, buf, len, ep->tp->d);
  }
  // A small put is copied by the provider (FI_INJECT): done at return, and
  // still tracked until it is complete at the target (flush).
  bool imm = write && len <= ep->tp->d->inject && !(p && (p->op_attr_mask & UCP_OP_ATTR_FLAG_NO_IMM_CMPL));
  request* r = nullptr;
  if (!nbi && !imm) {
    r = req_from_param(w, p);
    if (!r) {
      op_free(w, o);
      return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
    }
    r->kind = RK_RMA;
    req_set_cb(r, p, CB_SEND_NBX);
  }
  op_attach(o, ep, r, true);
  int rc = issue_one_sided(w, ep, o);
  if (rc == -FI_EAGAIN) {
    if (imm) {
      // Queued: the application may reuse the buffer at return, so copy it.
      o->bounce = malloc(len);
      if (!o->bounce) {
        op_finish(w, o, UCS_ERR_NO_MEMORY);
        return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
      }
      memcpy(o->bounce, buf, len);
      o->flags |= OPF_FREE_BOUNCE;
      o->iov[0].iov_base = o->bounce;
    }
    enqueue(ep, o);
  } else if (rc < 0) {
    ucs_status_t st = from_fi(rc);
    op_finish(w, o, st);
    if (r) return req_return(r);
    return UCS_STATUS_PTR(st);
  }
  if (r) return req_return(r);
  return nbi ? UCS_STATUS_PTR(UCS_INPROGRESS) : nullptr;
}

}  // namespace wucp

using namespace wucp;

UCP_EXPORT ucs_status_t ucp_mem_map(ucp_context_h ctx, const ucp_mem_map_params_t* params,
                                    ucp_mem_h* memh_p) {
  if (!ctx || !params || !memh_p) return UCS_ERR_INVALID_PARAM;
  if (!(params->field_mask & UCP_MEM_MAP_PARAM_FIELD_LENGTH)) return UCS_ERR_INVALID_PARAM;
  unsigned flags = (params->field_mask & UCP_MEM_MAP_PARAM_FIELD_FLAGS) ? params->flags : 0;
  void* addr = (params->field_mask & UCP_MEM_MAP_PARAM_FIELD_ADDRESS) ? params->address : nullptr;
  unsigned prot = (params->field_mask & UCP_MEM_MAP_PARAM_FIELD_PROT)
                      ? params->prot
                      : UCP_MEM_MAP_PROT_LOCAL_READ | UCP_MEM_MAP_PROT_LOCAL_WRITE |
                            UCP_MEM_MAP_PROT_REMOTE_READ | UCP_MEM_MAP_PROT_REMOTE_WRITE;
  if ((params->field_mask & UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE) &&
      params->memory_type != UCS_MEMORY_TYPE_HOST && params->memory_type != UCS_MEMORY_TYPE_UNKNOWN)
    return UCS_ERR_UNSUPPORTED;
  if (flags & ~unsigned{UCP_MEM_MAP_NONBLOCK | UCP_MEM_MAP_ALLOCATE | UCP_MEM_MAP_FIXED})
    return UCS_ERR_INVALID_PARAM;
  size_t len = params->length;
  bool alloc = flags & UCP_MEM_MAP_ALLOCATE;
  if (!alloc && !addr && len) return UCS_ERR_INVALID_PARAM;
  if ((flags & UCP_MEM_MAP_FIXED) && (!alloc || !addr || (reinterpret_cast<uintptr_t>(addr) & 4095)))
    return UCS_ERR_INVALID_PARAM;
  try {
    auto m = std::make_unique<ucp_mem>();
    m->ctx = ctx;
    m->len = len;
    m->prot = prot;
    if (!len) {
      // UCX hands out an empty handle for zero bytes: nothing to register.
      m->addr = addr;
      *memh_p = m.release();
      return UCS_OK;
    }
    if (alloc) {
      // Shared memory, so that a peer on this host can map it.
      int fd = memfd_create("weft-ucp", MFD_CLOEXEC | MFD_ALLOW_SEALING);
      int mflags = MAP_SHARED;
      if (flags & UCP_MEM_MAP_FIXED) mflags |= MAP_FIXED_NOREPLACE;
      if (fd >= 0 && ftruncate(fd, static_cast<off_t>(len)) == 0 &&
          fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0) {
        void* p = mmap(addr, len, PROT_READ | PROT_WRITE, mflags, fd, 0);
        if (p != MAP_FAILED) {
          m->addr = p;
          m->memfd = fd;
        }
      }
      if (!m->addr) {
        if (fd >= 0) close(fd);
        void* p = mmap(addr, len, PROT_READ | PROT_WRITE, mflags | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return UCS_ERR_NO_MEMORY;
        m->addr = p;
      }
      if ((flags & UCP_MEM_MAP_FIXED) && m->addr != addr) {
        munmap(m->addr, len);
        if (m->memfd >= 0) close(m->memfd);
        return UCS_ERR_NO_MEMORY;
      }
      m->allocated = true;
    } else {
      m->addr = addr;
    }
    uint64_t acc = access_of(prot);
    std::lock_guard l(ctx->lock);
    for (auto& d : ctx->tps) {
      fid_mr* mr = nullptr;
      uint64_t key = d->prov_key ? 0 : ctx->next_key++;
      int rc = fi_mr_reg(d->domain, m->addr, len, acc, 0, key, 0, &mr, nullptr);
      if (rc) {
        WUCP_LOG(L_WARN, "ucp_mem_map: %s registration failed: %s", tp_name(d->kind), fi_strerror(-rc));
        unmap(m.get());
        return from_fi(rc);
      }
      m->mrs.emplace_back(d.get(), mr);
    }
    ctx->regions[reinterpret_cast<uintptr_t>(m->addr)] = m.get();
    *memh_p = m.release();
    return UCS_OK;
  } catch (...) {
    return UCS_ERR_NO_MEMORY;
  }
}

UCP_EXPORT ucs_status_t ucp_mem_unmap(ucp_context_h ctx, ucp_mem_h memh) {
  if (!ctx || !memh || memh->ctx != ctx) return UCS_ERR_INVALID_PARAM;
  {
    std::lock_guard l(ctx->lock);
    auto it = ctx->regions.find(reinterpret_cast<uintptr_t>(memh->addr));
    if (it != ctx->regions.end() && it->second == memh) ctx->regions.erase(it);
    unmap(memh);
  }
  delete memh;
  return UCS_OK;
}

UCP_EXPORT ucs_status_t ucp_mem_query(const ucp_mem_h memh, ucp_mem_attr_t* attr) {
  if (!memh || !attr) return UCS_ERR_INVALID_PARAM;
  if (attr->field_mask & UCP_MEM_ATTR_FIELD_ADDRESS) attr->address = memh->addr;
  if (attr->field_mask & UCP_MEM_ATTR_FIELD_LENGTH) attr->length = memh->len;
  if (attr->field_mask & UCP_MEM_ATTR_FIELD_MEM_TYPE) attr->mem_type = UCS_MEMORY_TYPE_HOST;
  return UCS_OK;
}

UCP_EXPORT ucs_status_t ucp_mem_advise(ucp_context_h ctx, ucp_mem_h memh, ucp_mem_advise_params_t* params) {
  if (!ctx || !memh || !params) return UCS_ERR_INVALID_PARAM;
  constexpr uint64_t need = UCP_MEM_ADVISE_PARAM_FIELD_ADDRESS | UCP_MEM_ADVISE_PARAM_FIELD_LENGTH |
                            UCP_MEM_ADVISE_PARAM_FIELD_ADVICE;
  if ((params->field_mask & need) != need) return UCS_ERR_INVALID_PARAM;
  auto a = reinterpret_cast<uintptr_t>(params->address), b = reinterpret_cast<uintptr_t>(memh->addr);
  if (a < b || params->length > memh->len || a - b > memh->len - params->length) return UCS_ERR_INVALID_PARAM;
  if (params->advice == UCP_MADV_WILLNEED && memh->allocated) {
    uintptr_t pa = a & ~uintptr_t{4095};
    madvise(reinterpret_cast<void*>(pa), params->length + (a - pa), MADV_WILLNEED);
  } else if (params->advice != UCP_MADV_NORMAL && params->advice != UCP_MADV_WILLNEED) {
    return UCS_ERR_INVALID_PARAM;
  }
  return UCS_OK;
}

UCP_EXPORT void ucp_mem_print_info(const char* mem_size, ucp_context_h ctx, FILE* stream) {
  if (!ctx || !stream) return;
  fprintf(stream, "#\n# UCP memory allocation (weft)\n#\n");
  fprintf(stream, "#  allocation: %s bytes, shared mapping of a sealed memfd (anonymous memory if none)\n",
          mem_size ? mem_size : "?");
  for (auto& d : ctx->tps)
    fprintf(stream, "#  registered: %s (libfabric %s, %s keys)\n", tp_name(d->kind), d->prov_name.c_str(),
            d->prov_key ? "provider" : "requested");
  fprintf(stream, "#\n");
}

UCP_EXPORT ucs_status_t ucp_rkey_pack(ucp_context_h ctx, ucp_mem_h memh, void** rkey_buffer_p,
                                      size_t* size_p) {
  if (!ctx || !memh || !rkey_buffer_p || !size_p || memh->ctx != ctx) return UCS_ERR_INVALID_PARAM;
  size_t n = memh->mrs.size();
  size_t sz = sizeof(rkey_hdr) + n * sizeof(rkey_ent);
  auto* b = static_cast<uint8_t*>(malloc(sz));
  if (!b) return UCS_ERR_NO_MEMORY;
  rkey_hdr h{rkey_magic, static_cast<uint8_t>(n), {}, reinterpret_cast<uintptr_t>(memh->addr), memh->len};
  memcpy(b, &h, sizeof h);
  for (size_t i = 0; i < n; i++) {
    rkey_ent e{};
    e.kind = memh->mrs[i].first->kind;
    e.virt = memh->mrs[i].first->virt_addr;
    e.key = fi_mr_key(memh->mrs[i].second);
    memcpy(b + sizeof h + i * sizeof e, &e, sizeof e);
  }
  *rkey_buffer_p = b;
  *size_p = sz;
  return UCS_OK;
}

UCP_EXPORT void ucp_rkey_buffer_release(void* rkey_buffer) {
  free(rkey_buffer);
}

UCP_EXPORT ucs_status_t ucp_ep_rkey_unpack(ucp_ep_h ep, const void* rkey_buffer, ucp_rkey_h* rkey_p) {
  if (!ep || !rkey_buffer || !rkey_p) return UCS_ERR_INVALID_PARAM;
  rkey_hdr h;
  memcpy(&h, rkey_buffer, sizeof h);
  if (h.magic != rkey_magic || h.count > 8) return UCS_ERR_INVALID_PARAM;
  worker_guard g(ep->w);
  if (!ep->tp) return UCS_ERR_NOT_CONNECTED;
  for (unsigned i = 0; i < h.count; i++) {
    rkey_ent e;
    memcpy(&e, static_cast<const uint8_t*>(rkey_buffer) + sizeof h + i * sizeof e, sizeof e);
    if (e.kind != ep->tp->d->kind) continue;
    auto* k = new (std::nothrow) ucp_rkey();
    if (!k) return UCS_ERR_NO_MEMORY;
    k->ep = ep;
    k->key = e.key;
    k->base = h.base;
    k->len = h.len;
    k->virt = e.virt;
    k->kind = e.kind;
    *rkey_p = k;
    return UCS_OK;
  }
  // A region of length zero has no registration: any access to it fails.
  if (!h.count && !h.len) {
    auto* k = new (std::nothrow) ucp_rkey();
    if (!k) return UCS_ERR_NO_MEMORY;
    k->ep = ep;
    k->base = h.base;
    k->virt = true;
    *rkey_p = k;
    return UCS_OK;
  }
  return UCS_ERR_UNREACHABLE;
}

// Remote memory is reached through the provider only: no local pointer to it.
UCP_EXPORT ucs_status_t ucp_rkey_ptr(ucp_rkey_h rkey, uint64_t raddr, void** addr_p) {
  (void)raddr;
  if (!rkey || !addr_p) return UCS_ERR_INVALID_PARAM;
  return UCS_ERR_UNREACHABLE;
}

UCP_EXPORT void ucp_rkey_destroy(ucp_rkey_h rkey) {
  delete rkey;
}

UCP_EXPORT ucs_status_ptr_t ucp_put_nbx(ucp_ep_h ep, const void* buffer, size_t count, uint64_t remote_addr,
                                        ucp_rkey_h rkey, const ucp_request_param_t* param) {
  return rma_post(ep, true, const_cast<void*>(buffer), count, remote_addr, rkey, param, false);
}

UCP_EXPORT ucs_status_ptr_t ucp_get_nbx(ucp_ep_h ep, void* buffer, size_t count, uint64_t remote_addr,
                                        ucp_rkey_h rkey, const ucp_request_param_t* param) {
  return rma_post(ep, false, buffer, count, remote_addr, rkey, param, false);
}

UCP_EXPORT ucs_status_t ucp_put_nbi(ucp_ep_h ep, const void* buffer, size_t length, uint64_t remote_addr,
                                    ucp_rkey_h rkey) {
  return UCS_PTR_STATUS(
      rma_post(ep, true, const_cast<void*>(buffer), length, remote_addr, rkey, nullptr, true));
}

UCP_EXPORT ucs_status_t ucp_get_nbi(ucp_ep_h ep, void* buffer, size_t length, uint64_t remote_addr,
                                    ucp_rkey_h rkey) {
  return UCS_PTR_STATUS(rma_post(ep, false, buffer, length, remote_addr, rkey, nullptr, true));
}

static ucs_status_ptr_t with_old_cb(ucs_status_ptr_t sp, ucp_send_callback_t cb) {
  if (UCS_PTR_IS_PTR(sp)) {
    request* r = request::of(sp);
    worker_guard g(r->w);
    if (!(r->flags & RF_COMPLETED)) {
      r->cbk = cb ? CB_SEND_NB : CB_NONE;
      r->cb = reinterpret_cast<void*>(cb);
    }
  }
  return sp;
}

UCP_EXPORT ucs_status_ptr_t ucp_put_nb(ucp_ep_h ep, const void* buffer, size_t length, uint64_t remote_addr,
                                       ucp_rkey_h rkey, ucp_send_callback_t cb) {
  return with_old_cb(rma_post(ep, true, const_cast<void*>(buffer), length, remote_addr, rkey, nullptr, false),
                     cb);
}

UCP_EXPORT ucs_status_ptr_t ucp_get_nb(ucp_ep_h ep, void* buffer, size_t length, uint64_t remote_addr,
                                       ucp_rkey_h rkey, ucp_send_callback_t cb) {
  return with_old_cb(rma_post(ep, false, buffer, length, remote_addr, rkey, nullptr, false), cb);
}

UCP_EXPORT ucs_status_t ucp_put(ucp_ep_h ep, const void* buffer, size_t length, uint64_t remote_addr,
                                ucp_rkey_h rkey) {
  ucs_status_ptr_t sp =
      rma_post(ep, true, const_cast<void*>(buffer), length, remote_addr, rkey, nullptr, false);
  if (!UCS_PTR_IS_PTR(sp)) return UCS_PTR_STATUS(sp);
  worker_guard g(ep->w);
  return wait_ptr(ep->w, sp);
}

UCP_EXPORT ucs_status_t ucp_get(ucp_ep_h ep, void* buffer, size_t length, uint64_t remote_addr,
                                ucp_rkey_h rkey) {
  ucs_status_ptr_t sp = rma_post(ep, false, buffer, length, remote_addr, rkey, nullptr, false);
  if (!UCS_PTR_IS_PTR(sp)) return UCS_PTR_STATUS(sp);
  worker_guard g(ep->w);
  return wait_ptr(ep->w, sp);
}

// UCX 1.15's ucp_memh_pack: a memory handle packed as a remote key (the
// buffer ucp_ep_rkey_unpack reads). Packing for export (another process
// maps the same registration) is not available: UCS_ERR_UNSUPPORTED, and
// UCP_FEATURE_EXPORTED_MEMH is not advertised.
UCP_EXPORT ucs_status_t ucp_memh_pack(ucp_mem_h memh, const ucp_memh_pack_params_t* params, void** buffer_p,
                                      size_t* buffer_size_p) {
  if (!memh || !buffer_p || !buffer_size_p) return UCS_ERR_INVALID_PARAM;
  uint64_t flags = 0;
  if (params) {
    if (params->field_mask & ~uint64_t{UCP_MEMH_PACK_PARAM_FIELD_FLAGS}) return UCS_ERR_INVALID_PARAM;
    if (params->field_mask & UCP_MEMH_PACK_PARAM_FIELD_FLAGS) flags = params->flags;
  }
  if (flags & ~uint64_t{UCP_MEMH_PACK_FLAG_EXPORT}) return UCS_ERR_INVALID_PARAM;
  if (flags & UCP_MEMH_PACK_FLAG_EXPORT) return UCS_ERR_UNSUPPORTED;
  return ucp_rkey_pack(memh->ctx, memh, buffer_p, buffer_size_p);
}

UCP_EXPORT void ucp_memh_buffer_release(void* buffer, const ucp_memh_buffer_release_params_t* params) {
  if (params && params->field_mask) return;  // no field is defined: not a buffer of ours to release
  free(buffer);
}

// UCX 1.16's ucp_rkey_compare: a total order on the keys of one worker, 0
// when two keys reach the same remote registration through the same
// endpoint.
UCP_EXPORT ucs_status_t ucp_rkey_compare(ucp_worker_h worker, ucp_rkey_h rkey1, ucp_rkey_h rkey2,
                                         const ucp_rkey_compare_params_t* params, int* result) {
  if (!worker || !rkey1 || !rkey2 || !params || !result || params->field_mask) return UCS_ERR_INVALID_PARAM;
  if (!rkey1->ep || !rkey2->ep || rkey1->ep->w != worker || rkey2->ep->w != worker) return UCS_ERR_INVALID_PARAM;
  auto tie = [](const ucp_rkey* k) {
    return std::make_tuple(reinterpret_cast<uintptr_t>(k->ep), k->kind, k->key, k->base, k->len, k->virt);
  };
  auto a = tie(rkey1), b = tie(rkey2);
  *result = a < b ? -1 : (b < a ? 1 : 0);
  return UCS_OK;
}
