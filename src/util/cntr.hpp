// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Internal interface of counters, for providers.
//
// Every counter weft hands out is a weft::cntr (src/util/cntr.cpp): two
// 64-bit atomics (successes, errors) and a wait object. cntr_inc/cntr_err_inc
// are lock-free and safe from any thread; they wake fi_cntr_wait and signal
// the wait object. Pollers registered with cntr_add_poller run on
// fi_cntr_read/readerr/wait (manual progress). Objects bound to a counter take
// a reference (cntr_take): fi_close returns -FI_EBUSY until it is dropped.
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

#include <cstdint>

#include "util/wait.hpp"

namespace weft {

bool is_cntr(const fid* f) noexcept;

// A completion counted as a success / an error.
void cntr_inc(fid_cntr* cntr, uint64_t n = 1) noexcept;
void cntr_err_inc(fid_cntr* cntr, uint64_t n = 1) noexcept;

void cntr_take(fid_cntr* cntr) noexcept;
void cntr_drop(fid_cntr* cntr) noexcept;

// Progress pollers: add returns 0 or -FI_ENOMEM, del 0 or -FI_ENOENT. A
// poller must not add or remove pollers of the counter that runs it.
int cntr_add_poller(fid_cntr* cntr, void (*fn)(void*), void* arg, bool (*arm)(void*) = nullptr) noexcept;
int cntr_del_poller(fid_cntr* cntr, void (*fn)(void*), void* arg) noexcept;

// Provider fds in the counter's FD wait object (-FI_ENOSYS when not an fd).
int cntr_add_wait_fd(fid_cntr* cntr, int fd, uint32_t events) noexcept;
int cntr_del_wait_fd(fid_cntr* cntr, int fd) noexcept;

// Default operation flags (FI_GETOPSFLAG / FI_SETOPSFLAG).
uint64_t cntr_ops_flags(fid_cntr* cntr) noexcept;

}  // namespace weft
