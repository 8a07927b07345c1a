// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Shared by the import side's files (import, barrier, map, signal).
#include "rsm.hpp"

namespace weft::rsm {

// The import segment and controller behind a handle (not yet locked).
int import_lookup(void* h, import_seg** out, controller** cp) noexcept;
// State, permission, bounds and barrier checks before a transfer (data_mtx held).
int import_check(import_seg* im, off_t offset, size_t len, rsm_permission_t need) noexcept;
// Moves len bytes; 0 or a positive fi errno (data_mtx held).
int import_transfer(controller* c, import_seg* im, bool write, uint64_t off, void* buf, size_t len,
                    void* desc) noexcept;
// A transfer's fi result as the RSMAPI code the caller gets.
int import_finish(import_seg* im, int fi_err, uint32_t gen_before) noexcept;
// "After the barrier open and until the barrier close, failures of
// individual data access operations are not reported": true in explicit
// mode while a barrier of the import is open (data_mtx held). A failure is
// then counted for close_barrier and the access answers RSM_SUCCESS.
bool import_defers(const import_seg* im) noexcept;
// import_check's answer as the caller gets it: a connection found gone is a
// failed data access (deferred as above); argument errors are reported.
int import_refused(import_seg* im, int code) noexcept;

}  // namespace weft::rsm
