// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Atomic-operation kernels shared by every provider (the target side of
// fi_atomic / fi_fetch_atomic / fi_compare_atomic, and fi_query_atomic).
//
// The op x datatype matrix follows man fi_atomic(3) and libfabric's
// ofi_atomic.c:
//   MIN MAX                      integers, real floating point (no complex)
//   SUM PROD LOR LAND LXOR       every datatype (logical ops on complex test
//                                "!= 0" on the whole value)
//   BOR BAND BXOR                integers only
//   ATOMIC_WRITE                 every datatype (base and fetch forms)
//   ATOMIC_READ                  every datatype (fetch form only)
//   CSWAP CSWAP_NE               every datatype (compare form)
//   CSWAP_LE LT GE GT            integers, real floating point (compare form)
//   MSWAP                        integers only (compare form)
// Integers are FI_INT8..FI_UINT64 and FI_INT128/FI_UINT128; integer
// arithmetic wraps (two's complement). CSWAP_xx swaps when
// `compare[i] xx target[i]`, exactly as the man page writes it.
//
// Atomicity is per element, against other threads of this process going
// through these kernels: aligned 1/2/4/8-byte elements use lock-free
// std::atomic_ref (CAS loops where no direct instruction exists); 16- and
// 32-byte types (128-bit integers, double/long double complex, long double)
// and unaligned elements take one lock of a striped table keyed by the
// element's address.
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstddef>

namespace weft {

// Which libfabric call family an operation arrives through.
enum class atomic_form { base, fetch, compare };

// True when (form, op, dt) is a valid combination (fi_atomicvalid,
// fi_fetch_atomicvalid, fi_compare_atomicvalid).
bool atomic_valid(atomic_form form, fi_op op, fi_datatype dt) noexcept;

// Size in bytes of one element of `dt` (fi_atomic_attr::size); 0 if invalid.
size_t datatype_size(fi_datatype dt) noexcept;

// Applies `op` to `count` elements of `target` in place, elementwise atomic.
// `buf` holds the operands (unused, may be null, for FI_ATOMIC_READ);
// `compare` the compare operands (compare form only). The original target
// values are written to `result`, which the fetch and compare forms require
// and the base form may leave null. No pointer needs any alignment.
// Returns 0; -FI_EINVAL for an unknown form/op/datatype or a missing buffer;
// -FI_EOPNOTSUPP for a known but unsupported combination. On error nothing
// is read or written.
int atomic_apply(atomic_form form, fi_op op, fi_datatype dt, void* target, const void* buf,
                 const void* compare, void* result, size_t count) noexcept;

// The reductions of collectives (util/coll.hpp): out[i] = a[i] op b[i] for
// `count` elements, plain (not atomic) and vectorisable, with the element
// math of the atomic kernels (so MIN keeps `a` on ties and on NaN, integer
// arithmetic wraps). `out` may be `a` or `b`; no pointer needs alignment.
// Valid ops: FI_MIN .. FI_BXOR, on the datatypes atomic_valid(base) allows.
bool reduce_valid(fi_op op, fi_datatype dt) noexcept;
// Returns 0, or -FI_EOPNOTSUPP for an invalid (op, dt) (nothing written).
int reduce_apply(fi_op op, fi_datatype dt, void* out, const void* a, const void* b, size_t count) noexcept;

}  // namespace weft
