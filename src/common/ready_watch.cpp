// SPDX-License-Identifier: BSD-3-Clause
// A descriptor's readiness seen by a load (see ready_watch.hpp).
#include "common/ready_watch.hpp"

#include <linux/io_uring.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

namespace weft {

namespace {
constexpr unsigned ring_entries = 2;  // one request at a time; the kernel rounds up

void* map_ring(int fd, unsigned long len, long long offset) noexcept {
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, offset);
  return p == MAP_FAILED ? nullptr : p;
}

template <class T>
T* at(void* base, unsigned offset) noexcept {
  return reinterpret_cast<T*>(static_cast<char*>(base) + offset);
}
}  // namespace

ready_watch::~ready_watch() {
  // Closing the ring cancels a request still pending.
  if (sqe_map_) munmap(sqe_map_, sqe_map_len_);
  if (cq_map_) munmap(cq_map_, cq_map_len_);
  if (sq_map_) munmap(sq_map_, sq_map_len_);
  if (ring_ >= 0) ::close(ring_);
}

bool ready_watch::open() noexcept {
  io_uring_params p;
  memset(&p, 0, sizeof p);
  const long fd = syscall(__NR_io_uring_setup, ring_entries, &p);
  if (fd < 0) return false;
  ring_ = static_cast<int>(fd);
  sq_map_len_ = p.sq_off.array + p.sq_entries * sizeof(unsigned);
  cq_map_len_ = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
  const bool one_map = p.features & IORING_FEAT_SINGLE_MMAP;
  if (one_map) sq_map_len_ = cq_map_len_ = sq_map_len_ > cq_map_len_ ? sq_map_len_ : cq_map_len_;
  sq_map_ = map_ring(ring_, sq_map_len_, IORING_OFF_SQ_RING);
  if (!sq_map_) return false;
  void* cq = sq_map_;
  if (!one_map) {
    cq = cq_map_ = map_ring(ring_, cq_map_len_, IORING_OFF_CQ_RING);
    if (!cq) return false;
  }
  sqe_map_len_ = p.sq_entries * sizeof(io_uring_sqe);
  sqe_map_ = map_ring(ring_, sqe_map_len_, IORING_OFF_SQES);
  if (!sqe_map_) return false;
  sq_tail_ = at<unsigned>(sq_map_, p.sq_off.tail);
  sq_mask_ = at<unsigned>(sq_map_, p.sq_off.ring_mask);
  sq_array_ = at<unsigned>(sq_map_, p.sq_off.array);
  cq_head_ = at<unsigned>(cq, p.cq_off.head);
  cq_tail_ = at<unsigned>(cq, p.cq_off.tail);
  cq_mask_ = at<unsigned>(cq, p.cq_off.ring_mask);
  cqes_ = at<io_uring_cqe>(cq, p.cq_off.cqes);
  cq_seen_ = __atomic_load_n(cq_head_, __ATOMIC_ACQUIRE);
  return true;
}

bool ready_watch::arm(int fd) noexcept {
  if (broken_ || armed_ || fd < 0) return false;
  if (ring_ < 0 && !open()) {
    broken_ = true;
    return false;
  }
  const unsigned tail = *sq_tail_;
  const unsigned i = tail & *sq_mask_;
  auto* sqe = static_cast<io_uring_sqe*>(sqe_map_) + i;
  memset(sqe, 0, sizeof *sqe);
  sqe->opcode = IORING_OP_POLL_ADD;
  sqe->fd = fd;
  sqe->poll32_events = POLLIN;  // one shot: no IORING_POLL_ADD_MULTI
  sq_array_[i] = i;
  __atomic_store_n(sq_tail_, tail + 1, __ATOMIC_RELEASE);
  const long n = syscall(__NR_io_uring_enter, ring_, 1u, 0u, 0u, nullptr, 0ul);
  if (n != 1) {
    // Not taken: withdraw it, and give up on a ring that refuses requests.
    __atomic_store_n(sq_tail_, tail, __ATOMIC_RELEASE);
    broken_ = true;
    return false;
  }
  armed_ = true;
  return true;
}

void ready_watch::reset() noexcept {
  if (!armed_) return;
  const unsigned tail = __atomic_load_n(cq_tail_, __ATOMIC_ACQUIRE);
  if (tail == cq_seen_) return;  // still pending: it stays armed
  // A request that ended in an error (the descriptor gone, the kernel
  // out of memory) would fire at every arm: stop using the watch.
  for (unsigned h = cq_seen_; h != tail; ++h)
    if (static_cast<const io_uring_cqe*>(cqes_)[h & *cq_mask_].res < 0) broken_ = true;
  cq_seen_ = tail;
  __atomic_store_n(cq_head_, tail, __ATOMIC_RELEASE);
  armed_ = false;
}

}  // namespace weft
