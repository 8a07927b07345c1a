// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Internal interface of event queues, for objects that report asynchronously
// (AV FI_EVENT inserts, MR events, connection management).
#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

#include <cstddef>
#include <cstdint>

namespace weft {

// Queue an event exactly as fi_eq_write(eq, event, buf, len, flags) would
// (without FI_EQ_WRITE access checks). Returns len or -FI_E*.
ssize_t eq_post(fid_eq* eq, uint32_t event, const void* buf, size_t len, uint64_t flags) noexcept;

// Queue an error entry: fi_eq_read then returns -FI_EAVAIL and fi_eq_readerr
// returns an fi_eq_err_entry with these fields (err is a positive FI_E* code;
// err_data is copied). Returns 0 or -FI_E*.
int eq_post_error(fid_eq* eq, fid_t fid, void* context, uint64_t data, int err, int prov_errno,
                  const void* err_data, size_t err_data_size) noexcept;

}  // namespace weft

namespace weft {

// Validation of an application-supplied fid: non-null, FI_CLASS_EQ, opened by
// weft (declared in wait.hpp too).
bool is_eq(const fid* f) noexcept;

// References held by objects bound to the EQ (fi_av_bind, fi_ep_bind,
// fi_pep_bind, fi_domain_bind): fi_close on the EQ returns -FI_EBUSY until
// every reference is dropped.
void eq_take(fid_eq* eq) noexcept;
void eq_drop(fid_eq* eq) noexcept;

// Control progress (connection management with FI_PROGRESS_MANUAL): pollers
// run by fi_eq_read/readerr/sread. add returns 0 or -FI_ENOMEM; del returns 0
// or -FI_ENOENT. A poller must not add or remove pollers of this EQ.
int eq_add_poller(fid_eq* eq, void (*fn)(void*), void* arg) noexcept;
int eq_del_poller(fid_eq* eq, void (*fn)(void*), void* arg) noexcept;

// Drops the queued events (and error entries) about `gone`, an endpoint or
// passive endpoint being closed, as libfabric does: an application that maps
// events to its objects by fid must never see one about a closed object (its
// address may already belong to a new one). FI_CONNREQ entries' fi_info are
// freed. Returns how many were dropped.
size_t eq_forget(fid_eq* eq, const fid* gone) noexcept;

// Events queued (including error entries), for tests and diagnostics.
size_t eq_count(fid_eq* eq) noexcept;

}  // namespace weft
