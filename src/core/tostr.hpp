// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Internal entry to the printer behind fi_tostr / fi_tostr_r.
#include <cstddef>

namespace weft {

// Size of fi_tostr's per-thread buffer: the real library's, so that long
// output is cut at the same place.
inline constexpr size_t tostr_buf_size = 8192;

// fi_tostr_r with the type as a plain int (values outside enum fi_type print
// "Unknown type"). Returns nullptr, writing nothing, when buf, len or data is 0.
char* tostr_r(char* buf, size_t len, const void* data, int datatype) noexcept;

}  // namespace weft
