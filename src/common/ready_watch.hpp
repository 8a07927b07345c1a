// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Whether a descriptor became readable, learned by one load instead of a
// system call: a one-shot poll request (IORING_OP_POLL_ADD) on a small
// io_uring of our own, whose completion the kernel writes into the ring's
// completion queue, mapped into our memory. An owner that would otherwise
// call epoll_wait(0) now and then on an idle epoll set (about 1 us on the
// 2-vCPU VM) arms the watch on the set's descriptor, looks at fired() as
// often as it likes, and runs its epoll_wait round only once it fired.
//
//   arm(fd)    one io_uring_enter system call (and, the first time,
//              io_uring_setup and three mmaps); the kernel completes the
//              request at once if fd is readable already, else at its next
//              wakeup
//   fired()    one load of the completion queue's tail
//   reset()    takes the completion once it came; arm again for the next
//
// Where io_uring is not available (an old kernel, a seccomp filter, no
// memory for the ring) arm() returns false and the watch never fires: the
// owner keeps polling as before. The ring's descriptor is close-on-exec.
// Not thread-safe: the owner's lock.
#include <cstdint>

namespace weft {

class ready_watch {
public:
  ready_watch() = default;
  ~ready_watch();
  ready_watch(const ready_watch&) = delete;
  ready_watch& operator=(const ready_watch&) = delete;

  // Asks for one completion when fd is readable (POLLIN). false when the
  // watch cannot work here (then it never will: later calls return false
  // at once) or the request could not be submitted. Only while not armed.
  bool arm(int fd) noexcept;
  bool armed() const noexcept { return armed_; }
  // The armed descriptor was readable at some point since arm().
  bool fired() const noexcept {
    return armed_ && __atomic_load_n(cq_tail_, __ATOMIC_ACQUIRE) != cq_seen_;
  }
  // The word fired() compares, and the value it compares it with: while
  // armed, fired() is `*fired_word() != fired_seen()` (what an owner may
  // copy and check without this object; both hold until reset()).
  const unsigned* fired_word() const noexcept { return cq_tail_; }
  unsigned fired_seen() const noexcept { return cq_seen_; }
  // Once fired: takes the completion, and the watch is no longer armed.
  // Before that it does nothing (the request stays pending).
  void reset() noexcept;
  // io_uring refused to work here (arm() returned false for that reason).
  bool broken() const noexcept { return broken_; }

private:
  bool open() noexcept;

  int ring_ = -1;
  bool broken_ = false;
  bool armed_ = false;
  void* sq_map_ = nullptr;  // the submission ring (and the completion ring, one map on kernels since 5.4)
  void* cq_map_ = nullptr;  // the completion ring when it is a map of its own
  void* sqe_map_ = nullptr;  // the submission entries
  unsigned long sq_map_len_ = 0, cq_map_len_ = 0, sqe_map_len_ = 0;
  unsigned* sq_tail_ = nullptr;
  unsigned* sq_mask_ = nullptr;
  unsigned* sq_array_ = nullptr;
  unsigned* cq_head_ = nullptr;
  unsigned* cq_tail_ = nullptr;
  unsigned* cq_mask_ = nullptr;
  const void* cqes_ = nullptr;
  unsigned cq_seen_ = 0;  // the completion tail we took up to (the head we published)
};

}  // namespace weft
