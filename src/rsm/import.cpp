// SPDX-License-Identifier: BSD-3-Clause
// The import side: connect/disconnect, get/put of 8 to 64 bits with
// alignment checks and byte swapping, bulk get/put, scatter/gather with
// local memory handles. Every transfer is one fi_read or fi_writemsg
// (FI_DELIVERY_COMPLETE: a put that returns has reached the segment) on the
// controller's data endpoint, waited for on its CQ with a bound; the data
// mutex serialises the endpoint (FI_THREAD_DOMAIN) and keeps the import
// handle alive while a transfer uses it.
#include <byteswap.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "import.hpp"
#include "proto.hpp"
#include "service.hpp"

namespace weft::rsm {
namespace {

void complete(controller* c, xfer* x, int err) noexcept {
  if (!x) return;
  if (x->abandoned) {
    delete x;
    c->abandoned--;
    return;
  }
  x->done = true;
  x->err = err;
}

// Reads the data CQ once; true if anything completed.
bool progress(controller* c) noexcept {
  fi_cq_entry e[8];
  ssize_t n = fi_cq_read(c->data_cq, e, 8);
  if (n > 0) {
    for (ssize_t i = 0; i < n; i++) complete(c, static_cast<xfer*>(e[i].op_context), 0);
    return true;
  }
  if (n == -FI_EAVAIL) {
    fi_cq_err_entry ee{};
    if (fi_cq_readerr(c->data_cq, &ee, 0) == 1)
      complete(c, static_cast<xfer*>(ee.op_context), ee.err ? ee.err : FI_EIO);
    return true;
  }
  return false;
}

// Waiting without a bound is not allowed: a transfer whose exporter is gone
// (or stalled) is given up after the configured timeout, or soon after the
// service thread declared the connection aborted.
struct waiter {
  uint64_t start_ns = 0;
  uint32_t spins = 0;
  // False once the transfer should be given up.
  bool keep_going(const import_seg* im) noexcept {
    if (++spins < 256) return true;
    spins = 0;
    uint64_t now = now_ns();
    if (!start_ns) start_ns = now;
    uint64_t waited = now - start_ns;
    if (waited > 200000) sched_yield();  // long transfer or trouble: let others run
    if (waited > static_cast<uint64_t>(cfg().timeout_ms) * 1000000ull) return false;
    if (im->aborted.load(std::memory_order_relaxed) && waited > 1000000000ull) return false;
    return true;
  }
};

xfer* get_ctx(controller* c) noexcept {
  if (!c->hot) c->hot = new (std::nothrow) xfer;
  xfer* x = c->hot;
  if (!x) return nullptr;
  x->done = false;
  x->err = 0;
  return x;
}

void give_up(controller* c, xfer* x) noexcept {
  x->abandoned = true;  // freed when (if) the provider completes it
  c->abandoned++;
  if (c->hot == x) c->hot = nullptr;
}

// One transfer of len bytes between buf and remote address raddr; returns 0
// or a positive fi errno.
int transfer(controller* c, import_seg* im, bool write, void* buf, size_t len, void* desc, uint64_t raddr,
             uint64_t key) {
  xfer* x = get_ctx(c);
  if (!x) return FI_ENOMEM;
  waiter w;
  for (;;) {
    ssize_t r;
    if (write) {
      iovec iov{buf, len};
      fi_rma_iov riov{raddr, len, key};
      fi_msg_rma msg{&iov, &desc, 1, im->fa, &riov, 1, &x->ctx, 0};
      r = fi_writemsg(c->data_ep, &msg, FI_COMPLETION | c->put_completion);
    } else {
      r = fi_read(c->data_ep, buf, len, desc, im->fa, raddr, key, &x->ctx);
    }
    if (r == 0) break;
    if (r != -FI_EAGAIN) return static_cast<int>(-r);
    progress(c);
    if (!w.keep_going(im)) return FI_ETIMEDOUT;
  }
  while (!x->done) {
    if (progress(c)) continue;
    if (!w.keep_going(im)) {
      give_up(c, x);
      return FI_ETIMEDOUT;
    }
  }
  return x->err;
}

}  // namespace

void import_abort(import_seg* im, int reason) noexcept {
  int none = 0;
  im->aborted.compare_exchange_strong(none, reason ? reason : RSMERR_CONN_ABORTED);
  im->gen.fetch_add(1, std::memory_order_acq_rel);
  im->sig->wake_all();
  import_revoke_mapping(im);
}

int import_lookup(void* h, import_seg** out, controller** cp) noexcept {
  void* obj = nullptr;
  controller* c = nullptr;
  if (!h || !handle_get(hval(h), kind::importer, &obj, &c)) return RSMERR_BAD_SEG_HNDL;
  *out = static_cast<import_seg*>(obj);
  *cp = c;
  return RSM_SUCCESS;
}

bool import_defers(const import_seg* im) noexcept {
  return im->mode == RSM_BARRIER_MODE_EXPLICIT && im->open_barriers > 0;
}

int import_refused(import_seg* im, int code) noexcept {
  if (code != RSM_SUCCESS && code == im->aborted.load(std::memory_order_acquire) && import_defers(im)) {
    im->errors.fetch_add(1, std::memory_order_relaxed);  // close_barrier answers RSMERR_CONN_ABORTED
    return RSM_SUCCESS;
  }
  return code;
}

int import_finish(import_seg* im, int fi_err, uint32_t gen_before) noexcept {
  uint32_t gen_after = im->gen.load(std::memory_order_acquire);
  if (!fi_err) {
    // Rebound while it ran: it may have reached the old memory. In implicit
    // mode that is this put's barrier failing; in explicit mode the caller's
    // close_barrier reports it.
    if (gen_after != gen_before && im->mode == RSM_BARRIER_MODE_IMPLICIT) return RSMERR_BARRIER_FAILURE;
    return RSM_SUCCESS;
  }
  im->errors.fetch_add(1, std::memory_order_relaxed);
  if (import_defers(im)) return RSM_SUCCESS;  // close_barrier reports it
  if (im->aborted.load(std::memory_order_acquire)) return RSMERR_CONN_ABORTED;
  if (fi_err == FI_ENOMEM) return RSMERR_INSUFFICIENT_MEM;
  if (fi_err == FI_EACCES && gen_after != gen_before) return RSMERR_BARRIER_FAILURE;  // keys rotated
  if (fi_err == FI_EACCES || from_fi(fi_err) == RSMERR_CONN_ABORTED) return RSMERR_CONN_ABORTED;
  return RSMERR_BARRIER_FAILURE;  // transient: the caller retries
}

int import_transfer(controller* c, import_seg* im, bool write, uint64_t off, void* buf, size_t len,
                    void* desc) noexcept {
  const target* t = im->tgt.load(std::memory_order_acquire);
  uint64_t raddr = t->base + off;
  while (len) {
    size_t n = std::min(len, c->max_msg);
    int e = transfer(c, im, write, buf, n, desc, raddr, t->key);
    if (e) return e;
    buf = static_cast<char*>(buf) + n;
    raddr += n;
    len -= n;
  }
  return 0;
}

int import_check(import_seg* im, off_t offset, size_t len, rsm_permission_t need) noexcept {
  // The request's own errors first, then the connection's (which explicit
  // mode may defer: import_refused).
  if ((im->perm & need) != need) return RSMERR_PERM_DENIED;
  const target* t = im->tgt.load(std::memory_order_acquire);
  if (offset < 0 || static_cast<uint64_t>(offset) >= t->size) return RSMERR_BAD_OFFSET;
  if (len == 0 || len > t->size - static_cast<uint64_t>(offset)) return RSMERR_BAD_LENGTH;
  if (int a = im->aborted.load(std::memory_order_acquire)) return a;
  if (im->mode == RSM_BARRIER_MODE_IMPLICIT && im->barriers == 0) return RSMERR_BARRIER_UNINITIALIZED;
  return RSM_SUCCESS;
}

namespace {

template <typename T>
T swapped(T v) {
  if constexpr (sizeof(T) == 2) return bswap_16(v);
  if constexpr (sizeof(T) == 4) return bswap_32(v);
  if constexpr (sizeof(T) == 8) return bswap_64(v);
  return v;
}

// get8..64 and put8..64: rep_cnt items of T at consecutive locations.
template <typename T>
int access_n(rsm_memseg_import_handle_t h, off_t offset, T* datap, ulong_t rep_cnt, bool write) noexcept {
  import_seg* im;
  controller* c;
  if (int r = import_lookup(h, &im, &c)) return r;
  if (!datap) return RSMERR_BAD_ADDR;
  if ((reinterpret_cast<uintptr_t>(datap) | static_cast<uintptr_t>(offset)) & (sizeof(T) - 1))
    return RSMERR_BAD_MEM_ALIGNMENT;
  if (rep_cnt > SIZE_MAX / sizeof(T)) return RSMERR_BAD_LENGTH;
  size_t len = rep_cnt * sizeof(T);
  std::lock_guard<std::mutex> l(c->data_mtx);
  if (!handle_get(hval(h), kind::importer, nullptr, nullptr)) return RSMERR_BAD_SEG_HNDL;
  if (int r = import_check(im, offset, len, write ? RSM_PERM_WRITE : RSM_PERM_READ))
    return import_refused(im, r);
  uint32_t gen = im->gen.load(std::memory_order_acquire);
  int e = 0;
  if (sizeof(T) == 1 || !im->swap) {
    e = import_transfer(c, im, write, static_cast<uint64_t>(offset), datap, len, nullptr);
  } else if (write) {
    // The exporter reads in the other byte order: send swapped copies.
    T tmp[512];
    for (size_t done = 0; done < rep_cnt && !e;) {
      size_t n = std::min<size_t>(rep_cnt - done, 512);
      for (size_t i = 0; i < n; i++) tmp[i] = swapped(datap[done + i]);
      e = import_transfer(c, im, true, static_cast<uint64_t>(offset) + done * sizeof(T), tmp, n * sizeof(T),
                          nullptr);
      done += n;
    }
  } else {
    e = import_transfer(c, im, false, static_cast<uint64_t>(offset), datap, len, nullptr);
    if (!e)
      for (size_t i = 0; i < rep_cnt; i++) datap[i] = swapped(datap[i]);
  }
  return import_finish(im, e, gen);
}

int bulk(rsm_memseg_import_handle_t h, off_t offset, void* addr, size_t length, bool write) noexcept {
  import_seg* im;
  controller* c;
  if (int r = import_lookup(h, &im, &c)) return r;
  if (!addr) return RSMERR_BAD_ADDR;
  std::lock_guard<std::mutex> l(c->data_mtx);
  if (!handle_get(hval(h), kind::importer, nullptr, nullptr)) return RSMERR_BAD_SEG_HNDL;
  if (int r = import_check(im, offset, length, write ? RSM_PERM_WRITE : RSM_PERM_READ))
    return import_refused(im, r);
  uint32_t gen = im->gen.load(std::memory_order_acquire);
  int e = import_transfer(c, im, write, static_cast<uint64_t>(offset), addr, length, nullptr);
  return import_finish(im, e, gen);
}

int scatter_gather(rsm_scat_gath_t* sg, bool write) {
  if (!sg) return RSMERR_BAD_SGIO;
  import_seg* im;
  controller* c;
  if (int r = import_lookup(sg->remote_handle, &im, &c)) return r;
  if (sg->io_request_count == 0 || sg->io_request_count > RSM_MAX_SGIOREQS || !sg->iovec)
    return RSMERR_BAD_SGIO;
  if (sg->flags & ~static_cast<uint_t>(RSM_IMPLICIT_SIGPOST | RSM_SIGPOST_NO_ACCUMULATE))
    return RSMERR_BAD_SGIO;
  ulong_t count = sg->io_request_count;
  int result = RSM_SUCCESS;
  {
    std::lock_guard<std::mutex> l(c->data_mtx);
    if (!handle_get(hval(sg->remote_handle), kind::importer, nullptr, nullptr)) return RSMERR_BAD_SEG_HNDL;
    sg->io_residual_count = count;
    for (ulong_t i = 0; i < count; i++) {
      const rsm_iovec_t& v = sg->iovec[i];
      char* local = nullptr;
      void* desc = nullptr;
      if (v.io_type == RSM_HANDLE_TYPE) {
        void* obj = nullptr;
        controller* hc = nullptr;
        if (!v.local.handle || !handle_get(hval(v.local.handle), kind::localmem, &obj, &hc) || hc != c) {
          result = RSMERR_BAD_LOCALMEM_HNDL;
          break;
        }
        auto* lm = static_cast<localmem*>(obj);
        if (v.local_offset >= lm->len) {
          result = RSMERR_BAD_OFFSET;
          break;
        }
        if (v.transfer_length > lm->len - v.local_offset) {
          result = RSMERR_BAD_LENGTH;
          break;
        }
        local = lm->vaddr + v.local_offset;
        desc = lm->desc;
      } else if (v.io_type == RSM_VA_TYPE) {
        if (!v.local.vaddr) {
          result = RSMERR_BAD_ADDR;
          break;
        }
        local = v.local.vaddr + v.local_offset;
      } else {
        result = RSMERR_BAD_SGIO;
        break;
      }
      if (v.remote_offset > static_cast<size_t>(INT64_MAX)) {
        result = RSMERR_BAD_OFFSET;
        break;
      }
      result = import_check(im, static_cast<off_t>(v.remote_offset), v.transfer_length,
                            write ? RSM_PERM_WRITE : RSM_PERM_READ);
      if (result) {
        result = import_refused(im, result);
        break;
      }
      // In list order, each complete before the next starts: what implicit
      // mode promises, and explicit mode gets the same. A failure deferred
      // to close_barrier stops the list too: io_residual_count tells.
      uint32_t gen = im->gen.load(std::memory_order_acquire);
      const uint64_t errors = im->errors.load(std::memory_order_relaxed);
      int e = import_transfer(c, im, write, v.remote_offset, local, v.transfer_length, desc);
      if ((result = import_finish(im, e, gen)) || im->errors.load(std::memory_order_relaxed) != errors) break;
      sg->io_residual_count = count - i - 1;
    }
  }
  if (result == RSM_SUCCESS && sg->io_residual_count == 0 && (sg->flags & RSM_IMPLICIT_SIGPOST))
    result = rsm_intr_signal_post(sg->remote_handle, sg->flags & RSM_SIGPOST_NO_ACCUMULATE);
  return result;
}

}  // namespace
}  // namespace weft::rsm

using namespace weft::rsm;

RSM_API int rsm_memseg_import_connect(rsmapi_controller_handle_t controller_h, rsm_node_id_t node_id,
                                      rsm_memseg_id_t segment_id, rsm_permission_t perm,
                                      rsm_memseg_import_handle_t* im_memseg) {
  return guard([&]() -> int {
    controller* c = nullptr;
    int r = controller_lookup(controller_h, &c);
    if (r) return r;
    if (!im_memseg) return RSMERR_BAD_ADDR;
    *im_memseg = nullptr;
    // "perm is restricted to" 0400, 0200 and 0600.
    if (perm != RSM_PERM_READ && perm != RSM_PERM_WRITE && perm != RSM_PERM_RDWR) return RSMERR_PERM_DENIED;
    if (segment_id == 0) return RSMERR_SEG_NOT_PUBLISHED;
    const config& k = cfg();
    {
      std::lock_guard<std::mutex> l(c->ctl_mtx);
      if (c->import_count >= k.max_import_segments) return RSMERR_INSUFFICIENT_RESOURCES;
    }
    deadline d(k.connect_timeout_ms);
    reg_entry e;
    if ((r = registry_lookup(c, node_id, segment_id, d, &e))) return r;

    auto im = std::make_unique<import_seg>();
    im->ctl = c;
    im->id = random64();
    im->token = random64();
    im->node = node_id;
    im->segid = segment_id;
    im->perm = perm;
    im->sig = std::make_shared<sigstate>();
    im->exporter_instance = e.instance;
    im->same_node = node_id == c->node;
    im->connect_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (im->connect_efd < 0) return RSMERR_INSUFFICIENT_RESOURCES;
    peer* p;
    {
      std::lock_guard<std::mutex> l(c->ctl_mtx);
      p = peer_find_or_add(c, e.instance, e.addr.data(), e.addr.size(), node_id, e.pid);
      if (!p) {
        close(im->connect_efd);
        return RSMERR_INSUFFICIENT_RESOURCES;
      }
      if (p->dead) {
        // The registry entry outlived its process (found before anyone
        // removed it): nothing is published there.
        close(im->connect_efd);
        return RSMERR_SEG_NOT_PUBLISHED;
      }
      p->users++;
      if (p->users == 1) p->last_rx_ms = now_ms();  // the liveness clock starts now
      im->p = p;
      im->connecting = true;
      c->imports.emplace(im->id, im.get());
      c->import_count++;
    }
    // Drops a connect that will not complete: the service thread forgets it
    // and, if the exporter had already accepted, the exporter is told.
    auto abandon = [&](int code) noexcept {
      std::lock_guard<std::mutex> l(c->ctl_mtx);
      c->imports.erase(im->id);
      c->import_count--;
      if (im->conn_id && !p->dead) {
        try {
          proto::writer dw(proto::disconnect, c->instance);
          dw.u64(im->conn_id).u64(im->conn_token);
          service_send(c, p, std::move(dw.out()));
        } catch (...) {
          // Out of memory: the exporter forgets us when we stop answering pings.
        }
      }
      peer_put(c, p);
      if (im->connect_efd >= 0) close(im->connect_efd);
      im->connect_efd = -1;
      return code;
    };
    try {
      proto::writer w(proto::connect_req, c->instance);
      w.u64(im->id).u64(im->token).u32(segment_id).u32(perm).u32(c->node);
      w.u32(static_cast<uint32_t>(geteuid()))
          .u32(static_cast<uint32_t>(getegid()))
          .u32(static_cast<uint32_t>(getpid()));
      w.u8(k.big_endian).bytes(c->svc_addr.data(), c->svc_addr.size());
      service_send(c, p, std::move(w.out()));
      for (;;) {
        {
          std::lock_guard<std::mutex> l(c->ctl_mtx);
          if (!im->connecting) break;
        }
        if (d.expired()) return abandon(RSMERR_REMOTE_NODE_UNREACHABLE);
        pollfd pf{im->connect_efd, POLLIN, 0};
        int n = poll(&pf, 1, std::min(d.remaining_ms(), 100));
        if (n < 0 && errno == EINTR) return abandon(RSMERR_INTERRUPTED);
      }
      close(im->connect_efd);
      im->connect_efd = -1;
      if (im->connect_status != RSM_SUCCESS) return abandon(im->connect_status);
      im->swap = im->exporter_big_endian != static_cast<uint32_t>(k.big_endian);
      std::lock_guard<std::mutex> l(c->data_mtx);
      if ((r = peer_data_addr(c, p, &im->fa))) return abandon(r);
      im->handle = handle_add(kind::importer, im.get(), c);
    } catch (...) {
      abandon(0);
      throw;
    }
    controller_dep(c, +1);
    *im_memseg = reinterpret_cast<rsm_memseg_import_handle_t>(im->handle);
    RSM_LOG("connected to node %u segment %#x perm %o%s", node_id, segment_id, perm,
            im->swap ? " (swapping)" : "");
    im.release();
    return RSM_SUCCESS;
  });
}

RSM_API int rsm_memseg_import_disconnect(rsm_memseg_import_handle_t im_memseg) {
  return guard([&]() -> int {
    import_seg* im;
    controller* c;
    if (int r = import_lookup(im_memseg, &im, &c)) return r;
    {
      std::lock_guard<std::mutex> l(c->data_mtx);
      if (!handle_get(hval(im_memseg), kind::importer, nullptr, nullptr)) return RSMERR_BAD_SEG_HNDL;
      {
        std::lock_guard<std::mutex> ml(im->map_mtx);
        if (im->map_addr) return RSMERR_SEG_STILL_MAPPED;
      }
      if (im->sig->pollfd_held()) return RSMERR_POLLFD_IN_USE;
      handle_remove(im->handle);  // no transfer can start on it any more
    }
    {
      std::lock_guard<std::mutex> l(c->ctl_mtx);
      c->imports.erase(im->id);
      c->import_count--;
      if (!im->aborted.load() && im->p && !im->p->dead) {
        proto::writer w(proto::disconnect, c->instance);
        w.u64(im->conn_id).u64(im->conn_token);
        service_send(c, im->p, std::move(w.out()));
      }
      peer_put(c, im->p);
      if (im->map_sock >= 0) close(im->map_sock);
      im->map_sock = -1;
    }
    im->sig->wake_all();
    delete im;
    controller_dep(c, -1);
    return RSM_SUCCESS;
  });
}

RSM_API int rsm_memseg_import_get8(rsm_memseg_import_handle_t h, off_t off, uint8_t* d, ulong_t n) {
  return access_n(h, off, d, n, false);
}
RSM_API int rsm_memseg_import_get16(rsm_memseg_import_handle_t h, off_t off, uint16_t* d, ulong_t n) {
  return access_n(h, off, d, n, false);
}
RSM_API int rsm_memseg_import_get32(rsm_memseg_import_handle_t h, off_t off, uint32_t* d, ulong_t n) {
  return access_n(h, off, d, n, false);
}
RSM_API int rsm_memseg_import_get64(rsm_memseg_import_handle_t h, off_t off, uint64_t* d, ulong_t n) {
  return access_n(h, off, d, n, false);
}
RSM_API int rsm_memseg_import_put8(rsm_memseg_import_handle_t h, off_t off, uint8_t* d, ulong_t n) {
  return access_n(h, off, d, n, true);
}
RSM_API int rsm_memseg_import_put16(rsm_memseg_import_handle_t h, off_t off, uint16_t* d, ulong_t n) {
  return access_n(h, off, d, n, true);
}
RSM_API int rsm_memseg_import_put32(rsm_memseg_import_handle_t h, off_t off, uint32_t* d, ulong_t n) {
  return access_n(h, off, d, n, true);
}
RSM_API int rsm_memseg_import_put64(rsm_memseg_import_handle_t h, off_t off, uint64_t* d, ulong_t n) {
  return access_n(h, off, d, n, true);
}

RSM_API int rsm_memseg_import_get(rsm_memseg_import_handle_t h, off_t off, void* dst, size_t len) {
  return bulk(h, off, dst, len, false);
}
RSM_API int rsm_memseg_import_put(rsm_memseg_import_handle_t h, off_t off, void* src, size_t len) {
  return bulk(h, off, src, len, true);
}

RSM_API int rsm_memseg_import_getv(rsm_scat_gath_t* sg) {
  return guard([&] { return scatter_gather(sg, false); });
}
RSM_API int rsm_memseg_import_putv(rsm_scat_gath_t* sg) {
  return guard([&] { return scatter_gather(sg, true); });
}

RSM_API int rsm_create_localmemory_handle(rsmapi_controller_handle_t controller_h,
                                          rsm_localmemory_handle_t* l_handle, caddr_t local_vaddr,
                                          size_t length) {
  return guard([&]() -> int {
    controller* c = nullptr;
    int r = controller_lookup(controller_h, &c);
    if (r) return r;
    if (!l_handle) return RSMERR_BAD_LOCALMEM_HNDL;
    *l_handle = nullptr;
    if (!local_vaddr) return RSMERR_BAD_ADDR;
    if (length == 0) return RSMERR_BAD_LENGTH;
    auto lm = std::make_unique<localmem>();
    lm->ctl = c;
    lm->vaddr = local_vaddr;
    lm->len = length;
    {
      std::lock_guard<std::mutex> l(c->data_mtx);
      int fr = fi_mr_reg(c->data_dom, local_vaddr, length, FI_READ | FI_WRITE, 0,
                         c->prov_key ? 0 : random64() & c->key_mask, 0, &lm->mr, nullptr);
      if (fr) {
        RSM_LOG("local memory registration: %s", fi_strerror(-fr));
        return fr == -FI_EFAULT ? RSMERR_BAD_ADDR : RSMERR_INSUFFICIENT_RESOURCES;
      }
      lm->desc = fi_mr_desc(lm->mr);
      lm->handle = handle_add(kind::localmem, lm.get(), c);
    }
    controller_dep(c, +1);
    *l_handle = reinterpret_cast<rsm_localmemory_handle_t>(lm->handle);
    lm.release();
    return RSM_SUCCESS;
  });
}

RSM_API int rsm_free_localmemory_handle(rsmapi_controller_handle_t controller_h,
                                        rsm_localmemory_handle_t l_handle) {
  return guard([&]() -> int {
    controller* c = nullptr;
    int r = controller_lookup(controller_h, &c);
    if (r) return r;
    void* obj = nullptr;
    controller* hc = nullptr;
    if (!l_handle || !handle_get(hval(l_handle), kind::localmem, &obj, &hc) || hc != c)
      return RSMERR_BAD_LOCALMEM_HNDL;
    auto* lm = static_cast<localmem*>(obj);
    {
      std::lock_guard<std::mutex> l(c->data_mtx);  // no scatter/gather is using it
      if (!handle_get(hval(l_handle), kind::localmem, nullptr, nullptr)) return RSMERR_BAD_LOCALMEM_HNDL;
      handle_remove(lm->handle);
      fi_close(&lm->mr->fid);
    }
    delete lm;
    controller_dep(c, -1);
    return RSM_SUCCESS;
  });
}
