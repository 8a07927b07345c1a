// SPDX-License-Identifier: BSD-3-Clause
// Counters: fi_cntr_open, the fi_ops_cntr table and the provider interface of
// cntr.hpp.
#include "util/cntr.hpp"

#include <atomic>
#include <memory>
#include <mutex>

#include "util/domain.hpp"
#include "util/util.hpp"

namespace weft {

struct cntr {
  fid_cntr fid_;  // first
  domain* dom;
  wait_set* set;
  std::atomic<uint64_t> val{0};
  std::atomic<uint64_t> err{0};
  std::atomic<uint64_t> ops_flags{0};
  std::mutex mtx;  // guards the fi_poll snapshot
  uint64_t poll_val = 0;
  uint64_t poll_err = 0;
  waiter w;
  progress_list progress;
  users users_;

  cntr(domain* d, const fi_cntr_attr& attr, void* context, wait_set* ws);

  // fi_cntr_set / fi_cntr_add restart what fi_poll reports as a change.
  void rebase() noexcept {
    std::lock_guard<std::mutex> l(mtx);
    poll_val = val.load(std::memory_order_acquire);
    poll_err = err.load(std::memory_order_acquire);
  }
};

namespace {

cntr* of(fid_cntr* f) noexcept {
  return from_fid<cntr>(f);
}

uint64_t cntr_read_op(fid_cntr* f) noexcept {
  cntr* c = of(f);
  c->progress.run();
  return c->val.load(std::memory_order_acquire);
}

uint64_t cntr_readerr_op(fid_cntr* f) noexcept {
  cntr* c = of(f);
  c->progress.run();
  return c->err.load(std::memory_order_acquire);
}

int cntr_add_op(fid_cntr* f, uint64_t value) noexcept {
  cntr* c = of(f);
  c->val.fetch_add(value, std::memory_order_acq_rel);
  c->rebase();
  c->w.signal();
  return 0;
}

int cntr_set_op(fid_cntr* f, uint64_t value) noexcept {
  cntr* c = of(f);
  c->val.store(value, std::memory_order_release);
  c->rebase();
  c->w.signal();
  return 0;
}

int cntr_adderr_op(fid_cntr* f, uint64_t value) noexcept {
  cntr_err_inc(f, value);
  return 0;
}

int cntr_seterr_op(fid_cntr* f, uint64_t value) noexcept {
  cntr* c = of(f);
  c->err.store(value, std::memory_order_release);
  c->w.signal();
  return 0;
}

int cntr_wait_op(fid_cntr* f, uint64_t threshold, int timeout) noexcept {
  cntr* c = of(f);
  if (!c->w.can_block()) return -FI_EINVAL;  // FI_WAIT_NONE or FI_WAIT_SET
  blocking_pass pass(c->w);
  if (!pass) return -FI_ECANCELED;
  uint64_t err0 = c->err.load(std::memory_order_acquire);
  deadline d(timeout);
  for (;;) {
    c->progress.run();
    bool pollers = !c->progress.empty();
    uint64_t seen = c->w.seq();
    if (c->val.load(std::memory_order_acquire) >= threshold) return 0;
    if (c->err.load(std::memory_order_acquire) != err0) return -FI_EAVAIL;  // an error unblocks waiters
    if (c->w.is_shut()) return -FI_ECANCELED;                               // the counter is being closed
    if (d.expired()) return -FI_ETIMEDOUT;
    c->w.block(seen, d, pollers ? progress_slice_ms : -1);
  }
}

int cntr_close(fid* f) noexcept {
  cntr* c = from_fid<cntr>(f);
  if (c->users_.busy()) return -FI_EBUSY;
  c->w.shut();  // a thread asleep in fi_cntr_wait returns first
  if (c->set) wait_set_detach(c->set, f);
  c->dom->users_.drop();
  delete c;
  return 0;
}

int cntr_control(fid* f, int command, void* arg) noexcept {
  cntr* c = from_fid<cntr>(f);
  switch (command) {
    case FI_GETOPSFLAG:
      if (!arg) return -FI_EINVAL;
      *static_cast<uint64_t*>(arg) = c->ops_flags.load(std::memory_order_relaxed);
      return 0;
    case FI_SETOPSFLAG:
      if (!arg) return -FI_EINVAL;
      c->ops_flags.store(*static_cast<uint64_t*>(arg), std::memory_order_relaxed);
      return 0;
    case FI_GETWAIT:
      return c->w.get_wait(arg);
    case FI_GETWAITOBJ:
      return c->w.get_wait_obj(arg);
    default:
      return -FI_ENOSYS;
  }
}

fi_ops cntr_fi_ops = {
    sizeof(fi_ops), cntr_close, fid_no_bind, cntr_control, fid_no_ops_open, fid_no_tostr, fid_no_ops_set,
};

fi_ops_cntr cntr_ops = {
    sizeof(fi_ops_cntr), cntr_read_op, cntr_readerr_op, cntr_add_op,
    cntr_set_op,         cntr_wait_op, cntr_adderr_op,  cntr_seterr_op,
};

}  // namespace

cntr::cntr(domain* d, const fi_cntr_attr& attr, void* context, wait_set* ws)
    : dom(d), set(ws), w(attr.wait_obj, ws) {
  fid_.fid.fclass = FI_CLASS_CNTR;
  fid_.fid.context = context;
  fid_.fid.ops = &cntr_fi_ops;
  fid_.ops = &cntr_ops;
}

int cntr_open(domain& dom, fi_cntr_attr* attr, fid_cntr** out, void* context) noexcept {
  return guard([&]() -> int {
    if (!out) return -FI_EINVAL;
    fi_cntr_attr a{};  // NULL attr: count completions, no wait object
    if (attr) a = *attr;
    if (raw(a.events) != FI_CNTR_EVENTS_COMP) return -FI_EINVAL;
    if (a.flags) return -FI_EBADFLAGS;  // reserved, must be 0
    if (int r = check_wait_obj(a.wait_obj, a.wait_set)) return r;
    wait_set* ws = a.wait_obj == FI_WAIT_SET ? wait_set_check(a.wait_set, dom.fab) : nullptr;
    auto c = std::make_unique<cntr>(&dom, a, context, ws);
    if (ws) wait_set_attach(ws, &c->fid_.fid);
    dom.users_.add();
    *out = &c.release()->fid_;
    return 0;
  });
}

// ---------------------------------------------------------------- internal
bool is_cntr(const fid* f) noexcept {
  return is_class(f, FI_CLASS_CNTR) && f->ops == &cntr_fi_ops;
}

void cntr_inc(fid_cntr* f, uint64_t n) noexcept {
  cntr* c = of(f);
  c->val.fetch_add(n, std::memory_order_acq_rel);
  c->w.signal();
}

void cntr_err_inc(fid_cntr* f, uint64_t n) noexcept {
  cntr* c = of(f);
  c->err.fetch_add(n, std::memory_order_acq_rel);
  c->w.signal();
}

void cntr_take(fid_cntr* f) noexcept {
  of(f)->users_.add();
}
void cntr_drop(fid_cntr* f) noexcept {
  of(f)->users_.drop();
}

int cntr_add_poller(fid_cntr* f, void (*fn)(void*), void* arg, bool (*arm)(void*)) noexcept {
  if (!fn) return -FI_EINVAL;
  return guard([&]() -> int {
    of(f)->progress.add(fn, arg, arm);
    return 0;
  });
}

int cntr_del_poller(fid_cntr* f, void (*fn)(void*), void* arg) noexcept {
  return of(f)->progress.remove(fn, arg) ? 0 : -FI_ENOENT;
}

int cntr_add_wait_fd(fid_cntr* f, int fd, uint32_t events) noexcept {
  return of(f)->w.add_fd(fd, events);
}
int cntr_del_wait_fd(fid_cntr* f, int fd) noexcept {
  return of(f)->w.del_fd(fd);
}

uint64_t cntr_ops_flags(fid_cntr* f) noexcept {
  return of(f)->ops_flags.load(std::memory_order_relaxed);
}

bool cntr_progress(fid_cntr* f) noexcept {
  cntr* c = of(f);
  c->progress.run();
  return !c->progress.empty();
}

bool cntr_arm(fid_cntr* f) noexcept {
  return of(f)->progress.arm();
}

waiter& cntr_waiter(fid_cntr* f) noexcept {
  return of(f)->w;
}
domain* cntr_domain(fid_cntr* f) noexcept {
  return of(f)->dom;
}

bool cntr_poll_changed(fid_cntr* f) noexcept {
  cntr* c = of(f);
  std::lock_guard<std::mutex> l(c->mtx);
  uint64_t v = c->val.load(std::memory_order_acquire);
  uint64_t e = c->err.load(std::memory_order_acquire);
  bool changed = v != c->poll_val || e != c->poll_err;
  c->poll_val = v;
  c->poll_err = e;
  return changed;
}

}  // namespace weft
