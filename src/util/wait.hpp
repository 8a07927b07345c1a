// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Wait objects, progress lists and wait sets: the blocking machinery shared by
// event queues, completion queues and counters.
//
// * A `waiter` is the wait object of one EQ, CQ, counter or wait set. Producers
//   call signal() after queuing something; blocking readers call block().
//   FD (and UNSPEC, which maps to FD) exposes an epoll fd holding an eventfd
//   (providers may add their own fds to it); MUTEX_COND exposes the pthread
//   mutex/cond pair; YIELD spins with sched_yield; SET forwards every signal
//   to the wait set the object is attached to; NONE does nothing.
// * signal() is cheap on the hot path: one relaxed load and one increment when
//   nobody sleeps and the FD is already armed (no system call, no lock).
// * A `progress_list` holds the pollers providers register on a CQ or counter
//   (manual progress): reads and blocking waits run them.
#include <pthread.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/lock.hpp"
#include "common/object.hpp"

namespace weft {

struct fabric;
struct domain;
struct wait_set;

// An absolute point in time built from a timeout in milliseconds (negative:
// never expires).
class deadline {
public:
  explicit deadline(int timeout_ms) noexcept;
  bool expired() const noexcept;
  // Milliseconds left, capped to `cap_ms` (cap_ms < 0: no cap; -1 when the
  // deadline never expires and there is no cap).
  int remaining_ms(int cap_ms) const noexcept;

private:
  bool never_;
  std::chrono::steady_clock::time_point at_;
};

class waiter {
public:
  // kind: NONE, UNSPEC, FD, MUTEX_COND, YIELD, or SET (then set != nullptr).
  // Throws weft::error on failure (fd exhaustion: -FI_EMFILE...).
  waiter(fi_wait_obj kind, wait_set* set);
  ~waiter();
  waiter(const waiter&) = delete;
  waiter& operator=(const waiter&) = delete;

  // The effective kind (UNSPEC is reported as FD, the object it uses).
  fi_wait_obj kind() const noexcept { return kind_; }
  bool can_block() const noexcept {
    return kind_ == FI_WAIT_FD || kind_ == FI_WAIT_MUTEX_COND || kind_ == FI_WAIT_YIELD;
  }
  wait_set* set() const noexcept { return set_; }

  // Something happened: wake sleepers, make the FD readable, signal the set.
  void signal() noexcept;
  // Clears the pending signal (drains the eventfd). Returns whether one was
  // pending. Used by fi_trywait and fi_wait.
  bool disarm() noexcept;
  // Signal sequence number: read it before checking a condition, then
  // block(seen) returns as soon as a later signal arrives.
  uint64_t seq() const noexcept { return seq_.load(std::memory_order_seq_cst); }
  // Sleeps until seq() != seen, at most min(deadline, slice_ms) (slice_ms < 0:
  // no slice). YIELD yields once. Spurious returns are allowed.
  void block(uint64_t seen, const deadline& d, int slice_ms) noexcept;

  // Blocking calls (fi_cq_sread, fi_cntr_wait, fi_eq_sread) hold a pass
  // while they may sleep. shut(), at the owner's fi_close, wakes them and
  // waits until every pass is returned; from then on is_shut() is true and
  // enter() refuses (the blocking call returns -FI_ECANCELED).
  bool enter() noexcept;
  void leave() noexcept { inside_.fetch_sub(1, std::memory_order_acq_rel); }
  bool is_shut() const noexcept { return shut_.load(std::memory_order_acquire); }
  void shut() noexcept;

  // fi_control(FI_GETWAIT) / (FI_GETWAITOBJ) on the owning object.
  int get_wait(void* arg) const noexcept;
  int get_wait_obj(void* arg) const noexcept;

  // Adds/removes a provider fd (e.g. a socket) to the FD wait object, so that
  // an application blocked in poll(2) wakes when it becomes ready.
  int add_fd(int fd, uint32_t events) noexcept;
  int del_fd(int fd) noexcept;

private:
  void release() noexcept;
  fi_wait_obj kind_;
  wait_set* set_;
  int epfd_ = -1;
  int evfd_ = -1;
  pthread_mutex_t mtx_;
  pthread_cond_t cond_;
  std::atomic<uint64_t> seq_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> pending_{false};
  std::atomic<int> inside_{0};
  std::atomic<bool> shut_{false};
};

// A pass of waiter::enter for one blocking call.
class blocking_pass {
public:
  explicit blocking_pass(waiter& w) noexcept : w_(w), ok_(w.enter()) {}
  ~blocking_pass() {
    if (ok_) w_.leave();
  }
  blocking_pass(const blocking_pass&) = delete;
  blocking_pass& operator=(const blocking_pass&) = delete;
  explicit operator bool() const noexcept { return ok_; }

private:
  waiter& w_;
  bool ok_;
};

// Pollers of one CQ or counter: (function, argument) pairs run by reads and
// waits. A poller must not add or remove pollers of the list that runs it.
//
// A poller may come with an arm function, called by fi_trywait before the
// application sleeps on the wait object's fd: it makes sure that
// whatever arrives from now on wakes the wait object (its fds are in the
// wait object's epoll set), and returns false when it still has work that
// needs progress (then nobody may sleep). A poller without one has nothing
// that could arrive unseen.
class progress_list {
public:
  using fn_t = void (*)(void*);
  using arm_t = bool (*)(void*);
  void add(fn_t fn, void* arg, arm_t arm = nullptr);  // throws std::bad_alloc
  bool remove(fn_t fn, void* arg) noexcept;           // waits for a running pass to end
  bool empty() const noexcept { return n_.load(std::memory_order_acquire) == 0; }
  // Arms every poller; false when one of them has work pending.
  bool arm() noexcept;
  // Lock policy (see policy_mutex): off when the application serialises
  // every call on the object.
  void set_locking(bool on) noexcept { mtx_.set_locking(on); }
  // Runs every poller once; skipped when another thread is already doing so.
  void run() noexcept {
    if (empty()) return;
    // One poller and no locking (the common case): call it directly.
    if (single_fn_ && !mtx_.locking()) [[likely]] {
      single_fn_(single_arg_);
      return;
    }
    run_slow();
  }

private:
  void run_slow() noexcept;
  void update_single() noexcept {
    single_fn_ = list_.size() == 1 ? list_[0].fn : nullptr;
    single_arg_ = list_.size() == 1 ? list_[0].arg : nullptr;
  }
  struct entry {
    fn_t fn;
    void* arg;
    arm_t arm;
  };
  policy_mutex mtx_;
  fn_t single_fn_ = nullptr;
  void* single_arg_ = nullptr;
  std::vector<entry> list_;
  size_t armable_ = 0;  // entries with an arm function
  std::atomic<size_t> n_{0};
};

// The integer stored in an enum field of an application struct, read without
// assuming it holds an enumerator (loading an out-of-range enum is undefined).
template <class E>
inline unsigned long raw(const E& e) noexcept {
  std::underlying_type_t<E> v;
  std::memcpy(&v, &e, sizeof(v));
  return static_cast<unsigned long>(v);
}

// Validates the wait_obj of an EQ/CQ/counter attribute: 0, -FI_EINVAL (out of
// range, or FI_WAIT_SET without a wait_set) or -FI_ENOSYS (FI_WAIT_POLLFD).
int check_wait_obj(const fi_wait_obj& wait_obj, const fid_wait* wait_set) noexcept;

// How long a blocking wait sleeps before running pollers again when the
// object has pollers (manual progress).
inline constexpr int progress_slice_ms = 1;

// ---------------------------------------------------------------- wait sets
// Checks that `w` is a wait set opened by weft on fabric `fab` (throws
// weft::error(FI_EINVAL) otherwise), for an object opened with FI_WAIT_SET.
wait_set* wait_set_check(fid_wait* w, fabric* fab);
// Attaches `member` (the EQ, CQ or counter being opened): the set then runs
// its progress on fi_wait/fi_trywait and refuses to close (-FI_EBUSY) until
// wait_set_detach. Throws std::bad_alloc.
void wait_set_attach(wait_set* set, fid* member);
void wait_set_detach(wait_set* set, fid* member) noexcept;
waiter& wait_set_waiter(wait_set* set) noexcept;
bool is_wait_set(const fid* f) noexcept;

// ---------------------------------------------------------------- dispatch
// What the wait set, poll set and fi_trywait need from each waitable object,
// implemented in eq.cpp, cq.cpp and cntr.cpp. The fid must have been checked
// with is_eq / is_cq / is_cntr.
bool eq_has_events(fid_eq* eq) noexcept;
bool eq_progress(fid_eq* eq) noexcept;  // runs the EQ's pollers; whether it has any
waiter& eq_waiter(fid_eq* eq) noexcept;
fabric* eq_fabric(fid_eq* eq) noexcept;

bool cq_has_events(fid_cq* cq) noexcept;
// Runs the CQ's pollers; returns whether it has any.
bool cq_progress(fid_cq* cq) noexcept;
// Arms the CQ's pollers before a sleep (progress_list::arm).
bool cq_arm(fid_cq* cq) noexcept;
waiter& cq_waiter(fid_cq* cq) noexcept;
domain* cq_domain(fid_cq* cq) noexcept;

bool cntr_progress(fid_cntr* cntr) noexcept;
bool cntr_arm(fid_cntr* cntr) noexcept;
waiter& cntr_waiter(fid_cntr* cntr) noexcept;
domain* cntr_domain(fid_cntr* cntr) noexcept;
// True when the counter's success or error value changed since the last
// fi_poll, fi_cntr_set or fi_cntr_add; resets that snapshot.
bool cntr_poll_changed(fid_cntr* cntr) noexcept;

bool is_eq(const fid* f) noexcept;
bool is_cq(const fid* f) noexcept;
bool is_cntr(const fid* f) noexcept;

// Writes a printable description of `prov_errno` (an errno or FI_E* value,
// either sign, or a code from util/peer_note.hpp, whose text it is) into buf
// when given; returns buf, or a string that stays valid.
const char* completion_strerror(int prov_errno, char* buf, size_t len) noexcept;

}  // namespace weft
