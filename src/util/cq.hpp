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

#include <cstddef>
#include <cstdint>

#include "util/wait.hpp"

namespace weft {

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
