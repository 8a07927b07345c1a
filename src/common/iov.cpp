// SPDX-License-Identifier: BSD-3-Clause
#include "common/iov.hpp"

namespace weft {

size_t iov_copy_to(const iovec* iov, size_t count, size_t offset, const void* src, size_t len) noexcept {
  size_t done = 0;
  const auto* s = static_cast<const unsigned char*>(src);
  for (size_t i = 0; i < count && done < len; ++i) {
    if (offset >= iov[i].iov_len) {
      offset -= iov[i].iov_len;
      continue;
    }
    size_t n = std::min(iov[i].iov_len - offset, len - done);
    memcpy(static_cast<unsigned char*>(iov[i].iov_base) + offset, s + done, n);
    done += n;
    offset = 0;
  }
  return done;
}

size_t iov_copy_from(const iovec* iov, size_t count, size_t offset, void* dst, size_t len) noexcept {
  size_t done = 0;
  auto* d = static_cast<unsigned char*>(dst);
  for (size_t i = 0; i < count && done < len; ++i) {
    if (offset >= iov[i].iov_len) {
      offset -= iov[i].iov_len;
      continue;
    }
    size_t n = std::min(iov[i].iov_len - offset, len - done);
    memcpy(d + done, static_cast<const unsigned char*>(iov[i].iov_base) + offset, n);
    done += n;
    offset = 0;
  }
  return done;
}

}  // namespace weft
