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
