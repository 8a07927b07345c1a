// SPDX-License-Identifier: BSD-3-Clause
// Barriers and barrier modes. A transfer here is complete when its call
// returns (it waited for its completion: delivery-complete for puts), so a
// barrier is the record of whether anything went wrong since it was opened:
// a failed transfer (the import's error count moved) or a rebind that may
// have sent some of them to the old memory (its generation moved). Closing
// then reports RSMERR_BARRIER_FAILURE and the caller repeats those accesses;
// a cut connection reports RSMERR_CONN_ABORTED (repeating will not help).
#include "import.hpp"

namespace weft::rsm {
namespace {

// The barrier behind a caller's rsmapi_barrier_t, its import segment and
// controller, with the data mutex held.
int lookup(rsmapi_barrier_t* bar, barrier_state** bs, import_seg** im, controller** c,
           std::unique_lock<std::mutex>* lk) {
  if (!bar) return RSMERR_BAD_BARRIER_PTR;
  void* obj = nullptr;
  controller* bc = nullptr;
  if (!bar->privdata || !handle_get(hval(bar->privdata), kind::barrier, &obj, &bc))
    return RSMERR_BARRIER_UNINITIALIZED;
  *lk = std::unique_lock<std::mutex>(bc->data_mtx);
  if (!handle_get(hval(bar->privdata), kind::barrier, nullptr, nullptr)) return RSMERR_BARRIER_UNINITIALIZED;
  auto* b = static_cast<barrier_state*>(obj);
  if (reinterpret_cast<uint64_t>(bar->seg) != b->import_handle) return RSMERR_BAD_BARRIER_PTR;
  void* iobj = nullptr;
  if (!handle_get(b->import_handle, kind::importer, &iobj, nullptr)) return RSMERR_BAD_SEG_HNDL;
  *bs = b;
  *im = static_cast<import_seg*>(iobj);
  *c = bc;
  return RSM_SUCCESS;
}

}  // namespace
}  // namespace weft::rsm

using namespace weft::rsm;

RSM_API int rsm_memseg_import_init_barrier(rsm_memseg_import_handle_t h, rsm_barrier_type_t type,
                                           rsmapi_barrier_t* barrier) {
  return guard([&]() -> int {
    import_seg* im;
    controller* c;
    if (int r = import_lookup(h, &im, &c)) return r;
    if (!barrier) return RSMERR_BAD_BARRIER_PTR;
    // Only segment barriers: node and per-thread barriers are refused.
    if (enum_value(type) != RSM_BARRIER_SEGMENT) return RSMERR_BAD_MODE;
    auto b = std::make_unique<barrier_state>();
    std::lock_guard<std::mutex> l(c->data_mtx);
    if (!handle_get(hval(h), kind::importer, nullptr, nullptr)) return RSMERR_BAD_SEG_HNDL;
    b->import_handle = hval(h);
    b->handle = handle_add(kind::barrier, b.get(), c);
    im->barriers++;
    barrier->seg = h;
    barrier->gnum = 0;
    barrier->privdata = reinterpret_cast<void*>(b->handle);
    b.release();
    return RSM_SUCCESS;
  });
}

RSM_API int rsm_memseg_import_open_barrier(rsmapi_barrier_t* barrier) {
  return guard([&]() -> int {
    barrier_state* b;
    import_seg* im;
    controller* c;
    std::unique_lock<std::mutex> lk;
    if (int r = lookup(barrier, &b, &im, &c, &lk)) return r;
    if (b->opened) return RSMERR_BARRIER_OPEN_FAILED;  // already open
    if (im->aborted.load()) return RSMERR_CONN_ABORTED;
    b->opened = true;
    im->open_barriers++;
    b->errors_at_open = im->errors.load(std::memory_order_acquire);
    b->gen_at_open = im->gen.load(std::memory_order_acquire);
    barrier->gnum = static_cast<uint16_t>(b->gen_at_open);
    return RSM_SUCCESS;
  });
}

RSM_API int rsm_memseg_import_close_barrier(rsmapi_barrier_t* barrier) {
  return guard([&]() -> int {
    barrier_state* b;
    import_seg* im;
    controller* c;
    std::unique_lock<std::mutex> lk;
    if (int r = lookup(barrier, &b, &im, &c, &lk)) return r;
    if (!b->opened) return RSMERR_BARRIER_NOT_OPENED;
    b->opened = false;
    im->open_barriers--;
    if (im->aborted.load()) return RSMERR_CONN_ABORTED;
    if (im->errors.load(std::memory_order_acquire) != b->errors_at_open ||
        im->gen.load(std::memory_order_acquire) != b->gen_at_open)
      return RSMERR_BARRIER_FAILURE;
    return RSM_SUCCESS;
  });
}

RSM_API int rsm_memseg_import_order_barrier(rsmapi_barrier_t* barrier) {
  return guard([&]() -> int {
    barrier_state* b;
    import_seg* im;
    controller* c;
    std::unique_lock<std::mutex> lk;
    if (int r = lookup(barrier, &b, &im, &c, &lk)) return r;
    if (!b->opened) return RSMERR_BARRIER_NOT_OPENED;
    // Every earlier write has completed (each put waited for delivery), so
    // later writes are already ordered after them.
    return im->aborted.load() ? RSMERR_CONN_ABORTED : RSM_SUCCESS;
  });
}

RSM_API int rsm_memseg_import_destroy_barrier(rsmapi_barrier_t* barrier) {
  return guard([&]() -> int {
    if (!barrier) return RSMERR_BAD_BARRIER_PTR;
    void* obj = nullptr;
    controller* c = nullptr;
    if (!barrier->privdata || !handle_get(hval(barrier->privdata), kind::barrier, &obj, &c))
      return RSMERR_BARRIER_UNINITIALIZED;
    auto* b = static_cast<barrier_state*>(obj);
    {
      std::lock_guard<std::mutex> l(c->data_mtx);
      if (!handle_get(hval(barrier->privdata), kind::barrier, nullptr, nullptr))
        return RSMERR_BARRIER_UNINITIALIZED;
      handle_remove(b->handle);
      void* iobj = nullptr;
      if (handle_get(b->import_handle, kind::importer, &iobj, nullptr)) {
        static_cast<import_seg*>(iobj)->barriers--;
        if (b->opened) static_cast<import_seg*>(iobj)->open_barriers--;
      }
    }
    barrier->privdata = nullptr;
    barrier->seg = nullptr;
    delete b;
    return RSM_SUCCESS;
  });
}

RSM_API int rsm_memseg_import_get_mode(rsm_memseg_import_handle_t h, rsm_barrier_mode_t* mode) {
  return guard([&]() -> int {
    import_seg* im;
    controller* c;
    if (int r = import_lookup(h, &im, &c)) return r;
    if (!mode) return RSMERR_BAD_ADDR;
    std::lock_guard<std::mutex> l(c->data_mtx);
    if (!handle_get(hval(h), kind::importer, nullptr, nullptr)) return RSMERR_BAD_SEG_HNDL;
    *mode = im->mode;
    return RSM_SUCCESS;
  });
}

RSM_API int rsm_memseg_import_set_mode(rsm_memseg_import_handle_t h, rsm_barrier_mode_t mode_arg) {
  return guard([&]() -> int {
    import_seg* im;
    controller* c;
    if (int r = import_lookup(h, &im, &c)) return r;
    int m = enum_value(mode_arg);
    if (m != RSM_BARRIER_MODE_IMPLICIT && m != RSM_BARRIER_MODE_EXPLICIT) return RSMERR_BAD_MODE;
    rsm_barrier_mode_t mode = static_cast<rsm_barrier_mode_t>(m);
    std::lock_guard<std::mutex> l(c->data_mtx);
    if (!handle_get(hval(h), kind::importer, nullptr, nullptr)) return RSMERR_BAD_SEG_HNDL;
    im->mode = mode;
    return RSM_SUCCESS;
  });
}
