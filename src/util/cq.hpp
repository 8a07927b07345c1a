// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Internal interface of completion queues, for providers.
//
// Every CQ weft hands out is a weft::cq (src/util/cq.cpp). Providers report
// completions with cq_write / cq_write_error; those are short (a locked ring
// push, allocation-free unless the ring has to grow: a CQ never overruns) and
// safe to call from any thread. Reads convert entries to the CQ's format; a
// read of an empty CQ without a lock (serialised threading) takes what its
// pollers complete straight into the application's entries.
//
// Manual progress: a provider registers a poller (function, argument) per
// endpoint bound to the CQ; fi_cq_read/readfrom/sread/readerr, fi_poll,
// fi_wait and fi_trywait run the pollers. A poller may call cq_write on any CQ
// but must not add or remove pollers of the CQ that runs it.
//
// Endpoints (and anything else) bound to a CQ take a reference with cq_take;
// fi_close on the CQ returns -FI_EBUSY until every reference is dropped.
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "util/wait.hpp"

namespace weft {

// One completion as the data path reports it, and as a CQ queues it.
struct cq_slot {
  void* op_context;
  uint64_t flags;
  size_t len;
  void* buf;
  uint64_t data;
  uint64_t tag;
  fi_addr_t src;
  uint64_t is_err;  // details are errs.front() when this slot reaches the head
};
static_assert(sizeof(cq_slot) == 64, "one cache line per queued completion");

// One field at a time, straight into the application's entry (which may be
// unaligned: memcpy of each field). Building the entry on the stack and
// copying it whole made the copy's 16-byte load span two smaller stores the
// CPU could not forward: a stall in every fi_cq_read (68 % of read_locked's
// samples; an 8-byte send-to-self loop went from 52.9 to 50.3 ns).
template <class T>
inline void cq_put_field(void* dst, size_t off, const T& v) noexcept {
  std::memcpy(static_cast<uint8_t*>(dst) + off, &v, sizeof(T));
}

template <fi_cq_format F>
inline void cq_put(void* dst, const cq_slot& s) noexcept {
  if constexpr (F == FI_CQ_FORMAT_CONTEXT) {
    cq_put_field(dst, offsetof(fi_cq_entry, op_context), s.op_context);
  } else if constexpr (F == FI_CQ_FORMAT_MSG) {
    cq_put_field(dst, offsetof(fi_cq_msg_entry, op_context), s.op_context);
    cq_put_field(dst, offsetof(fi_cq_msg_entry, flags), s.flags);
    cq_put_field(dst, offsetof(fi_cq_msg_entry, len), s.len);
  } else if constexpr (F == FI_CQ_FORMAT_DATA) {
    cq_put_field(dst, offsetof(fi_cq_data_entry, op_context), s.op_context);
    cq_put_field(dst, offsetof(fi_cq_data_entry, flags), s.flags);
    cq_put_field(dst, offsetof(fi_cq_data_entry, len), s.len);
    cq_put_field(dst, offsetof(fi_cq_data_entry, buf), s.buf);
    cq_put_field(dst, offsetof(fi_cq_data_entry, data), s.data);
  } else {
    cq_put_field(dst, offsetof(fi_cq_tagged_entry, op_context), s.op_context);
    cq_put_field(dst, offsetof(fi_cq_tagged_entry, flags), s.flags);
    cq_put_field(dst, offsetof(fi_cq_tagged_entry, len), s.len);
    cq_put_field(dst, offsetof(fi_cq_tagged_entry, buf), s.buf);
    cq_put_field(dst, offsetof(fi_cq_tagged_entry, data), s.data);
    cq_put_field(dst, offsetof(fi_cq_tagged_entry, tag), s.tag);
  }
}

// Calls fn.operator()<F, E>() for the CQ format F and its entry type E.
template <class Fn>
inline auto cq_with_format(fi_cq_format f, Fn&& fn) noexcept {
  switch (f) {
    case FI_CQ_FORMAT_MSG:
      return fn.template operator()<FI_CQ_FORMAT_MSG, fi_cq_msg_entry>();
    case FI_CQ_FORMAT_DATA:
      return fn.template operator()<FI_CQ_FORMAT_DATA, fi_cq_data_entry>();
    case FI_CQ_FORMAT_TAGGED:
      return fn.template operator()<FI_CQ_FORMAT_TAGGED, fi_cq_tagged_entry>();
    default:
      return fn.template operator()<FI_CQ_FORMAT_CONTEXT, fi_cq_entry>();
  }
}

// The front of every weft CQ (cq.cpp's cq derives from it): what a
// completion written straight into a read's entries touches, so that the
// data path can do it inline (cq_write_direct).
struct cq_front {
  fid_cq fid_;  // first: the application's fid_cq* is this object
  fi_cq_format format = FI_CQ_FORMAT_CONTEXT;
  // Endpoints holding the entries back (cq_hold, below).
  std::atomic<uint32_t> holds{0};
  // A read of an empty, serialised CQ in progress (cq_readfrom_op): the
  // completions its pollers write go straight into the application's
  // entries, `direct_room` more of them, instead of through the ring.
  void* direct_buf = nullptr;
  fi_addr_t* direct_src = nullptr;
  size_t direct_room = 0;
  size_t direct_n = 0;
  size_t direct_count = 0;  // the entries that read asked for
};

// cq_write's common case, inline: a read is draining the CQ and nobody
// holds it, so the entry goes into the read's array, with no call on the
// receive path (each store and call there delays the reply a ping-pong
// sends next: docs/shm-protocol.md, "Stores on the path"). False when a
// read is not draining it; the caller then calls cq_write, which queues.
inline bool cq_write_direct(fid_cq* f, const cq_slot& s) noexcept {
  cq_front* c = reinterpret_cast<cq_front*>(f);
  if (!c->direct_room || c->holds.load(std::memory_order_relaxed)) return false;
  size_t n = c->direct_n++;
  c->direct_room--;
  cq_with_format(c->format,
                 [&]<fi_cq_format F, class E>() { cq_put<F>(static_cast<E*>(c->direct_buf) + n, s); });
  if (c->direct_src) c->direct_src[n] = s.src;
  return true;
}

// Validation of an application-supplied fid: non-null, class FI_CLASS_CQ and
// opened by weft (declared in wait.hpp too).
bool is_cq(const fid* f) noexcept;

// Queue a successful completion. Fields the CQ's format does not carry are
// dropped at read time. `src` is what fi_cq_readfrom reports (FI_ADDR_NOTAVAIL
// when unknown). Returns 0, or -FI_ENOMEM when growing the queue failed.
int cq_write(fid_cq* cq, void* op_context, uint64_t flags, size_t len, void* buf, uint64_t data, uint64_t tag,
             fi_addr_t src = FI_ADDR_NOTAVAIL) noexcept;

// Queue an error completion: fi_cq_read returns -FI_EAVAIL once it reaches the
// head of the queue, fi_cq_readerr then returns these fields. err.err is a
// positive FI_E* code; err.err_data (err.err_data_size bytes) is copied.
// Returns 0, or -FI_EINVAL / -FI_ENOMEM.
int cq_write_error(fid_cq* cq, const fi_cq_err_entry& err, fi_addr_t src = FI_ADDR_NOTAVAIL) noexcept;

// Holding completions back. An endpoint whose transport owes a peer
// something it could not send yet (an acknowledgement behind that peer's
// full queue) holds the CQs it is bound to: their reads find no entry until
// it is out. An application that has seen all of its completions may stop
// calling the library (an out-of-band barrier, a PMIx fence); without the
// hold, what it still owes would stay with it and its peer would wait for
// an acknowledgement forever. With it, the application calls again, its
// polls push the rest out, and only then does it see its completions. A hold
// is bounded: a peer that takes nothing for cq_hold_max_ms (stopped, or
// hostile) is given up on for this hold, and the entries are readable.
// Calls nest (one per holding endpoint); the CQ's lock is not needed.
inline constexpr uint64_t cq_hold_max_ms = 2000;
void cq_hold(fid_cq* cq, bool on) noexcept;

// References held by endpoints, contexts, poll sets.
void cq_take(fid_cq* cq) noexcept;
void cq_drop(fid_cq* cq) noexcept;

// Progress pollers (see above), with an optional arm function (see
// progress_list in wait.hpp). add returns 0 or -FI_ENOMEM; del returns 0 or
// -FI_ENOENT when (fn, arg) was not registered.
int cq_add_poller(fid_cq* cq, void (*fn)(void*), void* arg, bool (*arm)(void*) = nullptr) noexcept;
int cq_del_poller(fid_cq* cq, void (*fn)(void*), void* arg) noexcept;

// Adds a provider fd (e.g. a socket, EPOLLIN) to the CQ's FD wait object so
// that an application sleeping in poll(2) on it wakes. -FI_ENOSYS when the
// CQ's wait object is not an fd.
int cq_add_wait_fd(fid_cq* cq, int fd, uint32_t events) noexcept;
int cq_del_wait_fd(fid_cq* cq, int fd) noexcept;

// The format entries are read in (UNSPEC resolved), and the entry size.
fi_cq_format cq_format(fid_cq* cq) noexcept;
size_t cq_entry_size(fi_cq_format format) noexcept;  // 0 for an invalid format

// Entries queued (successes and errors), for tests and diagnostics.
size_t cq_count(fid_cq* cq) noexcept;

}  // namespace weft
