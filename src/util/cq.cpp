// SPDX-License-Identifier: BSD-3-Clause
// Completion queues: fi_cq_open and the fi_ops_cq table, plus the provider
// interface of cq.hpp.
//
// Entries live in one power-of-two ring of 64-byte slots holding every field
// any format can carry, so a write is a locked store and a read converts to
// the CQ's format. An error completion is a slot marked as an error, whose
// details wait in `errs`: order is kept, fi_cq_read returns the successes
// queued before it, then -FI_EAVAIL until fi_cq_readerr takes it. A full ring
// doubles (off the hot path); nothing is ever dropped.
#include "util/cq.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "common/clock.hpp"
#include "core/fabric2.hpp"
#include "util/domain.hpp"
#include "util/util.hpp"

namespace weft {

namespace {

struct cq_error {
  fi_cq_err_entry e;
  std::vector<uint8_t> err_data;
};

constexpr size_t default_cq_size = 1024;
constexpr size_t max_initial_slots = 1 << 16;  // larger CQs grow on demand

size_t round_pow2(size_t n) {
  size_t p = 16;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace

struct cq : cq_front {
  domain* dom;
  fi_cq_wait_cond wait_cond;
  wait_set* set;
  policy_mutex mtx;
  std::vector<cq_slot> ring;  // power-of-two capacity
  size_t head = 0;
  size_t count = 0;
  std::deque<cq_error> errs;
  std::vector<uint8_t> err_buf;  // provider-owned err_data handed out by readerr
  // fi_cq_signal: pending until a blocking read consumes it (returning
  // -FI_EAGAIN), whether or not a thread was asleep when it came.
  std::atomic<bool> signaled{false};
  waiter w;
  progress_list progress;
  users users_;
  // Since when the entries are held back (cq_hold; cq_front::holds).
  std::atomic<uint64_t> hold_since_ms{0};

  cq(domain* d, const fi_cq_attr& attr, void* context, wait_set* ws);

  size_t mask() const noexcept { return ring.size() - 1; }
  bool head_is_err() const noexcept { return count && ring[head].is_err; }
  // Reserves the tail slot, growing the ring when full. Lock held.
  cq_slot* push() noexcept {
    if (count == ring.size()) [[unlikely]] {
      if (!grow()) return nullptr;
    }
    cq_slot* s = &ring[(head + count) & mask()];
    count++;
    return s;
  }
  [[gnu::cold, gnu::noinline]] bool grow() noexcept;
};

bool cq::grow() noexcept {
  try {
    std::vector<cq_slot> bigger(ring.size() * 2);
    for (size_t i = 0; i < count; i++) bigger[i] = ring[(head + i) & mask()];
    ring.swap(bigger);
    head = 0;
    return true;
  } catch (...) {
    return false;
  }
}

size_t cq_entry_size(fi_cq_format format) noexcept {
  switch (format) {
    case FI_CQ_FORMAT_CONTEXT:
      return sizeof(fi_cq_entry);
    case FI_CQ_FORMAT_MSG:
      return sizeof(fi_cq_msg_entry);
    case FI_CQ_FORMAT_DATA:
      return sizeof(fi_cq_data_entry);
    case FI_CQ_FORMAT_TAGGED:
      return sizeof(fi_cq_tagged_entry);
    default:
      return 0;
  }
}

namespace {

cq* of(fid_cq* f) noexcept {
  return from_fid<cq>(f);
}

template <fi_cq_format F, class E>
ssize_t drain(cq* c, void* buf, size_t count, fi_addr_t* src) noexcept {
  auto* out = static_cast<E*>(buf);
  size_t n = 0;
  while (n < count && c->count) {
    const cq_slot& s = c->ring[c->head];
    if (s.is_err) break;
    cq_put<F>(out + n, s);
    if (src) src[n] = s.src;
    c->head = (c->head + 1) & c->mask();
    c->count--;
    n++;
  }
  return static_cast<ssize_t>(n);
}

// Entries are held back (cq_hold): an endpoint still owes a peer, and the
// hold is younger than its bound. One load when nobody holds.
bool held(const cq* c) noexcept {
  if (!c->holds.load(std::memory_order_acquire)) [[likely]]
    return false;
  return now_ms() - c->hold_since_ms.load(std::memory_order_relaxed) < cq_hold_max_ms;
}

// Lock held.
ssize_t read_locked(cq* c, void* buf, size_t count, fi_addr_t* src) noexcept {
  if (!c->count || held(c)) return -FI_EAGAIN;
  if (c->ring[c->head].is_err) return -FI_EAVAIL;
  return cq_with_format(c->format, [&]<fi_cq_format F, class E>() { return drain<F, E>(c, buf, count, src); });
}

// A read of a CQ that holds entries already, or that threads share.
[[gnu::noinline]] ssize_t read_polled(cq* c, void* buf, size_t count, fi_addr_t* src) noexcept {
  c->progress.run();
  std::lock_guard<policy_mutex> l(c->mtx);
  return read_locked(c, buf, count, src);
}

ssize_t cq_readfrom_op(fid_cq* f, void* buf, size_t count, fi_addr_t* src) noexcept {
  if (!buf && count) return -FI_EINVAL;
  cq* c = of(f);
  // Nobody else touches a serialised CQ (its lock is off), so while it is
  // empty the entries this read's pollers complete can go straight into
  // buf: the ring's slot written and read back, and the wake-up of
  // waiters (there are none but us), are left out. cq_write stops the
  // direct path at the first entry that must queue (an error, a hold), so
  // what the ring holds after this read comes after what it returned.
  // After the pollers ran, the read's arguments are taken back from the CQ,
  // not kept across the call: the polling path then saves one register.
  if (!c->mtx.locking() && !c->count && count) [[likely]] {
    c->direct_buf = buf;
    c->direct_src = src;
    c->direct_room = count;
    c->direct_count = count;
    c->direct_n = 0;
    c->progress.run();
    c->direct_room = 0;
    if (size_t n = c->direct_n) return static_cast<ssize_t>(n);
    if (!c->count) return -FI_EAGAIN;  // nothing came (the common poll)
    return read_locked(c, c->direct_buf, c->direct_count, c->direct_src);
  }
  return read_polled(c, buf, count, src);
}

ssize_t cq_read_op(fid_cq* f, void* buf, size_t count) noexcept {
  return cq_readfrom_op(f, buf, count, nullptr);
}

ssize_t cq_readerr_op(fid_cq* f, fi_cq_err_entry* buf, uint64_t flags) noexcept {
  if (!buf) return -FI_EINVAL;
  if (!only(flags, FI_PEEK)) return -FI_EBADFLAGS;
  cq* c = of(f);
  c->progress.run();
  std::lock_guard<policy_mutex> l(c->mtx);
  if (!c->head_is_err() || held(c)) return -FI_EAGAIN;
  cq_error& e = c->errs.front();
  // Callers of API < 1.5 pass the older, shorter struct (no err_data_size)
  // and always get a buffer the CQ owns.
  bool v15 = c->dom->api_version >= FI_VERSION(1, 5);
  fi_cq_err_entry out = e.e;
  size_t user_size = v15 ? buf->err_data_size : 0;
  if (user_size && buf->err_data) {
    size_t n = std::min(user_size, e.err_data.size());
    if (n) std::memcpy(buf->err_data, e.err_data.data(), n);
    out.err_data = buf->err_data;
    out.err_data_size = n;
  } else {
    try {
      c->err_buf = e.err_data;  // valid until the next read of this CQ
    } catch (...) {
      return -FI_ENOMEM;
    }
    out.err_data = c->err_buf.empty() ? nullptr : c->err_buf.data();
    out.err_data_size = c->err_buf.size();
  }
  std::memcpy(buf, &out, v15 ? sizeof(out) : offsetof(fi_cq_err_entry, err_data_size));
  // API 1.20 appended the entry's source address (FI_ADDR_NOTAVAIL unless
  // the CQ reports sources and the sender is known).
  if (FI_VERSION_GE(c->dom->api_version, FI_VERSION(1, 20))) {
    const fi_addr_t src = c->ring[c->head].src;
    std::memcpy(reinterpret_cast<char*>(buf) + cq_err_src_addr, &src, sizeof src);
  }
  if (!(flags & FI_PEEK)) {
    c->errs.pop_front();
    c->head = (c->head + 1) & c->mask();
    c->count--;
  }
  return 1;
}

ssize_t cq_sreadfrom_op(fid_cq* f, void* buf, size_t count, fi_addr_t* src, const void* cond,
                        int timeout) noexcept {
  cq* c = of(f);
  if (!c->w.can_block()) return -FI_EINVAL;  // FI_WAIT_NONE or FI_WAIT_SET
  if (!buf && count) return -FI_EINVAL;
  // As in libfabric, the threshold is the value of `cond` itself.
  size_t threshold = 1;
  if (c->wait_cond == FI_CQ_COND_THRESHOLD && cond)
    threshold = std::clamp<size_t>(reinterpret_cast<uintptr_t>(cond), 1, std::max<size_t>(count, 1));
  blocking_pass pass(c->w);
  if (!pass) return -FI_ECANCELED;
  deadline d(timeout);
  for (;;) {
    c->progress.run();
    bool pollers = !c->progress.empty();
    uint64_t seen = c->w.seq();
    {
      std::lock_guard<policy_mutex> l(c->mtx);
      const bool ready = (c->count >= threshold || c->head_is_err()) && !held(c);
      if (ready) return read_locked(c, buf, count, src);
      if (c->w.is_shut()) return -FI_ECANCELED;  // the CQ is being closed
      bool signaled = c->signaled.exchange(false, std::memory_order_acq_rel);
      if (d.expired() || signaled) return c->count ? read_locked(c, buf, count, src) : -FI_EAGAIN;
    }
    // A hold ends with a signal, or when its bound passes: look again then.
    const bool holding = c->holds.load(std::memory_order_acquire) != 0;
    c->w.block(seen, d, (pollers || holding) ? progress_slice_ms : -1);
  }
}

ssize_t cq_sread_op(fid_cq* f, void* buf, size_t count, const void* cond, int timeout) noexcept {
  return cq_sreadfrom_op(f, buf, count, nullptr, cond, timeout);
}

int cq_signal_op(fid_cq* f) noexcept {
  cq* c = of(f);
  if (c->w.kind() == FI_WAIT_NONE) return -FI_ENOSYS;  // no wait object: nothing can block
  c->signaled.store(true, std::memory_order_release);
  c->w.signal();
  return 0;
}

const char* cq_strerror_op(fid_cq*, int prov_errno, const void*, char* buf, size_t len) noexcept {
  return completion_strerror(prov_errno, buf, len);
}

int cq_close(fid* f) noexcept {
  cq* c = from_fid<cq>(f);
  if (c->users_.busy()) return -FI_EBUSY;
  c->w.shut();  // a thread asleep in fi_cq_sread returns first
  if (c->set) wait_set_detach(c->set, f);
  c->dom->users_.drop();
  delete c;
  return 0;
}

int cq_control(fid* f, int command, void* arg) noexcept {
  cq* c = from_fid<cq>(f);
  switch (command) {
    case FI_GETWAIT:
      return c->w.get_wait(arg);
    case FI_GETWAITOBJ:
      return c->w.get_wait_obj(arg);
    default:
      return -FI_ENOSYS;
  }
}

fi_ops cq_fi_ops = {
    sizeof(fi_ops), cq_close, fid_no_bind, cq_control, fid_no_ops_open, fid_no_tostr, fid_no_ops_set,
};

fi_ops_cq cq_ops = {
    sizeof(fi_ops_cq), cq_read_op,      cq_readfrom_op, cq_readerr_op,
    cq_sread_op,       cq_sreadfrom_op, cq_signal_op,   cq_strerror_op,
};

}  // namespace

cq::cq(domain* d, const fi_cq_attr& attr, void* context, wait_set* ws)
    : dom(d),
      wait_cond(attr.wait_cond),
      set(ws),
      ring(round_pow2(std::min(attr.size ? attr.size : default_cq_size, max_initial_slots))),
      w(attr.wait_obj, ws) {
  format = attr.format == FI_CQ_FORMAT_UNSPEC ? FI_CQ_FORMAT_CONTEXT : attr.format;
  fid_.fid.fclass = FI_CLASS_CQ;
  fid_.fid.context = context;
  fid_.fid.ops = &cq_fi_ops;
  fid_.ops = &cq_ops;
}

int cq_open(domain& dom, fi_cq_attr* attr, fid_cq** out, void* context) noexcept {
  return guard([&]() -> int {
    if (!attr || !out) return -FI_EINVAL;
    if (!only(attr->flags, FI_AFFINITY)) return -FI_EBADFLAGS;
    if ((attr->flags & FI_AFFINITY) && attr->signaling_vector < 0) return -FI_EINVAL;
    if (raw(attr->format) > FI_CQ_FORMAT_TAGGED) return -FI_EINVAL;
    if (int r = check_wait_obj(attr->wait_obj, attr->wait_set)) return r;
    if (attr->wait_obj != FI_WAIT_NONE && raw(attr->wait_cond) > FI_CQ_COND_THRESHOLD) return -FI_EINVAL;
    wait_set* ws = attr->wait_obj == FI_WAIT_SET ? wait_set_check(attr->wait_set, dom.fab) : nullptr;
    fi_cq_attr a = *attr;
    if (a.wait_obj == FI_WAIT_NONE) a.wait_cond = FI_CQ_COND_NONE;
    auto c = std::make_unique<cq>(&dom, a, context, ws);
    // FI_THREAD_DOMAIN / FI_THREAD_COMPLETION: the application serialises
    // every access to the CQ and the endpoints that write it; unless a
    // progress thread writes it too, it takes no lock.
    bool serialised = (dom.threading == FI_THREAD_DOMAIN || dom.threading == FI_THREAD_COMPLETION) &&
                      dom.data_progress != FI_PROGRESS_AUTO;
    c->mtx.set_locking(!serialised);
    c->progress.set_locking(!serialised);
    if (ws) wait_set_attach(ws, &c->fid_.fid);
    dom.users_.add();
    *out = &c.release()->fid_;
    return 0;
  });
}

// ---------------------------------------------------------------- internal
bool is_cq(const fid* f) noexcept {
  return is_class(f, FI_CLASS_CQ) && f->ops == &cq_fi_ops;
}

namespace {

// The entry queued in the ring (cq_write when no read takes it directly).
[[gnu::noinline]] int cq_queue(cq* c, void* op_context, uint64_t flags, size_t len, void* buf, uint64_t data,
                               uint64_t tag, fi_addr_t src) noexcept {
  if (c->direct_room) c->direct_room = 0;  // held: this entry and the ones after it queue
  {
    std::lock_guard<policy_mutex> l(c->mtx);
    cq_slot* s = c->push();
    if (!s) [[unlikely]]
      return -FI_ENOMEM;
    *s = cq_slot{op_context, flags, len, buf, data, tag, src, 0};
  }
  c->w.signal();
  return 0;
}

}  // namespace

int cq_write(fid_cq* f, void* op_context, uint64_t flags, size_t len, void* buf, uint64_t data, uint64_t tag,
             fi_addr_t src) noexcept {
  if (cq_write_direct(f, cq_slot{op_context, flags, len, buf, data, tag, src, 0})) return 0;
  return cq_queue(of(f), op_context, flags, len, buf, data, tag, src);
}

int cq_write_error(fid_cq* f, const fi_cq_err_entry& err, fi_addr_t src) noexcept {
  if (err.err <= 0 || (err.err_data_size && !err.err_data)) return -FI_EINVAL;
  cq* c = of(f);
  if (c->direct_room) c->direct_room = 0;  // a read taking entries directly ends before this one
  {
    std::lock_guard<policy_mutex> l(c->mtx);
    try {
      cq_error e{err, {}};
      const auto* p = static_cast<const uint8_t*>(err.err_data);
      if (err.err_data_size) e.err_data.assign(p, p + err.err_data_size);
      e.e.err_data = nullptr;
      e.e.err_data_size = 0;
      c->errs.push_back(std::move(e));
    } catch (...) {
      return -FI_ENOMEM;
    }
    cq_slot* s = c->push();
    if (!s) {
      c->errs.pop_back();
      return -FI_ENOMEM;
    }
    *s = cq_slot{err.op_context, err.flags, err.len, err.buf, err.data, err.tag, src, 1};
  }
  c->w.signal();
  return 0;
}

void cq_hold(fid_cq* f, bool on) noexcept {
  cq* c = of(f);
  if (!on) {
    // The last hold ends: entries written meanwhile are readable now, and a
    // sleeper (fi_cq_sread with auto progress, an FD waiter) hears of them.
    if (c->holds.fetch_sub(1, std::memory_order_acq_rel) == 1) c->w.signal();
    return;
  }
  if (c->holds.load(std::memory_order_relaxed) == 0) c->hold_since_ms.store(now_ms(), std::memory_order_relaxed);
  c->holds.fetch_add(1, std::memory_order_acq_rel);
}

void cq_take(fid_cq* f) noexcept {
  of(f)->users_.add();
}
void cq_drop(fid_cq* f) noexcept {
  of(f)->users_.drop();
}

int cq_add_poller(fid_cq* f, void (*fn)(void*), void* arg, bool (*arm)(void*)) noexcept {
  if (!fn) return -FI_EINVAL;
  return guard([&]() -> int {
    of(f)->progress.add(fn, arg, arm);
    return 0;
  });
}

int cq_del_poller(fid_cq* f, void (*fn)(void*), void* arg) noexcept {
  return of(f)->progress.remove(fn, arg) ? 0 : -FI_ENOENT;
}

int cq_add_wait_fd(fid_cq* f, int fd, uint32_t events) noexcept {
  return of(f)->w.add_fd(fd, events);
}
int cq_del_wait_fd(fid_cq* f, int fd) noexcept {
  return of(f)->w.del_fd(fd);
}

fi_cq_format cq_format(fid_cq* f) noexcept {
  return of(f)->format;
}

size_t cq_count(fid_cq* f) noexcept {
  cq* c = of(f);
  std::lock_guard<policy_mutex> l(c->mtx);
  return c->count;
}

bool cq_has_events(fid_cq* f) noexcept {
  return cq_count(f) != 0;
}

bool cq_progress(fid_cq* f) noexcept {
  cq* c = of(f);
  c->progress.run();
  return !c->progress.empty();
}

bool cq_arm(fid_cq* f) noexcept {
  return of(f)->progress.arm();
}

waiter& cq_waiter(fid_cq* f) noexcept {
  return of(f)->w;
}
domain* cq_domain(fid_cq* f) noexcept {
  return of(f)->dom;
}

}  // namespace weft
