// SPDX-License-Identifier: BSD-3-Clause
/*
 * What weft's user tools (build/bin: weft-perf, rsm-perf, ucp-perf,
 * mpi-pingpong, cacheline-pingpong, tcp-pingpong, shm-peers-mem) share, in C and C++:
 *
 *   --help (or -h) prints the usage on stdout and exits 0;
 *   a bad option or argument prints one line on stderr,
 *     "<tool>: <what is wrong> (<tool> --help shows the usage)", and exits 2;
 *   an error is printed by name and text ("FI_ENODATA: No data available"),
 *     never as a bare number.
 *
 * tests/tools/help.sh holds every program in build/bin to the first two.
 */
#ifndef WEFT_TOOL_UTIL_H
#define WEFT_TOOL_UTIL_H

#include <rdma/fi_errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prints `usage` on stdout and exits 0. */
static inline void tool_help(const char* usage) __attribute__((noreturn));
static inline void tool_help(const char* usage) {
  fputs(usage, stdout);
  exit(0);
}

/* True when an argument asks for help (--help or -h). */
static inline int tool_help_asked(int argc, char** argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
  return 0;
}

/* One line on stderr naming what is wrong, then exit 2. */
static inline void tool_usage_error(const char* tool, const char* fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
static inline void tool_usage_error(const char* tool, const char* fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s: ", tool);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, " (%s --help shows the usage)\n", tool);
  exit(2);
}

/* Parses a whole decimal number in [min, max]; 0 when `s` is not one. */
static inline int tool_parse_long(const char* s, long min, long max, long* out) {
  char* end = NULL;
  long v;
  if (!s || !*s) return 0;
  v = strtol(s, &end, 10);
  if (*end || v < min || v > max) return 0;
  *out = v;
  return 1;
}

/* The name of a libfabric error code, either sign ("FI_ENODATA"); "FI_E?"
 * for a number libfabric does not define. */
static inline const char* tool_fi_errname(int err) {
#define TOOL_FI_ERR(name) \
  case name:              \
    return #name;
  switch (err < 0 ? -err : err) {
    TOOL_FI_ERR(FI_SUCCESS)
    TOOL_FI_ERR(FI_EPERM)
    TOOL_FI_ERR(FI_ENOENT)
    TOOL_FI_ERR(FI_EINTR)
    TOOL_FI_ERR(FI_EIO)
    TOOL_FI_ERR(FI_E2BIG)
    TOOL_FI_ERR(FI_EBADF)
    TOOL_FI_ERR(FI_EAGAIN)
    TOOL_FI_ERR(FI_ENOMEM)
    TOOL_FI_ERR(FI_EACCES)
    TOOL_FI_ERR(FI_EFAULT)
    TOOL_FI_ERR(FI_EBUSY)
    TOOL_FI_ERR(FI_ENODEV)
    TOOL_FI_ERR(FI_EINVAL)
    TOOL_FI_ERR(FI_EMFILE)
    TOOL_FI_ERR(FI_ENOSPC)
    TOOL_FI_ERR(FI_ENOSYS)
    TOOL_FI_ERR(FI_ENOMSG)
    TOOL_FI_ERR(FI_ENODATA)
    TOOL_FI_ERR(FI_EOVERFLOW)
    TOOL_FI_ERR(FI_EMSGSIZE)
    TOOL_FI_ERR(FI_ENOPROTOOPT)
    TOOL_FI_ERR(FI_EOPNOTSUPP)
    TOOL_FI_ERR(FI_EADDRINUSE)
    TOOL_FI_ERR(FI_EADDRNOTAVAIL)
    TOOL_FI_ERR(FI_ENETDOWN)
    TOOL_FI_ERR(FI_ENETUNREACH)
    TOOL_FI_ERR(FI_ECONNABORTED)
    TOOL_FI_ERR(FI_ECONNRESET)
    TOOL_FI_ERR(FI_ENOBUFS)
    TOOL_FI_ERR(FI_EISCONN)
    TOOL_FI_ERR(FI_ENOTCONN)
    TOOL_FI_ERR(FI_ESHUTDOWN)
    TOOL_FI_ERR(FI_ETIMEDOUT)
    TOOL_FI_ERR(FI_ECONNREFUSED)
    TOOL_FI_ERR(FI_EHOSTDOWN)
    TOOL_FI_ERR(FI_EHOSTUNREACH)
    TOOL_FI_ERR(FI_EALREADY)
    TOOL_FI_ERR(FI_EINPROGRESS)
    TOOL_FI_ERR(FI_EREMOTEIO)
    TOOL_FI_ERR(FI_ECANCELED)
    TOOL_FI_ERR(FI_EKEYREJECTED)
    TOOL_FI_ERR(FI_EOTHER)
    TOOL_FI_ERR(FI_ETOOSMALL)
    TOOL_FI_ERR(FI_EOPBADSTATE)
    TOOL_FI_ERR(FI_EAVAIL)
    TOOL_FI_ERR(FI_EBADFLAGS)
    TOOL_FI_ERR(FI_ENOEQ)
    TOOL_FI_ERR(FI_EDOMAIN)
    TOOL_FI_ERR(FI_ENOCQ)
    TOOL_FI_ERR(FI_ECRC)
    TOOL_FI_ERR(FI_ETRUNC)
    TOOL_FI_ERR(FI_ENOKEY)
    TOOL_FI_ERR(FI_ENOAV)
    TOOL_FI_ERR(FI_EOVERRUN)
    TOOL_FI_ERR(FI_ENORX)
    default:
      return "FI_E?";
  }
#undef TOOL_FI_ERR
}

#endif
