// SPDX-License-Identifier: BSD-3-Clause
// The names and one-line texts of RSMAPI's return values: rsm_errname and
// rsm_strerror, weft's additions to rsmapi.h (Solaris's RSMAPI has neither).
#include <stdio.h>

#include "rsm.hpp"

namespace {

struct error_text {
  int code;
  const char* name;
  const char* text;
};

#define RSM_ERROR(code, text) \
  { code, #code, text }
constexpr error_text errors[] = {
    RSM_ERROR(RSM_SUCCESS, "success"),
    RSM_ERROR(RSMERR_BAD_LIBRARY_VERSION, "bad library version (a libfabric too old?)"),
    RSM_ERROR(RSMERR_BAD_TOPOLOGY_PTR, "bad topology pointer"),
    RSM_ERROR(RSMERR_BAD_CTLR_HNDL, "bad controller handle"),
    RSM_ERROR(RSMERR_CTLR_NOT_PRESENT, "no such controller"),
    RSM_ERROR(RSMERR_BAD_SEG_HNDL, "bad segment handle"),
    RSM_ERROR(RSMERR_SEG_ALREADY_PUBLISHED, "the segment is already published"),
    RSM_ERROR(RSMERR_SEG_NOT_PUBLISHED, "the segment is not published (yet)"),
    RSM_ERROR(RSMERR_SEG_NOT_PUBLISHED_TO_NODE, "the segment is not published to this node"),
    RSM_ERROR(RSMERR_SEG_ALREADY_MAPPED, "the segment is already mapped"),
    RSM_ERROR(RSMERR_SEG_STILL_MAPPED, "the segment is still mapped"),
    RSM_ERROR(RSMERR_SEG_NOT_MAPPED, "the segment is not mapped"),
    RSM_ERROR(RSMERR_NOT_CREATOR, "not the segment's creator"),
    RSM_ERROR(RSMERR_BAD_BARRIER_PTR, "bad barrier pointer"),
    RSM_ERROR(RSMERR_BAD_SGIO, "bad scatter/gather request"),
    RSM_ERROR(RSMERR_BAD_LOCALMEM_HNDL, "bad local memory handle"),
    RSM_ERROR(RSMERR_BAD_ADDR, "bad address"),
    RSM_ERROR(RSMERR_BAD_MEM_ALIGNMENT, "bad memory alignment"),
    RSM_ERROR(RSMERR_BAD_OFFSET, "offset out of the segment"),
    RSM_ERROR(RSMERR_MISALIGNED_OFFSET, "misaligned offset"),
    RSM_ERROR(RSMERR_BAD_LENGTH, "bad length"),
    RSM_ERROR(RSMERR_BAD_ACL, "bad access list"),
    RSM_ERROR(RSMERR_BAD_SEGID, "bad segment id"),
    RSM_ERROR(RSMERR_RESERVED_SEGID, "reserved segment id"),
    RSM_ERROR(RSMERR_SEGID_IN_USE, "segment id in use"),
    RSM_ERROR(RSMERR_BAD_MODE, "bad mode"),
    RSM_ERROR(RSMERR_BAD_PERMS, "bad permissions"),
    RSM_ERROR(RSMERR_PERM_DENIED, "permission denied"),
    RSM_ERROR(RSMERR_LOCKS_NOT_SUPPORTED, "locks not supported"),
    RSM_ERROR(RSMERR_LOCKS_NOT_ENABLED, "locks not enabled"),
    RSM_ERROR(RSMERR_REBIND_NOT_ALLOWED, "rebind not allowed"),
    RSM_ERROR(RSMERR_INSUFFICIENT_RESOURCES, "insufficient resources"),
    RSM_ERROR(RSMERR_INSUFFICIENT_MEM, "insufficient memory"),
    RSM_ERROR(RSMERR_MAP_FAILED, "mapping failed"),
    RSM_ERROR(RSMERR_POLLFD_IN_USE, "poll descriptor in use"),
    RSM_ERROR(RSMERR_BARRIER_UNINITIALIZED, "barrier not initialized"),
    RSM_ERROR(RSMERR_BARRIER_OPEN_FAILED, "barrier could not be opened"),
    RSM_ERROR(RSMERR_BARRIER_NOT_OPENED, "barrier not opened"),
    RSM_ERROR(RSMERR_BARRIER_FAILURE, "an access in the barrier failed"),
    RSM_ERROR(RSMERR_REMOTE_NODE_UNREACHABLE, "the remote node is unreachable"),
    RSM_ERROR(RSMERR_CONN_ABORTED, "the connection was aborted"),
    RSM_ERROR(RSMERR_INTERRUPTED, "interrupted"),
    RSM_ERROR(RSMERR_TIMEOUT, "timed out"),
    RSM_ERROR(RSMERR_BAD_APPID, "bad application id"),
    RSM_ERROR(RSMERR_BAD_CONF, "bad configuration"),
    RSM_ERROR(RSMERR_SEG_NOT_CONNECTED, "the segment is not connected"),
};
#undef RSM_ERROR

// The table is indexed by the value itself: RSMAPI's codes run 0..45 without a gap.
constexpr bool dense() {
  for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
    if (errors[i].code != static_cast<int>(i)) return false;
  return true;
}
static_assert(dense() && sizeof errors / sizeof errors[0] == RSMERR_SEG_NOT_CONNECTED + 1);

const error_text* find(int err) noexcept {
  if (err < 0 || err > RSMERR_SEG_NOT_CONNECTED) return nullptr;
  return &errors[err];
}

}  // namespace

RSM_API const char* rsm_errname(int err) {
  const error_text* e = find(err);
  return e ? e->name : nullptr;
}

RSM_API const char* rsm_strerror(int err) {
  if (const error_text* e = find(err)) return e->text;
  // Not a value RSMAPI defines: say which, in a buffer of this thread's.
  static thread_local char unknown[48];
  snprintf(unknown, sizeof unknown, "unknown RSMAPI error %d", err);
  return unknown;
}
