// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Scatter/gather helpers over iovec lists.
#include <sys/uio.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace weft {

inline size_t iov_total(const iovec* iov, size_t count) noexcept {
  size_t n = 0;
  for (size_t i = 0; i < count; ++i) n += iov[i].iov_len;
  return n;
}

// Every non-empty piece has a buffer (a null one would be dereferenced).
inline bool iov_valid(const iovec* iov, size_t count) noexcept {
  for (size_t i = 0; i < count; ++i)
    if (iov[i].iov_len && !iov[i].iov_base) [[unlikely]]
      return false;
  return true;
}

// Copies len bytes of src into the list, starting `offset` bytes into it;
// returns the bytes copied (less when the list ends first).
size_t iov_copy_to(const iovec* iov, size_t count, size_t offset, const void* src, size_t len) noexcept;
// Copies up to len bytes of the list, from `offset` on, into dst.
size_t iov_copy_from(const iovec* iov, size_t count, size_t offset, void* dst, size_t len) noexcept;

}  // namespace weft
