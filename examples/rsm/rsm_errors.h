/*
 * rsm_errors.h: the name and a one-line text of each RSMAPI error code, for
 * messages such as "RSMERR_SEG_NOT_PUBLISHED: the segment is not published
 * (yet)". RSMAPI has no strerror of its own; this header is part of the
 * examples (rsm_exporter.c, rsm_importer.c) and of weft's rsm-perf, plain C
 * on <rsmapi.h> only, free to copy into any RSMAPI program.
 */
#ifndef RSM_ERRORS_H
#define RSM_ERRORS_H

#include <rsmapi.h>

/* "RSMERR_SEG_NOT_PUBLISHED", or "RSMERR_?" for a number RSMAPI does not define. */
static inline const char* rsm_error_name(int err);
/* "the segment is not published (yet)", or "unknown error". */
static inline const char* rsm_error_text(int err);

#define RSM_ERRORS(X)                                                                      \
  X(RSM_SUCCESS, "success")                                                                \
  X(RSMERR_BAD_LIBRARY_VERSION, "bad library version (a libfabric too old?)")             \
  X(RSMERR_BAD_TOPOLOGY_PTR, "bad topology pointer")                                       \
  X(RSMERR_BAD_CTLR_HNDL, "bad controller handle")                                         \
  X(RSMERR_CTLR_NOT_PRESENT, "no such controller")                                         \
  X(RSMERR_BAD_SEG_HNDL, "bad segment handle")                                             \
  X(RSMERR_SEG_ALREADY_PUBLISHED, "the segment is already published")                      \
  X(RSMERR_SEG_NOT_PUBLISHED, "the segment is not published (yet)")                        \
  X(RSMERR_SEG_NOT_PUBLISHED_TO_NODE, "the segment is not published to this node")         \
  X(RSMERR_SEG_ALREADY_MAPPED, "the segment is already mapped")                            \
  X(RSMERR_SEG_STILL_MAPPED, "the segment is still mapped")                                \
  X(RSMERR_SEG_NOT_MAPPED, "the segment is not mapped")                                    \
  X(RSMERR_NOT_CREATOR, "not the segment's creator")                                       \
  X(RSMERR_BAD_BARRIER_PTR, "bad barrier pointer")                                         \
  X(RSMERR_BAD_SGIO, "bad scatter/gather request")                                         \
  X(RSMERR_BAD_LOCALMEM_HNDL, "bad local memory handle")                                   \
  X(RSMERR_BAD_ADDR, "bad address")                                                        \
  X(RSMERR_BAD_MEM_ALIGNMENT, "bad memory alignment")                                      \
  X(RSMERR_BAD_OFFSET, "offset out of the segment")                                        \
  X(RSMERR_MISALIGNED_OFFSET, "misaligned offset")                                         \
  X(RSMERR_BAD_LENGTH, "bad length")                                                       \
  X(RSMERR_BAD_ACL, "bad access list")                                                     \
  X(RSMERR_BAD_SEGID, "bad segment id")                                                    \
  X(RSMERR_RESERVED_SEGID, "reserved segment id")                                          \
  X(RSMERR_SEGID_IN_USE, "segment id in use")                                              \
  X(RSMERR_BAD_MODE, "bad mode")                                                           \
  X(RSMERR_BAD_PERMS, "bad permissions")                                                   \
  X(RSMERR_PERM_DENIED, "permission denied")                                               \
  X(RSMERR_LOCKS_NOT_SUPPORTED, "locks not supported")                                     \
  X(RSMERR_LOCKS_NOT_ENABLED, "locks not enabled")                                         \
  X(RSMERR_REBIND_NOT_ALLOWED, "rebind not allowed")                                       \
  X(RSMERR_INSUFFICIENT_RESOURCES, "insufficient resources")                               \
  X(RSMERR_INSUFFICIENT_MEM, "insufficient memory")                                        \
  X(RSMERR_MAP_FAILED, "mapping failed")                                                   \
  X(RSMERR_POLLFD_IN_USE, "poll descriptor in use")                                        \
  X(RSMERR_BARRIER_UNINITIALIZED, "barrier not initialized")                               \
  X(RSMERR_BARRIER_OPEN_FAILED, "barrier could not be opened")                             \
  X(RSMERR_BARRIER_NOT_OPENED, "barrier not opened")                                       \
  X(RSMERR_BARRIER_FAILURE, "an access in the barrier failed")                             \
  X(RSMERR_REMOTE_NODE_UNREACHABLE, "the remote node is unreachable")                      \
  X(RSMERR_CONN_ABORTED, "the connection was aborted")                                     \
  X(RSMERR_INTERRUPTED, "interrupted")                                                     \
  X(RSMERR_TIMEOUT, "timed out")                                                           \
  X(RSMERR_BAD_APPID, "bad application id")                                                \
  X(RSMERR_BAD_CONF, "bad configuration")                                                  \
  X(RSMERR_SEG_NOT_CONNECTED, "the segment is not connected")

static inline const char* rsm_error_name(int err) {
#define RSM_ERROR_NAME(code, text) \
  case code:                       \
    return #code;
  switch (err) { RSM_ERRORS(RSM_ERROR_NAME) }
#undef RSM_ERROR_NAME
  return "RSMERR_?";
}

static inline const char* rsm_error_text(int err) {
#define RSM_ERROR_TEXT(code, text) \
  case code:                       \
    return text;
  switch (err) { RSM_ERRORS(RSM_ERROR_TEXT) }
#undef RSM_ERROR_TEXT
  return "unknown error";
}

#endif
