// SPDX-License-Identifier: BSD-3-Clause
// Default ops-table entries: the operation is not supported on this object.
#include "common/object.hpp"

namespace weft {

int fid_no_bind(fid*, fid*, uint64_t) noexcept {
  return -FI_ENOSYS;
}
int fid_no_control(fid*, int, void*) noexcept {
  return -FI_ENOSYS;
}
int fid_no_ops_open(fid*, const char*, uint64_t, void**, void*) noexcept {
  return -FI_ENOSYS;
}
int fid_no_tostr(const fid*, char*, size_t) noexcept {
  return -FI_ENOSYS;
}
int fid_no_ops_set(fid*, const char*, uint64_t, void*, void*) noexcept {
  return -FI_ENOSYS;
}

}  // namespace weft
