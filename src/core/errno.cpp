// SPDX-License-Identifier: BSD-3-Clause
// fi_strerror: errno values below FI_ERRNO_OFFSET are the system's; the rest
// are libfabric's own.
#include <rdma/fi_errno.h>

#include <cstdlib>
#include <cstring>

#include "common/export.hpp"
#include "core/fabric2.hpp"

namespace {

const char* const fabric_errors[] = {
    "Unspecified error",                                 // FI_EOTHER
    "Provided buffer is too small",                      // FI_ETOOSMALL
    "Operation not permitted in current state",          // FI_EOPBADSTATE
    "Error available",                                   // FI_EAVAIL
    "Flags not supported",                               // FI_EBADFLAGS
    "Missing or unavailable event queue",                // FI_ENOEQ
    "Invalid resource domain",                           // FI_EDOMAIN
    "Missing or unavailable completion queue",           // FI_ENOCQ
    "CRC error",                                         // FI_ECRC
    "Truncation error",                                  // FI_ETRUNC
    "Required key not available",                        // FI_ENOKEY
    "Missing or unavailable address vector",             // FI_ENOAV
    "Queue has been overrun",                            // FI_EOVERRUN
    "Receiver not ready, no receive buffers available",  // FI_ENORX
    "Memory registration limit exceeded",                // FI_ENOMR (1.20)
};
static_assert(sizeof(fabric_errors) / sizeof(fabric_errors[0]) == FI_ENOMR + 1 - FI_ERRNO_OFFSET);

}  // namespace

WEFT_EXPORT const char* fi_strerror(int errnum) {
  int e = std::abs(errnum);
  if (e < FI_ERRNO_OFFSET) return strerror(e);
  if (e <= FI_ENOMR) return fabric_errors[e - FI_ERRNO_OFFSET];
  return "Unknown error";
}
