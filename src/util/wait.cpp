// SPDX-License-Identifier: BSD-3-Clause
// Wait objects, progress lists, wait sets (fi_wait_open, fi_wait) and
// fi_trywait.
#include "util/wait.hpp"

#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>

#include "util/domain.hpp"
#include "util/fabric.hpp"
#include "util/peer_note.hpp"
#include "util/util.hpp"

namespace weft {

// ---------------------------------------------------------------- deadline
deadline::deadline(int timeout_ms) noexcept
    : never_(timeout_ms < 0),
      at_(std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms)) {}

bool deadline::expired() const noexcept {
  return !never_ && std::chrono::steady_clock::now() >= at_;
}

int deadline::remaining_ms(int cap_ms) const noexcept {
  if (never_) return cap_ms;
  auto left =
      std::chrono::duration_cast<std::chrono::microseconds>(at_ - std::chrono::steady_clock::now()).count();
  if (left <= 0) return 0;
  long long ms = (left + 999) / 1000;  // round up: never wake before the deadline
  if (cap_ms >= 0 && ms > cap_ms) ms = cap_ms;
  return static_cast<int>(ms);
}

// ---------------------------------------------------------------- waiter
waiter::waiter(fi_wait_obj kind, wait_set* set)
    : kind_(kind == FI_WAIT_UNSPEC ? FI_WAIT_FD : kind), set_(set) {
  pthread_mutex_init(&mtx_, nullptr);
  pthread_cond_init(&cond_, nullptr);  // CLOCK_REALTIME, as applications expect of FI_GETWAIT
  if (kind_ == FI_WAIT_FD) {
    evfd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (evfd_ < 0) {
      int e = errno;
      release();
      fail(e, "eventfd");
    }
    epfd_ = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = evfd_;
    if (epfd_ < 0 || epoll_ctl(epfd_, EPOLL_CTL_ADD, evfd_, &ev) != 0) {
      int e = errno;
      release();
      fail(e, "epoll");
    }
  }
}

waiter::~waiter() {
  release();
}

void waiter::release() noexcept {
  if (epfd_ >= 0) close(epfd_);
  if (evfd_ >= 0) close(evfd_);
  epfd_ = evfd_ = -1;
  pthread_cond_destroy(&cond_);
  pthread_mutex_destroy(&mtx_);
}

void waiter::signal() noexcept {
  switch (kind_) {
    case FI_WAIT_NONE:
      return;
    case FI_WAIT_SET:
      wait_set_waiter(set_).signal();
      return;
    default:
      break;
  }
  seq_.fetch_add(1, std::memory_order_seq_cst);
  if (!pending_.load(std::memory_order_relaxed) && !pending_.exchange(true, std::memory_order_seq_cst)) {
    if (evfd_ >= 0) {
      uint64_t one = 1;
      ssize_t r = write(evfd_, &one, sizeof(one));
      (void)r;  // EAGAIN only when the counter is saturated: still readable
    }
  }
  // MUTEX_COND: the application may sleep on our cond without telling us.
  if (kind_ == FI_WAIT_MUTEX_COND || sleepers_.load(std::memory_order_seq_cst) > 0) {
    pthread_mutex_lock(&mtx_);
    pthread_cond_broadcast(&cond_);
    pthread_mutex_unlock(&mtx_);
  }
}

bool waiter::disarm() noexcept {
  if (kind_ == FI_WAIT_SET) return wait_set_waiter(set_).disarm();
  // Drain first, then clear: a signal racing with us either sees the flag
  // still set (its entry is visible to the caller's re-check) or writes again.
  if (evfd_ >= 0) {
    uint64_t v;
    while (read(evfd_, &v, sizeof(v)) > 0) {}
  }
  return pending_.exchange(false, std::memory_order_seq_cst);
}

void waiter::block(uint64_t seen, const deadline& d, int slice_ms) noexcept {
  if (kind_ == FI_WAIT_YIELD) {
    sched_yield();
    return;
  }
  if (kind_ != FI_WAIT_FD && kind_ != FI_WAIT_MUTEX_COND) return;
  int ms = d.remaining_ms(slice_ms);
  if (ms == 0) return;
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  pthread_mutex_lock(&mtx_);
  if (seq_.load(std::memory_order_seq_cst) == seen) {
    if (ms < 0) {
      pthread_cond_wait(&cond_, &mtx_);
    } else {
      timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_sec += ms / 1000;
      ts.tv_nsec += static_cast<long>(ms % 1000) * 1000000L;
      if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec += 1;
        ts.tv_nsec -= 1000000000L;
      }
      pthread_cond_timedwait(&cond_, &mtx_, &ts);
    }
  }
  pthread_mutex_unlock(&mtx_);
  sleepers_.fetch_sub(1, std::memory_order_seq_cst);
}

bool waiter::enter() noexcept {
  inside_.fetch_add(1, std::memory_order_acq_rel);
  if (!shut_.load(std::memory_order_acquire)) return true;
  inside_.fetch_sub(1, std::memory_order_acq_rel);
  return false;
}

void waiter::shut() noexcept {
  shut_.store(true, std::memory_order_release);
  // Woken sleepers see is_shut() and return; each is at most one block()
  // away (a signal ends it at once, a progress slice within a millisecond).
  for (int i = 0; inside_.load(std::memory_order_acquire) != 0 && i < 10000; ++i) {
    signal();
    usleep(100);
  }
}

int waiter::get_wait(void* arg) const noexcept {
  if (!arg) return -FI_EINVAL;
  switch (kind_) {
    case FI_WAIT_FD:
      *static_cast<int*>(arg) = epfd_;
      return 0;
    case FI_WAIT_MUTEX_COND: {
      auto* mc = static_cast<fi_mutex_cond*>(arg);
      mc->mutex = const_cast<pthread_mutex_t*>(&mtx_);
      mc->cond = const_cast<pthread_cond_t*>(&cond_);
      return 0;
    }
    case FI_WAIT_SET:
      return wait_set_waiter(set_).get_wait(arg);
    default:
      return -FI_ENODATA;  // NONE, YIELD: nothing the application can block on
  }
}

int waiter::get_wait_obj(void* arg) const noexcept {
  if (!arg) return -FI_EINVAL;
  // For an object in a wait set, the type of what FI_GETWAIT returns.
  *static_cast<fi_wait_obj*>(arg) = kind_ == FI_WAIT_SET ? wait_set_waiter(set_).kind() : kind_;
  return 0;
}

int waiter::add_fd(int fd, uint32_t events) noexcept {
  if (kind_ == FI_WAIT_SET) return wait_set_waiter(set_).add_fd(fd, events);
  if (epfd_ < 0) return -FI_ENOSYS;
  if (fd < 0) return -FI_EINVAL;
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  return epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -errno;
}

int waiter::del_fd(int fd) noexcept {
  if (kind_ == FI_WAIT_SET) return wait_set_waiter(set_).del_fd(fd);
  if (epfd_ < 0) return -FI_ENOSYS;
  return epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr) == 0 ? 0 : -errno;
}

int check_wait_obj(const fi_wait_obj& wait_obj, const fid_wait* wait_set) noexcept {
  switch (raw(wait_obj)) {
    case FI_WAIT_NONE:
    case FI_WAIT_UNSPEC:
    case FI_WAIT_FD:
    case FI_WAIT_MUTEX_COND:
    case FI_WAIT_YIELD:
      return 0;
    case FI_WAIT_SET:
      return wait_set ? 0 : -FI_EINVAL;
    case FI_WAIT_POLLFD:
      return -FI_ENOSYS;
    default:
      return -FI_EINVAL;
  }
}

// ---------------------------------------------------------------- progress
void progress_list::add(fn_t fn, void* arg, arm_t arm) {
  std::lock_guard<policy_mutex> l(mtx_);
  list_.push_back(entry{fn, arg, arm});
  if (arm) ++armable_;
  update_single();
  n_.store(list_.size(), std::memory_order_release);
}

bool progress_list::remove(fn_t fn, void* arg) noexcept {
  std::lock_guard<policy_mutex> l(mtx_);
  for (auto it = list_.begin(); it != list_.end(); ++it) {
    if (it->fn == fn && it->arg == arg) {
      if (it->arm) --armable_;
      list_.erase(it);
      update_single();
      n_.store(list_.size(), std::memory_order_release);
      return true;
    }
  }
  return false;
}

void progress_list::run_slow() noexcept {
  std::unique_lock<policy_mutex> l(mtx_, std::try_to_lock);
  if (!l.owns_lock()) return;  // another thread is driving progress right now
  for (auto& e : list_) e.fn(e.arg);
}

bool progress_list::arm() noexcept {
  if (empty()) return true;
  std::lock_guard<policy_mutex> l(mtx_);
  bool ok = true;
  if (armable_)
    for (auto& e : list_)
      if (e.arm && !e.arm(e.arg)) ok = false;
  return ok;
}

// ---------------------------------------------------------------- wait sets
struct wait_set {
  fid_wait fid_;  // first
  fabric* fab;
  waiter w;
  std::mutex mtx;
  std::vector<fid*> members;  // EQs, CQs, counters opened with FI_WAIT_SET
  users users_;

  wait_set(fabric* f, fi_wait_obj kind);
};

namespace {

int wait_set_close(fid* f) noexcept {
  auto* ws = from_fid<wait_set>(f);
  if (ws->users_.busy()) return -FI_EBUSY;
  ws->fab->users_.drop();
  delete ws;
  return 0;
}

int wait_set_control(fid* f, int command, void* arg) noexcept {
  auto* ws = from_fid<wait_set>(f);
  switch (command) {
    case FI_GETWAIT:
      return ws->w.get_wait(arg);
    case FI_GETWAITOBJ:
      return ws->w.get_wait_obj(arg);
    default:
      return -FI_ENOSYS;
  }
}

// Runs progress on every member; returns whether any has events queued, and
// whether any has pollers (so that sleeps are sliced).
struct members_state {
  bool ready = false;
  bool pollers = false;
  bool counters = false;
};

members_state scan_members(wait_set* ws, bool progress) noexcept {
  members_state st;
  std::lock_guard<std::mutex> l(ws->mtx);
  for (fid* m : ws->members) {
    switch (m->fclass) {
      case FI_CLASS_EQ: {
        auto* eq = reinterpret_cast<fid_eq*>(m);
        if (progress) st.pollers |= eq_progress(eq);
        st.ready |= eq_has_events(eq);
        break;
      }
      case FI_CLASS_CQ: {
        auto* cq = reinterpret_cast<fid_cq*>(m);
        if (progress) st.pollers |= cq_progress(cq);
        st.ready |= cq_has_events(cq);
        break;
      }
      case FI_CLASS_CNTR:
        if (progress) st.pollers |= cntr_progress(reinterpret_cast<fid_cntr*>(m));
        st.counters = true;
        break;
      default:
        break;
    }
  }
  return st;
}

// Arms the members' pollers before the set sleeps; false when one has work.
bool arm_members(wait_set* ws) noexcept {
  bool ok = true;
  std::lock_guard<std::mutex> l(ws->mtx);
  for (fid* m : ws->members) {
    if (m->fclass == FI_CLASS_CQ && !cq_arm(reinterpret_cast<fid_cq*>(m))) ok = false;
    if (m->fclass == FI_CLASS_CNTR && !cntr_arm(reinterpret_cast<fid_cntr*>(m))) ok = false;
  }
  return ok;
}

int wait_set_wait(fid_wait* w, int timeout) noexcept {
  if (!w || !is_wait_set(&w->fid)) return -FI_EINVAL;
  auto* ws = from_fid<wait_set>(w);
  deadline d(timeout);
  for (;;) {
    uint64_t seen = ws->w.seq();
    members_state st = scan_members(ws, true);
    if (st.ready) return 0;
    if (ws->w.disarm()) return 0;  // signaled since the last wait/trywait
    if (d.expired()) return -FI_ETIMEDOUT;
    ws->w.block(seen, d, st.pollers ? progress_slice_ms : -1);
  }
}

fi_ops wait_set_fi_ops = {
    sizeof(fi_ops),  wait_set_close, fid_no_bind,    wait_set_control,
    fid_no_ops_open, fid_no_tostr,   fid_no_ops_set,
};
fi_ops_wait wait_set_ops = {sizeof(fi_ops_wait), wait_set_wait};

}  // namespace

wait_set::wait_set(fabric* f, fi_wait_obj kind) : fab(f), w(kind, nullptr) {
  fid_.fid.fclass = FI_CLASS_WAIT;
  fid_.fid.context = nullptr;
  fid_.fid.ops = &wait_set_fi_ops;
  fid_.ops = &wait_set_ops;
}

bool is_wait_set(const fid* f) noexcept {
  return is_class(f, FI_CLASS_WAIT) && f->ops == &wait_set_fi_ops;
}

waiter& wait_set_waiter(wait_set* set) noexcept {
  return set->w;
}

wait_set* wait_set_check(fid_wait* w, fabric* fab) {
  if (!w || !is_wait_set(&w->fid)) fail(FI_EINVAL, "wait_set is not a wait set");
  auto* ws = from_fid<wait_set>(w);
  if (ws->fab != fab) fail(FI_EINVAL, "wait set of another fabric");
  return ws;
}

void wait_set_attach(wait_set* ws, fid* member) {
  std::lock_guard<std::mutex> l(ws->mtx);
  ws->members.push_back(member);
  ws->users_.add();
}

void wait_set_detach(wait_set* ws, fid* member) noexcept {
  std::lock_guard<std::mutex> l(ws->mtx);
  for (auto it = ws->members.begin(); it != ws->members.end(); ++it) {
    if (*it == member) {
      ws->members.erase(it);
      ws->users_.drop();
      return;
    }
  }
}

int wait_open(fabric& fab, fi_wait_attr* attr, fid_wait** waitset) noexcept {
  return guard([&]() -> int {
    if (!attr || !waitset) return -FI_EINVAL;
    if (attr->flags) return -FI_EBADFLAGS;
    switch (raw(attr->wait_obj)) {
      case FI_WAIT_UNSPEC:
      case FI_WAIT_FD:
      case FI_WAIT_MUTEX_COND:
      case FI_WAIT_YIELD:
        break;
      case FI_WAIT_POLLFD:
        return -FI_ENOSYS;
      default:  // NONE and SET make no sense for a wait set
        return -FI_EINVAL;
    }
    auto ws = std::make_unique<wait_set>(&fab, attr->wait_obj);
    fab.users_.add();
    *waitset = &ws.release()->fid_;
    return 0;
  });
}

// ---------------------------------------------------------------- trywait
namespace {

// Checks that f is an EQ, CQ, counter or wait set of fabric fab.
bool trywait_valid(fabric& fab, fid* f) noexcept {
  if (!f) return false;
  switch (f->fclass) {
    case FI_CLASS_EQ:
      return is_eq(f) && eq_fabric(reinterpret_cast<fid_eq*>(f)) == &fab &&
             eq_waiter(reinterpret_cast<fid_eq*>(f)).kind() != FI_WAIT_NONE;
    case FI_CLASS_CQ:
      return is_cq(f) && cq_domain(reinterpret_cast<fid_cq*>(f))->fab == &fab &&
             cq_waiter(reinterpret_cast<fid_cq*>(f)).kind() != FI_WAIT_NONE;
    case FI_CLASS_CNTR:
      return is_cntr(f) && cntr_domain(reinterpret_cast<fid_cntr*>(f))->fab == &fab &&
             cntr_waiter(reinterpret_cast<fid_cntr*>(f)).kind() != FI_WAIT_NONE;
    case FI_CLASS_WAIT:
      return is_wait_set(f) && from_fid<wait_set>(f)->fab == &fab;
    default:
      return false;
  }
}

int trywait_one(fid* f) noexcept {
  switch (f->fclass) {
    case FI_CLASS_EQ: {
      auto* eq = reinterpret_cast<fid_eq*>(f);
      waiter& w = eq_waiter(eq);
      eq_progress(eq);
      if (w.kind() != FI_WAIT_SET) w.disarm();
      if (eq_has_events(eq)) {
        if (w.kind() != FI_WAIT_SET) w.signal();  // keep the fd readable while events remain
        return -FI_EAGAIN;
      }
      return 0;
    }
    case FI_CLASS_CQ: {
      auto* cq = reinterpret_cast<fid_cq*>(f);
      waiter& w = cq_waiter(cq);
      cq_progress(cq);
      if (w.kind() != FI_WAIT_SET) w.disarm();
      if (cq_has_events(cq)) {
        if (w.kind() != FI_WAIT_SET) w.signal();
        return -FI_EAGAIN;
      }
      return cq_arm(cq) ? 0 : -FI_EAGAIN;
    }
    case FI_CLASS_CNTR: {
      auto* c = reinterpret_cast<fid_cntr*>(f);
      waiter& w = cntr_waiter(c);
      cntr_progress(c);
      // A counter has no queue: a pending signal is its event.
      if (w.kind() != FI_WAIT_SET && w.disarm()) return -FI_EAGAIN;
      return cntr_arm(c) ? 0 : -FI_EAGAIN;
    }
    case FI_CLASS_WAIT: {
      auto* ws = from_fid<wait_set>(f);
      scan_members(ws, true);
      bool was = ws->w.disarm();
      members_state st = scan_members(ws, false);
      if (st.ready) {
        ws->w.signal();
        return -FI_EAGAIN;
      }
      if (was && st.counters) return -FI_EAGAIN;
      return arm_members(ws) ? 0 : -FI_EAGAIN;
    }
    default:
      return -FI_EINVAL;
  }
}

}  // namespace

int trywait(fabric& fab, fid** fids, int count) noexcept {
  if (count < 0 || (count > 0 && !fids)) return -FI_EINVAL;
  for (int i = 0; i < count; i++)
    if (!trywait_valid(fab, fids[i])) return -FI_EINVAL;
  for (int i = 0; i < count; i++) {
    int r = trywait_one(fids[i]);
    if (r) return r;
  }
  return 0;
}

const char* completion_strerror(int prov_errno, char* buf, size_t len) noexcept {
  const char* s = peer_note_text(prov_errno);  // a peer named in words (util/peer_note.hpp)
  if (!s) s = fi_strerror(prov_errno < 0 ? -prov_errno : prov_errno);
  if (!s) s = "unknown error";
  if (buf && len) {
    snprintf(buf, len, "%s", s);
    return buf;
  }
  return s;
}

}  // namespace weft
